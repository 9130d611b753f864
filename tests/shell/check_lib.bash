# Setup shared by the check-net tests (sourced by tests/shell/check_*.sh; not a test
# itself): the worker binary, a temporary folder removed on exit, and pass/fail counting.
#
#   ok                         count a pass
#   bad MESSAGE                count a failure and print it
#   expect NAME FILE PATTERN   pass when FILE contains the extended regex PATTERN
#   check_finish NAME          print the counts; fails when anything failed
set -uo pipefail
worker="${CDIGITS_BUILD_DIR:?}/cdigits-worker"
pass=0 fail=0
tmp=$(mktemp -d) || { echo "FAIL: mktemp -d could not make a temporary folder; check TMPDIR"; exit 1; }
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
expect() { # NAME FILE PATTERN: the output contains PATTERN
  if grep -qE -- "$3" "$2"; then ok; else bad "$1: no /$3/ in:"; head -20 "$2"; fi
}
check_finish() { # NAME: print the counts; the exit status is 0 only without failures
  echo "$1: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
