# How a shell test says it cannot run (sourced; not a test itself).
#
#   skip_test REASON     exit 77, which ctest records as skipped (SKIP_RETURN_CODE) and
#                        scripts/test.sh counts as skipped. Under CDIGITS_TEST_STRICT=1
#                        (scripts/test.sh, after scripts/setup.sh --test installed every
#                        package and the build made every program) a test that cannot
#                        run is a failure instead: a skip there hides a gap.
#   skip_no_hardware REASON   exit 77 even when strict: what is missing is hardware this
#                        machine has not got (a GPU), which no package installs.
skip_test() {
    if [ "${CDIGITS_TEST_STRICT:-0}" = 1 ]; then
        echo "FAIL: cannot run: $1 (scripts/test.sh installs and builds everything a test needs)"
        exit 1
    fi
    echo "SKIP: $1"
    exit 77
}

skip_no_hardware() {
    echo "SKIP: $1"
    exit 77
}
