#!/usr/bin/env bash
# DIGITS's documented curl workflow against a real server and the real cdigits-worker:
# log in, create a dataset from a folder of generated PNGs, poll its status, read its
# JSON, create a LeNet model on it, poll until Done, read the model's JSON and metrics,
# delete both. Then a tiny custom network with a sweep, a previous-network fine-tune
# and an abort. Skips (tests/shell/skip.bash) while the worker is not built.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
make_pngs "$T/images" --classes 3 --per-class 16 --size 28 --seed 5
srv_start --data-root "$T/images" --abort-grace 5

. "$(dirname "$0")/server_tiny_net.bash"

login_as fred
check '[ "$CODE" = 302 ]' "login"
http POST /datasets/images/classification/json -F folder_train="$T/images" -F encoding=png -F resize_channels=1 \
    -F resize_width=28 -F resize_height=28 -F resize_mode=squash -F folder_pct_val=25 -F dataset_name=shapes
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"status\"]")" != Error ]' "dataset created"
DS=$(jv 'd["id"]')
check 'wait_status "$DS" Done 120' "dataset Done"
http GET "/datasets/$DS/json"
check '[ "$(jv "d[\"ParseFolderTasks\"][0][\"label_count\"]")" = 3 ] && [ "$(jv "d[\"ParseFolderTasks\"][0][\"train_count\"]")" = 36 ]' \
    "ParseFolderTasks counts 3 labels and 36 training images"
check '[ "$(jv "[t[\"entries\"] for t in d[\"CreateDbTasks\"]]")" = "[36, 12]" ]' "CreateDbTasks has train and val entries"
check '[ -s "$(jv "d[\"directory\"]")/train.db" ] && [ -s "$(jv "d[\"directory\"]")/stats.json" ]' "the dataset files exist"

if [ -f "$SRC/models/lenet.prototxt" ]; then
    http POST /models/images/classification/json -F method=standard -F standard_networks=lenet -F framework=caffe \
        -F train_epochs=2 -F batch_size=12 -F model_name=lenet -F dataset="$DS"
    check '[ "$CODE" = 200 ]' "LeNet model created"
    ML=$(jv 'd["id"]')
    check 'wait_status "$ML" Done 120' "LeNet trains to Done"
    http GET "/models/$ML/json"
    check '[ "$(jv "len(d[\"snapshots\"])")" = 2 ] && [ "$(jv "d[\"status\"]")" = Done ]' "LeNet has a snapshot per epoch"
    check 'cmp -s "$SRC/models/lenet.prototxt" "$(jv "d[\"directory\"]")/network.prototxt"' "lenet.prototxt was copied as network.prototxt"
    http GET "/models/$ML/metrics/json"
    check '[ "$(jv "len([m for m in d[\"metrics\"] if m[\"phase\"]==\"val\" and m[\"name\"]==\"accuracy\"])")" = 2 ]' \
        "val accuracy is stored once per epoch"
    http DELETE "/models/$ML"
    check '[ "$CODE" = 200 ]' "LeNet model deleted"
else
    echo "note: models/lenet.prototxt missing; the LeNet step is skipped"
fi

tiny_net > "$T/tiny.prototxt"
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/tiny.prototxt" \
    -F train_epochs=3 -F model_name=tiny -F dataset="$DS" -F learning_rate=0.05,0.02 -F lr_policy=fixed -F random_seed=3
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"jobs\"])")" = 2 ]' "a tiny network sweep makes two jobs"
T1=$(jv 'd["jobs"][0]["id"]')
T2=$(jv 'd["jobs"][1]["id"]')
check 'wait_status "$T1" Done 120 && wait_status "$T2" Done 120' "both sweep jobs finish"
http GET "/models/$T1/json"
check '[ "$(jv "len(d[\"snapshots\"])")" = 3 ]' "three snapshots"
check '[ "$(jv "d[\"outputs\"][\"accuracy (val)\"][\"last\"] > 0.5")" = true ]' "the tiny net learns the shapes (val accuracy $(jv 'd["outputs"]["accuracy (val)"]["last"]'))"
check '[ "$(jv "d[\"tasks\"][0][\"device\"][\"backend\"]")" = cpu ]' "the device line is stored"
FIRST_EPOCH=$(jv 'd["snapshots"][0]')
http GET /completed_jobs/json
check '[ "$(jv "[m for m in d[\"models\"] if m[\"id\"]==\"$T1\"][0][\"loss (train) last\"] >= 0")" = true ]' "completed_jobs shows the loss ($(jv "[m for m in d[\"models\"] if m[\"id\"]==\"$T1\"][0].get(\"loss (train) last\")"))"

