#!/usr/bin/env bash
# Black-box tests of training on the CPU with the real worker:
#  (a) a plain run: done, exit 0, the loss falls, val accuracy well above chance, a
#      snapshot file for every snapshot line;
#  (b) SIGTERM and resume: a run stopped by SIGTERM snapshots and exits 3 (how soon is
#      printed, not checked), and resumed it reports exactly the metrics of a run never stopped, with
#      byte-identical snapshots (SGD; and ADAM with dropout, random crops and mirroring,
#      so that every source of randomness must continue where it stopped);
#      validating often trains exactly as validating once (validation never touches
#      the training batch staged ahead);
#  (c) batch accumulation: batch 16 x 4 equals batch 64 x 1 to float tolerance;
#  (d) a diverging run (learning rate 1000) stops with an error suggesting a lower
#      learning rate;
#  (e) a bad train.json value fails before training with an error naming the key;
#  (f) data parallelism: 2 CPU replicas of batch 32 end with the weights of one
#      replica of batch 64, to float tolerance; averaging the gradients in small buckets
#      during the backward pass gives bit-identical weights to one average after it; a
#      batch the replicas can't split evenly is refused; 2 replicas stopped by SIGTERM
#      and resumed match a run never stopped; a replica that fails (a damaged record
#      only it reads) ends the whole run at once, its error naming the replica, and so
#      does a crash (SIGSEGV) on one replica's thread.
#
# The data is made here: 600 synthetic 16x16 gray images in 4 classes written as IDX
# files, imported and turned into a dataset job by the worker itself. The network is a
# small LeNet-like one so that all of it runs in well under a minute even with
# AddressSanitizer. Needs CDIGITS_BUILD_DIR (ctest sets it) and python3.
set -u

. "$(dirname "$0")/train_lib.bash"
train_setup train_cpu

# ---- data -----------------------------------------------------------------------------

small_dataset "$tmp/dataset" none
echo "data: $(grep -o '"splits":{[^}]*}' "$tmp/dataset.log")"

# ---- jobs ---------------------------------------------------------------------------

# job DIR NETKIND JSON-FIELDS [DATASET]: a fresh job folder with network.prototxt and
# train.json (on $tmp/dataset unless DATASET is given)
job() {
    rm -rf "$1" "$1.log"*
    mkdir -p "$1"
    tiny_net "$1/network.prototxt" "$2"
    printf '{"dataset_dir": "%s", %s}\n' "${4:-$tmp/dataset}" "$3" >"$1/train.json"
}

# ---- (a) and (b): plain run, SIGTERM, resume equality -------------------------------

# resume_case NAME NETKIND FIELDS: resume_check (train_lib.bash) on jobs of NETKIND with
# FIELDS, a snapshot every half epoch and validation every epoch
resume_case() {
    case_kind=$2 case_fields=$3
    resume_check "$1" cpu_case_job
}
cpu_case_job() {
    job "$1" "$case_kind" "\"epochs\": $2, \"snapshot_interval\": 0.5, \"validation_interval\": 1, $case_fields"
}

resume_case sgd plain '"random_seed": 5, "solver_type": "SGD", "learning_rate": 0.01'
check "sgd: plain run" python3 "$lib" plain "$tmp/sgd-a" "$tmp/sgd-a.log"
resume_case adam dropout '"random_seed": 6, "solver_type": "ADAM", "learning_rate": 0.002,
    "crop_size": 14, "use_mirror": true, "lr_policy": {"policy": "exp", "gamma": 0.5}'

# "snapshots": false: the run trains and reports, and writes no snapshot, not even the
# last (snapshot_interval 0 alone still writes that one)
job "$tmp/no-snap" plain '"epochs": 1, "snapshot_interval": 0, "snapshots": false, "random_seed": 4'
job "$tmp/end-snap" plain '"epochs": 1, "snapshot_interval": 0, "random_seed": 4'
run "$tmp/no-snap"
run "$tmp/end-snap"
check "snapshots false: trained" grep -q '"name":"loss"' "$tmp/no-snap.log"
check "snapshots false: no snapshot" test -z "$(ls "$tmp/no-snap" | grep -E '^snapshot_iter_')"
check "snapshot_interval 0: the final snapshot" test -n "$(ls "$tmp/end-snap" | grep -E '^snapshot_iter_[0-9]+\.cdw$')"
# each snapshot has its epoch beside it (docs/formats.md): 1 epoch, so the final one's is 1
end_iter=$(ls "$tmp/end-snap" | sed -n 's/^snapshot_iter_\([0-9]*\)\.cdw$/\1/p' | sort -n | tail -1)
check "the final snapshot's epoch file says 1" python3 -c 'import sys; sys.exit(float(open(sys.argv[1]).read()) != 1.0)' \
    "$tmp/end-snap/snapshot_iter_${end_iter:-0}.epoch"

