#!/usr/bin/env bash
# The scheduler through the API, with tests/shell/fake_worker.py and two pretend GPUs
# (--gpus 0,1): a model waits for its dataset and says so, GPU requests are all or
# nothing, a job asking for GPUs 0 and 1 waits until both are free, the worker is given
# the GPUs and the backend on its command line (--gpus, --backend) and a resume as
# --resume while the job's train.json stays as the server wrote it, a job without data
# parallelism asks for one GPU whatever the form selected, the home event stream
# announces jobs, and --url-prefix, --server-name and --log-file do what they say.
. "$(dirname "$0")/server_lib.bash"
need_server

mkdir -p "$T/img/a" "$T/img/b" "$T/slowimg/a" "$T/slowimg/b"
for i in $(seq 1 6); do touch "$T/img/a/$i" "$T/img/b/$i" "$T/slowimg/a/$i" "$T/slowimg/b/$i"; done
touch "$T/slowimg/fake_slow"
srv_start --worker "$FAKE" --data-root "$T" --gpus 0,1 --abort-grace 2 --url-prefix /digits \
    --server-name testbox --log-file "$T/cdigits.log"
B=$B/digits
fake_net fake:slow >"$T/slow.prototxt"
# worker_args DIR: the options of the worker's latest start in DIR (fake_worker.py logs them)
worker_args() { tail -n 1 "$1/fake_args.log" 2>/dev/null; }
sum_of() { sha256sum "$1" | cut -d' ' -f1; }

http GET /index/json
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"server_name\"]")" = testbox ]' "--url-prefix and --server-name"
CODE=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/index/json")
check '[ "$CODE" = 404 ]' "outside the prefix: 404"
check 'grep -q "listening on" "$T/cdigits.log"' "--log-file receives the log"

curl -s -N --max-time 120 "$B/events" >"$T/home.txt" 2>/dev/null &
HOME_PID=$!
check 'wait_until 120 "grep -q \"event: gpus\" \"$T/home.txt\""' "the home stream opens with the GPU counts"
login_as ann
http POST /datasets/images/classification/json -F dataset_name=slow -F folder_train="$T/slowimg"
DSLOW=$(jv 'd["id"]')
http POST /models/images/classification/json -F dataset="$DSLOW" -F method=custom -F custom_network="<$T/slow.prototxt" \
    -F train_epochs=1 -F model_name=early
MEARLY=$(jv 'd["id"]')
# waits_for ID TEXT: the scheduler has looked at the job and says it waits for TEXT
waits_for() {
    http GET "/models/$1/status"
    [ "$(jv 'd["status"]')" = Waiting ] && jv 'd.get("wait_reason") or ""' | grep -q "$2"
}
wait_until 120 'waits_for "$MEARLY" "Waiting for dataset"'
http GET "/models/$MEARLY/status"
check '[ "$(jv "d[\"status\"]")" = Waiting ] && jv "d[\"wait_reason\"]" | grep -q "Waiting for dataset"' \
    "a model on a running dataset waits and says why ($(jv 'd.get("wait_reason")'))"
check 'wait_status "$MEARLY" Running 120' "it starts once the dataset is Done"
http POST "/models/$MEARLY/abort"

http POST /datasets/images/classification/json -F dataset_name=fast -F folder_train="$T/img"
DS=$(jv 'd["id"]')
check 'wait_status "$DS" Done 120' "dataset Done"
make_model() { # name, extra curl args...
    post_model "$T/slow.prototxt" "$1" 20 "${@:2}"
    echo "$MODEL"
}
wait_status "$MEARLY" Aborted 120
MA=$(make_model a -F select_gpu_count=1)
check 'wait_status "$MA" Running 120' "A runs on one GPU"
MB=$(make_model b -F select_gpus=0,1)
wait_until 120 'waits_for "$MB" "GPU 0"'
http GET "/models/$MB/json"
DIRB=$(jv 'd["directory"]')
SUMB=$(sum_of "$DIRB/train.json")
http GET "/models/$MB/status"
check '[ "$(jv "d[\"status\"]")" = Waiting ] && jv "d[\"wait_reason\"]" | grep -q "GPU 0"' \
    "B (GPUs 0 and 1) waits for GPU 0 ($(jv 'd.get("wait_reason")'))"
