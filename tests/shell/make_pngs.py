#!/usr/bin/env python3
"""Writes a small image classification folder of PNGs with the standard library only.

    make_pngs.py OUTDIR [--classes 3] [--per-class 20] [--size 28] [--seed 1]

Class k draws a bright bar in a position of its own (horizontal, vertical, diagonal,
...) on a noisy dark background, so a tiny network can tell the classes apart after an
epoch or two. Gray 8-bit PNGs, one subfolder per class.
"""
import argparse
import os
import random
import struct
import zlib


def png(path, w, h, pixels):
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + bytes(pixels[y * w:(y + 1) * w]) for y in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def draw(k, w, h, rnd):
    px = [rnd.randint(0, 60) for _ in range(w * h)]
    off = rnd.randint(-2, 2)
    for i in range(min(w, h)):
        for t in range(-1, 2):
            if k % 3 == 0:
                x, y = i, h // 2 + off + t
            elif k % 3 == 1:
                x, y = w // 2 + off + t, i
            else:
                x, y = i, i + off + t
            if 0 <= x < w and 0 <= y < h:
                px[y * w + x] = rnd.randint(200, 255)
    return px


def arguments(per_class, seed):
    """The command line of this and tests/ui/make_images.py:
    OUTDIR [--classes 3] [--per-class N] [--size 28] [--seed N]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--per-class", type=int, default=per_class)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--seed", type=int, default=seed)
    return ap.parse_args()


def write_folder(out, names, per_class, size, pixels, file_name=lambda name, i: "%03d.png" % i):
    """One subfolder per class name, each with per_class size x size PNGs; pixels(k)
    draws an image of class k, file_name(name, i) names the i-th."""
    for k, name in enumerate(names):
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            png(os.path.join(d, file_name(name, i)), size, size, pixels(k))


def main():
    a = arguments(per_class=20, seed=1)
    rnd = random.Random(a.seed)
    known = ["bars", "columns", "diagonals", "class3", "class4", "class5"]
    names = [known[k] if k < len(known) else "class%d" % k for k in range(a.classes)]
    write_folder(a.out, names, a.per_class, a.size, lambda k: draw(k, a.size, a.size, rnd))


if __name__ == "__main__":
    main()
