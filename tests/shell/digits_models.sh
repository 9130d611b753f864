#!/usr/bin/env bash
# DIGITS 6.1's model behaviours against the real server and worker, on generated 16x16
# gray images in 3 classes: POST /models/customize (a standard network, a model job with
# and without a snapshot), a custom network without Data layers (DIGITS adds them), a
# custom network that does not parse (400 naming custom_network:LINE:COL, checked once
# for a sweep) and one with an unknown layer type (created, then Error, its message
# logged once), a deploy stage with more outputs than classes (the extra ones dropped),
# DIGITS's keys in the model JSON, and sweeps written as bracketed lists.
. "$(dirname "$0")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"

# net_without_data NAME OUTPUTS: a custom network that reads "data" and "label" without
# saying where they come from; OUTPUTS > 0 fixes the last layer's num_output.
net_without_data() {
    local ip2='inner_product_param { weight_filler { type: "xavier" } }'
    [ "$2" -gt 0 ] && ip2="inner_product_param { num_output: $2 weight_filler { type: \"xavier\" } }"
    cat <<EOF
name: "$1"
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "ip1" type: "InnerProduct" bottom: "scaled" top: "ip1"
        inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" $ip2 }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "softmax" type: "Softmax" bottom: "ip2" top: "softmax" include { stage: "deploy" } }
EOF
}

shapes_dataset 16 12 11
LABELS=$(curl -s "$B/files/$DS/labels.txt" | tr '\n' ' ')

# ---- 1. customize -----------------------------------------------------------------------------
http POST "/models/customize?network=lenet&framework=caffe"
check '[ "$CODE" = 200 ] && [ "$(jv "\"LeNet\" in d[\"network\"] and list(d) == [\"network\"]")" = true ]' \
    "customize?network=lenet answers {network} with the LeNet text"
check '[ "$(jv "d[\"network\"] == open(\"$SRC/models/lenet.prototxt\").read()")" = true ]' \
    "customize?network=lenet gives models/lenet.prototxt as it is"
http POST "/models/customize"
check '[ "$CODE" = 400 ] && printf %s "$BODY" | grep -q "network not provided"' "customize without network is 400"
http POST "/models/customize?network=no-such-net"
check '[ "$CODE" = 404 ]' "customize of neither a standard network nor a job is 404"

# ---- 2. a custom network without Data layers trains ----------------------------------------------
net_without_data NoData 0 >"$T/nodata.prototxt"
post_model "$T/nodata.prototxt" nodata 2 -F batch_size=4 -F learning_rate=0.01 -F random_seed=3
ND=$MODEL
check '[ "$CODE" = 200 ] && [ -n "$ND" ]' "a custom network without Data layers is accepted"
wait_status "$ND" Done 300
check '[ "$(jv "d[\"status\"]")" = Done ]' "the network without Data layers trains to Done (DIGITS adds data and label)"
http POST /models/visualize-network/json -F method=custom -F custom_network="<$T/nodata.prototxt" -F dataset="$DS"
check '[ "$(jv "[d[\"stages\"][s][\"layers\"][0][\"type\"] for s in (\"train\", \"val\", \"deploy\")]")" = "[\"Data\", \"Data\", \"Input\"]" ]' \
    "the network view shows the added Data layers and the deploy input"
check '[ "$(jv "d[\"stages\"][\"deploy\"][\"layers\"][0][\"tops\"][0][\"shape\"]")" = "[1, 1, 16, 16]" ]' \
    "the deploy input has the dataset's image shape"

# customize of the model job: its network, with the snapshot of an epoch or none
http POST "/models/customize?network=$ND" -F snapshot_epoch=2
SNAP=$(jv 'd["snapshot"]')
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"network\"]")" = "$(cat "$T/nodata.prototxt")" ] && [ -f "$SNAP" ]' \
    "customize?network=<job> with snapshot_epoch=2 gives its network and the snapshot's path"
http POST "/models/customize?network=$ND" -F snapshot_epoch=0
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"snapshot\"]")" = null ]' "customize with snapshot_epoch=0 names no snapshot"
http POST "/models/customize?network=$ND"
check '[ "$CODE" = 200 ] && [ "$(jv "sorted(d)")" = "[\"network\", \"snapshot\"]" ]' \
    "customize of a job answers {network, snapshot}"

# ---- 5. DIGITS's keys in the model JSON ---------------------------------------------------------
http GET "/models/$ND/json"
check '[ "$(jv "d[\"job id\"] == d[\"id\"] and d[\"image dimensions\"] == [16, 16, 1] and d[\"image resize mode\"] == \"squash\"")" = true ]' \
    "the model JSON has job id, image dimensions [H, W, C] and image resize mode"
check '[ "$(jv "all(isinstance(d[k], str) and d[k] for k in (\"creation time\", \"labels file\", \"mean file\", \"network file\", \"deploy file\", \"solver file\", \"train_val file\", \"snapshot file\", \"digits version\"))")" = true ]' \
    "the model JSON has DIGITS's file keys, creation time and digits version"
