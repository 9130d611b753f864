#!/usr/bin/env bash
# A second server on a port in use: it refuses to start (a non-zero exit and a message
# that says the port is in use and what to do) instead of sharing the port, and the
# first one keeps answering every request. --port 0 picks a free port each time, and a
# server stopped after serving can be started again on its port at once.
. "$(dirname "$0")/server_lib.bash"
need_server

srv_start
FIRST=$PORT
http GET /index/json
check '[ "$CODE" = 200 ]' "the first server answers on port $FIRST"

# the second one, on the same port and the same data folder
rm -f "$T/port2"
"$CDIGITS" serve --port "$FIRST" --port-file "$T/port2" --data "$T/data" >"$T/second.log" 2>&1 &
SECOND_PID=$!
wait_until 120 '[ -s "$T/port2" ] || ! kill -0 "$SECOND_PID" 2>/dev/null'
if [ -s "$T/port2" ]; then
    kill -TERM "$SECOND_PID" 2>/dev/null
fi
wait "$SECOND_PID"
RC=$?
check '[ ! -s "$T/port2" ] && [ "$RC" -ne 0 ]' "a second server on port $FIRST exits with an error (status $RC)"
check 'grep -q "port $FIRST is in use" "$T/second.log" && grep -q -- "another --port" "$T/second.log" && grep -q "stop the other server" "$T/second.log"' \
    "it says the port is in use and what to do ($(grep -m1 "in use" "$T/second.log"))"
check '! grep -qE "Sanitizer|runtime error:" "$T/second.log"' "and stops cleanly ($(grep -m1 -E "Sanitizer|runtime error:" "$T/second.log"))"
ok=0
for i in $(seq 1 40); do
    http GET /index/json
    [ "$CODE" = 200 ] && ok=$((ok + 1))
done
check '[ "$ok" = 40 ]' "the first server still answers every request ($ok of 40)"

# --port 0 is never in use: a second server on a free port of its own starts
rm -f "$T/port3"
"$CDIGITS" serve --port 0 --port-file "$T/port3" --data "$T/data3" >"$T/third.log" 2>&1 &
THIRD_PID=$!
wait_until 120 '[ -s "$T/port3" ] || ! kill -0 "$THIRD_PID" 2>/dev/null'
check '[ -s "$T/port3" ] && [ "$(cat "$T/port3")" != "$FIRST" ] && curl -s -o /dev/null -w "%{http_code}" "http://127.0.0.1:$(cat "$T/port3")/index/json" | grep -qx 200' \
    "a server with --port 0 starts on a free port beside it ($(cat "$T/port3" 2>/dev/null))"
kill -TERM "$THIRD_PID" 2>/dev/null
wait "$THIRD_PID"

# the port is free again once the first server stops, though its connections linger
srv_stop
srv_start_on() {
    rm -f "$T/port"
    "$CDIGITS" serve --port "$1" --port-file "$T/port" --data "$T/data" >>"$T/server.log" 2>&1 &
    SRV_PID=$!
    wait_until 120 '[ -s "$T/port" ] || ! kill -0 "$SRV_PID" 2>/dev/null'
}
srv_start_on "$FIRST"
http GET /index/json
check '[ -s "$T/port" ] && [ "$CODE" = 200 ]' "a server starts again on port $FIRST right after the first stopped"
srv_stop
finish