# validating every quarter epoch trains exactly as validating once at the end: the
# validation batches go through the staging slot not holding the next training batch
job "$tmp/val-often" plain '"epochs": 2, "snapshot_interval": 2, "validation_interval": 0.25, "random_seed": 4'
job "$tmp/val-once" plain '"epochs": 2, "snapshot_interval": 2, "validation_interval": 2, "random_seed": 4'
run "$tmp/val-often"
run "$tmp/val-once"
fin=$(ls "$tmp/val-once" | sed -n 's/^snapshot_iter_\([0-9]*\)\.cdw$/\1/p' | sort -n | tail -1)
check "validation leaves training alone" python3 "$lib" val-neutral "$tmp/val-often.log" \
    "$tmp/val-often/snapshot_iter_${fin:-0}.cdw" "$tmp/val-once.log" "$tmp/val-once/snapshot_iter_${fin:-0}.cdw"

# ---- (c) batch accumulation ---------------------------------------------------------

acc="\"epochs\": 2, \"snapshot_interval\": 1, \"validation_interval\": 2, \"random_seed\": 11,
    \"learning_rate\": 0.05, \"lr_policy\": {\"policy\": \"fixed\"}"
job "$tmp/acc64" plain "$acc, \"batch_size\": 64, \"batch_accumulation\": 1"
job "$tmp/acc16" plain "$acc, \"batch_size\": 16, \"batch_accumulation\": 4"
run "$tmp/acc64"
run "$tmp/acc16"
last=$(ls "$tmp/acc64" | sed -n 's/^snapshot_iter_\([0-9]*\)\.cdw$/\1/p' | sort -n | tail -1)
mid=$(ls "$tmp/acc64" | sed -n 's/^snapshot_iter_\([0-9]*\)\.cdw$/\1/p' | sort -n | head -1)
check "batch accumulation" python3 "$lib" accumulation \
    "$tmp/acc64.log" "$tmp/acc64/snapshot_iter_${last:-0}.cdw" "$tmp/acc64/snapshot_iter_${mid:-0}.cdw" \
    "$tmp/acc16.log" "$tmp/acc16/snapshot_iter_${last:-0}.cdw"

# ---- (f) data-parallel replicas: 2 replicas of batch 32 equal 1 of batch 64 -------------

job "$tmp/rep1" plain "$acc, \"batch_size\": 64, \"replicas\": 1"
job "$tmp/rep2" plain "$acc, \"batch_size\": 64, \"replicas\": 2"
run "$tmp/rep1"
run "$tmp/rep2"
check "replicas" python3 "$lib" replicas \
    "$tmp/rep1.log" "$tmp/rep1/snapshot_iter_${last:-0}.cdw" "$tmp/rep1/snapshot_iter_${mid:-0}.cdw" \
    "$tmp/rep2.log" "$tmp/rep2/snapshot_iter_${last:-0}.cdw"
# the data-parallel path with one replica (a group of one, as a one-GPU NCCL run) is the
# plain path, bit for bit
job "$tmp/rep1f" plain "$acc, \"batch_size\": 64, \"replicas\": 1, \"force_data_parallel\": true"
run "$tmp/rep1f"
check "replicas: a group of one trains as no group" cmp "$tmp/rep1/snapshot_iter_${last:-0}.cdw" \
    "$tmp/rep1f/snapshot_iter_${last:-0}.cdw"
check "replicas: a group of one says so" grep -q "data parallel over 1 replica" "$tmp/rep1f.log"
# gradients averaged in small buckets while the backward runs: the same weights, bit for bit
job "$tmp/rep2b" plain "$acc, \"batch_size\": 64, \"replicas\": 2, \"allreduce_bucket_mb\": 0.0001"
run "$tmp/rep2b"
check "replicas: buckets give the same weights" cmp "$tmp/rep2/snapshot_iter_${last:-0}.cdw" \
    "$tmp/rep2b/snapshot_iter_${last:-0}.cdw"
nb=$(sed -n 's/.*averaged in \([0-9]*\) bucket.*/\1/p' "$tmp/rep2b.log" | head -1)
n1=$(sed -n 's/.*averaged in \([0-9]*\) bucket.*/\1/p' "$tmp/rep2.log" | head -1)
check "replicas: several buckets ($n1 at 25 MiB, ${nb:-none} at 0.0001 MiB)" test "${nb:-0}" -gt "${n1:-0}" -a "${n1:-0}" -ge 1
# refused NAME FIELDS PATTERN: a run of FIELDS fails before training, its error matching PATTERN
refused() {
    job "$tmp/$1" plain "$acc, $2"
    run "$tmp/$1"
    check "replicas: $1 refused" python3 "$lib" bad-value "$tmp/$1" "$tmp/$1.log" "$3"
}
refused rep3 '"batch_size": 64, "replicas": 3' "does not split evenly"
refused rep4 '"batch_size": 1, "replicas": 2' "turn data parallelism off"
# out of memory (a capped CPU backend: cpu_memory_mb): both replicas halve their slice
# together, with accumulation making up the rest, and still end with the weights of
# one replica of batch 64
job "$tmp/rep2-roomy" plain "$acc, \"batch_size\": 64, \"replicas\": 2, \"cpu_memory_mb\": 100000"
run "$tmp/rep2-roomy"
used=$(python3 "$lib" mem-in-use "$tmp/rep2-roomy.log")
cap=$(python3 -c "print(round(${used:-0} * 0.85, 4))")
job "$tmp/rep2-mem" plain "$acc, \"batch_size\": 64, \"replicas\": 2, \"cpu_memory_mb\": $cap"
run "$tmp/rep2-mem"
check "replicas: out of memory at ${used:-?} MiB, capped at $cap MiB" python3 "$lib" halved "$tmp/rep2-mem.log" 32
check "replicas: halved on out of memory" python3 "$lib" replicas \
    "$tmp/rep1.log" "$tmp/rep1/snapshot_iter_${last:-0}.cdw" "$tmp/rep1/snapshot_iter_${mid:-0}.cdw" \
    "$tmp/rep2-mem.log" "$tmp/rep2-mem/snapshot_iter_${last:-0}.cdw"
