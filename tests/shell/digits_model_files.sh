#!/usr/bin/env bash
# DIGITS's model files against the real server and worker, on generated 16x16 gray images
# in 3 classes: the solver.prototxt the trainer writes into the job folder (named by the
# model JSON's "solver file", with the accumulation and the iterations DIGITS computes,
# the text of the download's solver but for the network's name), the network file the
# JSON names as "model file", the manual upload of a pretrained model whose weights are
# told by their bytes (cdigits weights under any name are taken; Caffe's .caffemodel of
# another network and other files are refused, saying why, in an archive too), and
# DIGITS's POST /models/visualize-network answered as a page (escaped, with the engine's
# errors) while the /json route stays JSON.
. "$(dirname "$0")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"
. "$(dirname "$0")/server_tiny_net.bash"

form_net Small 8 "" yes >"$T/net.prototxt"

shapes_dataset 16 12 11
http GET "/datasets/$DS/json"
NTRAIN=$(jv 'next(t["entries"] for t in d["CreateDbTasks"] if t["name"] == "Create DB (train)")')
check '[ "$NTRAIN" -gt 0 ] 2>/dev/null' "the dataset's training split has images ($NTRAIN)"

# ---- 1. solver.prototxt in the job folder ------------------------------------------------------------
BATCH=4 ACC=2 EPOCHS=3
post_model "$T/net.prototxt" acc "$EPOCHS" -F batch_size=$BATCH -F batch_accumulation=$ACC -F random_seed=5 \
    -F learning_rate=0.01 -F lr_policy=step -F lr_step_size=50 -F lr_step_gamma=0.5
M=$MODEL
wait_status "$M" Done 300
http GET "/models/$M/json"
STATUS=$(jv 'd["status"]')
check '[ "$STATUS" = Done ]' "the model with batch accumulation trains to Done"
SOLVER=$(jv '__import__("os").path.join(d["directory"], d["solver file"])')
check '[ -f "$SOLVER" ] && [ "$(basename "$SOLVER")" = solver.prototxt ]' \
    "the model JSON's \"solver file\" is solver.prototxt in the job folder ($SOLVER)"
PER_EPOCH=$(((NTRAIN + BATCH * ACC - 1) / (BATCH * ACC)))
MAX_ITER=$((PER_EPOCH * EPOCHS))
check 'grep -qx "iter_size: $ACC" "$SOLVER" && grep -qx "max_iter: $MAX_ITER" "$SOLVER"' \
    "the solver has iter_size $ACC and max_iter $MAX_ITER (ceil($NTRAIN / ($BATCH x $ACC)) x $EPOCHS, as DIGITS computes)"
check 'grep -qx "stepsize: $(((MAX_ITER + 1) / 2))" "$SOLVER" && grep -qx "base_lr: 0.01" "$SOLVER" &&
       grep -qx "lr_policy: \"step\"" "$SOLVER" && grep -qx "net: \"network.prototxt\"" "$SOLVER"' \
    "the solver has the rate, its policy in iterations and the job folder's network"
check '[ "$(grep -c "^snapshot: " "$SOLVER")" = 1 ] && grep -qx "solver_mode: CPU" "$SOLVER"' \
    "the solver has the snapshot interval and the CPU mode"
curl -s -o "$T/dl.tar" "$B/models/$M/download.tar"
mkdir -p "$T/dl" && tar -xf "$T/dl.tar" -C "$T/dl"
check 'diff <(grep -v "^#\|^net: \|^solver_mode: " "$SOLVER") <(grep -v "^#\|^net: \|^solver_mode: " "$T/dl/solver.prototxt") >/dev/null' \
    "the job folder's solver is the download's, but for the network's name and the mode it trained in"

# ---- 2. the model file the JSON names is in the job folder ---------------------------------------------
http GET "/models/$M/json"
MODEL_FILE=$(jv 'd["model file"]')
SNAP=$(jv 'd["snapshot file"]')
curl -s -o "$T/model_file" -w '%{http_code}' "$B/files/$M/$MODEL_FILE" >"$T/code"
check '[ "$(cat "$T/code")" = 200 ] && cmp -s "$T/model_file" "$T/net.prototxt"' \
    "the JSON's \"model file\" ($MODEL_FILE) is the network as given, in the job folder"

