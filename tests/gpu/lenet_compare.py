#!/usr/bin/env python3
"""LeNet trained by cdigits-worker on two backends with the same seed, compared.

Stage 2 of tests/gpu/run.sh. Makes a small synthetic MNIST-like set (10 classes of
28x28 strokes, shifted and noisy; standard library only), imports it with
`import-idx`, makes the dataset with `dataset`, trains LeNet once per backend from
the same seed, and compares what the worker reports:
  - the GPU run must really run on the GPU (its `device` line says cuda);
  - the first training losses agree closely (same weights, same batches; the backends
    differ only in rounding, which grows slowly);
  - both runs learn (last loss well under the first) and end at about the same
    validation accuracy.
A backend written "cuda+nccl" is the GPU run through the data-parallel path with one
rank (an NCCL communicator of one, the gradients averaged in buckets on the reduce
stream during the backward pass, rank 0's weights broadcast): it must say so in its log
and follow the plain GPU run as closely as the GPU follows the CPU. Each run is compared
with the one before it.
Exit status 0 when all hold; the last line is a one-line summary.
"""
import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import time

CLASSES = 10
SIDE = 28

# a 7x7 stroke template per class, drawn at 4x and moved by up to 3 pixels per image
TEMPLATES = [
    ["..###..", ".#...#.", ".#...#.", ".#...#.", ".#...#.", ".#...#.", "..###.."],
    ["...#...", "..##...", "...#...", "...#...", "...#...", "...#...", "..###.."],
    ["..###..", ".#...#.", ".....#.", "....#..", "...#...", "..#....", ".#####."],
    ["..###..", ".....#.", ".....#.", "..###..", ".....#.", ".....#.", "..###.."],
    ["....#..", "...##..", "..#.#..", ".#..#..", ".#####.", "....#..", "....#.."],
    [".#####.", ".#.....", ".####..", ".....#.", ".....#.", ".#...#.", "..###.."],
    ["..###..", ".#.....", ".#.....", ".####..", ".#...#.", ".#...#.", "..###.."],
    [".#####.", ".....#.", "....#..", "...#...", "..#....", "..#....", "..#...."],
    ["..###..", ".#...#.", ".#...#.", "..###..", ".#...#.", ".#...#.", "..###.."],
    ["..###..", ".#...#.", ".#...#.", "..####.", ".....#.", ".....#.", "..###.."],
]


def make_idx(path_images, path_labels, count, seed):
    rng = random.Random(seed)
    images = bytearray()
    labels = bytearray()
    for i in range(count):
        c = i % CLASSES
        dy, dx = rng.randint(-3, 3), rng.randint(-3, 3)
        img = bytearray(SIDE * SIDE)
        for y in range(SIDE):
            for x in range(SIDE):
                ty, tx = (y - dy) // 4, (x - dx) // 4
                on = 0 <= ty < 7 and 0 <= tx < 7 and TEMPLATES[c][ty][tx] == "#"
                v = (200 if on else 20) + rng.randint(-40, 40)
                img[y * SIDE + x] = max(0, min(255, v))
        images += img
        labels.append(c)
    with open(path_images, "wb") as f:
        f.write(struct.pack(">IIII", 0x00000803, count, SIDE, SIDE))
        f.write(images)
    with open(path_labels, "wb") as f:
        f.write(struct.pack(">II", 0x00000801, count))
        f.write(labels)


