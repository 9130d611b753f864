# What bench/gpu_bench.sh and bench/scaling_bench.sh share, sourced with BENCH_NAME set:
# root (the working folder from here on), build (CDIGITS_GPU_BUILD, default build-gpu),
# jobs, say, tests/gpu/env.sh (gpu_count, find_worker), ngpu, and the runs of
# bench/torch_gpu_bench.py. The caller sets work before calling smoke_run or run_table.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
build=${CDIGITS_GPU_BUILD:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
jobs=$(nproc 2>/dev/null || echo 4)
say() { echo "$BENCH_NAME: $*"; }

# shellcheck source=tests/gpu/env.sh
source "$root/tests/gpu/env.sh"

# shellcheck disable=SC2034 # read by the scripts that source this
ngpu=$(gpu_count)

# need_worker HOW: sets worker (find_worker), or says there is none (HOW: how to get
# one) and exits: 0 (skipped), or 1 where a CMake build of it failed.
need_worker() {
    worker=""
    find_worker
    local rc=$?
    if ((rc != 0)); then
        say "no cdigits-worker ($1): skipped"
        exit $((rc == 3 ? 1 : 0))
    fi
}

# smoke_run ARGS...: torch_gpu_bench.py ARGS once, tiny, on the CPU; a failure is said
# (its output is above), not fatal.
smoke_run() {
    python3 "$root/bench/torch_gpu_bench.py" "$@" --device cpu || say "the smoke run failed (above)"
}

# run_table PREFIX ARGS...: torch_gpu_bench.py ARGS, its table kept in $work/last.txt;
# says its last line (the summary, less PREFIX) and exits with its status.
# shellcheck disable=SC2154 # work is the caller's
run_table() {
    local prefix=$1 rc line
    shift
    PYTHONUNBUFFERED=1 python3 "$root/bench/torch_gpu_bench.py" "$@" | tee "$work/last.txt"
    rc=${PIPESTATUS[0]}
    line=$(tail -1 "$work/last.txt")
    say "${line#"$prefix"}"
    exit "$rc"
}
