#!/usr/bin/env bash
# Install what is missing, build with AddressSanitizer and UndefinedBehaviorSanitizer
# (and the CUDA backend where CUDA is installed, so it keeps compiling) and a Release
# worker for the real-data tests, run every test once with ctest (a failure fails the
# run; so does a test that cannot run, unless it needs hardware this machine lacks),
# rehearse the GPU run (tests/gpu/run.sh with the CPU standing in, where CUDA is
# installed), run each fuzz target for a bounded time, and print a summary line:
# "N passed, N failed, N skipped".
#   CDIGITS_FUZZ_SECONDS   seconds per fuzz target (default 20; 0 skips fuzzing)
#   CDIGITS_TEST_BUILD     build folder (default build-test)
set -uo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=$(nproc)

scripts/setup.sh --test || { echo "test: installing the build and test packages failed"; exit 1; }
scripts/web-setup.sh || { echo "test: installing the web UI's npm packages failed"; exit 1; }

build=${CDIGITS_TEST_BUILD:-build-test}
fuzz_seconds=${CDIGITS_FUZZ_SECONDS:-20}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

echo "== configure and build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIGITS_SANITIZE=ON \
  -DCDIGITS_RELEASE_BUILD_DIR="$root/build-release" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; echo "0 passed, 1 failed"; exit 1; }
grep -E '^-- cdigits:' "$build.configure.log"
if ! cmake --build "$build" -j"$jobs" >"$build.build.log" 2>&1; then
  grep -E -B3 'error|undefined reference' "$build.build.log" | head -60
  tail -20 "$build.build.log"
  echo "0 passed, 1 failed"
  exit 1
fi
grep -E 'warning:' "$build.build.log" | sort -u | head -20 || true

# A Release worker for the tests that train on real data (tests/shell/fashion_mnist.sh):
# under the sanitizers they would take several times as long.
echo "== Release worker (build-release) for the real-data tests"
if ! { cmake -S . -B build-release -DCMAKE_BUILD_TYPE=Release -DCDIGITS_CUDA=OFF -DCDIGITS_TESTS=OFF \
         >build-release.configure.log 2>&1 &&
       cmake --build build-release -j"$jobs" --target cdigits-worker >build-release.build.log 2>&1; }; then
  tail -30 build-release.configure.log build-release.build.log
  echo "0 passed, 1 failed"
  exit 1
fi

# Every test runs once: a test that fails fails the run (no reruns), and one that cannot
# run here fails too (CDIGITS_TEST_STRICT: this script installed and built everything a
# test needs); only what needs hardware this machine lacks (a GPU) may skip.
echo "== tests"
export CDIGITS_TEST_STRICT=1
ctest_log="$build/ctest.log"
ctest --test-dir "$build" -j2 --output-on-failure 2>&1 | tee "$ctest_log"
total=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -1 |
  sed -E 's/.* out of ([0-9]+).*/\1/')
passed=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed +[0-9.]+ sec' "$ctest_log")
skipped=$(grep -cE '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .*\*\*\*Skipped' "$ctest_log")
if [[ -z $total ]]; then
  echo "test: ctest printed no summary (see $ctest_log)"
  failed=1
else
  failed=$((total - passed - skipped))
fi
if ((skipped)); then
  echo "== skipped (needs hardware this machine has not got)"
  grep -E '\*\*\*Skipped' "$ctest_log"
fi

# The GPU run rehearsed: the bundle a device call carries, made as docs/cuda.md says,
# then tests/gpu/run.sh's three stages with the CPU standing in for the GPU. A missing
# library, a link error, a wrong path or a broken table fails here, not on a GPU.
echo "== GPU rehearsal (tests/gpu/run.sh, the CPU standing in for the GPU)"
if [[ -x /usr/local/cuda/bin/nvcc ]] || command -v nvcc >/dev/null 2>&1; then
  if tests/gpu/make_carry.sh build-cuda build-carry >build-carry.log 2>&1; then
    grep '^make_carry: ' build-carry.log | tail -2
    CDIGITS_GPU_REHEARSE=1 CDIGITS_CARRY_DIR=build-carry CDIGITS_GPU_BUILD="$root/build-rehearsal" \
      timeout 560 bash tests/gpu/run.sh >build-rehearsal.log 2>&1
    rc=$?
    sed -n '/^== summary/,$p' build-rehearsal.log
    if [[ $rc -eq 0 ]]; then
      echo "PASS gpu_rehearsal"
      passed=$((passed + 1))
    else
      echo "FAIL gpu_rehearsal (exit $rc; log: build-rehearsal.log)"
      grep -E 'FAIL|error' build-rehearsal.log | head -30
      failed=$((failed + 1))
    fi
  else
    tail -30 build-carry.log
    echo "FAIL gpu_rehearsal: tests/gpu/make_carry.sh build-cuda build-carry failed (log: build-carry.log)"
    failed=$((failed + 1))
  fi
else
  echo "SKIP gpu_rehearsal: no nvcc (CUDA is not installed here)"
  skipped=$((skipped + 1))
fi

if [[ "$fuzz_seconds" != 0 ]]; then
  echo "== fuzzing (${fuzz_seconds}s per target)"
  if CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIGITS_FUZZ=ON \
       -DCDIGITS_CUDA=OFF -DCDIGITS_TESTS=OFF >build-fuzz.configure.log 2>&1 &&
     cmake --build build-fuzz -j"$jobs" >build-fuzz.build.log 2>&1; then
    for target in build-fuzz/tests/fuzz/fuzz_*; do
      [[ -x "$target" ]] || continue
      name=$(basename "$target")
      corpus="$root/tests/fuzz/corpus/${name#fuzz_}"
      work=$(mktemp -d)
      [[ -d "$corpus" ]] && cp -r "$corpus"/. "$work"/
      if "$target" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -print_final_stats=1 \
           -artifact_prefix="$build/$name-" "$work" >"$build/$name.log" 2>&1; then
        echo "PASS $name: $(grep -E 'stat::number_of_executed_units' "$build/$name.log" | awk '{print $2}') runs"
        passed=$((passed + 1))
      else
        echo "FAIL $name (log: $build/$name.log)"
        tail -30 "$build/$name.log"
        failed=$((failed + 1))
      fi
      rm -rf "$work"
    done
  else
    echo "FAIL fuzz build (see build-fuzz.build.log)"
    tail -30 build-fuzz.build.log
    failed=$((failed + 1))
  fi
fi

echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 && $passed -gt 0 ]]
