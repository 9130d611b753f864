#!/usr/bin/env bash
# Worker faults with the real worker, each ending in a clear job state that names the
# cause while the server goes on serving:
#   - killed as the kernel's out-of-memory killer kills (SIGKILL from outside): Error,
#     naming signal 9 and the likely OOM kill;
#   - hung (SIGSTOP: no output at all) past --worker-timeout: Error, saying it hung;
#   - a full disk while snapshotting (a small tmpfs under the jobs folder; without the
#     right to mount one, a file size limit on the server and so its workers): Error
#     naming the disk (or the limit).
. "$(dirname "$0")/server_lib.bash"
. "$(dirname "$0")/server_tiny_net.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
MOUNTED=""
cleanup_all() {
    srv_cleanup_mounted
}
srv_cleanup_mounted() {
    if [ -n "$SRV_PID" ]; then
        kill -TERM "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
        SRV_PID=""
    fi
    pkill_workers
    [ -n "$MOUNTED" ] && umount "$MOUNTED" 2>/dev/null
    MOUNTED=""
    srv_cleanup
}
trap cleanup_all EXIT

make_pngs "$T/images" --classes 3 --per-class 8 --size 32 --seed 5
wide_net 8 6 >"$T/wide.prototxt"

new_dataset() {
    http POST /datasets/images/classification/json -F folder_train="$T/images" -F resize_channels=1 \
        -F resize_width=32 -F resize_height=32 -F folder_pct_val=25 -F dataset_name="$1"
    DS=$(jv 'd["id"]')
    wait_status "$DS" Done 120
}
new_model() { # name epochs snapshot_interval
    http POST /models/images/classification/json -F method=custom -F custom_network="<$T/wide.prototxt" \
        -F train_epochs="$2" -F snapshot_interval="$3" -F val_interval="$3" -F model_name="$1" -F dataset="$DS" \
        -F lr_policy=fixed -F learning_rate=0.01
    M=$(jv 'd["id"]')
    wait_status "$M" Running 120
}
worker_pid() {
    local pid="" end=$((SECONDS + 120))
    while [ $SECONDS -lt $end ]; do
        http GET "/models/$1/json"
        pid=$(jv 'd["tasks"][0]["pid"]')
        [ -n "$pid" ] && [ "$pid" != None ] && [ "$pid" != null ] && break
        sleep 0.1
    done
    echo "$pid"
}
serving() {
    http GET /index/json
    [ "$CODE" = 200 ]
}

# ---- the out-of-memory killer, and a hung worker -----------------------------------------------------
srv_start --data-root "$T/images" --abort-grace 2 --worker-timeout 4
login_as fred
check 'new_dataset faults' "a dataset is Done"

new_model oom 100000 1000
check '[ -n "$M" ]' "a long training job runs"
PID=$(worker_pid "$M")
training "$M"
kill -KILL "$PID"
wait_status "$M" Error 120
http GET "/models/$M/json"
MSG=$(jv 'd["error"]')
check '[ "$(jv "d[\"status\"]")" = Error ] && grep -q "signal 9 (SIGKILL)" <<<"$MSG" && grep -q "out-of-memory" <<<"$MSG"' \
    "a worker killed by SIGKILL ends in Error naming the signal and a likely OOM kill: ${MSG:0:160}"
check 'serving' "the server goes on serving"

new_model hang 100000 1000
PID=$(worker_pid "$M")
training "$M"
kill -STOP "$PID"
t0=$SECONDS
wait_status "$M" Error 120
http GET "/models/$M/json"
MSG=$(jv 'd["error"]')
check '[ "$(jv "d[\"status\"]")" = Error ] && grep -q "hung" <<<"$MSG" && grep -q -- "--worker-timeout" <<<"$MSG"' \
    "a worker silent past --worker-timeout ends in Error saying it hung ($((SECONDS - t0)) s): ${MSG:0:160}"
check '! kill -0 "$PID" 2>/dev/null' "the hung worker is gone"
check 'serving' "the server goes on serving"
http GET /hardware/json
check '[ "$(jv "d[\"resources\"][\"cpu_slots\"][\"used\"]")" = 0 ]' "no CPU slot stays held"

new_model fine 3 1
check 'wait_status "$M" Done 120' "the next job trains to Done (the timeout spares a worker that prints)"
srv_stop

# ---- a full disk while snapshotting ------------------------------------------------------------------
DATA2=$T/data2
mkdir -p "$DATA2/jobs"
# the wide network's snapshot is 4 MiB of weights and 8 MiB of solver state
if mount -t tmpfs -o size=3m cdigits-test "$DATA2/jobs" 2>/dev/null; then
    MOUNTED=$DATA2/jobs
    HOW="a 3 MiB tmpfs"
    "$CDIGITS" serve --port 0 --port-file "$T/port" --data "$DATA2" --data-root "$T/images" >>"$T/server.log" 2>&1 &
else
    HOW="a 2 MiB file size limit (no right to mount a tmpfs)"
    (ulimit -f 2048 && exec "$CDIGITS" serve --port 0 --port-file "$T/port" --data "$DATA2" --data-root "$T/images") \
        >>"$T/server.log" 2>&1 &
fi
SRV_PID=$!
rm -f "$T/port"
wait_until 120 '[ -s "$T/port" ] || ! kill -0 "$SRV_PID" 2>/dev/null'
B=http://127.0.0.1:$(cat "$T/port")
login_as fred
check 'new_dataset full' "a dataset is Done on $HOW"
new_model full 20 1
wait_status "$M" Error 120
http GET "/models/$M/json"
MSG=$(jv 'd["error"]')
if [ -n "$MOUNTED" ]; then
    check '[ "$(jv "d[\"status\"]")" = Error ] && grep -qi "no space left on device" <<<"$MSG" && grep -q snapshot <<<"$MSG"' \
        "a full disk while snapshotting ends in Error naming the snapshot and the full disk: ${MSG:0:200}"
else
    check '[ "$(jv "d[\"status\"]")" = Error ] && grep -Eqi "file size limit|File too large" <<<"$MSG"' \
        "a file size limit while snapshotting ends in Error naming the limit: ${MSG:0:200}"
fi
check 'serving' "the server goes on serving"
srv_stop
finish
