#!/usr/bin/env bash
# Training throughput with the data pipeline included, cdigits's CPU backend against
# PyTorch (Debian's python3-torch) on the same machine, with the same network, solver
# and batch, both with their data in memory as uint8. Two networks:
#   lenet    models/lenet.prototxt on Fashion-MNIST (28x28 gray), batch 64
#   alexnet  models/alexnet.prototxt on 1,280 Fashion-MNIST images scaled to 256x256
#            color, random 227x227 crops and mirroring, batch 32
# PyTorch runs in the configurations that matter on a small CPU:
#   a  1 thread, oneDNN on
#   b  one thread per core, oneDNN on
#   c  one thread per core, oneDNN off (torch.backends.mkldnn.enabled = False), OpenBLAS
#      single-threaded (OPENBLAS_NUM_THREADS=1: PyTorch's threads split the batch)
# cdigits and each configuration run CDIGITS_BENCH_REPEATS times, interleaved in rounds
# (cdigits, a, b, c, cdigits, a, b, c, ...), so that load from other work on the machine
# falls on all of them alike. PyTorch's best configuration is the one with the highest
# median; the ratio is the median of the per-round ratios (cdigits of round r over that
# configuration's run of round r). Each run's figure comes with the share of the
# machine's CPU that other processes took during it (a run that lost some is not
# comparable). OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE and the like are passed through to
# both sides as they are set.
#
# With CDIGITS_BENCH_API=1 cdigits trains through its REST API instead: a server on a
# free loopback port (needs cdigits built too), the same dataset created through the API
# once, then each round posts a model for CDIGITS_BENCH_EPOCHS epochs (1) and times it
# from the POST to Done (bench/api_train.py): the worker's start, every validation and
# snapshot included, against PyTorch's steady rate.
#
# With CDIGITS_BENCH_CLASSIFY=1 it times inference instead: cdigits-worker classify --list
# over CDIGITS_BENCH_IMAGES (10,000) of the dataset's PNG files at the same batch, the
# whole process timed (its start, the model's loading and every PNG's decoding
# included; the files in the page cache, after one untimed run), against PyTorch's eval
# (--eval: forward and softmax under no_grad) over as many images held in memory as uint8.
#
#   bench/bench_train.sh [BUILD_DIR]      (default build; needs cdigits-worker built)
#   CDIGITS_BENCH_NET=lenet|alexnet (lenet) CDIGITS_BENCH_REPEATS=3
#   CDIGITS_BENCH_ITERS (lenet 300, alexnet 12) CDIGITS_BENCH_BATCH (lenet 64, alexnet 32)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[[ -d "$build" ]] || { echo "bench_train: no folder $build: build cdigits-worker there first"; exit 1; }
build=$(cd "$build" && pwd) # absolute: the job files below name paths under it
net=${CDIGITS_BENCH_NET:-lenet}
# per network: name|default batch|default measured iterations|PyTorch warm-up iterations|
# images per class in the dataset (all: 0)|channels|side
case "$net" in
  lenet) spec="LeNet|64|300|20|0|1|28" ;;
  alexnet) spec="AlexNet|32|12|3|128|3|256" ;;
  *) echo "bench_train: CDIGITS_BENCH_NET is lenet or alexnet, not '$net'"; exit 1 ;;
esac
IFS='|' read -r title batch0 iters0 torch_warm per_class channels side <<<"$spec"
iters=${CDIGITS_BENCH_ITERS:-$iters0}
batch=${CDIGITS_BENCH_BATCH:-$batch0}
repeats=${CDIGITS_BENCH_REPEATS:-3}
worker="$build/cdigits-worker"
work="$build/bench-data"
[[ "$net" == lenet ]] || work="$build/bench-data-$net"
fm=/usr/share/datasets/fashion-mnist
torch_py=/usr/bin/python3
cores=$(nproc)
[[ -x "$worker" ]] || { echo "bench_train: build $worker first"; exit 1; }
[[ -f "$fm/train-images-idx3-ubyte.gz" ]] || { echo "bench_train: apt-get install dataset-fashion-mnist"; exit 1; }
"$torch_py" -c 'import torch' 2>/dev/null || { echo "bench_train: apt-get install python3-torch"; exit 1; }
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "bench_train: CDIGITS_BENCH_REPEATS must be a positive integer"; exit 1; }

