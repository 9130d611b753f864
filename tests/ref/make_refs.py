#!/usr/bin/python3
"""Reference numbers from PyTorch for tests/unit/test_torch_ref.c.

Run by hand from the repository root when a reference changes (CI reads only the
committed files and needs no PyTorch):

    /usr/bin/python3 tests/ref/make_refs.py

/usr/bin/python3 is Debian's Python with python3-torch and python3-numpy. It writes
tests/data/ref/lenet.ref and tests/data/ref/smallnet.ref in the format of
tests/ref/README.md. The output is deterministic: the same script writes the same
bytes.

Every computation runs in float64 from float32-exact inputs and parameters, so the
files hold the exact answer rounded once to float32; the C test measures its float32
arithmetic against that.
"""

import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "ref")
MAGIC = b"CDREF01\n"

# Entries denser than this are stored as a sample of their elements.
DENSE_MAX = 8192
SAMPLE = 2048

M64 = (1 << 64) - 1


# ---- cdigits's counter-based generator (include/cdigits/backend.h) ----------------

def mix64(z):
    """cd_mix64 on numpy uint64 arrays (wrapping arithmetic)."""
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rand_uniform(seed, counter, n):
    """cd_rand_uniform(seed, counter, i) for i in [0, n), as float32 in [0, 1)."""
    with np.errstate(over="ignore"):
        idx = np.arange(n, dtype=np.uint64)
        z = mix64(np.uint64(seed) ^ mix64(np.uint64(counter) ^ mix64(idx)))
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def generated(seed, counter, shape, scale):
    """(u - 0.5) * scale with scale a power of two: exact in float32, so C and Python
    produce the same bits."""
    assert scale == 2.0 ** round(math.log2(scale))
    u = rand_uniform(seed, counter, int(np.prod(shape)))
    return ((u - np.float32(0.5)) * np.float32(scale)).reshape(shape)


# ---- the file format ---------------------------------------------------------------

class RefFile:
    """Entries in order; see tests/ref/README.md."""

    def __init__(self):
        self.entries = []

    def _head(self, kind, name, shape):
        nb = name.encode()
        shape = tuple(int(d) for d in shape)
        return struct.pack("<BBH", kind, len(shape), len(nb)) + nb + struct.pack(
            "<%dI" % len(shape), *shape)

    def array(self, name, value, sample_seed=0):
        """Dense float32, or a fixed sample of the elements when large."""
        a = np.asarray(value, dtype=np.float64)
        flat = a.astype(np.float32).reshape(-1)
        if flat.size <= DENSE_MAX:
            self.entries.append(self._head(ord("f"), name, a.shape) + flat.astype("<f4").tobytes())
            return
        rng = np.random.default_rng(sample_seed + len(self.entries))
        idx = np.sort(rng.choice(flat.size, SAMPLE, replace=False)).astype("<u4")
        self.entries.append(self._head(ord("s"), name, a.shape) + struct.pack("<I", SAMPLE) +
                            idx.tobytes() + flat[idx].astype("<f4").tobytes())

    def generated(self, name, seed, counter, scale, value):
        """A tensor the reader regenerates; the checksum (exact sum) guards it."""
        checksum = math.fsum(float(v) for v in value.reshape(-1))
        self.entries.append(self._head(ord("g"), name, value.shape) +
                            struct.pack("<QQfd", seed, counter, scale, checksum))

    def write(self, path):
        data = MAGIC + struct.pack("<I", len(self.entries)) + b"".join(self.entries)
        with open(path, "wb") as f:
            f.write(data)
        print("%s: %d entries, %d bytes" % (os.path.relpath(path, ROOT), len(self.entries), len(data)))


def t64(a):
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64)


def leaf(a):
    return t64(a).requires_grad_(True)


def caffe_pooled(h, k, s, p):
    """Caffe's pooled size of a side h: ceil rounding, less the last window where it
    would start inside the padding."""
    o = math.ceil((h + 2 * p - k) / s) + 1
    return o - 1 if p and (o - 1) * s >= h + p else o


def min_max_gap(x, k, s, p):
    """Smallest gap between the two largest values of any MAX pooling window (padding
    excluded, Caffe's and PyTorch's rule alike), in float64."""
    n, c, h, w = x.shape
    xp = F.pad(x, (p, p, p, p), value=-math.inf)
    oh, ow = caffe_pooled(h, k, s, p), caffe_pooled(w, k, s, p)
    gap = math.inf
    for oy in range(oh):
        for ox in range(ow):
            win = xp[:, :, oy * s:oy * s + k, ox * s:ox * s + k].reshape(n, c, -1)
            top = torch.topk(win, 2, dim=2).values
            gap = min(gap, float((top[..., 0] - top[..., 1]).min()))
    return gap


