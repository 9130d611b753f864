#!/usr/bin/env bash
# Packs a worker built here for tests/gpu/run.sh on a machine that cannot build it
# (no jansson, libpng, libjpeg or OpenBLAS there):
#   tests/gpu/make_carry.sh BUILD_DIR OUT_DIR
# copies BUILD_DIR/cdigits-worker (configured with -DCDIGITS_CUDA=ON), build-gpu's
# test_gpu_ops when there is one, and into OUT_DIR/lib every library they load except
# the C runtime and CUDA's own (cuBLAS, cuDNN, NCCL: the GPU machine's are used, so
# they must be the same major versions). Then, there:
#   CDIGITS_CARRY_DIR=OUT_DIR tests/gpu/run.sh
set -euo pipefail
build=${1:?usage: make_carry.sh BUILD_DIR OUT_DIR}
out=${2:?usage: make_carry.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
[[ -x $build/cdigits-worker ]] || { echo "make_carry: no $build/cdigits-worker"; exit 1; }
mkdir -p "$out/lib"
bins=("$build/cdigits-worker")
[[ -x $root/build-gpu/test_gpu_ops ]] && bins+=("$root/build-gpu/test_gpu_ops")
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcublas|libcublasLt|libcudnn|libnccl|libcudart|libcuda\.)'
for b in "${bins[@]}"; do
    cp "$b" "$out/"
    ldd "$b" | awk '/=>/ {print $1, $3}' | while read -r name path; do
        [[ $name =~ $skip ]] && continue
        [[ -f $path ]] && cp -L "$path" "$out/lib/$name"
    done
done
echo "make_carry: $(ls "$out" | grep -v lib | tr '\n' ' ')+ $(ls "$out/lib" | wc -l) libraries in $out ($(du -sh "$out" | cut -f1))"