# ---- 3. the manual upload tells weights by their bytes ------------------------------------------------
curl -s -o "$T/weights.caffemodel" "$B/files/$M/$SNAP"
curl -s -o "$T/labels.txt" "$B/files/$DS/labels.txt"
upload() { # WEIGHTS_FILE NAME [curl args]
    local w=$1 name=$2
    shift 2
    http POST /pretrained_models/new -H 'Accept: application/json' -F "weights_file=@$w" \
        -F "model_def_file=@$T/model_file;filename=original.prototxt" -F "labels_file=@$T/labels.txt" \
        -F framework=caffe -F image_type=1 -F resize_mode=squash -F width=16 -F height=16 -F job_name="$name" "$@"
}
upload "$T/weights.caffemodel" renamed
P=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ -n "$P" ] && [ "$P" != "<KeyError>" ]' \
    "cdigits weights uploaded as weights.caffemodel make a pretrained model"
http POST "/models/images/classification/classify_one/json" -F job_id="$P" \
    -F "image_file=@$(find "$T/images" -name '*.png' | sort | head -1)"
NPRED=$(jv 'len(d["predictions"])')
check '[ "$CODE" = 200 ] && [ "$NPRED" = 3 ]' "the uploaded model classifies"
http POST /pretrained_models/new -F "weights_file=@$T/weights.caffemodel" \
    -F "model_def_file=@$T/model_file;filename=original.prototxt" -F "labels_file=@$T/labels.txt" \
    -F framework=caffe -F image_type=1 -F resize_mode=squash -F width=16 -F height=16 -F job_name=form
check '[ "$CODE" = 302 ]' "DIGITS's form post of the same is 302"

# A Caffe NetParameter as Caffe writes a .caffemodel: name, then layers with their blobs.
python3 - "$T/real.caffemodel" "$T/truncated.caffemodel" <<'EOF'
import random, struct, sys
def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])
def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
rng = random.Random()
net = field(1, b"LeNet")
for name in (b"conv1", b"ip1"):
    n = rng.randint(4, 40)
    blob = field(7, field(1, varint(n))) + field(5, struct.pack("<%df" % n, *[rng.uniform(-1, 1) for _ in range(n)]))
    net += field(100, field(1, name) + field(2, b"Convolution") + field(7, blob))
open(sys.argv[1], "wb").write(net)
open(sys.argv[2], "wb").write(net[:-3])
EOF
upload "$T/real.caffemodel" caffe
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "layer ip1 has 1 parameter blobs in the file but 2 in the network"' \
    "a real Caffe .caffemodel of another network is 400 naming the layer that does not fit (tests/shell/caffemodel.sh: one that fits)"
cp "$T/real.caffemodel" "$T/named.cdw"
upload "$T/named.cdw" caffe-as-cdw
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "layer ip1 has 1 parameter blobs in the file"' \
    "Caffe weights named .cdw are read as Caffe's too: the bytes decide"
for bad in truncated.caffemodel labels.txt; do
    upload "$T/$bad" "bad-$bad"
    check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "$bad is not a weights file cdigits reads" &&
           printf %s "$BODY" | grep -q "CDW1"' "$bad as weights is 400: not cdigits weights, which begin with CDW1"
done
{ printf 'CDW1'; head -c 64 /dev/urandom; } >"$T/damaged.caffemodel"
upload "$T/damaged.caffemodel" damaged
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "does not load"' \
    "a file that only begins like cdigits weights is refused when the model does not load"
http GET /pretrained_models/json
NAMES=$(jv 'sorted(m["name"] for m in d["pretrained_models"])')
check '[ "$NAMES" = "[\"form\", \"renamed\"]" ]' \
    "only the two good uploads became pretrained models"

# Caffe weights in an archive under a .cdw name reach the worker, whose reader checks them.
python3 - "$T/dl" "$T/real.caffemodel" "$T/caffe.tar" <<'EOF'
import json, os, sys, tarfile
src, caffe, out = sys.argv[1:]
info = json.load(open(os.path.join(src, "info.json")))
with tarfile.open(out, "w:") as t:
    for name in os.listdir(src):
        if name.endswith(".cdw"):
            t.add(caffe, arcname=name)
        elif name != "info.json":
            t.add(os.path.join(src, name), arcname=name)
    path = os.path.join(os.path.dirname(out), "info.json")
    json.dump(info, open(path, "w"))
    t.add(path, arcname="info.json")
