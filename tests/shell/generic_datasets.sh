#!/usr/bin/env bash
# Generic datasets (DIGITS's data extensions) and the models on them, through the HTTP
# API: each extension's form (image-segmentation with DIGITS's field names,
# image-regression and image-siamese with cdigits's), the dataset.json each writes in
# its job folder, the 400s (a bad field, a DIGITS field cdigits does not implement, a
# missing one), the 404 of an unknown extension, DIGITS's generic dataset JSON, the
# label records, the plain form post's 302, and the rule between a model's route and
# its dataset's kind.
. "$(dirname "$0")/server_lib.bash" || exit 1
need_server

# ---- data: fresh random images every run ----------------------------------------------
SEED=$RANDOM
python3 - "$T" "$SEED" <<'EOF' || { echo "FAIL cannot write the test images"; exit 1; }
import os, random, struct, sys, zlib
root, seed = sys.argv[1], int(sys.argv[2])
rnd = random.Random(seed)

def png(path, w, h, px):
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    raw = b"".join(b"\0" + bytes(px[y * w:(y + 1) * w]) for y in range(h))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))

# segmentation: 12 gray 8x8 images, each with a label image of classes 0..2 (the class of a
# pixel is its column third)
for d in ("seg/images", "seg/labels", "reg/images"):
    os.makedirs(os.path.join(root, d), exist_ok=True)
for i in range(12):
    png(f"{root}/seg/images/{i:02d}.png", 8, 8, [rnd.randint(0, 255) for _ in range(64)])
    png(f"{root}/seg/labels/{i:02d}.png", 8, 8, [min(2, (p % 8) * 3 // 8) for p in range(64)])
# regression: 12 images with two targets each, in a CSV
with open(f"{root}/reg/targets.csv", "w") as f:
    f.write("file,a,b\n")
    for i in range(12):
        png(f"{root}/reg/images/{i:02d}.png", 8, 8, [rnd.randint(0, 255) for _ in range(64)])
        f.write(f"{i:02d}.png,{rnd.uniform(-1, 1):.4f},{rnd.uniform(0, 5):.4f}\n")
EOF
make_pngs "$T/cls" --classes 2 --per-class 8 --size 8 --seed "$SEED"

srv_start --data-root "$T"
login_as tester
JSON=(-H 'Accept: application/json')
err_of() { jv "' '.join(d.get('errors', {}).get('$1', []))"; }
dsjson() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
job_dir() { http GET "/datasets/$1/json"; jv 'd["directory"]'; }

SEG=(-F dataset_name=seg -F feature_folder="$T/seg/images" -F label_folder="$T/seg/labels" -F folder_pct_val=25
     -F channel_conversion=L -F dsopts_feature_encoding=png -F dsopts_num_threads=2)

# ---- the form pages ------------------------------------------------------------------------
http GET /datasets/generic/new/image-segmentation
check '[ "$CODE" = 200 ] && grep -q "Segmentation" "$T/body" && grep -q "feature_folder" "$T/body"' \
    "GET /datasets/generic/new/image-segmentation is the form page with its title and fields"
http GET /datasets/generic/new/image-nothing
check '[ "$CODE" = 404 ] && grep -q "image-segmentation, image-regression, image-siamese" "$T/body"' \
    "the form page of an unknown extension is 404 naming the known ones"
http GET /models/images/generic/new
check '[ "$CODE" = 200 ] && grep -q "New Image Model" "$T/body"' "GET /models/images/generic/new is the model form"

# ---- 400s and 404s ---------------------------------------------------------------------------
http POST /datasets/generic/create/image-nothing.json "${JSON[@]}" "${SEG[@]}"
check '[ "$CODE" = 404 ] && grep -q "image-segmentation, image-regression, image-siamese" "$T/body"' \
    "an unknown extension is 404 naming the known ones"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" -F dataset_name=x -F label_folder="$T/seg/labels"
check '[ "$CODE" = 400 ] && err_of feature_folder | grep -q "Feature image folder is required"' \
    "a missing feature_folder is 400 naming it"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]}" -F colormap_method=rainbow
check '[ "$CODE" = 400 ] && err_of colormap_method | grep -q "label,textfile"' \
    "a bad colormap_method is 400 naming the field and its choices"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]:0:12}" -F dsopts_num_threads=0
