#!/usr/bin/env bash
# Crash loop with the real worker: while datasets are created and models train, kill
# the server with SIGKILL at a random moment twenty times, restarting it each time with
# --resume-interrupted. Before each kill the test reads every metric the API returns
# (those are acknowledged). At the end the database passes SQLite's integrity and
# foreign key checks, every job finishes Done (each worker was followed again by the
# next server, or its job resumed), no acknowledged metric is missing or changed, and
# no worker is left behind. Tiny images and a tiny
# network keep it near a minute.
. "$(dirname "$0")/server_lib.bash"
. "$(dirname "$0")/server_tiny_net.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
KILLS=${CRASH_LOOP_KILLS:-20}
SEED=${CRASH_LOOP_SEED:-$RANDOM}
echo "crash loop: $KILLS kills, seed $SEED (CRASH_LOOP_SEED replays the same moments)"
RANDOM=$SEED
for k in 1 2 3; do
    make_pngs "$T/images$k" --classes 3 --per-class 16 --size 32 --seed $((SEED + k))
done
# a model of the wide net trains for seconds, so the kills land mid-run
wide_net 32 12 >"$T/tiny.prototxt"
EPOCHS=${CRASH_LOOP_EPOCHS:-300}
SNAP=$((EPOCHS / 10))
DB=$T/data/cdigits.db
ARGS=(--data-root "$T" --abort-grace 2 --resume-interrupted)
ack() { # the metrics the API returns now, read incrementally: "job id phase name iteration attempt value"
    local id last
    # the models that may have new rows: those running now (the rest were read before
    # they finished, or are read in the final pass)
    for id in $(curl -s --max-time 5 "$B/completed_jobs/json" |
        python3 -c 'import json, sys; print(" ".join(j["id"] for j in json.load(sys.stdin)["running"] if j["type"] == "model"))'); do
        last=$(cat "$T/last.$id" 2>/dev/null || echo 0)
        curl -s --max-time 5 "$B/models/$id/metrics/json?all=1&after=$last&limit=100000" |
            python3 -c 'import json, sys
try:
    d = json.load(sys.stdin)
except Exception:
    sys.exit(0)
last = int(sys.argv[2])
with open(sys.argv[1], "a") as out:
    for m in d.get("metrics", []):
        out.write("%s %s %s %s %s %s %r\n" % (d["id"], m["id"], m["phase"], m["name"], m["iteration"], m["attempt"], m["value"]))
        last = max(last, m["id"])
print(last)' "$T/acked" "$last" >"$T/last.$id.new" && mv "$T/last.$id.new" "$T/last.$id"
    done
}
: >"$T/models"
: >"$T/models.ds"
: >"$T/datasets"
MAX_MODELS=5
srv_start "${ARGS[@]}"
login_as fred
ndata=0
for kill in $(seq 1 "$KILLS"); do
    # new work now and then: a dataset on kills 1, 7, 13; a model on each Done dataset
    if [ $((kill % 6)) = 1 ] && [ $ndata -lt 3 ]; then
        ndata=$((ndata + 1))
        http POST /datasets/images/classification/json -F folder_train="$T/images$ndata" -F resize_channels=1 \
            -F resize_width=32 -F resize_height=32 -F folder_pct_val=25 -F dataset_name="crash$ndata"
        [ "$CODE" = 200 ] && jv 'd["id"]' >>"$T/datasets"
    fi
    # keep a model training at every kill: a new one (on the datasets in turn) when
    # none runs, up to MAX_MODELS
    http GET /completed_jobs/json
    if [ "$(jv 'len([j for j in d["running"] if j["type"] == "model"])')" = 0 ] && [ "$(wc -l <"$T/models")" -lt "$MAX_MODELS" ]; then
        for ds in $(cat "$T/datasets") $(cat "$T/datasets"); do
            http GET "/datasets/$ds/status"
            [ "$(jv 'd["status"]')" = Done ] || continue
            grep -qx "$ds" "$T/models.ds" 2>/dev/null && [ "$(wc -l <"$T/models.ds")" -lt "$(wc -l <"$T/datasets")" ] && continue
            http POST /models/images/classification/json -F method=custom -F custom_network="<$T/tiny.prototxt" \
                -F train_epochs=$EPOCHS -F snapshot_interval=$SNAP -F val_interval=$SNAP -F model_name="m$kill-$ds" \
                -F dataset="$ds" -F random_seed=3 -F lr_policy=fixed -F learning_rate=0.01
            if [ "$CODE" = 200 ]; then
                jv 'd["id"]' >>"$T/models"
                echo "$ds" >>"$T/models.ds"
            fi
            break
        done
    fi
    # a random moment: 0.1 to 1.6 s of work
    sleep "$((RANDOM % 15 / 10)).$((RANDOM % 10))$((RANDOM % 10))"
    ack
    srv_kill9
    srv_start "${ARGS[@]}"
