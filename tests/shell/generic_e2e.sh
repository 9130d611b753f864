#!/usr/bin/env bash
# The generic tasks end to end through the HTTP API only, with the real cdigits-worker
# (as server_e2e.sh does for classification): for each of segmentation, regression and
# pairs, a dataset of images made by tests/shell/make_generic.py through the generic
# create route (DIGITS's field names), a generic model on it trained to Done, what the
# model's JSON reports (DIGITS's "outputs": "<metric> (<phase>)" with last/min/max/count)
# and generic inference of it:
#   segmentation  models/fcn_small.prototxt; val mean_iou >= 0.8 and pixel accuracy;
#                 infer_one: outputs, a mask PNG of the image's size, class counts adding
#                 up to its pixels; infer_many with `image label` lines: a mean IoU
#   regression    the x, y of a bright dot (a small convolutional net with
#                 EuclideanLoss); val mae < 1.5 pixels; infer_one of a fresh dot image
#                 answers a 2-vector within 3 pixels of the dot
#   pairs         DIGITS's Siamese example without its data layers (ContrastiveLoss over
#                 two branches sharing their weights); Done, the val loss falls
# and a segmentation model with DIGITS's augmentation fields (aug_*) trains to Done with
# them in its train.json. Small data and few epochs: about 90 seconds under ASan on two
# cores.
# Skips (tests/shell/skip.bash) while the server or the worker is not built.
. "$(dirname "$0")/server_lib.bash" || exit 1
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
GEN=$SRC/tests/shell/make_generic.py
JSON=(-H 'Accept: application/json')

# py 'python code' ARGS...: runs code with sys and json imported; its exit status
py() {
    local code=$1
    shift
    python3 -c "import json, sys
$code" "$@"
}

# train MODEL SECONDS WHAT: waits for MODEL to be Done, then reads its JSON
train() {
    TRAIN_ID=$1 TRAIN_SECS=$2
    check 'wait_status "$TRAIN_ID" Done "$TRAIN_SECS"' "$3 trains to Done"
    http GET "/models/$1/json"
    cp "$T/body" "$T/model-$1.json"
}

# outputs MODEL: the model's DIGITS-style outputs, as "name (phase)" last (count) lines
outputs() {
    py 'd = json.load(open(sys.argv[1]))
print(", ".join("%s %.4g (%d)" % (k, v["last"], v["count"]) for k, v in sorted(d.get("outputs", {}).items())))' \
        "$T/model-$1.json"
}

python3 "$GEN" shapes "$T/shapes" --count 48 --size 32 --seed 3 &&
    python3 "$GEN" shapes "$T/shapes-aug" --count 16 --size 32 --seed 8 &&
    python3 "$GEN" dots "$T/dots" --count 300 --size 32 --seed 4 &&
    python3 "$GEN" dots "$T/dot-new" --count 1 --size 32 --seed 9 &&
    python3 "$GEN" digits "$T/digits" --count 40 --size 16 --seed 5 ||
    { echo "FAIL make_generic.py could not write the test images"; exit 1; }
srv_start --data-root "$T"
login_as fred
check '[ "$CODE" = 302 ]' "login"

# ---- the three datasets, made one after another by the worker ----------------------------

http POST /datasets/generic/create/image-segmentation/json "${JSON[@]}" -F dataset_name=shapes \
    -F feature_folder="$T/shapes/images" -F label_folder="$T/shapes/labels" -F folder_pct_val=25 \
    -F class_labels_file="$T/shapes/classes.txt" -F colormap_method=label -F channel_conversion=RGB \
    -F dsopts_feature_encoding=png
check '[ "$CODE" = 200 ]' "segmentation dataset created (DIGITS's image-segmentation fields)"
SEG=$(jv 'd["id"]')
http POST /datasets/generic/create/image-regression/json "${JSON[@]}" -F dataset_name=dots -F method=textfile \
    -F textfile_train="$T/dots/train.txt" -F textfile_root="$T/dots" -F pct_val=20 -F resize_channels=1 \
    -F resize_width=32 -F resize_height=32 -F encoding=none
check '[ "$CODE" = 200 ]' "regression dataset created from a list of \`path x y\` lines"
REG=$(jv 'd["id"]')
http POST /datasets/generic/create/image-siamese/json "${JSON[@]}" -F dataset_name=pairs -F folder_train="$T/digits" \
    -F pct_val=25 -F pairs_train=600 -F pairs_val=200 -F resize_channels=1 -F resize_width=16 -F resize_height=16 \
    -F encoding=none
