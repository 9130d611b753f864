# Sourced by tests/gpu/run.sh, bench/gpu_bench.sh and bench/scaling_bench.sh: finds
# CUDA (nvcc), cuDNN, NCCL, cuBLAS and the CUDA runtime (python3's nvidia.* packages
# first, then the toolkit and the system; CUDNN_ROOT / NCCL_ROOT override), the GPU's
# compute capability (arch), puts the libraries' folders on LD_LIBRARY_PATH, and defines
# gpu_env_report, gpu_count and find_worker. The caller sets root, build and jobs and
# defines say before sourcing. The LD_LIBRARY_PATH from before is kept in
# CDIGITS_TORCH_LD_LIBRARY_PATH for PyTorch, which finds its own CUDA libraries (ours
# first on the path could be older than the ones it was built with).

export CDIGITS_TORCH_LD_LIBRARY_PATH=${CDIGITS_TORCH_LD_LIBRARY_PATH-${LD_LIBRARY_PATH-}}
# a carried build, as an absolute path (it goes on LD_LIBRARY_PATH), runnable even if
# the transfer lost the files' modes
if [[ -n ${CDIGITS_CARRY_DIR:-} && -d $CDIGITS_CARRY_DIR ]]; then
    CDIGITS_CARRY_DIR=$(cd "$CDIGITS_CARRY_DIR" && pwd)
    export CDIGITS_CARRY_DIR
    chmod +x "$CDIGITS_CARRY_DIR"/cdigits-worker "$CDIGITS_CARRY_DIR"/test_gpu_ops 2>/dev/null
fi

# the number of GPUs nvidia-smi lists (0 without it)
gpu_count() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi -L 2>/dev/null | grep -c '^GPU'
    else
        echo 0
    fi
}

# the folder of a python package (namespace packages have no __file__)
pydir() {
    python3 - "$1" 2>/dev/null <<'EOF'
import importlib, sys
try:
    m = importlib.import_module(sys.argv[1])
    print(list(m.__path__)[0])
except Exception:
    pass
EOF
}

# first_with FILE DIR...: the first DIR holding FILE
first_with() {
    local f=$1 d
    shift
    for d in "$@"; do
        [[ -n $d && -e $d/$f ]] && { echo "$d"; return 0; }
    done
    return 1
}

# find_lib NAME DIR...: the first DIR/NAME, or DIR/NAME.<version> (pip wheels ship
# only versioned names)
find_lib() {
    local name=$1 d f
    shift
    for d in "$@"; do
        [[ -n $d && -d $d ]] || continue
        [[ -e $d/$name ]] && { echo "$d/$name"; return 0; }
        for f in "$d/$name".[0-9]*; do
            [[ -e $f ]] && { echo "$f"; return 0; }
        done
    done
    return 1
}

nvcc=""
for c in "${CUDA_HOME:-}/bin/nvcc" "${CUDA_PATH:-}/bin/nvcc" "$(command -v nvcc 2>/dev/null)" \
    /usr/local/cuda/bin/nvcc; do
    [[ -n $c && -x $c ]] && { nvcc=$c; break; }
done
cuda_home=${nvcc:+$(cd "$(dirname "$nvcc")/.." && pwd)}

py_cudnn=$(pydir nvidia.cudnn)
py_nccl=$(pydir nvidia.nccl)
py_cublas=$(pydir nvidia.cublas)
py_cu=""
for v in cu13 cu12; do
    d=$(pydir "nvidia.$v")
    [[ -n $d ]] && { py_cu=$d; break; }
done
sys_inc=(/usr/include /usr/include/x86_64-linux-gnu /usr/local/include)
sys_lib=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib)

# (CUDA 13 wheels may put a library under nvidia/cu13/{include,lib} rather than its own
# package folder)
cudnn_inc=$(first_with cudnn.h "${CUDNN_ROOT:-/nonexistent}/include" "$py_cudnn/include" \
    "$py_cu/include" "$cuda_home/include" "${sys_inc[@]}")
cudnn_lib=$(find_lib libcudnn.so "${CUDNN_ROOT:-/nonexistent}/lib" "${CUDNN_ROOT:-/nonexistent}/lib64" \
    "$py_cudnn/lib" "$py_cu/lib" "$cuda_home/lib64" "$cuda_home/lib" "${sys_lib[@]}")
nccl_inc=$(first_with nccl.h "${NCCL_ROOT:-/nonexistent}/include" "$py_nccl/include" \
    "$py_cu/include" "$cuda_home/include" "${sys_inc[@]}")
nccl_lib=$(find_lib libnccl.so "${NCCL_ROOT:-/nonexistent}/lib" "${NCCL_ROOT:-/nonexistent}/lib64" \
    "$py_nccl/lib" "$py_cu/lib" "$cuda_home/lib64" "$cuda_home/lib" "${sys_lib[@]}")
