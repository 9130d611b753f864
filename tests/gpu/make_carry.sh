#!/usr/bin/env bash
# Packs a worker built here for tests/gpu/run.sh on a machine that cannot build it
# (no jansson, libpng, libjpeg or OpenBLAS there):
#   tests/gpu/make_carry.sh BUILD_DIR OUT_DIR
# first brings BUILD_DIR's cdigits-worker up to date (configuring BUILD_DIR as a
# Release build with -DCDIGITS_CUDA=ON for sm_90 when it has no CMake cache yet) and
# build-gpu's test_gpu_ops (tests/gpu/run.sh stage 1, which here ends "no GPU:
# skipped"), then copies both, and into OUT_DIR/lib every library they load except the
# C runtime and CUDA's own (cuBLAS, cuDNN, NCCL: the GPU machine's are used, so they
# must be the same major versions). Then, there:
#   CDIGITS_CARRY_DIR=OUT_DIR tests/gpu/run.sh
# An OUT_DIR under the repository named build-* is ignored by git (the device tool's
# `carry` then names it). Fails when the bundle with the working tree is over the 64 MiB
# a device call carries.
set -euo pipefail
build=${1:?usage: make_carry.sh BUILD_DIR OUT_DIR}
out=${2:?usage: make_carry.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)

if [[ ! -f $build/CMakeCache.txt ]]; then
    echo "make_carry: configuring $build (Release, CUDA on, sm_90)"
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCDIGITS_CUDA=ON -DCDIGITS_TESTS=OFF \
        -DCMAKE_CUDA_ARCHITECTURES=90 >"$build.configure.log" 2>&1 ||
        { tail -30 "$build.configure.log"; echo "make_carry: configuring $build failed"; exit 1; }
fi
grep -q '^CDIGITS_CUDA:[A-Z]*=ON' "$build/CMakeCache.txt" ||
    { echo "make_carry: $build is configured without -DCDIGITS_CUDA=ON"; exit 1; }
echo "make_carry: building cdigits-worker in $build"
cmake --build "$build" --target cdigits-worker -j"$jobs" >"$build.carry.log" 2>&1 ||
    { tail -40 "$build.carry.log"; echo "make_carry: the worker did not build"; exit 1; }
echo "make_carry: building test_gpu_ops in build-gpu (tests/gpu/run.sh stage 1)"
env -u CDIGITS_CARRY_DIR -u CDIGITS_GPU_REHEARSE CDIGITS_GPU_STAGES=1 \
    CDIGITS_GPU_BUILD="$root/build-gpu" bash "$root/tests/gpu/run.sh" \
    >"$root/build-gpu.carry.log" 2>&1 || true
# (stage 1 removes the old binary before it builds)
[[ -x $root/build-gpu/test_gpu_ops ]] ||
    { tail -40 "$root/build-gpu.carry.log"; echo "make_carry: test_gpu_ops did not build"; exit 1; }

rm -rf "$out/lib" "$out/cdigits-worker" "$out/test_gpu_ops" "$out/arch" "$out/ptxas.log"
mkdir -p "$out/lib"
# the architecture test_gpu_ops was built for, and its kernels' register report
# (tests/gpu/run.sh checks the first against the GPU's and the second against the
# launch sizes)
cp "$root/build-gpu/arch" "$root/build-gpu/ptxas.log" "$out/" ||
    { echo "make_carry: build-gpu has no arch or ptxas.log (see build-gpu.carry.log)"; exit 1; }
bins=("$build/cdigits-worker" "$root/build-gpu/test_gpu_ops")
skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libgcc_s\.|libstdc\+\+\.|libcublas|libcublasLt|libcudnn|libnccl|libcudart|libcuda\.)'
for b in "${bins[@]}"; do
    cp "$b" "$out/"
    while read -r name arrow path _; do
        [[ $arrow == "=>" ]] || continue
        [[ $name =~ $skip ]] && continue
        if [[ ! -f $path ]]; then
            echo "make_carry: $(basename "$b") needs $name, which is not found here"
            exit 1
        fi
        cp -L "$path" "$out/lib/$name"
    done < <(ldd "$b")
done
echo "make_carry: $(ls "$out" | grep -v '^lib$' | tr '\n' ' ')+ $(ls "$out/lib" | wc -l) libraries in $out ($(du -sh "$out" | cut -f1))"

# A device call carries the working tree (tracked files and untracked ones git does not
# ignore) and the carried folders, 64 MiB in all.
limit=$((64 * 1024 * 1024))
bundle=$(du -sb "$out" | cut -f1)
tree=$(cd "$root" && git ls-files -z --cached --others --exclude-standard 2>/dev/null |
    xargs -0 -r stat -c %s -- 2>/dev/null | awk '{s += $1} END {print s + 0}')
total=$((bundle + tree))
echo "make_carry: a call carries $((total / 1024)) KiB: the bundle $((bundle / 1024)) KiB and the working tree $((tree / 1024)) KiB (limit $((limit / 1024)) KiB)"
if ((total > limit)); then
    echo "make_carry: over the device call's 64 MiB: strip the binaries or leave untracked files out of the tree"
    exit 1
fi
