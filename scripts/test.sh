#!/usr/bin/env bash
# Install what is missing, build with AddressSanitizer and UndefinedBehaviorSanitizer
# (and the CUDA backend where CUDA is installed, so it keeps compiling), run every
# test with ctest, rehearse the GPU run (tests/gpu/run.sh with the CPU standing in,
# where CUDA is installed), run each fuzz target for a bounded time, and print a
# summary line.
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
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIGITS_SANITIZE=ON >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; echo "0 passed, 1 failed"; exit 1; }
grep -E '^-- cdigits:' "$build.configure.log"
if ! cmake --build "$build" -j"$jobs" >"$build.build.log" 2>&1; then
  grep -E -B3 'error|undefined reference' "$build.build.log" | head -60
  tail -20 "$build.build.log"
  echo "0 passed, 1 failed"
  exit 1
fi
grep -E 'warning:' "$build.build.log" | sort -u | head -20 || true

echo "== tests"
ctest_log="$build/ctest.log"
ctest --test-dir "$build" -j2 --output-on-failure 2>&1 | tee "$ctest_log"
summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$ctest_log" | tail -1)
total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$summary")
failed=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$summary")
total=${total:-0}
failed=${failed:-1}
# A test that failed is run once more, alone, and named: one that then passes is
# counted as passed but printed as FLAKY with its first output above (a bug to fix, not
# to hide); one that fails again stays failed.
if [[ $total -gt 0 && $failed -gt 0 ]]; then
  echo "== running the $failed failed test(s) again, one at a time"
  ctest --test-dir "$build" --rerun-failed --output-on-failure 2>&1 | tee "$build/ctest-rerun.log"
  again=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$build/ctest-rerun.log" | tail -1)
  still=$(sed -E 's/.*passed, ([0-9]+) tests failed.*/\1/' <<<"$again")
  if [[ -n "$again" && "$still" =~ ^[0-9]+$ && $still -lt $failed ]]; then
    grep -E '^ *[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed' "$build/ctest-rerun.log" |
      sed -E 's/.*Test +#[0-9]+: ([^ ]+).*/FLAKY \1: failed, then passed when run again alone/'
    failed=$still
  fi
fi
passed=$((total - failed))
skipped=0

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
