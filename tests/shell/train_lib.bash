# Setup shared by the shell tests that train with the real worker (sourced by
# tests/shell/train_*.sh; not a test itself).
#
#   train_setup NAME [WORKER]  checks the worker (default $CDIGITS_BUILD_DIR's) and
#                          python3, sets here, worker, lib (lib_train.py), tmp (removed at
#                          exit unless CDIGITS_KEEP_TMP is set), passed, failed, t0
#   check NAME COMMAND...  runs a check, counts it, names it when it fails
#   run JOBDIR [CUE]       trains JOBDIR (SIGTERM at the first line of type CUE); the
#                          log goes to JOBDIR.log
#   train_finish           prints the time and "NAME: N passed, N failed"; its status is
#                          the test's
#   data_layers TRAIN [VAL]  the train and val Data layers of a one-file network, with
#                          batch sizes TRAIN and VAL (default TRAIN)
#   small_dataset DIR ENC  a small synthetic classification dataset job in DIR
#   tiny_net FILE [dropout]  a small LeNet-like network in DIGITS's one-file form
#   set_resume DIR         the same train.json with "resume": true
#   resume_check NAME MAKE a job made by `MAKE DIR EPOCHS`, stopped at its first
#                          snapshot and resumed, against the same job never stopped
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
lib="$here/lib_train.py"
passed=0
failed=0
t0=$(date +%s)

train_setup() {
    TRAIN_NAME=$1
    worker=${2:-${CDIGITS_BUILD_DIR:?set CDIGITS_BUILD_DIR to the build folder}/cdigits-worker}
    if [ ! -x "$worker" ]; then
        echo "FAIL: $worker is missing; build the cdigits-worker target"
        echo "$TRAIN_NAME: 0 passed, 1 failed"
        exit 1
    fi
    if ! command -v python3 >/dev/null; then
        echo "FAIL: python3 is needed for these tests"
        echo "$TRAIN_NAME: 0 passed, 1 failed"
        exit 1
    fi
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-$TRAIN_NAME-XXXXXX")
    trap train_cleanup EXIT
}

train_cleanup() {
    if [ -n "${CDIGITS_KEEP_TMP:-}" ]; then
        echo "(the runs are kept in $tmp)"
    else
        rm -rf "$tmp"
        [ "$failed" -eq 0 ] || echo "(set CDIGITS_KEEP_TMP=1 to keep the runs for a look)"
    fi
}

check() {
    local name=$1
    shift
    if "$@"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAILED: $name"
    fi
}

run() {
    python3 "$lib" run "$worker" "$1" "$1.log" ${2:+"$2"}
}

data_layers() {
    cat <<EOF
layer { name: "train-data" type: "Data" top: "data" top: "label"
  include { stage: "train" } data_param { batch_size: $1 } }
layer { name: "val-data" type: "Data" top: "data" top: "label"
  include { stage: "val" } data_param { batch_size: ${2:-$1} } }
EOF
}

set_resume() {
    python3 -c 'import json, sys
p = sys.argv[1]
c = json.load(open(p))
c["resume"] = True
json.dump(c, open(p, "w"))' "$1/train.json"
}

# resume_check NAME MAKE: B ($tmp/NAME-b, made by `MAKE DIR EPOCHS`) is stopped by
# SIGTERM at its first snapshot line and resumed; it must report exactly what A
# ($tmp/NAME-a, the same job never stopped) reports, with byte-identical snapshots.
# When B finished before the signal landed, both are made longer and tried again.
resume_check() {
    local name=$1 make=$2 epochs=4 a=$tmp/$1-a b=$tmp/$1-b
    while :; do
        "$make" "$b" "$epochs"
        run "$b" snapshot
        if [ "$(python3 "$lib" rc "$b.log")" = 0 ] && [ "$epochs" -lt 64 ]; then
            echo "$name: the run finished before SIGTERM landed; trying a longer run"
            epochs=$((epochs * 2))
            continue
        fi
        break
    done
    check "$name: SIGTERM" python3 "$lib" stopped "$b.log"
    "$make" "$a" "$epochs"
    run "$a"
    local f
    for f in log log.status log.err; do mv "$b.$f" "$b.stop.$f"; done
    set_resume "$b"
    run "$b"
    check "$name: resume equality" python3 "$lib" resume "$a.log" "$b.stop.log" "$b.log" "$a" "$b"
}

# reaches LOG NAME OP VALUE: the last val metric NAME of the job log LOG compares with OP
# (ge, le) to VALUE
reaches() {
    python3 - "$@" <<'EOF'
import json, sys
log, name, op, want = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
vals = []
for line in open(log):
    try:
        l = json.loads(line)
    except ValueError:
        continue
    if l.get("type") == "metric" and l.get("phase") == "val" and l.get("name") == name:
        vals.append(l["value"])
if not vals:
    print("no val %s in %s" % (name, log))
    sys.exit(1)
print("val %s: first %.4f, last %.4f (want %s %g)" % (name, vals[0], vals[-1], op, want))
sys.exit(0 if (vals[-1] >= want if op == "ge" else vals[-1] <= want) else 1)
EOF
}

# small_dataset DIR ENCODING: a dataset job in DIR (encoding none, png or jpg) of 600
# synthetic 16x16 gray images in 4 classes (lib_train.py make-idx, imported by the worker
# into $tmp/png once), 25% validation; a failure ends the test
small_dataset() {
    if [ ! -d "$tmp/png" ]; then
        python3 "$lib" make-idx "$tmp/images.idx" "$tmp/labels.idx"
        if ! "$worker" import-idx --images "$tmp/images.idx" --labels "$tmp/labels.idx" \
                --out "$tmp/png" >"$tmp/import.log" 2>&1; then
            cat "$tmp/import.log"
            echo "FAIL: import-idx"
            failed=$((failed + 1))
            train_finish
            exit 1
        fi
    fi
    mkdir -p "$1"
    printf '{"folder_train": "%s", "pct_val": 25, "channels": 1, "width": 16, "height": 16,\n "resize_mode": "squash", "encoding": "%s", "seed": 1}\n' \
        "$tmp/png" "$2" >"$1/dataset.json"
    if ! "$worker" dataset "$1" >"$1.log" 2>&1 || [ ! -f "$1/stats.json" ]; then
        cat "$1.log"
        echo "FAIL: the dataset job ($1)"
        failed=$((failed + 1))
        train_finish
        exit 1
    fi
}

# tiny_net FILE [dropout]: LeNet's shape at a smaller size, in DIGITS's one-file form
tiny_net() {
    local drop=""
    if [ "${2:-}" = dropout ]; then
        drop='layer { name: "drop1" type: "Dropout" bottom: "ip1" top: "ip1" dropout_param { dropout_ratio: 0.3 } }'
    fi
    cat >"$1" <<EOF
name: "tiny"
$(data_layers 32 50)
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "conv1" type: "Convolution" bottom: "scaled" top: "conv1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  convolution_param { num_output: 4 kernel_size: 3
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { num_output: 16
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
$drop
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  param { lr_mult: 1 } param { lr_mult: 2 }
  inner_product_param { weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss"
  exclude { stage: "deploy" } }
layer { name: "softmax" type: "Softmax" bottom: "ip2" top: "softmax" include { stage: "deploy" } }
EOF
}

train_finish() {
    echo "time: $(($(date +%s) - t0)) s"
    echo "$TRAIN_NAME: $passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
