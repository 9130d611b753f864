#!/usr/bin/env bash
# Soak: the server under continuous API load (wrk over the routes the UI polls) and
# several server-sent-event clients while training jobs run back to back, for a given
# time. Every window it records the server's resident memory, its C heap in use and
# SQLite's share of it (GET /hardware/json), its open file descriptors and threads, the
# size of SQLite's write-ahead log, and wrk's request rate and p99 latency; at the end it
# compares the last window with the first. Memory must stay flat (after the first
# window, which warms caches up) and p99 must not drift.
#
#   bench/soak.sh [SECONDS] [BUILD_DIR]     (default 1800 s; build: $CDIGITS_BUILD_DIR or build)
#   SOAK_WINDOW (30 s), SOAK_CONNECTIONS (16), SOAK_SSE (6 clients), SOAK_OUT (a CSV, default <tmp>/soak.csv)
#
# Use a build without sanitizers (AddressSanitizer's quarantine grows the resident set
# by design): cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release -DCDIGITS_CUDA=OFF.
# Exit status 1 when memory grew by more than 10% + 8 MiB from the first window to the
# last, when the last window's p99 is more than twice the first's plus 5 ms, when a
# stream died or requests failed.
set -uo pipefail
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH_NAME=soak
# shellcheck source=bench/http_bench_lib.bash
. "$SRC/bench/http_bench_lib.bash"
DURATION=${1:-1800}
bench_build_dir "${2:-}"
need_tools cdigits cdigits-worker
WINDOW=${SOAK_WINDOW:-30}
CONNS=${SOAK_CONNECTIONS:-16}
NSSE=${SOAK_SSE:-6}

T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-soak-XXXXXX")
OUT=${SOAK_OUT:-$T/soak.csv}
PID=""
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    [ -n "$PID" ] && kill -TERM "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    if [ -z "${SOAK_KEEP:-}" ]; then rm -rf "$T"; else echo "soak: kept $T"; fi
}
trap cleanup EXIT

python3 "$SRC/tests/shell/make_pngs.py" "$T/images" --classes 3 --per-class 30 --size 28 --seed 3
bench_serve soak
jid() { python3 -c 'import json, sys; print(json.load(sys.stdin).get("id", ""))'; }
DS=$(curl -s -b "$J" -X POST "$B/datasets/images/classification/json" -F folder_train="$T/images" \
    -F resize_channels=1 -F resize_width=28 -F resize_height=28 -F folder_pct_val=20 -F dataset_name=soak | jid)
for _ in $(seq 600); do
    [ "$(curl -s "$B/datasets/$DS/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])')" = Done ] && break
    sleep 0.1
done

# jobs back to back: LeNet for a few epochs; the finished ones beyond the newest three
# are deleted, so the job list (what the API returns) stays the same size
trainer() {
    local n=0 m
    while :; do
        n=$((n + 1))
        m=$(curl -s -b "$J" -X POST "$B/models/images/classification/json" -F method=standard \
            -F standard_networks=lenet -F train_epochs=4 -F model_name="soak$n" -F dataset="$DS" \
            -F learning_rate=0.01 -F batch_size=32 | jid)
        echo "$m" >>"$T/models"
        echo "$m" >"$T/current"
        while [ "$(curl -s "$B/models/$m/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])' 2>/dev/null)" \
            != Done ]; do
            sleep 1
            curl -s "$B/models/$m/status" | grep -q '"Error"\|"Aborted"' && { echo "$m" >>"$T/failed"; break; }
        done
        if [ "$(wc -l <"$T/models")" -gt 3 ]; then
            curl -s -b "$J" -X DELETE "$B/models/$(head -1 "$T/models")" >/dev/null
            sed -i 1d "$T/models"
        fi
    done
}
trainer &
PIDS+=($!)
for _ in $(seq 100); do [ -s "$T/current" ] && break; sleep 0.1; done

# server-sent-event clients: half on the home stream, half on the running job's
sse() {
    local i=$1
    while :; do
        if [ $((i % 2)) = 0 ]; then
            curl -s -N "$B/events" >>"$T/sse$i.txt"
        else
            curl -s -N "$B/jobs/$(cat "$T/current")/events" >>"$T/sse$i.txt"
        fi
        echo "reconnect" >>"$T/sse$i.reconnects"
        sleep 0.5
    done
}
for i in $(seq 1 "$NSSE"); do
    sse "$i" &
    PIDS+=($!)
done

# wrk rotates over what the UI polls
cat >"$T/paths.lua" <<EOF
local paths = {"/index/json", "/completed_jobs/json", "/hardware/json", "/datasets/$DS/json",
               "/login", "/jobs/$DS/status"}
