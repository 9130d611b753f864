#!/usr/bin/env bash
# DIGITS 6.1's forms, routes and downloads, with the real worker on generated images:
# a creation form posted without asking for JSON answers 302 to the new job (its
# errors come as a page with 400), with JSON it answers the job; clone=<id> starts a
# job from another's fields with the posted ones over them; the .../new form pages;
# the manual upload of a pretrained model (POST /pretrained_models/new); .tar.bz2
# downloads (and "Invalid extension"); and, with --auth none, a username field that
# acts as that user without a cookie.
. "$(dirname "$0")/infer_lib.bash" || exit 1

loc() { grep -i '^location:' "$T/h" | tr -d '\r' | sed 's/^[Ll]ocation: *//'; }
ctype() { grep -i '^content-type:' "$T/h" | tr -d '\r' | sed 's/^[Cc]ontent-[Tt]ype: *//'; }
# post_job_fields PATH 'test' 'what' [curl args]: POSTs to PATH, checks the reply with 'test'
# as 'what', sets NEW_ID to the job it made and GETs /clone/NEW_ID/json: the job's fields
post_job_fields() {
    local path=$1 test=$2 what=$3
    shift 3
    http POST "$path" "$@"
    check "$test" "$what"
    NEW_ID=$(jv 'd["id"]')
    http GET "/clone/$NEW_ID/json"
}

make_pngs "$T/images" --classes 3 --per-class 16 --size 28 --seed 11
srv_start --data-root "$T/images" --web "$SRC/web"
login_as tester
DSF=(-F folder_train="$T/images" -F encoding=png -F resize_channels=1 -F resize_width=28 -F resize_height=28
     -F folder_pct_val=25)

# ---- 2. a form post without JSON: 302 to the new job; with Accept: application/json: JSON
http POST /datasets/images/classification -D "$T/h" "${DSF[@]}" -F dataset_name=shapes
DS=$(loc | sed -n 's|^/datasets/||p')
check '[ "$CODE" = 302 ] && [ -n "$DS" ]' "a dataset form post answers 302 to /datasets/<id>"
wait_status "$DS" Done 120
check '[ $? = 0 ]' "the dataset of the form post is made"
http POST /datasets/images/classification -H 'Accept: application/json' "${DSF[@]}" -F dataset_name=shapes2
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = shapes2 ]' "Accept: application/json gets the new dataset as JSON"
DS2=$(jv 'd["id"]')
http POST /datasets/images/classification -D "$T/h" "${DSF[@]}"
check '[ "$CODE" = 400 ] && ctype | grep -q text/html && grep -q "dataset_name" "$T/body"' \
    "form errors without JSON are a page with status 400 naming the field"
http POST /datasets/images/classification.json "${DSF[@]}"
check '[ "$CODE" = 400 ] && [ "$(jv "list(d[\"errors\"])")" = "[\"dataset_name\"]" ]' \
    "form errors of .json are DIGITS's {errors} with 400"
http POST /datasets/images/classification -H 'Accept: text/html, application/json' "${DSF[@]}"
check '[ "$CODE" = 400 ] && grep -q "<li>" "$T/body"' "Accept ranking text/html first gets the page"

http POST /models/images/classification -D "$T/h" -F method=standard -F standard_networks=lenet -F train_epochs=2 \
    -F batch_size=12 -F learning_rate=0.02 -F lr_policy=fixed -F random_seed=4 -F model_name=lenet -F dataset="$DS"
ML=$(loc | sed -n 's|^/models/||p')
check '[ "$CODE" = 302 ] && [ -n "$ML" ]' "a model form post answers 302 to /models/<id>"
wait_status "$ML" Done 120
check '[ $? = 0 ]' "the model of the form post trains"

# ---- 1. clone=<id> on a create form: DIGITS's rule, the saved fields over the posted
# ones (fields the job was not made with are added); POST /clone/<id> is cdigits's way
# to copy a job with changes: the posted fields over the saved ones
post_job_fields /datasets/images/classification/json '[ "$CODE" = 200 ]' "a dataset form with clone= needs no other field" \
    -F clone="$DS" -F dataset_name=copy -F resize_width=24
DSC=$NEW_ID
check '[ "$(jv "d[\"fields\"][\"folder_train\"]")" = "$T/images" ] && [ "$(jv "d[\"fields\"][\"resize_height\"]")" = 28 ]' \
    "the clone has the saved fields"
check '[ "$(jv "d[\"fields\"][\"resize_width\"]")" = 28 ] && [ "$(jv "d[\"fields\"][\"dataset_name\"]")" = shapes ] && [ "$(jv "\"clone\" in d[\"fields\"]")" = false ]' \
    "the saved fields win over the posted ones, as in DIGITS"