def run(cmd, env=None, timeout=300):
    """Runs the worker; returns (exit status, parsed JSON lines, stderr text)."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        print("  %s: no end after %d s; stopped it" % (" ".join(cmd[1:3]), timeout))
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        p = subprocess.CompletedProcess(cmd, 124, out, "timed out")
    lines = []
    for ln in p.stdout.splitlines():
        try:
            lines.append(json.loads(ln))
        except ValueError:
            pass
    print("  %s: exit %d in %.1f s" % (" ".join(cmd[1:3]), p.returncode, time.time() - t0))
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-4000:])
        for j in lines:
            if j.get("type") == "error":
                print("  error:", j.get("message"))
    return p.returncode, lines, p.stderr


def metrics(lines, phase, name):
    return [(j["iteration"], j["value"]) for j in lines
            if j.get("type") == "metric" and j.get("phase") == phase and j.get("name") == name]


def compare(ka, a, kb, b, problems):
    """Losses and accuracy of two runs; adds to problems, returns a one-line summary."""
    common = sorted(set(i for i, _ in a["loss"]) & set(i for i, _ in b["loss"]))
    la, lb = dict(a["loss"]), dict(b["loss"])
    early = common[:5]
    diffs = [abs(la[i] - lb[i]) / max(abs(la[i]), 1e-6) for i in early]
    print("  loss at iterations %s: %s vs %s" % (early, [round(la[i], 5) for i in early],
                                               [round(lb[i], 5) for i in early]))
    acc_a, acc_b = a["val_acc"][-1][1], b["val_acc"][-1][1]
    if not diffs:
        problems.append("%s vs %s: no common iterations to compare" % (ka, kb))
    elif diffs[0] > 1e-3:
        problems.append("%s vs %s: first loss differs by %.2g (relative)" % (ka, kb, diffs[0]))
    elif max(diffs) > 0.05:
        problems.append("%s vs %s: early losses differ by up to %.1f%%" % (ka, kb, 100 * max(diffs)))
    if abs(acc_a - acc_b) > 0.05:
        problems.append("%s vs %s: validation accuracy %.3f vs %.3f" % (ka, kb, acc_a, acc_b))
    return ("%s vs %s: first loss %.4f vs %.4f, early loss diff <= %.2g%%, val acc %.3f vs %.3f"
            % (ka, kb, la[common[0]] if common else 0, lb[common[0]] if common else 0,
               100 * max(diffs) if diffs else 0, acc_a, acc_b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--network", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--backends", default="cpu,cuda", help="the two backends to compare")
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)

    print("lenet_compare: synthetic set of %d images" % args.images)
    make_idx(os.path.join(w, "images.idx"), os.path.join(w, "labels.idx"), args.images, 1)
    rc, _, _ = run([args.worker, "import-idx", "--images", os.path.join(w, "images.idx"),
                    "--labels", os.path.join(w, "labels.idx"), "--out", os.path.join(w, "folders")])
    if rc != 0:
        print("lenet_compare: import-idx failed")
        return 1
    ds = os.path.join(w, "dataset")
    os.makedirs(ds, exist_ok=True)
    with open(os.path.join(ds, "dataset.json"), "w") as f:
        json.dump({"folder_train": os.path.join(w, "folders"), "pct_val": 20, "pct_test": 0,
                   "channels": 1, "width": SIDE, "height": SIDE, "resize_mode": "squash",
                   "encoding": "none", "seed": 1}, f)
    rc, _, _ = run([args.worker, "dataset", ds])
    if rc != 0:
        print("lenet_compare: making the dataset failed")
        return 1

    results = {}
    for spec in args.backends.split(","):
        backend, _, variant = spec.partition("+")
        job = os.path.join(w, "train_" + backend + variant + "_%d" % len(results))
        os.makedirs(job, exist_ok=True)
        shutil.copy(args.network, os.path.join(job, "network.prototxt"))
        conf = {"dataset_dir": ds, "network": "network.prototxt", "epochs": args.epochs,
                "snapshot_interval": args.epochs, "validation_interval": 1,
                "random_seed": 7, "batch_size": 64, "solver_type": "SGD",
                "learning_rate": 0.01, "momentum": 0.9, "weight_decay": 0.0005,
                "lr_policy": {"policy": "fixed"}, "use_mean": "image",
                "backend": backend, "precision": "fp32"}  # no TF32: a close comparison
        if variant == "nccl":
            # LeNet's 1.7 MB of gradients in 2 buckets: ip2 and ip1 (averaged while the
            # convolutions run backward), then the convolutions
            conf.update({"gpus": [0], "force_data_parallel": True, "allreduce_bucket_mb": 0.25})
        with open(os.path.join(job, "train.json"), "w") as f:
            json.dump(conf, f)
        rc, lines, _ = run([args.worker, "train", job])
        dev = [j for j in lines if j.get("type") == "device"]
        logs = [j.get("message", "") for j in lines if j.get("type") == "log"]
        if variant == "nccl":
            said = [m for m in logs if m.startswith("data parallel over 1 replica")]
            print("  %s: %s" % (spec, said[0] if said else "no data-parallel line in the log"))
            if rc == 0 and not (said and "during the backward pass" in said[0]):
                rc = 99  # not the overlapped NCCL path
        results[spec + "_%d" % len(results)] = {
            "rc": rc, "device": dev[0].get("backend") if dev else None,
            "loss": metrics(lines, "train", "loss"),
            "val_acc": metrics(lines, "val", "accuracy"),
            "ips": metrics(lines, "train", "images_per_sec"),
            "wait": metrics(lines, "train", "data_wait"),
        }

    keys = list(results)
    problems = []
    for k in keys:
        r = results[k]
        want = k.rsplit("_", 1)[0].partition("+")[0]
        if r["rc"] == 99:
            problems.append("%s: did not take the overlapped data-parallel path" % k)
            continue
        if r["rc"] != 0:
            problems.append("%s: training failed (exit %d)" % (k, r["rc"]))
            continue
        if want != "auto" and r["device"] != want:
            problems.append("%s: ran on %s" % (k, r["device"]))
        if len(r["loss"]) < 3 or not r["val_acc"]:
            problems.append("%s: too few metrics (%d losses)" % (k, len(r["loss"])))
            continue
        first, last = r["loss"][0][1], r["loss"][-1][1]
        ips = sum(v for _, v in r["ips"]) / max(1, len(r["ips"]))
        wait = sum(v for _, v in r["wait"]) / max(1, len(r["wait"]))
        print("  %-8s loss %.4f -> %.4f, val accuracy %.3f, %.0f images/s, data wait %.1f%%"
              % (k, first, last, r["val_acc"][-1][1], ips, 100 * wait))
        if not last < 0.5 * first:
            problems.append("%s: loss went from %.4f to %.4f only" % (k, first, last))

    details = []
    for ka, kb in zip(keys, keys[1:]):
        if problems:
            break
        details.append(compare(ka, results[ka], kb, results[kb], problems))
    detail = "; ".join(details)
    if problems:
        print("lenet_compare: " + "; ".join(problems))
        return 1
    print("lenet_compare: " + detail)
    return 0


if __name__ == "__main__":
    sys.exit(main())
