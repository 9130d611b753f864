# Helpers for the server's black-box tests (sourced by tests/shell/server_*.sh; not a
# test itself). Each test gets a fresh temporary folder $T, a server on a free loopback
# port (--port 0 and --port-file), curl for HTTP and python3 for JSON.
#
#   srv_start [flags]      start build/cdigits serve with --data $T/data; sets $B (base URL)
#   srv_stop / srv_kill9   SIGTERM and wait / SIGKILL
#   http METHOD PATH [curl args]   sets $CODE and $BODY; cookies from $JAR (login_as)
#   jv 'python expr on d'  evaluates an expression on the last reply's JSON and prints it
#   check 'shell test' 'what'      counts a pass or prints FAIL and counts a failure
#   wait_status ID STATUS [seconds]  polls /jobs/ID/status until STATUS (or a final one)
#   wait_until SECONDS 'shell test'  polls until the test holds
#   sse_until PATH OUT 'pattern'     reads an event stream until a line matches
#   fake_images N          $IMG: N empty "images" per class for the fake worker ($FAKE)
#   fake_net MODE          a network text that asks the fake worker for MODE (fake:slow...)
#   post_model NET NAME EPOCHS [curl args]  a custom-network model of $DS; sets $MODEL
#   has_snapshot ID        model ID has written a snapshot (for wait_until)
#   restart_model SEED NAME EPOCHS SNAP NET_COMMAND  fred's dataset and model, restart tests
#   finish                 prints the summary and exits non-zero on any failure

set -u
SRC=${CDIGITS_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
BUILD=${CDIGITS_BUILD_DIR:-$SRC/build}
CDIGITS=$BUILD/cdigits
T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-server-XXXXXX")
SRV_PID=""
PASSES=0
FAILS=0
JAR=$T/cookies.txt
CODE=""
BODY=""
FAKE=$SRC/tests/shell/fake_worker.py

srv_cleanup() {
    if [ -n "$SRV_PID" ]; then
        kill -TERM "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
    fi
    # workers the tests may have left (a SIGKILLed server's orphans)
    pkill_workers
    if [ -z "${KEEP_TMP:-}" ]; then rm -rf "$T"; else echo "kept $T"; fi
}
trap srv_cleanup EXIT

# Stops only the worker processes that run in this test's folder.
pkill_workers() {
    local d
    for d in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q -- "$T/"; then
            kill -KILL "${d#/proc/}" 2>/dev/null
        fi
    done
}

# shellcheck source=tests/shell/skip.bash
. "$SRC/tests/shell/skip.bash"

need_server() {
    [ -x "$CDIGITS" ] || skip_test "$CDIGITS is not built (cmake --build <build> --target cdigits)"
}

srv_start() {
    rm -f "$T/port"
    "$CDIGITS" serve --port 0 --port-file "$T/port" --data "$T/data" "$@" >>"$T/server.log" 2>&1 &
    SRV_PID=$!
    local end=$((SECONDS + 120))
    while [ $SECONDS -lt $end ]; do
        [ -s "$T/port" ] && break
        if ! kill -0 "$SRV_PID" 2>/dev/null; then
            echo "FAIL the server did not start:"
            tail -20 "$T/server.log"
            SRV_PID=""
            exit 1
        fi
        sleep 0.05
    done
    PORT=$(cat "$T/port")
    B=http://127.0.0.1:$PORT
}

srv_stop() {
    if [ -n "$SRV_PID" ]; then
        kill -TERM "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
        SRV_RC=$?
        SRV_PID=""
    fi
}

srv_kill9() {
    if [ -n "$SRV_PID" ]; then
        kill -KILL "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
        SRV_PID=""
    fi
}

http() {
    local method=$1 path=$2
    shift 2
    CODE=$(curl -s -o "$T/body" -w '%{http_code}' -X "$method" -b "$JAR" -c "$JAR" --max-time 30 "$@" "$B$path")
    BODY=$(head -c 2000 "$T/body" 2>/dev/null)
}

login_as() {
    JAR=$T/cookies-$1.txt
    http POST /login -d "username=$1"
}

jv() {
    python3 -c 'import json, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
try:
    d = json.load(open(sys.argv[1]))
except Exception:
    d = None
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = "<%s>" % type(e).__name__
print(json.dumps(v) if isinstance(v, (dict, list, bool)) or v is None else v)' "$T/body" "$1"
}

check() {
    if eval "$1"; then
        PASSES=$((PASSES + 1))
        echo "ok   $2"
    else
        FAILS=$((FAILS + 1))
        echo "FAIL $2"
        echo "     (code $CODE, body $(printf %s "$BODY" | head -c 600))"
    fi
}

wait_status() {
    local id=$1 want=$2 secs=${3:-120} st=""
    local end=$((SECONDS + secs))
    while [ $SECONDS -lt $end ]; do
        http GET "/jobs/$id/status"
        st=$(jv 'd["status"]')
        [ "$st" = "$want" ] && return 0
        case "$st" in Done | Error | Aborted) [ "$st" != "$want" ] && return 1 ;; esac
        sleep 0.1
    done
    return 1
}

# wait_until SECONDS 'shell test': evaluates the test every 0.05 s until it holds (0),
# or SECONDS pass (1). For waiting on an event the test can see, never for a time.
wait_until() {
    local end=$((SECONDS + $1))
    until eval "$2"; do
        [ $SECONDS -ge "$end" ] && return 1
        sleep 0.05
    done
    return 0
}