wait_status "$DSC" Done 120
check '[ $? = 0 ]' "the cloned dataset is made"
post_job_fields "/clone/$DS/json" '[ "$CODE" = 200 ]' "POST /clone/<id> with changed fields" \
    -F dataset_name=copy -F resize_width=24
DSX=$NEW_ID
check '[ "$(jv "d[\"fields\"][\"resize_width\"]")" = 24 ] && [ "$(jv "d[\"fields\"][\"dataset_name\"]")" = copy ] && [ "$(jv "d[\"fields\"][\"resize_height\"]")" = 28 ]' \
    "POST /clone/<id>: the posted fields replace the saved ones, the rest are kept"
wait_status "$DSX" Done 120
http GET "/datasets/$DSX/json"
check '[ "$(jv "d[\"CreateDbTasks\"][0][\"image_width\"]")" = 24 ]' "the copy was made with the posted width"
post_job_fields /models/images/classification.json '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = lenet ]' \
    "a model form with clone= keeps the saved name" -F clone="$ML" -F model_name=lenet1 -F train_epochs=1
MC=$NEW_ID
check '[ "$(jv "d[\"fields\"][\"standard_networks\"]")" = lenet ] && [ "$(jv "d[\"fields\"][\"train_epochs\"]")" = 2 ] && [ "$(jv "d[\"fields\"][\"dataset\"]")" = "$DS" ]' \
    "the cloned model has the saved network, dataset and epochs"
post_job_fields "/clone/$ML/json" '[ "$CODE" = 200 ]' "POST /clone/<id> of a model with changed fields" \
    -F model_name=lenet1 -F train_epochs=1
MX=$NEW_ID
check '[ "$(jv "d[\"fields\"][\"train_epochs\"]")" = 1 ] && [ "$(jv "d[\"fields\"][\"model_name\"]")" = lenet1 ] && [ "$(jv "d[\"fields\"][\"standard_networks\"]")" = lenet ]' \
    "the model copy has the posted epochs and name and the saved network"
http POST /models/images/classification.json -F clone=20000101-000000-dead -F model_name=x
check '[ "$CODE" = 404 ] && jv "d[\"error\"][\"description\"]" | grep -q "clone=20000101-000000-dead"' \
    "clone= of an unknown job is 404"
http POST /models/images/classification.json -F clone="$DS" -F model_name=x
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "is a dataset"' \
    "clone= of a dataset on the model form is 400"
wait_status "$MC" Done 120
check '[ $? = 0 ]' "the cloned model trains"
wait_status "$MX" Done 120
check '[ $? = 0 ]' "the model copy trains"

# ---- 3. DIGITS's form pages
for p in datasets/images/classification/new:dataset-form models/images/classification/new:model-form \
         pretrained_models/new:weights_file; do
    http GET "/${p%%:*}?clone=$DS" -D "$T/h"
    check '[ "$CODE" = 200 ] && ctype | grep -q text/html && grep -q "<base href=\"/\">" "$T/body" && grep -q "${p##*:}" "$T/body"' \
        "GET /${p%%:*} is the form, with its files found from the UI's root"
done

# ---- 5. downloads: .tar.bz2, and any other extension is 400
curl -s -D "$T/h" -o "$T/m.tar.bz2" "$B/models/$ML/download.tar.bz2"
py '
import tarfile
t = tarfile.open(sys.argv[1], "r:bz2")
names = t.getnames()
assert "labels.txt" in names and any(n.endswith(".cdw") for n in names), names
t.extractall(sys.argv[2])
' "$T/m.tar.bz2" "$T/unpacked"
check '[ $? = 0 ] && [ "$(head -c 3 "$T/m.tar.bz2")" = BZh ] && grep -qi "filename=\"${ML}_epoch_2.tar.bz2\"" "$T/h"' \
    "download.tar.bz2 is a bzip2 tar of the model's files"
curl -s -o "$T/m.tgz" "$B/models/$ML/download.tgz"
check 'py "import tarfile; tarfile.open(sys.argv[1], \"r:gz\")" "$T/m.tgz"' "download.tgz is a tar.gz"
http GET "/models/$ML/download.rar"
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "Invalid extension"' \
    "an unknown extension is 400 Invalid extension"
http POST /pretrained_models/upload_archive -F archive=@"$T/m.tar.bz2" -F job_name=frombz2
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"status\"]")" = success ]' "a .tar.bz2 archive uploads as a pretrained model"

# ---- 4. the manual upload of a pretrained model
U=$T/unpacked
W=$(cd "$U" && ls snapshot_iter_*.cdw | head -1)
MANUAL=(-F weights_file=@"$U/$W" -F model_def_file=@"$U/original.prototxt" -F labels_file=@"$U/labels.txt"
        -F mean_file=@"$U/mean.bin" -F image_type=1 -F resize_mode=squash -F width=28 -F height=28)
