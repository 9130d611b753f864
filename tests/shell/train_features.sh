#!/usr/bin/env bash
# Black-box tests, with the real worker on the CPU, of what a training run decides for
# itself (docs/training.md):
#  (1) a data-bound run (JPEG records of 384x384 noise, a network that sees an 8x8 crop,
#      so decoding is nearly all the work) gets the data advice with most of the step
#      waiting; given loader_threads it keeps them and the advice names the setting;
#      without it the worker adds loader threads from the first window, one at a time
#      up to two per core, and still trains exactly the same weights;
#  (2) a compute-bound run (raw 16x16 records, a wider network) gets the CPU advice;
#  (3) batch_size auto under cpu_memory_mb settles on the largest batch that fits,
#      searching up from a network's batch well below it and down from one above it
#      (then as few passes of accumulation as fit): a run given that batch fits under
#      the same cap, one given one more image does not; without a cap the network's
#      batch is kept;
#  (4) early stopping stops at the epoch the val losses say, on a plateau built with a
#      step learning-rate policy of gamma 0 and momentum 0 (the weights stop moving after
#      epoch 3) and with a min_delta no val loss can beat; and it warns when it cannot
#      act: no val split, validation_interval 0, too few validations.
# Every check reads the worker's own events and figures, never the clock. Random seeds
# are fixed and printed. Needs CDIGITS_BUILD_DIR (ctest sets it) and python3.
set -u

. "$(dirname "$0")/train_lib.bash"
seed=${CDIGITS_TEST_SEED:-20240611}
echo "seed: $seed (CDIGITS_TEST_SEED=$seed replays this run)"
train_setup train_features

die_setup() {
    cat "$2"
    echo "FAIL: $1"
    echo "train_features: $passed passed, $((failed + 1)) failed"
    exit 1
}

# ---- data -----------------------------------------------------------------------------

# 600 16x16 gray images in 4 classes, stored raw: 420 train, 120 val, 60 test
python3 "$lib" make-idx "$tmp/images.idx" "$tmp/labels.idx"
"$worker" import-idx --images "$tmp/images.idx" --labels "$tmp/labels.idx" --out "$tmp/png" \
    >"$tmp/import.log" 2>&1 || die_setup "import-idx" "$tmp/import.log"
mkdir -p "$tmp/small"
cat >"$tmp/small/dataset.json" <<EOF
{"folder_train": "$tmp/png", "pct_val": 20, "pct_test": 10, "channels": 1, "width": 16,
 "height": 16, "resize_mode": "squash", "encoding": "none", "seed": 1}
EOF
"$worker" dataset "$tmp/small" >"$tmp/small.log" 2>&1 || die_setup "the 16x16 dataset" "$tmp/small.log"
grep -q '"splits":{"train":420,"val":120,"test":60}' "$tmp/small.log" ||
    die_setup "the 16x16 dataset should split 420/120/60" "$tmp/small.log"

# 80 384x384 color noise images stored as JPEG, no val split
python3 "$lib" make-images "$tmp/noise" 40 384 "$seed"
mkdir -p "$tmp/jpeg"
cat >"$tmp/jpeg/dataset.json" <<EOF
{"folder_train": "$tmp/noise", "pct_val": 0, "channels": 3, "width": 384, "height": 384,
 "resize_mode": "squash", "encoding": "jpg", "seed": 1}
EOF
"$worker" dataset "$tmp/jpeg" >"$tmp/jpeg.log" 2>&1 || die_setup "the JPEG dataset" "$tmp/jpeg.log"
echo "data: $(grep -o '"splits":{[^}]*}' "$tmp/small.log") and $(grep -o '"splits":{[^}]*}' "$tmp/jpeg.log")"

# ---- networks and jobs ----------------------------------------------------------------

