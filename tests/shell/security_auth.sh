#!/usr/bin/env bash
# A server with passwords (--auth password), bound off loopback: nobody gets in without
# a password or a token; passwords, sessions and tokens are kept only as hashes;
# sessions live in HttpOnly SameSite cookies that the server expires and ends at logout
# or a new password; failed logins are throttled; only an administrator manages users;
# a session needs a CSRF token or a same-origin Origin to change anything; tokens are
# created, used and revoked by their owner; owners (and admins) alone change their jobs,
# and with --job-visibility own alone read them. fake_worker.py stands in for the worker.
. "$(dirname "$0")/server_lib.bash"
need_server

fake_images 6
ADMIN_PW="adm-$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$ADMIN_PW" >"$T/admin.pw"
DB=$T/data/cdigits.db
sql() { python3 -c 'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); r = c.execute(sys.argv[2]).fetchall(); c.commit(); print("\n".join("|".join(str(x) for x in row) for row in r))' "$DB" "$1"; }

# ---- nobody can log in: the server does not start --------------------------------------------------
"$CDIGITS" serve --auth password --port 0 --data "$T/nobody" >"$T/nobody.txt" 2>&1
rc=$?
check '[ "$rc" != 0 ] && grep -q -- "--admin-password-file" "$T/nobody.txt"' "a password server without any password refuses to start, saying how"

ARGS=(--auth password --admin-password-file "$T/admin.pw" --bind 0.0.0.0 --worker "$FAKE" --data-root "$IMG"
      --abort-grace 1 --login-attempts 5)
FAKE_STEP=0.01 srv_start "${ARGS[@]}"
check 'grep -q "administrator admin created" "$T/server.log"' "the administrator is created from the password file, bound to 0.0.0.0"

# ---- nothing without a login --------------------------------------------------------------------------
JAR=$T/anon.txt
for p in /index/json /completed_jobs/json /hardware/json /files/x/y /tokens/json /events; do
    http GET "$p" --max-time 3
    check '[ "$CODE" = 401 ]' "GET $p without a login: 401"
done
CODE=$(curl -s -o /dev/null -w '%{http_code} %{redirect_url}' -H 'Accept: text/html' "$B/models/x")
check '[ "${CODE%% *}" = 302 ] && [[ "$CODE" == *"/login.html?next=/models/x"* ]]' "a browser opening a page is sent to the login page ($CODE)"
http GET /login.html
check '[ "$CODE" = 200 ]' "the login page itself is open"
http GET /login
check '[ "$(jv "d[\"auth\"]")" = password ] && [ "$(jv "d[\"username\"]")" = null ]' "GET /login says passwords are on"

# ---- logging in ---------------------------------------------------------------------------------------
JAR=$T/admin.txt
http POST /login -d username=admin -d password=wrong-password
check '[ "$CODE" = 401 ] && [ "$(jv "d[\"error\"][\"description\"]")" = "Wrong username or password" ]' "a wrong password: 401, not saying which part was wrong"
http POST /login -d username=nosuchuser -d password=whatever-it-is
check '[ "$CODE" = 401 ] && [ "$(jv "d[\"error\"][\"description\"]")" = "Wrong username or password" ]' "an unknown user gets the same answer"
http POST /login -d username=admin
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"password\"][0]")" ]' "a username alone is not enough"
curl -s -D "$T/login.h" -o "$T/body" -c "$JAR" -X POST "$B/login" -d username=admin --data-urlencode "password=$ADMIN_PW"
check 'grep -qi "^HTTP/1.1 302" "$T/login.h"' "the right password logs in"
check 'grep -i "^Set-Cookie: cdigits_session=" "$T/login.h" | grep -qi "HttpOnly" && grep -i "^Set-Cookie: cdigits_session=" "$T/login.h" | grep -qi "SameSite=Lax" && grep -i "^Set-Cookie: cdigits_session=" "$T/login.h" | grep -qi "Max-Age=43200"' \
    "the session cookie is HttpOnly, SameSite=Lax, with the session's lifetime"
SID=$(awk '$6 == "cdigits_session" {print $7}' "$JAR")
check '[ ${#SID} = 64 ] && [ "$(sql "SELECT COUNT(*) FROM sessions WHERE id_hash = '"'"'$SID'"'"'")" = 0 ] && [ "$(sql "SELECT COUNT(*) FROM sessions")" = 1 ]' \
    "the store keeps a hash of the session id, not the id"
