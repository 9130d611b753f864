#!/usr/bin/env bash
# docs/training.md's table of settings is the output of `cdigits-worker train-keys
# --markdown` (the table both programs read, src/core/train_keys.c): the lines between
# its marker comments must be that output exactly. Skips (tests/shell/skip.bash) while
# the worker is not built.
set -uo pipefail
src="${CDIGITS_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}"
worker="${CDIGITS_BUILD_DIR:-$src/build}/cdigits-worker"
. "$src/tests/shell/skip.bash"
[ -x "$worker" ] || skip_test "$worker is not built yet"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
doc="$src/docs/training.md"
fail=0

if ! "$worker" train-keys --markdown >"$tmp/table" 2>"$tmp/err"; then
    echo "FAIL: train-keys --markdown exited non-zero: $(cat "$tmp/err")"
    exit 1
fi
begins=$(grep -c '^<!-- train-keys begin -->$' "$doc")
ends=$(grep -c '^<!-- train-keys end -->$' "$doc")
if [ "$begins" != 1 ] || [ "$ends" != 1 ]; then
    echo "FAIL: $doc needs one '<!-- train-keys begin -->' and one '<!-- train-keys end -->' line (has $begins, $ends)"
    exit 1
fi
sed -n '/^<!-- train-keys begin -->$/,/^<!-- train-keys end -->$/p' "$doc" | sed '1d;$d' >"$tmp/doc"
if ! diff -u "$tmp/doc" "$tmp/table" >"$tmp/diff"; then
    echo "FAIL: docs/training.md's settings table differs from \`cdigits-worker train-keys --markdown\`; paste its"
    echo "      output between the train-keys marker comments:"
    cat "$tmp/diff"
    fail=1
fi
# every row of the table is there: one line per setting, the header and its rule
rows=$(grep -c '^| `' "$tmp/table")
[ "$rows" -gt 40 ] || { echo "FAIL: the table has $rows rows"; fail=1; }
# a usage error says what to give
if "$worker" train-keys >/dev/null 2>"$tmp/usage"; then
    echo "FAIL: train-keys without --markdown succeeded"
    fail=1
elif ! grep -q -- '--markdown' "$tmp/usage"; then
    echo "FAIL: train-keys without --markdown does not name it: $(cat "$tmp/usage")"
    fail=1
fi
[ "$fail" = 0 ] && echo "ok: docs/training.md's table is train-keys --markdown ($rows settings)"
exit "$fail"
