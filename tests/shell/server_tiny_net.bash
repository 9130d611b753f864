# A network small enough to train in a second on the CPU under the sanitizers, in
# DIGITS's one-file form (train, val and deploy stages; the last InnerProduct gets the
# number of classes). Sourced by the server tests.
tiny_net() {
    cat <<'EOF'
name: "Tiny"
layer { name: "train-data" type: "Data" top: "data" top: "label" include { stage: "train" } data_param { batch_size: 4 } }
layer { name: "val-data" type: "Data" top: "data" top: "label" include { stage: "val" } data_param { batch_size: 4 } }
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer {
  name: "ip1" type: "InnerProduct" bottom: "scaled" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } bias_filler { type: "constant" } }
}
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer {
  name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { weight_filler { type: "xavier" } bias_filler { type: "constant" } }
}
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy" include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
layer { name: "softmax" type: "Softmax" bottom: "ip2" top: "softmax" include { stage: "deploy" } }
EOF
}