check '[ "$CODE" = 400 ] && [ -n "$(err_of dsopts_num_threads)" ]' \
    "dsopts_num_threads=0 is 400 (DIGITS's test_invalid_number_of_reader_threads)"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]}" -F colormap_method=textfile
check '[ "$CODE" = 400 ] && err_of colormap_text_file | grep -q "required"' \
    "colormap_method=textfile without colormap_text_file is 400 naming colormap_text_file"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]}" -F dsopts_label_encoding=jpg
check '[ "$CODE" = 400 ] && err_of dsopts_label_encoding | grep -q "cdigits does not implement"' \
    "dsopts_label_encoding=jpg (a DIGITS value cdigits does not implement) is 400 naming the field"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]}" -F dsopts_backend=hdf5
check '[ "$CODE" = 400 ] && err_of dsopts_backend | grep -q "cdigits does not implement .*(lmdb)"' \
    "dsopts_backend=hdf5 is 400 naming the field and its default"
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" -F dataset_name=x -F feature_folder=/etc \
    -F label_folder="$T/seg/labels"
check '[ "$CODE" = 400 ] && [ -n "$(err_of feature_folder)" ]' "a feature_folder outside the data roots is 400"
http POST /datasets/generic/create/image-regression.json "${JSON[@]}" -F dataset_name=r -F folder_train="$T/reg/images"
check '[ "$CODE" = 400 ] && err_of targets_csv | grep -q "required"' "regression's folder_train without targets_csv is 400"
http POST /datasets/generic/create/image-regression.json "${JSON[@]}" -F dataset_name=r -F folder_train="$T/reg/images" \
    -F targets_csv="$T/reg/targets.csv" -F pct_val=60 -F pct_test=40
check '[ "$CODE" = 400 ] && err_of pct_val | grep -q "pct_val + pct_test"' \
    "the dataset library's rule (pct_val + pct_test < 100) is 400 naming the field"
JAR=$T/nobody.txt http POST /datasets/generic/create/image-segmentation.json "${SEG[@]}"
check '[ "$CODE" = 401 ]' "creating without logging in is 401"

# ---- segmentation ------------------------------------------------------------------------------
http POST /datasets/generic/create/image-segmentation.json "${JSON[@]}" "${SEG[@]}" -F group_name=g
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = seg ]' "image-segmentation creates a job: {id, name, status}"
SEG_ID=$(jv 'd["id"]')
D=$(job_dir "$SEG_ID")
check '[ "$(dsjson "$D/dataset.json" "(d[\"task\"], d[\"feature_folder\"], d[\"label_folder\"], d[\"pct_val\"], d[\"channel_conversion\"], d[\"colormap_method\"], d[\"encoding\"], d[\"threads\"], d[\"force_same_shape\"])")" = "('"'"'segmentation'"'"', '"'"'$T/seg/images'"'"', '"'"'$T/seg/labels'"'"', 25, '"'"'L'"'"', '"'"'label'"'"', '"'"'png'"'"', 2, 1)" ]' \
    "dataset.json holds the segmentation keys: task, folders, pct_val, channel_conversion, colormap_method, encoding, threads, force_same_shape"
check '[ "$(dsjson "$D/dataset.json" "\"validation_feature_folder\" in d or \"dsopts_batch_size\" in d")" = False ]' \
    "dataset.json has no key for a field left out (validation folders) or one without a key (dsopts_batch_size)"
http GET "/datasets/$SEG_ID/json"
check '[ "$(jv "[d[\"extension_id\"], d[\"task\"], d[\"job_type\"]]")" = "[\"image-segmentation\", \"segmentation\", \"Generic Dataset\"]" ]' \
    "the dataset JSON names its extension, task and DIGITS's job type Generic Dataset"
