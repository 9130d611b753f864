#!/usr/bin/env bash
# ONNX import (docs/formats.md, "ONNX import") against torch: a LeNet built and exported
# by torch (tests/shell/onnx_import.py, opset 13) is imported by `cdigits-worker
# import-onnx` and by DIGITS's manual upload (POST /pretrained_models/new with the .onnx
# as the weights and no network), which keep the same files; cdigits classifies torch's
# test images with the same top-1 and every probability within 1e-4 of torch's (the
# worker's classify; the server's classify_one agrees); a model with an operator cdigits
# lacks (Upsample) is refused by both, naming the node and the operator; and the imported
# network fine-tunes as the pretrained network of a new model (method pretrained).
# Needs /usr/bin/python3 with torch and onnx (scripts/setup.sh --test).
. "$(dirname "$0")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"
py=/usr/bin/python3
"$py" -c 'import torch, onnx' 2>/dev/null ||
    skip_test "/usr/bin/python3 cannot import torch and onnx (python3-torch, python3-onnx): scripts/setup.sh --test installs them"

if ! "$py" "$SRC/tests/shell/onnx_import.py" "$T" "$RANDOM" >"$T/gen.log" 2>&1; then
    cat "$T/gen.log"
    echo "FAIL: torch cannot write the test's models"
    exit 1
fi

# the worker's import
"$WORKER" import-onnx "$T/lenet.onnx" --out "$T/cli" >"$T/cli.json" 2>"$T/cli.err"
RC=$?
check '[ $RC = 0 ] && [ -s "$T/cli/deploy.prototxt" ] && [ -s "$T/cli/network.prototxt" ] && [ -s "$T/cli/weights.cdw" ]' \
    "import-onnx writes deploy.prototxt, network.prototxt and weights.cdw ($(cat "$T/cli.err"))"
check 'grep -q "\"layers\":9,\"parameters\":8" "$T/cli.json" && grep -q "cdigits-input: 1x28x28" "$T/cli/deploy.prototxt"' \
    "it reports 9 layers with 8 parameter tensors and the 1x28x28 input ($(cat "$T/cli.json"))"
"$WORKER" check-net "$T/cli/network.prototxt" --input 1x28x28 >"$T/check.log" 2>&1
check '[ $? = 0 ]' "the one-file network passes check-net ($(tail -3 "$T/check.log"))"
"$WORKER" import-onnx "$T/upsample.onnx" --out "$T/up" >/dev/null 2>"$T/up.err"
RC=$?
check '[ $RC = 1 ] && grep -q "node '"'"'up1'"'"' (op Upsample): cdigits cannot import this operator; supported: Add," "$T/up.err"' \
    "import-onnx refuses Upsample naming the node and the operator ($(cat "$T/up.err"))"

# the server: a dataset of 28x28 gray images in 3 classes for the fine-tuning
shapes_dataset 28 8 "$RANDOM"
printf '%s\n' zero one two three four five six seven eight nine >"$T/labels.txt"
upload() { # FILE NAME
    http POST /pretrained_models/new -H 'Accept: application/json' -F "weights_file=@$1" \
        -F "labels_file=@$T/labels.txt" -F framework=caffe -F image_type=1 -F resize_mode=squash \
        -F width=28 -F height=28 -F job_name="$2"
}
upload "$T/lenet.onnx" lenet
PT=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ -n "$PT" ] && [ "$PT" != "<KeyError>" ]' "the upload of lenet.onnx alone makes a pretrained model"
PDIR=$T/data/jobs/$PT
same_net() { cmp -s <(tail -n +2 "$PDIR/$1") <(tail -n +2 "$T/cli/$1"); } # line 1 names the file
check 'same_net deploy.prototxt && same_net network.prototxt && cmp -s "$PDIR/weights.cdw" "$T/cli/weights.cdw"' \
    "the model's folder keeps the network made from it, the same as the worker's import"

# torch's probabilities against cdigits's (percentages with 2 decimals: 5e-5 of rounding)
IMAGES=$(ls "$T"/test/*.png)
"$WORKER" classify --model "$PDIR" --top 10 $IMAGES >"$T/classify.json" 2>"$T/classify.err"
COMPARE=$("$py" -c '
import json, os, sys
torch_p = json.load(open(sys.argv[1]))
got = json.load(open(sys.argv[2]))["classifications"]
labels = open(sys.argv[3]).read().split()
worst, same = 0.0, True
for path, preds in got.items():
    want = torch_p[os.path.basename(path)]
    mine = {labels.index(l): p / 100.0 for l, p in preds}
    same = same and preds[0][0] == labels[max(range(10), key=lambda k: want[k])]
    worst = max([worst] + [abs(mine[k] - want[k]) for k in range(10)])
print(len(got), same, worst <= 1e-4, worst)' "$T/probs.json" "$T/classify.json" "$T/labels.txt" 2>&1)
check '[ "$(echo "$COMPARE" | cut -d" " -f1-3)" = "4 True True" ]' \
    "cdigits classifies the 4 images with torch's top-1 and every probability within 1e-4 (images, top-1, close, worst: $COMPARE)"
FIRST=$(echo "$IMAGES" | head -1)
http POST /models/images/classification/classify_one/json -F job_id="$PT" -F "image_file=@$FIRST"
SERVER_TOP=$(jv 'd["predictions"][0][0]')
WORKER_TOP=$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["classifications"][sys.argv[2]][0][0])' \
    "$T/classify.json" "$FIRST")
check '[ "$CODE" = 200 ] && [ "$SERVER_TOP" = "$WORKER_TOP" ]' "the server's classify_one gives the same top class ($SERVER_TOP)"

upload "$T/upsample.onnx" upsample
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "node '"'"'up1'"'"' (op Upsample): cdigits cannot import this operator"' \
    "the upload of a model with Upsample is a 400 naming the node and the operator"
http GET /pretrained_models/json
check '[ "$(jv "[m[\"name\"] for m in d[\"pretrained_models\"]]")" = "[\"lenet\"]" ]' "only the good upload became a pretrained model"

# fine-tuning: a new model from the imported network and weights
http POST /models/images/classification/json -F method=pretrained -F pretrained_networks="$PT" -F dataset="$DS" \
    -F train_epochs=1 -F batch_size=8 -F model_name=tuned
FT=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$FT" Done 300' "a model from the imported one (method pretrained) trains"
http GET "/jobs/$FT/log/json"
check 'jv "d[\"log\"]" | grep -q "took 8 parameter tensors"' "it starts from all 8 imported tensors"
finish