# net_wee FILE: one InnerProduct on an 8x8 crop: next to no compute per image
net_wee() {
    cat >"$1" <<EOF
name: "wee"
$(data_layers 8)
layer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"
  inner_product_param { num_output: 2 weight_filler { type: "xavier" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip" bottom: "label" top: "loss"
  exclude { stage: "deploy" } }
EOF
}

# net_lenet FILE BATCH CONV: a small LeNet-like network (CONV filters) at batch BATCH
net_lenet() {
    cat >"$1" <<EOF
name: "tiny"
$(data_layers "$2")
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "conv1" type: "Convolution" bottom: "scaled" top: "conv1"
  convolution_param { num_output: $3 kernel_size: 3 pad: 1
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "relu0" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool1" top: "ip1"
  inner_product_param { num_output: 16
    weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 4 weight_filler { type: "xavier" } bias_filler { type: "constant" } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss"
  exclude { stage: "deploy" } }
EOF
}

# job DIR DATASET NET FIELDS: a fresh job folder; NET is "wee" or "lenet BATCH CONV"
job() {
    local dir=$1 data=$2 fields=$4
    # shellcheck disable=SC2086
    set -- $3
    local kind=$1
    shift
    rm -rf "$dir" "$dir.log"*
    mkdir -p "$dir"
    "net_$kind" "$dir/network.prototxt" "$@"
    printf '{"dataset_dir": "%s", %s}\n' "$data" "$fields" >"$dir/train.json"
}

# ---- (1) data-bound: the data advice, fixed and automatic loader threads ---------------

# 10 iterations per epoch of batch 8, each image a 384x384 JPEG decoded to train on an
# 8x8 crop: with one loader thread nearly all of each step is waiting; the first window
# always is (it waits for the very first batch). The fixed run also asks for early
# stopping, which this dataset (no val split) cannot give.
bound='"epochs": 2, "crop_size": 8, "learning_rate": 0.001, "snapshot_interval": 0'
job "$tmp/data-fixed" "$tmp/jpeg" wee "$bound, \"random_seed\": $seed, \"loader_threads\": 1,
    \"early_stopping_patience\": 2"
job "$tmp/data-auto" "$tmp/jpeg" wee "$bound, \"random_seed\": $seed"
run "$tmp/data-fixed"
run "$tmp/data-auto"
check "data-bound: advice with loader_threads 1" python3 "$lib" data-bound "$tmp/data-fixed.log" fixed 0.5
check "data-bound: advice and more loader threads" python3 "$lib" data-bound "$tmp/data-auto.log" auto 0.5
check "data-bound: the same weights with any number of loader threads" python3 "$lib" same-file \
    "$tmp/data-fixed/snapshot_iter_20.cdw" "$tmp/data-auto/snapshot_iter_20.cdw"
check "early stopping without a val split warns" python3 "$lib" warned "$tmp/data-fixed.log" \
    "early_stopping_patience 2 has no effect" "no val split" "pct_val"

# ---- (2) compute-bound on the CPU ---------------------------------------------------------

# raw 16x16 records (a copy each) and 32 filters at batch 32: waiting for data is
# noise next to the step; batch_size auto without a memory cap keeps the network's batch
job "$tmp/cpu" "$tmp/small" "lenet 32 32" "\"epochs\": 1, \"random_seed\": $seed, \"snapshots\": false,
    \"batch_size\": \"auto\", \"validation_interval\": 0"
run "$tmp/cpu"
check "compute-bound: the CPU advice" python3 "$lib" cpu-bound "$tmp/cpu.log"
check "batch_size auto without a cap: the network's batch" python3 "$lib" batch-auto "$tmp/cpu.log" 32 asked

# ---- (3) batch_size auto under a memory cap ------------------------------------------------

# one iteration each: only the batch search and the memory figures matter here
quick="\"epochs\": 1, \"max_iterations\": 1, \"snapshots\": false, \"random_seed\": $seed"
# memory per image, from what two roomy runs report in use
for b in 16 32; do
    job "$tmp/mem$b" "$tmp/small" "lenet $b 8" "$quick, \"cpu_memory_mb\": 100000"
    run "$tmp/mem$b"
done
u16=$(python3 "$lib" mem-in-use "$tmp/mem16.log")
u32=$(python3 "$lib" mem-in-use "$tmp/mem32.log")
# a cap at about what batch 100 needs: far above batch 16, far below batch 256
cap=$(python3 -c "print(round(${u32:-0} + (${u32:-0} - ${u16:-0}) / 16 * 68, 4))")
echo "in use: ${u16:-?} MiB at batch 16, ${u32:-?} MiB at batch 32; cap $cap MiB"
# confirm N: batch N exactly under the cap fits, batch N+1 does not
confirm() {
    local n=$1 what=$2
    if [ -z "$n" ] || [ "$n" = None ]; then
        check "batch_size auto $what: a largest batch to confirm" false
        return
    fi
    job "$tmp/fit" "$tmp/small" "lenet $n 8" "$quick, \"cpu_memory_mb\": $cap"
    job "$tmp/over" "$tmp/small" "lenet $((n + 1)) 8" "$quick, \"cpu_memory_mb\": $cap"
    run "$tmp/fit"
    run "$tmp/over"
    check "batch_size auto $what: batch $n fits the cap" python3 "$lib" fits "$tmp/fit.log"
    check "batch_size auto $what: batch $((n + 1)) does not" python3 "$lib" no-fit "$tmp/over.log" $((n + 1))
}
for e in 16 256; do
    what=$([ "$e" = 16 ] && echo up || echo down)
    job "$tmp/auto-$what" "$tmp/small" "lenet $e 8" "$quick, \"batch_size\": \"auto\", \"cpu_memory_mb\": $cap"
    run "$tmp/auto-$what"
    check "batch_size auto $what from $e" python3 "$lib" batch-auto "$tmp/auto-$what.log" "$e" "$what"
done
# the same cap and network give the same largest batch from either side
up=$(cat "$tmp/auto-up.log.largest" 2>/dev/null)
down=$(cat "$tmp/auto-down.log.largest" 2>/dev/null)
check "batch_size auto: the same largest batch up ($up) and down ($down)" test "${up:-x}" = "${down:-y}"
confirm "$up" "up and down"

# ---- (4) early stopping ----------------------------------------------------------------

# batch 42: 10 iterations per epoch of the 420 training images, 100 in 10 epochs, so the
# step policy's 30% is iteration 30 exactly; gamma 0 and momentum 0 freeze the weights
# from there, and the val loss after epochs 4, 5, ... equals epoch 3's. Patience 2: the
# run stops after epoch 5. The check also applies the rule to the val losses the run
# reports, so a stop elsewhere shows whether the worker or the plateau was wrong.
es="\"epochs\": 10, \"batch_size\": 42, \"validation_interval\": 1, \"snapshot_interval\": 0,
    \"solver_type\": \"SGD\", \"momentum\": 0, \"random_seed\": $seed"
job "$tmp/es-plateau" "$tmp/small" "lenet 42 8" "$es, \"learning_rate\": 0.1,
    \"lr_policy\": {\"policy\": \"step\", \"stepsize\": 30, \"gamma\": 0}, \"early_stopping_patience\": 2"
run "$tmp/es-plateau"
check "early stopping on a plateau" python3 "$lib" early-stop "$tmp/es-plateau.log" 2 0 5 10 30
# a min_delta no val loss of this task can beat (a 4-class loss starts near 1.4): the
# first validation sets the best, the next is not better by 10, patience 1 stops there
job "$tmp/es-delta" "$tmp/small" "lenet 42 8" "$es, \"learning_rate\": 0.1, \"lr_policy\": {\"policy\": \"fixed\"},
    \"early_stopping_patience\": 1, \"early_stopping_min_delta\": 10"
run "$tmp/es-delta"
check "early stopping with min_delta" python3 "$lib" early-stop "$tmp/es-delta.log" 1 10 2 10
# settings under which it cannot act: it says so once and trains to the end
job "$tmp/es-val0" "$tmp/small" "lenet 42 8" "\"epochs\": 2, \"batch_size\": 42, \"random_seed\": $seed,
    \"snapshots\": false, \"validation_interval\": 0, \"early_stopping_patience\": 1, \"max_iterations\": 3"
job "$tmp/es-few" "$tmp/small" "lenet 42 8" "\"epochs\": 2, \"batch_size\": 42, \"random_seed\": $seed,
    \"snapshots\": false, \"validation_interval\": 1, \"early_stopping_patience\": 2"
run "$tmp/es-val0"
run "$tmp/es-few"
check "early stopping with validation_interval 0 warns" python3 "$lib" warned "$tmp/es-val0.log" \
    "early_stopping_patience 1 has no effect" "validation_interval 0" "set validation_interval"
check "early stopping with too few validations warns" python3 "$lib" warned "$tmp/es-few.log" \
    "early_stopping_patience 2 has no effect" "validates 1 time before its last" "needs 3"

train_finish