cublas_lib=$(find_lib libcublas.so "$cuda_home/lib64" "$cuda_home/lib" \
    "$cuda_home/targets/x86_64-linux/lib" "$py_cublas/lib" "$py_cu/lib" "${sys_lib[@]}")
cublaslt_lib=$(find_lib libcublasLt.so "$(dirname "${cublas_lib:-/x/y}")")
cublas_inc=$(first_with cublas_v2.h "$cuda_home/include" "$py_cublas/include" "$py_cu/include" \
    "${sys_inc[@]}")
cudart_static=$(find_lib libcudart_static.a "$cuda_home/lib64" "$cuda_home/lib" \
    "$cuda_home/targets/x86_64-linux/lib")
cudart_lib=${cudart_static:-$(find_lib libcudart.so "$cuda_home/lib64" "$cuda_home/lib" "$py_cu/lib")}

gpu_cap=""
if command -v nvidia-smi >/dev/null 2>&1; then
    gpu_cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
fi
[[ $gpu_cap =~ ^[0-9]+$ ]] || gpu_cap=""
arch=${gpu_cap:-90} # no GPU: build for Hopper, as the GPU machines are

# gpu_env_report: what was found, for the log
gpu_env_report() {
    if command -v nvidia-smi >/dev/null 2>&1; then
        nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader 2>&1 | head -4
    else
        echo "nvidia-smi: not found"
    fi
    say "nvcc ${nvcc:-not found}; compute capability ${gpu_cap:-unknown} (building sm_$arch)"
    say "cuDNN ${cudnn_inc:-?} ${cudnn_lib:-not found}"
    say "NCCL ${nccl_inc:-?} ${nccl_lib:-not found}"
    say "cuBLAS ${cublas_inc:-?} ${cublas_lib:-not found}; cudart ${cudart_lib:-not found}"
}

lib_dirs=()
for f in "$cudnn_lib" "$nccl_lib" "$cublas_lib" "$cudart_lib"; do
    [[ -n $f ]] && lib_dirs+=("$(dirname "$f")")
done
ld_path=$(printf '%s:' "${lib_dirs[@]}")
ld_path=${ld_path%:}
# no empty entry (it would mean the current folder)
export LD_LIBRARY_PATH="${ld_path}${LD_LIBRARY_PATH:+${ld_path:+:}$LD_LIBRARY_PATH}"

# find_worker: sets worker to a cdigits-worker that runs here: CDIGITS_WORKER, a build
# carried here (CDIGITS_CARRY_DIR, made by tests/gpu/make_carry.sh), or one built with
# CMake in $build/cmake when jansson, libpng, libjpeg and OpenBLAS are installed.
# Returns 0, 1 (none to be had: say why) or 3 (the CMake build failed; its log tail
# printed).
find_worker() {
    if [[ -n ${CDIGITS_WORKER:-} && -x ${CDIGITS_WORKER} ]]; then
        worker=$CDIGITS_WORKER
        say "worker: $worker (CDIGITS_WORKER)"
        return 0
    fi
    if [[ -n ${CDIGITS_CARRY_DIR:-} && -x ${CDIGITS_CARRY_DIR}/cdigits-worker ]]; then
        export LD_LIBRARY_PATH="$CDIGITS_CARRY_DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        worker=$CDIGITS_CARRY_DIR/cdigits-worker
        say "worker: carried $worker"
        return 0
    fi
    if ! command -v cmake >/dev/null || ! command -v pkg-config >/dev/null; then
        say "worker: no cmake or pkg-config here, and no CDIGITS_CARRY_DIR"
        return 1
    fi
    local m
    for m in jansson libpng libjpeg openblas; do
        if ! pkg-config --exists "$m"; then
            say "worker: $m is not installed here, and no CDIGITS_CARRY_DIR"
            return 1
        fi
    done
    local wb=$build/cmake t0
    t0=$(date +%s)
    say "worker: building with CMake in $wb"
    if ! cmake -S "$root" -B "$wb" -DCMAKE_BUILD_TYPE=Release -DCDIGITS_CUDA=ON -DCDIGITS_TESTS=OFF \
        -DCMAKE_CUDA_ARCHITECTURES="$arch" -DCMAKE_CUDA_COMPILER="$nvcc" \
        -DCUDNN_INCLUDE_DIR="$cudnn_inc" -DCUDNN_LIBRARY="$cudnn_lib" \
        -DNCCL_INCLUDE_DIR="$nccl_inc" -DNCCL_LIBRARY="$nccl_lib" >"$build/cmake.log" 2>&1 ||
        ! cmake --build "$wb" --target cdigits-worker -j"$jobs" >>"$build/cmake.log" 2>&1; then
        tail -40 "$build/cmake.log"
        return 3
    fi
    say "worker: built in $(($(date +%s) - t0)) s"
    worker=$wb/cdigits-worker
}

