#!/usr/bin/env python3
"""A stand-in for cdigits-worker that speaks docs/worker-protocol.md without training
anything, so the server's tests run in seconds and can provoke failures on demand.

    fake_worker.py dataset JOBDIR     reads dataset.json, counts the class folders
    fake_worker.py train JOBDIR [--resume] [--gpus LIST] [--backend auto|cpu|cuda]
                                      reads train.json, the options overriding its keys as
                                      in cdigits-worker, prints metrics and snapshots

Behaviour switches, read from a comment in JOBDIR/network.prototxt (per job) or from
the environment variable FAKE_WORKER (for every job); a file named fake_slow in a
dataset's folder_train makes that dataset slow:
    fake:slow         0.2 s per iteration instead of FAKE_STEP (default 0.01 s)
    fake:crash        after the first epoch, print a few lines and die of SIGSEGV
    fake:error        print an error line and exit 1
    fake:ignore_term  ignore SIGTERM (the server must SIGKILL after its grace period)
    fake:nodone       exit 0 without finishing (never used by the real worker)
Every metric line is also appended with its send time to JOBDIR/fake_sent.log
("<iteration> <phase> <name> <unix time>") so that a test can measure delivery delays.
Each start appends its options to JOBDIR/fake_args.log, one JSON list a line, so that a
test can see what the scheduler passed.
"""
import json
import os
import signal
import sys
import time

STOP = False


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def modes(jobdir):
    text = os.environ.get("FAKE_WORKER", "")
    try:
        with open(os.path.join(jobdir, "network.prototxt")) as f:
            text += f.read()
    except OSError:
        pass
    return {m for m in ("slow", "crash", "error", "ignore_term", "nodone") if "fake:" + m in text}


def on_term(signum, frame):
    global STOP
    STOP = True


def dataset(jobdir):
    with open(os.path.join(jobdir, "dataset.json")) as f:
        cfg = json.load(f)
    root = cfg.get("folder_train") or ""
    classes = []
    if root and os.path.isdir(root):
        for name in sorted(os.listdir(root)):
            p = os.path.join(root, name)
            if os.path.isdir(p):
                classes.append((name, len([x for x in os.listdir(p) if not x.startswith(".")])))
    slow = 1.0 if "slow" in modes(jobdir) or os.path.exists(os.path.join(root, "fake_slow")) else 0.0
    emit({"type": "log", "level": "info", "message": "found %d classes in %s" % (len(classes), root)})
    total = sum(n for _, n in classes)
    for i in range(total + 1):
        if i % 5 == 0 or i == total:
            emit({"type": "progress", "stage": "parse", "done": i, "total": max(total, 1)})
    pct_val = int(cfg.get("pct_val", 0))
    out = []
    for label, n in classes:
        val = n * pct_val // 100
        out.append({"label": label, "train": n - val, "val": val, "test": 0})
    splits = {"train": sum(c["train"] for c in out), "val": sum(c["val"] for c in out)}
    for i in range(total + 1):
        if i % 5 == 0 or i == total:
            emit({"type": "progress", "stage": "create", "done": i, "total": max(total, 1)})
            time.sleep(slow)
        time.sleep(0.002)
    with open(os.path.join(jobdir, "labels.txt"), "w") as f:
        f.write("".join(c["label"] + "\n" for c in out))
    for split, n in splits.items():
        if n:
            with open(os.path.join(jobdir, split + ".db"), "wb") as f:
                f.write(b"FAKE" * n)
    with open(os.path.join(jobdir, "mean.bin"), "wb") as f:
        f.write(b"\0" * 16)
    with open(os.path.join(jobdir, "stats.json"), "w") as f:
        json.dump({"splits": splits, "classes": len(out)}, f)
    emit({"type": "dataset", "splits": splits, "classes": out, "skipped": 0,
          "mean_file": "mean.bin", "labels_file": "labels.txt"})
    emit({"type": "done"})
    return 0


def newest_snapshot(jobdir):
    best = 0
    for name in os.listdir(jobdir):
        if name.startswith("snapshot_epoch_") and name.endswith(".cdw"):
            try:
                e = int(name[len("snapshot_epoch_"):-len(".cdw")])
            except ValueError:
                continue
            if os.path.exists(os.path.join(jobdir, "snapshot_epoch_%d.solverstate" % e)):
                best = max(best, e)
    return best


def train_options(args, cfg):
    """Applies the train command's options to cfg as cdigits-worker does; returns an error
    message, or None."""
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--resume":
            cfg["resume"] = True
            i += 1
            continue
        if a not in ("--gpus", "--backend"):
            return "%s is not an option of train" % a
        if i + 1 >= len(args):
            return "%s needs a value" % a
        v = args[i + 1]
        if a == "--gpus":
            try:
                ids = [int(x) for x in v.split(",")]
            except ValueError:
                return "--gpus %s: give GPU numbers separated by commas" % v
            if any(g < 0 or g > 1023 for g in ids) or len(set(ids)) != len(ids) or len(ids) > 16:
                return "--gpus %s: give up to 16 different GPU numbers between 0 and 1023" % v
            cfg["gpus"] = ids
        else:
            if v.lower() not in ("auto", "cpu", "cuda", "gpu"):
                return "--backend %s: must be one of auto, cpu, cuda" % v
            cfg["backend"] = v.lower()
        i += 2
    return None


