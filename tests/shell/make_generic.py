#!/usr/bin/env python3
"""Writes the small generic datasets the tests train on, with the standard library only.

    make_generic.py shapes OUTDIR [--count 48] [--size 32] [--seed 1] [--max-size M]
        OUTDIR/images/NNN.png  RGB: a textured background with rectangles and discs
        OUTDIR/labels/NNN.png  8-bit paletted: 0 background, 1 rectangle, 2 disc, 255 the
                               one-pixel ignore border around every shape
        OUTDIR/classes.txt     background, rectangle, disc
    make_generic.py boxes OUTDIR [--count 40] [--size 64] [--seed 1] [--apart]
        OUTDIR/images/NNN.png  RGB: a textured background with 1 to 3 rectangles and discs,
                               some cut by the image's edges; with --apart no two shapes
                               (nor a shape and the DontCare patch) overlap, shapes that
                               find no free place after 50 tries being left out
        OUTDIR/labels/NNN.txt  KITTI: `type truncated occluded alpha x1 y1 x2 y2 h w l x y z
                               rotation_y` a line, types rectangle, disc and DontCare (a patch
                               of coarse noise); x2, y2 are the edges past the last pixel
        OUTDIR/classes.txt     dontcare,rectangle,disc (DIGITS's custom_classes)
    make_generic.py dots OUTDIR [--count 200] [--size 32] [--seed 1]
        OUTDIR/images/NNN.png  gray noise with one bright 3x3 dot
        OUTDIR/train.txt       `images/NNN.png x y` (the dot's centre, in pixels)
    make_generic.py digits OUTDIR [--count 40] [--size 16] [--seed 1]
        OUTDIR/<d>/NNN.png     gray digits 0..4 drawn from a 3x5 font, shifted and noisy
    make_generic.py net-dot FILE       a small network regressing the dot's x, y
                                       (EuclideanLoss; the targets give its output count)
    make_generic.py net-siamese FILE   DIGITS's Siamese example, smaller: Slice, two
                                       branches sharing weights by param names, Silence,
                                       ContrastiveLoss
    Both networks have no data layers: DIGITS's are added, and carry generic labels.
"""
import argparse
import os
import random
import struct
import zlib

PALETTE = [(0, 0, 0), (128, 0, 0), (0, 128, 0)]


def png(path, w, h, rows, color_type, palette=None):
    """rows: a list of h byte strings (w * channels bytes each)."""
    def chunk(kind, data):
        c = struct.pack(">I", len(data)) + kind + data
        return c + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + bytes(r) for r in rows)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
    if palette is not None:
        data += chunk(b"PLTE", b"".join(bytes(c) for c in palette))
    data += chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(data)