def caffe_ave_pool(x, k, s, p):
    """AVE pooling written from Caffe's pooling_layer.cpp: windows clipped to the padded
    image for the divisor, then to the image for the sum; ceil rounding."""
    n, c, h, w = x.shape
    oh, ow = caffe_pooled(h, k, s, p), caffe_pooled(w, k, s, p)
    y = torch.zeros(n, c, oh, ow, dtype=x.dtype)
    for oy in range(oh):
        for ox in range(ow):
            hs, ws = oy * s - p, ox * s - p
            he, we = min(hs + k, h + p), min(ws + k, w + p)
            size = (he - hs) * (we - ws)
            hs, ws, he, we = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            y[:, :, oy, ox] = x[:, :, hs:he, ws:we].sum(dim=(2, 3)) / size
    return y


# ---- (a) LeNet ------------------------------------------------------------------------

# LeNet's parameters are 431,080 floats (1.7 MB): far more than a test file should
# hold. They come from cd_rand_uniform instead; the file keeps the recipe and a
# checksum. Scales are powers of two near Xavier's range for each fan-in.
LENET_PARAMS = [  # name, shape, scale
    ("conv1/0", (20, 1, 5, 5), 0.5),
    ("conv1/1", (20,), 0.25),
    ("conv2/0", (50, 20, 5, 5), 0.125),
    ("conv2/1", (50,), 0.25),
    ("ip1/0", (500, 800), 0.125),
    ("ip1/1", (500,), 0.25),
    ("ip2/0", (10, 500), 0.125),
    ("ip2/1", (10,), 0.25),
]


def lenet_forward(data, label, p):
    """models/lenet.prototxt, stage train. Returns (blobs, loss)."""
    b = {}
    b["scaled"] = data * 0.0125                      # Power { scale: 0.0125 }
    b["conv1"] = F.conv2d(b["scaled"], p["conv1/0"], p["conv1/1"])
    b["pool1"] = F.max_pool2d(b["conv1"], 2, 2)
    b["conv2"] = F.conv2d(b["pool1"], p["conv2/0"], p["conv2/1"])
    b["pool2"] = F.max_pool2d(b["conv2"], 2, 2)
    pre = F.linear(b["pool2"].reshape(data.shape[0], -1), p["ip1/0"], p["ip1/1"])
    b["ip1"] = F.relu(pre)                           # relu1 works in place on ip1
    b["ip2"] = F.linear(b["ip1"], p["ip2/0"], p["ip2/1"])
    loss = F.cross_entropy(b["ip2"], label)          # SoftmaxWithLoss, mean over the batch
    return b, loss, pre


def make_lenet():
    seed = 20240601
    for attempt in range(100):
        params = {name: generated(seed, i, shape, scale)
                  for i, (name, shape, scale) in enumerate(LENET_PARAMS)}
        rng = np.random.default_rng(seed)
        data = rng.integers(0, 256, size=(4, 1, 28, 28)).astype(np.float32)
        label = rng.integers(0, 10, size=(4,))
        with torch.no_grad():
            b, loss, pre = lenet_forward(t64(data), torch.tensor(label), {k: t64(v) for k, v in params.items()})
            # keep away from ties and kinks that float32 rounding (~1e-6 here) could flip
            margin = min(min_max_gap(b["conv1"], 2, 2, 0), min_max_gap(b["conv2"], 2, 2, 0),
                         float(pre.abs().min()))
        if margin > 1e-4:
            break
        seed += 1
    else:
        sys.exit("lenet: no seed without near ties")
    print("lenet: seed %d, closest tie or kink %.2g, loss %.6f" % (seed, margin, float(loss)))

    p = {k: leaf(v) for k, v in params.items()}
    x = leaf(data)
    b, loss, _ = lenet_forward(x, torch.tensor(label), p)
    loss.backward()

    f = RefFile()
    f.array("input/data", data)
    f.array("input/label", label.astype(np.float32))
    for i, (name, shape, scale) in enumerate(LENET_PARAMS):
        f.generated("param/" + name, seed, i, scale, params[name])
    for name in ["scaled", "conv1", "pool1", "conv2", "pool2", "ip1", "ip2"]:
        f.array("blob/" + name, b[name].detach().numpy())
    f.array("loss", loss.detach().numpy())
    for name, _, _ in LENET_PARAMS:
        f.array("grad/param/" + name, p[name].grad.numpy())
    f.array("grad/input/data", x.grad.numpy())
    f.write(os.path.join(OUT, "lenet.ref"))


# ---- (b) the small net of tests/data/ref/smallnet.prototxt ----------------------------

SMALL_PARAMS = [  # name, shape, scale of the uniform draw
    ("conv1/0", (8, 3, 3, 3), 0.5),
    ("conv1/1", (8,), 0.5),
    ("scale1/0", (8,), 1.0),      # gamma, drawn in [0.5, 1.5] below
    ("scale1/1", (8,), 0.5),      # beta
    ("conv2a/0", (6, 4, 3, 3), 0.4),
    ("conv2a/1", (6,), 0.5),
    ("conv2b/0", (6, 8, 1, 1), 0.6),
    ("conv2b/1", (6,), 0.5),
    ("ip/0", (5, 792), 0.1),
    ("ip/1", (5,), 0.5),
]