def train(jobdir, m, args):
    with open(os.path.join(jobdir, "train.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(jobdir, "fake_args.log"), "a") as f:
        f.write(json.dumps(args) + "\n")
    why = train_options(args, cfg)
    if why:
        emit({"type": "error", "message": why})
        return 2
    epochs = int(cfg.get("epochs", 1))
    iters = 10
    step = 0.2 if "slow" in m else float(os.environ.get("FAKE_STEP", "0.01"))
    lr = float(cfg.get("learning_rate", 0.01))
    start = newest_snapshot(jobdir) if cfg.get("resume") else 0
    sent = open(os.path.join(jobdir, "fake_sent.log"), "a")
    emit({"type": "device", "backend": cfg.get("backend", "cpu"), "name": "fake device",
          "ranks": max(1, len(cfg.get("gpus") or []))})
    if cfg.get("batch_size") == "auto":
        emit({"type": "batch", "batch": 8, "accumulation": 1, "effective": 8, "reason": "fake: auto picked 8"})
    if start:
        emit({"type": "log", "level": "info", "message": "resuming from epoch %d" % start})
    if "error" in m:
        emit({"type": "error", "message": "fake: the network is broken on purpose"})
        return 1
    total = epochs * iters
    for epoch in range(start, epochs):
        for i in range(iters):
            if STOP:
                emit({"type": "log", "level": "info", "message": "stopping: state saved"})
                return 3
            it = epoch * iters + i + 1
            ep = epoch + (i + 1) / iters
            loss = 2.0 / (1.0 + it * 0.1)
            t = time.time()
            emit({"type": "metric", "phase": "train", "name": "loss", "value": loss, "epoch": ep, "iteration": it})
            sent.write("%d train loss %.6f\n" % (it, t))
            sent.flush()
            if i % 5 == 4:
                emit({"type": "metric", "phase": "train", "name": "learning_rate", "value": lr, "epoch": ep,
                      "iteration": it})
                # the trainer's throughput window: a pretend batch of 8 per step, 1/8 of it waiting
                emit({"type": "metric", "phase": "train", "name": "images_per_sec", "value": 8 / step, "epoch": ep,
                      "iteration": it})
                emit({"type": "metric", "phase": "train", "name": "data_wait", "value": 0.125, "epoch": ep,
                      "iteration": it})
            emit({"type": "progress", "stage": "train", "done": it, "total": total, "epoch": ep})
            time.sleep(step)
        it = (epoch + 1) * iters
        acc = min(0.99, 0.5 + 0.1 * (epoch + 1))
        t = time.time()
        emit({"type": "metric", "phase": "val", "name": "accuracy", "value": acc, "epoch": epoch + 1, "iteration": it})
        emit({"type": "metric", "phase": "val", "name": "loss", "value": 1.0 - acc, "epoch": epoch + 1,
              "iteration": it})
        sent.write("%d val accuracy %.6f\n" % (it, t))
        sent.flush()
        if epoch == start:
            emit({"type": "advice", "limit": "data", "message": "fake: loading images is the limit",
                  "data_wait": 0.5, "images_per_sec": 100.0, "epoch": epoch + 1})
        for ext in ("cdw", "solverstate"):
            with open(os.path.join(jobdir, "snapshot_epoch_%d.%s" % (epoch + 1, ext)), "w") as f:
                f.write("fake %d\n" % (epoch + 1))
        emit({"type": "snapshot", "epoch": epoch + 1, "iteration": it, "file": "snapshot_epoch_%d.cdw" % (epoch + 1)})
        if "crash" in m and epoch == start:
            emit({"type": "log", "level": "info", "message": "fake: about to crash"})
            # with bytes that are not UTF-8 (a stray 0xff, an overlong NUL), as a dying
            # program may print
            sys.stderr.buffer.write(b"fake: segmentation fault coming \xff\xc0\x80\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGSEGV)
    if "nodone" in m:
        return 0
    emit({"type": "done"})
    return 0


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("dataset", "train") or (sys.argv[1] == "dataset" and len(sys.argv) != 3):
        sys.stderr.write("usage: fake_worker.py dataset JOBDIR | train JOBDIR [--resume] [--gpus LIST] [--backend NAME]\n")
        return 2
    jobdir = sys.argv[2]
    m = modes(jobdir)
    signal.signal(signal.SIGTERM, signal.SIG_IGN if "ignore_term" in m else on_term)
    if sys.argv[1] == "dataset":
        return dataset(jobdir)
    return train(jobdir, m, sys.argv[3:])


if __name__ == "__main__":
    sys.exit(main())
