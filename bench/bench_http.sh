#!/usr/bin/env bash
# Server benchmarks on loopback:
#   1. requests per second and p99 latency of GET /index/json with wrk, idle and while a
#      training job runs (the jobs list holds a few dozen jobs);
#   2. the delay from a worker writing a metric line to a server-sent-events client
#      receiving it (median, p99, max over every line of a training run).
# Usage: bench/bench_http.sh [build dir]   (default: $CDIGITS_BUILD_DIR or build)
#   BENCH_SECONDS (10), BENCH_CONNECTIONS (32), BENCH_THREADS (2)
# Build with -DCMAKE_BUILD_TYPE=Release for figures worth comparing. Without the real
# cdigits-worker the training load comes from tests/shell/fake_worker.py.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=bench_http
# shellcheck source=bench/http_bench_lib.bash
. "$SRC/bench/http_bench_lib.bash"
bench_build_dir "${1:-}"
need_tools cdigits
SECS=${BENCH_SECONDS:-10}
CONNS=${BENCH_CONNECTIONS:-32}
THREADS=${BENCH_THREADS:-2}

T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-bench-XXXXXX")
PID=""
cleanup() {
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

WORKER=$BUILD/cdigits-worker
REAL=1
if [ ! -x "$WORKER" ]; then
    WORKER=$SRC/tests/shell/fake_worker.py
    REAL=0
fi
python3 "$SRC/tests/shell/make_pngs.py" "$T/images" --classes 3 --per-class 40 --size 28
bench_serve bench --worker "$WORKER"

id_of() { python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])'; }
wait_done() {
    for _ in $(seq 600); do
        s=$(curl -s "$B/jobs/$1/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
        case "$s" in Done | Error | Aborted) echo "$s"; return ;; esac
        sleep 0.1
    done
}
DS=$(curl -s -b "$J" -XPOST "$B/datasets/images/classification/json" -F folder_train="$T/images" \
     -F resize_channels=1 -F resize_width=28 -F resize_height=28 -F dataset_name=bench | id_of)
[ "$(wait_done "$DS")" = Done ] || { echo "bench_http: the dataset failed"; tail "$T/server.log"; exit 1; }

. "$SRC/tests/shell/server_tiny_net.bash"
tiny_net >"$T/tiny.prototxt"
# a few dozen finished jobs, so /index/json has something to list
curl -s -b "$J" -XPOST "$B/models/images/classification/json" -F dataset="$DS" -F method=custom \
    -F custom_network="<$T/tiny.prototxt" -F train_epochs=1 -F model_name=list \
    -F learning_rate=0.001,0.002,0.003,0.004,0.005,0.006,0.007,0.008,0.009,0.01 -F batch_size=4,8 >/dev/null
