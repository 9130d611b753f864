#!/usr/bin/env bash
# ONNX export (docs/inference.md, "ONNX export"): a LeNet trained on generated images and
# a network of every layer type the export maps (tests/data/onnx_all_layers.prototxt,
# centre crop, pixel mean, input scale), exported through GET /models/<id>/download.onnx
# and `cdigits-worker export-onnx`, checked by ONNX's own checker (full_check) and run in
# ONNX Runtime (tests/onnx/run.mjs) on the images classify_many classified: top-1 the same
# and every probability within 1e-4 of cdigits's (which answers percent with 2
# decimals, 5e-5 of rounding). The download archive carries model.onnx; a network with a
# layer the export refuses (LRN WITHIN_CHANNEL) is refused by the route and the command
# naming the layer, and its archive is made without model.onnx, saying why.
. "$(dirname "$0")/infer_lib.bash" || exit 1
ONNX_PY=/usr/bin/python3
"$ONNX_PY" -c "import onnx" 2>/dev/null || skip_test "$ONNX_PY has no onnx module (apt-get install python3-onnx)"
command -v node >/dev/null || skip_test "node is not installed (scripts/web-setup.sh)"
[ -d "$SRC/tests/onnx/node_modules/onnxruntime-node" ] ||
    skip_test "onnxruntime-node is not installed in tests/onnx (scripts/web-setup.sh)"
infer_setup

http GET "/datasets/$DS/json"
LABELS=$(jv 'd["labels"]')
# three images of each class, at the dataset's size (28x28 gray, as make_pngs writes them:
# the resize the input contract asks of the caller is the identity here)
IMGS=$(for c in bars columns diagonals; do ls "$T/images/$c/"*.png | head -3; done)
printf '%s\n' $IMGS >"$T/list.txt"

# checker: ONNX's full check, and what the file says about itself (on a copy: onnx 1.12's
# check_model of a path with full_check writes the inferred shapes back into the file)
onnx_check() {
    cp "$1" "$T/checked.onnx"
    "$ONNX_PY" -c '
import json, sys, onnx
m = onnx.load(sys.argv[1])
onnx.checker.check_model(sys.argv[1], full_check=True)
meta = {p.key: p.value for p in m.metadata_props}
dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
print(json.dumps({"ir": m.ir_version, "opset": [o.version for o in m.opset_import if o.domain == ""],
                  "producer": m.producer_name, "meta": meta, "input": [i.name for i in m.graph.input],
                  "in_dims": dims(m.graph.input[0]), "output": [o.name for o in m.graph.output],
                  "ops": sorted(set(n.op_type for n in m.graph.node))}))' "$T/checked.onnx" >"$T/body" 2>"$T/check.err"
}

# compare ID FILE SHAPE: classify_many of the list by model ID against FILE in ONNX Runtime
compare() {
    local id=$1 file=$2 shape=$3
    http POST /models/images/classification/classify_many/json -F job_id="$id" -F image_list="@$T/list.txt"
    cp "$T/body" "$T/many.json"
    node "$SRC/tests/onnx/run.mjs" "$file" --shape "$shape" $IMGS >"$T/ort.json" 2>"$T/ort.err" || cat "$T/ort.err"
    py '
many = json.load(open(sys.argv[1]))["classifications"]; ort = json.load(open(sys.argv[2]))
labels = json.loads(sys.argv[3])
worst, top1 = 0.0, 0
for path, probs in zip(ort["inputs"], ort["probs"]):
    ours = {label: pct / 100.0 for label, pct in many[path]}
    top1 += labels[max(range(len(probs)), key=lambda i: probs[i])] == many[path][0][0]
    worst = max([worst] + [abs(p - ours[labels[i]]) for i, p in enumerate(probs)])
print(json.dumps({"images": len(ort["probs"]), "top1_same": top1, "worst": worst}))' "$T/many.json" "$T/ort.json" "$LABELS" >"$T/body"
    BODY=$(cat "$T/body")
}

# ---- LeNet ----------------------------------------------------------------------------
curl -s -D "$T/headers" -o "$T/lenet.onnx" "$B/models/$ML/download.onnx?epoch=2"
check 'grep -qi "^content-type: application/octet-stream" "$T/headers" && grep -qi "filename=\"${ML}_epoch_2.onnx\"" "$T/headers"' \
    "download.onnx?epoch=2 is an attachment named like the archives"
"$WORKER" export-onnx --model "$MDIR" --epoch 2 --out "$T/lenet_cli.onnx" >"$T/cli.out" 2>"$T/cli.err"
RC=$?
check '[ $RC = 0 ] && cmp -s "$T/lenet.onnx" "$T/lenet_cli.onnx"' "export-onnx --epoch 2 writes the same file as the route ($(cat "$T/cli.err"))"
onnx_check "$T/lenet.onnx"
check '[ -s "$T/body" ] && [ "$(jv "[d[\"ir\"], d[\"opset\"], d[\"producer\"]]")" = "[7, [13], \"cdigits\"]" ]' \
    "onnx.checker full_check passes; IR 7, opset 13, producer cdigits ($(tail -1 "$T/check.err"))"
check '[ "$(jv "[d[\"input\"], d[\"in_dims\"], d[\"output\"]]")" = "[[\"data\"], [\"N\", 1, 28, 28], [\"softmax\"]]" ]' \
    "input data is Nx1x28x28 and the output the deploy stage's softmax"
