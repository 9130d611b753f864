# What bench/bench_http.sh and bench/soak.sh share, sourced with BENCH_NAME and SRC set;
# the functions below use BUILD (bench_build_dir sets it) and T (the run's temporary
# folder).

# bench_build_dir [DIR]: sets BUILD to the absolute path of DIR ($CDIGITS_BUILD_DIR or
# build by default), or exits 1 when there is no such folder.
bench_build_dir() {
    BUILD=$(cd "${1:-${CDIGITS_BUILD_DIR:-$SRC/build}}" 2>/dev/null && pwd) ||
        { echo "$BENCH_NAME: no build folder ${1:-build}"; exit 1; }
}

# need_tools BINARY...: exits 1, saying what is missing, without wrk or one of BUILD's
# BINARYs.
need_tools() {
    local b
    command -v wrk >/dev/null || { echo "$BENCH_NAME: wrk is missing (apt-get install wrk)"; exit 1; }
    for b in "$@"; do
        [ -x "$BUILD/$b" ] || { echo "$BENCH_NAME: $BUILD/$b is not built"; exit 1; }
    done
}

# bench_serve USER [serve flags]: starts BUILD's server on a free loopback port with its
# data in $T/data and $T/images (or $BENCH_DATA_ROOT) as its data root, and logs in as
# USER: sets PID (the server), B (its base URL) and J (the cookie jar). Exits 1 when it
# does not start.
# shellcheck disable=SC2034 # PID, B and J are the caller's
bench_serve() {
    local user=$1
    shift
    "$BUILD/cdigits" serve --port 0 --port-file "$T/port" --data "$T/data" --data-root "${BENCH_DATA_ROOT:-$T/images}" \
        --log-level warning "$@" >"$T/server.log" 2>&1 &
    PID=$!
    for _ in $(seq 200); do [ -s "$T/port" ] && break; sleep 0.05; done
    [ -s "$T/port" ] || { echo "$BENCH_NAME: the server did not start"; cat "$T/server.log"; exit 1; }
    B=http://127.0.0.1:$(cat "$T/port")
    J=$T/jar
    curl -s -c "$J" -X POST "$B/login" -d username="$user" >/dev/null
}
