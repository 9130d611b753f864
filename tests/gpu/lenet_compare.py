#!/usr/bin/env python3
"""LeNet trained by cdigits-worker on several backends with the same seed, compared.

Stage 2 of tests/gpu/run.sh. Makes a small synthetic MNIST-like set (10 classes of
28x28 strokes, shifted and noisy; standard library only), imports it with
`import-idx`, makes the dataset with `dataset`, trains LeNet once per run from the same
seed, and compares what the worker reports. A run is written BACKEND[+nccl][:PRECISION]:
  - cuda runs must really run on the GPU (their `device` line says cuda);
  - an fp32 run and the fp32 run before it (cpu, then cuda) agree on each of their first
    five logged losses within 1e-3 relative and on validation accuracy within 0.02.
    Why 1e-3: the runs start from the same weights and see the same batches, so they
    differ only in rounding (other summation orders in cuDNN's and cuBLAS's algorithms,
    about 1e-7 relative per op), which SGD grows slowly: over the first few dozen steps
    the losses agree to about 1e-5. 1e-3 leaves that margin a hundredfold while a wrong
    gradient, a wrong op or a loader fault moves the loss by percents within a few steps;
  - "+nccl" is the run through the data-parallel path with one rank (an NCCL
    communicator of one, the gradients averaged in buckets on the reduce stream during
    the backward pass, rank 0's weights broadcast): it must say so in its log and follow
    the plain run of its backend as closely;
  - fp16 (loss scaling on) and bf16 runs must train, not only run: no NaN loss, and the
    mean of their last three losses within 0.05 + 25% of the fp32 run's (and validation
    accuracy within 0.03). Rounding operands to 11 (fp16) or 8 (bf16) mantissa bits
    sends the run along another path, like another seed would, so the check is where it
    ends, not step by step. fp16 on the GPU must also report its loss scale: a scale
    stuck at its floor (1) or more than 5% of the steps skipped fails;
  - every run learns (last loss well under the first).
--stand-in cpu (tests/gpu/run.sh's rehearsal, where there is no GPU) runs every run on
the CPU backend instead, "+nccl" as a data-parallel group of one CPU replica, so the
whole path, its checks and its summary run in CI; the GPU-only checks (the device line,
the overlapped path, the loss scale) are then not applied.
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


def mean_last(values, n=3):
    tail = [v for _, v in values[-n:]]
    return sum(tail) / len(tail) if tail else float("nan")


def compare(ka, a, kb, b, problems):
    """Two fp32 runs: their first losses and accuracy; adds to problems, returns a
    one-line summary."""
    common = sorted(set(i for i, _ in a["loss"]) & set(i for i, _ in b["loss"]))
    la, lb = dict(a["loss"]), dict(b["loss"])
    early = common[:5]
    diffs = [abs(la[i] - lb[i]) / max(abs(la[i]), 1e-6) for i in early]
    print("  loss at iterations %s: %s vs %s" % (early, [round(la[i], 6) for i in early],
                                               [round(lb[i], 6) for i in early]))
    acc_a, acc_b = a["val_acc"][-1][1], b["val_acc"][-1][1]
    if not diffs:
        problems.append("%s vs %s: no common iterations to compare" % (ka, kb))
    elif max(diffs) > 1e-3 or any(d != d for d in diffs):
        worst = max(range(len(diffs)), key=lambda k: diffs[k] if diffs[k] == diffs[k] else 1e9)
        problems.append("%s vs %s: loss at iteration %d differs by %.2g relative (at most 1e-3)"
                        % (ka, kb, early[worst], diffs[worst]))
    if abs(acc_a - acc_b) > 0.02:
        problems.append("%s vs %s: validation accuracy %.3f vs %.3f (at most 0.02 apart)"
                        % (ka, kb, acc_a, acc_b))
    return ("%s vs %s: first losses within %.1e, val acc %.3f vs %.3f"
            % (ka, kb, max(diffs) if diffs else 0, acc_a, acc_b))


def compare_precision(ka, a, kb, b, problems):
    """b trained in fp16 or bf16, a in fp32: both end in the same place."""
    ma, mb = mean_last(a["loss"]), mean_last(b["loss"])
    acc_a, acc_b = a["val_acc"][-1][1], b["val_acc"][-1][1]
    if any(v != v for _, v in b["loss"]):
        problems.append("%s: a loss is NaN" % kb)
    elif not abs(mb - ma) <= 0.05 + 0.25 * ma:
        problems.append("%s vs %s: last losses %.4f vs %.4f (at most 0.05 + 25%% apart)" % (kb, ka, mb, ma))
    if abs(acc_a - acc_b) > 0.03:
        problems.append("%s vs %s: validation accuracy %.3f vs %.3f (at most 0.03 apart)"
                        % (kb, ka, acc_b, acc_a))
    detail = "%s vs %s: last losses %.4f vs %.4f, val acc %.3f vs %.3f" % (kb, ka, mb, ma, acc_b, acc_a)
    if b["scale"]:
        scale = b["scale"][-1][1]
        iters = max(1, b["loss"][-1][0]) if b["loss"] else 1
        skipped = b["skipped"][-1][1] if b["skipped"] else 0.0
        detail += ", loss scale %g, %d steps skipped" % (scale, skipped)
        if scale <= 1:
            problems.append("%s: the loss scale is stuck at its floor (%g)" % (kb, scale))
        if skipped > 0.05 * iters:
            problems.append("%s: %d of %d steps skipped (more than 5%%)" % (kb, skipped, iters))
    elif b["checks_scale"]:
        problems.append("%s: no loss_scale metric (fp16 on the GPU trains with loss scaling)" % kb)
    return detail


def parse_spec(spec):
    """BACKEND[+VARIANT][:PRECISION] -> (backend, variant, precision)"""
    head, _, prec = spec.partition(":")
    backend, _, variant = head.partition("+")
    return backend, variant, prec or "fp32"


def reference_of(keys, specs, k):
    """The earlier run k is compared with: the plain fp32 run of its backend for a
    variant or another precision; the previous plain fp32 run for a plain fp32 run."""
    backend, variant, prec = specs[k]
    for e in reversed(keys[:keys.index(k)]):
        eb, ev, ep = specs[e]
        if ev or ep != "fp32":
            continue
        if (variant or prec != "fp32") and eb != backend:
            continue
        return e
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", required=True)
    ap.add_argument("--network", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--backends", default="cpu,cuda",
                    help="the runs, each BACKEND[+nccl][:fp32|fp16|bf16]")
    ap.add_argument("--stand-in", choices=["cpu"], help="run every run on this backend instead")
    ap.add_argument("--images", type=int, default=3000)
    ap.add_argument("--epochs", type=int, default=2)
    args = ap.parse_args()
    w = os.path.abspath(args.work)
    os.makedirs(w, exist_ok=True)

    print("lenet_compare: synthetic set of %d images%s" % (
        args.images, "; the CPU stands in for every backend" if args.stand_in else ""))
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

    results, specs = {}, {}
    for spec in args.backends.split(","):
        backend, variant, prec = parse_spec(spec)
        runs_on = args.stand_in or backend
        key = spec
        specs[key] = (backend, variant, prec)
        job = os.path.join(w, "train_%d_%s%s_%s" % (len(results), backend, variant, prec))
        os.makedirs(job, exist_ok=True)
        shutil.copy(args.network, os.path.join(job, "network.prototxt"))
        conf = {"dataset_dir": ds, "network": "network.prototxt", "epochs": args.epochs,
                "snapshot_interval": args.epochs, "validation_interval": 1,
                "random_seed": 7, "batch_size": 64, "solver_type": "SGD",
                "learning_rate": 0.01, "momentum": 0.9, "weight_decay": 0.0005,
                "lr_policy": {"policy": "fixed"}, "use_mean": "image",
                "backend": runs_on, "precision": prec}  # fp32: no TF32, a close comparison
        if variant == "nccl":
            # LeNet's 1.7 MB of gradients in 2 buckets: ip2 and ip1 (averaged while the
            # convolutions run backward), then the convolutions
            conf.update({"force_data_parallel": True, "allreduce_bucket_mb": 0.25})
            if runs_on != "cpu":
                conf["gpus"] = [0]
        with open(os.path.join(job, "train.json"), "w") as f:
            json.dump(conf, f)
        rc, lines, _ = run([args.worker, "train", job], timeout=60)
        dev = [j for j in lines if j.get("type") == "device"]
        logs = [j.get("message", "") for j in lines if j.get("type") == "log"]
        if variant == "nccl":
            said = [m for m in logs if m.startswith("data parallel over 1 replica")]
            print("  %s: %s" % (spec, said[0] if said else "no data-parallel line in the log"))
            if rc == 0 and not said:
                rc = 99  # not the data-parallel path
            elif rc == 0 and runs_on != "cpu" and "during the backward pass" not in said[0]:
                rc = 99  # not the overlapped NCCL path
        results[key] = {
            "rc": rc, "device": dev[0].get("backend") if dev else None, "runs_on": runs_on,
            "loss": metrics(lines, "train", "loss"),
            "val_acc": metrics(lines, "val", "accuracy"),
            "ips": metrics(lines, "train", "images_per_sec"),
            "wait": metrics(lines, "train", "data_wait"),
            "scale": metrics(lines, "train", "loss_scale"),
            "skipped": metrics(lines, "train", "skipped_steps"),
            "checks_scale": prec == "fp16" and runs_on == "cuda",
        }

    keys = list(results)
    problems = []
    for k in keys:
        r = results[k]
        if r["rc"] == 99:
            problems.append("%s: did not take the %s data-parallel path"
                            % (k, "overlapped" if r["runs_on"] != "cpu" else "CPU"))
            continue
        if r["rc"] != 0:
            problems.append("%s: training failed (exit %d)" % (k, r["rc"]))
            continue
        if r["runs_on"] != "auto" and r["device"] != r["runs_on"]:
            problems.append("%s: ran on %s" % (k, r["device"]))
        if len(r["loss"]) < 3 or not r["val_acc"]:
            problems.append("%s: too few metrics (%d losses)" % (k, len(r["loss"])))
            continue
        first, last = r["loss"][0][1], r["loss"][-1][1]
        ips = sum(v for _, v in r["ips"]) / max(1, len(r["ips"]))
        wait = sum(v for _, v in r["wait"]) / max(1, len(r["wait"]))
        print("  %-14s loss %.4f -> %.4f, val accuracy %.3f, %.0f images/s, data wait %.1f%%"
              % (k, first, last, r["val_acc"][-1][1], ips, 100 * wait))
        if not last < 0.5 * first:
            problems.append("%s: loss went from %.4f to %.4f only" % (k, first, last))

    details = []
    for k in keys:
        if problems:
            break
        ref = reference_of(keys, specs, k)
        if ref is None:
            continue
        if specs[k][2] != "fp32":
            details.append(compare_precision(ref, results[ref], k, results[k], problems))
        else:
            details.append(compare(ref, results[ref], k, results[k], problems))
    for d in details:
        print("  " + d)
    if problems:
        print("lenet_compare: " + "; ".join(problems))
        return 1
    print("lenet_compare: %d runs agree (%s)" % (len(keys), "; ".join(details)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
