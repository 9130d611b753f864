#!/usr/bin/env bash
# Crash and restart with the real worker: SIGKILL the server and its worker while a
# model trains (a crash of the machine: a worker that still runs is followed again
# instead, tests/shell/server_adopt.sh), start it again and check that nothing is lost
# (every metric stays, the job shows it was interrupted, no worker is left running),
# resume the job by hand and check that it finishes with a snapshot for every epoch and
# every earlier metric still there. Then kill both once more mid-run and let
# --resume-interrupted finish it alone.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
. "$(dirname "$0")/server_tiny_net.bash"
# 1000 epochs: long enough in iterations that a kill lands mid-run even on a fast machine,
# cheap per iteration; a snapshot every 25 epochs (SNAP)
restart_model 9 crashme 1000 25 tiny_net

# wait for the first snapshots on disk, then pull the plug on the server
nsnap() { ls "$JOBDIR" 2>/dev/null | grep -c '\.solverstate$'; }
# the resumes reach the worker as --resume: train.json stays as the server wrote it
TRAIN_SUM=$(sha256sum "$JOBDIR/train.json" | cut -d' ' -f1)
end=$((SECONDS + 120))
while [ $SECONDS -lt $end ] && [ "$(nsnap)" -lt 2 ]; do sleep 0.02; done
# read what the server has, then kill it at once (parse later: the run goes on meanwhile)
curl -s "$B/models/$M/metrics/json?all=1" >"$T/before.json"
curl -s "$B/models/$M/json" >"$T/job.json"
srv_kill9
# the worker dies with it
kill_worker() {
    KILLED=$1
    kill -KILL "$KILLED" 2>/dev/null
    wait_until 120 '[ ! -e /proc/$KILLED/stat ] || [ "$(cut -d" " -f3 /proc/$KILLED/stat 2>/dev/null)" = Z ]'
}
cp "$T/job.json" "$T/body"
kill_worker "$(jv 'd["tasks"][0]["pid"]')"
cp "$T/before.json" "$T/body"
ids_to() { jv '"\n".join(str(m["id"]) for m in d["metrics"])' >"$1"; }
subset() { python3 -c 'import sys; a=set(open(sys.argv[1]).read().split()); b=set(open(sys.argv[2]).read().split()); sys.exit(not (a and a <= b))' "$1" "$2"; }
ids_to "$T/before.ids"
BEFORE_N=$(jv 'len(d["metrics"])')
cp "$T/job.json" "$T/body"
WORKER_PID=$(jv 'd["tasks"][0]["pid"]')
check '[ "$(jv "d[\"status\"]")" = Running ] && [ "$BEFORE_N" -gt 0 ]' "the model ran with $BEFORE_N metrics when the server was killed"

srv_start --data-root "$T/images" --abort-grace 3
check '! kill -0 "$WORKER_PID" 2>/dev/null || ! tr "\0" " " </proc/$WORKER_PID/cmdline 2>/dev/null | grep -q cdigits-worker' \
    "no orphan worker is left running after the restart"
http GET "/models/$M/json"
check '[ "$(jv "d[\"status\"]")" = Aborted ] && [ "$(jv "d[\"interrupted\"]")" = true ]' "the job shows it was interrupted"
check 'jv "d[\"status_history\"][-1][2]" | grep -q Interrupted' "its history says why"
http GET "/models/$M/metrics/json?all=1"
check '[ "$(jv "len(d[\"metrics\"])")" -ge "$BEFORE_N" ]' "every metric is still there after the crash"
ids_to "$T/after1.ids"
check 'subset "$T/before.ids" "$T/after1.ids"' "the metric rows kept their ids"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"running\"]")" = 0 ] && [ "$(jv "d[\"resources\"][\"cpu_slots\"][\"used\"]")" = 0 ]' "no resource is held by the dead job"

http POST "/models/$M/resume"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"resumed_from_epoch\"] > 0")" = true ]' "resume from the last snapshot (epoch $(jv 'd.get("resumed_from_epoch")'))"
check 'wait_status "$M" Running 120' "the resumed job runs"
n0=$(nsnap)
end=$((SECONDS + 60))
while [ $SECONDS -lt $end ] && [ "$(nsnap)" -le "$n0" ]; do sleep 0.02; done
# the second plug-pull: --resume-interrupted must finish it without help
http GET "/models/$M/json"
srv_kill9
kill_worker "$(jv 'd["tasks"][0]["pid"]')"
srv_start --data-root "$T/images" --abort-grace 3 --resume-interrupted
check 'wait_status "$M" Done 180' "--resume-interrupted resumes and finishes the job"
http GET "/models/$M/json"
# every interval's snapshot, plus the ones a SIGTERM made when the orphans were stopped
check '[ "$(jv "set(range($SNAP, $EPOCHS + 1, $SNAP)) <= set(d[\"snapshots\"])")" = true ]' \
    "a snapshot for every snapshot interval ($(jv 'len(d["snapshots"])') snapshots, $((EPOCHS / SNAP)) intervals)"
check '[ "$(jv "d[\"snapshots\"] == sorted(set(d[\"snapshots\"]))")" = true ]' "snapshot epochs are distinct and ordered"
check '[ "$(jv "d[\"tasks\"][0][\"attempt\"]")" = 3 ]' "three attempts are recorded"
http GET "/jobs/$M/log/json?n=100000"
check '[ "$(jv "len([l for l in d[\"log\"] if \"resuming from iteration\" in l[\"message\"]])")" -ge 1 ]' "the worker resumed from its solver state"
check '[ "$(sha256sum "$JOBDIR/train.json" | cut -d" " -f1)" = "$TRAIN_SUM" ] && python3 -c "import json,sys; sys.exit(json.load(open(sys.argv[1]))[\"resume\"] is not False)" "$JOBDIR/train.json"' \
    "the resumes leave train.json as the server wrote it (\"resume\": false)"
http GET "/models/$M/metrics/json?all=1"
ids_to "$T/after2.ids"
check 'subset "$T/before.ids" "$T/after2.ids"' "every metric from before the first crash is still there"
http GET "/models/$M/metrics/json"
check '[ "$(jv "len([m for m in d[\"metrics\"] if m[\"phase\"]==\"val\" and m[\"name\"]==\"accuracy\"])")" = $((EPOCHS / SNAP)) ]' \
    "the current curve has one val accuracy per validation interval"
check '[ "$(jv "sorted(m[\"iteration\"] for m in d[\"metrics\"] if m[\"phase\"]==\"val\" and m[\"name\"]==\"accuracy\") == sorted(set(m[\"iteration\"] for m in d[\"metrics\"] if m[\"phase\"]==\"val\" and m[\"name\"]==\"accuracy\"))")" = true ]' \
    "no epoch is counted twice in the current curve"
srv_stop
finish
