#!/usr/bin/python3
"""The PyTorch peer of cdigits's training benchmark (bench/bench_train.sh).

--net lenet: the same network as models/lenet.prototxt (Power scale 0.0125, conv 20x5x5,
max pool 2, conv 50x5x5, max pool 2, ip 500, ReLU, ip 10, softmax cross entropy) on
Fashion-MNIST's 28x28 images.
--net alexnet: the same network as models/alexnet.prototxt (Caffe's AlexNet: groups of 2
in conv2, conv4 and conv5, LRN after conv1 and conv2, dropout 0.5 in fc6 and fc7) on
Fashion-MNIST's images scaled to 256x256 and made color, as the benchmark's cdigits
dataset holds them, with a random 227x227 crop and a random mirror per image.

Same solver as cdigits's default (SGD, lr 0.01, momentum 0.9, weight decay 1e-4,
Caffe's lr_mult 2 on biases), same batch, and the same data work per step: uint8 images
held in memory, a shuffled order, mean-image subtraction, a float batch (timed as the
data wait: it runs in the step, so it is part of the images/s, as cdigits's loader
threads are of cdigits's). Run with Debian's python3-torch:

    /usr/bin/python3 bench/torch_train.py --net lenet --batch 64 --iters 300 [--threads T] [--mkldnn on|off]

--threads sets torch.set_num_threads; --mkldnn off sets torch.backends.mkldnn.enabled =
False (convolutions then run as im2col + OpenBLAS gemm; OpenBLAS's own threads are set
by OPENBLAS_NUM_THREADS, which has to be in the environment before torch loads).

--eval times inference instead (bench/bench_classify.sh): net.eval() under
torch.no_grad(), the softmax of batches of the held images, each batch less the mean,
no solver.

Prints one JSON line: {"images_per_sec": ..., "data_wait": ..., ...}.
"""
import argparse
import gzip
import json
import os
import struct
import time

import torch
import torch.nn.functional as F

from torch_nets import AlexNet, LeNet


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


# name: (network, image side in the dataset, crop side or None)
NETS = {"lenet": (LeNet, 28, None), "alexnet": (AlexNet, 256, 227)}


def color_scaled(images, side):
    """(n, 1, h, w) uint8 -> (n, 3, side, side) uint8, bilinear, in chunks."""
    out = torch.empty((len(images), 3, side, side), dtype=torch.uint8)
    for i in range(0, len(images), 256):
        x = F.interpolate(images[i:i + 256].float(), size=(side, side), mode="bilinear", align_corners=False)
        out[i:i + 256] = x.round().clamp(0, 255).to(torch.uint8).expand(-1, 3, -1, -1)
    return out


def batch_of(images, mean, idx, crop):
    """The float batch of images[idx] less the mean, cropped at random and mirrored at
    random per image when crop is set."""
    x = images[idx].float() - mean
    if crop is None:
        return x
    side = x.shape[-1]
    offs = torch.randint(0, side - crop + 1, (len(idx), 2))
    flips = torch.rand(len(idx)) < 0.5
    out = torch.empty((len(idx), x.shape[1], crop, crop))
    for i in range(len(idx)):
        oy, ox = int(offs[i, 0]), int(offs[i, 1])
        c = x[i, :, oy:oy + crop, ox:ox + crop]
        out[i] = c.flip(-1) if flips[i] else c
    return out


def evaluate(a, net, images, mean, crop):
    """Inference over the held images in order, batch after batch (the last one short),
    after a.warmup batches not counted; a crop is the center one."""
    net.eval()
    off = (images.shape[-1] - crop) // 2 if crop else 0

    def batch(i):
        x = images[i:i + a.batch].float() - mean
        return x[:, :, off:off + crop, off:off + crop] if crop else x

    with torch.no_grad():
        for _ in range(a.warmup):
            F.softmax(net(batch(0)), 1)
        t0, done = time.perf_counter(), 0
        for i in range(0, len(images), a.batch):
            x = batch(i)
            F.softmax(net(x), 1)
            done += len(x)
        dt = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "net": a.net, "eval": True,
                      "threads": torch.get_num_threads(), "mkldnn": torch.backends.mkldnn.enabled,
                      "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                      "batch": a.batch, "iters": 0, "images": done, "images_per_sec": done / dt,
                      "data_wait": 0.0}))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", choices=sorted(NETS), default="lenet")
    ap.add_argument("--images", default="/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
    ap.add_argument("--labels", default="/usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz")
    ap.add_argument("--limit", type=int, default=45000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--mkldnn", choices=("on", "off"), default="on")
    ap.add_argument("--eval", action="store_true", help="time inference (forward and softmax) instead")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.backends.mkldnn.enabled = a.mkldnn == "on"
    torch.manual_seed(1)
    cls, side, crop = NETS[a.net]
    images = load_idx(a.images, a.limit)
    labels = load_idx(a.labels, a.limit)
    if images.shape[-1] != side:
        images = color_scaled(images, side)
    mean = images.float().mean(0)
    net = cls(10)
    weights = [p for n, p in net.named_parameters() if n.endswith("weight")]
    biases = [p for n, p in net.named_parameters() if n.endswith("bias")]
    opt = torch.optim.SGD([{"params": weights}, {"params": biases, "lr": 0.02}],
                          lr=0.01, momentum=0.9, weight_decay=1e-4)
    if a.eval:
        return evaluate(a, net, images, mean, crop)
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
        x = batch_of(images, mean, idx, crop)
        y = labels[idx]
        waited += time.perf_counter() - s
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__, "net": a.net, "threads": torch.get_num_threads(),
                      "mkldnn": torch.backends.mkldnn.enabled,
                      "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
                      "batch": a.batch, "iters": a.iters, "images_per_sec": a.iters * a.batch / dt,
                      "data_wait": waited / dt, "final_loss": float(loss)}))


if __name__ == "__main__":
    main()
