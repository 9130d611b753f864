#!/usr/bin/env python3
"""Helpers for tests/shell/train_cpu.sh: synthetic IDX data, running the worker (with a
SIGTERM on cue), reading its JSON lines and CDW1 weight files, and the checks.

Every check subcommand prints what it found, "FAIL: ..." for each problem, and exits
1 if there was any (0 otherwise). Standard library only.
"""
import json
import math
import os
import random
import re
import signal
import struct
import subprocess
import sys
import time

# ---- data --------------------------------------------------------------------------


def make_idx(images_path, labels_path, per_class=150, size=16, seed=20240611):
    """4 classes of 16x16 gray images: horizontal stripes, vertical stripes, a bright
    square, diagonal stripes, each at a random phase and with Gaussian noise (sigma 30
    on a 40..200 pattern), shuffled. Learnable in an epoch, but not trivially."""
    rnd = random.Random(seed)
    items = []
    for c in range(4):
        for _ in range(per_class):
            ph = rnd.randrange(4)
            img = bytearray(size * size)
            for y in range(size):
                for x in range(size):
                    if c == 0:
                        on = (y + ph) % 4 < 2
                    elif c == 1:
                        on = (x + ph) % 4 < 2
                    elif c == 2:
                        on = 2 + ph <= y < 10 + ph and 2 + ph <= x < 10 + ph
                    else:
                        on = (x + y + ph) % 6 < 3
                    v = (200 if on else 40) + rnd.gauss(0, 30)
                    img[y * size + x] = max(0, min(255, int(v)))
            items.append((bytes(img), c))
    rnd.shuffle(items)
    with open(images_path, "wb") as f:  # IDX: magic 0x00000803, then N, rows, cols
        f.write(struct.pack(">IIII", 0x803, len(items), size, size))
        for img, _ in items:
            f.write(img)
    with open(labels_path, "wb") as f:  # magic 0x00000801, then N
        f.write(struct.pack(">II", 0x801, len(items)))
        f.write(bytes(c for _, c in items))


# ---- running the worker ------------------------------------------------------------


