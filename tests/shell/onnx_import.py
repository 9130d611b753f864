"""Models for tests/shell/onnx_import.sh: a LeNet in torch (conv 20 5x5, max pool, conv 50
5x5, max pool, linear 500, relu, linear 10, softmax) with a fixed seed, exported with
torch.onnx.export (opset 13) as lenet.onnx; a few 28x28 gray PNGs and torch's
probabilities for them (probs.json, {file: [10 probabilities]}); and upsample.onnx, a
graph with an Upsample node named up1, which cdigits does not import.

usage: onnx_import.py OUT_DIR SEED"""
import json
import os
import struct
import sys
import zlib

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

out, seed = sys.argv[1], int(sys.argv[2])
torch.manual_seed(seed)
rng = np.random.default_rng(seed)


class LeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 20, 5)
        self.conv2 = torch.nn.Conv2d(20, 50, 5)
        self.ip1 = torch.nn.Linear(800, 500)
        self.ip2 = torch.nn.Linear(500, 10)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(self.conv1(x), 2)
        x = torch.nn.functional.max_pool2d(self.conv2(x), 2)
        x = x.reshape(-1, 800)
        x = torch.relu(self.ip1(x))
        return torch.softmax(self.ip2(x), dim=1)


net = LeNet().eval()
with torch.no_grad():
    net.conv1.weight /= 255.0  # the pixels cdigits feeds are 0..255
    net.ip2.weight *= 4.0      # probabilities away from uniform
torch.onnx.export(net, torch.zeros(1, 1, 28, 28), os.path.join(out, "lenet.onnx"), opset_version=13,
                  input_names=["image"], output_names=["prob"])


def png(path, pixels):
    h, w = pixels.shape
    raw = b"".join(b"\0" + bytes(pixels[y].tolist()) for y in range(h))

    def chunk(kind, data):
        c = kind + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


probs = {}
os.makedirs(os.path.join(out, "test"), exist_ok=True)
for i in range(4):
    img = rng.integers(0, 256, size=(28, 28), dtype=np.uint8)
    name = "img%d.png" % i
    png(os.path.join(out, "test", name), img)
    with torch.no_grad():
        p = net(torch.tensor(img, dtype=torch.float32).reshape(1, 1, 28, 28))[0]
    probs[name] = [float(v) for v in p]
json.dump(probs, open(os.path.join(out, "probs.json"), "w"))

x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 8, 8])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 16, 16])
scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
node = helper.make_node("Upsample", ["x", "scales"], ["y"], name="up1", mode="nearest")
graph = helper.make_graph([node], "up", [x], [y], initializer=[scales])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)]), os.path.join(out, "upsample.onnx"))
