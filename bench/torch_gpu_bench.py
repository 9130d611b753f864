#!/usr/bin/env python3
"""cdigits against PyTorch on one GPU: the same network, batch and precision, side by side.

Run by bench/gpu_bench.sh (which finds the worker and the right python); by hand:

    python3 bench/torch_gpu_bench.py run --worker build/cdigits-worker --work /tmp/gb \
        [--torch-python python3] [--cases lenet:64:fp32,alexnet:128:bf16] [--scale 1.0] \
        [--device cpu]    # a smoke run of the whole path on the CPU, not a benchmark
        [--deadline 230]  # seconds: cases that would end past it are not started
    python3 bench/torch_gpu_bench.py scaling --worker ... --work ... --gpus 8 \
        [--case alexnet:128:bf16]    # data-parallel efficiency (bench/scaling_bench.sh)

For each case it trains with cdigits (`cdigits-worker train`, the real worker, on a
dataset made by `cdigits-worker dataset` from generated images) and then with PyTorch
eager (a subprocess: `torch_gpu_bench.py torch ...`), and prints images per second,
GPU utilization during the timed part and the share of time the step waited for data,
for each, and their ratio. Cases:
  LeNet   28x28 gray (a synthetic digit set written as IDX files, imported with
          `import-idx`), batch 64 and 512, mean image subtracted, Power 0.0125;
  AlexNet 3x256x256 color PNGs (generated here with zlib), random 227x227 crops and
          mirroring, mean image subtracted, batch 128;
each in fp32 (no TF32 on either side), fp16 (PyTorch: autocast and GradScaler; cdigits:
fp16 operands in convolution and gemm, loss scaling) and bf16.

Both sides run the whole step with their data pipelines: cdigits reads its database
with loader threads and crops on the GPU; PyTorch gathers batches from uint8 tensors in
page-locked memory, copies them without blocking and crops on the GPU. Both choose
convolution algorithms by measuring (cuDNN benchmark mode), skip the first iterations,
and use SGD with momentum 0.9, weight decay 5e-4 and Caffe's doubled bias rate.

GPU utilization comes from NVML (pynvml, sampled every 100 ms) or, without it, from
`nvidia-smi --query-gpu=utilization.gpu`. The last line is a one-line summary.
Standard library only, except for the `torch` subcommand.
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import threading
import time
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# the full matrix, in the order it runs: every network in fp32 first, so that a run cut
# short by its deadline still has the baseline of each (the table is printed in network
# order); --cases picks some
DEFAULT_CASES = ("lenet:64:fp32,alexnet:128:fp32,lenet:512:fp32,"
                 "lenet:64:bf16,alexnet:128:bf16,lenet:512:bf16,"
                 "lenet:64:fp16,alexnet:128:fp16,lenet:512:fp16")
# seconds a case takes on both sides before one has run (later ones use what the
# network's last case took); only for the deadline
FIRST_GUESS = {"lenet": 25.0, "alexnet": 45.0}
NET_ORDER = {"lenet": 0, "alexnet": 1}
PREC_ORDER = {"fp32": 0, "fp16": 1, "bf16": 2}
# iterations per case at --scale 1, and how many of them are warm-up (not timed)
ITERS = {("lenet", 64): (400, 80), ("lenet", 512): (150, 30), ("alexnet", 128): (60, 15)}
LR = {"lenet": 0.01, "alexnet": 0.001}
# seconds one side of one case may take: a process that hangs costs its case, not the
# stage (and the table)
SIDE_LIMIT = 120

LENET_IMAGES = 6000
ALEX_CLASSES, ALEX_PER_CLASS, ALEX_SIDE, ALEX_CROP = 4, 80, 256, 227


# ---- generated data ---------------------------------------------------------------------

def lenet_templates():
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    from lenet_compare import TEMPLATES  # the 7x7 stroke digits of the LeNet comparison
    return TEMPLATES


def write_lenet_idx(images_path, labels_path, count, seed=1):
    """count 28x28 digits: a class template at 4x, shifted by up to 3 pixels, with noise
    in the low 6 bits (big-integer XOR, so it is fast in pure Python)."""
    templates = lenet_templates()
    side = 28
    base = {}
    for c in range(10):
        for dy in range(-3, 4):
            for dx in range(-3, 4):
                img = bytearray(side * side)
                for y in range(side):
                    ty = (y - dy) // 4
                    row = templates[c][ty] if 0 <= ty < 7 else None
                    for x in range(side):
                        tx = (x - dx) // 4
                        on = row is not None and 0 <= tx < 7 and row[tx] == "#"
                        img[y * side + x] = 200 if on else 20
                base[c, dy, dx] = int.from_bytes(img, "big")
    rng = random.Random(seed)
    n = side * side
    mask = int.from_bytes(b"\x3f" * n, "big")
    out = bytearray()
    labels = bytearray()
    for i in range(count):
        c = i % 10
        t = base[c, rng.randint(-3, 3), rng.randint(-3, 3)]
        out += (t ^ (int.from_bytes(rng.randbytes(n), "big") & mask)).to_bytes(n, "big")
        labels.append(c)
    with open(images_path, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, side, side))
        f.write(out)
    with open(labels_path, "wb") as f:
        f.write(struct.pack(">II", 0x801, count))
        f.write(labels)


def png_rgb(path, side, rgb):
    """An 8-bit RGB PNG of side x side from interleaved rows (filter 0, zlib level 1)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff))
    stride = side * 3
    raw = b"".join(b"\x00" + rgb[y * stride:(y + 1) * stride] for y in range(side))
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(raw, 1)))
        f.write(chunk(b"IEND", b""))