def signal_thread(pid, name, sig):
    """Sends sig to the thread of process pid named name (tgkill: to that thread only)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm == name:
            if libc.tgkill(pid, int(tid), sig) != 0:
                raise SystemExit("tgkill: %s" % os.strerror(ctypes.get_errno()))
            return
    raise SystemExit("process %d has no thread named %s" % (pid, name))


def run_worker(worker, jobdir, log, term_on=None, timeout=600, sig=signal.SIGTERM, thread=None):
    """Run `worker train jobdir`, stdout to log, stderr to log + ".err". With term_on
    ("snapshot" or "progress"), send sig (SIGTERM) as soon as the first line of that
    type appears, to the process or to its thread named `thread`. Writes log +
    ".status" (JSON: rc, term_sent, term_to_exit_s, wall_s)."""
    start = time.monotonic()
    term_at = None
    with open(log, "w") as out, open(log + ".err", "w") as err:
        p = subprocess.Popen([worker, "train", jobdir], stdout=subprocess.PIPE, stderr=err,
                             text=True, bufsize=1)
        try:
            for line in p.stdout:
                out.write(line)
                out.flush()
                if term_on and term_at is None:
                    try:
                        t = json.loads(line).get("type")
                    except ValueError:
                        t = None
                    if t == term_on:
                        if thread:
                            signal_thread(p.pid, thread, sig)
                        else:
                            p.send_signal(sig)
                        term_at = time.monotonic()
                if time.monotonic() - start > timeout:
                    raise subprocess.TimeoutExpired(p.args, timeout)
            rc = p.wait(timeout=max(1, timeout - (time.monotonic() - start)))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc = "timeout"
    end = time.monotonic()
    status = {"rc": rc, "term_sent": term_at is not None,
              "term_to_exit_s": None if term_at is None else round(end - term_at, 3),
              "wall_s": round(end - start, 2)}
    with open(log + ".status", "w") as f:
        json.dump(status, f)
    return status


def read_log(path):
    lines = []
    with open(path) as f:
        for i, raw in enumerate(f):
            raw = raw.strip()
            if not raw:
                continue
            try:
                lines.append(json.loads(raw))
            except ValueError:
                raise SystemExit("%s line %d is not JSON: %r" % (path, i + 1, raw[:200]))
    return lines


def read_status(log):
    with open(log + ".status") as f:
        return json.load(f)


# Measured speed and waiting time differ from run to run by nature.
UNSTABLE = {"images_per_sec", "data_wait"}


def metrics(lines):
    """{(phase, name, iteration): (value, epoch)} without the timing metrics."""
    out = {}
    for l in lines:
        if l.get("type") == "metric" and l["name"] not in UNSTABLE:
            key = (l["phase"], l["name"], l["iteration"])
            if key in out:
                raise SystemExit("metric %s reported twice" % (key,))
            out[key] = (l["value"], l["epoch"])
    return out


def snapshots(lines):
    return [l for l in lines if l.get("type") == "snapshot"]


def train_losses(lines):
    return [(l["iteration"], l["value"]) for l in lines
            if l.get("type") == "metric" and l["phase"] == "train" and l["name"] == "loss"]


def read_cdw(path):
    """CDW1 weights (src/engine/snapshot.c): "CDW1", u32 version, u32 count, then per
    tensor u32 name length, name, u32 ndim, u32 dims[4], u64 floats, float32 data;
    then a u64 FNV-1a of every byte before it. Returns {name: (dims, values)}."""
    with open(path, "rb") as f:
        b = f.read()
    if len(b) < 20 or b[:4] != b"CDW1":
        raise ValueError("%s is not a CDW1 file" % path)
    h = 1469598103934665603
    for byte in b[:-8]:
        h = ((h ^ byte) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    if struct.unpack_from("<Q", b, len(b) - 8)[0] != h:
        raise ValueError("%s: checksum mismatch" % path)
    version, count = struct.unpack_from("<II", b, 4)
    off, out = 12, {}
    for _ in range(count):
        (n,) = struct.unpack_from("<I", b, off)
        off += 4
        name = b[off:off + n].decode()
        off += n
        (ndim,) = struct.unpack_from("<I", b, off)
        dims = struct.unpack_from("<4I", b, off + 4)[:ndim]
        (floats,) = struct.unpack_from("<Q", b, off + 20)
        off += 28
        out[name] = (dims, struct.unpack_from("<%df" % floats, b, off))
        off += 4 * floats
    if off != len(b) - 8:
        raise ValueError("%s: %d bytes left over" % (path, len(b) - 8 - off))
    return out


# ---- checks ------------------------------------------------------------------------


class Checker:
    def __init__(self, name):
        self.name, self.bad = name, 0

    def fail(self, msg):
        self.bad += 1
        print("FAIL: %s: %s" % (self.name, msg))

    def expect(self, cond, msg):
        if not cond:
            self.fail(msg)
        return cond

    def done(self):
        print("%s: %s" % (self.name, "ok" if not self.bad else "%d problem(s)" % self.bad))
        sys.exit(1 if self.bad else 0)


def check_plain(jobdir, log, chance=0.25):
    """(a) a run that finishes: done, exit 0, loss falls, val accuracy well above
    chance, a complete snapshot pair for every snapshot line, the last at the end."""
    ck = Checker("plain run")
    st, lines = read_status(log), read_log(log)
    ck.expect(st["rc"] == 0, "exit status %s, want 0" % st["rc"])
    ck.expect(lines and lines[-1].get("type") == "done", "the last line is %s, want a done line"
              % (lines[-1] if lines else None))
    ck.expect(not [l for l in lines if l.get("type") == "error"], "error lines: %s"
              % [l for l in lines if l.get("type") == "error"])
    losses = [v for _, v in train_losses(lines)]
    if ck.expect(len(losses) >= 8, "only %d train losses reported" % len(losses)):
        first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
        print("train loss: first three %.4f, last three %.4f" % (first, last))
        ck.expect(last < 0.6 * first, "the train loss did not fall clearly: %.4f -> %.4f"
                  % (first, last))
        ck.expect(all(math.isfinite(v) for v in losses), "non-finite losses")
    acc = [(l["iteration"], l["value"]) for l in lines if l.get("type") == "metric"
           and l["phase"] == "val" and l["name"] == "accuracy"]
    if ck.expect(acc, "no val accuracy reported"):
        print("val accuracy at the end: %.3f (chance %.2f)" % (acc[-1][1], chance))
        ck.expect(acc[-1][1] >= chance + 0.35, "val accuracy %.3f is not clearly above chance %.2f"
                  % (acc[-1][1], chance))
    total = [l["total"] for l in lines if l.get("type") == "progress" and l.get("stage") == "train"]
    snaps = snapshots(lines)
    ck.expect(snaps, "no snapshot lines")
    for s in snaps:
        path = os.path.join(jobdir, s["file"])
        if ck.expect(os.path.isfile(path), "snapshot line %s: %s is missing" % (s, path)):
            try:
                read_cdw(path)
            except ValueError as e:
                ck.fail(str(e))
            state = re.sub(r"\.cdw$", ".solverstate", path)
            ck.expect(os.path.isfile(state), "%s has no %s" % (path, state))
    if snaps and total:
        ck.expect(snaps[-1]["iteration"] == total[-1], "the last snapshot is at %d, the run has %d "
                  "iterations" % (snaps[-1]["iteration"], total[-1]))
    ck.done()


def check_stopped(log):
    """(b) the SIGTERM half: exit 3, a snapshot at the stop point, no done line. Prints
    the stop iteration and how long the exit took (a figure, not a check: a loaded
    machine delays any process; a worker that ignored the signal would hit run's
    timeout)."""
    ck = Checker("SIGTERM")
    st, lines = read_status(log), read_log(log)
    ck.expect(st["term_sent"], "no SIGTERM was sent (the cue line never came)")
    ck.expect(st["rc"] == 3, "exit status %s after SIGTERM, want 3" % st["rc"])
    if st["term_to_exit_s"] is not None:
        print("exited %.2f s after SIGTERM" % st["term_to_exit_s"])
    ck.expect(not [l for l in lines if l.get("type") == "done"], "a stopped run printed done")
    snaps, losses = snapshots(lines), train_losses(lines)
    if ck.expect(snaps and losses, "no snapshot or no loss before the stop"):
        stop = snaps[-1]["iteration"]
        # the last iteration reported (losses and progress come every few iterations)
        reported = [i for i, _ in losses] + [l["done"] for l in lines if l.get("type") == "progress"
                                             and l.get("stage") == "train"]
        last = max(reported)
        print("stopped at iteration %d" % stop)
        ck.expect(stop >= last, "the last snapshot is at %d but training reached %d" % (stop, last))
        msg = [l for l in lines if l.get("type") == "log" and "stopped at iteration %d" % stop
               in l.get("message", "")]
        ck.expect(msg, "no log line saying it stopped at iteration %d" % stop)
    ck.done()


def check_resume(log_a, log_b1, log_b2, dir_a, dir_b):
    """(b) the resume half: B1 (stopped) + B2 (resumed) equal A (never stopped) exactly,
    metric by metric, and their snapshot files are byte-identical."""
    ck = Checker("resume equality")
    a, b1, b2 = read_log(log_a), read_log(log_b1), read_log(log_b2)
    st2 = read_status(log_b2)
    ck.expect(st2["rc"] == 0, "the resumed run exited %s, want 0" % st2["rc"])
    ck.expect(b2 and b2[-1].get("type") == "done", "the resumed run did not end with done")
    stop = snapshots(b1)[-1]["iteration"]
    ck.expect([l for l in b2 if l.get("type") == "log" and "resuming from iteration %d" % stop
               in l.get("message", "")], "the resumed run does not say it resumes from %d" % stop)
    ma, mb1, mb2 = metrics(a), metrics(b1), metrics(b2)
    after = {k: v for k, v in ma.items() if k[2] > stop}
    before = {k: v for k, v in ma.items() if k[2] <= stop}
    ck.expect(all(k[2] > stop for k in mb2), "the resumed run reports iterations <= %d" % stop)
    for part, want, got in (("after the stop", after, mb2), ("up to the stop", before, mb1)):
        missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        ck.expect(not missing, "%s: metrics of the uninterrupted run missing: %s" % (part, missing[:5]))
        ck.expect(not extra, "%s: metrics the uninterrupted run lacks: %s" % (part, extra[:5]))
        diff = [(k, want[k], got[k]) for k in sorted(set(want) & set(got)) if want[k] != got[k]]
        for k, w, g in diff[:5]:
            ck.fail("%s: %s at iteration %d: uninterrupted %r (epoch %r), resumed %r (epoch %r)"
                    % (part, "/".join(k[:2]), k[2], w[0], w[1], g[0], g[1]))
        if len(diff) > 5:
            ck.fail("%s: %d more differences" % (part, len(diff) - 5))
        print("%s: %d metrics compared, %d differ" % (part, len(set(want) & set(got)), len(diff)))
    sa = {s["iteration"]: s["file"] for s in snapshots(a)}
    sb = {s["iteration"]: s["file"] for s in snapshots(b1) + snapshots(b2)}
    ck.expect(set(k for k in sa if k > stop) == set(k for k in sb if k > stop),
              "snapshot iterations after the stop differ: %s vs %s"
              % (sorted(k for k in sa if k > stop), sorted(k for k in sb if k > stop)))
    final = max(sa) if sa else None
    ck.expect(final is not None and final in sb, "no final snapshot in both runs")
    compared = 0
    for it in sorted(set(sa) & set(sb)):
        for ext in (".cdw", ".solverstate"):
            fa = os.path.join(dir_a, re.sub(r"\.cdw$", ext, sa[it]))
            fb = os.path.join(dir_b, re.sub(r"\.cdw$", ext, sb[it]))
            with open(fa, "rb") as x, open(fb, "rb") as y:
                same = x.read() == y.read()
            compared += 1
            ck.expect(same, "%s and %s differ%s" % (fa, fb, " (the final snapshot)" if it == final
                                                    else ""))
    print("%d snapshot files compared byte for byte (final at iteration %s)" % (compared, final))
    ck.done()


def check_accumulation(log_a, cdw_a, cdw_a_mid, log_b, cdw_b, what_a="64 x 1", what_b="16 x 4",
                       title="batch accumulation"):
    """(c) batch 64 x 1 against batch 16 x 4: the same images per iteration and the same
    mathematics, so the weights and losses differ only by float rounding.

    Tolerance: each gradient is a sum over 64 images either in one pass or as four
    partial sums of 16 scaled by 1/16 and then 1/4 (1/64 exactly in binary), so the
    gradients differ only by float32 rounding in the summation order, about
    sqrt(64) * 6e-8 ~ 5e-7 relative per step. Fourteen momentum steps carry these
    along (a max-pool or ReLU decision that flips on a near tie would add a little
    more); on the reference machine the weights end within about 2e-7 of the largest
    weight of their tensor. We allow 1e-4 of it, room for other summation orders
    (threads, BLAS) on other machines, yet over a thousand times below what one epoch
    of training moves the weights (printed, and required to be at least 30 times the
    tolerance), so a missing 1/iter_size (4x the step) or accumulation over the wrong
    images fails by orders of magnitude."""
    ck = Checker(title)
    for log in (log_a, log_b):
        st = read_status(log)
        ck.expect(st["rc"] == 0, "%s: exit status %s" % (log, st["rc"]))
    wa, wb, wm = read_cdw(cdw_a), read_cdw(cdw_b), read_cdw(cdw_a_mid)
    ck.expect(set(wa) == set(wb), "tensors differ: %s vs %s" % (sorted(wa), sorted(wb)))
    rtol, worst, worst_change = 1e-4, 0.0, float("inf")
    for name in sorted(set(wa) & set(wb)):
        da, va = wa[name]
        db, vb = wb[name]
        if not ck.expect(da == db, "%s: shape %s vs %s" % (name, da, db)):
            continue
        scale = max(max(abs(x) for x in va), 1e-12)
        diff = max(abs(x - y) for x, y in zip(va, vb)) / scale
        change = max(abs(x - y) for x, y in zip(va, wm[name][1])) / scale
        worst = max(worst, diff)
        worst_change = min(worst_change, change)
        print("%-8s max |(%s) - (%s)| = %.2e, the last epoch moved it by %.2e (of max |w|)"
              % (name, what_a, what_b, diff, change))
        ck.expect(all(math.isfinite(x) for x in va + vb), "%s: non-finite weights" % name)
        ck.expect(diff <= rtol, "%s: the weights differ by %.3g of the tensor's largest, above "
                  "%g" % (name, diff, rtol))
    ck.expect(worst_change > 30 * rtol, "an epoch moved some tensor only %.3g, too little for "
              "the comparison to mean anything" % worst_change)
    la, lb = dict(train_losses(read_log(log_a))), dict(train_losses(read_log(log_b)))
    common = sorted(set(la) & set(lb))
    ck.expect(len(common) >= 10, "only %d common loss iterations" % len(common))
    # the loss of an iteration is a mean of 64 float losses summed in another order:
    # ~1e-6 relative; later iterations also carry the weight differences above
    bad = [(i, la[i], lb[i]) for i in common if abs(la[i] - lb[i]) > 1e-4 * abs(la[i]) + 1e-6]
    for i, x, y in bad[:5]:
        ck.fail("train loss at iteration %d: %.9g (%s) vs %.9g (%s)" % (i, x, what_a, y, what_b))
    if common:
        print("train losses at %d iterations: largest difference %.2e" % (
            len(common), max(abs(la[i] - lb[i]) for i in common)))
    ck.done()


def check_error(name, log, *patterns):
    """A run that must fail: exit 1, an error line (the last one) matching every
    pattern, no done line."""
    ck = Checker(name)
    st, lines = read_status(log), read_log(log)
    ck.expect(st["rc"] == 1, "exit status %s, want 1" % st["rc"])
    errs = [l["message"] for l in lines if l.get("type") == "error"]
    if ck.expect(errs, "no error line"):
        print("error: %s" % errs[-1])
        for p in patterns:
            ck.expect(re.search(p, errs[-1], re.I), "the error does not match /%s/: %s" % (p, errs[-1]))
    ck.expect(not [l for l in lines if l.get("type") == "done"], "printed done")
    return ck, lines


def check_nan(jobdir, log):
    """(d) a diverging run stops with an error that suggests a lower learning rate."""
    ck, lines = check_error("NaN stop", log, r"lower(ing)? the learning rate")
    errs = [l["message"] for l in lines if l.get("type") == "error"]
    ck.expect(errs and re.search(r"nan|infinite|inf\b", errs[-1], re.I),
              "the error does not say the loss became NaN or infinite")
    if ck.bad:
        # say what actually happened, to point at the cause
        losses = train_losses(lines)
        if losses:
            print("train losses reported: %s ... %s" % (losses[:4], losses[-2:]))
        for s in snapshots(lines)[-1:]:
            w = read_cdw(os.path.join(jobdir, s["file"]))
            nonfinite = sum(1 for _, v in w.values() for x in v if not math.isfinite(x))
            print("the run's last snapshot (%s) holds %d non-finite weights of %d" % (
                s["file"], nonfinite, sum(len(v) for _, v in w.values())))
    ck.done()


def check_bad_value(jobdir, log, key):
    """(e) a bad train.json value fails before training and names the key."""
    ck, lines = check_error("bad " + key, log, re.escape(key))
    ck.expect(not snapshots(lines), "a snapshot was written")
    ck.expect(not [l for l in lines if l.get("type") == "metric"], "training started")
    ck.done()


def check_val_neutral(log_a, cdw_a, log_b, cdw_b):
    """Validating often (A) trains exactly as validating once at the end (B): the same
    train metrics at every iteration and the same final weights, byte for byte.
    Validation shares the staging buffers that hold the next training batch."""
    ck = Checker("validation leaves training alone")
    a, b = read_log(log_a), read_log(log_b)
    ck.expect(read_status(log_a)["rc"] == 0 and read_status(log_b)["rc"] == 0, "a run failed")
    va = [l for l in a if l.get("type") == "metric" and l.get("phase") == "val"]
    vb = [l for l in b if l.get("type") == "metric" and l.get("phase") == "val"]
    ck.expect(len({l["iteration"] for l in va}) > len({l["iteration"] for l in vb}) >= 1,
              "run A should validate more often than run B")
    ta = {k: v for k, v in metrics(a).items() if k[0] == "train"}
    tb = {k: v for k, v in metrics(b).items() if k[0] == "train"}
    ck.expect(ta and set(ta) == set(tb), "the runs report different train metrics")
    diff = [k for k in sorted(set(ta) & set(tb)) if ta[k] != tb[k]]
    for k in diff[:3]:
        ck.fail("%s at iteration %d: %r validating often, %r validating once" % (k[1], k[2], ta[k][0], tb[k][0]))
    print("%d train metrics compared, %d differ" % (len(set(ta) & set(tb)), len(diff)))
    with open(cdw_a, "rb") as x, open(cdw_b, "rb") as y:
        ck.expect(x.read() == y.read(), "the final weights differ")
    ck.done()


def check_crashed(log, who):
    """(f) a replica thread killed by SIGSEGV: the process ends (by the signal, or with
    the sanitizer's report), its last error line names the replica and the signal."""
    ck = Checker("a replica crashes")
    st, lines = read_status(log), read_log(log)
    ck.expect(st["term_sent"], "the signal was never sent")
    ck.expect(st["rc"] not in (0, 3, "timeout"), "exit status %s: the run went on or hung" % st["rc"])
    errs = [l["message"] for l in lines if l.get("type") == "error"]
    if ck.expect(errs, "no error line"):
        print("error: %s" % errs[-1])
        ck.expect(errs[-1].startswith(who + " crashed with SIGSEGV"),
                  "the last error does not name %s and SIGSEGV: %s" % (who, errs[-1]))
    ck.expect(not [l for l in lines if l.get("type") == "done"], "printed done")
    ck.done()


def mem_in_use(log):
    """The MiB the worker reports in use with its nets built (capped CPU backend)."""
    for l in read_log(log):
        m = re.search(r"with the nets at batch \d+: ([0-9.]+) MiB of", l.get("message", ""))
        if l.get("type") == "log" and m:
            print(m.group(1))
            return
    raise SystemExit("%s: no memory line" % log)


def check_halved(log, per_replica):
    """A capped run halved its batch on running out of memory and kept the effective
    batch: a batch line (reason out of memory) with batch < per_replica and batch x
    accumulation = per_replica, and the run finished."""
    ck = Checker("halved on out of memory")
    lines = read_log(log)
    ck.expect(read_status(log)["rc"] == 0, "exit status %s, want 0" % read_status(log)["rc"])
    b = [l for l in lines if l.get("type") == "batch"]
    if ck.expect(b, "no batch line"):
        b = b[-1]
        print("batch %s x accumulation %s (%s)" % (b["batch"], b["accumulation"], b["reason"]))
        ck.expect(b["reason"] == "out of memory", "reason %r" % b["reason"])
        ck.expect(b["batch"] < int(per_replica) and b["batch"] * b["accumulation"] == int(per_replica),
                  "batch %s x %s is not a smaller split of %s" % (b["batch"], b["accumulation"], per_replica))
    ck.done()


def check_fits(log):
    """A capped run kept the batch it was given and finished: exit 0, a done line, no
    out-of-memory warning or error."""
    ck = Checker("fits its memory cap")
    lines = read_log(log)
    ck.expect(read_status(log)["rc"] == 0, "exit status %s, want 0" % read_status(log)["rc"])
    ck.expect(any(l.get("type") == "done" for l in lines), "no done line")
    for l in lines:
        m = l.get("message", "")
        if "does not fit" in m or "out of" in m and "memory" in m:
            ck.expect(False, "%s: %s" % (l.get("type"), m))
    ck.done()


def corrupt_record(db, index):
    """Overwrites the first 8 bytes (the PNG or JPEG signature) of record `index` of an
    encoded .db (docs/formats.md): the file still opens, the record fails to decode."""
    index = int(index)
    with open(db, "r+b") as f:
        head = f.read(128)
        count, index_offset = struct.unpack_from("<Q", head, 32)[0], struct.unpack_from("<Q", head, 56)[0]
        if index_offset == 0 or index >= count:
            raise SystemExit("%s: no record %d in an encoded dataset" % (db, index))
        f.seek(index_offset + 16 * index)
        offset, size = struct.unpack("<QQ", f.read(16))
        f.seek(offset)
        f.write(b"\0" * min(8, size))


def check_replica_died(log, rank, nranks, record):
    """(f) one replica fails reading its data: the whole run ends at once with exit 1 and
    one error line that names the replica and says what went wrong."""
    ck, lines = check_error("a replica dies", log, r"replica %s of %s" % (rank, nranks),
                            r"record %s\b" % record)
    ck.expect(not snapshots(lines), "a snapshot was written")
    ck.expect(not [l for l in lines if l.get("type") == "metric"], "a step finished")
    ck.done()


def cmd_run(worker, jobdir, log, term_on=None):
    st = run_worker(worker, jobdir, log, term_on)
    print("%s: exit %s in %.1f s%s" % (os.path.basename(jobdir), st["rc"], st["wall_s"],
          "" if not st["term_sent"] else ", SIGTERM sent"))


def cmd_run_crash(worker, jobdir, log, thread):
    """SIGSEGV to the worker's thread named THREAD at the first progress line."""
    st = run_worker(worker, jobdir, log, "progress", sig=signal.SIGSEGV, thread=thread)
    print("%s: exit %s in %.1f s" % (os.path.basename(jobdir), st["rc"], st["wall_s"]))


def check_replicas(*args):
    # data-parallel replicas: each replica's gradient is the mean over its slice, the
    # group's the mean of those, so the same tolerance argument as accumulation holds
    check_accumulation(*args, what_a="1 replica", what_b="2 replicas", title="replicas")


# ---- tests/shell/train_features.sh: the advisor, loader threads, batch_size auto and
# ---- early stopping, on the real worker


def make_images(outdir, per_class, size, seed):
    """2 classes (dark, bright) of per_class size x size color PPM images of uniform
    noise, the bright class lifted by 96: noise makes JPEG records large and slow to
    decode, which is what a data-bound run needs."""
    rnd, size = random.Random(int(seed)), int(size)
    for c, name in enumerate(("dark", "bright")):
        d = os.path.join(outdir, name)
        os.makedirs(d, exist_ok=True)
        table = bytes(min(255, (v >> 1) + 96 * c) for v in range(256))
        for i in range(int(per_class)):
            with open(os.path.join(d, "%03d.ppm" % i), "wb") as f:
                f.write(b"P6\n%d %d\n255\n" % (size, size))
                f.write(rnd.randbytes(size * size * 3).translate(table))


def finished(ck, log, lines):
    """Exit 0 and a done line; returns the train progress lines."""
    st = read_status(log)
    ck.expect(st["rc"] == 0, "exit status %s, want 0" % st["rc"])
    ck.expect(lines and lines[-1].get("type") == "done", "the last line is not done")
    for l in lines:
        if l.get("type") == "error":
            ck.fail("error: %s" % l.get("message"))
    return [l for l in lines if l.get("type") == "progress" and l.get("stage") == "train"]


def advice_lines(lines):
    out = [l for l in lines if l.get("type") == "advice"]
    for a in out:
        print("advice at epoch %.2f: %s (data_wait %.3f): %s" % (a["epoch"], a["limit"], a["data_wait"],
                                                                 a["message"]))
    return out


def thread_changes(lines):
    """The loader thread counts the worker says it moved to, in order."""
    return [int(m.group(1)) for l in lines if l.get("type") == "log"
            for m in [re.search(r"now (\d+) loader threads", l.get("message", ""))] if m]


def cores_of(lines):
    for l in lines:
        m = l.get("type") == "device" and re.search(r"\((\d+) cores\)", l.get("name", ""))
        if m:
            return int(m.group(1))
    return None


def check_data_bound(log, loader, min_wait):
    """A data-bound run: its first advice is limit data with at least min_wait of the
    step waiting, and the message says what to change. loader "fixed" (loader_threads
    given): the thread count never changes and the message names loader_threads;
    "auto": the worker adds threads one at a time from its first window (which waits
    for the very first batch), up to two per core, and says so."""
    ck = Checker("data-bound (%s loader threads)" % loader)
    lines = read_log(log)
    finished(ck, log, lines)
    adv = advice_lines(lines)
    if ck.expect(adv, "no advice line"):
        a = adv[0]
        ck.expect(a["limit"] == "data", "the first advice is %r, want data" % a["limit"])
        ck.expect(a["data_wait"] >= float(min_wait), "the first advice says %.3f of the step waits, "
                  "want at least %s" % (a["data_wait"], min_wait))
        ck.expect("%.0f%%" % (100 * a["data_wait"]) in a["message"], "the message does not give the share")
        if loader == "fixed":
            ck.expect("loader_threads" in a["message"], "the message does not name loader_threads")
    changes, cores = thread_changes(lines), cores_of(lines)
    print("loader threads: %s (%s cores)" % (changes, cores))
    if loader == "fixed":
        ck.expect(not changes, "loader_threads was given, yet the worker changed it: %s" % changes)
    elif ck.expect(changes and cores, "no loader thread was added (or no core count)"):
        start = 4 if cores > 4 else 1
        ck.expect(changes == list(range(start + 1, start + 1 + len(changes))),
                  "threads not added one at a time from %d: %s" % (start, changes))
        ck.expect(changes[-1] <= 2 * cores, "%d threads, above two per core" % changes[-1])
        first = [i for i, l in enumerate(lines) if l.get("type") == "log" and "now %d loader threads"
                 % (start + 1) in l.get("message", "")][0]
        prog = [l for l in lines[:first] if l.get("type") == "progress" and l.get("stage") == "train"]
        ck.expect(not prog, "the first thread was added after iteration %s, not after the first "
                  "window" % (prog[-1]["done"] if prog else None))
    ck.done()


def check_cpu_bound(log):
    """A compute-bound CPU run: the last advice is limit cpu ("compute-bound on the CPU at
    N images/s"), with N the images_per_sec of that window; the data wait of the last
    window is below 5%."""
    ck = Checker("compute-bound on the CPU")
    lines = read_log(log)
    finished(ck, log, lines)
    adv = advice_lines(lines)
    if ck.expect(adv, "no advice line"):
        a = adv[-1]
        ck.expect(a["limit"] == "cpu", "the last advice is %r, want cpu" % a["limit"])
        ck.expect("compute-bound on the CPU at %.0f images/s" % a["images_per_sec"] in a["message"],
                  "the message does not say compute-bound on the CPU at its speed: %s" % a["message"])
    waits = [l["value"] for l in lines if l.get("type") == "metric" and l["name"] == "data_wait"]
    if ck.expect(waits, "no data_wait metric"):
        print("data_wait per window: %s" % " ".join("%.3f" % w for w in waits))
        ck.expect(waits[-1] < 0.05, "the last window waited %.3f for data" % waits[-1])
    ck.done()


def batch_line(ck, lines):
    b = [l for l in lines if l.get("type") == "batch"]
    if not ck.expect(len(b) == 1, "%d batch lines, want 1" % len(b)):
        return None
    b = b[0]
    print("batch %s x %s = %s, largest that fits %s (%s)" % (b["batch"], b["accumulation"], b["effective"],
                                                          b.get("largest"), b["reason"]))
    return b


def check_batch_auto(log, effective, direction):
    """batch_size auto under cpu_memory_mb from the effective batch `effective`: the
    batch line reports the largest batch that fits; direction "up" (it is above the
    effective batch): that batch, one pass; "down": ceil(effective / largest) passes of
    ceil(effective / passes) images; "asked" (memory not capped): the effective batch.
    Prints the largest batch (for the runs that confirm it)."""
    e = int(effective)
    ck = Checker("batch_size auto (%s from %d)" % (direction, e))
    lines = read_log(log)
    finished(ck, log, lines)
    b = batch_line(ck, lines)
    if b:
        m = b.get("largest")
        ck.expect(b["reason"] == "batch_size auto", "reason %r" % b["reason"])
        ck.expect(b["effective"] == b["batch"] * b["accumulation"], "effective is not batch x accumulation")
        if direction == "up":
            ck.expect(m and m > e, "largest %s is not above %d" % (m, e))
            ck.expect((b["batch"], b["accumulation"]) == (m, 1), "not batch %s in one pass" % m)
        elif direction == "down":
            ck.expect(m and m < e, "largest %s is not below %d" % (m, e))
            if m:
                passes = -(-e // m)
                ck.expect((b["batch"], b["accumulation"]) == (-(-e // passes), passes),
                          "want %d passes of %d" % (passes, -(-e // passes)))
        else:
            ck.expect((b["batch"], b["accumulation"], m) == (e, 1, e), "not the network's batch")
        said = [l["message"] for l in lines if l.get("type") == "log" and "batch_size auto" in l.get("message", "")]
        want = {"up": "batch %s is the largest that fits in cpu memory (%s does not)" % (m, (m or 0) + 1),
                "down": "batch %s is the largest that fits in cpu memory (%s does not)" % (m, (m or 0) + 1),
                "asked": "is not searched above the network's batch"}[direction]
        ck.expect(any(want in s for s in said), "no log line saying %r: %s" % (want, said))
        with open(log + ".largest", "w") as f:
            f.write("%s\n" % m)
    ck.done()


def check_no_fit(log, batch):
    """A run given batch `batch` under a cap finds it does not fit (and halves)."""
    ck = Checker("batch %s does not fit" % batch)
    lines = read_log(log)
    finished(ck, log, lines)
    said = [l["message"] for l in lines if l.get("type") == "log" and l.get("level") == "warning"]
    ck.expect(any(s.startswith("batch %s does not fit in cpu memory" % batch) for s in said),
              "no warning that batch %s does not fit: %s" % (batch, said))
    b = batch_line(ck, lines)
    ck.expect(b and b["reason"] == "out of memory", "no out-of-memory batch line")
    ck.done()


def val_losses(lines):
    return [(l["iteration"], l["epoch"], l["value"]) for l in lines
            if l.get("type") == "metric" and l["phase"] == "val" and l["name"] == "loss"]


def check_early_stop(log, patience, min_delta, want_epoch, per_epoch, plateau=None):
    """Early stopping stops after validation `want_epoch` (validating once per epoch of
    per_epoch iterations): the rule applied to the val losses the run reports
    (independently, here) stops there too; the run says so, trains no further, writes
    its snapshot there, and evaluates the test split at that iteration. With plateau
    (an iteration): the learning rate is 0 from it on and the val losses after it
    equal the one at it exactly (the plateau the test built)."""
    patience, min_delta, want, per_epoch = int(patience), float(min_delta), int(want_epoch), int(per_epoch)
    ck = Checker("early stopping (patience %d, min_delta %g)" % (patience, min_delta))
    lines = read_log(log)
    prog = finished(ck, log, lines)
    vl = val_losses(lines)
    print("val loss by epoch: %s" % ", ".join("%.0f: %.6f" % (e, v) for _, e, v in vl))
    best, stale, stop = math.inf, 0, None
    for it, e, v in vl:
        if v < best - min_delta:
            best, stale = v, 0
        else:
            stale += 1
            if stale >= patience:
                stop = it
                break
    ck.expect(stop == want * per_epoch, "the rule applied to the reported val losses stops at "
              "iteration %s, the test expects %d" % (stop, want * per_epoch))
    ck.expect(vl and vl[-1][0] == want * per_epoch, "the last validation is at iteration %s, want %d"
              % (vl[-1][0] if vl else None, want * per_epoch))
    ck.expect(prog and prog[-1]["done"] == want * per_epoch and prog[-1]["total"] > prog[-1]["done"],
              "training went on to %s (of %s)" % (prog[-1]["done"] if prog else None,
                                                   prog[-1]["total"] if prog else None))
    ck.expect(any(l.get("type") == "log" and l.get("message", "").startswith("stopping early at epoch %.2f"
                                                                            % want) for l in lines),
              "no log line saying it stops early at epoch %d" % want)
    snaps = [s["iteration"] for s in snapshots(lines)]
    ck.expect(snaps and snaps[-1] == want * per_epoch, "the last snapshot is at %s" % snaps[-1:])
    test = [l for l in lines if l.get("type") == "metric" and l["phase"] == "test"]
    if test:
        ck.expect(all(l["iteration"] == want * per_epoch and abs(l["epoch"] - want) < 1e-9 for l in test),
                  "test metrics at iterations %s, want %d" % (sorted({l["iteration"] for l in test}),
                                                             want * per_epoch))
    if plateau is not None:
        p = int(plateau)
        lr = [(l["iteration"], l["value"]) for l in lines if l.get("type") == "metric"
              and l["name"] == "learning_rate"]
        ck.expect(all((v == 0) == (it > p) for it, v in lr), "the learning rate is not 0 exactly "
                  "after iteration %d: %s" % (p, lr))
        at = [v for it, _, v in vl if it == p]
        ck.expect(at and all(v == at[0] for it, _, v in vl if it >= p), "the val loss is not flat "
                  "from iteration %d on" % p)
    ck.done()


def check_warned(log, *patterns):
    """A run that finished all its iterations and logged one warning matching every
    pattern (early stopping that cannot act)."""
    ck = Checker("warned")
    lines = read_log(log)
    prog = finished(ck, log, lines)
    ck.expect(prog and prog[-1]["done"] == prog[-1]["total"], "the run did not train to its end")
    warn = [l["message"] for l in lines if l.get("type") == "log" and l.get("level") == "warning"
            and all(re.search(p, l.get("message", "")) for p in patterns)]
    ck.expect(len(warn) == 1, "%d warnings match %s" % (len(warn), patterns))
    for w in warn:
        print("warning: %s" % w)
    ck.expect(not any("stopping early" in l.get("message", "") for l in lines), "it stopped early")
    ck.done()


def same_file(a, b):
    """Two snapshot files are byte-identical (the loader's thread count never changes
    which images a step trains on)."""
    with open(a, "rb") as x, open(b, "rb") as y:
        same = x.read() == y.read()
    print("%s %s %s" % (a, "==" if same else "!=", b))
    sys.exit(0 if same else 1)


COMMANDS = {
    "make-idx": make_idx,
    "run": cmd_run,
    "run-crash": cmd_run_crash,
    "rc": lambda log: print(read_status(log)["rc"]),
    "plain": check_plain,
    "stopped": check_stopped,
    "resume": check_resume,
    "accumulation": check_accumulation,
    "replicas": check_replicas,
    "nan": check_nan,
    "bad-value": check_bad_value,
    "val-neutral": check_val_neutral,
    "fits": check_fits,
    "mem-in-use": mem_in_use,
    "halved": check_halved,
    "corrupt-record": corrupt_record,
    "replica-died": check_replica_died,
    "crashed": check_crashed,
    "make-images": make_images,
    "data-bound": check_data_bound,
    "cpu-bound": check_cpu_bound,
    "batch-auto": check_batch_auto,
    "no-fit": check_no_fit,
    "early-stop": check_early_stop,
    "warned": check_warned,
    "same-file": same_file,
}


def main(argv):
    if len(argv) < 2 or argv[1] not in COMMANDS:
        raise SystemExit("usage: lib_train.py %s ..." % "|".join(sorted(COMMANDS)))
    COMMANDS[argv[1]](*argv[2:])

if __name__ == "__main__":
    main(sys.argv)
