# DIGITS 6.1's own webapp tests, ported to curl (sourced by tests/shell/digits_webapp_*.sh;
# not a test itself). The helpers are those of digits/test_views.py,
# digits/dataset/images/classification/test_views.py and
# digits/model/images/classification/test_views.py, sending what Flask's test client sends:
# no Accept header, DIGITS's field names and routes, the login cookie on every request.
#
#   dg_setup [serve flags]   the imageset ($IMG), a real server and worker, DIGITS's login
#   dreq METHOD PATH [curl args]   sets CODE, BODY ($T/body) and LOCATION ($T/hdr)
#   run_case NAME FUNC [ARGS]      runs one ported test method: "ok NAME" or "FAIL NAME (why)"
#   expect 'shell test' 'what'     inside a case: on failure records why and returns 1
#   not_applicable NAME REASON     prints "not applicable: NAME (REASON)"
#   create_dataset [KEY=VALUE ...] [json]   DIGITS's create_dataset: sets DS_ID
#   job_wait_completion ID TYPE    DIGITS's helper, with Done|Aborted|Error as final
#   create_model [KEY=VALUE ...] [json]     DIGITS's create_model on $DATASET_ID: sets MODEL_ID
#   t_dataset_clone                BaseViewsTestWithDataset.test_clone (dataset and model classes)
. "$(dirname "${BASH_SOURCE[0]}")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"

IMG=$T/imageset
LOCATION=""
CASE_WHY=""
IMAGE_COUNT=10

# digits/test_imageset_creator.py: 10x10 color PNGs, a gradient from black to one channel,
# rotated per class; the class folders sort as blue-to-left, green-to-top, red-to-right.
# make_imageset DIR COUNT [unbalanced]
make_imageset() {
    python3 - "$@" <<'EOF'
import os, struct, sys, zlib
folder, count = sys.argv[1], int(sys.argv[2])
classes = [("red-to-right", 0, 0, count), ("green-to-top", 1, 90, count), ("blue-to-left", 2, 180, count)]
if len(sys.argv) > 3:
    classes.append(("blue-to-bottom", 2, 270, count // 2))
def png(path, rows):
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\0" + bytes(r) for r in rows)
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 10, 10, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for name, channel, rot, n in classes:
    os.makedirs(os.path.join(folder, name), exist_ok=True)
    for i in range(n):
        c = 200 + (55 * i // max(n - 1, 1))
        def value(x, y):
            # PIL rotates counter-clockwise: 90 puts the bright end at the top
            t = {0: x, 90: 9 - y, 180: 9 - x, 270: y}[rot]
            return c * t // 9
        rows = []
        for y in range(10):
            row = []
            for x in range(10):
                px = [0, 0, 0]
                px[channel] = value(x, y)
                row += px
            rows.append(row)
        png(os.path.join(folder, name, "%d.png" % i), rows)
EOF
}

# The server every ported class talks to: jobs in $T/data, images anywhere under $T, the CPU
# for select_gpu_count (as DIGITS without GPUs), and DIGITS's login (BaseViewsTest.setUpClass).
dg_setup() {
    make_imageset "$IMG" "$IMAGE_COUNT"
    srv_start --data-root "$T" --gpus none --abort-grace 1 "$@"
    JAR=$T/cookies.txt
    dreq POST /login -F username=digits-testsuite
    if [ "$CODE" != 302 ]; then
        echo "FAIL BaseViewsTest.setUpClass: login is $CODE, not 302"
        finish
    fi
}

dreq() {
    local method=$1 path=$2
    shift 2
    : >"$T/hdr"
    CODE=$(curl -s -o "$T/body" -D "$T/hdr" -w '%{http_code}' -X "$method" -H 'Accept:' -b "$JAR" -c "$JAR" \
        --max-time 60 "$@" "$B$path")
    BODY=$(head -c 2000 "$T/body" 2>/dev/null)
    LOCATION=$(sed -n 's/^[Ll]ocation: *//p' "$T/hdr" | tr -d '\r' | tail -1)
}

# job_id_from_response: the last path segment of Location
location_id() {
    local p=${LOCATION%%\?*}
    echo "${p##*/}"
}

expect() {
    if eval "$1"; then
        return 0
    fi
    CASE_WHY="$2 (code $CODE, body $(printf %s "$BODY" | head -c 300 | tr '\n' ' '))"
    return 1
}

run_case() {
    local name=$1
    shift
    CASE_WHY="it returned non-zero"
    if "$@"; then
        PASSES=$((PASSES + 1))
        echo "ok   $name"
    else
        FAILS=$((FAILS + 1))
        echo "FAIL $name: $CASE_WHY"
    fi
}

not_applicable() {
    echo "not applicable: $1 ($2)"
}

# ---- digits/test_views.py BaseViewsTest ----------------------------------------------------

job_exists() { # ID TYPE
    dreq GET "/$2/$1" -L
    case "$CODE" in
    200) return 0 ;;
    404) return 1 ;;
    esac
    CASE_WHY="GET /$2/$1 is $CODE, neither 200 nor 404"
    return 2
}

job_status() { # ID TYPE: prints the status
    dreq GET "/$2/$1/status"
    [ "$CODE" = 200 ] || { echo "<status $CODE>"; return; }
    jv 'd["status"]'
}

# job_wait_completion ID TYPE [SECONDS]: DIGITS polls the status until it is final, then
# asserts the job is in /completed_jobs.json and that /jobs/<id> leads to a page naming it.
job_wait_completion() {
    local id=$1 type=$2 end=$((SECONDS + ${3:-120})) st
    WAIT_STATUS=""
    while :; do
        st=$(job_status "$id" "$type")
        case "$st" in Done | Aborted | Error) break ;; esac
        if [ $SECONDS -ge $end ]; then
            CASE_WHY="$type $id took more than ${3:-120} seconds (status $st)"
            return 1
        fi
        sleep 0.1
    done
    WAIT_STATUS=$st
    dreq GET /completed_jobs.json
    expect '[ "$CODE" = 200 ] && [ "$(jv "\"$id\" in [j[\"id\"] for j in d[\"datasets\"] + d[\"models\"]]")" = true ]' \
        "/completed_jobs.json lists $id among the completed datasets or models" || return 1
    dreq GET "/jobs/$id" -L
    expect '[ "$CODE" = 200 ] && grep -q -- "$id" "$T/body"' "GET /jobs/$id (following redirects) names the job" || return 1
}