def write_alexnet_images(folder, raw_path, classes, per_class, side, seed=1):
    """classes x per_class color images: a smooth pattern per class, rolled by a random
    number of rows and columns-worth of bytes, with noise in the low 5 bits. Written as
    PNGs in folder/<class>/ (for cdigits) and as one planar uint8 file with the labels
    after it (for PyTorch)."""
    rng = random.Random(seed)
    n = side * side * 3
    bases = []
    for c in range(classes):
        img = bytearray(n)
        for y in range(side):
            for x in range(side):
                o = (y * side + x) * 3
                img[o] = (x * (c + 1) + y) & 255
                img[o + 1] = (y * (c + 2) + 3 * x) & 255
                img[o + 2] = ((x ^ y) * (c + 3)) & 255
        bases.append(bytes(img))
    mask = int.from_bytes(b"\x1f" * n, "big")
    planar = bytearray()
    labels = bytearray()
    for c in range(classes):
        os.makedirs(os.path.join(folder, "class%d" % c), exist_ok=True)
        for i in range(per_class):
            roll = rng.randrange(side) * side * 3
            b = bases[c][roll:] + bases[c][:roll]
            b = (int.from_bytes(b, "big") ^ (int.from_bytes(rng.randbytes(n), "big") & mask)).to_bytes(n, "big")
            png_rgb(os.path.join(folder, "class%d" % c, "%04d.png" % i), side, b)
            planar += b[0::3] + b[1::3] + b[2::3]
            labels.append(c)
    with open(raw_path, "wb") as f:
        f.write(struct.pack("<IIII", classes * per_class, 3, side, side))
        f.write(planar)
        f.write(labels)


def run_quiet(cmd, what):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.stderr.write(p.stdout[-2000:] + p.stderr[-2000:])
        raise SystemExit("torch_gpu_bench: %s failed (exit %d)" % (what, p.returncode))