EOF
http POST /pretrained_models/upload_archive -F "archive=@$T/caffe.tar"
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "does not load" && printf %s "$BODY" | grep -q "layer ip1 has 1 parameter blobs"' \
    "Caffe weights in an archive reach the worker's reader, which names the layer that does not fit"

# ---- 4. DIGITS's network view is a page ---------------------------------------------------------------
http POST "/models/visualize-network?framework=caffe" -F "custom_network=<$T/net.prototxt" -F dataset="$DS" \
    -D "$T/headers"
check '[ "$CODE" = 200 ] && grep -qi "^content-type: text/html" "$T/headers"' \
    "POST /models/visualize-network?framework=caffe with custom_network alone is 200 HTML"
check 'grep -q "<section class=\"stage\" id=\"stage-train\">" "$T/body" && grep -q "id=\"stage-deploy\"" "$T/body" &&
       grep -q "<td>ip1</td><td>InnerProduct</td><td>scaled</td><td>ip1 <span class=\"shape\">" "$T/body" &&
       grep -q "<td>data_input</td><td>Input</td><td></td><td>data <span class=\"shape\">1x1x16x16</span>" "$T/body" &&
       grep -q "<td>loss</td><td>SoftmaxWithLoss</td><td>ip2<br>label</td><td>loss <span class=\"shape\">scalar</span>" "$T/body"' \
    "the page lists each stage's layers with bottoms, tops and the engine's shapes"
http POST "/models/visualize-network/json" -F method=custom -F "custom_network=<$T/net.prototxt" -F dataset="$DS"
PARAMS=$(jv 'd["stages"]["train"]["params"]')
LAYERS=$(jv 'len(d["stages"]["train"]["layers"])')
STAGES=$(jv 'sorted(d["stages"])')
check '[ "$STAGES" = "[\"deploy\", \"train\", \"val\"]" ] && [ "$PARAMS" -gt 0 ]' \
    "the /json route still answers the JSON ($LAYERS layers, $PARAMS learnable values in train)"
http POST "/models/visualize-network?framework=caffe" -F "custom_network=<$T/net.prototxt" -F dataset="$DS"
check 'grep -q "<h2>train: $LAYERS layers, $PARAMS learnable values</h2>" "$T/body"' \
    "the page gives the same layers and learnable values"
http POST "/models/visualize-network?framework=caffe" -H 'Accept: application/json' -F "custom_network=<$T/net.prototxt"
HAS_TRAIN=$(jv '"train" in d["stages"]')
check '[ "$CODE" = 200 ] && [ "$HAS_TRAIN" = true ]' \
    "the page's route answers JSON when the request asks for it"

sed 's/name: "ip1"/name: "<script>alert(\x27x\x27)<\/script>\&"/' "$T/net.prototxt" >"$T/hostile.prototxt"
http POST "/models/visualize-network?framework=caffe" -F "custom_network=<$T/hostile.prototxt"
check '[ "$CODE" = 200 ] && ! grep -q "<script>" "$T/body" &&
       grep -qF "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;" "$T/body"' \
    "a layer's name is escaped on the page"
printf 'layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { kernel_sise: 3 } }\n' \
    >"$T/broken.prototxt"
http POST "/models/visualize-network?framework=caffe" -F "custom_network=<$T/broken.prototxt"
check '[ "$CODE" = 200 ] && grep -q "<ul class=\"network-errors\">" "$T/body" &&
       grep -q "<li>custom_network:1:.*kernel_sise" "$T/body" && ! grep -q "stage-train" "$T/body"' \
    "a network the engine refuses is a page of its errors, naming custom_network:LINE:COL"
http POST "/models/visualize-network?framework=torch" -F "custom_network=<$T/net.prototxt"
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "framework must be caffe"' \
    "another framework is 400, saying cdigits runs Caffe networks"

finish