# wait_done ID TYPE: job_wait_completion == 'Done'
wait_done() {
    job_wait_completion "$1" "$2" || return 1
    expect '[ "$WAIT_STATUS" = Done ]' "$2 $1 ended $WAIT_STATUS, not Done: $(job_error "$1")"
}

job_error() {
    curl -s -H 'Accept:' "$B/jobs/$1/status" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("message") or d.get("error"))' 2>/dev/null
}

# delete_then_gone ID TYPE: DELETE is 200, then GET is 404
delete_then_gone() {
    dreq DELETE "/$2/$1"
    expect '[ "$CODE" = 200 ]' "DELETE /$2/$1 is 200" || return 1
    job_exists "$1" "$2"
    local rc=$?
    [ $rc = 2 ] && return 1
    expect '[ $rc = 1 ]' "GET /$2/$1 is 404 after the delete"
}

# json_same A B KEYS: the DIGITS keys are present in A and equal in B
json_same() {
    local diff
    diff=$(python3 - "$@" <<'EOF'
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in json.loads(sys.argv[3]):
    if k not in a:
        print("the JSON lacks DIGITS's key %r" % k); break
    if a.get(k) != b.get(k):
        print("%r differs: %s != %s" % (k, json.dumps(a.get(k)), json.dumps(b.get(k)))); break
EOF
)
    expect '[ -z "$diff" ]' "the clone's JSON equals the original's: $diff"
}

# ---- digits/dataset/images/classification/test_views.py ----------------------------------