def dataset_once(worker, work, net, fill, config):
    """The cdigits dataset of work/net/dataset, made once and reused: fill(d) writes the
    source images (a folder per class in d/folders) and says what it wrote; config is
    the dataset.json keys of the net (channels, size). Returns the dataset folder."""
    d = os.path.join(work, net)
    ds = os.path.join(d, "dataset")
    if not os.path.exists(os.path.join(ds, "stats.json")):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(ds)
        t0 = time.time()
        what = fill(d)
        conf = {"folder_train": os.path.join(d, "folders"), "pct_val": 0, "pct_test": 0,
                "resize_mode": "squash", "encoding": "none", "seed": 1}
        conf.update(config)
        with open(os.path.join(ds, "dataset.json"), "w") as f:
            json.dump(conf, f)
        run_quiet([worker, "dataset", ds], "dataset (%s)" % net)
        print("  %s data: %s in %.1f s" % (net, what, time.time() - t0))
    return ds


def make_datasets(worker, work, nets):
    """The datasets the cases need, made once in work/ and reused."""
    out = {}
    if "lenet" in nets:
        d = os.path.join(work, "lenet")

        def fill_lenet(d):
            write_lenet_idx(os.path.join(d, "images.idx"), os.path.join(d, "labels.idx"), LENET_IMAGES)
            run_quiet([worker, "import-idx", "--images", os.path.join(d, "images.idx"), "--labels",
                       os.path.join(d, "labels.idx"), "--out", os.path.join(d, "folders")], "import-idx")
            return "%d 28x28 images" % LENET_IMAGES

        ds = dataset_once(worker, work, "lenet", fill_lenet, {"channels": 1, "width": 28, "height": 28})
        out["lenet"] = {"dataset": ds, "torch_data": os.path.join(d, "images.idx"),
                        "torch_labels": os.path.join(d, "labels.idx")}
    if "alexnet" in nets:
        raw = os.path.join(work, "alexnet", "images.u8")

        def fill_alexnet(d):
            write_alexnet_images(os.path.join(d, "folders"), raw, ALEX_CLASSES, ALEX_PER_CLASS, ALEX_SIDE)
            return "%d %dx%d color PNGs" % (ALEX_CLASSES * ALEX_PER_CLASS, ALEX_SIDE, ALEX_SIDE)

        ds = dataset_once(worker, work, "alexnet", fill_alexnet,
                          {"channels": 3, "width": ALEX_SIDE, "height": ALEX_SIDE})
        out["alexnet"] = {"dataset": ds, "torch_data": raw, "torch_labels": ""}
    return out


# ---- GPU utilization ---------------------------------------------------------------------

class Sampler:
    """GPU utilization samples (time, percent) every 100 ms in a thread, from NVML or from
    nvidia-smi; mean(t0, t1) averages those inside a window. No GPU: no samples."""

    def __init__(self):
        self.samples, self.source = [], "none"
        self._stop = threading.Event()
        self._nvml = None
        self._proc = None
        try:
            import pynvml
            pynvml.nvmlInit()
            self._nvml = (pynvml, pynvml.nvmlDeviceGetHandleByIndex(0))
            self.source = "NVML"
        except Exception:
            if shutil.which("nvidia-smi"):
                self.source = "nvidia-smi"

    def start(self):
        if self.source == "NVML":
            self._thread = threading.Thread(target=self._poll_nvml, daemon=True)
        elif self.source == "nvidia-smi":
            self._proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu",
                                           "--format=csv,noheader,nounits", "-lms", "100", "-i", "0"],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            self._thread = threading.Thread(target=self._read_smi, daemon=True)
        else:
            return
        self._thread.start()

    def _poll_nvml(self):
        nvml, h = self._nvml
        while not self._stop.wait(0.1):
            try:
                self.samples.append((time.time(), float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)))
            except Exception:
                pass

    def _read_smi(self):
        for line in self._proc.stdout:
            try:
                self.samples.append((time.time(), float(line.strip())))
            except ValueError:
                pass

    def stop(self):
        self._stop.set()
        if self._proc:
            self._proc.terminate()
            self._proc.wait()

    def mean(self, t0, t1):
        v = [u for t, u in self.samples if t0 <= t <= t1]
        return sum(v) / len(v) if v else float("nan")


