#!/usr/bin/env bash
# Builds and checks everything GPU-side on a machine with a GPU, CUDA (nvcc), cuDNN,
# NCCL and python3, and none of the project's other libraries (no jansson, OpenBLAS,
# libpng): it builds only what it needs, from the sources, or runs what was carried.
#
#   stage 1  the op test: a carried test_gpu_ops (CDIGITS_CARRY_DIR, made here by
#            tests/gpu/make_carry.sh), or one built from src/backend/cuda, kernels, the
#            CPU backend (the reference, with a plain C sgemm instead of OpenBLAS),
#            src/common and tests/gpu/test_gpu_ops.c for this GPU only; every backend
#            op compared with the CPU; the kernels' register counts (ptxas) checked
#            against their launch sizes.
#   stage 2  LeNet trained on both backends with the same seed on a small synthetic
#            digit set, loss curves and accuracy compared; on the GPU once more through
#            the data-parallel path with one NCCL rank, compared with the plain run; and
#            in fp16 (loss scaling on) and bf16, compared with fp32
#            (tests/gpu/lenet_compare.py). Needs cdigits-worker: carried, or built with
#            CMake when jansson, libpng, libjpeg and OpenBLAS are installed.
#   stage 3  the throughput benchmark against PyTorch (bench/gpu_bench.sh: LeNet and
#            AlexNet, fp32/fp16/bf16, images/s, GPU utilization, data wait) with the
#            worker of stage 2, sized to the time left.
#
# The whole run, summary included, ends within CDIGITS_GPU_BUDGET seconds (480): each
# stage gets its limit or what is left, whichever is less, and a stage cut off is
# killed with everything it started. A TERM or INT from outside (an outer time limit)
# stops the running stage the same way and still prints the summary.
#
# CDIGITS_GPU_REHEARSE=1 runs the same three stages where there is no GPU, with the CPU
# backend standing in for the GPU: stage 1 every op CPU against CPU (and the register
# check), stage 2 the comparisons with CPU runs in the GPU runs' places, stage 3 the
# benchmark's bookkeeping on a tiny CPU case with PyTorch on the CPU. CI runs it
# (scripts/test.sh), so a missing library, a link error, a wrong path or a broken table
# shows before a GPU machine is lent.
#
# Without a GPU (and without CDIGITS_GPU_REHEARSE) stage 1 still builds, says "no GPU:
# skipped" and the script exits 0; where nvidia-smi lists a GPU that CUDA cannot use,
# that is a failure.
# Environment:
#   CDIGITS_GPU_BUILD     build folder (default build-gpu)
#   CDIGITS_CARRY_DIR     folder with cdigits-worker, test_gpu_ops and lib/ (their .so
#                         files), built elsewhere (tests/gpu/make_carry.sh)
#   CUDNN_ROOT, NCCL_ROOT   where cuDNN and NCCL are, when python3 and the usual places
#                         don't know
#   CDIGITS_GPU_STAGES    "1 2 3" (default); "1" for the op test only
#   CDIGITS_GPU_TIMEOUTS  the three stages' limits in seconds (default "90 120 240")
#   CDIGITS_GPU_BUDGET    the whole run's limit in seconds (default 480)
#   CDIGITS_GPU_STRICT    1: a stage skipped for want of a worker, PyTorch or a carried
#                         binary counts as a failure (for a run on a GPU machine, and
#                         the rehearsal)
#   CDIGITS_GPU_REHEARSE  1: the CPU stands in for the GPU (above)
#   OUT                   a folder: the logs and tables are copied there as well
# The last lines are the summary table, "run.sh: PASS" or "run.sh: FAIL", and
# "N passed, N failed" (the summary's rows). Exit status 0 when every stage that ran
# passed (or there is no GPU), 1 otherwise.
set -uo pipefail
export PYTHONUNBUFFERED=1

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
build=${CDIGITS_GPU_BUILD:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
stages=${CDIGITS_GPU_STAGES:-1 2 3}
jobs=$(nproc 2>/dev/null || echo 4)
t_start=$(date +%s)
budget=${CDIGITS_GPU_BUDGET:-480}
read -r t_ops t_lenet t_bench <<<"${CDIGITS_GPU_TIMEOUTS:-90 120 240}"
strict=${CDIGITS_GPU_STRICT:-0}
rehearse=${CDIGITS_GPU_REHEARSE:-0}
[[ $rehearse == 1 ]] && strict=1
cur=""
cur_log=""
child=""
watchdog=""
# seconds kept back from the budget for the summary and the kills
reserve=15

say() { echo "run.sh: $*"; }

# The summary: one row per stage, in the order the stages first reported; a later
# result for the same stage replaces the earlier (a failed build that gave way to the
# carried binary is not left as a FAIL).
row_names=()
declare -A row_text row_result
add() {
    local result=$2
    [[ $result == skip && $strict == 1 ]] && result=FAIL
    [[ -n ${row_text[$1]+x} ]] || row_names+=("$1")
    row_result[$1]=$result
    row_text[$1]=$(printf "%-8s | %-6s | %s" "$1" "$result" "$3")
    return 0
}
# keep LOG in $OUT too, when the caller gave one
keep() {
    [[ -n ${OUT:-} && -d ${OUT:-} && -f $1 ]] && cp "$1" "$OUT/${2:-$(basename "$1")}"
    return 0
}
finish() {
    trap - TERM INT
    local n passed=0 failed=0
    echo
    echo "== summary ($(($(date +%s) - t_start)) s of $budget)"
    {
        printf '%-8s | %-6s | %s\n' "stage" "result" "detail"
        for n in "${row_names[@]}"; do printf '%s\n' "${row_text[$n]}"; done
    } | tee "$build/summary.txt"
    keep "$build/summary.txt"
    for n in "${row_names[@]}"; do
        case ${row_result[$n]} in
        ok) passed=$((passed + 1)) ;;
        FAIL) failed=$((failed + 1)) ;;
        esac
    done
    if ((failed)); then echo "run.sh: FAIL"; else echo "run.sh: PASS"; fi
    echo "$passed passed, $failed failed"
    ((failed == 0))
    exit $?
}
# stop the running stage's process group: TERM, then KILL what is left
stop_child() {
    [[ -n ${watchdog:-} ]] && kill -KILL -- "-$watchdog" 2>/dev/null
    [[ -n $child ]] || return 0
    kill -TERM -- "-$child" 2>/dev/null
    local i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        kill -0 -- "-$child" 2>/dev/null || break
        sleep 0.2
    done
    kill -KILL -- "-$child" 2>/dev/null
    child=""
}
on_signal() {
    stop_child
    # what the stopped stage wrote so far
    keep "${cur_log:-}"
    [[ $cur == bench ]] && keep "$build/bench/last.txt" gpu_bench_table.txt
    add "${cur:-?}" FAIL "stopped by a signal (an outer time limit?) after $(($(date +%s) - t_start)) s"
    finish
}
trap on_signal TERM INT
mkdir -p "$build"

