#!/usr/bin/env bash
# Object detection datasets (DIGITS's image-object-detection extension) through the HTTP
# API: the form page, the 400s (a bad field, the dataset library's rules named by their
# field), the dataset.json the form writes with DIGITS's field names and defaults, the
# dataset JSON once Done (feature_dims, label_shape 1 x B x 16), stats.json's boxes, the
# label records (each box a row in DIGITS's order, checked against the KITTI files), the
# bad label lines counted, the plain form post's 302 and the clone.
. "$(dirname "$0")/server_lib.bash" || exit 1
need_server

SEED=$RANDOM
GEN=$SRC/tests/shell/make_generic.py
python3 "$GEN" boxes "$T/train" --count 14 --size 40 --seed "$SEED" &&
    python3 "$GEN" boxes "$T/val" --count 5 --size 40 --seed $((SEED + 1)) ||
    { echo "FAIL cannot write the test images"; exit 1; }
# one bad label line (14 values) and one image without a label file
echo "rectangle 0 0 0 1 1 5 5 1 1 1 0 0 5" >>"$T/train/labels/000.txt"
rm "$T/train/labels/013.txt"

srv_start --data-root "$T"
login_as tester
JSON=(-H 'Accept: application/json')
err_of() { jv "' '.join(d.get('errors', {}).get('$1', []))"; }
dsjson() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"; }
job_dir() { http GET "/datasets/$1/json"; jv 'd["directory"]'; }

DET=(-F dataset_name=det -F train_image_folder="$T/train/images" -F train_label_folder="$T/train/labels"
     -F val_image_folder="$T/val/images" -F val_label_folder="$T/val/labels" -F padding_image_width=48
     -F padding_image_height=44 -F resize_image_width=24 -F resize_image_height=22 -F val_min_box_size=0
     -F custom_classes=dontcare,rectangle,disc -F dsopts_num_threads=2)

# ---- the form page -----------------------------------------------------------------------
http GET /datasets/generic/new/image-object-detection
check '[ "$CODE" = 200 ] && grep -q "Object Detection" "$T/body" && grep -q "padding_image_width" "$T/body" && grep -q "custom_classes" "$T/body"' \
    "GET /datasets/generic/new/image-object-detection is the form page with its title and fields"

# ---- 400s --------------------------------------------------------------------------------
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" -F dataset_name=x \
    -F train_image_folder="$T/train/images"
check '[ "$CODE" = 400 ] && err_of train_label_folder | grep -q "Training label folder is required"' \
    "a missing train_label_folder is 400 naming it"
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" "${DET[@]:0:6}" -F padding_image_width=0 \
    -F padding_image_height=44
check '[ "$CODE" = 400 ] && [ -n "$(err_of padding_image_width)" ]' "padding_image_width=0 is 400 naming it"
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" "${DET[@]}" -F channel_conversion=CMYK
check '[ "$CODE" = 400 ] && err_of channel_conversion | grep -q "RGB,L,none"' \
    "a bad channel_conversion is 400 naming the field and its choices"
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" "${DET[@]:0:20}" \
    -F custom_classes=rectangle,disc
check '[ "$CODE" = 400 ] && err_of custom_classes | grep -q "write dontcare first"' \
    "custom_classes without dontcare first is 400 naming custom_classes (the dataset library's rule)"
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" -F dataset_name=x \
    -F train_image_folder="$T/train/images" -F train_label_folder="$T/train/labels" -F resize_image_width=20
check '[ "$CODE" = 400 ] && err_of resize_image_width | grep -q "resize_image_height is not"' \
    "resize_image_width without resize_image_height is 400 naming the field"
http POST /datasets/generic/create/image-object-detection.json "${JSON[@]}" -F dataset_name=x \
    -F train_image_folder="$T/train/images" -F train_label_folder="$T/train/labels" -F val_image_folder="$T/val/images"
check '[ "$CODE" = 400 ] && err_of val_image_folder | grep -q "val_label_folder is not"' \
    "val_image_folder without val_label_folder is 400 naming the field"

# ---- a dataset -----------------------------------------------------------------------------
http POST /datasets/generic/create/image-object-detection/json "${JSON[@]}" "${DET[@]}"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"name\"]")" = det ]' "image-object-detection creates a job"
DET_ID=$(jv 'd["id"]')
D=$(job_dir "$DET_ID")
check '[ "$(dsjson "$D/dataset.json" "(d[\"task\"], d[\"train_image_folder\"], d[\"padding_image_width\"], d[\"resize_image_height\"], d[\"channel_conversion\"], d[\"custom_classes\"], d[\"encoding\"], d[\"val_min_box_size\"])")" = "('"'"'detection'"'"', '"'"'$T/train/images'"'"', 48, 22, '"'"'RGB'"'"', '"'"'dontcare,rectangle,disc'"'"', '"'"'png'"'"', 0)" ]' \
    "dataset.json holds the detection keys, DIGITS's defaults where not given (RGB, png)"