# capped at just what the roomy run's nets use: it fits at batch 32 and runs to the end,
# so nothing the run needs later (the val and test splits' last, partial batches, the
# solver's state) is allocated after the batch was chosen
cap=$(python3 -c "print(round(${used:-0} + 0.001, 4))")
job "$tmp/rep2-exact" plain "$acc, \"batch_size\": 64, \"replicas\": 2, \"cpu_memory_mb\": $cap"
run "$tmp/rep2-exact"
check "replicas: capped at what the nets use ($cap MiB), it fits and finishes" python3 "$lib" fits "$tmp/rep2-exact.log"
# snapshot and resume with 2 replicas: rank 0 saves, every replica continues from it
resume_case replicas plain '"random_seed": 9, "batch_size": 32, "replicas": 2, "learning_rate": 0.02'
# a replica that dies: the same images stored as PNG, record 40 damaged; in stored order
# (shuffle off) with batch 64 over 2 replicas, replica 1 reads positions 32..63 of the
# first batch, replica 0 never reaches record 40 before the run ends
mkdir -p "$tmp/dataset-png"
sed 's/"encoding": "none"/"encoding": "png"/' "$tmp/dataset/dataset.json" >"$tmp/dataset-png/dataset.json"
if "$worker" dataset "$tmp/dataset-png" >"$tmp/dataset-png.log" 2>&1 &&
        python3 "$lib" corrupt-record "$tmp/dataset-png/train.db" 40; then
    job "$tmp/rep-dies" plain "$acc, \"batch_size\": 64, \"replicas\": 2, \"shuffle\": false" "$tmp/dataset-png"
    run "$tmp/rep-dies"
    check "replicas: one dies, all stop" python3 "$lib" replica-died "$tmp/rep-dies.log" 1 2 40
else
    cat "$tmp/dataset-png.log"
    check "replicas: a PNG dataset to damage" false
fi
# asking for a GPU where there is none is an error, also on the data-parallel path
if ! nvidia-smi -L >/dev/null 2>&1; then
    refused rep-gpu '"batch_size": 64, "backend": "cuda", "force_data_parallel": true' "a GPU was asked for"
    refused rep-gpu2 '"batch_size": 64, "backend": "cuda", "replicas": 2' "a GPU was asked for"
fi
# a replica's thread crashes (SIGSEGV sent to it alone): the line before the end names it
job "$tmp/rep-crash" plain '"epochs": 4, "random_seed": 2, "batch_size": 32, "replicas": 2'
python3 "$lib" run-crash "$worker" "$tmp/rep-crash" "$tmp/rep-crash.log" cd-replica-1
check "replicas: one crashes" python3 "$lib" crashed "$tmp/rep-crash.log" "replica 1 of 2"

# ---- (d) a diverging run --------------------------------------------------------------

# 1000 is the largest learning rate train.json accepts; with momentum 0.9 the weights
# overflow within the first epoch
job "$tmp/nan" plain '"epochs": 2, "random_seed": 3, "learning_rate": 1000, "lr_policy": {"policy": "fixed"}'
run "$tmp/nan"
check "NaN stop" python3 "$lib" nan "$tmp/nan" "$tmp/nan.log"

# ---- (e) bad train.json values --------------------------------------------------------

bad_value() {
    local key=$1 fields=$2 d=$tmp/bad-$3
    job "$d" plain "\"epochs\": 1, $fields"
    run "$d"
    check "bad $key" python3 "$lib" bad-value "$d" "$d.log" "$key"
}
bad_value solver_type '"solver_type": "FOO"' solver
bad_value lr_policy.policy '"lr_policy": {"policy": "cosine"}' policy
bad_value batch_size '"batch_size": 0' batch
bad_value epochs '"epochs": "ten"' epochs
bad_value use_mean '"use_mean": "median"' mean
bad_value learning_rate '"learning_rate": -0.1' lr

train_finish