check '[[ "$(sql "SELECT password_hash FROM users WHERE name = '"'"'admin'"'"'")" == \$argon2id\$* ]] && ! grep -q -- "$ADMIN_PW" "$DB"' \
    "the password is stored as an argon2id hash only"
http GET /login
CSRF=$(jv 'd["csrf_token"]')
check '[ "$(jv "d[\"username\"]")" = admin ] && [ "$(jv "d[\"is_admin\"]")" = true ] && [ ${#CSRF} = 64 ]' "GET /login: admin, with the session's CSRF token"

# ---- CSRF with a session ------------------------------------------------------------------------------------
http POST /users/json -d username=fred -d password=fred-password-1
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "X-CSRF-Token"' "a session without a CSRF token or Origin cannot change anything"
# the token with its last character changed (to one it is not)
WRONG_CSRF=${CSRF:0:63}$([ "${CSRF:63}" = 0 ] && echo 1 || echo 0)
http POST /users/json -H "X-CSRF-Token: $WRONG_CSRF" -d username=fred -d password=fred-password-1
check '[ "$CODE" = 403 ]' "a wrong CSRF token is refused"
http POST /users/json -H "Origin: http://evil.example" -H "X-CSRF-Token: $CSRF" -d username=fred -d password=fred-password-1
check '[ "$CODE" = 403 ]' "a cross-site request is refused even with the token"
http POST /users/json -H "X-CSRF-Token: $CSRF" -d username=fred -d password=fred-password-1
check '[ "$CODE" = 200 ]' "the admin creates fred with the CSRF token"
http POST /users/json -H "Origin: $B" -d username=ann -d password=ann-password-1
check '[ "$CODE" = 200 ]' "and ann from the server's own page (same-origin Origin)"
http POST /users/json -H "Origin: $B" -d username=bob -d password=short
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"password\"][0]")" ]' "a short password is refused"
http GET /users/json
check '[ "$(jv "sorted(u[\"name\"] for u in d[\"users\"])")" = "[\"admin\", \"ann\", \"fred\"]" ] && ! grep -q argon2 "$T/body"' "the user list has no hashes"

# ---- tokens ------------------------------------------------------------------------------------------------
login_pw() { JAR=$T/$1.txt; http POST /login -d "username=$1" --data-urlencode "password=$2"; }
login_pw fred fred-password-1
check '[ "$CODE" = 302 ]' "fred logs in"
http POST /tokens/json -H "Origin: $B" -d name=script
FTOK=$(jv 'd["token"]')
FTOK_ID=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [[ "$FTOK" == cdt_* ]] && [ ${#FTOK} = 68 ]' "fred creates an API token"
check '! grep -q "$FTOK" "$DB" "$DB-wal" 2>/dev/null' "the token is not stored, only its hash"
http GET /tokens/json
check '[ "$(jv "len(d[\"tokens\"])")" = 1 ] && ! grep -q "$FTOK" "$T/body"' "the token list does not show the token again"
JAR=$T/none.txt
tok() { http "$@" -H "Authorization: Bearer $FTOK"; }
tok POST /datasets/images/classification/json -F dataset_name=freds -F folder_train="$IMG/train"
DS=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ -n "$DS" ]' "a script creates a dataset with the token (no cookie, no CSRF token)"
ds_ended() { tok GET "/datasets/$DS/status"; case "$(jv 'd["status"]')" in Done | Error | Aborted) return 0 ;; esac; return 1; }
wait_until 300 ds_ended
tok GET "/datasets/$DS/json"
check '[ "$(jv "d[\"username\"]")" = fred ] && [ "$(jv "d[\"status\"]")" = Done ]' "the job belongs to fred and is Done"
http GET /index/json -H "Authorization: Bearer cdt_$(printf '%064d' 0)"
check '[ "$CODE" = 401 ] && jv "d[\"error\"][\"description\"]" | grep -q "not valid"' "a made-up token: 401"

