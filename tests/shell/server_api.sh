#!/usr/bin/env bash
# Black-box test of the server's API with tests/shell/fake_worker.py as the worker, so it
# runs in seconds and can make workers fail on purpose: DIGITS's curl workflow (login,
# dataset, status, JSON, model, metrics, delete), sweeps, abort, clone, resume, ownership,
# worker crashes, path roots, malformed input and server-sent events.
. "$(dirname "$0")/server_lib.bash"
need_server

fake_images 8
mkdir -p "$T/outside/x"
ln -s "$T/outside" "$IMG/escape"
FAKE_STEP=0.005 srv_start --worker "$FAKE" --data-root "$IMG" --abort-grace 1 --max-upload 200K

# ---- home, login ------------------------------------------------------------------------
http GET /index/json
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"datasets\"]")" = "[]" ] && [ -n "$(jv "d[\"version\"]")" ]' "index/json answers an empty list"
http GET /index.json
check '[ "$CODE" = 200 ]' "the older .json suffix works"
JAR=$T/none.txt
http POST /datasets/images/classification/json -F dataset_name=x -F folder_train="$IMG"
check '[ "$CODE" = 401 ] && [ "$(jv "d[\"error\"][\"type\"]")" = Unauthorized ]' "creating without login is 401 in the error shape"
login_as "Fred"
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"username\"][0]")" ]' "an upper-case username is refused"
login_as fred
check '[ "$CODE" = 302 ] && grep -q "username.*fred" "$JAR"' "login sets the username cookie"
http GET /login
check '[ "$(jv "d[\"username\"]")" = fred ]' "GET /login tells who is logged in"

# ---- dataset ------------------------------------------------------------------------------
http POST /datasets/images/classification/json -F folder_train=/etc -F resize_width=abc -F folder_pct_val=150
check '[ "$CODE" = 400 ] && [ "$(jv "sorted(d[\"errors\"])")" = "[\"dataset_name\", \"folder_pct_val\", \"folder_train\", \"resize_width\"]" ]' \
    "form errors name every bad field"
check 'jv "d[\"errors\"][\"folder_train\"][0]" | grep -q "outside the folders"' "a folder outside the roots is refused with the roots named"
http POST /datasets/images/classification/json -F dataset_name=x -F folder_train="$IMG/escape"
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"folder_train\"][0]" | grep -q outside' "a symlink out of the roots is refused"
http POST /datasets/images/classification/json -F dataset_name=x -F folder_train="$IMG/../outside"
check '[ "$CODE" = 400 ]' "a .. out of the roots is refused"
http POST /datasets/images/classification/json -F dataset_name=ds1 -F folder_train="$IMG/train" -F resize_channels=1 \
    -F resize_width=28 -F resize_height=28 -F folder_pct_val=25 -F group_name=g1
check '[ "$CODE" = 200 ] && [ -n "$(jv "d[\"id\"]")" ]' "dataset created (multipart form)"
DS=$(jv 'd["id"]')
check 'wait_status "$DS" Done 120' "dataset reaches Done"
http GET "/datasets/$DS/status"
check '[ "$(jv "d[\"type\"]")" = "Image Classification Dataset" ] && [ "$(jv "d[\"error\"]")" = null ]' "dataset status has DIGITS's fields"
http GET "/datasets/$DS/json"
check '[ "$(jv "d[\"ParseFolderTasks\"][0][\"label_count\"]")" = 2 ] && [ "$(jv "d[\"CreateDbTasks\"][0][\"image_width\"]")" = 28 ]' \
    "dataset JSON has ParseFolderTasks and CreateDbTasks"
check '[ "$(jv "[h[0] for h in d[\"status_history\"]]")" = "[\"Initialized\", \"Waiting\", \"Running\", \"Done\"]" ]' \
    "status history goes Initialized, Waiting, Running, Done"
http GET "/datasets/$DS.json"
check '[ "$CODE" = 200 ]' "/datasets/<id>.json works"
http POST /datasets/images/classification/json -H 'Content-Type: application/json' \
    -d "{\"dataset_name\": \"ds2\", \"folder_train\": \"$IMG/train\", \"resize_width\": 16, \"resize_height\": 16}"