# form_args KEY=VALUE...: curl -F arguments of DIGITS's defaults ($DEFAULTS) overridden by
# the arguments, as a test's kwargs override create_dataset's data; "KEY=" sends an empty
# value and "KEY" alone drops the field (a None, which Flask's test client does not send).
form_args() {
    local -A val=()
    local order=() kv k
    for kv in "${DEFAULTS[@]}" "$@"; do
        k=${kv%%=*}
        [ -n "${val[$k]+x}" ] || order+=("$k")
        if [ "$kv" = "$k" ]; then val[$k]=$'\x01'; else val[$k]=${kv#*=}; fi
    done
    FORM=()
    for k in "${order[@]}"; do
        [ "${val[$k]}" = $'\x01' ] || FORM+=(-F "$k=${val[$k]}")
    done
}

# post_job TYPE NOUN ID_EXPR [KEY=VALUE...] [json]: the form of $DEFAULTS overridden by the
# arguments, POSTed to /TYPE/images/classification (.json with "json") as DIGITS's
# create_dataset and create_model do. JOB_ID is the new job's id: jv ID_EXPR of the JSON
# reply, or the job of the redirect's Location, which must exist.
post_job() {
    local type=$1 noun=$2 id_expr=$3 json="" a
    local args=()
    shift 3
    for a in "$@"; do
        if [ "$a" = json ]; then json=.json; else args+=("$a"); fi
    done
    form_args "${args[@]}"
    dreq POST "/$type/images/classification$json" "${FORM[@]}"
    JOB_ID="" JOB_JSON=$json
    if [ -n "$json" ]; then
        expect '[ "$CODE" = 200 ]' "POST /$type/images/classification.json is 200" || return 1
        JOB_ID=$(jv "$id_expr")
        return 0
    fi
    expect '[ "$CODE" -ge 300 ] && [ "$CODE" -le 310 ]' "POST /$type/images/classification redirects (3xx)" || return 1
    JOB_ID=$(location_id)
    job_exists "$JOB_ID" "$type" || { [ $? = 1 ] && CASE_WHY="$noun $JOB_ID of Location $LOCATION does not exist"; return 1; }
}

# create_dataset [KEY=VALUE...] [json]: DIGITS's create_dataset; sets DS_ID
DS_W=10 DS_H=10 DS_C=3 DS_ENCODING=png DS_BACKEND=lmdb
create_dataset() {
    DEFAULTS=(dataset_name=test_dataset group_name=test_group method=folder "folder_train=$IMG"
        "resize_channels=$DS_C" "resize_width=$DS_W" "resize_height=$DS_H" "backend=$DS_BACKEND"
        "encoding=$DS_ENCODING" compression=none)
    post_job datasets dataset 'd["id"]' "$@"
    local rc=$?
    DS_ID=$JOB_ID
    return $rc
}

# BaseViewsTestWithDataset.test_clone, of the dataset classes and inherited by the model
# classes: DIGITS compares the two datasets' JSON without id and directory; the keys compared
# are those of DIGITS's json_dict(True).
DIGITS_DATASET_KEYS='["name", "status", "ParseFolderTasks", "CreateDbTasks"]'
t_dataset_clone() {
    create_dataset encoding=png folder_pct_test=0 folder_pct_val=25 folder_test= folder_test_max_per_class \
        folder_test_min_per_class=2 folder_train_max_per_class=3 folder_train_min_per_class=1 \
        folder_val_max_per_class folder_val_min_per_class=2 resize_mode=half_crop || return 1
    local job1=$DS_ID
    wait_done "$job1" datasets || return 1
    dreq GET "/datasets/$job1.json"
    expect '[ "$CODE" = 200 ]' "GET /datasets/<job1>.json is 200" || return 1
    cp "$T/body" "$T/clone1.json"
    create_dataset "clone=$job1" || return 1
    local job2=$DS_ID
    wait_done "$job2" datasets || return 1
    dreq GET "/datasets/$job2.json"
    expect '[ "$CODE" = 200 ]' "GET /datasets/<job2>.json is 200" || return 1
    json_same "$T/clone1.json" "$T/body" "$DIGITS_DATASET_KEYS"
}

# ---- digits/model/images/classification/test_views.py -----------------------------------

# DIGITS's CAFFE_NETWORK layer by layer: test_bad_network_definition's bogus network is
# the same hidden layer of another type, without the accuracy layer.
CAFFE_HIDDEN_LAYER='layer {
    name: "hidden"
    type: '"'"'InnerProduct'"'"'
    bottom: "data"
    top: "output"
}'
CAFFE_LOSS_LAYER='layer {
    name: "loss"
    type: "SoftmaxWithLoss"
    bottom: "output"
    bottom: "label"
    top: "loss"
    exclude { stage: "deploy" }
}'
CAFFE_ACCURACY_LAYER='layer {
    name: "accuracy"
    type: "Accuracy"
    bottom: "output"
    bottom: "label"
    top: "accuracy"
    include { stage: "val" }
}'
CAFFE_SOFTMAX_LAYER='layer {
    name: "softmax"
    type: "Softmax"
    bottom: "output"
    top: "softmax"
    include { stage: "deploy" }
}'
CAFFE_NETWORK="$CAFFE_HIDDEN_LAYER
$CAFFE_LOSS_LAYER
$CAFFE_ACCURACY_LAYER
$CAFFE_SOFTMAX_LAYER"