# the seconds a stage may run: its limit, or what is left of the budget
limit_for() {
    local left=$((budget - reserve - ($(date +%s) - t_start)))
    ((left < 1)) && left=1
    echo $(($1 < left ? $1 : left))
}

# bounded SECONDS LOG CMD...: runs CMD in a process group of its own with its output on
# the terminal and in LOG; past SECONDS the whole group is stopped. Returns CMD's status,
# or 124 when it was stopped. The shell waits with `wait`, so a TERM from outside is
# handled at once (on_signal), not after CMD ends.
bounded() {
    local secs=$1 log=$2 flag rc
    shift 2
    cur_log=$log
    flag=$(mktemp)
    rm -f "$flag"
    setsid bash -c 'set -o pipefail; "$@" 2>&1 | tee "$0"' "$log" "$@" &
    child=$!
    # the watchdog is a group of its own too, so its sleep goes with it
    setsid bash -c 'sleep "$0"; touch "$1"; kill -TERM -- "-$2"; sleep 2; kill -KILL -- "-$2"' \
        "$secs" "$flag" "$child" >/dev/null 2>&1 &
    watchdog=$!
    wait "$child"
    rc=$?
    kill -KILL -- "-$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    child=""
    if [[ -e $flag ]]; then
        rm -f "$flag"
        return 124
    fi
    return "$rc"
}

# CUDA, cuDNN, NCCL, the GPU, and find_worker
# shellcheck source=tests/gpu/env.sh
source "$root/tests/gpu/env.sh"
echo "== GPU"
gpu_env_report
[[ $rehearse == 1 ]] && say "rehearsal: the CPU backend stands in for the GPU"