done
PASSES=$((PASSES + 1))
echo "ok   the server came back after each of $KILLS SIGKILLs"

# let everything finish (interrupted jobs were resumed at each start)
end=$((SECONDS + 150))
while [ $SECONDS -lt $end ]; do
    http GET /completed_jobs/json
    [ "$(jv 'len(d["running"])')" = 0 ] && break
    sleep 0.5
done
http GET /completed_jobs/json
check '[ "$(jv "len(d[\"running\"])")" = 0 ]' "no job is still running after the loop"
check '[ "$(jv "sorted(set(j[\"status\"] for j in d[\"datasets\"] + d[\"models\"]))")" = "[\"Done\"]" ]' \
    "every job ended Done ($(jv '[(j["name"], j["status"]) for j in d["datasets"] + d["models"] if j["status"] != "Done"]'))"
check '[ "$(jv "len(d[\"datasets\"])")" = "$ndata" ] && [ "$(jv "len(d[\"models\"])")" = "$(wc -l <"$T/models")" ]' \
    "every job created is there ($ndata datasets, $(wc -l <"$T/models") models)"
for id in $(cat "$T/models"); do
    http GET "/models/$id/json"
    check '[ "$(jv "set(range($SNAP, $EPOCHS + 1, $SNAP)) <= set(d[\"snapshots\"])")" = true ]' "model $id has a snapshot for every interval after $(jv 'd["tasks"][0]["attempt"]') attempts"
    jv 'd["tasks"][0]["attempt"]' >>"$T/attempts"
    http GET "/jobs/$id/log/json?n=100000"
    jv 'len([l for l in d["log"] if l["message"].startswith("Following worker ")])' >>"$T/adoptions"
done
# a kill mid-training leaves a worker that the next server follows again (or, when it
# could not, a job resumed in a later attempt)
ADOPTIONS=$(awk '{ n += $1 } END { print n + 0 }' "$T/adoptions")
check '[ "$ADOPTIONS" -gt 0 ] || [ "$(sort -n "$T/attempts" | tail -1)" -gt 1 ]' \
    "kills landed mid-training: models' workers were followed across $ADOPTIONS restarts, some model ran $(sort -n "$T/attempts" | tail -1) attempts"
srv_stop
check '[ "$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"PRAGMA integrity_check\").fetchone()[0])" "$DB")" = ok ]' \
    "the database passes PRAGMA integrity_check"
check '[ -z "$(python3 -c "import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(\"PRAGMA foreign_key_check\").fetchall() or \"\")" "$DB")" ]' \
    "and PRAGMA foreign_key_check"
# every acknowledged metric row is still there with the same values
python3 - "$DB" "$T/acked" >"$T/missing" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = {r[0]: r for r in db.execute("SELECT id, job_id, phase, name, iteration, attempt, value FROM metrics")}
seen = set()
for line in open(sys.argv[2]):
    job, mid, phase, name, it, attempt, value = line.split()
    if mid in seen:
        continue
    seen.add(mid)
    r = rows.get(int(mid))
    want = (job, phase, name, int(it), int(attempt), eval(value))
    if not r or tuple(r[1:]) != want:
        print("missing or changed:", line.strip(), "now", r)
print("acknowledged", len(seen), file=sys.stderr)
PY
NACK=$(sort -u -k2,2 "$T/acked" | wc -l)
check '[ ! -s "$T/missing" ] && [ "$NACK" -gt 0 ]' "all $NACK acknowledged metrics are still there, unchanged ($(head -3 "$T/missing"))"
left=0
for d in /proc/[0-9]*; do
    tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q -- "$T/data" && left=$((left + 1))
done
check '[ "$left" = 0 ]' "no worker is left running"
finish