check '[ "$CODE" = 200 ]' "dataset created from a JSON body"
DS2=$(jv 'd["id"]')
http POST /datasets/images/classification/json --data-urlencode "dataset_name=ds3" --data-urlencode "folder_train=$IMG/train"
check '[ "$CODE" = 200 ]' "dataset created from an urlencoded body"
DS3=$(jv 'd["id"]')
# text lists, uploaded: DIGITS's form with its defaults (textfile_shuffle among them)
printf 'cat/1.png 0\ndog/1.png 1\n' >"$T/train.txt"
printf 'cat\ndog\n' >"$T/labels.txt"
http POST /datasets/images/classification/json -F method=textfile -F "textfile_train_images=@$T/train.txt" \
    -F "textfile_labels_file=@$T/labels.txt" -F textfile_train_folder="$IMG/train" -F dataset_name=lists \
    -F resize_channels=1 -F resize_width=28 -F resize_height=28
check '[ "$CODE" = 200 ]' "a text-list dataset of uploaded lists is accepted"
DSL=$(jv 'd["id"]')
DSL_CFG=$T/data/jobs/$DSL/dataset.json
check 'cmp -s "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"textfile_train\"])" "$DSL_CFG")" "$T/train.txt" && cmp -s "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"textfile_labels\"])" "$DSL_CFG")" "$T/labels.txt"' \
    "the uploaded lists are saved in the job folder and named in dataset.json"
http POST /datasets/images/classification/json -F method=textfile -F "textfile_train_images=@$T/train.txt" \
    -F "textfile_labels_file=@$T/labels.txt" -F dataset_name=lists -F textfile_shuffle=maybe
check '[ "$CODE" = 200 ]' "textfile_shuffle is a checkbox: any value is accepted"
DSL2=$(jv 'd["id"]')
check 'wait_status "$DSL" Done 120 && wait_status "$DSL2" Done 20' "the text-list datasets run"

# ---- model ----------------------------------------------------------------------------------
fake_net plain > "$T/net.prototxt"
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F train_epochs=3 -F model_name=m1 -F learning_rate=0.02 -F lr_policy=multistep -F lr_multistep_values=30,60 \
    -F batch_size=8 -F random_seed=7
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"dataset_id\"]")" = "$DS" ]' "model created"
M1=$(jv 'd["id"]')
check 'wait_status "$M1" Done 30' "model reaches Done"
http GET "/models/$M1/json"
check '[ "$(jv "d[\"snapshots\"]")" = "[1, 2, 3]" ]' "model JSON lists snapshots 1, 2, 3"
check '[ "$(jv "d[\"train\"][\"lr_policy\"][\"steps\"]")" = "30,60" ] && [ "$(jv "d[\"train\"][\"batch_size\"]")" = 8 ]' "solver fields reach train.json"
TRAIN_JSON=$(jv 'd["directory"]')/train.json
# a model that names no GPU trains on the next free one, or on the CPU where there is none
http GET /hardware/json
WANT_BACKEND=$([ "$(jv 'd["resources"]["gpus"]["total"]')" = 0 ] && echo cpu || echo cuda)
check 'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(not (c[\"random_seed\"]==7 and c[\"learning_rate\"]==0.02 and c[\"backend\"]==\"auto\" and c[\"lr_policy\"][\"policy\"]==\"multistep\"))" "$TRAIN_JSON"' \
    "train.json holds the mapped fields and the form's backend (auto)"
check 'tail -n 1 "$(dirname "$TRAIN_JSON")/fake_args.log" | python3 -c "import json,sys; a=json.load(sys.stdin); sys.exit(a[-2:] != [\"--backend\", sys.argv[1]] or \"--resume\" in a)" "$WANT_BACKEND"' \
    "the worker is given the $WANT_BACKEND backend ($(tail -n 1 "$(dirname "$TRAIN_JSON")/fake_args.log"))"
check 'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(c[\"data_parallel\"] is not True)" "$TRAIN_JSON"' \
    "data_parallel defaults to true in train.json"
http GET "/models/$M1/metrics/json"
check '[ "$(jv "len([m for m in d[\"metrics\"] if m[\"name\"]==\"loss\" and m[\"phase\"]==\"train\"])")" = 30 ]' "every train loss line is stored (30)"
http GET /completed_jobs/json
check '[ "$(jv "[m for m in d[\"models\"] if m[\"id\"]==\"$M1\"][0][\"accuracy (val) last\"]")" = 0.8 ]' "completed_jobs has accuracy (val) last"
check 'jv "d[\"model_output_fields\"]" | grep -q "loss (train) min"' "model_output_fields lists loss (train) min"
check '[ "$(jv "[m for m in d[\"models\"] if m[\"id\"]==\"$M1\"][0][\"progress\"]")" = 100 ]' "completed_jobs has progress"
http GET "/files/$M1/train.json"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"epochs\"]")" = 3 ]' "/files/ serves a job file"