check '[ "$(jv "[(t[\"stage\"], t[\"feature_db_path\"], t[\"label_db_path\"]) for t in d[\"create_db_tasks\"]]")" = "[[\"train_db\", \"train.db\", \"train_labels.db\"], [\"val_db\", \"val.db\", \"val_labels.db\"]]" ]' \
    "create_db_tasks list the train and val dbs with their feature and label db paths"
wait_status "$SEG_ID" Done 120
check '[ $? = 0 ]' "the segmentation dataset reaches Done"
http GET "/datasets/$SEG_ID/json"
check '[ "$(jv "[d[\"feature_dims\"], [t[\"entry_count\"] for t in d[\"create_db_tasks\"]], d[\"label_shape\"]]")" = "[[8, 8, 1], [9, 3], [1, 8, 8]]" ]' \
    "a Done segmentation dataset has feature_dims [8, 8, 1], 9 + 3 entries and label_shape [1, 8, 8]"
CODE=$(curl -s -o "$T/body" -w '%{http_code}' "$B/datasets/$SEG_ID/labels/train/0") # a PNG: not for $BODY
check '[ "$CODE" = 200 ] && head -c 8 "$T/body" | od -An -c | grep -q "P   N   G"' \
    "a label record is served as a PNG (coloured by the palette)"
python3 - "$T/body" <<'EOF' >"$T/colours"
import struct, sys, zlib
b = open(sys.argv[1], "rb").read()
w, h, depth, kind = struct.unpack(">IIBB", b[16:26])
data, i = b"", 8
while i < len(b):
    n = struct.unpack(">I", b[i:i + 4])[0]
    if b[i + 4:i + 8] == b"IDAT":
        data += b[i + 8:i + 8 + n]
    i += 12 + n
