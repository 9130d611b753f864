#!/usr/bin/env bash
# Black-box tests of object detection with the real worker (issue 19):
#  (a) tests/shell/make_generic.py boxes --apart writes coloured rectangles and discs on
#      a textured background with KITTI labels, some cut by the edges, and DontCare
#      patches; the worker's dataset task makes a detection dataset of them
#      (custom_classes dontcare,rectangle,disc; val boxes under 25 pixels become
#      DontCare, as DIGITS makes them); models/detectnet_small.prototxt
#      (DetectNetTransformation with its augmentations, L1Loss and EuclideanLoss masked
#      by the coverage, size and obj blocks and by the DontCare care plane, the native
#      ClusterDetections, ClusterGroundtruth, ScoreDetections and mAP) trains on 512
#      images for 8 epochs and reaches a val mAP of at least 70 (DetectNet's percent:
#      precision times recall at IoU 0.5), with precision and recall reported beside it.
#      ADAM at 0.001, a tenth of that after each third: seeds 1 to 8 end at 92.6, 92.7,
#      81.6, 92.7, 90.8, 64.0, 85.7 and 77.2 on 32 val images, and the same seeds with
#      another gemm's rounding within 10 of those (docs/training.md); with 0.002 and
#      one step at 60% the ending swung with the rounding (seed 1 at 94.5 or 42.7).
#      The shapes never overlap: DetectNet's grid holds one box per cell, so shapes
#      painted over one another compete for their cells (docs/layers.md);
#  (b) resume, on 128 of the images: the job stopped by SIGTERM at its first snapshot
#      and resumed reports exactly what the run never stopped did, with byte-identical
#      snapshots (the augmentation is a function of the seed and the stream position);
#  (c) models/detectnet.prototxt (DIGITS's GoogLeNet DetectNet) builds every stage on
#      KITTI's 3x384x1248 with check-net.
# Needs CDIGITS_BUILD_DIR (ctest sets it) and python3. Trains with the worker of
# CDIGITS_RELEASE_BUILD_DIR when that is set (faster than a sanitizer build).
set -u

. "$(dirname "$0")/train_lib.bash"
release=${CDIGITS_RELEASE_BUILD_DIR:+$CDIGITS_RELEASE_BUILD_DIR/cdigits-worker}
if [ -n "$release" ] && [ -x "$release" ]; then
    train_setup train_detection "$release"
else
    train_setup train_detection
fi
gen="$here/make_generic.py"
models="$here/../../models"

python3 "$gen" boxes "$tmp/train-src" --count 512 --size 128 --seed 1 --apart >/dev/null
python3 "$gen" boxes "$tmp/val-src" --count 32 --size 128 --seed 2 --apart >/dev/null
# dataset DIR TRAIN_IMAGES: a detection dataset of the first TRAIN_IMAGES train images
dataset() {
    local src=$tmp/train-src-$2 i n
    mkdir -p "$src/images" "$src/labels" "$1"
    for i in $(seq 0 $(($2 - 1))); do
        n=$(printf %03d "$i")
        ln -sf "$tmp/train-src/images/$n.png" "$src/images/$n.png"
        ln -sf "$tmp/train-src/labels/$n.txt" "$src/labels/$n.txt"
    done
    printf '{"task": "detection", "train_image_folder": "%s", "train_label_folder": "%s", "val_image_folder": "%s", "val_label_folder": "%s", "custom_classes": "%s"}\n' \
        "$src/images" "$src/labels" "$tmp/val-src/images" "$tmp/val-src/labels" "$(cat "$tmp/train-src/classes.txt")" \
        >"$1/dataset.json"
    if ! "$worker" dataset "$1" >"$1.log" 2>&1 || [ ! -f "$1/stats.json" ]; then
        cat "$1.log"
        echo "FAIL: the detection dataset job"
        echo "train_detection: $passed passed, $((failed + 1)) failed"
        exit 1
    fi
    echo "dataset: $(grep -o '"splits":{[^}]*}' "$1.log")"
}
dataset "$tmp/ds" 512
dataset "$tmp/ds-small" 128

# job DIR EPOCHS FIELDS: a fresh job of the small detector on the dataset
job() {
    rm -rf "$1" "$1.log"*
    mkdir -p "$1"
    cp "$models/detectnet_small.prototxt" "$1/network.prototxt"
    printf '{"dataset_dir": "%s", "epochs": %s, "solver_type": "ADAM", "learning_rate": 0.001, "lr_policy": {"policy": "step", "stepsize": 33, "gamma": 0.1}, "use_mean": "none", %s}\n' \
        "${DS:-$tmp/ds}" "$2" "$3" >"$1/train.json"
}

# (a) training to mAP 70
job "$tmp/det" 8 '"validation_interval": 4, "random_seed": 1'
run "$tmp/det"
check "detection: the job succeeds" [ "$(python3 "$lib" rc "$tmp/det.log")" = 0 ]
check "detection: val mAP >= 70" reaches "$tmp/det.log" mAP ge 70
check "detection: val precision reported" reaches "$tmp/det.log" precision ge 0
check "detection: val recall reported" reaches "$tmp/det.log" recall ge 0

# (b) exact resume
det_case_job() { DS=$tmp/ds-small job "$1" "$2" '"snapshot_interval": 1, "validation_interval": 1, "random_seed": 3'; }
resume_check detection det_case_job

# (c) DetectNet itself builds on KITTI's shape
builds() { "$worker" check-net "$models/detectnet.prototxt" --input 3x384x1248 --label 1x8x16 >"$tmp/check.log" 2>&1 ||
    { cat "$tmp/check.log"; return 1; }; }
check "detectnet.prototxt builds" builds

train_finish
