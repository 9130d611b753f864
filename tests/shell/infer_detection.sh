#!/usr/bin/env bash
# Detection inference (docs/inference.md) with the real worker and server:
#   a detection dataset of generated boxes (make_generic.py boxes, 48x48) through DIGITS's
#   image-object-detection form, padded to 64x64 and resized to 128x128, and a model of
#   it whose answer is known: every weight is a constant filler with lr_mult 0, so the
#   coverage is each 16x16 cell's mean brightness and every bright cell proposes the same
#   box from its corner; the cells of a white square group into one box over it
#   (tests/shell/detect_known.prototxt).
#   1. infer_one/json of a 48x48 image with a white square at 8..40: DIGITS's outputs
#      (bbox-list, (1, 50, 5)), its bounding-box view's "bboxes" in the input's pixels,
#      and "boxes" in the image's own pixels (the input's halved: padding 64 of 128);
#      classify_one answers the same boxes; the pages draw and list them;
#   2. infer_many with KITTI labels: one true, one false and one missed box give
#      precision 50, recall 50 and mAP 25 (DetectNet's measures), per class too;
#   3. infer_db of the val db with its label db: every true box of the dataset is
#      counted once, as found or missed.
. "$(dirname "${BASH_SOURCE[0]}")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"
py() {
    python3 -c "import json, sys, os
$1" "${@:2}"
}

python3 "$SRC/tests/shell/make_generic.py" boxes "$T/boxes" --count 24 --size 48 --seed 5 ||
    { echo "FAIL cannot write the boxes"; exit 1; }