# training ID [SECONDS]: waits until model ID has reported a metric (it is past its
# setup and training)
training() {
    TRAINING_ID=$1
    wait_until "${2:-120}" has_metrics
}
has_metrics() {
    http GET "/models/$TRAINING_ID/json"
    [ "$(jv 'd.get("metrics_count", 0) > 0')" = true ]
}

# sse_until PATH OUT 'grep pattern' [SECONDS]: reads the event stream at PATH into OUT
# until a line matches the pattern (0), or SECONDS (default 120) pass (1).
sse_until() {
    local path=$1 out=$2 pattern=$3 secs=${4:-120} pid rc
    : >"$out"
    curl -s -N -b "$JAR" --max-time "$secs" "$B$path" >"$out" 2>/dev/null &
    pid=$!
    wait_until "$secs" 'grep -q -- "$pattern" "$out"'
    rc=$?
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    return $rc
}

# shapes_dataset SIZE PER_CLASS SEED [serve flags]: generated SIZExSIZE gray PNGs in 3
# classes under $T/images, a server with them as its data root, logged in as tester, and
# a dataset of them (25% val) made by the real worker: DS is its id.
shapes_dataset() {
    local size=$1 per=$2 seed=$3
    shift 3
    make_pngs "$T/images" --classes 3 --per-class "$per" --size "$size" --seed "$seed"
    srv_start --data-root "$T/images" "$@"
    login_as tester
    http POST /datasets/images/classification/json -F folder_train="$T/images" -F encoding=png \
        -F resize_channels=1 -F resize_width="$size" -F resize_height="$size" -F folder_pct_val=25 -F dataset_name=shapes
    DS=$(jv 'd["id"]')
    if ! wait_status "$DS" Done 120; then
        echo "FAIL the dataset was not made: $BODY"
        finish
    fi
}

# restart_model SEED NAME EPOCHS SNAP NET_COMMAND...: the start of the restart tests with the
# real worker: 3 classes of 16 28x28 gray PNGs (seed SEED) under $T/images, a server with them
# as its data root and --abort-grace 3, fred's dataset of them (checked Done) and fred's model
# NAME of the network NET_COMMAND prints, for EPOCHS epochs with a snapshot and a validation
# every SNAP epochs (checked created). DS and M are their ids, JOBDIR the model's folder;
# EPOCHS and SNAP stay set for the checks.
restart_model() {
    local seed=$1 name=$2 net=$T/restart.prototxt
    EPOCHS=$3 SNAP=$4
    shift 4
    "$@" >"$net"
    make_pngs "$T/images" --classes 3 --per-class 16 --size 28 --seed "$seed"
    srv_start --data-root "$T/images" --abort-grace 3
    login_as fred
    http POST /datasets/images/classification/json -F folder_train="$T/images" -F resize_channels=1 \
        -F resize_width=28 -F resize_height=28 -F folder_pct_val=25 -F dataset_name=shapes
    DS=$(jv 'd["id"]')
    check 'wait_status "$DS" Done 120' "dataset Done"
    http POST /models/images/classification/json -F method=custom -F custom_network="<$net" \
        -F train_epochs="$EPOCHS" -F snapshot_interval="$SNAP" -F val_interval="$SNAP" -F model_name="$name" -F dataset="$DS" \
        -F random_seed=1 -F lr_policy=fixed
    M=$(jv 'd["id"]')
    check '[ "$CODE" = 200 ]' "model created"
    JOBDIR=$T/data/jobs/$M
}

finish() {
    # a sanitizer report in the server's log is a failure even when every reply was right
    if grep -qE "AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:" "$T/server.log" 2>/dev/null; then
        FAILS=$((FAILS + 1))
        echo "FAIL the server's log has a sanitizer report:"
        grep -E -A15 "Sanitizer|runtime error:" "$T/server.log" | head -40
    fi
    echo "$PASSES passed, $FAILS failed"
    if [ "$FAILS" -ne 0 ]; then
        echo "server log (last 40 lines):"
        tail -40 "$T/server.log"
        exit 1
    fi
    [ "$PASSES" -gt 0 ]
}

# Writes N tiny PNGs per class into DIR/<class>/ (python3 and zlib only): each class
# has its own pattern, so a network can learn it. Sizes WxH, gray.
make_pngs() {
    python3 "$SRC/tests/shell/make_pngs.py" "$@"
}

# fake_images N: the folder $IMG=$T/images with train/cat and train/dog of N empty files
# each, enough for a dataset job of the fake worker, which reads no image.
fake_images() {
    IMG=$T/images
    mkdir -p "$IMG/train/cat" "$IMG/train/dog"
    local i
    for i in $(seq 1 "$1"); do touch "$IMG/train/cat/$i.png" "$IMG/train/dog/$i.png"; done
}

# fake_net MODE: a network text whose comment asks the fake worker for MODE (fake:slow,
# fake:crash, ...: tests/shell/fake_worker.py); any other word is a plain run.
fake_net() {
    printf '# fake network %s\nlayer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip" }\n' "$1"
}

# post_model NETFILE NAME EPOCHS [curl args]: POSTs a custom-network model of dataset
# $DS named NAME for EPOCHS epochs (more fields in the curl args); sets MODEL to its id.
post_model() {
    local net=$1 name=$2 epochs=$3
    shift 3
    http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$net" \
        -F train_epochs="$epochs" -F model_name="$name" "$@"
    MODEL=$(jv 'd["id"]')
}

# has_snapshot ID: model ID lists a snapshot (the reply stays the model's JSON).
has_snapshot() {
    http GET "/models/$1/json"
    [ "$(jv 'd["snapshots"]')" != "[]" ]
}
