#!/usr/bin/env bash
# Black-box tests of the generic tasks with the real worker: each dataset is made by the
# worker's dataset task from images generated here (tests/shell/make_generic.py), then
# trained, and the measure the task reports must reach what the task asks:
#  (a) segmentation: rectangles and discs on a textured background, paletted label PNGs
#      with an ignore border (255); models/fcn_small.prototxt (DIGITS's two Data layers,
#      Deconvolution, Crop, SoftmaxWithLoss with ignore_label) reaches a val mean IoU of at
#      least 0.8, and pixel accuracy is reported beside it;
#  (b) regression: the x, y of a bright dot on noise, from a list of `path x y` lines; a
#      small convolutional net with EuclideanLoss reaches a val mean absolute error under
#      1.5 pixels;
#  (c) pairs: digit pairs made by the dataset task (DIGITS's Siamese example: channel 0 and
#      1 the two images), two LeNet-like branches sharing their weights by param names,
#      Slice and Silence, ContrastiveLoss; the val loss ends at most half the first;
#  (a') segmentation of images of varying size (24 to 40 pixels a side, force_same_shape
#      0): trained one image per pass with the network re-planned for each, the same
#      network reaches a val mean IoU of at least 0.8 too;
#  (d) resume: each task stopped by SIGTERM at its first snapshot and resumed reports
#      exactly what the run never stopped did, with byte-identical snapshots; the
#      segmentation run does so with DIGITS's augmentations on (rotation, scale,
#      contrast, HSV, noise, flips), whose labels move with the pixels.
# Needs CDIGITS_BUILD_DIR (ctest sets it) and python3.
set -u

. "$(dirname "$0")/train_lib.bash"
train_setup train_generic
gen="$here/make_generic.py"
models="$here/../../models"

# dataset NAME JSON: runs the worker's dataset task on dataset.json JSON in $tmp/NAME
dataset() {
    mkdir -p "$tmp/$1"
    printf '%s\n' "$2" >"$tmp/$1/dataset.json"
    if ! "$worker" dataset "$tmp/$1" >"$tmp/$1.log" 2>&1 || [ ! -f "$tmp/$1/stats.json" ]; then
        cat "$tmp/$1.log"
        echo "FAIL: the $1 dataset job"
        echo "train_generic: $passed passed, $((failed + 1)) failed"
        exit 1
    fi
    echo "$1: $(grep -o '"splits":{[^}]*}' "$tmp/$1.log")"
}

# job DIR NETFILE DATASET JSON-FIELDS: a fresh job folder
job() {
    rm -rf "$1" "$1.log"*
    mkdir -p "$1"
    cp "$2" "$1/network.prototxt"
    printf '{"dataset_dir": "%s", %s}\n' "$tmp/$3" "$4" >"$1/train.json"
}

# resume_case NAME NETFILE DATASET FIELDS: resume_check (train_lib.bash) on jobs of
# NETFILE on DATASET with FIELDS, a snapshot and a validation every epoch
resume_case() {
    case_net=$2 case_ds=$3 case_fields=$4
    resume_check "$1" generic_case_job
}
generic_case_job() {
    job "$1" "$case_net" "$case_ds" "\"epochs\": $2, \"snapshot_interval\": 1, \"validation_interval\": 1, $case_fields"
}

# ---- (a) segmentation ----------------------------------------------------------------

python3 "$gen" shapes "$tmp/shapes" --count 64 --size 32 --seed 3
dataset seg "{\"task\": \"segmentation\", \"feature_folder\": \"$tmp/shapes/images\",
 \"label_folder\": \"$tmp/shapes/labels\", \"pct_val\": 25, \"class_labels_file\": \"$tmp/shapes/classes.txt\",
 \"colormap_method\": \"label\", \"channel_conversion\": \"RGB\", \"encoding\": \"png\", \"seed\": 1}"
check "segmentation: a palette of the label PNGs" test -s "$tmp/seg/palette.txt"
job "$tmp/seg-plain" "$models/fcn_small.prototxt" seg \
    '"epochs": 40, "learning_rate": 0.01, "validation_interval": 10, "random_seed": 1'
run "$tmp/seg-plain"
check "segmentation: trained" grep -q '"type":"done"' "$tmp/seg-plain.log"
check "segmentation: mean IoU >= 0.8" reaches "$tmp/seg-plain.log" mean_iou ge 0.8
check "segmentation: pixel accuracy >= 0.9" reaches "$tmp/seg-plain.log" accuracy ge 0.9
check "segmentation: IoU per class" grep -q '"name":"iou_class_2","value":' "$tmp/seg-plain.log"

# ---- (a') segmentation, images of varying size ------------------------------------------

python3 "$gen" shapes "$tmp/mixed" --count 64 --size 24 --max-size 40 --seed 6
dataset segmix "{\"task\": \"segmentation\", \"feature_folder\": \"$tmp/mixed/images\",
 \"label_folder\": \"$tmp/mixed/labels\", \"pct_val\": 25, \"class_labels_file\": \"$tmp/mixed/classes.txt\",
 \"colormap_method\": \"label\", \"force_same_shape\": 0, \"seed\": 1}"