http POST /pretrained_models/new -D "$T/h" "${MANUAL[@]}" -F job_name=manual
check '[ "$CODE" = 302 ] && [ "$(loc)" = / ]' "POST /pretrained_models/new answers 302 to the home page"
http POST /pretrained_models/new -H 'Accept: application/json' "${MANUAL[@]}" -F job_name=manual2
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"status\"]")" = success ]' "with Accept: application/json it answers JSON"
PM=$(jv 'd["id"]')
http GET /pretrained_models/json
check '[ "$(jv "sorted(m[\"name\"] for m in d[\"pretrained_models\"])")" = "[\"frombz2\", \"manual\", \"manual2\"]" ] && [ "$(jv "[m[\"num_classes\"] for m in d[\"pretrained_models\"] if m[\"id\"] == \"$PM\"]")" = "[3]" ]' \
    "the uploads are pretrained models with the labels' 3 classes"
http POST /models/images/classification/classify_one/json -F job_id="$PM" -F image_path="$(ls "$T/images/bars/"*.png | head -1)"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' "the uploaded model classifies"
http POST /pretrained_models/new -H 'Accept: application/json' "${MANUAL[@]}"
check '[ "$CODE" = 400 ] && [ "$(jv "list(d[\"errors\"])")" = "[\"job_name\"]" ]' "a missing job_name is a form error"
# Caffe's own .caffemodel: a NetParameter (name, then a layer with a blob of random floats)
python3 -c 'import random, struct, sys
f = lambda n, p: bytes([n << 3 | 2]) + bytes([len(p)]) + p
k = random.randint(2, 20)
blob = f(5, struct.pack("<%df" % k, *[random.uniform(-1, 1) for _ in range(k)]))
open(sys.argv[1], "wb").write(f(1, b"LeNet") + b"\xa2\x06" + bytes([len(f(1, b"ip") + f(7, blob))]) + f(1, b"ip") + f(7, blob))' \
    "$T/w.caffemodel"
http POST /pretrained_models/new -F job_name=caffe -F weights_file=@"$T/w.caffemodel" \
    -F model_def_file=@"$U/original.prototxt" -F labels_file=@"$U/labels.txt" -F width=28 -F height=28
check '[ "$CODE" = 400 ] && grep -q "holds Caffe weights for none of the layers of the network" "$T/body"' \
    "Caffe weights of another network are refused, saying that none of its layers are in them"

# ---- 6. --auth none: a username field acts as that user without a cookie
JAR=$T/nobody.txt
http POST /datasets/images/classification.json "${DSF[@]}" -F dataset_name=anon
check '[ "$CODE" = 401 ]' "without a login a form post is 401"
http POST /datasets/images/classification.json "${DSF[@]}" -F dataset_name=freds -F username=fred
check '[ "$CODE" = 200 ]' "curl -F username=fred creates without a cookie"
FD=$(jv 'd["id"]')
http GET "/jobs/$FD/table_data/json"
check '[ "$(jv "d[\"job\"][\"username\"]")" = fred ]' "the job is fred's"
http POST "/datasets/$FD/abort?username=fred"
http DELETE "/datasets/$FD" -F username=mallory
check '[ "$CODE" = 403 ]' "a username field is that user: another's job stays"
wait_status "$FD" Done 120 || wait_status "$FD" Aborted 5
http DELETE "/datasets/$FD" -F username=fred
check '[ "$CODE" = 200 ]' "fred deletes fred's job"

# ---- 6. with --auth password a username field is nobody
srv_stop
printf '%s\n' 'admin-password-for-forms-1' >"$T/admin.pw"
srv_start --auth password --admin-password-file "$T/admin.pw" --data-root "$T/images"
JAR=$T/pw-nobody.txt
http POST /datasets/images/classification.json "${DSF[@]}" -F dataset_name=pw -F username=admin
check '[ "$CODE" = 401 ]' "with --auth password a username field does not log in"
http GET "/login?username=admin"
check '[ "$(jv "d[\"username\"]")" != admin ]' "nor does a username in the query string"

# ---- 2. under --url-prefix the 302 keeps the prefix
srv_stop
srv_start --data-root "$T/images" --web "$SRC/web" --url-prefix /digits
B=$B/digits
JAR=$T/cookies-tester.txt
http POST /datasets/images/classification -D "$T/h" -F clone="$DS" -F dataset_name=prefixed
check '[ "$CODE" = 302 ] && loc | grep -q "^/digits/datasets/[0-9]\{8\}-[0-9]\{6\}-[0-9a-f]\{4\}$"' \
    "the 302 respects --url-prefix"
PD=$(loc | sed 's|.*/||')
http GET /models/images/classification/new -D "$T/h"
check '[ "$CODE" = 200 ] && grep -q "<base href=\"/digits/\">" "$T/body"' "the form page's base respects --url-prefix"
wait_status "$PD" Done 120
check '[ $? = 0 ]' "the dataset made under the prefix is done"
finish