# ---- whose job ---------------------------------------------------------------------------------------------
login_pw ann ann-password-1
ANN=$JAR
http POST /tokens/json -H "Origin: $B" -d name=anns
ATOK=$(jv 'd["token"]')
JAR=$T/none.txt
http POST "/datasets/$DS/abort" -H "Authorization: Bearer $ATOK"
check '[ "$CODE" = 403 ]' "ann cannot abort fred's job"
http DELETE "/datasets/$DS" -H "Authorization: Bearer $ATOK"
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "belongs to fred"' "ann cannot delete fred's job"
http PUT "/jobs/$DS" -H "Authorization: Bearer $ATOK" -d job_name=anns
check '[ "$CODE" = 403 ]' "ann cannot rename fred's job"
http DELETE "/tokens/$FTOK_ID" -H "Authorization: Bearer $ATOK"
check '[ "$CODE" = 404 ]' "ann cannot revoke fred's token"
http GET /users/json -H "Authorization: Bearer $ATOK"
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q administrator' "ann is not an administrator"
http GET "/datasets/$DS/json" -H "Authorization: Bearer $ATOK"
check '[ "$CODE" = 200 ]' "ann reads fred's job (--job-visibility all)"
JAR=$T/admin.txt
http PUT "/jobs/$DS" -H "X-CSRF-Token: $CSRF" -d job_name=renamed-by-admin
check '[ "$CODE" = 200 ]' "an administrator may change anyone's job"

# ---- sessions end: logout, expiry, a new password ------------------------------------------------------------
JAR=$ANN
http GET /login
check '[ "$(jv "d[\"username\"]")" = ann ]' "ann's session still works (the throttle stops logins, not sessions)"
cp "$ANN" "$T/ann-copy.txt"
http POST /logout -H "Origin: $B"
JAR=$T/ann-copy.txt
http GET /index/json
check '[ "$CODE" = 401 ]' "after logout the old session cookie is worthless (ended on the server)"
JAR=$T/fred.txt
http GET /index/json
check '[ "$CODE" = 200 ]' "fred's session works"
sql "UPDATE sessions SET expires = 1 WHERE username = 'fred'" >/dev/null
http GET /index/json
check '[ "$CODE" = 401 ]' "a session past its server-side expiry is refused"
login_pw fred fred-password-1
http POST /users/fred/password -H "Origin: $B" -d password=fred-password-2 -d old_password=wrong
check '[ "$CODE" = 400 ]' "a new password needs the old one"
http POST /users/fred/password -H "Origin: $B" -d password=fred-password-2 -d old_password=fred-password-1
check '[ "$CODE" = 200 ]' "fred changes his password"
http GET /index/json
check '[ "$CODE" = 401 ]' "a new password ends the user's sessions"
JAR=$T/none.txt
http DELETE "/tokens/$FTOK_ID" -H "Authorization: Bearer $FTOK"
check '[ "$CODE" = 200 ]' "fred revokes his token with the token"
http GET /index/json -H "Authorization: Bearer $FTOK"
check '[ "$CODE" = 401 ]' "a revoked token is refused"

# ---- --job-visibility own ---------------------------------------------------------------------------------
srv_stop
# fred's pretrained model, as an upload leaves it (a model job without a dataset; the
# upload itself needs a worker that loads models, which fake_worker.py is not)
PT=$(date +%Y%m%d-%H%M%S)-$(head -c 2 /dev/urandom | od -An -tx1 | tr -d ' \n')
mkdir -p "$T/data/jobs/$PT"
sql "INSERT INTO jobs (id, type, name, username, status, created, dir, config) VALUES ('$PT', 'model', 'freds-pretrained', 'fred', 'D', $(date +%s), '$T/data/jobs/$PT', '{\"network\": {\"method\": \"pretrained\"}}')" >/dev/null
FAKE_STEP=0.01 srv_start "${ARGS[@]}" --job-visibility own
AH=(-H "Authorization: Bearer $ATOK")
http GET /completed_jobs/json "${AH[@]}"
check '[ "$CODE" = 200 ] && ! grep -q "$DS" "$T/body"' "ann's home tables do not list fred's job"
check '! grep -q "$PT" "$T/body"' "nor fred's pretrained model"
http GET /index/json "${AH[@]}"
check '! grep -q "$DS" "$T/body" && ! grep -q "$PT" "$T/body"' "nor does ann's /index/json list fred's dataset or pretrained model"
http GET /pretrained_models/json "${AH[@]}"
check '[ "$CODE" = 200 ] && ! grep -q "$PT" "$T/body"' "nor does ann's list of pretrained models"
for p in "/datasets/$DS/json" "/jobs/$DS/status" "/jobs/$DS/log/json" "/files/$DS/dataset.json" "/clone/$DS/json" "/jobs/$DS/events"; do
    http GET "$p" "${AH[@]}" --max-time 3
    check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "only their own jobs"' "ann reading $p of fred's: 403"