check "varying size: the dataset keeps each size" python3 - "$tmp/segmix/stats.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print("force_same_shape %s, largest %sx%s" % (s["force_same_shape"], s["width"], s["height"]))
sys.exit(0 if s["force_same_shape"] == 0 and s["width"] > 24 and s["height"] > 24 else 1)
EOF
job "$tmp/segmix-plain" "$models/fcn_small.prototxt" segmix \
    '"epochs": 30, "learning_rate": 0.01, "validation_interval": 10, "random_seed": 1'
run "$tmp/segmix-plain"
check "varying size: trained" grep -q '"type":"done"' "$tmp/segmix-plain.log"
check "varying size: one image per pass, the net re-planned" grep -q 're-planned for each image' "$tmp/segmix-plain.log"
check "varying size: mean IoU >= 0.8" reaches "$tmp/segmix-plain.log" mean_iou ge 0.8
# inference keeps each image's size: the masks are the images' sizes, and the val db
# gives the mean IoU validation gave
{
    for f in 000 001 002; do
        printf '{"id": "%s", "op": "infer", "image": "%s"}\n' "$f" "$tmp/mixed/images/$f.png"
    done
    printf '{"id": "db", "op": "infer_db", "db": "%s", "labels_db": "%s", "out": "%s"}\n{"op": "quit"}\n' \
        "$tmp/segmix/val.db" "$tmp/segmix/val_labels.db" "$tmp/segmix-db.jsonl"
} | "$worker" serve-model --model "$tmp/segmix-plain" >"$tmp/segmix-infer.log" 2>&1
check "varying size: masks of each image's size, and the val db's mean IoU" python3 - "$tmp/segmix-infer.log" \
    "$tmp/mixed/images" "$tmp/segmix-plain.log" <<'EOF'
import json, struct, sys
answers = {}
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "id" in d:
        answers[d["id"]] = d
for f in ("000", "001", "002"):
    w, h = struct.unpack(">II", open("%s/%s.png" % (sys.argv[2], f), "rb").read()[16:24])
    got = answers[f].get("mask_size")
    print("%s.png: %dx%d, its mask %s" % (f, w, h, got))
    assert answers[f]["ok"] and got == [h, w], answers[f]
val = [json.loads(l)["value"] for l in open(sys.argv[3]) if '"phase":"val"' in l and '"mean_iou"' in l][-1]
db = answers["db"]["summary"]["iou"]["mean_iou"] / 100
print("infer_db mean IoU %.4f, validation's %.4f" % (db, val))
assert abs(db - val) < 1e-3
EOF

# ---- (b) regression ------------------------------------------------------------------

python3 "$gen" dots "$tmp/dots" --count 400 --size 32 --seed 4
dataset reg "{\"task\": \"regression\", \"textfile_train\": \"$tmp/dots/train.txt\", \"textfile_root\": \"$tmp/dots\",
 \"pct_val\": 20, \"channels\": 1, \"width\": 32, \"height\": 32, \"encoding\": \"none\", \"seed\": 1}"
python3 "$gen" net-dot "$tmp/dot.prototxt"
job "$tmp/reg-plain" "$tmp/dot.prototxt" reg \
    '"epochs": 30, "solver_type": "ADAM", "learning_rate": 0.001, "use_mean": "none", "validation_interval": 10, "random_seed": 1'
run "$tmp/reg-plain"
check "regression: trained" grep -q '"type":"done"' "$tmp/reg-plain.log"
check "regression: mean absolute error < 1.5 pixels" reaches "$tmp/reg-plain.log" mae le 1.5

# ---- (c) pairs -----------------------------------------------------------------------

python3 "$gen" digits "$tmp/digits" --count 60 --size 16 --seed 5
dataset pairs "{\"task\": \"pairs\", \"folder_train\": \"$tmp/digits\", \"pct_val\": 25, \"pairs_train\": 600,
 \"pairs_val\": 200, \"width\": 16, \"height\": 16, \"encoding\": \"none\", \"seed\": 1}"
python3 "$gen" net-siamese "$tmp/siamese.prototxt"
job "$tmp/pairs-plain" "$tmp/siamese.prototxt" pairs \
    '"epochs": 10, "learning_rate": 0.01, "validation_interval": 1, "random_seed": 1'
run "$tmp/pairs-plain"
check "pairs: trained" grep -q '"type":"done"' "$tmp/pairs-plain.log"
check "pairs: the contrastive loss at most half the first" python3 - "$tmp/pairs-plain.log" <<'EOF'
import json, sys
v = [json.loads(l)["value"] for l in open(sys.argv[1])
     if '"phase":"val"' in l and '"name":"loss"' in l]
print("val contrastive loss: first %.4f, last %.4f" % (v[0], v[-1]))
sys.exit(0 if v and v[-1] <= 0.5 * v[0] else 1)
EOF

# ---- (d) resume ----------------------------------------------------------------------

resume_case seg "$models/fcn_small.prototxt" seg '"learning_rate": 0.01, "random_seed": 2,
    "flip": "fliplr", "rotation": 20, "rescale": 0.1, "contrast": 0.3, "hsv_shift": true, "noise": 0.02'
resume_case segmix "$models/fcn_small.prototxt" segmix '"learning_rate": 0.01, "random_seed": 5, "flip": "fliplr"'
resume_case reg "$tmp/dot.prototxt" reg '"solver_type": "ADAM", "learning_rate": 0.001, "use_mean": "none", "random_seed": 3'
resume_case pairs "$tmp/siamese.prototxt" pairs '"learning_rate": 0.01, "random_seed": 4'

train_finish
