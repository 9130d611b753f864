# Networks small enough to train in a second on the CPU under the sanitizers, in
# DIGITS's one-file form (train, val and deploy stages; the last InnerProduct gets the
# number of classes). Sourced by the server tests.

# small_net NAME WIDTH TRAIN_BATCH VAL_BATCH: one hidden InnerProduct of WIDTH outputs.
small_net() {
    cat <<EOF2
name: "$1"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" } data_param { batch_size: $3 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" } data_param { batch_size: $4 } }
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer {
  name: "ip1" type: "InnerProduct" bottom: "scaled" top: "ip1"
  inner_product_param { num_output: $2 weight_filler { type: "xavier" } bias_filler { type: "constant" } }
}
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer {
  name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { weight_filler { type: "xavier" } bias_filler { type: "constant" } }
}
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "softmax" type: "Softmax" bottom: "ip2" top: "softmax" include { stage: "deploy" } }
EOF2
}

tiny_net() { small_net Tiny 16 4 4; }

# One wide layer: each step costs milliseconds, so a model trains for seconds (and a
# test can act on it mid-run) while printing few metric lines.
wide_net() { # TRAIN_BATCH VAL_BATCH
    small_net Wide 1024 "$1" "$2"
}

# form_net NAME HIDDEN OUTPUTS ACCURACY: a custom network for a model form (the form gives the
# data layers): a hidden InnerProduct of HIDDEN outputs and its ReLU, an InnerProduct of
# OUTPUTS (empty: the number of classes), the val Accuracy layer when ACCURACY is yes, the
# loss and the deploy Softmax.
form_net() {
    local outputs="" accuracy=""
    [ -z "$3" ] || outputs="num_output: $3 "
    [ "$4" != yes ] || accuracy='layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy" include { stage: "val" } }'
    cat <<EOF2
name: "$1"
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "ip1" type: "InnerProduct" bottom: "scaled" top: "ip1"
        inner_product_param { num_output: $2 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" inner_product_param { ${outputs}weight_filler { type: "xavier" } } }
$accuracy
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "softmax" type: "Softmax" bottom: "ip2" top: "softmax" include { stage: "deploy" } }
EOF2
}
