#!/usr/bin/env bash
# Caffe's weights (docs/formats.md) against the real server and worker: a LeNet-like
# deploy.prototxt with fresh random weights, written by tests/shell/caffemodel.py as
# cdigits weights and as .caffemodel files of both Caffe layer formats (current layer
# with BlobShape, legacy layers with num/channels/height/width) from proto/caffe.proto.
# Checked: DIGITS's manual upload (POST /pretrained_models/new) takes each, and so does
# an archive (POST /pretrained_models/upload_archive) with a .caffemodel in it; an image
# classified with the imported weights gives exactly the answer of the same weights as
# cdigits weights, through the server and through the worker's classify (every
# probability printed); a layer the file lacks keeps its fillers' values (the upload is
# taken, the answer differs); a blob of another shape is a 400 naming the layer and both
# shapes, in either format; and a model started from a .caffemodel trains.
# Needs /usr/bin/python3 with python3-protobuf and protoc-c (scripts/setup.sh --test).
. "$(dirname "$0")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import google.protobuf' 2>/dev/null; then
    skip_test "python3-protobuf is missing (/usr/bin/python3 cannot import google.protobuf): scripts/setup.sh --test installs it"
fi
command -v protoc-c >/dev/null || skip_test "protoc-c is missing (protobuf-c-compiler): scripts/setup.sh installs it"

if ! protoc-c --descriptor_set_out="$T/caffe.desc" -I"$SRC/proto" "$SRC/proto/caffe.proto" >"$T/protoc.log" 2>&1 ||
    ! "$py" "$SRC/tests/shell/caffemodel.py" "$T/caffe.desc" "$T" "$RANDOM$RANDOM" >"$T/gen.log" 2>&1; then
    cat "$T/protoc.log" "$T/gen.log"
    echo "FAIL: the test's weights cannot be written"
    exit 1
fi
cat >"$T/deploy.prototxt" <<'NET'
name: "LeNetLike"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 16 dim: 16 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 4 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 6 kernel_size: 3 weight_filler { type: "xavier" } } }
layer { name: "ip1" type: "InnerProduct" bottom: "conv2" top: "ip1"
  inner_product_param { num_output: 8 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { num_output: 3 weight_filler { type: "xavier" } } }
layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }
NET

# the server with a dataset of 16x16 gray images in 3 classes (for the fine-tuning)
shapes_dataset 16 6 "$RANDOM"
http GET "/datasets/$DS/json"
IMAGE=$(find "$T/images" -name '*.png' | sort | head -1)
printf '%s\n' $(ls "$T/images" | sort) >"$T/labels.txt"

upload() { # WEIGHTS NAME
    http POST /pretrained_models/new -H 'Accept: application/json' -F "weights_file=@$1" \
        -F "model_def_file=@$T/deploy.prototxt;filename=deploy.prototxt" -F "labels_file=@$T/labels.txt" \
        -F framework=caffe -F image_type=1 -F resize_mode=squash -F width=16 -F height=16 -F job_name="$2"
}
classify() { # JOB: $PRED (the server's predictions) and $PROBS (the worker's output)
    http POST /models/images/classification/classify_one/json -F job_id="$1" -F "image_file=@$IMAGE"
    PRED=$(jv 'd["predictions"]')
    http GET "/models/$1/json"
    PROBS=$("$WORKER" classify --model "$(jv 'd["directory"]')" "$IMAGE" 2>"$T/classify-$1.err")
}

declare -A JOB PRED_OF PROBS_OF
for w in weights.cdw current.caffemodel legacy.caffemodel no_conv2.caffemodel; do
    upload "$T/$w" "${w%%.*}"
    JOB[$w]=$(jv 'd["id"]')
    check '[ "$CODE" = 200 ] && [ -n "${JOB[$w]}" ] && [ "${JOB[$w]}" != "<KeyError>" ]' \
        "the upload of $w with deploy.prototxt makes a pretrained model"
    classify "${JOB[$w]}"
    PRED_OF[$w]=$PRED
    PROBS_OF[$w]=$PROBS
    check '[ "$CODE" = 200 ] && [ -n "$PROBS" ] && [ "$(printf %s "$PRED" | cut -c1-2)" = "[[" ]' \
        "the model of $w classifies (server and worker)"
done
for w in current.caffemodel legacy.caffemodel; do
    check '[ -n "${PROBS_OF[$w]}" ] && [ "${PRED_OF[$w]}" = "${PRED_OF[weights.cdw]}" ] &&
           [ "${PROBS_OF[$w]}" = "${PROBS_OF[weights.cdw]}" ]' \
        "$w answers exactly as the same weights as cdigits weights (${PRED_OF[$w]})"