MC=$(make_model c -F select_gpu_count=1)
check 'wait_status "$MC" Running 120' "C takes the other GPU meanwhile"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"gpus\"][\"free\"]")" = 0 ]' "no GPU free"
http POST "/models/$MA/abort"
wait_status "$MA" Aborted 120
wait_until 120 'waits_for "$MB" "GPU 1"'
http GET "/models/$MB/status"
check '[ "$(jv "d[\"status\"]")" = Waiting ] && jv "d[\"wait_reason\"]" | grep -q "GPU 1"' \
    "B takes nothing while GPU 1 is busy ($(jv 'd.get("wait_reason")'))"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"gpus\"][\"free\"]")" = 1 ]' "GPU 0 is free, not held by B"
http POST "/models/$MC/abort"
check 'wait_status "$MB" Running 120' "B runs once both are free"
http GET "/models/$MB/json"
check '[ "$(jv "d[\"tasks\"][0][\"gpus\"]")" = "[0, 1]" ]' "B holds GPUs 0 and 1"
check '[ "$(worker_args "$DIRB")" = "[\"--gpus\", \"0,1\", \"--backend\", \"cuda\"]" ]' \
    "the worker is given the GPUs and the CUDA backend ($(worker_args "$DIRB"))"
check '[ "$(sum_of "$DIRB/train.json")" = "$SUMB" ] && python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c[\"gpus\"]==[] and c[\"backend\"]==\"auto\" and c[\"resume\"] is False))" "$DIRB/train.json"' \
    "the GPU assignment leaves train.json as the server wrote it"
# the monitor's next sample after the worker started
monitored() { http GET /hardware/json; [ "$(jv 'len(d["workers"]) == 1 and d["workers"][0]["rss_bytes"] > 0')" = true ]; }
wait_until 120 monitored
http GET /hardware/json
check '[ "$(jv "len(d[\"workers\"])")" = 1 ] && [ "$(jv "d[\"workers\"][0][\"rss_bytes\"] > 0")" = true ]' \
    "the monitor reports the running worker's memory"
http POST /abort_jobs -F "job_ids[]=$MB"
check 'wait_status "$MB" Aborted 120' "bulk abort"

# data parallelism off: the job asks for one GPU, holds one, and the worker is told so
# (--gpus on its command line, data_parallel in train.json)
train_json() {
    worker_args "$(jv 'd["directory"]')" | python3 -c "import json,sys
a = json.load(sys.stdin)
c = json.load(open(sys.argv[1]))
assert c['gpus'] == [] and a[-2:] == ['--backend', 'cuda'], (c['gpus'], a)
print(json.dumps([[int(g) for g in a[a.index('--gpus') + 1].split(',')], c['data_parallel']]))" "$(jv 'd["directory"]')/train.json"
}
MD=$(make_model nodp -F select_gpu_count=2 -F data_parallel=false)
http GET "/models/$MD/json"
check '[ "$(jv "d[\"resources\"] == {\"kind\": \"gpu\", \"count\": 1, \"data_parallel\": False, \"selected\": {\"count\": 2}}")" = true ]' \
    "select_gpu_count=2 without data parallelism asks for 1 GPU and keeps the 2 selected ($(jv 'd.get("resources")'))"
check 'wait_status "$MD" Running 120' "it runs"
http GET "/models/$MD/json"
check '[ "$(jv "len(d[\"tasks\"][0][\"gpus\"])")" = 1 ] && [ "$(train_json)" = "[$(jv "d[\"tasks\"][0][\"gpus\"]"), false]" ]' \
    "it holds one GPU and its worker is given that GPU with data_parallel false ($(train_json))"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"gpus\"][\"free\"]")" = 1 ]' "the other GPU stays free"
http POST "/models/$MD/abort"
check 'wait_status "$MD" Aborted 120' "aborted"
MD=$(make_model dp -F select_gpu_count=2 -F data_parallel=true)
http GET "/models/$MD/json"
check '[ "$(jv "d[\"resources\"] == {\"kind\": \"gpu\", \"count\": 2, \"data_parallel\": True}")" = true ]' \
    "select_gpu_count=2 with data parallelism asks for 2 GPUs ($(jv 'd.get("resources")'))"
