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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--per-class", type=int, default=20)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    names = ["bars", "columns", "diagonals", "class3", "class4", "class5"]
    for k in range(a.classes):
        d = os.path.join(a.out, names[k] if k < len(names) else "class%d" % k)
        os.makedirs(d, exist_ok=True)
        for i in range(a.per_class):
            png(os.path.join(d, "%03d.png" % i), a.size, a.size, draw(k, a.size, a.size, rnd))


if __name__ == "__main__":
    main()