check '[ "$CODE" = 200 ]' "pairs dataset created from a folder of class folders"
PAIRS=$(jv 'd["id"]')
http POST /datasets/generic/create/image-segmentation/json "${JSON[@]}" -F dataset_name=shapes-aug \
    -F feature_folder="$T/shapes-aug/images" -F label_folder="$T/shapes-aug/labels" -F folder_pct_val=25 \
    -F class_labels_file="$T/shapes-aug/classes.txt" -F channel_conversion=RGB
SEGAUG=$(jv 'd["id"]')
for ds in "$SEG" "$REG" "$PAIRS" "$SEGAUG"; do
    check 'wait_status "$ds" Done 120' "dataset $ds Done"
done
http GET "/datasets/$SEG/json"
check '[ "$(jv "[d[\"extension_id\"], d[\"feature_dims\"], [t[\"entry_count\"] for t in d[\"create_db_tasks\"]]]")" = "[\"image-segmentation\", [32, 32, 3], [36, 12]]" ]' \
    "the segmentation dataset: 32x32 RGB, 36 + 12 records"

# ---- the models: posted at once, trained one after another --------------------------------

http POST /models/images/generic/json "${JSON[@]}" -F dataset="$SEG" -F model_name=fcn -F method=custom \
    -F custom_network="<$SRC/models/fcn_small.prototxt" -F train_epochs=24 -F val_interval=8 -F snapshot_interval=24 \
    -F learning_rate=0.01 -F lr_policy=fixed -F random_seed=1
check '[ "$CODE" = 200 ]' "a generic model of models/fcn_small.prototxt on the segmentation dataset"
MSEG=$(jv 'd["id"]')

python3 "$GEN" net-dot "$T/dot.prototxt"
http POST /models/images/generic/json "${JSON[@]}" -F dataset="$REG" -F model_name=dot -F method=custom \
    -F custom_network="<$T/dot.prototxt" -F train_epochs=20 -F val_interval=5 -F snapshot_interval=20 -F batch_size=16 \
    -F solver_type=ADAM -F learning_rate=0.001 -F lr_policy=fixed -F use_mean=none -F random_seed=1
check '[ "$CODE" = 200 ]' "a generic model on the regression dataset"
MREG=$(jv 'd["id"]')

python3 "$GEN" net-siamese "$T/siamese.prototxt"
http POST /models/images/generic/json "${JSON[@]}" -F dataset="$PAIRS" -F model_name=siamese -F method=custom \
    -F custom_network="<$T/siamese.prototxt" -F train_epochs=6 -F val_interval=1 -F snapshot_interval=6 \
    -F learning_rate=0.01 -F lr_policy=fixed -F random_seed=1
check '[ "$CODE" = 200 ]' "a generic Siamese model on the pairs dataset"
MPAIRS=$(jv 'd["id"]')

http POST /models/images/generic/json "${JSON[@]}" -F dataset="$SEGAUG" -F model_name=fcn-aug -F method=custom \
    -F custom_network="<$SRC/models/fcn_small.prototxt" -F train_epochs=2 -F learning_rate=0.01 -F random_seed=2 \
    -F aug_flip=fliplr -F aug_quad_rot=rot180 -F aug_rot=20 -F aug_scale=0.1 -F aug_noise=0.02 -F aug_contrast=0.3 \
    -F aug_hsv_use=true -F aug_hsv_h=0.03
check '[ "$CODE" = 200 ]' "a segmentation model with DIGITS's augmentation fields"
MAUG=$(jv 'd["id"]')

# ---- segmentation ----------------------------------------------------------------------------

train "$MSEG" 240 "the FCN"
echo "     fcn: $(outputs "$MSEG")"
check '[ "$(jv "d[\"outputs\"][\"mean_iou (val)\"][\"last\"] >= 0.8 and d[\"outputs\"][\"mean_iou (val)\"][\"count\"] == 3")" = true ]' \
    "the model's outputs: val mean_iou reaches 0.8, once per validation"
check '[ "$(jv "d[\"outputs\"][\"accuracy (val)\"][\"last\"] >= 0.9 and \"iou_class_2 (val)\" in d[\"outputs\"] and \"loss (train)\" in d[\"outputs\"]")" = true ]' \
    "pixel accuracy (val) >= 0.9, an IoU per class (iou_class_2) and the train loss beside it"
http GET "/models/$MSEG/metrics/json"
check '[ "$(jv "sorted(m[\"epoch\"] for m in d[\"metrics\"] if m[\"phase\"] == \"val\" and m[\"name\"] == \"mean_iou\")")" = "[8.0, 16.0, 24.0]" ]' \
    "the metrics series has the val mean_iou at epochs 8, 16, 24"
