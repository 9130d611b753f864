#!/usr/bin/env python3
"""Writes a folder of class folders of gray PNGs for the browser tests (standard library only).

    make_images.py OUTDIR [--classes 3] [--per-class 40] [--size 28] [--seed N]

Class 0 draws a horizontal bar, class 1 a vertical bar, class 2 a diagonal, class 3 a
square, on dark noise at a random offset, so LeNet separates them within an epoch or two.
The seed is drawn afresh unless given, and printed.
"""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "shell"))
import make_pngs  # noqa: E402  (the PNG writer and the command line)

NAMES = ["horizontal", "vertical", "diagonal", "square"]


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
    a = make_pngs.arguments(per_class=40, seed=None)
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 30)
    rnd = random.Random(seed)
    names = NAMES[:a.classes]
    make_pngs.write_folder(a.out, names, a.per_class, a.size, lambda k: draw(k, a.size, rnd),
                           lambda name, i: "%s_%03d.png" % (name, i))
    print("make_images: %d classes x %d images of %dx%d in %s (seed %d)"
          % (len(names), a.per_class, a.size, a.size, a.out, seed))


if __name__ == "__main__":
    main()