# the test's own images: a white square on black, a black image, and their KITTI labels
py 'import struct, zlib
def png(path, w, h, px):
    raw = b"".join(b"\0" + bytes(v for x in range(w) for v in px(x, y)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
d = sys.argv[1]
os.makedirs(d)
png(d + "/square.png", 48, 48, lambda x, y: (255, 255, 255) if 8 <= x < 40 and 8 <= y < 40 else (0, 0, 0))
png(d + "/black.png", 48, 48, lambda x, y: (0, 0, 0))
open(d + "/square.txt", "w").write("rectangle 0 0 0 8 8 40 40 1 1 1 0 0 0 0\n")
open(d + "/black.txt", "w").write("disc 0 0 0 10 10 30 30 1 1 1 0 0 0 0\nDontCare -1 -1 -10 0 0 5 5 -1 -1 -1 -1000 -1000 -1000 -10\n")
open(d + "/none.txt", "w").write("")' "$T/mine"

KNOWN=$SRC/tests/shell/detect_known.prototxt

srv_start --data-root "$T/boxes" --data-root "$T/mine"
login_as tester
http POST /datasets/generic/create/image-object-detection/json -F train_image_folder="$T/boxes/images" \
    -F train_label_folder="$T/boxes/labels" -F val_image_folder="$T/boxes/images" -F val_label_folder="$T/boxes/labels" \
    -F padding_image_width=64 -F padding_image_height=64 -F resize_image_width=128 -F resize_image_height=128 \
    -F custom_classes=dontcare,rectangle,disc -F val_min_box_size=0 -F dataset_name=boxes
DS=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$DS" Done 120' "the detection dataset is made"
http POST /models/images/generic/json -F method=custom -F custom_network="<$KNOWN" -F train_epochs=1 \
    -F batch_size=4 -F use_mean=none -F lr_policy=fixed -F random_seed=1 -F model_name=known -F dataset="$DS"
M=$(jv 'd["id"]')
if ! { [ "$CODE" = 200 ] && wait_status "$M" Done 180; }; then
    echo "FAIL the model of known weights did not train: $BODY"
    finish
fi

# ---- 1. one image
http POST /models/images/generic/infer_one/json -F job_id="$M" -F image_path="$T/mine/square.png"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1]))
rows = d[\"outputs\"][\"bbox-list\"]
assert len(rows) == 1 and len(rows[0]) == 50 and all(len(r) == 5 for r in rows[0]), \"bbox-list is not (1, 50, 5)\"
found = [r for r in rows[0] if r[4] > 0]
assert len(found) == 1 and all(r == [0] * 5 for r in rows[0][1:]), rows[0][:3]
assert d[\"bboxes\"] == [{\"bbox-list\": found[0]}], d[\"bboxes\"]
assert d[\"image_frame\"] == {\"image\": [48, 48], \"padded\": [64, 64], \"input\": [128, 128]}, d[\"image_frame\"]
(b,) = d[\"boxes\"]
assert b[\"class\"] == 1 and b[\"label\"] == \"rectangle\" and abs(b[\"confidence\"] - found[0][4]) < 1e-3, b
for k, v in zip((\"x1\", \"y1\", \"x2\", \"y2\"), found[0]):
    assert abs(b[k] - v / 2) < 0.01, (k, b[k], v)
w = min(b[\"x2\"], 40) - max(b[\"x1\"], 8); h = min(b[\"y2\"], 40) - max(b[\"y1\"], 8)
iou = w * h / ((b[\"x2\"] - b[\"x1\"]) * (b[\"y2\"] - b[\"y1\"]) + 32 * 32 - w * h)
assert iou > 0.8, iou
assert [c[\"label\"] for c in d[\"box_counts\"]] == [\"rectangle\", \"disc\"] and d[\"box_counts\"][0][\"boxes\"] == 1" "$T/body"' \
    "infer_one/json: bbox-list (1, 50, 5) as DIGITS answers it, bboxes in the input's pixels, the box over the square in the image's"
cp "$T/body" "$T/one.json"
http POST /models/images/classification/classify_one/json -F job_id="$M" -F image_path="$T/mine/square.png"
check '[ "$CODE" = 200 ] && py "a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert a[\"predictions\"] == [] and a[\"boxes\"] == b[\"boxes\"] and a[\"bboxes\"] == b[\"bboxes\"], a" "$T/body" "$T/one.json"' \
    "classify_one on the detection model answers the same boxes"
"$WORKER" classify --model "$T/data/jobs/$M" "$T/mine/square.png" >"$T/cli.json" 2>"$T/cli.err"
check 'py "a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
assert \"classifications\" not in a and a[\"detections\"] == {sys.argv[3]: b[\"boxes\"]}, a" "$T/cli.json" "$T/one.json" "$T/mine/square.png"' \
    "the worker's classify command answers the detection model's boxes"
http POST /models/images/generic/infer_one/json -F job_id="$M" -F image_path="$T/mine/black.png"
check '[ "$CODE" = 200 ] && [ "$(jv "[d[\"boxes\"], d[\"bboxes\"]]")" = "[[], []]" ]' "a black image has no box"
http POST /models/images/generic/infer_one -F job_id="$M" -F image_path="$T/mine/square.png"
check '[ "$CODE" = 200 ] && grep -q "class=\"box\"" "$T/body" && grep -q ">1 box<" "$T/body" && grep -q "<li>rectangle " "$T/body"' \
    "infer_one's page draws the box over the image and lists it"
http POST /models/images/classification/classify_one -F job_id="$M" -F image_path="$T/mine/square.png"
check '[ "$CODE" = 200 ] && grep -q "list-group boxes" "$T/body"' "classify_one's page lists the boxes"

# ---- 2. a list with KITTI labels
printf '%s %s\n%s %s\n%s\t%s\n' "$T/mine/square.png" "$T/mine/square.txt" "$T/mine/black.png" "$T/mine/black.txt" \
    "$T/mine/square.png" "$T/mine/none.txt" >"$T/list.txt"
http POST /models/images/generic/infer_many/json -F job_id="$M" -F image_list=@"$T/list.txt"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1]))
assert d[\"labelled\"] == 3 and d[\"inferred\"] == 3, d
assert (d[\"precision\"], d[\"recall\"], d[\"mAP\"]) == (50, 50, 25), (d[\"precision\"], d[\"recall\"], d[\"mAP\"])
t = d[\"detection\"]
assert (t[\"true_positives\"], t[\"false_positives\"], t[\"false_negatives\"], t[\"iou_threshold\"]) == (1, 1, 1, 0.5), t
r, c = t[\"per_class\"]
assert (r[\"label\"], r[\"precision\"], r[\"recall\"], r[\"mAP\"]) == (\"rectangle\", 50, 100, 50), r
assert (c[\"label\"], c[\"false_negatives\"], c[\"recall\"]) == (\"disc\", 1, 0), c
assert len(d[\"boxes\"]) == 2 and len(d[\"scores\"]) == 2, d[\"boxes\"]" "$T/body"' \
    "infer_many/json with KITTI labels: one true, one false, one missed box: precision 50, recall 50, mAP 25"
http POST /models/images/generic/infer_many -F job_id="$M" -F image_list=@"$T/list.txt"
check '[ "$CODE" = 200 ] && grep -q "mAP 25.00, precision 50.00%, recall 50.00%" "$T/body"' "infer_many's page says mAP, precision and recall"
printf '%s %s\n%s %s\n' "$T/mine/black.png" "$T/mine/black.png.txt" "$T/mine/square.png" "$T/mine/square.txt" >"$T/bad.txt"
http POST /models/images/generic/infer_many/json -F job_id="$M" -F image_list=@"$T/bad.txt"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1])); s = d[\"skipped\"]
assert d[\"inferred\"] == 1 and list(s) == [sys.argv[2]] and s[sys.argv[2]].startswith(\"line 1:\"), s
assert d[\"detection\"][\"true_positives\"] == 1" "$T/body" "$T/mine/black.png"' \
    "a line whose label file is missing is skipped by its line; the others are scored"

# ---- 3. the val db with its label db
http POST /models/images/generic/infer_db/json -F job_id="$M" -F db_path=val
DSDIR=$T/data/jobs/$DS
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1])); st = json.load(open(sys.argv[2]))
true = sum(c[\"val\"] for c in st[\"classes\"][1:])
t = d[\"detection\"]
assert d[\"labelled\"] == st[\"splits\"][\"val\"] and t[\"true_positives\"] + t[\"false_negatives\"] == true, (t, true)
assert len(d[\"outputs\"]) == st[\"splits\"][\"val\"] and 0 <= d[\"mAP\"] <= 100" "$T/body" "$DSDIR/stats.json"' \
    "infer_db/json of the val db: every true box of the label db counted once"
finish