done
http POST /models/images/classification/json "${AH[@]}" -F dataset="$DS" -F model_name=m -F standard_networks=lenet -F train_epochs=1
check '[ "$CODE" = 403 ]' "ann cannot train on fred's dataset"
curl -s -N --max-time 120 "${AH[@]}" "$B/events" >"$T/ann-events.txt" &
EV=$!
check 'wait_until 120 "grep -q \"^event: gpus\" \"$T/ann-events.txt\""' "ann's home event stream opens"
JAR=$T/admin.txt
login_pw admin "$ADMIN_PW"
http GET /login
CSRF=$(jv 'd["csrf_token"]')
http PUT "/jobs/$DS" -H "X-CSRF-Token: $CSRF" -d job_name=seen-by-fred-only
http GET /completed_jobs/json
check 'grep -q "$DS" "$T/body"' "the admin sees every job"
# fred owns every job there is: his lists must be the admin's (every job, as under
# --job-visibility all), section by section
sections() { python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(sorted((k, sorted(x["id"] for x in v)) for k, v in d.items() if isinstance(v, list) and k != "model_output_fields"))' "$1"; }
cp "$T/body" "$T/admin-completed.json"
http GET /index/json
cp "$T/body" "$T/admin-index.json"
JAR=$T/fred.txt
login_pw fred fred-password-2
http GET /completed_jobs/json
check '[ "$(jv "[x[\"id\"] for x in d[\"pretrained_models\"]]")" = "[\"$PT\"]" ] && ! grep -q "$PT" <<<"$(jv "d[\"models\"]")"' \
    "fred's home tables list his pretrained model among pretrained_models, not among the models"
check '[ "$(sections "$T/body")" = "$(sections "$T/admin-completed.json")" ]' "fred's home tables are the admin's, section by section"
http GET /index/json
check 'grep -q "$PT" <<<"$(jv "d[\"models\"]")"' "fred's /index/json lists his pretrained model among the models"
check '[ "$(sections "$T/body")" = "$(sections "$T/admin-index.json")" ]' "fred's /index/json is the admin's, section by section"
http GET /login
http PUT "/jobs/$PT" -H "X-CSRF-Token: $(jv 'd["csrf_token"]')" -d job_name=freds-renamed
check '[ "$CODE" = 200 ]' "fred renames his pretrained model"
JAR=$T/none.txt
# then a job of ann's own: her stream carries it, and events come in order, so a leak of
# the rename above would have come before it
http POST /datasets/images/classification/json "${AH[@]}" -F dataset_name=anns-own -F folder_train="$IMG/train"
ANN_DS=$(jv 'd["id"]')
check 'wait_until 120 "grep -q \"$ANN_DS\" \"$T/ann-events.txt\""' "ann's stream announces her own new dataset"
kill "$EV" 2>/dev/null
wait "$EV" 2>/dev/null
check '! grep -q "$DS" "$T/ann-events.txt"' "ann's home event stream carries nothing of fred's job"
check '! grep -q "$PT" "$T/ann-events.txt"' "nor of fred's pretrained model"

# ---- throttled logins ---------------------------------------------------------------------------------------
# (the throttle lives in the server's memory: this runs on the restarted server, whose
# only failed logins are these)
JAR=$T/guess.txt
n401=0
for i in 1 2 3 4 5; do
    http POST /login -d username=ann -d password=guess-$i
    [ "$CODE" = 401 ] && n401=$((n401 + 1))
done
check '[ "$n401" = 5 ]' "five wrong passwords for ann: 401 each"
CODE=$(curl -s -D "$T/h429" -o "$T/body" -w '%{http_code}' -X POST "$B/login" -d username=ann -d password=ann-password-1)
check '[ "$CODE" = 429 ] && grep -qi "^Retry-After: [0-9]" "$T/h429" && jv "d[\"error\"][\"description\"]" | grep -q "Too many failed logins"' \
    "the sixth attempt, even with the right password, gets 429 with Retry-After"

srv_stop
finish
