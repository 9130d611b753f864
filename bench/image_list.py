#!/usr/bin/env python3
"""The first N PNG files, in sorted order, under a dataset job's training folder
(dataset.json's folder_train), one path a line: the list that bench/bench_train.sh's
CDIGITS_BENCH_CLASSIFY=1 runs cdigits-worker classify --list on.

    image_list.py DATASET_JSON N
"""
import json
import os
import sys


def main():
    root = json.load(open(sys.argv[1]))["folder_train"]
    n = int(sys.argv[2])
    paths = sorted(os.path.join(d, f) for d, _, files in os.walk(root, followlinks=True)
                   for f in files if f.endswith(".png"))
    if len(paths) < n:
        sys.exit("image_list: %s has %d PNG files, fewer than %d (CDIGITS_BENCH_IMAGES)" % (root, len(paths), n))
    print("\n".join(paths[:n]))


if __name__ == "__main__":
    main()
