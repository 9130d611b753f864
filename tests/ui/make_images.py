#!/usr/bin/env python3
"""Writes a folder of class folders of gray PNGs for the browser tests (standard library only).

    make_images.py OUTDIR [--classes 3] [--per-class 40] [--size 28] [--seed N]

Class 0 draws a horizontal bar, class 1 a vertical bar, class 2 a diagonal, class 3 a
square, on dark noise at a random offset, so LeNet separates them within an epoch or two.
The seed is drawn afresh unless given, and printed.
"""
import argparse
import os
import random
import struct
import zlib

NAMES = ["horizontal", "vertical", "diagonal", "square"]


def write_png(path, w, h, pixels):
    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + bytes(pixels[y * w:(y + 1) * w]) for y in range(h))
    data = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def draw(k, n, rnd):
    px = [rnd.randint(0, 50) for _ in range(n * n)]
    o = rnd.randint(-n // 6, n // 6)
    mid = n // 2 + o
    for i in range(n // 8, n - n // 8):
        for t in (-1, 0, 1):
            if k == 0:
                y, x = mid + t, i
            elif k == 1:
                y, x = i, mid + t
            elif k == 2:
                y, x = i, min(n - 1, max(0, i + o + t))
            else:
                lo, hi = n // 4 + o // 2, 3 * n // 4 + o // 2
                if not (lo <= i <= hi):
                    continue
                for y, x in ((lo + t, i), (hi + t, i), (i, lo + t), (i, hi + t)):
                    if 0 <= y < n and 0 <= x < n:
                        px[y * n + x] = rnd.randint(200, 255)
                continue
            if 0 <= y < n and 0 <= x < n:
                px[y * n + x] = rnd.randint(200, 255)
    return px


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--per-class", type=int, default=40)
    ap.add_argument("--size", type=int, default=28)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rnd = random.Random(seed)
    for k in range(min(a.classes, len(NAMES))):
        d = os.path.join(a.out, NAMES[k])
        os.makedirs(d, exist_ok=True)
        for i in range(a.per_class):
            write_png(os.path.join(d, "%s_%03d.png" % (NAMES[k], i)), a.size, a.size, draw(k, a.size, rnd))
    print("make_images: %d classes x %d images of %dx%d in %s (seed %d)"
          % (min(a.classes, len(NAMES)), a.per_class, a.size, a.size, a.out, seed))


if __name__ == "__main__":
    main()
