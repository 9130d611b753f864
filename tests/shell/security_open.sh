#!/usr/bin/env bash
# A server without passwords (--auth none, DIGITS's username login) as an attacker sees
# it: it will not listen off loopback, a page of another site can neither replay a form
# nor rebind a DNS name to it, users cannot touch each other's jobs, paths cannot leave
# the jobs folder, hostile uploads are refused or served inert, and every response has
# the security headers. tests/shell/fake_worker.py stands in for the worker.
. "$(dirname "$0")/server_lib.bash"
need_server

fake_images 6
mkdir -p "$T/outside"
echo "secret" >"$T/outside/secret.txt"

# ---- exposure ------------------------------------------------------------------------------
"$CDIGITS" serve --bind 0.0.0.0 --port 0 --data "$T/refused" >"$T/bind.txt" 2>&1
rc=$?
check '[ "$rc" = 2 ] && grep -q -- "--auth password" "$T/bind.txt" && grep -q -- "--admin-password-file" "$T/bind.txt"' \
    "--bind 0.0.0.0 without authentication is refused with the way to turn it on (exit $rc)"
check '[ ! -e "$T/refused/cdigits.db" ]' "the refused server created nothing"

FAKE_STEP=0.01 srv_start --worker "$FAKE" --data-root "$IMG" --abort-grace 1 --max-upload 100K

# ---- headers on every kind of response -------------------------------------------------------
hdrs() { curl -s -D - -o /dev/null "$@"; }
CSP="default-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
for path in / /index/json /login.html /js/common.js /no/such/route; do
    h=$(hdrs "$B$path")
    check 'grep -qi "^Content-Security-Policy: $CSP" <<<"$h" && grep -qi "^X-Content-Type-Options: nosniff" <<<"$h" && grep -qi "^X-Frame-Options: DENY" <<<"$h" && grep -qi "^Referrer-Policy: same-origin" <<<"$h"' \
        "$path carries the CSP, nosniff, frame refusal and referrer policy"
done
check '! grep -rEq "(src|href)=\"(data|blob):|url\((data|blob):" "$SRC/web"/*.html "$SRC/web/js" "$SRC/web/css"' \
    "the UI loads no image or style from data: or blob: URLs (the CSP allows none)"

# ---- login and a job of fred's ------------------------------------------------------------------
login_as fred
check '[ "$CODE" = 302 ] && grep -q "HttpOnly_.*username.*fred" "$JAR"' "the username cookie is HttpOnly"
FRED=$JAR
http POST /datasets/images/classification/json -F dataset_name=freds -F folder_train="$IMG/train" -F group_name=g1
DS=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$DS" Done 120' "fred's dataset is Done"

# ---- cross-site form replay ----------------------------------------------------------------------
# what a page on evil.example makes a logged-in browser send
http POST /group -H "Origin: http://evil.example" -d "job_ids=$DS" -d group_name=pwned
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "Cross-site request refused"' \
    "a cross-site form (Origin: evil.example) is refused with a clear message"
http POST /abort_jobs -H "Sec-Fetch-Site: cross-site" -d "job_ids=$DS"
check '[ "$CODE" = 403 ]' "Sec-Fetch-Site: cross-site is refused"
http POST /group -H "Sec-Fetch-Site: same-site" -H "Origin: http://127.0.0.1:1" -d "job_ids=$DS" -d group_name=pwned
check '[ "$CODE" = 403 ]' "another port of the same host (same-site) is refused"
http POST /group -H "Referer: http://evil.example/page.html" -d "job_ids=$DS" -d group_name=pwned
check '[ "$CODE" = 403 ]' "a cross-site Referer without Origin is refused"
http POST /group -H "Origin: null" -d "job_ids=$DS" -d group_name=pwned
check '[ "$CODE" = 403 ]' "Origin: null (a sandboxed page) is refused"
http DELETE "/datasets/$DS" -H "Origin: http://evil.example"
check '[ "$CODE" = 403 ]' "a cross-site DELETE is refused"
http POST /login -H "Origin: http://evil.example" -d username=mallory
check '[ "$CODE" = 403 ]' "a cross-site login (login CSRF) is refused"
http GET "/datasets/$DS/json"
check '[ "$(jv "d[\"group\"]")" = g1 ] && [ "$(jv "d[\"status\"]")" = Done ]' "nothing the refused requests asked for happened"
http POST /group -H "Origin: $B" -H "Sec-Fetch-Site: same-origin" -d "job_ids=$DS" -d group_name=g2
check '[ "$CODE" = 200 ]' "the same request from the server's own page is accepted"
printf 'csrf' >/dev/null
http POST /group -H "X-CSRF-Token: forged" -d "job_ids=$DS" -d group_name=g3
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q CSRF' "a CSRF token that does not match is refused"
http POST /group -d "job_ids=$DS" -d group_name=g2b
check '[ "$CODE" = 200 ]' "a script with the cookie and no browser headers works as in DIGITS"

# ---- DNS rebinding: a loopback server answers only to local names --------------------------------------
http GET /index/json -H "Host: rebind.evil.example:$PORT"
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "does not answer to the host name"' \
    "a request for another host name (DNS rebinding) is refused"
http GET /index/json -H "Host: localhost:$PORT"
check '[ "$CODE" = 200 ]' "localhost is answered"