# batch_size=auto, precision, early stopping, flips and shuffle reach train.json; batch
# and advice lines show
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F train_epochs=1 -F model_name=auto -F batch_size=auto -F precision=fp16 -F early_stopping_patience=3 \
    -F aug_flip=fliplrud -F shuffle=false
MAUTO=$(jv 'd["id"]')
check 'wait_status "$MAUTO" Done 120' "a batch_size=auto model trains"
http GET "/models/$MAUTO/json"
check '[ "$(jv "d[\"train\"][\"batch_size\"]")" = auto ] && [ "$(jv "d[\"train\"][\"precision\"]")" = fp16 ] && [ "$(jv "d[\"train\"][\"early_stopping_patience\"]")" = 3 ]' \
    "batch_size auto, precision and early_stopping_patience reach train.json"
check '[ "$(jv "d[\"train\"][\"flip\"]")" = fliplrud ] && [ "$(jv "d[\"train\"][\"shuffle\"]")" = false ] && [ "$(jv "\"use_mirror\" in d[\"train\"]")" = false ]' \
    "aug_flip and shuffle reach train.json as flip and shuffle (no use_mirror: the network's mirror is kept)"
check '[ "$(jv "d[\"batch\"][\"effective\"]")" = 8 ] && [ "$(jv "d[\"advice\"][\"limit\"]")" = data ]' \
    "the worker's batch and advice lines show in the model JSON"
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F model_name=x -F precision=fp8
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"precision\"][0]")" ]' "an unknown precision is a form error"
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F model_name=x -F aug_flip=sideways
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"aug_flip\"][0]")" ]' "an unknown aug_flip is a form error"

# use_mirror: DIGITS's checkbox value and true turn mirroring on, false (a JSON false
# here) turns it off, default keeps the network's transform_param (no key in train.json)
mirror_model() { # name, then curl's body arguments; sets MID and the train.json path TJ
    http POST /models/images/classification/json "$@"
    MID=$(jv 'd["id"]')
    TJ=
    [ "$CODE" = 200 ] || return 1
    http GET "/models/$MID/json"
    TJ="$(jv 'd["directory"]')/train.json"
}
train_mirror() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("use_mirror", "absent"))' "$TJ"; }
for want in y:True true:True default:absent ; do
    mirror_model -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" -F train_epochs=1 \
        -F model_name="mirror ${want%%:*}" -F use_mirror="${want%%:*}"
    check '[ -n "$TJ" ] && [ "$(train_mirror)" = "${want#*:}" ] && wait_status "$MID" Done 120' \
        "use_mirror=${want%%:*} writes use_mirror ${want#*:} into train.json"
    http DELETE "/models/$MID"
done
python3 -c 'import json, sys
print(json.dumps({"dataset": sys.argv[1], "method": "custom", "custom_network": open(sys.argv[2]).read(),
                  "train_epochs": 1, "model_name": "nomirror", "use_mirror": False}))' \
    "$DS" "$T/net.prototxt" >"$T/nomirror.json"
mirror_model -H 'Content-Type: application/json' --data-binary "@$T/nomirror.json"
check '[ -n "$TJ" ] && [ "$(train_mirror)" = False ] && wait_status "$MID" Done 120' \
    "a JSON \"use_mirror\": false writes use_mirror false into train.json"
http DELETE "/models/$MID"
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F model_name=x -F use_mirror=sometimes
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"use_mirror\"][0]" | grep -q sometimes' "an unknown use_mirror is a form error"

# data_parallel=false (a JSON false here) reaches train.json; a model that names no GPU
# asks for the CPU on a server without GPUs (one GPU on a server with some)
http GET /hardware/json
NGPU=$(jv 'd["resources"]["gpus"]["total"]')
python3 -c 'import json, sys
print(json.dumps({"dataset": sys.argv[1], "method": "custom", "custom_network": open(sys.argv[2]).read(),
                  "train_epochs": 1, "model_name": "nodp", "data_parallel": False}))' \
    "$DS" "$T/net.prototxt" >"$T/nodp.json"
