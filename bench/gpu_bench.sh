#!/usr/bin/env bash
# Training throughput on one GPU, cdigits against PyTorch eager, side by side in one run:
# LeNet (28x28 gray, batch 64 and 512) and AlexNet (227x227 crops of 256x256 color
# images, batch 128), each in fp32, fp16 and bf16, with images per second, GPU
# utilization and the share of time spent waiting for data on each side, and their
# ratio (bench/torch_gpu_bench.py does the work; see its header for the details).
#
#   bench/gpu_bench.sh                 on a GPU machine (tests/gpu/run.sh runs it last)
#
# The worker: CDIGITS_WORKER, a carried build (CDIGITS_CARRY_DIR, made here with
# tests/gpu/make_carry.sh), or a CMake build in $CDIGITS_GPU_BUILD/cmake: the route of
# tests/gpu/run.sh's stage 2 (tests/gpu/env.sh). PyTorch: the first of
# CDIGITS_TORCH_PYTHON, python3 and /usr/bin/python3 that imports torch.
# Environment:
#   CDIGITS_GPU_BUILD     build folder (default build-gpu); data and jobs go to bench/ in it
#   CDIGITS_BENCH_CASES   net:batch:precision,... (default: all nine)
#   CDIGITS_BENCH_SCALE   iterations x scale (default 1: about 3 minutes on an H200)
#   CDIGITS_BENCH_DEADLINE  seconds: cases that would end past it are not started, and
#                         say so in the table (tests/gpu/run.sh sets it)
#   CDIGITS_GPU_REHEARSE  1: where there is no GPU, the whole path on one tiny CPU case
#                         with PyTorch on the CPU, its exit status that of the run
#
# Without a GPU it says "no GPU: skipped"; with a worker given (CDIGITS_WORKER or
# CDIGITS_CARRY_DIR) it first runs the whole path on the CPU, tiny, as a smoke test.
# Exit status 0 when every case ran on cdigits's side (or skipped), 1 otherwise. The last
# line is a one-line summary.
BENCH_NAME=gpu_bench
t_begin=$(date +%s) # CDIGITS_BENCH_DEADLINE counts from here
# shellcheck source=bench/gpu_bench_lib.bash
source "$(dirname "$0")/gpu_bench_lib.bash"

# python with torch, and whether it sees a GPU (with the library path PyTorch had before
# env.sh, as torch_gpu_bench.py runs it)
torch_py="" torch_cuda=0
probe_err=$(mktemp)
trap 'rm -f "$probe_err"' EXIT
for p in "${CDIGITS_TORCH_PYTHON:-}" python3 /usr/bin/python3; do
    [[ -n $p ]] && command -v "$p" >/dev/null 2>&1 || continue
    if ! v=$(LD_LIBRARY_PATH=$CDIGITS_TORCH_LD_LIBRARY_PATH "$p" -c \
        'import torch; print(torch.__version__, int(torch.cuda.is_available()))' 2>"$probe_err"); then
        ((ngpu > 0)) && grep -q . "$probe_err" &&
            say "$p cannot import torch: $(tail -1 "$probe_err")"
        continue
    fi
    torch_py=$p
    [[ ${v#* } == 1 ]] && torch_cuda=1
    say "PyTorch ${v% *} in $p (CUDA: $([[ $torch_cuda == 1 ]] && echo yes || echo no))"
    break
done

work=$build/bench
mkdir -p "$work"

if ((ngpu == 0)) && [[ ${CDIGITS_GPU_REHEARSE:-0} == 1 ]]; then
    # tests/gpu/run.sh's rehearsal: the whole path and its table, tiny, on the CPU
    worker=""
    find_worker || { say "rehearsal: no cdigits-worker (CDIGITS_WORKER or CDIGITS_CARRY_DIR)"; exit 1; }
    [[ -n $torch_py ]] || { say "rehearsal: no python imports torch (apt-get install python3-torch)"; exit 1; }
    say "rehearsal: the CPU stands in for the GPU (a tiny case: the bookkeeping, not a benchmark)"
    run_table "torch_gpu_bench: " run --worker "$worker" --work "$work" --torch-python "$torch_py" \
        --device cpu
fi
if ((ngpu == 0)); then
    worker=""
    if [[ -n ${CDIGITS_WORKER:-} || -n ${CDIGITS_CARRY_DIR:-} ]] && find_worker && [[ -n $torch_py ]]; then
        say "no GPU here: the whole path once on the CPU, tiny (a smoke test, not a benchmark)"
        smoke_run run --worker "$worker" --work "$work" --torch-python "$torch_py"
    fi
    say "no GPU: skipped"
    exit 0
fi
if [[ -z $torch_py || $torch_cuda != 1 ]]; then
    say "no PyTorch with CUDA (${torch_py:-no python3 imports torch}): skipped"
    exit 0
fi
need_worker "carry one with tests/gpu/make_carry.sh, or install jansson, libpng, libjpeg and OpenBLAS for a CMake build"
"$worker" --version || { say "$worker does not start (libraries? see above)"; exit 1; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null | head -1
args=(--worker "$worker" --work "$work" --torch-python "$torch_py"
      --scale "${CDIGITS_BENCH_SCALE:-1}")
[[ -n ${CDIGITS_BENCH_CASES:-} ]] && args+=(--cases "$CDIGITS_BENCH_CASES")
# the deadline less what the checks above took (a first import of torch can take 15 s)
if [[ -n ${CDIGITS_BENCH_DEADLINE:-} ]]; then
    left=$((CDIGITS_BENCH_DEADLINE - ($(date +%s) - t_begin)))
    args+=(--deadline "$((left > 1 ? left : 1))")
fi
run_table "torch_gpu_bench: " run "${args[@]}"
