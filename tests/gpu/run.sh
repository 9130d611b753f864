#!/usr/bin/env bash
# Builds and checks everything GPU-side on a machine with a GPU, CUDA (nvcc), cuDNN,
# NCCL and python3, and none of the project's other libraries (no jansson, OpenBLAS,
# libpng): it builds only what it needs, from the sources.
#
#   stage 1  the op test: src/backend/cuda, kernels, the CPU backend (the reference,
#            with a plain C sgemm instead of OpenBLAS) and tests/gpu/test_gpu_ops.c,
#            compiled for this GPU only; every backend op compared with the CPU.
#   stage 2  LeNet trained on both backends with the same seed on a small synthetic
#            digit set, loss curves and accuracy compared; then on the GPU once more
#            through the data-parallel path with one NCCL rank (buckets averaged on
#            their own stream during the backward pass), compared with the plain run. Needs cdigits-worker: a
#            build carried here (CDIGITS_CARRY_DIR, made by tests/gpu/make_carry.sh),
#            or one built with CMake when jansson, libpng, libjpeg and OpenBLAS are
#            installed; skipped (and said so) otherwise.
#   stage 3  the throughput benchmark against PyTorch (bench/gpu_bench.sh: LeNet and
#            AlexNet, fp32/fp16/bf16, images/s, GPU utilization, data wait) with the
#            worker of stage 2; skipped (and said so) without a GPU, a worker or
#            PyTorch with CUDA. About 3 minutes on an H200.
#
# Without a GPU it still builds stage 1 and prints "no GPU: skipped" (exit 0).
# Environment:
#   CDIGITS_GPU_BUILD   build folder (default build-gpu)
#   CDIGITS_CARRY_DIR   folder with cdigits-worker, lib/ (its .so files) and optionally
#                       test_gpu_ops, built elsewhere
#   CUDNN_ROOT, NCCL_ROOT   where cuDNN and NCCL are, when python3 and the usual
#                       places don't know
#   CDIGITS_GPU_STAGES  "1 2 3" (default); "1" for the op test only, "1 2" without
#                       the benchmark
#   CDIGITS_GPU_TIMEOUTS  the three stages' time limits in seconds (default "240 240
#                       300"; a device call allows 600 in all)
#   CDIGITS_GPU_STRICT  1: a stage skipped for want of a worker, PyTorch or a carried
#                       binary counts as a failure (for a run on a GPU machine)
#   OUT                 a folder: the logs and tables (op table, LeNet comparison,
#                       benchmark) are copied there as well
# Where nvidia-smi lists a GPU that CUDA cannot use, that is a failure, not "no GPU".
# A TERM or INT (an outer time limit) still prints the summary.
# Exit status: 0 when every stage that ran passed (or no GPU), 1 otherwise.
set -uo pipefail
export PYTHONUNBUFFERED=1

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 1
build=${CDIGITS_GPU_BUILD:-$root/build-gpu}
case $build in /*) ;; *) build=$root/$build ;; esac
stages=${CDIGITS_GPU_STAGES:-1 2 3}
jobs=$(nproc 2>/dev/null || echo 4)
t_start=$(date +%s)
summary=()
failed=0
read -r t_ops t_lenet t_bench <<<"${CDIGITS_GPU_TIMEOUTS:-240 240 300}"
strict=${CDIGITS_GPU_STRICT:-0}
cur=""

say() { echo "run.sh: $*"; }
add() {
    local result=$2
    [[ $result == skip && $strict == 1 ]] && result=FAIL
    summary+=("$(printf "%-8s | %-6s | %s" "$1" "$result" "$3")")
    [[ $result == FAIL ]] && failed=1
    return 0
}
# keep LOG in $OUT too, when the caller gave one
keep() {
    [[ -n ${OUT:-} && -d ${OUT:-} && -f $1 ]] && cp "$1" "$OUT/${2:-$(basename "$1")}"
    return 0
}
finish() {
    trap - TERM INT
    echo
    echo "== summary ($(($(date +%s) - t_start)) s)"
    {
        printf '%-8s | %-6s | %s\n' "stage" "result" "detail"
        printf '%s\n' "${summary[@]}"
    } | tee "$build/summary.txt"
    keep "$build/summary.txt"
    if ((failed)); then echo "run.sh: FAIL"; exit 1; fi
    echo "run.sh: PASS"
    exit 0
}
on_signal() {
    add "${cur:-?}" FAIL "stopped by a signal (an outer time limit?) after $(($(date +%s) - t_start)) s"
    finish
}
trap on_signal TERM INT
mkdir -p "$build"

# CUDA, cuDNN, NCCL, the GPU, and find_worker
# shellcheck source=tests/gpu/env.sh
source "$root/tests/gpu/env.sh"
echo "== GPU"
gpu_env_report

# ---- stage 1: build and run the op test -----------------------------------------------

stage1() {
    echo
    echo "== stage 1: build the op test ($build)"
    local test_bin="" tried=0
    cur=build
    if [[ -n $nvcc && -n $cudnn_inc && -n $cudnn_lib && -n $nccl_inc && -n $nccl_lib &&
        -n $cublas_inc && -n $cublas_lib && -n $cublaslt_lib && -n $cudart_lib ]]; then
        tried=1
        build_ops_test && test_bin=$build/test_gpu_ops
    fi
    if [[ -z $test_bin && -n ${CDIGITS_CARRY_DIR:-} && -x ${CDIGITS_CARRY_DIR}/test_gpu_ops ]]; then
        say "no op test built here; running the carried $CDIGITS_CARRY_DIR/test_gpu_ops"
        test_bin=$CDIGITS_CARRY_DIR/test_gpu_ops
        export LD_LIBRARY_PATH="$CDIGITS_CARRY_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        add build ok "carried binary"
    elif [[ -z $test_bin && $tried == 1 ]]; then
        return 1 # build_ops_test said why
    elif [[ -z $test_bin ]]; then
        say "missing: ${nvcc:-nvcc} ${cudnn_lib:-cuDNN} ${nccl_lib:-NCCL} ${cublas_lib:-cuBLAS}"
        add build FAIL "CUDA, cuDNN or NCCL not found (set CUDNN_ROOT / NCCL_ROOT)"
        return 1
    fi
    [[ -n $test_bin ]] || return 1

    echo
    echo "== stage 1: every backend op against the CPU reference"
    local log=$build/test_gpu_ops.log rc
    cur=ops
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-$jobs} timeout "$t_ops" "$test_bin" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    keep "$log"
    if grep -q '^SKIP' "$log"; then
        local listed
        listed=$(gpu_count)
        if ((listed > 0)); then
            # a GPU CUDA cannot use (driver, container, visibility): a failure
            add ops FAIL "nvidia-smi lists $listed GPU(s) but CUDA sees none: $(grep -m1 '^SKIP' "$log")"
            return 2
        fi
        say "no GPU: skipped"
        add ops skip "no GPU: skipped ($(grep -m1 '^SKIP' "$log"))"
        return 2
    fi
    local line
    line=$(grep -E '^test_gpu_ops: [0-9]+ passed' "$log" | tail -1)
    if [[ $rc -eq 0 ]]; then
        add ops ok "${line#test_gpu_ops: }"
    elif [[ $rc -eq 124 ]]; then
        add ops FAIL "timed out after $t_ops s"
    else
        add ops FAIL "${line:-exit status $rc (crashed or aborted; the device error is above)}"
    fi
}

build_ops_test() {
    local obj=$build/obj t0 f o
    t0=$(date +%s)
    mkdir -p "$obj"
    rm -f "$obj"/*.o "$obj"/*.log "$build/test_gpu_ops"
    local inc=(-I"$root/include" -I"$root/kernels" -I"$root/src/backend/cuda" -I"$root/src/backend/cpu")
    # the compilers' own folders stay out of -I (it would reorder the C++ headers)
    for f in "$cuda_home/include" "$cublas_inc" "$cudnn_inc" "$nccl_inc"; do
        case $f in /usr/include | /usr/local/include) ;; *) inc+=(-I"$f") ;; esac
    done
    local defs=(-DCDIGITS_HAVE_CUDA=1 -DCDIGITS_VERSION=\"gpu-test\" -DCDIGITS_SOURCE_DIR=\"$root\")

    # the C sources the op test needs; src/common's files are optional: one that does
    # not compile here or needs jansson is left out (log.c then gives way to log_stub.c)
    local csrc=("$root"/src/backend/cuda/*.c "$root"/src/backend/cpu/*.c
        "$root/tests/gpu/cblas_fallback.c" "$root/tests/gpu/test_gpu_ops.c")
    local optional=("$root"/src/common/*.c "$root/tests/gpu/log_stub.c")

    local gencode="-gencode=arch=compute_$arch,code=[sm_$arch,compute_$arch]"
    say "compiling $((${#csrc[@]} + ${#optional[@]})) C files and $(ls "$root"/kernels/*.cu | wc -l) CUDA files on $jobs cores"
    local pids=() names=() i=0
    for f in "$root"/kernels/*.cu; do
        o=$obj/cu_$(basename "$f" .cu)
        "$nvcc" -std=c++17 -O3 "$gencode" "${inc[@]}" "${defs[@]}" -Xcompiler=-Wall \
            -c "$f" -o "$o.o" >"$o.log" 2>&1 &
        pids+=($!)
        names+=("$f")
    done
    for f in "${csrc[@]}" "${optional[@]}"; do
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
            case " ${optional[*]} " in
            *" ${names[$i]} "*) continue ;;
            esac
            echo "---- compile failed: ${names[$i]}"
            bad=1
        fi
    done
    if ((bad)); then
        cat "$obj"/*.log | grep -B2 -A6 -E 'error' | head -80
        add build FAIL "compile errors (above)"
        return 1
    fi
    local keep_stub=1 left_out=()
    for f in "${optional[@]}"; do
        o=$obj/c_$(basename "$(dirname "$f")")_$(basename "$f" .c)
        [[ $f == */log_stub.c ]] && continue
        if [[ ! -s $o.o ]] || nm -u "$o.o" | grep -q ' json_'; then
            rm -f "$o.o" "$o.log"
            left_out+=("$(basename "$f")")
        elif [[ $(basename "$f") == log.c ]]; then
            keep_stub=0
        fi
    done
    ((keep_stub)) || rm -f "$obj/c_gpu_log_stub.o"
    ((${#left_out[@]})) && say "left out (need jansson or do not compile here): ${left_out[*]}"
    cat "$obj"/*.log | grep -E 'warning|error' | sort -u | head -40

    local rpath=()
    for f in "${lib_dirs[@]}"; do rpath+=("-Wl,-rpath,$f"); done
    if ! g++ -fopenmp -o "$build/test_gpu_ops" "$obj"/*.o "$cudart_lib" "$cublas_lib" "$cublaslt_lib" \
        "$cudnn_lib" "$nccl_lib" -lm -ldl -lrt -lpthread "${rpath[@]}" >"$obj/link.log" 2>&1; then
        cat "$obj/link.log" | head -60
        add build FAIL "link errors (above)"
        return 1
    fi
    say "built $build/test_gpu_ops in $(($(date +%s) - t0)) s"
    add build ok "test_gpu_ops for sm_$arch in $(($(date +%s) - t0)) s"
}

# ---- stage 2: LeNet on both backends ---------------------------------------------------
# A worker (find_worker, tests/gpu/env.sh); then a synthetic MNIST-like set
# (tests/gpu/lenet_compare.py makes the IDX files and compares the runs).

stage2() {
    echo
    echo "== stage 2: LeNet on the CPU and the GPU, same seed"
    local worker="" rc
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
        return 1
    fi
    if ! command -v python3 >/dev/null; then
        add lenet skip "no python3 for the synthetic data set"
        return 0
    fi
    local work=$build/lenet out
    rm -rf "$work"
    mkdir -p "$work"
    timeout "$t_lenet" python3 "$root/tests/gpu/lenet_compare.py" --worker "$worker" \
        --network "$root/models/lenet.prototxt" --work "$work" --backends cpu,cuda,cuda+nccl 2>&1 |
        tee "$build/lenet_compare.log"
    rc=${PIPESTATUS[0]}
    keep "$build/lenet_compare.log"
    out=$(tail -1 "$build/lenet_compare.log")
    if ((rc == 0)); then
        add lenet ok "${out#lenet_compare: }"
    elif ((rc == 124)); then
        add lenet FAIL "timed out after $t_lenet s (log above)"
    else
        add lenet FAIL "${out#lenet_compare: } (exit $rc; log above)"
    fi
}

# ---- stage 3: the benchmark against PyTorch ---------------------------------------------

stage3() {
    echo
    echo "== stage 3: training throughput against PyTorch (bench/gpu_bench.sh)"
    local out rc
    cur=bench
    CDIGITS_WORKER=${found_worker:-} CDIGITS_GPU_BUILD=$build timeout "$t_bench" \
        bash "$root/bench/gpu_bench.sh" 2>&1 | tee "$build/gpu_bench.log"
    rc=${PIPESTATUS[0]}
    keep "$build/gpu_bench.log"
    keep "$build/bench/last.txt" gpu_bench_table.txt
    out=$(tail -1 "$build/gpu_bench.log")
    case $rc in
    0) if [[ $out == *skipped* ]]; then add bench skip "${out#*: }"; else add bench ok "${out#*: }"; fi ;;
    124) add bench FAIL "timed out after $t_bench s" ;;
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