# NCCL explains its own failures in this run's log; one rank in a VM whose only
# interface up is loopback needs to be told to use it
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
if [[ -z ${NCCL_SOCKET_IFNAME:-} ]]; then
    up=""
    for d in /sys/class/net/*; do
        [[ -e $d ]] || continue
        [[ $(basename "$d") == lo ]] && continue
        [[ $(cat "$d/operstate" 2>/dev/null) == up ]] && up+=" $(basename "$d")"
    done
    if [[ -z $up ]]; then
        export NCCL_SOCKET_IFNAME=lo
        say "no network interface but lo is up: NCCL_SOCKET_IFNAME=lo"
    fi
fi
say "NCCL_DEBUG=$NCCL_DEBUG${NCCL_SOCKET_IFNAME:+ NCCL_SOCKET_IFNAME=$NCCL_SOCKET_IFNAME}"

# ---- stage 1: the op test ---------------------------------------------------------------

stage1() {
    echo
    echo "== stage 1: the op test"
    local test_bin=""
    cur=build
    if [[ -n ${CDIGITS_CARRY_DIR:-} && -x ${CDIGITS_CARRY_DIR}/test_gpu_ops ]]; then
        # built where the project's libraries are, for this GPU's architecture: no
        # device time spent compiling
        test_bin=$CDIGITS_CARRY_DIR/test_gpu_ops
        export LD_LIBRARY_PATH="$CDIGITS_CARRY_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        local built_for
        built_for=$(cat "$CDIGITS_CARRY_DIR/arch" 2>/dev/null || echo "?")
        if [[ -n $gpu_cap && $built_for != "$gpu_cap" ]]; then
            say "the carried test_gpu_ops is for sm_$built_for, this GPU is sm_$gpu_cap: building here"
            test_bin=""
        else
            add build ok "carried test_gpu_ops (sm_$built_for)"
            check_kernel_regs "$CDIGITS_CARRY_DIR/ptxas.log"
        fi
    fi
    if [[ -z $test_bin ]]; then
        if [[ -n $nvcc && -n $cudnn_inc && -n $cudnn_lib && -n $nccl_inc && -n $nccl_lib &&
            -n $cublas_inc && -n $cublas_lib && -n $cublaslt_lib && -n $cudart_lib ]]; then
            build_ops_test || return 1
            test_bin=$build/test_gpu_ops
            check_kernel_regs "$build/ptxas.log"
        else
            say "missing: ${nvcc:-nvcc} ${cudnn_lib:-cuDNN} ${nccl_lib:-NCCL} ${cublas_lib:-cuBLAS}"
            add build FAIL "CUDA, cuDNN or NCCL not found (set CUDNN_ROOT / NCCL_ROOT), and nothing carried"
            return 1
        fi
    fi

    echo
    echo "== stage 1: every backend op against the CPU reference"
    local log=$build/test_gpu_ops.log rc secs
    cur=ops
    secs=$(limit_for "$t_ops")
    if [[ $rehearse == 1 ]]; then
        CD_GPU_OPS_SELF=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-$jobs} bounded "$secs" "$log" "$test_bin"
    else
        OMP_NUM_THREADS=${OMP_NUM_THREADS:-$jobs} bounded "$secs" "$log" "$test_bin"
    fi
    rc=$?
    keep "$log"
    if grep -q '^SKIP: no GPU' "$log"; then
        local listed
        listed=$(gpu_count)
        if ((listed > 0)); then
            # a GPU CUDA cannot use (driver, container, visibility): a failure
            add ops FAIL "nvidia-smi lists $listed GPU(s) but CUDA sees none: $(grep -m1 '^SKIP: no GPU' "$log")"
            return 2
        fi
        say "no GPU: skipped"
        add ops skip "no GPU: skipped ($(grep -m1 '^SKIP: no GPU' "$log"))"
        return 2
    fi
    local line
    line=$(grep -E '^test_gpu_ops: [0-9]+ passed' "$log" | tail -1)
    if [[ $rc -eq 0 && -n $line ]]; then
        add ops ok "${line#test_gpu_ops: }"
    elif [[ $rc -eq 124 ]]; then
        add ops FAIL "cut off after $secs s${line:+ (${line#test_gpu_ops: })}"
    else
        add ops FAIL "${line:-exit status $rc (crashed or aborted; the device error is above)}"
    fi
    return 0
}

# check_kernel_regs LOG: registers against launch sizes, from ptxas's report
check_kernel_regs() {
    if [[ ! -s $1 ]]; then
        add kernels FAIL "no register report ($1): ptxas -v output missing"
        return 0
    fi
    local out rc
    out=$(bash "$root/tests/gpu/kernel_regs.sh" "$1" 2>&1)
    rc=$?
    printf '%s\n' "$out"
    keep "$1" ptxas.log
    if ((rc == 0)); then
        add kernels ok "$(printf '%s\n' "$out" | tail -1)"
    else
        add kernels FAIL "$(printf '%s\n' "$out" | tail -1)"
    fi
}

build_ops_test() {
    local obj=$build/obj t0 f o
    t0=$(date +%s)
    mkdir -p "$obj"
    rm -f "$obj"/*.o "$obj"/*.log "$build/test_gpu_ops" "$build/ptxas.log"
    local inc=(-I"$root/include" -I"$root/kernels" -I"$root/src/backend/cuda" -I"$root/src/backend/cpu")
    # the compilers' own folders stay out of -I (it would reorder the C++ headers)
    for f in "$cuda_home/include" "$cublas_inc" "$cudnn_inc" "$nccl_inc"; do
        case $f in /usr/include | /usr/local/include) ;; *) inc+=(-I"$f") ;; esac
    done
    local defs=(-DCDIGITS_HAVE_CUDA=1 -DCDIGITS_VERSION=\"gpu-test\" -DCDIGITS_SOURCE_DIR=\"$root\")

    # the C sources the op test needs: src/common without the files that use jansson
    # (the JSON lines and the event hub: they include <jansson.h> or a header of ours
    # that does), which the GPU machine lacks and the op test does not need
    # (and src/core/augment.c: the augmentations' reference, which the CPU backend runs)
    local csrc=("$root"/src/backend/cuda/*.c "$root"/src/backend/cpu/*.c "$root/src/core/augment.c"
        "$root/tests/gpu/cblas_fallback.c" "$root/tests/gpu/test_gpu_ops.c")
    local json_headers
    json_headers=$(grep -l '#include <jansson.h>' "$root"/include/cdigits/*.h | xargs -n1 basename | tr '\n' '|')
    json_headers="jansson.h|${json_headers%|}"
    for f in "$root"/src/common/*.c; do
        if grep -qE "#include [<\"](cdigits/)?($json_headers)[>\"]" "$f"; then
            say "left out (uses jansson): src/common/$(basename "$f")"
        else
            csrc+=("$f")
        fi
    done

    local gencode="-gencode=arch=compute_$arch,code=[sm_$arch,compute_$arch]"
    say "compiling ${#csrc[@]} C files and $(ls "$root"/kernels/*.cu | wc -l) CUDA files on $jobs cores"
    local pids=() names=() i=0
    for f in "$root"/kernels/*.cu; do
        o=$obj/cu_$(basename "$f" .cu)
        "$nvcc" -std=c++17 -O3 "$gencode" -Xptxas -v "${inc[@]}" "${defs[@]}" -Xcompiler=-Wall \
            -c "$f" -o "$o.o" >"$o.log" 2>&1 &
        pids+=($!)
        names+=("$f")
        while (($(jobs -rp | wc -l) >= jobs)); do sleep 0.1; done
    done
    for f in "${csrc[@]}"; do
        # the fallback cblas.h comes first, so <cblas.h> is ours even where OpenBLAS is installed
        o=$obj/c_$(basename "$(dirname "$f")")_$(basename "$f" .c)
        gcc -std=gnu11 -O2 -fopenmp -Wall -Wextra -Wno-unused-parameter -Wno-deprecated-declarations \
            -I"$root/tests/gpu/fallback" "${inc[@]}" "${defs[@]}" -c "$f" -o "$o.o" >"$o.log" 2>&1 &
        pids+=($!)
        names+=("$f")
        # keep at most $jobs compilers running
        while (($(jobs -rp | wc -l) >= jobs)); do sleep 0.1; done
    done
    local bad=0
    for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then
            echo "---- compile failed: ${names[$i]}"
            bad=1
        fi
    done
    cat "$obj"/cu_*.log | grep -E '^ptxas' >"$build/ptxas.log"
    if ((bad)); then
        cat "$obj"/*.log | grep -v '^ptxas' | grep -B2 -A6 -E 'error' | head -80
        add build FAIL "compile errors (above)"
        return 1
    fi
    cat "$obj"/*.log | grep -v '^ptxas' | grep -E 'warning|error' | sort -u | head -40

    local rpath=()
    for f in "${lib_dirs[@]}"; do rpath+=("-Wl,-rpath,$f"); done
    if ! g++ -fopenmp -o "$build/test_gpu_ops" "$obj"/*.o "$cudart_lib" "$cublas_lib" "$cublaslt_lib" \
        "$cudnn_lib" "$nccl_lib" -lm -ldl -lrt -lpthread "${rpath[@]}" >"$obj/link.log" 2>&1; then
        head -60 "$obj/link.log"
        add build FAIL "link errors (above)"
        return 1
    fi
    echo "$arch" >"$build/arch"
    say "built $build/test_gpu_ops in $(($(date +%s) - t0)) s"
    add build ok "test_gpu_ops for sm_$arch in $(($(date +%s) - t0)) s"
}

# ---- stage 2: LeNet on both backends ---------------------------------------------------
# A worker (find_worker, tests/gpu/env.sh); then a synthetic MNIST-like set
# (tests/gpu/lenet_compare.py makes the IDX files and compares the runs).

stage2() {
    echo
    echo "== stage 2: LeNet on the CPU and the GPU, same seed; fp16 and bf16 against fp32"
    local worker="" rc secs out
    cur=lenet
    find_worker
    rc=$?
    ((rc == 0)) && found_worker=$worker
    if ((rc == 3)); then
        add lenet FAIL "the worker did not build (cmake log above)"
        return 1
    elif ((rc != 0)); then
        add lenet skip "no worker: carry one (tests/gpu/make_carry.sh) or install jansson, libpng, libjpeg, OpenBLAS"
        return 0
    fi
    if ! "$worker" --version; then
        add lenet FAIL "$worker --version failed (missing libraries? ldd below)"
        ldd "$worker" | grep 'not found'
        found_worker=""
        return 1
    fi
    if ! command -v python3 >/dev/null; then
        add lenet skip "no python3 for the synthetic data set"
        return 0
    fi
    local work=$build/lenet args
    rm -rf "$work"
    mkdir -p "$work"
    args=(--worker "$worker" --network "$root/models/lenet.prototxt" --work "$work"
        --backends cpu,cuda,cuda+nccl,cuda:fp16,cuda:bf16)
    [[ $rehearse == 1 ]] && args+=(--stand-in cpu)
    secs=$(limit_for "$t_lenet")
    bounded "$secs" "$build/lenet_compare.log" python3 "$root/tests/gpu/lenet_compare.py" "${args[@]}"
    rc=$?
    keep "$build/lenet_compare.log"
    out=$(grep '^lenet_compare: ' "$build/lenet_compare.log" | tail -1)
    if ((rc == 0)) && [[ -n $out ]]; then
        add lenet ok "${out#lenet_compare: }"
    elif ((rc == 124)); then
        add lenet FAIL "cut off after $secs s (log above)"
    else
        add lenet FAIL "${out#lenet_compare: } (exit $rc; log above)"
    fi
}

# ---- stage 3: the benchmark against PyTorch ---------------------------------------------

stage3() {
    echo
    echo "== stage 3: training throughput against PyTorch (bench/gpu_bench.sh)"
    local out rc secs
    cur=bench
    secs=$(limit_for "$t_bench")
    # the benchmark sizes itself to end well inside its limit
    CDIGITS_BENCH_DEADLINE=$((secs - 25)) CDIGITS_WORKER=${found_worker:-} CDIGITS_GPU_BUILD=$build \
        bounded "$secs" "$build/gpu_bench.log" bash "$root/bench/gpu_bench.sh"
    rc=$?
    keep "$build/gpu_bench.log"
    keep "$build/bench/last.txt" gpu_bench_table.txt
    out=$(grep '^gpu_bench: ' "$build/gpu_bench.log" | tail -1)
    case $rc in
    0) if [[ $out == *skipped* ]]; then add bench skip "${out#*: }"; else add bench ok "${out#*: }"; fi ;;
    124) add bench FAIL "cut off after $secs s${out:+ (${out#*: })}" ;;
    *) add bench FAIL "${out#*: } (exit $rc; log above)" ;;
    esac
}

found_worker=""
gpu_present=1
if [[ " $stages " == *" 1 "* ]]; then
    stage1
    rc=$?
    ((rc == 2)) && gpu_present=0
fi
if [[ " $stages " == *" 2 "* ]]; then
    if ((gpu_present)); then
        stage2
    else
        add lenet skip "no GPU: skipped"
    fi
fi
if [[ " $stages " == *" 3 "* ]]; then
    if ((!gpu_present)); then
        add bench skip "no GPU: skipped"
    elif [[ " $stages " == *" 2 "* && -z $found_worker ]]; then
        add bench skip "no worker (stage 2 above says why)"
    else
        stage3
    fi
fi
finish
