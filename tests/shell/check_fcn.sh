#!/usr/bin/env bash
# check-net on a small FCN-like network (conv, pool, x2 upsampling by a Deconvolution
# with the bilinear filler, Crop back to the input): shapes and parameter count; and
# an unknown crop_param field, which must fail with file:line:col; and the FCNs of
# models/ with a segmentation dataset's labels.
. "$(dirname "$0")/check_lib.bash" || exit 1

head='name: "fcn_small"
layer { name: "data" type: "Input" top: "data" input_param { shape { dim: 1 dim: 3 dim: 32 dim: 32 } } }
layer { name: "conv1" type: "Convolution" bottom: "data" top: "conv1"
  convolution_param { num_output: 8 kernel_size: 3 pad: 1 } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1"
  pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "score" type: "Convolution" bottom: "pool1" top: "score"
  convolution_param { num_output: 2 kernel_size: 1 } }
layer { name: "upscore" type: "Deconvolution" bottom: "score" top: "upscore" param { lr_mult: 0 }
  convolution_param { num_output: 2 kernel_size: 4 stride: 2 group: 2 bias_term: false
    weight_filler { type: "bilinear" } } }'
tail='layer { name: "label" type: "Input" top: "label" input_param { shape { dim: 1 dim: 1 dim: 32 dim: 32 } } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "out" bottom: "label" top: "loss" }'

printf '%s\n%s\n%s\n' "$head" \
  'layer { name: "crop" type: "Crop" bottom: "upscore" bottom: "data" top: "out" crop_param { axis: 2 offset: 1 } }' \
  "$tail" >"$tmp/fcn.prototxt"
"$worker" check-net "$tmp/fcn.prototxt" >"$tmp/fcn" 2>&1 && ok || bad "fcn exit status"
# 16x16 -> 2*(16-1) + 4 = 34, cropped at offset 1 back to 32x32
expect fcn "$tmp/fcn" 'upscore +Deconvolution +upscore 1x2x34x34'
expect fcn "$tmp/fcn" 'crop +Crop +out 1x2x32x32'
# conv1 3*8*9+8 = 224, score 8*2+2 = 18, upscore 2*1*4*4 = 32
expect fcn "$tmp/fcn" '^parameters: 274$'

printf '%s\n%s\n%s\n' "$head" \
  'layer { name: "crop" type: "Crop" bottom: "upscore" bottom: "data" top: "out" crop_param { axis: 2 ofset: 1 } }' \
  "$tail" >"$tmp/typo.prototxt"
if "$worker" check-net "$tmp/typo.prototxt" >"$tmp/typo" 2>&1; then
  bad "crop_param typo: exit status 0"
else
  ok
fi
expect typo "$tmp/typo" 'typo.prototxt:13:[0-9]+: unknown field "ofset"'

# the networks in models/: DIGITS's FCN-AlexNet on a 500x500 image (as its example
# trains PASCAL VOC) and the small FCN the training tests use, with generic labels
models="$(dirname "$0")/../../models"
"$worker" check-net "$models/fcn_alexnet.prototxt" --input 3x500x500 --classes 21 --label 1x500x500 \
    >"$tmp/alexnet" 2>&1 && ok || bad "fcn_alexnet exit status"
# 500 + 2*100 padding: score_fr 16x16, up 32 times (16-1)*32 + 63 = 543, cropped at 18
expect fcn_alexnet "$tmp/alexnet" 'score_fr +Convolution +score_fr 1x21x16x16'
expect fcn_alexnet "$tmp/alexnet" 'upscore +Deconvolution +upscore 1x21x543x543'
expect fcn_alexnet "$tmp/alexnet" 'score +Crop +score 1x21x500x500'
# conv1..5 2334080, fc6 37752832, fc7 16781312, score_fr 86037, upscore 21*63*63 = 83349
expect fcn_alexnet "$tmp/alexnet" '^parameters: 57037610$'
"$worker" check-net "$models/fcn_small.prototxt" --input 3x32x32 --classes 3 --label 1x32x32 \
    >"$tmp/small" 2>&1 && ok || bad "fcn_small exit status"
expect fcn_small "$tmp/small" 'crop +Crop +crop 8x3x32x32'

check_finish check_fcn