IMG=$T/shapes/images/000.png
http POST /models/images/generic/infer_one/json -F job_id="$MSEG" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && py "import base64, struct
d = json.load(open(sys.argv[1]))
assert d[\"task\"] == \"segmentation\" and d[\"mask_size\"] == [32, 32], (d.get(\"task\"), d.get(\"mask_size\"))
png = base64.b64decode(d[\"mask\"].split(\",\", 1)[1])
assert png[:8] == b\"\\x89PNG\\r\\n\\x1a\\n\" and struct.unpack(\">II\", png[16:24]) == (32, 32)
c = d[\"class_counts\"]
assert [x[\"label\"] for x in c] == [\"background\", \"rectangle\", \"disc\"], c
assert sum(x[\"pixels\"] for x in c) == 32 * 32 and c[0][\"pixels\"] > 0, c
o = d[\"outputs\"][\"crop\"]
assert list(d[\"outputs\"]) == [\"crop\"] and (len(o), len(o[0]), len(o[0][0]), len(o[0][0][0])) == (1, 3, 32, 32)" "$T/body"' \
    "infer_one/json: the crop blob (1, 3, 32, 32), a 32x32 mask PNG, class counts of background, rectangle, disc over its 1024 pixels"
for i in 000 001 002 003 004 005; do echo "$T/shapes/images/$i.png $T/shapes/labels/$i.png"; done >"$T/seg.txt"
http POST /models/images/generic/infer_many/json -F job_id="$MSEG" -F image_list=@"$T/seg.txt"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1]))
assert len(d[\"masks\"]) == 6 and d[\"labelled\"] == 6 and len(d[\"ious\"]) == 6, (len(d.get(\"masks\", {})), d.get(\"labelled\"))
i = d[\"iou\"]
assert i[\"mean_iou\"] >= 70 and i[\"pixels\"] + i[\"ignored_pixels\"] == 6 * 1024, i" "$T/body"' \
    "infer_many/json with \`image label\` lines: 6 masks and a mean IoU of at least 70% ($(jv 'd.get("iou", {}).get("mean_iou")'))"

# ---- regression --------------------------------------------------------------------------------

train "$MREG" 240 "the dot regressor"
echo "     dot: $(outputs "$MREG")"
check '[ "$(jv "d[\"outputs\"][\"mae (val)\"][\"last\"] < 1.5")" = true ]' \
    "the model's outputs: val mae under 1.5 pixels"
read -r DOT_PATH DOT_X DOT_Y <"$T/dot-new/train.txt"
http POST /models/images/generic/infer_one/json -F job_id="$MREG" -F image_path="$T/dot-new/$DOT_PATH"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1]))
v = d[\"outputs\"][\"ip2\"]
v = v[0] if isinstance(v[0], list) else v
assert len(v) == 2 and abs(v[0] - float(sys.argv[2])) <= 3 and abs(v[1] - float(sys.argv[3])) <= 3, (v, sys.argv[2:])" \
    "$T/body" "$DOT_X" "$DOT_Y"' \
    "infer_one/json of a fresh dot image: ip2 within 3 pixels of ($DOT_X, $DOT_Y): $(jv 'd.get("outputs")')"

# ---- pairs -----------------------------------------------------------------------------------------

train "$MPAIRS" 240 "the Siamese network"
echo "     siamese: $(outputs "$MPAIRS")"
http GET "/models/$MPAIRS/metrics/json"
check '[ "$(jv "(lambda v: len(v) == 6 and v[-1] < v[0])([m[\"value\"] for m in sorted(d[\"metrics\"], key=lambda m: m[\"epoch\"]) if m[\"phase\"] == \"val\" and m[\"name\"] == \"loss\"])")" = true ]' \
    "the val contrastive loss falls over its 6 validations"

# ---- augmentations ---------------------------------------------------------------------------------

train "$MAUG" 240 "the model with augmentations"
MDIR=$(jv 'd["directory"]')
check 'py "t = json.load(open(sys.argv[1]))
want = {\"flip\": \"fliplr\", \"quad_rotation\": \"rot180\", \"rotation\": 20, \"rescale\": 0.1, \"noise\": 0.02,
        \"contrast\": 0.3, \"hsv_shift\": True, \"hsv_h\": 0.03}
got = {k: t.get(k) for k in want}
assert got == want, got" "$MDIR/train.json"' \
    "its train.json carries the augmentations (flip, quad_rotation, rotation, rescale, noise, contrast, hsv_shift, hsv_h)"
check '[ "$(jv "d[\"train\"][\"rotation\"]")" = 20 ]' "the model's JSON shows them in its train settings"

srv_stop
finish
