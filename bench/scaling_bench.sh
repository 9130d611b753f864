#!/usr/bin/env bash
# Data-parallel scaling on several GPUs: cdigits training AlexNet (default; any
# net:batch-per-GPU:precision with CDIGITS_SCALING_CASE) on 1, 2, 4, ... of this
# machine's GPUs with the batch per GPU fixed, images per second on N GPUs over N times
# the one-GPU figure of the same run, with the gradients averaged in buckets during the
# backward pass and in one bucket after it (bench/torch_gpu_bench.py scaling does the work).
#
#   bench/scaling_bench.sh            on a machine with two or more GPUs
#
# The worker: as bench/gpu_bench.sh (CDIGITS_WORKER, CDIGITS_CARRY_DIR or a CMake build
# in $CDIGITS_GPU_BUILD/cmake). With fewer than two GPUs it says "skipped"; with a worker
# given and no GPU it first runs the path with two CPU replicas, tiny (a smoke test).
# Environment: CDIGITS_GPU_BUILD (default build-gpu), CDIGITS_SCALING_CASE,
# CDIGITS_BENCH_SCALE (iterations x scale). The last line is a one-line summary.
BENCH_NAME=scaling_bench
# shellcheck source=bench/gpu_bench_lib.bash
source "$(dirname "$0")/gpu_bench_lib.bash"

work=$build/scaling
mkdir -p "$work"
case=${CDIGITS_SCALING_CASE:-alexnet:128:bf16}

if ((ngpu < 2)); then
    worker=""
    if ((ngpu == 0)) && [[ -n ${CDIGITS_WORKER:-} || -n ${CDIGITS_CARRY_DIR:-} ]] && find_worker; then
        say "no GPU here: the path once with two CPU replicas, tiny (a smoke test, not a benchmark)"
        smoke_run scaling --worker "$worker" --work "$work" --gpus 2 --case lenet:16:fp32
    fi
    say "$ngpu GPU$( ((ngpu == 1)) || echo s) here, scaling needs two or more: skipped"
    exit 0
fi
need_worker "carry one with tests/gpu/make_carry.sh"
nvidia-smi topo -m 2>/dev/null | head -$((ngpu + 1))
run_table "scaling: " scaling --worker "$worker" --work "$work" --gpus "$ngpu" --case "$case" \
    --scale "${CDIGITS_BENCH_SCALE:-1}"