# create_model [KEY=VALUE...] [json]: DIGITS's create_model on $DATASET_ID with $NETWORK
# and the class attributes in MODEL_EXTRA (KEY=VALUE). Sets MODEL_ID, or MODEL_IDS (a sweep).
TRAIN_EPOCHS=1 SHUFFLE=false
MODEL_EXTRA=()
create_model() {
    printf '%s' "$NETWORK" >"$T/network.prototxt"
    DEFAULTS=(model_name=test_model group_name=test_group "dataset=$DATASET_ID" method=custom
        "custom_network=<$T/network.prototxt" batch_size=10 "train_epochs=$TRAIN_EPOCHS" framework=caffe
        random_seed=3405691582 "shuffle=$SHUFFLE" "${MODEL_EXTRA[@]}")
    post_job models model '" ".join(j["id"] for j in d["jobs"]) if "jobs" in d else d["id"]' "$@"
    local rc=$?
    MODEL_ID=$JOB_ID MODEL_IDS=""
    [ -z "$JOB_JSON" ] || MODEL_IDS=$JOB_ID
    return $rc
}

# classify_one_post ID CAT N [.json] [curl args]: POSTs $IMG/CAT/N.png as image.png to
# classify_one (classify_one.json with .json) of job ID
classify_one_post() {
    local id=$1 cat=$2 n=$3 ext=$4
    shift 4
    dreq POST "/models/images/classification/classify_one$ext?job_id=$id" -F "image_file=@$IMG/$cat/$n.png;filename=image.png" "$@"
}

# classify_one_for_job ID [check]: each category's 0.png through the HTML classify_one; the
# first <li> of ul.list-group is "NN.NN% label"
classify_one_for_job() {
    local id=$1 check=${2:-1} cat top
    for cat in $(categories); do
        classify_one_post "$id" "$cat" 0 ""
        expect '[ "$CODE" = 200 ]' "classify_one of $cat/0.png is 200" || return 1
        [ "$check" = 1 ] || continue
        top=$(html_top_prediction)
        expect '[ "$top" = "$cat" ]' "classify_one's first prediction for $cat/0.png is $cat, not '$top'" || return 1
    done
}

categories() {
    (cd "$IMG" && for d in */; do [ -d "$d" ] && echo "${d%/}"; done)
}

# the label of the first li of ul.list-group: its text split on white space, [1]
html_top_prediction() {
    python3 - "$T/body" <<'EOF'
import html.parser, sys
class P(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(); self.depth = 0; self.li = None; self.items = []
    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class") or ""
        if tag == "ul" and "list-group" in cls.split():
            self.depth += 1
        elif tag == "li" and self.depth:
            self.li = []
    def handle_endtag(self, tag):
        if tag == "li" and self.li is not None:
            self.items.append("".join(self.li).split()); self.li = None
        elif tag == "ul" and self.depth:
            self.depth -= 1
    def handle_data(self, data):
        if self.li is not None:
            self.li.append(data)
p = P()
p.feed(open(sys.argv[1], errors="replace").read())
print(p.items[0][1] if p.items and len(p.items[0]) > 1 else "")
EOF
}