done
check '[ -n "${PROBS_OF[no_conv2.caffemodel]}" ] && [ "${PROBS_OF[no_conv2.caffemodel]}" != "${PROBS_OF[weights.cdw]}" ]' \
    "a .caffemodel without conv2 is taken and conv2 keeps its fillers' values (another answer)"

upload "$T/bad_shape.caffemodel" bad-shape
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "layer ip1, blob 0 has shape (8, 151) in the file but (8, 150) in the network"' \
    "a current-format blob of another shape is 400 naming the layer and both shapes"
upload "$T/bad_legacy.caffemodel" bad-legacy
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "layer conv2, blob 0 has shape (6, 4, 5, 5) (num, channels, height, width) in the file but (6, 4, 3, 3) in the network"' \
    "a legacy-format blob of another shape is 400 naming the layer and both shapes"
for w in current no_conv2; do
    LOG=$(cat "$T"/classify-"${JOB[$w.caffemodel]}".err)
    check 'printf %s "$LOG" | grep -q "2 layers of the file are not in the network and were ignored"' \
        "the worker says that the 2 layers of $w.caffemodel the network lacks were ignored"
done
check 'printf %s "$LOG" | grep -q "1 layers of the network are not in the file and keep their initial values (conv2)"' \
    "the worker says that conv2 is not in no_conv2.caffemodel and keeps its initial values"

http GET /pretrained_models/json
NAMES=$(jv 'sorted(m["name"] for m in d["pretrained_models"])')
check '[ "$NAMES" = "[\"current\", \"legacy\", \"no_conv2\", \"weights\"]" ]' \
    "only the good uploads became pretrained models ($NAMES)"

# an archive of deploy.prototxt, labels.txt and a .caffemodel (no .cdw) is a pretrained model too
mkdir -p "$T/archive"
cp "$T/deploy.prototxt" "$T/labels.txt" "$T/archive/"
cp "$T/legacy.caffemodel" "$T/archive/weights.caffemodel"
tar -cf "$T/caffe.tar" -C "$T/archive" deploy.prototxt labels.txt weights.caffemodel
http POST /pretrained_models/upload_archive -F "archive=@$T/caffe.tar" -F job_name=archived \
    -F image_width=16 -F image_height=16 -F image_type=1
ARCHIVED=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ -n "$ARCHIVED" ] && [ "$ARCHIVED" != "<KeyError>" ]' \
    "an archive whose weights are a .caffemodel makes a pretrained model"
classify "$ARCHIVED"
check '[ -n "$PROBS" ] && [ "$PROBS" = "${PROBS_OF[weights.cdw]}" ] && [ "$PRED" = "${PRED_OF[weights.cdw]}" ]' \
    "the archived .caffemodel answers as the same weights as cdigits weights"

# fine-tuning: a custom network of the same layers starts from a .caffemodel
sed -e '/type: "Input"/d' -e 's/layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" }//' \
    "$T/deploy.prototxt" >"$T/train.prototxt"
cat >>"$T/train.prototxt" <<'NET'
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "prob" type: "Softmax" bottom: "ip2" top: "prob" include { stage: "deploy" } }
NET
cp "$T/legacy.caffemodel" "$T/images/start.caffemodel"
post_model "$T/train.prototxt" tuned 1 -F custom_network_snapshot="$T/images/start.caffemodel" -F batch_size=4
wait_status "$MODEL" Done 300
http GET "/models/$MODEL/json"
STATUS=$(jv 'd["status"]')
TUNED_DIR=$(jv 'd["directory"]')
check '[ "$STATUS" = Done ] && grep -rqs "took 8 parameter tensors from $T/images/start.caffemodel" "$TUNED_DIR"' \
    "a model whose pretrained weights are a .caffemodel trains from its 8 tensors ($STATUS)"
cp "$T/bad_shape.caffemodel" "$T/images/bad.caffemodel"
post_model "$T/train.prototxt" tuned-bad 1 -F custom_network_snapshot="$T/images/bad.caffemodel" -F batch_size=4
wait_status "$MODEL" Error 300
http GET "/models/$MODEL/json"
STATUS=$(jv 'd["status"]')
BAD_DIR=$(jv 'd["directory"]')
check '[ "$STATUS" = Error ] && grep -rqs "layer ip1, blob 0 has shape (8, 151) in the file but (8, 150)" "$BAD_DIR"' \
    "pretrained weights of another shape stop the training, naming the layer and both shapes ($STATUS)"

finish
