#!/usr/bin/python3
"""The PyTorch peer of cdigits's LeNet training benchmark (bench/bench_train.sh).

Same network as models/lenet.prototxt (Power scale 0.0125, conv 20x5x5, max pool 2,
conv 50x5x5, max pool 2, ip 500, ReLU, ip 10, softmax cross entropy), same solver
(SGD, lr 0.01, momentum 0.9, weight decay 1e-4, Caffe's lr_mult 2 on biases), same
batch, and the same data work per step: uint8 images held in memory, a shuffled order,
mean-image subtraction, a float batch (timed as the data wait: it runs in the step, so
it is part of the images/s, as cdigits's loader threads are of cdigits's). Run with
Debian's python3-torch:

    /usr/bin/python3 bench/torch_lenet.py --batch 64 --iters 300 [--threads T] [--mkldnn on|off]

--threads sets torch.set_num_threads; --mkldnn off sets torch.backends.mkldnn.enabled =
False (convolutions then run as im2col + OpenBLAS gemm; OpenBLAS's own threads are set
by OPENBLAS_NUM_THREADS, which has to be in the environment before torch loads).

Prints one JSON line: {"images_per_sec": ..., "data_wait": ..., ...}.
"""
import argparse
import gzip
import json
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def load_idx(path, limit):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 0x803:
        rows, cols = struct.unpack(">II", data[8:16])
        t = torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).view(n, 1, rows, cols)
    else:
        t = torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).view(n).long()
    return t[:limit]


class LeNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 20, 5)
        self.conv2 = nn.Conv2d(20, 50, 5)
        self.ip1 = nn.Linear(800, 500)
        self.ip2 = nn.Linear(500, classes)

    def forward(self, x):
        x = x * 0.0125
        x = F.max_pool2d(self.conv1(x), 2, 2)
        x = F.max_pool2d(self.conv2(x), 2, 2)
        x = F.relu(self.ip1(x.flatten(1)))
        return self.ip2(x)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", default="/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
    ap.add_argument("--labels", default="/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz")
    ap.add_argument("--limit", type=int, default=45000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mkldnn", choices=("on", "off"), default="on")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.mkldnn.enabled = a.mkldnn == "on"
    torch.manual_seed(1)
    images = load_idx(a.images, a.limit)
    labels = load_idx(a.labels, a.limit)
    mean = images.float().mean(0)
    net = LeNet(10)
    weights = [p for n, p in net.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in net.named_parameters() if n.endswith("bias")]
    opt = torch.optim.SGD([{"params": weights}, {"params": biases, "lr": 0.02}],
                          lr=0.01, momentum=0.9, weight_decay=1e-4)
    order = torch.randperm(len(images))
    pos, waited = 0, 0.0
    t0 = None
    for it in range(a.warmup + a.iters):
        if it == a.warmup:
            t0, waited = time.perf_counter(), 0.0
        s = time.perf_counter()
        if pos + a.batch > len(order):
            order, pos = torch.randperm(len(images)), 0
        idx = order[pos:pos + a.batch]
        pos += a.batch
        x = images[idx].float() - mean
        y = labels[idx]
        waited += time.perf_counter() - s
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "threads": torch.get_num_threads(),
                      "mkldnn": torch.backends.mkldnn.enabled,
                      "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                      "batch": a.batch, "iters": a.iters, "images_per_sec": a.iters * a.batch / dt,
                      "data_wait": waited / dt, "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