# The dataset: Fashion-MNIST's training images as PNG folders, all of them or the first
# per_class of each class (symlinked), at side x side with the given channels.
if [[ ! -f "$work/dataset/stats.json" ]]; then
  rm -rf "$work" && mkdir -p "$work/dataset"
  "$worker" import-idx --images "$fm/train-images-idx3-ubyte.gz" --labels "$fm/train-labels-idx1-ubyte.gz" \
    --out "$work/images" >/dev/null
  folder="$work/images"
  if ((per_class > 0)); then
    folder="$work/subset"
    for d in "$work/images"/*/; do
      c=$(basename "$d") && mkdir -p "$folder/$c"
      find "$d" -name '*.png' | sort >"$work/list"
      head -n "$per_class" "$work/list" | while read -r f; do ln -s "$f" "$folder/$c/$(basename "$f")"; done
    done
  fi
  cat >"$work/dataset/dataset.json" <<JSON
{"folder_train": "$folder", "pct_val": 25, "channels": $channels, "width": $side, "height": $side,
 "resize_mode": "squash", "encoding": "none"}
JSON
  "$worker" dataset "$work/dataset" >/dev/null
fi

job="$work/train"
rm -rf "$job" && mkdir -p "$job"
cp "models/$net.prototxt" "$job/network.prototxt"
# The worker reports images/s once per window of min(iterations per epoch / 8,
# ceil(5000 / batch)) iterations (79 at batch 64); the first window is the warm-up and is
# left out, the next $iters iterations are measured (a whole number of windows). PyTorch's
# peer warms up for $torch_warm iterations.
ntrain=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["splits"]["train"])' "$work/dataset/stats.json")
warm=$(( (ntrain + batch - 1) / batch / 8 )); by_images=$(( (5000 + batch - 1) / batch ))
(( by_images < warm )) && warm=$by_images
(( warm < 1 )) && warm=1
torch_limit=$ntrain
cat >"$job/train.json" <<JSON
{"dataset_dir": "$work/dataset", "epochs": 30, "random_seed": 1, "batch_size": $batch,
 "max_iterations": $((warm + iters)), "validation_interval": 0, "snapshot_interval": 0}
JSON

classify=${CDIGITS_BENCH_CLASSIFY:-0}
n_classify=${CDIGITS_BENCH_IMAGES:-10000}
api=${CDIGITS_BENCH_API:-0}
[[ "$api" == 1 && "$classify" == 1 ]] && { echo "bench_train: set CDIGITS_BENCH_API or CDIGITS_BENCH_CLASSIFY, not both"; exit 1; }
if [[ "$classify" == 1 ]]; then
  [[ "$n_classify" =~ ^[1-9][0-9]*$ ]] || { echo "bench_train: CDIGITS_BENCH_IMAGES must be a positive integer"; exit 1; }
  # a model to classify with: the network after train.json's max_iterations
  "$worker" train "$job" >"$job/out.jsonl" 2>"$job/err.log" || { cat "$job/err.log" >&2; exit 1; }
  python3 bench/image_list.py "$work/dataset/dataset.json" "$n_classify" >"$work/classify.list"
  # one untimed run first, as PyTorch's side warms up: every round then reads the PNG
  # files from the page cache (10,000 files read from disk took 1.5-1.7 s a run against
  # 0.65-0.69 s cached) and finds the worker's binary and libraries loaded
  "$worker" classify --model "$job" --list "$work/classify.list" --batch "$batch" --jsonl \
    >"$job/classify.jsonl" 2>"$job/err.log" || { cat "$job/err.log" >&2; exit 1; }
  torch_limit=$n_classify torch_eval=--eval
fi
epochs=${CDIGITS_BENCH_EPOCHS:-1}
if [[ "$api" == 1 ]]; then
  [[ -x "$build/cdigits" ]] || { echo "bench_train: CDIGITS_BENCH_API=1 needs $build/cdigits built"; exit 1; }
  [[ "$epochs" =~ ^[1-9][0-9]*$ ]] || { echo "bench_train: CDIGITS_BENCH_EPOCHS must be a positive integer"; exit 1; }
  SRC=$(pwd) BENCH_NAME=bench_train BUILD=$build
  # shellcheck source=bench/http_bench_lib.bash
  . bench/http_bench_lib.bash
  T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-bench-XXXXXX")
  trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null; rm -rf "$T"' EXIT
  folder=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["folder_train"])' "$work/dataset/dataset.json")
  BENCH_DATA_ROOT=$folder bench_serve bench --worker "$build/cdigits-worker"
  api_ds=$(curl -s -b "$J" -X POST "$B/datasets/images/classification/json" -F folder_train="$folder" \
    -F encoding=none -F resize_channels="$channels" -F resize_width="$side" -F resize_height="$side" \
    -F resize_mode=squash -F folder_pct_val=25 -F dataset_name="bench-$net" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
  for _ in $(seq 6000); do
    st=$(curl -s "$B/jobs/$api_ds/status" | python3 -c 'import json, sys; print(json.load(sys.stdin)["status"])')
    [[ "$st" == Done || "$st" == Error ]] && break
    sleep 0.1
  done
  [[ "$st" == Done ]] || { echo "bench_train: the API's dataset ended $st"; tail "$T/server.log"; exit 1; }
  api_train=$(curl -s "$B/datasets/$api_ds/json" | python3 -c 'import json, sys; print(json.load(sys.stdin)["ParseFolderTasks"][0]["train_count"])')
fi

# Runs a command with its stdout into a file, and prints its wall seconds (from just
# before its start to its exit, so this interpreter's own start is not counted: a pyenv
# shim's python3 takes 0.3 s to start) and the share of the machine's CPU time (all
# cores, from /proc/stat, steal included) that went to anything else meanwhile.
others_py='
import os, resource, subprocess, sys, time
def stat():
    v = list(map(int, open("/proc/stat").readline().split()[1:9]))
    return sum(v), v[3] + v[4]
out = open(sys.argv[1], "w")
t0, i0 = stat()
w0 = time.perf_counter()
rc = subprocess.call(sys.argv[2:], stdout=out)
wall = time.perf_counter() - w0
t1, i1 = stat()
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
own = (ru.ru_utime + ru.ru_stime) * os.sysconf("SC_CLK_TCK")
print("%.6f %.3f" % (wall, max(0.0, ((t1 - t0) - (i1 - i0) - own) / max(1, t1 - t0))))
sys.exit(rc)
'

# One cdigits run: prints {"images_per_sec", "data_wait", "iters", "others"} over the train
# metric windows after the first, each window weighted by its time.
run_cdigits() {
  if [[ "$classify" == 1 ]]; then
    local timed
    timed=$(python3 -c "$others_py" "$job/classify.jsonl" "$worker" classify --model "$job" \
      --list "$work/classify.list" --batch "$batch" --jsonl 2>"$job/err.log") || { cat "$job/err.log" >&2; return 1; }
    python3 -c 'import json, sys; n, t, o = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(json.dumps({"images_per_sec": n / t, "data_wait": 0.0, "iters": 0, "wall": t, "others": o}))' \
      "$n_classify" "${timed%% *}" "${timed#* }"
    return
  fi
  if [[ "$api" == 1 ]]; then
    python3 bench/api_train.py "$B" "$api_ds" "$PID" "$net" "$epochs" "$batch" "$api_train"
    return
  fi
  local timed others
  timed=$(python3 -c "$others_py" "$job/out.jsonl" "$worker" train "$job" 2>"$job/err.log") ||
    { cat "$job/err.log" >&2; return 1; }
  others=${timed#* }
  python3 - "$job/out.jsonl" "$batch" "$others" <<'PY'
import json, sys
batch = int(sys.argv[2])
win = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o.get("type") == "metric" and o.get("phase") == "train" and o["name"] in ("images_per_sec", "data_wait"):
        win.setdefault(o["iteration"], {})[o["name"]] = o["value"]
ends = sorted(win)
if len(ends) < 2:
    sys.exit("bench_train: cdigits reported fewer than two metric windows")
images = seconds = waited = 0.0
for prev, end in zip(ends, ends[1:]):
    n = (end - prev) * batch
    t = n / win[end]["images_per_sec"]
    images, seconds, waited = images + n, seconds + t, waited + t * win[end]["data_wait"]
print(json.dumps({"images_per_sec": images / seconds, "data_wait": waited / seconds,
                  "iters": ends[-1] - ends[0], "others": float(sys.argv[3])}))
PY
}

# PyTorch's configurations: name|environment added for that run|flags
configs=("a||--threads 1 --mkldnn on"
         "b||--threads $cores --mkldnn on"
         "c|OPENBLAS_NUM_THREADS=1|--threads $cores --mkldnn off")
run_torch() { # env flags: prints torch_train.py's JSON line with "others" added
  local envv flags timed others
  read -r -a envv <<<"$1"
  read -r -a flags <<<"$2"
  timed=$(env ${envv[@]+"${envv[@]}"} python3 -c "$others_py" "$work/torch.json" \
    "$torch_py" bench/torch_train.py --net "$net" --limit "$torch_limit" --batch "$batch" --iters "$iters" \
    --warmup "$torch_warm" "${flags[@]}" ${torch_eval:+"$torch_eval"})
  others=${timed#* }
  python3 -c 'import json, sys; o = json.load(open(sys.argv[1])); o["others"] = float(sys.argv[2]); print(json.dumps(o))' \
    "$work/torch.json" "$others"
}

results="$work/results.jsonl"
: >"$results"
for ((r = 1; r <= repeats; r++)); do
  echo "bench_train: round $r/$repeats" >&2
  out=$(run_cdigits)
  printf '{"round": %d, "side": "cdigits", "run": %s}\n' "$r" "$out" >>"$results"
  for cfg in "${configs[@]}"; do
    IFS='|' read -r name envv flags <<<"$cfg"
    out=$(run_torch "$envv" "$flags")
    printf '{"round": %d, "side": "%s", "run": %s}\n' "$r" "$name" "$out" >>"$results"
  done
done

python3 - "$results" "$batch" "$iters" "$cores" "$title" "$side" "$api" "$epochs" "$classify" "$n_classify" <<'PY'
import json, os, statistics, sys
path, batch, iters, cores, title, side, api, epochs, classify, n_classify = sys.argv[1:11]
runs = {}
for line in open(path):
    o = json.loads(line)
    runs.setdefault(o["side"], {})[o["round"]] = o["run"]
rounds = sorted(runs["cdigits"])
version = next(iter(runs["a"].values()))["framework"].replace("pytorch", "PyTorch")
label = {"cdigits": ("cdigits, CPU backend, REST API end to end" if api == "1" else
                     "cdigits, CPU backend, classify --list" if classify == "1" else
                     "cdigits, CPU backend (%s threads)" % cores),
         "a": "%s a: 1 thread, oneDNN" % version,
         "b": "%s b: %s threads, oneDNN" % (version, cores),
         "c": "%s c: %s threads, no oneDNN, OpenBLAS 1 thread" % (version, cores)}
med = {s: statistics.median(r["images_per_sec"] for r in runs[s].values()) for s in runs}
env = ", ".join("%s=%s" % (k, os.environ[k]) for k in sorted(os.environ) if k.startswith("OPENBLAS_"))
measured = sorted({r["iters"] for name, side in runs.items() for r in side.values()
                   if name != "cdigits" or api != "1"})
data = ("Fashion-MNIST 28x28" if title == "LeNet" else
        "Fashion-MNIST at %sx%s color, random 227x227 crops and mirroring" % (side, side))
if classify == "1":
    print("%s inference, %s, batch %s, %s images, CPU (%s cores), %d interleaved rounds" % (
        title, data, batch, n_classify, cores, len(rounds)))
    print("cdigits: cdigits-worker classify --list, the whole process timed (start, model load, PNG decoding "
          "included, the files in the page cache after one untimed run; median %.2f s); "
          "PyTorch: eval forward and softmax over uint8 images held in memory" % (
              statistics.median(r["wall"] for r in runs["cdigits"].values())))
else:
    print("%s training, %s, batch %s, data in memory and its pipeline included, "
          "CPU (%s cores), %d interleaved rounds of %s measured iterations after warm-up" % (
              title, data, batch, cores, len(rounds), "/".join(map(str, measured))))
if api == "1":
    print("cdigits through its REST API: a model of %s epoch(s) posted on the dataset, timed from the POST "
          "to Done (worker start, validation and snapshots included): median %.1f s; PyTorch's rates are "
          "its steady ones" % (epochs, statistics.median(r["wall"] for r in runs["cdigits"].values())))
print("environment as set: %s" % (env or "no OPENBLAS_* variables"))
lw = max(map(len, label.values()))
print("  %-*s %9s %13s %9s  %s" % (lw, "", "median/s", "spread", "data wait",
                                   "per run: images/s (CPU share taken by other processes)"))
def rate(v):  # images/s: a decimal where the rate is small (AlexNet's)
    return "%.0f" % v if v >= 100 else "%.1f" % v
for s in ("cdigits", "a", "b", "c"):
    v = [runs[s][r]["images_per_sec"] for r in rounds]
    w = statistics.median(runs[s][r]["data_wait"] for r in rounds)
    print("  %-*s %9s %6s-%-6s %8.1f%%  %s" % (lw, label[s], rate(med[s]), rate(min(v)), rate(max(v)), 100 * w,
        " ".join("%s (%.0f%%)" % (rate(runs[s][r]["images_per_sec"]), 100 * runs[s][r]["others"]) for r in rounds)))
best = max(("a", "b", "c"), key=lambda s: med[s])
ratios = [runs["cdigits"][r]["images_per_sec"] / runs[best][r]["images_per_sec"] for r in rounds]
print("  PyTorch best by median: %s; per-round ratios cdigits / %s: %s" % (
    best, best, " ".join("%.2f" % x for x in ratios)))
# a round where something else took CPU time is not comparable: say which rounds were clean
clean = [r for r in rounds if all(runs[s][r]["others"] < 0.05 for s in runs)]
print("  rounds where no run lost 5%% or more of the CPU to other processes: %s" % (
    ", ".join("%d (%.2f)" % (r, ratios[rounds.index(r)]) for r in clean) or "none"))
print("ratio cdigits / pytorch best: %.2f (median of %d interleaved runs, spread %.2f-%.2f)" % (
    statistics.median(ratios), len(ratios), min(ratios), max(ratios)))
PY