local i = 0
request = function()
  i = i + 1
  return wrk.format("GET", paths[(i % #paths) + 1])
end
EOF

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$PID/status"; }
# the C heap in use and SQLite's share of it, as the server reports them (KiB)
heap_kib() {
    curl -s --max-time 5 "$B/hardware/json" | python3 -c 'import json, sys
s = json.load(sys.stdin).get("server", {})
print("%d,%d" % (s.get("heap_in_use_bytes", 0) // 1024, s.get("sqlite_bytes", 0) // 1024))' 2>/dev/null || echo 0,0
}
echo "window,elapsed_s,rss_kib,fds,threads,wal_kib,requests_per_s,p50_ms,p99_ms,non2xx,socket_errors,heap_kib,sqlite_kib" >"$OUT"
start=$SECONDS
w=0
echo "soak: ${DURATION}s on $B ($CONNS connections, $NSSE event streams, jobs back to back), windows of ${WINDOW}s"
while [ $((SECONDS - start)) -lt "$DURATION" ]; do
    w=$((w + 1))
    left=$((DURATION - (SECONDS - start)))
    secs=$((left < WINDOW ? left : WINDOW))
    [ "$secs" -lt 1 ] && break
    wrk -t2 -c"$CONNS" -d"${secs}s" --latency -s "$T/paths.lua" "$B" >"$T/wrk$w.txt" 2>&1
    rps=$(awk '/^Requests\/sec/ {print $2}' "$T/wrk$w.txt")
    ms() { awk -v k="$1" '$1 == k {v = $2; if (v ~ /us$/) {sub(/us/, "", v); v /= 1000} else if (v ~ /ms$/) sub(/ms/, "", v); else if (v ~ /s$/) {sub(/s/, "", v); v *= 1000}; print v}' "$T/wrk$w.txt"; }
    p50=$(ms 50%)
    p99=$(ms 99%)
    non2xx=$(awk '/Non-2xx/ {print $NF}' "$T/wrk$w.txt")
    serr=$(awk '/Socket errors/ {gsub(/,/, ""); print $4 + $6 + $8 + $10}' "$T/wrk$w.txt")
    fds=$(ls "/proc/$PID/fd" 2>/dev/null | wc -l)
    thr=$(awk '/^Threads/ {print $2}' "/proc/$PID/status")
    wal=$(( $(stat -c %s "$T/data/cdigits.db-wal" 2>/dev/null || echo 0) / 1024 ))
    line="$w,$((SECONDS - start)),$(rss_kib),$fds,$thr,$wal,${rps:-0},${p50:-0},${p99:-0},${non2xx:-0},${serr:-0},$(heap_kib)"
    echo "$line" >>"$OUT"
    echo "  $line"
    kill -0 "$PID" 2>/dev/null || { echo "soak: the server died"; tail -20 "$T/server.log"; exit 1; }
done

python3 - "$OUT" "$T" "$NSSE" <<'PY'
import csv, glob, os, sys
rows = list(csv.DictReader(open(sys.argv[1])))
t, nsse = sys.argv[2], int(sys.argv[3])
if len(rows) < 2:
    print("soak: too short for a comparison (need two windows)")
    sys.exit(1)
first, last = rows[0], rows[-1]
rss0, rss1 = int(first["rss_kib"]), int(last["rss_kib"])
rssmax = max(int(r["rss_kib"]) for r in rows)
p0, p1 = float(first["p99_ms"]), float(last["p99_ms"])
non2xx = sum(int(r["non2xx"] or 0) for r in rows)
serr = sum(int(r["socket_errors"] or 0) for r in rows)
jobs = len(open(os.path.join(t, "models")).read().split()) if os.path.exists(os.path.join(t, "models")) else 0
failed = open(os.path.join(t, "failed")).read().split() if os.path.exists(os.path.join(t, "failed")) else []
events = sum(open(f, errors="replace").read().count("\nevent: ") for f in glob.glob(os.path.join(t, "sse*.txt")))
reconnects = sum(len(open(f).read().split()) for f in glob.glob(os.path.join(t, "sse*.reconnects")))
print("soak: %s s, %d windows" % (last["elapsed_s"], len(rows)))
print("  resident memory: first window %.1f MiB, last %.1f MiB, peak %.1f MiB (%+.1f%%)"
      % (rss0 / 1024, rss1 / 1024, rssmax / 1024, 100.0 * (rss1 - rss0) / rss0))
print("  p99 latency: first window %.2f ms, last %.2f ms; requests/s first %s, last %s"
      % (p0, p1, first["requests_per_s"], last["requests_per_s"]))
print("  fds %s -> %s, threads %s -> %s, SQLite WAL %s -> %s KiB"
      % (first["fds"], last["fds"], first["threads"], last["threads"], first["wal_kib"], last["wal_kib"]))
h0, h1 = int(first["heap_kib"]), int(last["heap_kib"])
q0, q1 = int(first["sqlite_kib"]), int(last["sqlite_kib"])
print("  C heap in use %.1f -> %.1f MiB, of which SQLite %.1f -> %.1f MiB; the rest %.1f -> %.1f MiB"
      % (h0 / 1024, h1 / 1024, q0 / 1024, q1 / 1024, (h0 - q0) / 1024, (h1 - q1) / 1024))
print("  non-2xx %d, socket errors %d, event lines %d on %d streams, reconnects %d, failed jobs %d"
      % (non2xx, serr, events, nsse, reconnects, len(failed)))
bad = []
if rss1 > rss0 * 1.10 + 8 * 1024:
    bad.append("memory grew")
if p1 > 2 * p0 + 5:
    bad.append("p99 drifted")
if non2xx or failed:
    bad.append("requests or jobs failed")
if events == 0:
    bad.append("no event reached the streams")
print("soak: " + ("FAIL " + ", ".join(bad) if bad else "PASS: flat memory and latency"))
sys.exit(1 if bad else 0)
PY