check 'wait_status "$MD" Running 120' "it runs"
http GET "/models/$MD/json"
check '[ "$(jv "d[\"tasks\"][0][\"gpus\"]")" = "[0, 1]" ] && [ "$(train_json)" = "[[0, 1], true]" ]' \
    "it holds both GPUs and its worker is given them with data_parallel true ($(train_json))"
http POST "/models/$MD/abort"
check 'wait_status "$MD" Aborted 120' "aborted"
MD=$(make_model nodplist -F select_gpus=1,0 -F data_parallel=false)
http GET "/models/$MD/json"
check '[ "$(jv "d[\"resources\"] == {\"kind\": \"gpu\", \"ids\": [1], \"data_parallel\": False, \"selected\": {\"ids\": [1, 0]}}")" = true ]' \
    "GPUs 1,0 without data parallelism keep only GPU 1 ($(jv 'd.get("resources")'))"
check 'wait_status "$MD" Running 120' "it runs"
http GET "/models/$MD/json"
check '[ "$(jv "d[\"tasks\"][0][\"gpus\"]")" = "[1]" ] && [ "$(train_json)" = "[[1], false]" ]' \
    "it holds GPU 1 only ($(train_json))"
http POST "/models/$MD/abort"
check 'wait_status "$MD" Aborted 120' "aborted"

http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/slow.prototxt" \
    -F model_name=toomany -F select_gpu_count=3
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"select_gpu_count\"][0]")" ]' "3 GPUs of 2 is a form error"
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/slow.prototxt" \
    -F model_name=twice -F select_gpus=0,0
check '[ "$CODE" = 400 ] && [ "$(jv "d[\"errors\"][\"select_gpus\"][0]")" = "GPU 0 is selected twice; select each GPU once" ]' \
    "the same GPU twice is a form error ($(jv 'd.get("errors")'))"
wait_until 120 'grep -q "event: job_added" "$T/home.txt"'
kill "$HOME_PID" 2>/dev/null
wait "$HOME_PID" 2>/dev/null
check 'grep -q "event: job_added" "$T/home.txt" && grep -q "event: gpus" "$T/home.txt"' "the home stream announces jobs and GPUs"

# a clean stop while a model trains: the worker saves its state, the job is resumable,
# and --resume-interrupted finishes it after the restart
post_model "$T/slow.prototxt" stopme 3
MS=$MODEL
check 'wait_status "$MS" Running 120' "a model runs"
check 'wait_until 120 "has_snapshot $MS"' "it is past its first snapshot"
DIRS=$(jv 'd["directory"]')
SUMS=$(sum_of "$DIRS/train.json")
# given_gpus [--resume]: the options the worker should have for the GPUs of the model
# in the last reply
given_gpus() { jv "[${1:+\"$1\", }'--gpus', ','.join(map(str, d['tasks'][0]['gpus'])), '--backend', 'cuda']"; }
check '[ "$(worker_args "$DIRS")" = "$(given_gpus)" ]' \
    "its first attempt is given its GPU and no --resume ($(worker_args "$DIRS"))"
srv_stop
check '[ "$SRV_RC" = 0 ]' "SIGTERM stops the server cleanly while a model trains"
srv_start --worker "$FAKE" --data-root "$T" --gpus 0,1 --url-prefix /digits --resume-interrupted
B=$B/digits
check 'wait_status "$MS" Done 120' "the interrupted model resumes by itself and finishes"
http GET "/models/$MS/json"
check '[ "$(jv "d[\"snapshots\"]")" = "[1, 2, 3]" ] && [ "$(jv "d[\"tasks\"][0][\"attempt\"]")" = 2 ]' \
    "its snapshots are all there after two attempts"
check '[ "$(jv "[h[0] for h in d[\"status_history\"]].count(\"Aborted\")")" = 1 ]' "its history shows the interruption"
check '[ "$(worker_args "$DIRS")" = "$(given_gpus --resume)" ] && [ "$(wc -l <"$DIRS/fake_args.log")" = 2 ]' \
    "its second attempt is given --resume ($(worker_args "$DIRS"))"
check '[ "$(sum_of "$DIRS/train.json")" = "$SUMS" ] && python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"resume\"] is not False)" "$DIRS/train.json"' \
    "the resume leaves train.json as the server wrote it"
srv_stop
finish