# inference: one image by path and by upload, a list, a snapshot by epoch
IMG1=$(ls "$T/images/bars/"*.png | head -1)
http POST /models/images/classification/classify_one/json -F job_id="$T1" -F image_path="$IMG1"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"predictions\"][0][0]")" = bars ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' \
    "classify_one by path: bars first ($(jv 'd.get("predictions")'))"
http POST /models/images/classification/classify_one/json -F job_id="$T1" -F image_file="@$(ls "$T/images/columns/"*.png | head -1)" \
    -F snapshot_epoch="$FIRST_EPOCH"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"predictions\"][0][0]")" = columns ]' "classify_one by upload, at the first snapshot"
http POST /models/images/classification/classify_one/json -F job_id="$T1" -F image_path=/etc/passwd
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"image_path\"][0]" | grep -q outside' "classify_one refuses a path outside the roots"
http POST /models/images/classification/classify_one/json -F job_id="$T1" -F image_path="$IMG1" -F snapshot_epoch=999
check '[ "$CODE" = 404 ]' "classify_one answers 404 for a missing snapshot epoch"
(cd "$T/images" && ls diagonals/*.png | head -4 | sed 's/$/ 2/'; echo "/etc/passwd 0") >"$T/list.txt"
http POST /models/images/classification/classify_many/json -F job_id="$T1" -F image_list="@$T/list.txt" \
    -F image_folder="$T/images"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"classifications\"])")" = 4 ] && [ "$(jv "len(d[\"skipped\"])")" = 1 ]' \
    "classify_many classifies the listed images and skips the one outside the roots"
check '[ "$(jv "sum(v[0][0] == \"diagonals\" for v in d[\"classifications\"].values())")" -ge 3 ]' "most are diagonals"

# fine-tune from the first job's first snapshot (DIGITS's previous network)
http POST /models/images/classification/json -F method=previous -F previous_networks="$T1" \
    -F "$T1-snapshot=$FIRST_EPOCH" -F train_epochs=1 -F model_name=finetune -F dataset="$DS"
check '[ "$CODE" = 200 ]' "previous-network model created"
MF=$(jv 'd["id"]')
check 'wait_status "$MF" Done 120' "fine-tune finishes"
http GET "/jobs/$MF/log/json"
check 'jv "d[\"log\"]" | grep -q "parameter tensors from"' "the worker loaded the pretrained weights"

# abort a long run: the worker saves a snapshot and exits 3
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/tiny.prototxt" \
    -F train_epochs=400 -F model_name=long -F dataset="$DS"
MA=$(jv 'd["id"]')
check 'wait_status "$MA" Running 120' "long run starts"
check 'training "$MA"' "it trains (a metric came)"
http POST "/models/$MA/abort"
check '[ "$CODE" = 200 ]' "abort"
check 'wait_status "$MA" Aborted 120' "aborted"
http GET "/models/$MA/json"
check '[ "$(jv "len(d[\"snapshots\"]) >= 1")" = true ]' "the aborted run left a snapshot to resume from"

http DELETE "/datasets/$DS"
check '[ "$CODE" = 403 ]' "the dataset is in use"
http DELETE /jobs -F "job_ids[]=$T1" -F "job_ids[]=$T2" -F "job_ids[]=$MF" -F "job_ids[]=$MA"
check '[ "$CODE" = 200 ]' "models deleted"
http DELETE "/datasets/$DS"
check '[ "$CODE" = 200 ]' "dataset deleted"
http GET /index/json
check '[ "$(jv "len(d[\"datasets\"]) + len(d[\"models\"])")" = 0 ]' "nothing left"
srv_stop
finish
