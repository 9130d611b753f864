#!/usr/bin/env bash
# Generic inference routes (docs/inference.md) with the real worker:
#   1. a LeNet trained here: infer_one/json answers its output blob by name with the batch
#      dimension ({"outputs": {"softmax": [[p0, p1, p2]]}}, probabilities that add up to 1),
#      .json answers too, infer_many/json by path, infer_db/json by record index of the
#      dataset's val db; the pages; the 400s (no image, no list, a bad db_path);
#   2. a segmentation model made by hand from its weights: a fully convolutional deploy
#      net (scale + conv1: 20 channels of 24x24) uploaded as a pretrained model whose
#      dataset folder then says task segmentation with a palette: infer_one/json adds a
#      mask (a 24x24 PNG data URL) and class counts over its 576 pixels, infer_many with a
#      label image adds the IoU summary whose pixels are the label's.
. "$(dirname "${BASH_SOURCE[0]}")/infer_lib.bash"

# a short --model-idle: the upload below warms a worker before the folder says segmentation
infer_setup --model-idle 1
IMG=$(ls "$T/images/bars/"*.png | head -1)
IMG2=$(ls "$T/images/bars/"*.png | sed -n 2p)

# ---- 1. outputs by name
http POST /models/images/generic/infer_one/json -F job_id="$ML" -F image_file=@"$IMG"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1])); p = d[\"outputs\"][\"softmax\"]
assert list(d[\"outputs\"]) == [\"softmax\"] and len(p) == 1 and len(p[0]) == 3 and abs(sum(p[0]) - 1) < 1e-4, p
assert d[\"snapshot_iteration\"] > 0 and d[\"task\"] == \"classification\"" "$T/body"' \
    "infer_one/json: the softmax blob (LeNet's last top) by name, (1, 3), adding up to 1"
http POST "/models/images/generic/infer_one.json?job_id=$ML" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"outputs\"][\"softmax\"][0])")" = 3 ]' "infer_one.json with image_path"
printf '%s\n%s 1\n%s/missing.png\n' "$IMG" "$IMG2" "$T/images" >"$T/list.txt"
http POST /models/images/generic/infer_many/json -F job_id="$ML" -F image_list=@"$T/list.txt"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1])); o = d[\"outputs\"]
assert sorted(o) == sorted([sys.argv[2], sys.argv[3]]), o.keys()
assert all(len(v[\"softmax\"]) == 3 for v in o.values()) and len(d[\"skipped\"]) == 1 and d[\"inferred\"] == 2" "$T/body" "$IMG" "$IMG2"' \
    "infer_many/json: each image's blobs by path (a trailing number dropped), the missing one skipped"
http POST /models/images/generic/infer_db/json -F job_id="$ML" -F db_path=val
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1])); o = d[\"outputs\"]
assert len(o) > 0 and sorted(o, key=int) == [str(i) for i in range(len(o))], o.keys()
assert all(abs(sum(v[\"softmax\"]) - 1) < 1e-4 for v in o.values())" "$T/body"' \
    "infer_db/json: the val db's records by index"
http POST /models/images/generic/infer_one -F job_id="$ML" -F image_file=@"$IMG"
check '[ "$CODE" = 200 ] && grep -q "<table class=\"table outputs\">" "$T/body" && grep -q ">softmax<" "$T/body"' \
    "infer_one's page lists the outputs"
http POST /models/images/generic/infer_many -F job_id="$ML" -F image_list=@"$T/list.txt"
check '[ "$CODE" = 200 ] && grep -q "table results" "$T/body" && grep -q "2 inferred" "$T/body"' "infer_many's page"
http POST /models/images/generic/infer_db -F job_id="$ML"
check '[ "$CODE" = 200 ] && grep -q "table results" "$T/body"' "infer_db's page (the val db by default)"
http POST /models/images/generic/infer_one/json -F job_id="$ML"
check '[ "$CODE" = 400 ] && grep -q "image_path or image_file" "$T/body"' "infer_one without an image is 400"
http POST /models/images/generic/infer_many/json -F job_id="$ML"
check '[ "$CODE" = 400 ] && grep -q "image_list" "$T/body"' "infer_many without a list is 400"
http POST /models/images/generic/infer_db/json -F job_id="$ML" -F db_path=/nowhere/x.db
check '[ "$CODE" = 400 ] && grep -q "db_path" "$T/body"' "infer_db of a db outside the roots is 400 naming db_path"

# ---- 2. a segmentation model by hand
http GET "/models/$ML/json"
W=$(ls "$MDIR"/snapshot_iter_*.cdw | tail -1)
cat >"$T/fcn.prototxt" <<'EOF'
name: "fcn-by-hand"
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "conv1" type: "Convolution" bottom: "scaled" top: "conv1"
  convolution_param { num_output: 20 kernel_size: 5 stride: 1 } }
EOF
DSDIR=$(py 'print(json.load(open(sys.argv[1]))["dataset_dir"])' "$MDIR/train.json")
http POST /pretrained_models/new -H 'Accept: application/json' -F job_name=fcn -F weights_file=@"$W" \
    -F model_def_file=@"$T/fcn.prototxt" -F labels_file=@"$DSDIR/labels.txt" -F image_type=1 \
    -F resize_mode=squash -F width=28 -F height=28
check '[ "$CODE" = 200 ]' "the fully convolutional net uploads as a pretrained model"
PM=$(jv 'd["id"]')
http GET "/models/$PM/json"
PDIR=$(jv 'd["directory"]')
PDS=$(py 'print(json.load(open(sys.argv[1]))["dataset_dir"])' "$PDIR/train.json")
printf '{"task": "segmentation"}\n' >"$PDS/stats.json"
printf '255 0 0\n0 255 0\n0 0 255\n' >"$PDS/palette.txt"
check 'wait_until 120 "[ -z \"\$(serve_pids \"$PDIR\")\" ]"' "the worker that opened the upload as a classifier stops"
http POST /models/images/generic/infer_one/json -F job_id="$PM" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && py "import base64, struct
d = json.load(open(sys.argv[1]))
assert d[\"task\"] == \"segmentation\" and d[\"mask_size\"] == [24, 24], d.get(\"mask_size\")
png = base64.b64decode(d[\"mask\"].split(\",\", 1)[1])
assert png[:8] == b\"\\x89PNG\\r\\n\\x1a\\n\" and struct.unpack(\">II\", png[16:24]) == (24, 24)
c = d[\"class_counts\"]
assert len(c) == 20 and sum(x[\"pixels\"] for x in c) == 576 and c[0][\"color\"] == \"#ff0000\", c[:3]
assert len(d[\"outputs\"][\"conv1\"][0]) == 20" "$T/body"' \
    "infer_one/json of a segmentation model: a 24x24 mask PNG, counts of its 576 pixels, the palette's colours"
# a label image of 28x28 (scaled to the mask by the nearest pixel): gray level 1 everywhere
py 'import struct, zlib
def png(w, h, rows):
    raw = b"".join(b"\0" + r for r in rows)
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png(28, 28, [bytes([1] * 28)] * 28))' "$T/images/label.png"
printf '%s\t%s\n%s\n' "$IMG" "$T/images/label.png" "$IMG2" >"$T/seg.txt"
http POST /models/images/generic/infer_many/json -F job_id="$PM" -F image_list=@"$T/seg.txt"
check '[ "$CODE" = 200 ] && py "d = json.load(open(sys.argv[1]))
assert len(d[\"masks\"]) == 2 and len(d[\"class_counts\"]) == 2 and d[\"labelled\"] == 1
i = d[\"iou\"]
assert i[\"pixels\"] == 576 and i[\"per_class\"][1][\"label_pixels\"] == 576 and 0 <= i[\"mean_iou\"] <= 100, i
assert list(d[\"ious\"]) == [sys.argv[2]]" "$T/body" "$IMG"' \
    "infer_many/json with a label image: masks, counts, the IoU summary over the label's 576 pixels"
http POST /models/images/generic/infer_one -F job_id="$PM" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && grep -q "class=\"mask\"" "$T/body" && grep -q "table legend" "$T/body"' \
    "infer_one's page shows the mask over the image and the legend"
finish