# ---- another user's job ---------------------------------------------------------------------------
login_as ann
http POST "/datasets/$DS/abort"
check '[ "$CODE" = 403 ] && jv "d[\"error\"][\"description\"]" | grep -q "belongs to fred"' "ann cannot abort fred's job"
http DELETE "/datasets/$DS"
check '[ "$CODE" = 403 ]' "ann cannot delete fred's job"
http PUT "/jobs/$DS" -d job_name=mine
check '[ "$CODE" = 403 ]' "ann cannot rename fred's job"
http DELETE /jobs -d "job_ids=$DS"
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "not permitted"' "ann's bulk delete skips fred's job"
http GET "/datasets/$DS/json"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = freds ]' "ann may read it (--job-visibility all, as DIGITS)"
JAR=$T/forged.txt
printf '127.0.0.1\tFALSE\t/\tFALSE\t0\tusername\t../../fred\n' >"$JAR"
http POST /datasets/images/classification/json -F dataset_name=x -F folder_train="$IMG/train"
check '[ "$CODE" = 401 ]' "a username cookie that is not a valid name logs nobody in"

# ---- paths out of the jobs folder ------------------------------------------------------------------
JAR=$FRED
raw() { CODE=$(curl -s --path-as-is -o "$T/body" -w '%{http_code}' -b "$JAR" "$B$1"); }
for p in "/files/../cdigits.db" "/files/$DS/../../cdigits.db" "/files/%2e%2e/%2e%2e/%2e%2e/etc/passwd" \
    "/files/$DS/..%2f..%2fcdigits.db" "/../../../../etc/passwd" "/js/../../../../etc/passwd" "/files/%00" \
    "/files/$DS/%2e%2e%2f%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd"; do
    raw "$p"
    check '[ "$CODE" = 404 ] && ! grep -q "root:" "$T/body"' "$p is refused (404)"
done
ln -s "$T/outside/secret.txt" "$T/data/jobs/$DS/link.txt"
raw "/files/$DS/link.txt"
check '[ "$CODE" = 404 ] && ! grep -q secret "$T/body"' "a symlink inside a job folder to a file outside is refused"
http POST /datasets/images/classification/json -F dataset_name=x -F folder_train="$IMG/train/../../outside"
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"folder_train\"][0]" | grep -q outside' "a dataset folder with .. out of the roots is refused"

# ---- hostile uploads ------------------------------------------------------------------------------
printf 'cat/1.png 0\n' >"$T/list.txt"
printf 'cat\ndog\n' >"$T/labels.txt"
http POST /datasets/images/classification/json -F method=textfile -F "textfile_train_images=@$T/list.txt;filename=../../../../evil.txt" \
    -F "textfile_labels_file=@$T/labels.txt;filename=/tmp/evil-labels.txt" -F textfile_train_folder="$IMG/train" -F dataset_name=up
check '[ "$CODE" = 200 ] && [ ! -e "$T/evil.txt" ] && [ ! -e "$T/data/evil.txt" ] && [ ! -e /tmp/evil-labels.txt ]' \
    "upload file names with .. or an absolute path write nothing outside the job folder"
head -c 150000 /dev/urandom >"$T/big.bin"
http POST /datasets/images/classification/json -F dataset_name=big -F "textfile_train_images=@$T/big.bin"
check '[ "$CODE" = 413 ]' "an upload over --max-upload is refused (413)"
http POST /datasets/images/classification/json -H 'Content-Type: multipart/form-data; boundary=abc' \
    --data-binary $'--abc\r\nContent-Disposition: form-data; name="dataset_name"\r\n\r\nx'
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "Malformed form body"' "a truncated multipart body is refused (400)"
http POST /datasets/images/classification/json -H 'Content-Type: application/json' -d '{"dataset_name": {"$gt": ""}}'
check '[ "$CODE" = 400 ]' "a JSON body with a nested object is refused (400)"
# random bytes from a printed seed, and the case that once slipped through: text, then a
# NUL byte, then binary (a C string would have kept only the text before the NUL)
GSEED=${CDIGITS_TEST_SEED:-$RANDOM}
echo "     garbage seed $GSEED (CDIGITS_TEST_SEED replays it)"
python3 -c 'import random, sys; r = random.Random(int(sys.argv[1])); sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(3000)))' "$GSEED" >"$T/garbage.prototxt"
http POST /models/images/classification/json -F method=custom -F "custom_network=<$T/garbage.prototxt" \
    -F dataset="$DS" -F model_name=junk -F train_epochs=1
check '[ "$CODE" = 400 ]' "a binary file as a network definition is refused (400)"
printf 'name: "x"\000\377\376binary' >"$T/nul.prototxt"
http POST /models/images/classification/json -F method=custom -F "custom_network=<$T/nul.prototxt" \
    -F dataset="$DS" -F model_name=junk -F train_epochs=1
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"custom_network\"][0]" | grep -q "NUL byte"' \
    "text followed by a NUL byte is refused naming the NUL ($(jv 'd.get("errors")'))"
printf '<script>alert(1)</script>' >"$T/data/jobs/$DS/page.html"
h=$(hdrs "$B/files/$DS/page.html")
check 'grep -qi "^Content-Type: text/plain" <<<"$h" && grep -qi "^Content-Security-Policy: default-src .none.; img-src .self.; sandbox" <<<"$h"' \
    "an HTML file in a job folder is served as plain text in a sandbox"

srv_stop
finish