wait_status "$DET_ID" Done 120
check '[ $? = 0 ]' "the detection dataset reaches Done"
http GET "/datasets/$DET_ID/json"
check '[ "$(jv "[d[\"extension_id\"], d[\"task\"], d[\"feature_dims\"], [t[\"entry_count\"] for t in d[\"create_db_tasks\"]]]")" = "[\"image-object-detection\", \"detection\", [22, 24, 3], [13, 5]]" ]' \
    "the Done dataset: its extension and task, feature_dims [22, 24, 3], 13 + 5 entries"
check '[ "$(jv "d[\"labels\"]")" = "[\"dontcare\", \"rectangle\", \"disc\"]" ]' "its labels: dontcare first, then custom_classes"
B_ROWS=$(dsjson "$D/stats.json" 'd["max_boxes"]')
check '[ "$(jv "d[\"label_shape\"]")" = "[1, $B_ROWS, 16]" ] && [ "$B_ROWS" -ge 1 ]' \
    "label_shape is [1, max_boxes, 16]"
check '[ "$(dsjson "$D/stats.json" "(d[\"task\"], d[\"bad_labels\"][\"columns\"], d[\"padding\"], d[\"resize\"], sum(c[\"boxes\"] for c in d[\"box_stats\"][\"train\"]) > 0)")" = "('"'"'detection'"'"', 1, [48, 44], [24, 22], True)" ]' \
    "stats.json: the bad line counted, padding and resize, the boxes per class"
http GET "/jobs/$DET_ID/log/json?n=500"
check 'grep -q "000.txt:[0-9]*: 14 values" "$T/body" && grep -q "013.png: no label file" "$T/body"' \
    "the job's log names the bad label line and the image without a label file"

# every label record against the KITTI files: find the image by its label rows
python3 - "$T" "$B" "$JAR" "$DET_ID" "$B_ROWS" <<'EOF' >"$T/rows.txt"
import json, subprocess, sys
root, base, jar, ds, nb = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
classes = {"dontcare": 0, "rectangle": 1, "disc": 2}
def boxes(split):
    import glob, os
    out = {}
    for f in sorted(glob.glob(f"{root}/{split}/labels/*.txt")):
        rows = []
        for line in open(f):
            w = line.split()
            if len(w) != 15:
                continue
            l, t, r, b = (float(x) for x in w[4:8])
            # padded to 48x44, resized to 24x22: half in both directions
            rows.append((classes[w[0].lower()], round(l / 2, 3), round(t / 2, 3), round((r - l) / 2, 3), round((b - t) / 2, 3)))
        out[os.path.basename(f)[:-4]] = sorted(rows)
    return out
ok = bad = 0
for split, n in (("train", 13), ("val", 5)):
    want = boxes(split)
    found = []
    for i in range(n):
        d = json.loads(subprocess.check_output(["curl", "-s", "-b", jar, f"{base}/datasets/{ds}/labels/{split}/{i}"]))
        v = d["values"]
        assert d["shape"] == [1, nb, 16], d["shape"]
        rows = [v[k * 16:(k + 1) * 16] for k in range(nb)]
        got = sorted((int(r[5]), round(r[0], 3), round(r[1], 3), round(r[2], 3), round(r[3], 3)) for r in rows if r[5] >= 0)
        pad = [r for r in rows if r[5] < 0]
        if any(any(x != 0 for j, x in enumerate(r) if j != 5) for r in pad):
            bad += 1
        found.append(got)
    # each record's rows are one label file's boxes, every file once
    if sorted(found) == sorted(w for k, w in want.items() if split == "val" or k != "013"):
        ok += 1
    else:
        bad += 1
print(ok, bad)
EOF
check '[ "$(cat "$T/rows.txt")" = "2 0" ]' \
    "every label record holds its label file's boxes, scaled by the resize, rows past them class -1 and zero"
http GET "/datasets/$DET_ID/labels/val/5"
check '[ "$CODE" = 404 ]' "a label record past the end is 404"

# the plain form post: 302 to the dataset's page
check '[ "$(curl -s -o /dev/null -w "%{http_code}" -b "$JAR" "${DET[@]}" "$B/datasets/generic/create/image-object-detection")" = 302 ]' \
    "the form post without Accept: JSON answers 302"

# ---- clone ------------------------------------------------------------------------------------
http GET "/clone/$DET_ID/json"
check '[ "$(jv "d[\"url\"]")" = /datasets/generic/create/image-object-detection/json ] && jv "d[\"fields\"][\"custom_classes\"]" | grep -q dontcare,rectangle,disc' \
    "GET /clone/<id>/json of a detection dataset names its route and fields"
finish
