#!/usr/bin/env bash
# Training throughput of LeNet on Fashion-MNIST (28x28 gray, batch 64) with the data
# pipeline included, cdigits's CPU backend against PyTorch (Debian's python3-torch) on
# the same machine in the same run, with the same network, solver and batch.
#
#   bench/bench_train.sh [BUILD_DIR]      (default build; needs cdigits-worker built)
#   CDIGITS_BENCH_ITERS=300 CDIGITS_BENCH_BATCH=64
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
iters=${CDIGITS_BENCH_ITERS:-300}
batch=${CDIGITS_BENCH_BATCH:-64}
worker="$build/cdigits-worker"
work="$build/bench-data"
fm=/usr/share/datasets/fashion-mnist
[[ -x "$worker" ]] || { echo "bench_train: build $worker first"; exit 1; }
[[ -f "$fm/train-images-idx3-ubyte.gz" ]] || { echo "bench_train: apt-get install dataset-fashion-mnist"; exit 1; }

if [[ ! -f "$work/dataset/stats.json" ]]; then
  rm -rf "$work" && mkdir -p "$work/dataset"
  "$worker" import-idx --images "$fm/train-images-idx3-ubyte.gz" --labels "$fm/train-labels-idx1-ubyte.gz" \
    --out "$work/images" >/dev/null
  cat >"$work/dataset/dataset.json" <<JSON
{"folder_train": "$(pwd)/$work/images", "pct_val": 25, "channels": 1, "width": 28, "height": 28,
 "encoding": "none"}
JSON
  "$worker" dataset "$work/dataset" >/dev/null
fi

job="$work/train"
rm -rf "$job" && mkdir -p "$job"
cp models/lenet.prototxt "$job/network.prototxt"
cat >"$job/train.json" <<JSON
{"dataset_dir": "$(pwd)/$work/dataset", "epochs": 30, "random_seed": 1, "batch_size": $batch,
 "max_iterations": $((iters + 100)), "validation_interval": 0, "snapshot_interval": 0}
JSON
# Train loss lines come 8 times per epoch; skip the first window (warm-up), average the rest.
"$worker" train "$job" >"$job/out.jsonl" 2>/dev/null
ours=$(python3 - "$job/out.jsonl" <<'PY'
import json, sys
ips, wait = [], []
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o.get("type") == "metric" and o["phase"] == "train":
        if o["name"] == "images_per_sec": ips.append(o["value"])
        if o["name"] == "data_wait": wait.append(o["value"])
ips, wait = ips[1:] or ips, wait[1:] or wait
print("%.1f %.4f" % (sum(ips) / len(ips), sum(wait) / len(wait)))
PY
)
theirs=$(/usr/bin/python3 bench/torch_lenet.py --batch "$batch" --iters "$iters")
python3 - "$ours" "$theirs" "$batch" <<'PY'
import json, sys
ips, wait = map(float, sys.argv[1].split())
t = json.loads(sys.argv[2])
print("LeNet training, Fashion-MNIST 28x28, batch %s, data pipeline included, %s" % (sys.argv[3], "CPU"))
print("  %-28s %10s %10s" % ("", "images/s", "data wait"))
print("  %-28s %10.0f %9.1f%%" % ("cdigits (cpu backend)", ips, 100 * wait))
print("  %-28s %10.0f %9.1f%%" % (t["framework"] + " (%d threads)" % t["threads"], t["images_per_sec"], 100 * t["data_wait"]))
print("  ratio cdigits / pytorch: %.2f" % (ips / t["images_per_sec"]))
PY