def small_forward(data, label, p):
    b = {}
    b["conv1"] = F.conv2d(data, p["conv1/0"], p["conv1/1"], padding=1)
    # Caffe's BatchNorm in training: batch mean and biased variance, eps 1e-5, no affine
    b["bn1"] = F.batch_norm(b["conv1"], None, None, training=True, eps=1e-5)
    b["scale1"] = b["bn1"] * p["scale1/0"][None, :, None, None] + p["scale1/1"][None, :, None, None]
    # LocalResponseNorm's alpha is divided by size, as Caffe's is
    b["lrn1"] = F.local_response_norm(b["scale1"], 5, alpha=1.0, beta=0.75, k=2.0)
    b["conv2a"] = F.conv2d(b["lrn1"], p["conv2a/0"], p["conv2a/1"], padding=1, groups=2)
    b["conv2b"] = F.conv2d(b["lrn1"], p["conv2b/0"], p["conv2b/1"])
    b["sum"] = 0.5 * b["conv2a"] - 1.5 * b["conv2b"]
    b["cat"] = torch.cat([b["sum"], b["conv2a"]], dim=1)
    b["pool1"] = F.avg_pool2d(b["cat"], 2, 2)
    # Caffe's AVE divisor (window clipped to the padded image) is PyTorch's with
    # count_include_pad=True; ceil_mode=True drops a last window that would start in
    # the padding, as Caffe does. Checked against caffe_ave_pool below.
    b["pool2"] = F.avg_pool2d(b["cat"], 3, 2, padding=1, ceil_mode=True, count_include_pad=True)
    b["pool3"] = F.max_pool2d(b["cat"], 3, 2, padding=1, ceil_mode=True)
    n = data.shape[0]
    b["flat1"] = b["pool1"].reshape(n, -1)
    b["flat2"] = b["pool2"].reshape(n, -1)
    b["flat3"] = b["pool3"].reshape(n, -1)
    b["feat"] = torch.cat([b["flat1"], b["flat2"], b["flat3"]], dim=1)
    b["ip"] = F.linear(b["feat"], p["ip/0"], p["ip/1"])
    loss = F.cross_entropy(b["ip"], label)
    return b, loss


def make_smallnet():
    seed = 7
    for attempt in range(100):
        rng = np.random.default_rng(seed)
        params = {}
        for name, shape, scale in SMALL_PARAMS:
            v = rng.uniform(-scale / 2, scale / 2, size=shape)
            if name == "scale1/0":
                v = 1.0 + v
            params[name] = v.astype(np.float32)
        data = rng.standard_normal((4, 3, 8, 8)).astype(np.float32)
        label = rng.integers(0, 5, size=(4,))
        with torch.no_grad():
            b, loss = small_forward(t64(data), torch.tensor(label), {k: t64(v) for k, v in params.items()})
            margin = min_max_gap(b["cat"], 3, 2, 1)
        if margin > 1e-4:
            break
        seed += 1
    else:
        sys.exit("smallnet: no seed without near ties")
    with torch.no_grad():
        ref = caffe_ave_pool(b["cat"], 3, 2, 1)
        if ref.shape != b["pool2"].shape or not torch.allclose(ref, b["pool2"], rtol=0, atol=1e-12):
            sys.exit("smallnet: PyTorch's avg_pool2d(ceil_mode, count_include_pad) differs from "
                     "Caffe's divisor rule")
    print("smallnet: seed %d, closest MAX tie %.2g, loss %.6f; avg_pool2d(ceil, pad) matches "
          "Caffe's divisors" % (seed, margin, float(loss)))

    p = {k: leaf(v) for k, v in params.items()}
    x = leaf(data)
    b, loss = small_forward(x, torch.tensor(label), p)
    loss.backward()

    # Caffe's BatchNorm also updates its stored sums in training: from zero, after one
    # forward, blob 0 = batch mean, blob 1 = unbiased variance (m/(m-1) times the
    # biased one), blob 2 = 1 (the weight of the sums).
    with torch.no_grad():
        c1 = b["conv1"]
        m = c1.shape[0] * c1.shape[2] * c1.shape[3]
        mean = c1.mean(dim=(0, 2, 3))
        var = c1.var(dim=(0, 2, 3), unbiased=False) * m / (m - 1)

    f = RefFile()
    f.array("input/data", data)
    f.array("input/label", label.astype(np.float32))
    for name, _, _ in SMALL_PARAMS:
        f.array("param/" + name, params[name])
    for name in ["conv1", "bn1", "scale1", "lrn1", "conv2a", "conv2b", "sum", "cat", "pool1",
                 "pool2", "pool3", "flat1", "flat2", "flat3", "feat", "ip"]:
        f.array("blob/" + name, b[name].detach().numpy())
    f.array("loss", loss.detach().numpy())
    f.array("param_after/bn1/0", mean.numpy())
    f.array("param_after/bn1/1", var.numpy())
    f.array("param_after/bn1/2", np.ones(1))
    for name, _, _ in SMALL_PARAMS:
        f.array("grad/param/" + name, p[name].grad.numpy())
    f.array("grad/input/data", x.grad.numpy())
    f.write(os.path.join(OUT, "smallnet.ref"))


if __name__ == "__main__":
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    make_lenet()
    make_smallnet()