for _ in $(seq 600); do
    left=$(curl -s "$B/index/json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(sum(m["status"] not in ("Done","Error","Aborted") for m in d["models"]))')
    [ "$left" = 0 ] && break
    sleep 0.2
done
NJOBS=$(curl -s "$B/index/json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(len(d["datasets"]) + len(d["models"]))')

run_wrk() {
    wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency "$B/index/json" >"$T/wrk.txt" 2>&1
    rps=$(awk '/Requests\/sec/ {print $2}' "$T/wrk.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$T/wrk.txt")
    p50=$(awk '$1 == "50%" {print $2}' "$T/wrk.txt")
    errs=$(awk '/Non-2xx|Socket errors/' "$T/wrk.txt" | tr '\n' ' ')
    echo "$rps $p50 $p99 ${errs:-none}"
}
read -r IDLE_RPS IDLE_P50 IDLE_P99 IDLE_ERR <<<"$(run_wrk)"

# a long training run as load, followed by an SSE client that times every metric line
curl -s -b "$J" -XPOST "$B/models/images/classification/json" -F dataset="$DS" -F method=custom \
    -F custom_network="<$T/tiny.prototxt" -F train_epochs=100000 -F model_name=load >"$T/load.json"
LOAD=$(id_of <"$T/load.json")
for _ in $(seq 200); do
    [ "$(curl -s "$B/jobs/$LOAD/status" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')" = Running ] && break
    sleep 0.05
done
python3 - "$B" "$LOAD" "$T/data/jobs/$LOAD/worker.out.jsonl" "$((SECS + 4))" >"$T/sse.txt" 2>&1 <<'PY' &
# Follows the worker's output file (polling every 0.2 ms: when each metric line was
# written) and the job's event stream (when it arrived), and reports the delays.
import json, socket, sys, threading, time, urllib.parse
base, job, path, secs = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
u = urllib.parse.urlparse(base)
written, arrived, stop = {}, {}, time.time() + secs

def follow():
    f = open(path, "rb")
    f.seek(0, 2)
    buf = b""
    while time.time() < stop:
        chunk = f.read()
        if not chunk:
            time.sleep(0.0002)
            continue
        now = time.time()
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("type") == "metric":
                written.setdefault((d["phase"], d["name"], d["iteration"]), now)

threading.Thread(target=follow, daemon=True).start()
s = socket.create_connection((u.hostname, u.port), timeout=5)
s.sendall(("GET /jobs/%s/events HTTP/1.1\r\nHost: x\r\n\r\n" % job).encode())
buf = b""
while time.time() < stop:
    try:
        chunk = s.recv(65536)
    except socket.timeout:
        continue
    if not chunk:
        break
    now = time.time()
    buf += chunk
    while b"\n\n" in buf:
        ev, buf = buf.split(b"\n\n", 1)
        lines = ev.decode(errors="replace").splitlines()
        if "event: metric" not in lines:
            continue
        for l in lines:
            if l.startswith("data: "):
                d = json.loads(l[6:])
                arrived.setdefault((d["phase"], d["name"], d["iteration"]), now)
time.sleep(0.1)
delays = sorted(arrived[k] - written[k] for k in arrived if k in written)
if not delays:
    print("sse 0 nan nan nan")
else:
    pick = lambda q: delays[min(len(delays) - 1, int(q * len(delays)))]
    print("sse %d %.2f %.2f %.2f" % (len(delays), 1000 * pick(0.5), 1000 * pick(0.99), 1000 * delays[-1]))
PY
SSE_PID=$!
sleep 1
read -r BUSY_RPS BUSY_P50 BUSY_P99 BUSY_ERR <<<"$(run_wrk)"
wait "$SSE_PID"
read -r _ SSE_N SSE_P50 SSE_P99 SSE_MAX <"$T/sse.txt"
curl -s "$B/models/$LOAD/metrics/json?limit=1" >/dev/null
IPS=$(curl -s "$B/models/$LOAD/json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(round(d["outputs"].get("images_per_sec (train)", {}).get("last") or 0))')
curl -s -b "$J" -XPOST "$B/models/$LOAD/abort" >/dev/null

echo
echo "cdigits server benchmark ($(nproc) CPUs, wrk -t$THREADS -c$CONNS -d${SECS}s, $NJOBS jobs listed, worker: $([ $REAL = 1 ] && echo cdigits-worker || echo fake))"
printf '%-44s %12s %10s %10s  %s\n' "measure" "req/s" "p50" "p99" "errors"
printf '%-44s %12s %10s %10s  %s\n' "GET /index/json, idle" "$IDLE_RPS" "$IDLE_P50" "$IDLE_P99" "$IDLE_ERR"
printf '%-44s %12s %10s %10s  %s\n' "GET /index/json, while a model trains" "$BUSY_RPS" "$BUSY_P50" "$BUSY_P99" "$BUSY_ERR"
printf '%-44s %12s %10s %10s  %s\n' "metric line -> SSE client (ms, $SSE_N lines)" "-" "$SSE_P50" "$SSE_P99" "max $SSE_MAX"
echo "(the training job ran at about $IPS images/s during the busy run)"