check '[ "$(jv "d[\"snapshot file\"] == d[\"snapshot_files\"][-1][\"file\"] and d[\"labels file\"] == \"labels.txt\"")" = true ]' \
    "snapshot file is the newest snapshot and labels file is labels.txt"
check '[ "$(jv "__import__(\"re\").match(r\"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$\", d[\"creation time\"]) is not None")" = true ]' \
    "creation time is written as DIGITS writes it"
check '[ "$(jv "d[\"id\"] and d[\"snapshots\"] == [1, 2]")" = true ]' "the model's own keys stay beside DIGITS's"

# ---- 3. a network that does not parse is refused at creation ------------------------------------
printf 'name: "bad"\nlayer { name: "ip" type: "InnerProduct" bottom: "data" top: "ip"\n  inner_product_param { num_outptu: 3 } }\n' >"$T/bad.prototxt"
before=$(curl -s "$B/index/json" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["models"]))')
post_model "$T/bad.prototxt" bad 1
check '[ "$CODE" = 400 ] && [ "$(jv "d[\"errors\"][\"custom_network\"][0].startswith(\"custom_network:3:25: \")")" = true ]' \
    "a custom network with an unknown field is 400 naming custom_network:3:25"
check 'printf %s "$BODY" | grep -q num_outptu' "the message names the unknown field"
printf 'layer { name: "ip" type: "InnerProduct"\n' >"$T/unclosed.prototxt"
post_model "$T/unclosed.prototxt" unclosed 1
check '[ "$CODE" = 400 ] && [ "$(jv "d[\"errors\"][\"custom_network\"][0].startswith(\"custom_network:\")")" = true ]' \
    "a custom network that does not parse is 400 naming custom_network:LINE:COL"
post_model "$T/bad.prototxt" badsweep 1 -F 'learning_rate=[0.01, 0.02]' -F 'batch_size=[4,8]'
check '[ "$CODE" = 400 ] && [ "$(jv "len(d[\"errors\"][\"custom_network\"])")" = 1 ]' \
    "a sweep with a bad network is refused with its error once"
after=$(curl -s "$B/index/json" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["models"]))')
check '[ "$before" = "$after" ]' "no job is made for a refused network"

# an unknown layer type passes creation as in DIGITS, and the job's Error names it once in its log
net_without_data Bogus 0 | sed 's/type: "ReLU"/type: "BogusCode"/' >"$T/bogus.prototxt"
post_model "$T/bogus.prototxt" bogus 1 -F batch_size=4
BG=$MODEL
check '[ "$CODE" = 200 ] && [ -n "$BG" ]' "a network with an unknown layer type is created (DIGITS checks types in training)"
wait_status "$BG" Error 300
check '[ "$(jv "d[\"status\"]")" = Error ] && printf %s "$BODY" | grep -q BogusCode' "the job ends in Error naming BogusCode"
http GET "/jobs/$BG/log/json"
check '[ "$(jv "sum(1 for l in d[\"log\"] if \"BogusCode\" in json.dumps(l))")" = 1 ]' \
    "the error is logged once"

# ---- 4. a deploy stage with more outputs than classes -------------------------------------------
net_without_data Wide5 5 >"$T/wide5.prototxt"
post_model "$T/wide5.prototxt" wide5 1 -F batch_size=4 -F learning_rate=0.01 -F random_seed=3
W5=$MODEL
wait_status "$W5" Done 300
check '[ "$(jv "d[\"status\"]")" = Done ]' "a network of 5 outputs trains on 3 classes"
IMG=$(find "$T/images" -name '*.png' | head -1)
http POST /models/images/classification/classify_one/json -F job_id="$W5" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' \
    "classify_one answers the 3 classes of the dataset, the outputs past them dropped"
check '[ "$(jv "all(p[0] in \"$LABELS\".split() for p in d[\"predictions\"])")" = true ]' \
    "every prediction is a label of the dataset"

# ---- 6. sweeps as bracketed lists --------------------------------------------------------------
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/nodata.prototxt" \
    -F train_epochs=1 -F model_name=sweep -F 'learning_rate=[0.01, 0.02]' -F 'batch_size=[4,8]'
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"jobs\"])")" = 4 ]' "learning_rate=[0.01, 0.02] and batch_size=[4,8] make 4 jobs"
check '[ "$(jv "sorted(j[\"name\"] for j in d[\"jobs\"])")" = "[\"sweep learning_rate:0.01 batch_size:4\", \"sweep learning_rate:0.01 batch_size:8\", \"sweep learning_rate:0.02 batch_size:4\", \"sweep learning_rate:0.02 batch_size:8\"]" ]' \
    "each job of the sweep is named by its learning rate and batch size"
for id in $(jv '" ".join(j["id"] for j in d["jobs"])'); do
    http POST "/models/$id/abort"
done
http POST /models/visualize-lr -F lr_policy=fixed -F 'learning_rate=[0.01, 0.02]'
check '[ "$CODE" = 200 ] && [ "$(jv "[c[1] for c in d[\"data\"][\"columns\"]]")" = "[0.01, 0.02]" ]' \
    "visualize-lr reads a bracketed learning_rate list too"

finish