raw = zlib.decompress(data)
assert kind == 2 and depth == 8, "expected an 8-bit RGB PNG"
bpp, stride = 3, w * 3
prev, rows = bytearray(stride), []
for y in range(h):  # PNG's five row filters
    f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        p = a + b - c
        pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
        pred = [0, a, b, (a + b) // 2, a if pa <= pb and pa <= pc else b if pb <= pc else c][f]
        line[x] = (line[x] + pred) & 255
    rows.append(bytes(line))
    prev = line
print(len({rows[0][x * 3:x * 3 + 3] for x in range(w)}), len({rows[y][0:3] for y in range(h)}))
EOF
check '[ "$(cat "$T/colours")" = "3 1" ]' "the coloured label has a colour per class: 3 across a row, 1 down a column"
http GET "/datasets/$SEG_ID/labels/train/999"
check '[ "$CODE" = 404 ]' "a label record past the end is 404"

# the plain form post: 302 to the dataset's page
http POST /datasets/generic/create/image-segmentation "${SEG[@]}"
check '[ "$CODE" = 302 ] && grep -qi "^location: .*/datasets/" <(curl -s -D - -o /dev/null -b "$JAR" -F dataset_name=seg2 \
    -F feature_folder="$T/seg/images" -F label_folder="$T/seg/labels" "$B/datasets/generic/create/image-segmentation")' \
    "the form post without Accept: JSON answers 302 to the dataset's page"

# ---- regression --------------------------------------------------------------------------------
http POST /datasets/generic/create/image-regression/json "${JSON[@]}" -F dataset_name=reg -F folder_train="$T/reg/images" \
    -F targets_csv="$T/reg/targets.csv" -F pct_val=25 -F resize_channels=1 -F resize_width=8 -F resize_height=8
check '[ "$CODE" = 200 ]' "image-regression creates a job (folder_train with targets_csv; method follows the fields)"
REG_ID=$(jv 'd["id"]')
D=$(job_dir "$REG_ID")
check '[ "$(dsjson "$D/dataset.json" "(d[\"task\"], d[\"folder_train\"], d[\"targets_csv\"], d[\"channels\"], d[\"width\"], d[\"height\"], d[\"pct_val\"])")" = "('"'"'regression'"'"', '"'"'$T/reg/images'"'"', '"'"'$T/reg/targets.csv'"'"', 1, 8, 8, 25)" ]' \
    "dataset.json holds the regression keys (channels as a number)"
wait_status "$REG_ID" Done 120
check '[ $? = 0 ]' "the regression dataset reaches Done"
http GET "/datasets/$REG_ID/labels/train/0"
check '[ "$CODE" = 200 ] && [ "$(jv "[d[\"shape\"], len(d[\"values\"])]")" = "[[2, 1, 1], 2]" ]' \
    "a regression label record is its 2 targets as JSON"

# ---- pairs -------------------------------------------------------------------------------------
http POST /datasets/generic/create/image-siamese.json "${JSON[@]}" -F dataset_name=pairs -F folder_train="$T/cls" \
    -F pairs_train=20 -F pairs_val=6 -F resize_channels=1 -F resize_width=8 -F resize_height=8
check '[ "$CODE" = 200 ]' "image-siamese creates a job"
PAIRS_ID=$(jv 'd["id"]')
D=$(job_dir "$PAIRS_ID")
check '[ "$(dsjson "$D/dataset.json" "(d[\"task\"], d[\"folder_train\"], d[\"pairs_train\"], d[\"pairs_val\"])")" = "('"'"'pairs'"'"', '"'"'$T/cls'"'"', 20, 6)" ]' \
    "dataset.json holds the pairs keys"
wait_status "$PAIRS_ID" Done 120
check '[ $? = 0 ]' "the pairs dataset reaches Done"

# ---- clone ----------------------------------------------------------------------------------------
http GET "/clone/$SEG_ID/json"
check '[ "$(jv "d[\"url\"]")" = /datasets/generic/create/image-segmentation/json ]' \
    "GET /clone/<id>/json of a generic dataset names its extension's route"
http POST "/clone/$SEG_ID/json" "${JSON[@]}" -F dataset_name=seg-clone
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = seg-clone ]' "POST /clone/<id> makes a generic dataset like it"
CL_ID=$(jv 'd["id"]')
http GET "/datasets/$CL_ID/json"
check '[ "$(jv "d[\"extension_id\"]")" = image-segmentation ]' "the clone is a segmentation dataset too"

# ---- models ----------------------------------------------------------------------------------------
http POST /datasets/images/classification.json "${JSON[@]}" -F dataset_name=cls -F folder_train="$T/cls" \
    -F resize_channels=1 -F resize_width=8 -F resize_height=8 -F folder_pct_val=25
CLS_ID=$(jv 'd["id"]')
NET='layer { name: "data" type: "Input" top: "data" }'
MODEL=(-F model_name=m -F method=custom -F "custom_network=$NET" -F train_epochs=1)
http POST /models/images/generic.json "${JSON[@]}" "${MODEL[@]}" -F dataset="$CLS_ID"
check '[ "$CODE" = 400 ] && err_of dataset | grep -q "image classification dataset; a generic model needs a generic dataset"' \
    "a generic model on a classification dataset is 400 naming dataset"
http POST /models/images/classification.json "${JSON[@]}" "${MODEL[@]}" -F dataset="$REG_ID"
check '[ "$CODE" = 400 ] && err_of dataset | grep -q "is a generic dataset (image-regression)"' \
    "a classification model on a generic dataset is 400 naming dataset"
http POST /models/images/generic/json "${JSON[@]}" "${MODEL[@]}" -F dataset="$REG_ID"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"dataset_id\"]")" = "$REG_ID" ]' "a generic model on a generic dataset is made"
M_ID=$(jv 'd["id"]')
http GET "/models/$M_ID/json"
check '[ "$(jv "d[\"job_type\"]")" = "Generic Image Model" ]' "its JSON says Generic Image Model"
http POST "/models/$M_ID/abort"
finish