http POST /models/images/classification/json -H 'Content-Type: application/json' --data-binary "@$T/nodp.json"
check '[ "$CODE" = 200 ]' "a model with data_parallel false is created"
MNODP=$(jv 'd["id"]')
http GET "/models/$MNODP/json"
check 'python3 -c "import json,sys; c=json.load(open(sys.argv[1])); sys.exit(c[\"data_parallel\"] is not False)" "$(jv "d[\"directory\"]")/train.json"' \
    "its train.json says \"data_parallel\": false"
check '[ "$(jv "d[\"train\"][\"data_parallel\"]")" = false ] && [ "$(jv "d[\"resources\"] == ({\"kind\": \"cpu\"} if $NGPU == 0 else {\"kind\": \"gpu\", \"count\": 1, \"data_parallel\": False})")" = true ]' \
    "its JSON shows data_parallel false and a CPU request on a server without GPUs ($(jv 'd["resources"]'))"
check 'wait_status "$MNODP" Done 120' "it trains"
# more GPUs than the server has is a form error naming the field, the count and why, not a CPU job
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F model_name=toomany -F select_gpu_count=$((NGPU + 1))
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"select_gpu_count\"][0]" | grep -q "^select_gpu_count: $((NGPU + 1)) GPUs\? asked for, this server has $NGPU ([^)]"' \
    "a GPU count beyond the server's is refused: $(jv 'd["errors"]["select_gpu_count"][0]')"

# sweep: two learning rates make two jobs
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/net.prototxt" \
    -F train_epochs=1 -F model_name=sweep -F learning_rate=0.01,0.02
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"jobs\"])")" = 2 ] && [ "$(jv "d[\"jobs\"][1][\"name\"]")" = "sweep learning_rate:0.02" ]' \
    "a learning rate sweep answers {jobs: [2]}"

# model errors
http POST /models/images/classification/json -F dataset=nope -F method=standard -F standard_networks=vgg -F train_epochs=0
check '[ "$CODE" = 400 ] && [ "$(jv "sorted(d[\"errors\"])")" = "[\"dataset\", \"model_name\", \"standard_networks\", \"train_epochs\"]" ]' \
    "model form errors name every bad field"
http POST /models/images/classification/json -F dataset="$DS" -F model_name=x -F method=custom -F custom_network="x" -F select_gpus="$NGPU"
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"select_gpus\"][0]" | grep -q "^select_gpus: GPU $NGPU does not exist here: this server has $NGPU GPU"' \
    "asking for a GPU this server lacks is refused: $(jv 'd["errors"]["select_gpus"][0]')"

# ---- abort, resume, clone --------------------------------------------------------------------
fake_net fake:slow > "$T/slow.prototxt"
post_model "$T/slow.prototxt" slow 3
MS=$MODEL
check 'wait_status "$MS" Running 120' "slow model runs"
check 'wait_until 120 "has_snapshot $MS"' "the slow model writes its first snapshot"
http POST "/models/$MS/abort"
check '[ "$CODE" = 200 ]' "abort answers 200"
check 'wait_status "$MS" Aborted 120' "aborted model shows Aborted"
http POST "/models/$MS/abort"
check '[ "$CODE" = 403 ]' "aborting a stopped job is refused"
http GET "/models/$MS/json"
SNAPS_BEFORE=$(jv 'd["snapshots"]')
METRICS_BEFORE=$(jv 'd["metrics_count"]')
check '[ "$SNAPS_BEFORE" != "[]" ]' "the aborted job has a snapshot ($SNAPS_BEFORE)"
login_as bob
http POST "/models/$MS/resume"
check '[ "$CODE" = 403 ]' "only the owner may resume"
http DELETE "/models/$MS"
check '[ "$CODE" = 403 ]' "only the owner may delete"
http PUT "/jobs/$MS" -F job_name=mine
check '[ "$CODE" = 403 ]' "only the owner may rename"
http POST /abort_jobs -F "job_ids[]=$MS" -F "job_ids[]=nope"
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "1 job not found. 1 job not permitted to be aborted."' \
    "bulk abort reports DIGITS's counts"
