#!/usr/bin/env bash
# check-net on every standard network (shapes and parameter counts from the published
# architectures) and on broken files (non-zero exit, a message with file:line:col).
. "$(dirname "$0")/check_lib.bash" || exit 1
src="${CDIGITS_SOURCE_DIR:?}"

# LeNet for 28x28 gray, 10 classes: 431,080 parameters (Caffe's LeNet)
"$worker" check-net "$src/models/lenet.prototxt" --input 1x28x28 --classes 10 >"$tmp/lenet" 2>&1 \
  && ok || bad "lenet exit status"
expect lenet "$tmp/lenet" '^parameters: 431080$'
expect lenet "$tmp/lenet" 'conv1 +Convolution +conv1 64x20x24x24'
expect lenet "$tmp/lenet" 'pool2 +Pooling +pool2 64x50x4x4'
expect lenet "$tmp/lenet" 'ip2 +InnerProduct +ip2 64x10'
expect lenet "$tmp/lenet" 'data_input +Input +data 1x1x28x28'
# the intended input comes from the file when --input is not given
"$worker" check-net "$src/models/lenet.prototxt" >"$tmp/lenet2" 2>&1 && ok || bad "lenet default input"
expect lenet-default "$tmp/lenet2" '^parameters: 431080$'

# AlexNet, 227x227 crops of 256x256, 1000 classes: 60,965,224 parameters (two groups)
"$worker" check-net "$src/models/alexnet.prototxt" --input 3x256x256 --classes 1000 >"$tmp/alex" 2>&1 \
  && ok || bad "alexnet exit status"
expect alexnet "$tmp/alex" '^parameters: 60965224$'
expect alexnet "$tmp/alex" 'conv1 +Convolution +conv1 128x96x55x55'
expect alexnet "$tmp/alex" 'pool5 +Pooling +pool5 128x256x6x6'
expect alexnet "$tmp/alex" 'fc8 +InnerProduct +fc8 1x1000'

# GoogLeNet, 224x224 crops, 1000 classes: 6,998,552 parameters without the auxiliary
# classifiers (Caffe's bvlc_googlenet deploy), plus 3,188,840 (loss1: conv 512x128+128,
# fc 2048x1024+1024, classifier 1024x1000+1000) and 3,190,888 (loss2: conv 528x128+128,
# same fc and classifier) in the train stage = 13,378,280
"$worker" check-net "$src/models/googlenet.prototxt" --input 3x256x256 --classes 1000 >"$tmp/goog" 2>&1 \
  && ok || bad "googlenet exit status"
expect googlenet "$tmp/goog" 'inception_5b/output +Concat +inception_5b/output 32x1024x7x7'
expect googlenet "$tmp/goog" 'pool5/7x7_s1 +Pooling +pool5/7x7_s1 1x1024x1x1'
expect googlenet "$tmp/goog" 'loss1/classifier +InnerProduct +loss1/classifier 32x1000'
expect googlenet "$tmp/goog" '^parameters: 13378280$'

# broken files: each must fail with a message that says where and what
broken() { # NAME PATTERN  (prototxt on stdin)
  cat >"$tmp/$1.prototxt"
  if "$worker" check-net "$tmp/$1.prototxt" --input 1x28x28 >"$tmp/$1.out" 2>&1; then
    bad "$1: exit status 0 for a broken network"
  else
    ok
  fi
  expect "$1" "$tmp/$1.out" "$2"
}
broken unknown_field 'unknown_field.prototxt:3:59: unknown field "kernal_size"' <<'P'
name: "x"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolution" convolution_param { kernal_size: 3 num_output: 2 } bottom: "data" top: "c" }
P
broken unknown_type 'unknown layer type "Convolutional"' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolutional" bottom: "data" top: "c" }
P
broken missing_bottom 'bottom "nothere" is not produced' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "r" type: "ReLU" bottom: "nothere" top: "r" }
P
broken big_kernel 'kernel_size 9x9 is larger than its 8x8 input' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 2 kernel_size: 9 } }
P
broken no_loss 'the train stage has no loss layer' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 2 kernel_size: 3 } }
P
broken shape_mismatch 'Eltwise needs equal shapes' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c" convolution_param { num_output: 1 kernel_size: 3 } }
layer { name: "e" type: "Eltwise" bottom: "data" bottom: "c" top: "e" }
P
broken cycle 'bottom "b" is not produced by any earlier layer' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "a" type: "Eltwise" bottom: "data" bottom: "b" top: "a" }
layer { name: "b" type: "ReLU" bottom: "a" top: "b" }
P
broken syntax 'syntax.prototxt:2:1: unexpected end of file' <<'P'
layer { name: "data" type: "Input"
P
broken wrong_param 'pooling_param does not apply to Convolution layers' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }
layer { name: "c" type: "Convolution" bottom: "data" top: "c" pooling_param { pool: MAX } }
P
broken shared_weights 'shared_weights.prototxt: line 3: layer b \(InnerProduct\): shares parameter "w" with layer a' <<'P'
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 4 } } }
layer { name: "a" type: "InnerProduct" bottom: "data" top: "a" param { name: "w" } inner_product_param { num_output: 4 bias_term: false } }
layer { name: "b" type: "InnerProduct" bottom: "a" top: "b" param { name: "w" } inner_product_param { num_output: 3 bias_term: false } }
P
"$worker" check-net "$tmp/does-not-exist.prototxt" >"$tmp/missing.out" 2>&1 && bad "missing file: exit 0" || ok
expect missing_file "$tmp/missing.out" 'does-not-exist.prototxt'

check_finish check_net
