#!/usr/bin/env bash
# Long fuzzing: every libFuzzer target (tests/fuzz/fuzz_*.c) for SECONDS of wall-clock
# time, JOBS targets at a time, each from a scratch copy of its committed corpus (the
# repository's corpus is left as it is). A finding does not end a target's run: the
# input is kept under OUT/NAME/ and the target starts again until its time is up.
# Prints a Markdown table (docs/reliability.md) with CPU seconds beside wall seconds,
# since targets running together share the cores.
#
#   bench/fuzz_long.sh [SECONDS [JOBS [OUT]]]    defaults: 3600, all at once, build-fuzz/long
#   bench/fuzz_long.sh table [OUT]               the table of a finished run again
#
# CDIGITS_FUZZ_TARGETS="fuzz_http fuzz_png" runs only those. Builds build-fuzz (clang,
# ASan, UBSan) when it is missing. Exit status 1 when any
# target had a finding.
set -uo pipefail
cd "$(dirname "$0")/.."

# Sums over a target's rounds: executions, CPU seconds, peak RSS; coverage of the last.
table() {
    local out=$1 status=0 dir name runs cpu rss last cov ft size findings per
    echo "| target | wall | CPU | executions | executions per CPU second | coverage (edges) | features | corpus at the end | peak RSS | findings |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for dir in "$out"/fuzz_*; do
        name=$(basename "$dir")
        runs=$(cat "$dir"/round-*.log | awk '/stat::number_of_executed_units/ {s += $2} END {print s + 0}')
        cpu=$(awk '$1 == "cpu" {s += $2 + $3} END {printf "%d", s}' "$dir/cpu")
        rss=$(awk '$1 == "cpu" && $4 > m {m = $4} END {printf "%d", m / 1024}' "$dir/cpu")
        last=$(ls -v "$dir"/round-*.log | tail -1)
        cov=$(grep -oE 'cov: [0-9]+' "$last" | tail -1 | awk '{print $2}')
        ft=$(grep -oE 'ft: [0-9]+' "$last" | tail -1 | awk '{print $2}')
        size=$(ls "$dir/corpus" | wc -l)
        findings=$(ls "$dir/findings" | wc -l)
        ((findings > 0)) && status=1
        per=$((cpu > 0 ? runs / cpu : 0))
        printf '| `%s` | %s s | %s s | %s | %s | %s | %s | %s | %s MB | %s |\n' "$name" "$(cat "$dir/wall")" \
            "$cpu" "$runs" "$per" "${cov:-?}" "${ft:-?}" "$size" "$rss" \
            "$( ((findings > 0)) && echo "$findings inputs ($(ls -v "$dir"/round-*.log | wc -l) rounds)" || echo none)"
    done
    return $status
}

if [[ ${1:-} == table ]]; then
    table "${2:-build-fuzz/long}"
    exit
fi
seconds=${1:-3600}
out=${3:-build-fuzz/long}
per_input_timeout=${CDIGITS_FUZZ_TIMEOUT:-60}

if ! ls build-fuzz/tests/fuzz/fuzz_* >/dev/null 2>&1; then
  CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCDIGITS_FUZZ=ON \
    -DCDIGITS_CUDA=OFF -DCDIGITS_TESTS=OFF >/dev/null || { echo "fuzz_long: configure failed"; exit 2; }
fi
cmake --build build-fuzz -j"$(nproc)" >/dev/null || { echo "fuzz_long: build failed"; exit 2; }
mapfile -t targets < <(ls build-fuzz/tests/fuzz/fuzz_* | grep -v '\.' )
if [[ -n ${CDIGITS_FUZZ_TARGETS:-} ]]; then
    mapfile -t targets < <(for t in $CDIGITS_FUZZ_TARGETS; do echo "build-fuzz/tests/fuzz/$t"; done)
fi
jobs=${2:-${#targets[@]}}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:protect_shadow_gap=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
rm -rf "$out"
mkdir -p "$out"

# One target until its time is up: restarts after each finding.
run_target() {
  local target=$1 name dir corpus start now left round=0
  name=$(basename "$target")
  dir="$out/$name"
  corpus="$dir/corpus"
  mkdir -p "$corpus" "$dir/findings"
  cp -r "tests/fuzz/corpus/${name#fuzz_}"/. "$corpus"/ 2>/dev/null
  start=$(date +%s)
  while :; do
    now=$(date +%s)
    left=$((seconds - (now - start)))
    ((left > 5)) || break
    round=$((round + 1))
    /usr/bin/time -a -o "$dir/cpu" -f "cpu %U %S %M" \
      "$target" -max_total_time="$left" -rss_limit_mb=2048 -timeout="$per_input_timeout" \
      -print_final_stats=1 -artifact_prefix="$dir/findings/" "$corpus" >"$dir/round-$round.log" 2>&1
  done
  echo $(($(date +%s) - start)) >"$dir/wall"
}

running=0
for target in "${targets[@]}"; do
  run_target "$target" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
done
wait

table "$out"