login_as fred
http POST "/models/$MS/resume"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"resumed_from_epoch\"]")" -ge 1 ]' "resume answers the snapshot epoch"
check 'wait_status "$MS" Done 120' "the resumed job finishes"
http GET "/models/$MS/json"
check '[ "$(jv "d[\"snapshots\"]")" = "[1, 2, 3]" ]' "every snapshot epoch is there after resume"
http GET "/models/$MS/metrics/json?all=1"
check '[ "$(jv "len(d[\"metrics\"])")" -ge "$METRICS_BEFORE" ]' "no metric was lost by the resume"
check '[ "$(jv "len([m for m in d[\"metrics\"] if m[\"phase\"]==\"train\" and m[\"name\"]==\"loss\" and not m[\"superseded\"]])")" = 30 ]' \
    "the current train loss curve has one point per iteration"
http PUT "/jobs/$MS" -F job_name="slow renamed" -F job_notes="some notes"
check '[ "$CODE" = 200 ]' "the owner renames a job"
http GET "/models/$MS/json"
check '[ "$(jv "d[\"name\"]")" = "slow renamed" ] && [ "$(jv "d[\"notes\"]")" = "some notes" ]' "the new name and notes show"
http POST "/clone/$M1/json" -F model_name=m1clone
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = m1clone ]' "clone makes a new model with a posted field replaced"
MC=$(jv 'd["id"]')
check 'wait_status "$MC" Done 120' "the clone trains"
http GET "/clone/$DS/json"
check '[ "$(jv "d[\"fields\"][\"dataset_name\"]")" = ds1 ]' "GET clone answers the saved fields"
http POST /group -F group_name=G -F "job_ids[]=$M1" -F "job_ids[]=$MC"
check '[ "$CODE" = 200 ]' "group assigns a group"
http GET /completed_jobs/json
check '[ "$(jv "[m[\"group\"] for m in d[\"models\"] if m[\"id\"]==\"$MC\"][0]")" = G ]' "the group shows"

# ---- failures --------------------------------------------------------------------------------
fake_net fake:crash > "$T/crash.prototxt"
post_model "$T/crash.prototxt" crash 3
MX=$MODEL
check 'wait_status "$MX" Error 120' "a worker killed by a signal leaves its job in Error"
http GET "/models/$MX/json"
check 'jv "d[\"error\"]" | grep -q "signal 11" && jv "d[\"error\"]" | grep -q "segmentation fault coming"' \
    "the error names the signal and the worker's last lines"
http GET "/jobs/$MX/log/json?n=50"
check 'jv "[e[\"message\"] for e in d[\"log\"] if e[\"level\"]==\"stderr\"]" | grep -qF "segmentation fault coming ???"' \
    "a stderr line with bytes that are not UTF-8 is logged with them as '?'"
fake_net fake:error > "$T/err.prototxt"
post_model "$T/err.prototxt" err 1
ME=$MODEL
check 'wait_status "$ME" Error 120' "an error line leaves the job in Error"
http GET "/models/$ME/status"
check 'jv "d[\"message\"]" | grep -q "broken on purpose"' "its error line is the message"
fake_net fake:ignore_term > "$T/stubborn.prototxt"
post_model "$T/stubborn.prototxt" stubborn 50
MT=$MODEL
wait_status "$MT" Running 120
http POST "/models/$MT/abort"
check 'wait_status "$MT" Aborted 120' "a worker that ignores SIGTERM is killed after the grace period"

# ---- delete ----------------------------------------------------------------------------------
http DELETE "/datasets/$DS"
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "trains on it"' "a dataset in use cannot be deleted"
DIR_M1=$T/data/jobs/$M1
http DELETE "/models/$M1"
check '[ "$CODE" = 200 ] && [ "$BODY" = "Job deleted." ] && [ ! -d "$DIR_M1" ]' "delete removes the job and its folder"
http GET "/models/$M1/json"
check '[ "$CODE" = 404 ] && [ "$(jv "d[\"error\"][\"type\"]")" = NotFound ]' "a deleted job is 404"
http DELETE /jobs -F "job_ids[]=$DS2" -F "job_ids[]=$DS3" -F "job_ids[]=$DSL" -F "job_ids[]=$DSL2"
check '[ "$CODE" = 200 ] && [ "$BODY" = "Jobs deleted." ]' "DELETE /jobs deletes many"