def shapes(out, count, size, seed, max_size=None):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "labels"), exist_ok=True)
    palette = PALETTE + [(0, 0, 0)] * (255 - len(PALETTE)) + [(224, 224, 192)]
    for n in range(count):
        # --max-size: each image's height and width drawn from size .. max_size
        hgt = rnd.randint(size, max_size) if max_size else size
        wid = rnd.randint(size, max_size) if max_size else size
        label = [[0] * wid for _ in range(hgt)]
        img = [[(rnd.randint(20, 90), rnd.randint(20, 90), rnd.randint(20, 90)) for _ in range(wid)]
               for _ in range(hgt)]
        for _ in range(rnd.randint(1, 3)):
            kind = rnd.choice((1, 2))
            r = rnd.randint(4, min(hgt, wid) // 4)
            cy, cx = rnd.randint(r, hgt - 1 - r), rnd.randint(r, wid - 1 - r)
            base = (rnd.randint(170, 255), rnd.randint(0, 80), rnd.randint(0, 80)) if kind == 1 else \
                   (rnd.randint(0, 80), rnd.randint(170, 255), rnd.randint(0, 80))
            inside = []
            for y in range(hgt):
                for x in range(wid):
                    d2 = (y - cy) ** 2 + (x - cx) ** 2
                    if (kind == 1 and abs(y - cy) <= r and abs(x - cx) <= r) or (kind == 2 and d2 <= r * r):
                        inside.append((y, x))
            for y, x in inside:
                img[y][x] = tuple(min(255, max(0, v + rnd.randint(-20, 20))) for v in base)
                label[y][x] = kind
        # the ignore border: pixels of a shape that touch another label
        border = [[False] * wid for _ in range(hgt)]
        for y in range(hgt):
            for x in range(wid):
                for dy, dx in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                    yy, xx = y + dy, x + dx
                    if 0 <= yy < hgt and 0 <= xx < wid and label[yy][xx] != label[y][x] and label[y][x]:
                        border[y][x] = True
        for y in range(hgt):
            for x in range(wid):
                if border[y][x]:
                    label[y][x] = 255
        name = "%03d.png" % n
        png(os.path.join(out, "images", name), wid, hgt,
            [bytes(v for p in row for v in p) for row in img], 2)
        png(os.path.join(out, "labels", name), wid, hgt, [bytes(row) for row in label], 3, palette)
    with open(os.path.join(out, "classes.txt"), "w") as f:
        f.write("background\nrectangle\ndisc\n")


def boxes(out, count, size, seed, apart=False):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    os.makedirs(os.path.join(out, "labels"), exist_ok=True)
    for n in range(count):
        img = [[(rnd.randint(20, 90), rnd.randint(20, 90), rnd.randint(20, 90)) for _ in range(size)]
               for _ in range(size)]
        lines = []
        taken = []  # apart: the boxes placed so far, each shape kept a few pixels from them
        if rnd.random() < 0.3:
            # a DontCare patch: coarse grey noise, neither class
            w, h = rnd.randint(size // 8, size // 4), rnd.randint(size // 8, size // 4)
            x1, y1 = rnd.randint(0, size - w), rnd.randint(0, size - h)
            for y in range(y1, y1 + h):
                for x in range(x1, x1 + w):
                    v = rnd.choice((30, 220)) if (x // 2 + y // 2) % 2 else rnd.randint(90, 160)
                    img[y][x] = (v, v, v)
            lines.append("DontCare -1 -1 -10 %.2f %.2f %.2f %.2f -1 -1 -1 -1000 -1000 -1000 -10\n"
                         % (x1, y1, x1 + w, y1 + h))
            taken.append((x1, y1, x1 + w, y1 + h))
        for _ in range(rnd.randint(1, 3)):
            kind = rnd.choice(("rectangle", "disc"))
            if kind == "rectangle":
                hw, hh = rnd.randint(size // 10, size // 4), rnd.randint(size // 10, size // 4)
            else:
                hw = hh = rnd.randint(size // 10, size // 4)
            for _ in range(50 if apart else 1):
                if rnd.random() < 0.25:
                    # the centre up to half a shape past an edge: a truncated object
                    cx, cy = rnd.randint(-hw // 2, size - 1 + hw // 2), rnd.randint(-hh // 2, size - 1 + hh // 2)
                else:
                    cx, cy = rnd.randint(hw, size - 1 - hw), rnd.randint(hh, size - 1 - hh)
                gap = 4
                if not apart or not any(cx - hw - gap < t[2] and t[0] < cx + hw + 1 + gap and
                           cy - hh - gap < t[3] and t[1] < cy + hh + 1 + gap for t in taken):
                    break
            else:
                continue
            taken.append((cx - hw, cy - hh, cx + hw + 1, cy + hh + 1))
            base = (rnd.randint(170, 255), rnd.randint(0, 80), rnd.randint(0, 80)) if kind == "rectangle" else \
                   (rnd.randint(0, 80), rnd.randint(170, 255), rnd.randint(0, 80))
            xs, ys = [], []
            for y in range(max(0, cy - hh), min(size, cy + hh + 1)):
                for x in range(max(0, cx - hw), min(size, cx + hw + 1)):
                    if kind == "disc" and (y - cy) ** 2 + (x - cx) ** 2 > hw * hw:
                        continue
                    img[y][x] = tuple(min(255, max(0, v + rnd.randint(-20, 20))) for v in base)
                    xs.append(x)
                    ys.append(y)
            if not xs:
                continue
            full = (2 * hw + 1) * (2 * hh + 1)
            seen = (max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1)
            truncated = round(1.0 - seen / full, 2)
            lines.append("%s %.2f 0 0 %.2f %.2f %.2f %.2f 1.5 1.6 3.9 0 1.7 20 0\n"
                         % (kind, truncated, min(xs), min(ys), max(xs) + 1, max(ys) + 1))
        name = "%03d" % n
        png(os.path.join(out, "images", name + ".png"), size, size,
            [bytes(v for p in row for v in p) for row in img], 2)
        with open(os.path.join(out, "labels", name + ".txt"), "w") as f:
            f.writelines(lines)
    with open(os.path.join(out, "classes.txt"), "w") as f:
        f.write("dontcare,rectangle,disc\n")


def dots(out, count, size, seed):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(out, "images"), exist_ok=True)
    lines = []
    for n in range(count):
        px = [[rnd.randint(0, 70) for _ in range(size)] for _ in range(size)]
        cy, cx = rnd.randint(2, size - 3), rnd.randint(2, size - 3)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                px[cy + dy][cx + dx] = 255 if dy == 0 and dx == 0 else 200
        name = "images/%03d.png" % n
        png(os.path.join(out, name), size, size, [bytes(r) for r in px], 0)
        lines.append("%s %d %d\n" % (name, cx, cy))
    with open(os.path.join(out, "train.txt"), "w") as f:
        f.writelines(lines)


FONT = {  # 3x5 digits
    0: ["###", "#.#", "#.#", "#.#", "###"], 1: [".#.", "##.", ".#.", ".#.", "###"],
    2: ["###", "..#", "###", "#..", "###"], 3: ["###", "..#", ".##", "..#", "###"],
    4: ["#.#", "#.#", "###", "..#", "..#"],
}


def digits(out, count, size, seed):
    rnd = random.Random(seed)
    scale = max(1, size // 7)
    for d, rows in FONT.items():
        os.makedirs(os.path.join(out, str(d)), exist_ok=True)
        for n in range(count):
            px = [[rnd.randint(0, 40) for _ in range(size)] for _ in range(size)]
            # a little jitter around the centre, so that a small net generalizes
            cy, cx = (size - 5 * scale) // 2, (size - 3 * scale) // 2
            oy = min(size - 5 * scale, max(0, cy + rnd.randint(-2, 1)))
            ox = min(size - 3 * scale, max(0, cx + rnd.randint(-2, 1)))
            for y, row in enumerate(rows):
                for x, c in enumerate(row):
                    if c == "#":
                        for sy in range(scale):
                            for sx in range(scale):
                                px[oy + y * scale + sy][ox + x * scale + sx] = rnd.randint(200, 255)
            png(os.path.join(out, str(d), "%03d.png" % n), size, size, [bytes(r) for r in px], 0)


DOT_NET = """layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0039 } }
layer { name: "conv1" type: "Convolution" bottom: "scaled" top: "conv1"
  convolution_param { num_output: 16 kernel_size: 5 pad: 2 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "conv1" top: "conv1" }
layer { name: "pool1" type: "Pooling" bottom: "conv1" top: "pool1" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "conv2" type: "Convolution" bottom: "pool1" top: "conv2"
  convolution_param { num_output: 16 kernel_size: 3 pad: 1 weight_filler { type: "xavier" } } }
layer { name: "relu2" type: "ReLU" bottom: "conv2" top: "conv2" }
layer { name: "pool2" type: "Pooling" bottom: "conv2" top: "pool2" pooling_param { pool: MAX kernel_size: 2 stride: 2 } }
layer { name: "ip1" type: "InnerProduct" bottom: "pool2" top: "ip1"
  inner_product_param { num_output: 64 weight_filler { type: "xavier" } } }
layer { name: "relu3" type: "ReLU" bottom: "ip1" top: "ip1" }
# no num_output: a regression dataset's targets (2 here)
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2" inner_product_param { weight_filler { type: "xavier" } } }
layer { name: "loss" type: "EuclideanLoss" bottom: "ip2" bottom: "label" top: "loss" exclude { stage: "deploy" } }
"""


def siamese_branch(side):
    return f"""
layer {{ name: "conv1_{side}" type: "Convolution" bottom: "data_{side}" top: "conv1_{side}"
  param {{ name: "conv1_w" }} param {{ name: "conv1_b" lr_mult: 2 }}
  convolution_param {{ num_output: 8 kernel_size: 5 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" }} }} }}
layer {{ name: "pool1_{side}" type: "Pooling" bottom: "conv1_{side}" top: "pool1_{side}"
  pooling_param {{ pool: MAX kernel_size: 2 stride: 2 }} }}
layer {{ name: "ip1_{side}" type: "InnerProduct" bottom: "pool1_{side}" top: "ip1_{side}"
  param {{ name: "ip1_w" }} param {{ name: "ip1_b" lr_mult: 2 }}
  inner_product_param {{ num_output: 32 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" }} }} }}
layer {{ name: "relu1_{side}" type: "ReLU" bottom: "ip1_{side}" top: "ip1_{side}" }}
layer {{ name: "feat_{side}" type: "InnerProduct" bottom: "ip1_{side}" top: "feat_{side}"
  param {{ name: "feat_w" }} param {{ name: "feat_b" lr_mult: 2 }}
  inner_product_param {{ num_output: 2 weight_filler {{ type: "xavier" }} bias_filler {{ type: "constant" }} }} }}
"""


SIAMESE_NET = """layer { name: "scale" type: "Power" bottom: "data" top: "scale" power_param { scale: 0.0125 } }
layer { name: "slice_triplet" type: "Slice" bottom: "scale" top: "data_left" top: "data_right" top: "data_discard"
  slice_param { slice_dim: 1 } }
""" + siamese_branch("left") + siamese_branch("right") + """
layer { name: "discard" type: "Silence" bottom: "data_discard" }
layer { name: "loss" type: "ContrastiveLoss" bottom: "feat_left" bottom: "feat_right" bottom: "label" top: "loss"
  contrastive_loss_param { margin: 1.0 } exclude { stage: "deploy" } }
"""


def write_net(text):
    def make(out, count, size, seed):
        with open(out, "w") as f:
            f.write(text)
    return make


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=("shapes", "boxes", "dots", "digits", "net-dot", "net-siamese"))
    ap.add_argument("out")
    ap.add_argument("--count", type=int)
    ap.add_argument("--size", type=int)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-size", type=int, help="shapes: images of varying size, size to max-size a side")
    ap.add_argument("--apart", action="store_true",
                    help="boxes: shapes never overlap one another or the DontCare patch")
    a = ap.parse_args()
    defaults = {"shapes": (48, 32), "boxes": (40, 64), "dots": (200, 32), "digits": (40, 16)}.get(a.kind, (0, 0))
    make = {"shapes": shapes, "boxes": boxes, "dots": dots, "digits": digits, "net-dot": write_net(DOT_NET),
            "net-siamese": write_net(SIAMESE_NET)}[a.kind]
    extra = {"shapes": {"max_size": a.max_size}, "boxes": {"apart": a.apart}}.get(a.kind, {})
    make(a.out, a.count or defaults[0], a.size or defaults[1], a.seed, **extra)


if __name__ == "__main__":
    main()
