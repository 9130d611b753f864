#!/usr/bin/env bash
# A restarted server follows a worker that still trains: SIGKILL the server mid-training
# (the worker then held stopped until the new server follows it, so that it is still
# mid-run whatever the machine's speed), start it again, and check that it takes the same worker back: the job stays
# Running on its first attempt, the worker holds its CPU slot, what it printed while the
# server was down is stored, and the job goes on to Done with one Running in its status
# history (no Interrupted, no stop), no repeated iteration in any metric and every metric
# from before the crash kept.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
. "$(dirname "$0")/server_tiny_net.bash"
restart_model 5 adoptme 400 50 wide_net 36 12
check 'training "$M" 120' "the model trains"

http GET "/models/$M/json"
WORKER_PID=$(jv 'd["tasks"][0]["pid"]')
check '[ "$(jv "d[\"status\"]")" = Running ] && kill -0 "$WORKER_PID" 2>/dev/null' "worker $WORKER_PID runs"
# pull the plug on the server, then hold the worker (stopped before, it would get
# SIGHUP as its process group became orphaned)
curl -s "$B/models/$M/metrics/json?all=1" >"$T/before.json"
srv_kill9
kill -STOP "$WORKER_PID"
cp "$T/before.json" "$T/body"
jv '"\n".join(str(m["id"]) for m in d["metrics"])' >"$T/before.ids"
BEFORE_N=$(jv 'len(d["metrics"])')
check '[ "$BEFORE_N" -gt 0 ] && [ "$(cut -d" " -f3 /proc/$WORKER_PID/stat)" = T ] && ! grep -q "\"type\": *\"done\"" "$JOBDIR/worker.out.jsonl"' \
    "the worker outlives the server mid-run ($BEFORE_N metrics stored)"
OUT_SIZE=$(stat -c %s "$JOBDIR/worker.out.jsonl")

srv_start --data-root "$T/images" --abort-grace 3
http GET "/jobs/$M/log/json?n=100000"
check '[ "$(jv "len([l for l in d[\"log\"] if \"Following worker $WORKER_PID again\" in l[\"message\"]])")" = 1 ]' \
    "the restarted server follows worker $WORKER_PID again"
http GET "/models/$M/json"
check '[ "$(jv "d[\"status\"]")" = Running ] && [ "$(jv "d[\"tasks\"][0][\"pid\"]")" = "$WORKER_PID" ] && [ "$(jv "d[\"tasks\"][0][\"attempt\"]")" = 1 ]' \
    "the job stays Running on its first attempt with the same worker"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"running\"]")" = 1 ] && [ "$(jv "d[\"resources\"][\"cpu_slots\"][\"used\"]")" = 1 ]' \
    "the worker holds its CPU slot"
kill -CONT "$WORKER_PID"
# what it prints from here on reaches the store through the new server
check 'wait_until 120 "[ \$(stat -c %s \"$JOBDIR/worker.out.jsonl\") -gt $OUT_SIZE ]"' "the worker goes on printing"
check 'wait_status "$M" Done 300' "the job goes on to Done"
check '! kill -0 "$WORKER_PID" 2>/dev/null || ! tr "\0" " " </proc/$WORKER_PID/cmdline 2>/dev/null | grep -q cdigits-worker' \
    "the worker has exited"

http GET "/models/$M/json"
check '[ "$(jv "[h[0] for h in d[\"status_history\"]].count(\"Running\") == 1 and d[\"status_history\"][-1][0] == \"Done\" and not set(h[0] for h in d[\"status_history\"]) & {\"Aborted\", \"Error\"}")" = true ]' \
    "the status history has one Running and no stop ($(jv '[h[0] for h in d["status_history"]]'))"
check '[ "$(jv "any(\"nterrupt\" in (h[2] or \"\") for h in d[\"status_history\"])")" = false ] && [ "$(jv "d[\"interrupted\"]")" = false ]' \
    "nothing says it was interrupted"
check '[ "$(jv "d[\"tasks\"][0][\"attempt\"]")" = 1 ]' "one attempt is recorded"
check '[ "$(jv "set(range($SNAP, $EPOCHS + 1, $SNAP)) <= set(d[\"snapshots\"])")" = true ]' \
    "a snapshot for every interval ($(jv 'd["snapshots"]'))"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"running\"]")" = 0 ] && [ "$(jv "d[\"resources\"][\"cpu_slots\"][\"used\"]")" = 0 ]' \
    "its CPU slot is free once it is Done"

http GET "/models/$M/metrics/json?all=1"
jv '"\n".join(str(m["id"]) for m in d["metrics"])' >"$T/after.ids"
check 'python3 -c "import sys; a=set(open(sys.argv[1]).read().split()); b=set(open(sys.argv[2]).read().split()); sys.exit(not (a and a <= b))" "$T/before.ids" "$T/after.ids"' \
    "every metric from before the crash is still there"
check '[ "$(jv "len(d[\"metrics\"]) > $BEFORE_N")" = true ]' "metrics after the restart were stored ($(jv 'len(d["metrics"])') in all)"
check '[ "$(jv "sorted(set(m[\"attempt\"] for m in d[\"metrics\"]))")" = "[1]" ]' "every metric is of the first attempt"
# within each series, in the order stored, the iterations strictly increase
check '[ "$(jv "all(all(a < b for a, b in zip(s, s[1:])) for s in [[m[\"iteration\"] for m in sorted(d[\"metrics\"], key=lambda m: m[\"id\"]) if (m[\"phase\"], m[\"name\"]) == k] for k in set((m[\"phase\"], m[\"name\"]) for m in d[\"metrics\"])])")" = true ]' \
    "no iteration is repeated: each metric's iterations strictly increase"
check '[ "$(jv "len([m for m in d[\"metrics\"] if m[\"phase\"]==\"val\" and m[\"name\"]==\"accuracy\"])")" = $((EPOCHS / SNAP)) ]' \
    "one val accuracy per validation interval"
srv_stop
finish