# ---- one case with cdigits ----------------------------------------------------------------

def run_cdigits(worker, work, data, net, batch, prec, iters, warm, device, extra=None, tag=""):
    """One training job; batch is the whole step's (split over the replicas in extra)."""
    job = os.path.join(work, "job_%s_%d_%s%s" % (net, batch, prec, tag))
    shutil.rmtree(job, ignore_errors=True)
    os.makedirs(job)
    shutil.copy(os.path.join(ROOT, "models", net + ".prototxt"), os.path.join(job, "network.prototxt"))
    conf = {"dataset_dir": data["dataset"], "network": "network.prototxt",
            "epochs": 100000, "max_iterations": iters, "batch_size": batch,
            "solver_type": "SGD", "learning_rate": LR[net], "momentum": 0.9,
            "weight_decay": 0.0005, "lr_policy": {"policy": "fixed"}, "random_seed": 1,
            "snapshot_interval": 0, "snapshots": False, "validation_interval": 0,
            "use_mean": "image",
            "backend": "cpu" if device == "cpu" else "cuda", "precision": prec}
    conf.update(extra or {})
    with open(os.path.join(job, "train.json"), "w") as f:
        json.dump(conf, f)
    t_start = time.time()
    p = subprocess.Popen([worker, "train", job], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(SIDE_LIMIT, p.kill)
    killer.daemon = True
    killer.start()
    stderr = []
    threading.Thread(target=lambda: stderr.extend(p.stderr), daemon=True).start()
    windows, backend, errors = [], None, []
    last_iter, wait_sum = 0, {}
    for line in p.stdout:
        now = time.time()
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("type") == "device":
            backend = j.get("backend")
        elif j.get("type") == "error":
            errors.append(j.get("message", ""))
        elif j.get("type") == "metric" and j.get("phase") == "train":
            if j["name"] == "images_per_sec":
                it = j["iteration"]
                windows.append({"t": now, "from": last_iter, "to": it, "ips": j["value"]})
                last_iter = it
            elif j["name"] == "data_wait":
                wait_sum[j["iteration"]] = j["value"]
    rc = p.wait()
    hung = not killer.is_alive() and rc < 0
    killer.cancel()
    if hung:
        errors.append("no end after %d s: stopped" % SIDE_LIMIT)
    res = {"rc": rc, "backend": backend, "error": "; ".join(errors) or "".join(stderr)[-300:],
           "wall": time.time() - t_start}
    # the report windows that start after the warm-up (the worker reports every few
    # iterations; with too few of them, the last window)
    first = next((i for i, w in enumerate(windows) if w["from"] >= warm), len(windows) - 1)
    timed = [w for w in windows[first:] if w["ips"] > 0]
    if rc != 0 or not timed:
        res["ok"] = False
        if rc == 0:
            res["error"] = "no timed windows (%d metrics)" % len(windows)
        return res
    secs = [(w["to"] - w["from"]) * batch / w["ips"] for w in timed]
    images = sum((w["to"] - w["from"]) * batch for w in timed)
    res.update(ok=True, ips=images / sum(secs),
               wait=sum(wait_sum.get(w["to"], 0.0) * s for w, s in zip(timed, secs)) / sum(secs),
               t0=windows[first - 1]["t"] if first > 0 else t_start, t1=timed[-1]["t"])
    return res


def run_torch(python, data, net, batch, prec, iters, warm, device, classes):
    cmd = [python, os.path.abspath(__file__), "torch", "--net", net, "--batch", str(batch),
           "--precision", prec, "--iters", str(iters), "--warmup", str(warm), "--device", device,
           "--data", data["torch_data"], "--labels", data["torch_labels"], "--classes", str(classes),
           "--lr", str(LR[net])]
    t_start = time.time()
    # PyTorch with the library path from before tests/gpu/env.sh put ours first: it
    # loads the CUDA libraries it was built with
    env = dict(os.environ)
    if "CDIGITS_TORCH_LD_LIBRARY_PATH" in env:
        env["LD_LIBRARY_PATH"] = env["CDIGITS_TORCH_LD_LIBRARY_PATH"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=SIDE_LIMIT)
    except subprocess.TimeoutExpired:
        return {"rc": 124, "ok": False, "wall": time.time() - t_start,
                "error": "no end after %d s: stopped" % SIDE_LIMIT}
    res = {"rc": p.returncode, "wall": time.time() - t_start}
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not lines:
        res.update(ok=False, error=(p.stderr or p.stdout)[-400:].strip())
        return res
    res.update(json.loads(lines[-1]))
    res["ok"] = True
    return res


def fmt_side(r):
    if not r.get("ok"):
        return "%10s %5s %6s" % ("failed", "", "")
    util = r.get("util", float("nan"))
    return "%10.0f %4s%% %5.1f%%" % (r["ips"], "--" if math.isnan(util) else "%.0f" % util, 100 * r["wait"])


def cmd_run(a):
    worker = os.path.abspath(a.worker)
    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    cases = []
    for c in a.cases.split(","):
        net, batch, prec = c.strip().split(":")
        cases.append((net, int(batch), prec))
    smoke = a.device == "cpu"
    if smoke:  # the whole path, tiny: the CPU has neither fp16 autocast nor the time
        cases = [("lenet", 16, "fp32"), ("alexnet", 4, "fp32")]
    print("torch_gpu_bench: %d cases on %s; data pipeline included on both sides"
          % (len(cases), "the CPU (smoke run, not a benchmark)" if smoke else "GPU 0"))
    t0 = time.time()
    datasets = make_datasets(worker, work, set(n for n, _, _ in cases))
    sampler = Sampler()
    sampler.start()
    rows, not_run, took = [], [], {}
    for net, batch, prec in cases:
        if a.deadline:
            left = a.deadline - (time.time() - t0)
            need = took.get(net, FIRST_GUESS.get(net, 30.0))
            if need > left:
                not_run.append("%s:%d:%s" % (net, batch, prec))
                print("  %-7s %4d %-4s  not run: about %.0f s needed, %.0f s left before the deadline"
                      % (net, batch, prec, need, left))
                continue
        iters, warm = ITERS.get((net, batch), (100, 20))
        iters, warm = max(4, int(iters * a.scale)), max(1, int(warm * a.scale))
        if smoke:
            iters, warm = 6, 2
        classes = 10 if net == "lenet" else ALEX_CLASSES
        ours = run_cdigits(worker, work, datasets[net], net, batch, prec, iters, warm, a.device)
        if ours.get("ok"):
            ours["util"] = sampler.mean(ours["t0"], ours["t1"])
            if not smoke and ours["backend"] != "cuda":
                ours.update(ok=False, error="trained on %s, not the GPU" % ours["backend"])
        theirs = run_torch(a.torch_python, datasets[net], net, batch, prec, iters, warm, a.device, classes)
        if theirs.get("ok"):
            theirs["util"] = sampler.mean(theirs["t0"], theirs["t1"])
        ratio = ours["ips"] / theirs["ips"] if ours.get("ok") and theirs.get("ok") and theirs["ips"] > 0 else float("nan")
        rows.append((net, batch, prec, ours, theirs, ratio))
        took[net] = max(took.get(net, 0.0), ours["wall"] + theirs["wall"])
        print("  %-7s %4d %-4s  cdigits %s (%.0f s)  pytorch %s (%.0f s)  ratio %.2f"
              % (net, batch, prec, fmt_side(ours), ours["wall"], fmt_side(theirs), theirs["wall"], ratio))
        for side, r in (("cdigits", ours), ("pytorch", theirs)):
            if not r.get("ok"):
                print("    %s: %s" % (side, r.get("error", "?")))
        sys.stdout.flush()
    sampler.stop()

    torch_v = next((r[4].get("framework") for r in rows if r[4].get("ok")), "pytorch")
    gpu = next((r[4].get("gpu") for r in rows if r[4].get("ok")), "")
    print()
    print("Training throughput, %s, cdigits against %s eager, same network, batch and precision"
          % (gpu or a.device, torch_v))
    print("(images/s over the timed iterations; util: GPU utilization from %s; wait: share of the"
          " step spent waiting for data)" % sampler.source)
    print("%-8s %5s %-4s | %10s %5s %6s | %10s %5s %6s | %s"
          % ("network", "batch", "prec", "cdigits", "util", "wait", "pytorch", "util", "wait", "cdigits/pytorch"))
    for net, batch, prec, ours, theirs, ratio in sorted(
            rows, key=lambda r: (NET_ORDER.get(r[0], 9), r[1], PREC_ORDER.get(r[2], 9))):
        print("%-8s %5d %-4s | %s | %s | %s" % (net, batch, prec, fmt_side(ours), fmt_side(theirs),
                                                "--" if math.isnan(ratio) else "%.2f" % ratio))
    if not_run:
        print("not run (deadline of %.0f s): %s" % (a.deadline, ", ".join(not_run)))
    good = [r[5] for r in rows if not math.isnan(r[5])]
    failed = [r for r in rows if not r[3].get("ok")]
    # on a GPU PyTorch's failures are shown, not counted; in the CPU smoke run (the
    # rehearsal of the bookkeeping) both sides must run
    if smoke:
        failed += [r for r in rows if r[3].get("ok") and not r[4].get("ok")]
    geo = math.exp(sum(math.log(x) for x in good) / len(good)) if good else float("nan")
    print("torch_gpu_bench: %d of %d cases ran on both sides in %.0f s%s%s; cdigits/pytorch geometric mean %s"
          % (len(good), len(rows) + len(not_run), time.time() - t0,
             ", %d failed" % len(failed) if failed else "",
             ", %d not run for the deadline" % len(not_run) if not_run else "",
             "--" if math.isnan(geo) else "%.2f" % geo))
    return 1 if failed or not rows else 0


# ---- data-parallel scaling -----------------------------------------------------------------

def cmd_scaling(a):
    """Images/s on 1, 2, 4, ... GPUs (the batch per GPU fixed), each over N times the
    one-GPU figure of the same run; with the gradients averaged in buckets during the
    backward pass (the default) and in one bucket after it, to show what the overlap
    buys. --device cpu: CPU replicas instead of GPUs, a smoke run of the path."""
    worker, work = os.path.abspath(a.worker), os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    net, per, prec = a.case.split(":")
    per = int(per)
    counts = [n for n in (1, 2, 4, 8, 16) if n <= a.gpus]
    smoke = a.device == "cpu"
    iters, warm = ITERS.get((net, per), (60, 15))
    iters, warm = max(4, int(iters * a.scale)), max(1, int(warm * a.scale))
    if smoke:
        iters, warm = 8, 2
    data = make_datasets(worker, work, {net})[net]
    print("scaling: %s, batch %d per %s, %s, %d iterations (%d untimed)"
          % (net, per, "replica" if smoke else "GPU", prec, iters, warm))
    rows, one = [], {}
    for mode, bucket in (("overlapped", 25), ("after backward", 0)):
        for n in counts:
            extra = {"allreduce_bucket_mb": bucket}
            extra.update({"replicas": n, "threads": 1} if smoke else {"gpus": list(range(n))})
            r = run_cdigits(worker, work, data, net, per * n, prec, iters, warm, a.device, extra,
                            "_x%d_%s" % (n, bucket))
            if not r.get("ok"):
                print("  %d: failed: %s" % (n, r.get("error", "?")))
                rows.append((mode, n, float("nan"), float("nan")))
                continue
            if n == 1:
                one[mode] = r["ips"]
            eff = r["ips"] / (n * one[mode]) if one.get(mode) else float("nan")
            rows.append((mode, n, r["ips"], eff))
            print("  %-14s %2d: %9.0f images/s, efficiency %.2f" % (mode, n, r["ips"], eff))
            sys.stdout.flush()
    print()
    print("| averaging | GPUs | images/s | efficiency (images/s over N x one GPU) |")
    print("|---|---|---|---|")
    for mode, n, ips, eff in rows:
        print("| %s | %d | %s | %s |" % (mode, n, "failed" if math.isnan(ips) else "%.0f" % ips,
                                       "--" if math.isnan(eff) else "%.2f" % eff))
    best = [eff for mode, n, ips, eff in rows if mode == "overlapped" and n == counts[-1]]
    print("scaling: %s on %d %s: efficiency %s" % (net, counts[-1], "replicas" if smoke else "GPUs",
                                                   "%.2f" % best[0] if best and not math.isnan(best[0]) else "--"))
    return 0 if all(not math.isnan(r[2]) for r in rows) else 1


# ---- one case with PyTorch ----------------------------------------------------------------

def cmd_torch(a):
    import torch
    import torch.nn.functional as F

    dev = torch.device(a.device)
    cuda = dev.type == "cuda"
    if cuda:
        # fp32 means fp32 on both sides: no TF32 in convolutions or matrix products
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
    torch.manual_seed(1)

    if a.net == "lenet":
        with open(a.data, "rb") as f:
            raw = f.read()
        n, rows, cols = struct.unpack(">III", raw[4:16])
        images = torch.frombuffer(bytearray(raw[16:]), dtype=torch.uint8).view(n, 1, rows, cols)
        with open(a.labels, "rb") as f:
            labels = torch.frombuffer(bytearray(f.read()[8:]), dtype=torch.uint8).long()
        crop = 0
    else:
        with open(a.data, "rb") as f:
            raw = f.read()
        n, c, h, w = struct.unpack("<IIII", raw[:16])
        body = 16 + n * c * h * w
        images = torch.frombuffer(bytearray(raw[16:body]), dtype=torch.uint8).view(n, c, h, w)
        labels = torch.frombuffer(bytearray(raw[body:body + n]), dtype=torch.uint8).long()
        crop = ALEX_CROP
    mean = images.float().mean(0).to(dev)
    if cuda:
        images = images.pin_memory()
        labels = labels.pin_memory()

    from torch_nets import AlexNet, LeNet  # models/lenet.prototxt, models/alexnet.prototxt

    net = (LeNet if a.net == "lenet" else AlexNet)(a.classes).to(dev)
    weights = [p for name, p in net.named_parameters() if name.endswith("weight")]
    biases = [p for name, p in net.named_parameters() if name.endswith("bias")]
    opt = torch.optim.SGD([{"params": weights}, {"params": biases, "lr": 2 * a.lr, "weight_decay": 0.0}],
                          lr=a.lr, momentum=0.9, weight_decay=5e-4)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = None
    if a.precision == "fp16":
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler") \
            else torch.cuda.amp.GradScaler()

    # the data path: shuffled indices, a gather into one of two page-locked staging
    # buffers, a copy that does not block, crop/mirror/mean on the device
    B = a.batch
    stage = [torch.empty((B,) + tuple(images.shape[1:]), dtype=torch.uint8, pin_memory=cuda) for _ in range(2)]
    stage_l = [torch.empty(B, dtype=torch.long, pin_memory=cuda) for _ in range(2)]
    copied = [torch.cuda.Event() if cuda else None for _ in range(2)]
    gen = torch.Generator().manual_seed(1)
    order, pos = torch.randperm(len(images), generator=gen), 0
    if crop:
        ar = torch.arange(crop, device=dev)
        ch = torch.arange(images.shape[1], device=dev).view(1, -1, 1, 1)

    def next_batch(slot):
        nonlocal order, pos
        if pos + B > len(order):
            order, pos = torch.randperm(len(images), generator=gen), 0
        idx = order[pos:pos + B]
        pos += B
        if copied[slot] is not None:
            copied[slot].synchronize()  # the copy from this buffer two batches ago is done
        torch.index_select(images, 0, idx, out=stage[slot])
        torch.index_select(labels, 0, idx, out=stage_l[slot])
        x = stage[slot].to(dev, non_blocking=True)
        y = stage_l[slot].to(dev, non_blocking=True)
        if copied[slot] is not None:
            copied[slot].record()
        if not crop:
            return x.float() - mean, y
        side = images.shape[2]
        oy = torch.randint(0, side - crop + 1, (B,), generator=gen).to(dev, non_blocking=True)
        ox = torch.randint(0, side - crop + 1, (B,), generator=gen).to(dev, non_blocking=True)
        flip = torch.randint(0, 2, (B,), generator=gen).to(dev, non_blocking=True).bool()
        rows = (oy.view(-1, 1) + ar).view(B, 1, crop, 1)
        cols = torch.where(flip.view(-1, 1), ox.view(-1, 1) + (crop - 1 - ar), ox.view(-1, 1) + ar).view(B, 1, 1, crop)
        bi = torch.arange(B, device=dev).view(-1, 1, 1, 1)
        return x[bi, ch, rows, cols].float() - mean[ch, rows, cols], y

    waited, t0 = 0.0, None
    for it in range(a.warmup + a.iters):
        if it == a.warmup:
            if cuda:
                torch.cuda.synchronize()
            t0, waited = time.time(), 0.0
        s = time.perf_counter()
        x, y = next_batch(it % 2)
        waited += time.perf_counter() - s
        opt.zero_grad(set_to_none=True)
        if amp_dtype is not None:
            with torch.autocast(device_type=dev.type, dtype=amp_dtype):
                loss = F.cross_entropy(net(x), y)
        else:
            loss = F.cross_entropy(net(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    if cuda:
        torch.cuda.synchronize()
    t1 = time.time()
    dt = t1 - t0
    print(json.dumps({"framework": "pytorch " + torch.__version__,
                      "gpu": torch.cuda.get_device_name(0) if cuda else "cpu",
                      "ips": a.iters * B / dt, "wait": waited / dt, "t0": t0, "t1": t1,
                      "loss": float(loss)}))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="every case, cdigits and PyTorch side by side")
    r.add_argument("--worker", required=True)
    r.add_argument("--work", required=True)
    r.add_argument("--torch-python", default=sys.executable)
    r.add_argument("--cases", default=DEFAULT_CASES)
    r.add_argument("--scale", type=float, default=1.0, help="iterations x scale")
    r.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    r.add_argument("--deadline", type=float, default=0,
                   help="seconds: a case that would end past it is not started (0: none)")
    sc = sub.add_parser("scaling", help="cdigits on 1, 2, 4, ... GPUs: data-parallel efficiency")
    sc.add_argument("--worker", required=True)
    sc.add_argument("--work", required=True)
    sc.add_argument("--gpus", type=int, required=True, help="the most GPUs (or CPU replicas) to use")
    sc.add_argument("--case", default="alexnet:128:bf16", help="net:batch per GPU:precision")
    sc.add_argument("--scale", type=float, default=1.0, help="iterations x scale")
    sc.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    t = sub.add_parser("torch", help="one case with PyTorch; prints one JSON line")
    t.add_argument("--net", required=True, choices=["lenet", "alexnet"])
    t.add_argument("--batch", type=int, required=True)
    t.add_argument("--precision", default="fp32", choices=["fp32", "fp16", "bf16"])
    t.add_argument("--iters", type=int, default=100)
    t.add_argument("--warmup", type=int, default=20)
    t.add_argument("--device", default="cuda")
    t.add_argument("--data", required=True)
    t.add_argument("--labels", default="")
    t.add_argument("--classes", type=int, default=10)
    t.add_argument("--lr", type=float, default=0.01)
    a = ap.parse_args()
    return {"run": cmd_run, "scaling": cmd_scaling, "torch": cmd_torch}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