check '[ "$(jv "d[\"meta\"][\"labels\"].split(\"\\n\")")" = "$LABELS" ] && [ "$(jv "d[\"meta\"][\"mean\"]")" = image ]' \
    "the metadata has the labels and the mean"
check '[ "$(jv "\"Sub\" in d[\"ops\"] and \"Gemm\" in d[\"ops\"] and \"MaxPool\" in d[\"ops\"]")" = true ]' \
    "the graph subtracts the mean and has LeNet's layers ($(jv 'd["ops"]'))"
compare "$ML" "$T/lenet.onnx" 1x28x28
check '[ "$(jv "d[\"images\"] == 9 and d[\"top1_same\"] == 9 and d[\"worst\"] <= 1e-4")" = true ]' \
    "ONNX Runtime gives LeNet's top-1 and probabilities within 1e-4 on 9 images ($BODY)"
"$WORKER" export-onnx --model "$MDIR" --iteration 3 --out "$T/lenet3.onnx" 2>"$T/cli3.err"
RC=$?
check '[ $RC = 0 ] && ! cmp -s "$T/lenet3.onnx" "$T/lenet.onnx"' "export-onnx --iteration 3 exports the older snapshot"
"$WORKER" export-onnx --model "$MDIR" --epoch 7 --out "$T/none.onnx" 2>"$T/cli7.err"
RC=$?
check '[ $RC = 1 ] && grep -q "epochs 1, 2" "$T/cli7.err" && [ ! -e "$T/none.onnx" ]' "an epoch without a snapshot is refused naming the epochs"

curl -s -o "$T/m.tar.gz" "$B/models/$ML/download.tar.gz"
check '[ "$(py "import tarfile; t = tarfile.open(sys.argv[1]); print(t.extractfile(\"model.onnx\").read() == open(sys.argv[2], \"rb\").read())" "$T/m.tar.gz" "$T/lenet.onnx")" = True ]' \
    "the .tar.gz download carries model.onnx, the same file"

# ---- every exported layer type ----------------------------------------------------------
post_model "$SRC/tests/data/onnx_all_layers.prototxt" all_layers 2 -F batch_size=12 -F learning_rate=0.01 \
    -F lr_policy=fixed -F random_seed=5 -F crop_size=24 -F use_mean=pixel
ALL=$MODEL
wait_status "$ALL" Done 300 || echo "FAIL the network of every layer did not train: $BODY"
curl -s -o "$T/all.onnx" "$B/models/$ALL/download.onnx"
onnx_check "$T/all.onnx"
check '[ -s "$T/body" ] && [ "$(jv "[d[\"meta\"][\"crop\"], d[\"meta\"][\"mean\"], d[\"meta\"][\"scale\"], d[\"output\"]]")" = "[\"24x24 centre\", \"pixel\", \"0.0199999996\", [\"prob\"]]" ]' \
    "every layer: full_check passes, metadata names the crop, pixel mean and scale ($(tail -1 "$T/check.err"))"
WANT='["AveragePool", "BatchNormalization", "Concat", "Conv", "ConvTranspose", "Flatten", "Gemm", "GlobalAveragePool", "LRN", "LeakyRelu", "Max", "MaxPool", "Mul", "Pad", "Pow", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Sub", "Sum", "Tanh", "Add"]'
check '[ "$(jv "sorted(set($WANT) - set(d[\"ops\"]))")" = "[]" ]' "the graph has every mapped operator ($(jv 'd["ops"]'))"
compare "$ALL" "$T/all.onnx" 1x28x28
check '[ "$(jv "d[\"images\"] == 9 and d[\"top1_same\"] == 9 and d[\"worst\"] <= 1e-4")" = true ]' \
    "ONNX Runtime gives the every-layer network's top-1 and probabilities within 1e-4 ($BODY)"

# ---- a layer the export refuses -----------------------------------------------------------
post_model "$SRC/tests/data/onnx_unsupported.prototxt" within 1 -F batch_size=12 -F learning_rate=0.01 -F random_seed=6
BAD=$MODEL
wait_status "$BAD" Done 300 || echo "FAIL the network with LRN WITHIN_CHANNEL did not train: $BODY"
http GET "/models/$BAD/download.onnx"
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "norm_within (LRN)" && printf %s "$BODY" | grep -q WITHIN_CHANNEL' \
    "download.onnx of a network with LRN WITHIN_CHANNEL is 400 naming the layer"
http GET "/models/$BAD/json"
"$WORKER" export-onnx --model "$(jv 'd["directory"]')" --out "$T/bad.onnx" 2>"$T/bad.err"
RC=$?
check '[ $RC = 1 ] && grep -q "norm_within (LRN)" "$T/bad.err" && [ ! -e "$T/bad.onnx" ]' \
    "export-onnx refuses it naming the layer and writes nothing ($(cat "$T/bad.err"))"
curl -s -o "$T/bad.zip" "$B/models/$BAD/download.zip"
check '[ "$(py "import zipfile; z = zipfile.ZipFile(sys.argv[1]); n = z.namelist(); print(\"model.onnx\" not in n and any(x.endswith(\".cdw\") for x in n) and b\"norm_within (LRN)\" in z.read(\"model.onnx.txt\"))" "$T/bad.zip")" = True ]' \
    "its .zip is made without model.onnx and model.onnx.txt says why"
http GET "/models/$ML/download.onnnx"
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q ".onnx"' "an unknown extension's 400 lists .onnx"
finish