# ---- bad input ----------------------------------------------------------------------------------
http GET /no/such/route
check '[ "$CODE" = 404 ] && [ "$(jv "d[\"error\"][\"type\"]")" = NotFound ]' "unknown route: 404 in the JSON error shape"
http DELETE /index/json
check '[ "$CODE" = 405 ]' "wrong method: 405"
http GET "/files/../cdigits.db"
check '[ "$CODE" = 404 ]' "/files/.. is refused"
http GET "/files/%2e%2e/cdigits.db"
check '[ "$CODE" = 404 ]' "/files/%2e%2e is refused"
ln -s /etc/passwd "$T/data/jobs/$MS/passwd"
http GET "/files/$MS/passwd"
check '[ "$CODE" = 404 ]' "/files/ refuses a symlink out of the jobs folder"
http POST /models/images/classification/json -H 'Content-Type: application/json' -d '{"model_name": '
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "Invalid JSON"' "broken JSON: 400"
http POST /models/images/classification/json -H 'Content-Type: application/json' -d '{"model_name": {"a": 1}}'
check '[ "$CODE" = 400 ]' "a nested JSON value: 400"
http POST /models/images/classification/json -H 'Content-Type: multipart/form-data' --data-binary 'garbage'
check '[ "$CODE" = 400 ]' "multipart without a boundary: 400"
http POST /models/images/classification/json -H 'Content-Type: multipart/form-data; boundary=XX' \
    --data-binary $'--XX\r\nContent-Disposition: form-data; name="model_name"\r\n\r\nabc'
check '[ "$CODE" = 400 ] || [ "$CODE" = 200 ]' "a truncated multipart body gets an answer ($CODE)"
head -c 300000 /dev/zero | tr '\0' a > "$T/big.txt"
# Expect: 100-continue makes curl wait for the answer to the headers: the server refuses
# the Content-Length before any body is read, and a client still sending a body the
# server will not read can lose the answer to the connection's reset
http POST /models/images/classification/json -H 'Expect: 100-continue' -F "custom_network=<$T/big.txt"
check '[ "$CODE" = 413 ]' "a body over --max-upload: 413"
http POST /models/images/classification/json -H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' \
    --data-binary "@$T/big.txt"
check '[ "$CODE" = 413 ]' "a chunked body over --max-upload: 413"
python3 - "$PORT" <<'PY' >"$T/burst.txt" 2>&1
import socket, sys
port = int(sys.argv[1])
bad = [
    b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n",
    b"POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=q\r\nContent-Length: 20\r\n\r\n--q\r\nbroken",
    b"POST /models/images/classification/json HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n{{{{{",
    b"GARBAGE\r\n\r\n",
    b"GET /index/json HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"\x00\x01\x02\x03" * 100,
]
for i in range(60):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s.sendall(bad[i % len(bad)])
        s.shutdown(socket.SHUT_WR)
        s.recv(1024)
    except OSError:
        pass
    s.close()
print("sent")
PY
http GET /index/json
check '[ "$CODE" = 200 ]' "after a burst of malformed requests the server still answers"

# ---- server-sent events ------------------------------------------------------------------------
post_model "$T/slow.prototxt" sse 1
MV=$MODEL
python3 - "$B" "$MV" "$T/data/jobs/$MV/fake_sent.log" >"$T/sse.txt" 2>&1 <<'PY'
import socket, sys, time, json, urllib.parse
base, job, sent_log = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(base)
s = socket.create_connection((u.hostname, u.port), timeout=20)
s.sendall(("GET /jobs/%s/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n" % job).encode())
buf, seq, kinds, done = b"", [], set(), False
end = time.time() + 30
while time.time() < end and not done:
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
    while b"\n\n" in buf:
        ev, buf = buf.split(b"\n\n", 1)
        name, data = None, None
        for line in ev.decode(errors="replace").splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        if not name or data is None:
            continue
        kinds.add(name)
        d = json.loads(data)
        if name == "metric" and d["phase"] == "train" and d["name"] == "loss":
            seq.append(d["iteration"])
        if name == "status" and d.get("status") in ("Done", "Error", "Aborted"):
            done = True
sent = set()
for line in open(sent_log):
    it, phase, name, t = line.split()
    if phase == "train":
        sent.add(int(it))
# the stream starts after what its first event shows: from the first metric it
# carries, every train loss the worker printed arrives, once and in order
first = seq[0] if seq else None
expected = sorted(i for i in sent if first is not None and i >= first)
print("kinds", " ".join(sorted(kinds)))
print("metrics", len(set(seq)))
print("complete", int(bool(expected) and seq == expected))
PY
check 'grep -q "kinds.*metric.*progress.*status" "$T/sse.txt"' "the job stream carries status, progress and metric events"
check '[ "$(awk "/^metrics/ {print \$2}" "$T/sse.txt")" -ge 5 ]' "metric events arrived ($(grep ^metrics "$T/sse.txt"))"
check 'grep -q "^complete 1" "$T/sse.txt"' "from the first, every train metric arrives once and in order"
check 'sse_until /events "$T/home.txt" "event: gpus"' "the home stream starts with the GPU counts"

