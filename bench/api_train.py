#!/usr/bin/env python3
"""One training run through cdigits's REST API, timed end to end (bench/bench_train.sh,
CDIGITS_BENCH_API=1): logs in, posts a standard-network model on an existing dataset
(DIGITS 6.1's POST /models/images/classification/json), polls the job's status every
50 ms until it ends, and prints one JSON line with the training images per second over
that whole wall time: the worker's start, the dataset's loading, every epoch, the
validation after each epoch and the snapshots are all in it.

    api_train.py BASE_URL DATASET_ID SERVER_PID NETWORK EPOCHS BATCH TRAIN_IMAGES

"others" is the share of the machine's CPU time (from /proc/stat) that went neither to
the server nor to its workers (the server's own and its reaped children's time, from
/proc/SERVER_PID/stat) during the run.
"""
import http.cookiejar
import json
import os
import sys
import time
import urllib.parse
import urllib.request


def machine():
    v = list(map(int, open("/proc/stat").readline().split()[1:9]))
    return sum(v), v[3] + v[4]


def server_ticks(pid):
    # fields after the command's closing parenthesis: utime is the 12th, then stime,
    # cutime, cstime
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in f[11:15])


def main():
    base, dataset, pid, net = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    epochs, batch, images = int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    web = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
    web.open(base + "/login", urllib.parse.urlencode({"username": "bench"}).encode())
    form = {"method": "standard", "standard_networks": net, "framework": "caffe", "dataset": dataset,
            "train_epochs": epochs, "batch_size": batch, "random_seed": 1, "model_name": "bench-%s" % net}
    t0, i0 = machine()
    s0 = server_ticks(pid)
    w0 = time.perf_counter()
    job = json.load(web.open(base + "/models/images/classification/json",
                             urllib.parse.urlencode(form).encode()))["id"]
    while True:
        status = json.load(web.open(base + "/jobs/%s/status" % job))["status"]
        if status in ("Done", "Error", "Aborted"):
            break
        time.sleep(0.05)
    wall = time.perf_counter() - w0
    t1, i1 = machine()
    own = server_ticks(pid) - s0
    if status != "Done":
        sys.exit("api_train: job %s ended %s" % (job, status))
    others = max(0.0, ((t1 - t0) - (i1 - i0) - own) / max(1, t1 - t0))
    print(json.dumps({"images_per_sec": epochs * images / wall, "data_wait": 0.0, "iters": 0,
                      "wall": wall, "others": others, "job": job}))


if __name__ == "__main__":
    main()