http GET /browse/json
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"path\"]")" = null ] && [ "$(jv "len(d[\"dirs\"])")" = 1 ]' "browse without a path lists the roots"
http GET "/browse/json?path=$IMG"
check '[ "$(jv "[x[\"name\"] for x in d[\"dirs\"]]")" = "[\"train\"]" ] && [ "$(jv "d[\"parent\"]")" = null ]' \
    "browse lists sub-folders, not the symlink out of the roots"
http GET "/browse/json?path=$IMG/train/cat"
check '[ "$(jv "d[\"images\"]")" = 8 ] && [ "$(jv "d[\"parent\"]")" = "$(cd "$IMG/train" && pwd -P)" ] && [ "$(jv "d[\"sample\"]")" = "$(cd "$IMG/train/cat" && pwd -P)/1.png" ]' \
    "browse counts images, names the first as a sample and names the parent"
http GET "/browse/json?path=/etc"
check '[ "$CODE" = 400 ]' "browse refuses a folder outside the roots"

http GET /hardware/json
check '[ "$CODE" = 200 ] && [ "$(jv "isinstance(d[\"gpus\"], list) and isinstance(d[\"nvml\"][\"loaded\"], bool) and (d[\"nvml\"][\"reason\"] == \"\" if d[\"nvml\"][\"loaded\"] else d[\"gpus\"] == [] and len(d[\"nvml\"][\"reason\"]) > 0)")" = true ] && [ "$(jv "d[\"resources\"][\"cpu_slots\"][\"total\"]")" = 1 ]' \
    "hardware/json: a list of GPUs, and without NVML an empty one with the reason ($(jv 'd["nvml"]'))"
check '[ "$(jv "(s := d[\"server\"]) and 1 << 20 < s[\"resident_bytes\"] < 1 << 30 and 0 < s[\"sqlite_bytes\"] <= s[\"sqlite_peak_bytes\"] and s[\"heap_in_use_bytes\"] in (0, max(s[\"heap_in_use_bytes\"], s[\"sqlite_bytes\"]))")" = true ]' \
    "hardware/json: the server's memory: resident, heap (0 under AddressSanitizer), SQLite's share ($(jv 'd.get("server")'))"

http POST /models/visualize-lr -F lr_policy=step -F learning_rate=0.1 -F lr_step_size=50 -F lr_step_gamma=0.5
check '[ "$(jv "len(d[\"data\"][\"columns\"][0])")" = 102 ] && [ "$(jv "d[\"data\"][\"columns\"][0][100]")" = 0.05 ]' "visualize-lr draws the step policy"

http POST /models/visualize-lr -F lr_policy=multistep -F learning_rate=0.1,0.01 -F lr_multistep_values=10,5888888888888888888888,90 -F lr_multistep_gamma=0.5
check '[ "$CODE" = 400 ] && [[ "$BODY" == *lr_multistep_values* ]]' "visualize-lr refuses a step value outside 0-100, naming the field"
http POST /models/visualize-lr -F lr_policy=sigmoid -F learning_rate=0.1 -F lr_sigmoid_step=-1e300
check '[ "$CODE" = 400 ] && [[ "$BODY" == *lr_sigmoid_step* ]]' "visualize-lr refuses a sigmoid step outside 0-100, naming the field"
http POST /models/visualize-lr -F lr_policy=multistep -F learning_rate=0.1 -F lr_multistep_values=50,75 -F lr_multistep_gamma=0.5
check '[ "$CODE" = 200 ] && [ "$(jv "[d[\"data\"][\"columns\"][0][i] for i in (50, 51, 75, 76, 101)]")" = "[0.1, 0.05, 0.05, 0.025, 0.025]" ]' \
    "visualize-lr draws multistep: 0.1 up to 50%, 0.05 from 50%, 0.025 from 75% (label first) ($(jv "d.get(\"data\")" | head -c 200))"

http POST /logout
check '[ "$CODE" = 302 ]' "logout redirects"
srv_stop
check '[ "$SRV_RC" = 0 ]' "SIGTERM stops the server cleanly (exit $SRV_RC)"
finish
