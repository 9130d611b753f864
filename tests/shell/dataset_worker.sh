#!/usr/bin/env bash
# Black-box test of `cdigits-worker import-idx` and `cdigits-worker dataset`: a small
# generated IDX pair becomes class folders, then a dataset job; bad configs fail with
# an error line and leave no stats.json. Skips (tests/shell/skip.bash) without a worker.
set -u
. "$(dirname "$0")/skip.bash"
BUILD=${CDIGITS_BUILD_DIR:-build}
W=$BUILD/cdigits-worker
[ -x "$W" ] || skip_test "$W does not exist yet (build the cdigits-worker target first)"
T=$(mktemp -d "${TMPDIR:-/tmp}/cdigits-dataset-sh-XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
check() { if eval "$1"; then pass "$2"; else fail "$2"; fi; }

# 30 images of 6x5 (rows x cols) with random pixels, labels 0,1,2 repeating
n=30
{ printf '\x00\x00\x08\x03\x00\x00\x00\x1e\x00\x00\x00\x06\x00\x00\x00\x05'
  head -c $((n * 30)) /dev/urandom; } > "$T/img.idx"
{ printf '\x00\x00\x08\x01\x00\x00\x00\x1e'
  for i in $(seq 0 $((n - 1))); do printf "\\x0$((i % 3))"; done; } > "$T/lab.idx"

out=$("$W" import-idx --images "$T/img.idx" --labels "$T/lab.idx" --out "$T/src" \
      --labels-names "tshirt_top,trouser,bag")
rc=$?
check "[ $rc -eq 0 ]" "import-idx exits 0 (got $rc)"
check "[ \"\$(echo \"\$out\" | tail -n1)\" = '{\"type\":\"done\"}' ]" "import-idx ends with done"
check "[ \$(find \"$T/src\" -name '*.png' | wc -l) -eq $n ]" "import-idx wrote $n PNGs"
check "[ -f \"$T/src/bag/02.png\" ]" "image 2 is in bag/"

# swapped files: a clear error, exit 1
out=$("$W" import-idx --images "$T/lab.idx" --labels "$T/img.idx" --out "$T/x" 2>/dev/null)
rc=$?
check "[ $rc -eq 1 ] && echo \"\$out\" | grep -q 'did you swap'" "swapped IDX files fail clearly"
"$W" import-idx --images "$T/img.idx" >/dev/null 2>&1
check "[ $? -eq 2 ]" "import-idx without --labels/--out is a usage error"

# a dataset job, with one junk file among the images
echo "not an image" > "$T/src/bag/readme.txt"
mkdir -p "$T/job"
cat > "$T/job/dataset.json" <<JSON
{"folder_train": "$T/src", "channels": 1, "width": 8, "height": 8,
 "resize_mode": "fill", "encoding": "png", "pct_val": 20, "seed": 3}
JSON
"$W" dataset "$T/job" > "$T/out.jsonl" 2> "$T/err.txt"
rc=$?
check "[ $rc -eq 0 ]" "dataset exits 0 (got $rc; $(tail -c 300 "$T/err.txt"))"
check "! grep -qv '^{\"type\":' \"$T/out.jsonl\"" "every stdout line is a JSON object with a type"
check "[ \"\$(tail -n1 \"$T/out.jsonl\")\" = '{\"type\":\"done\"}' ]" "dataset ends with done"
check "grep -q '\"type\":\"dataset\".*\"skipped\":1' \"$T/out.jsonl\"" "dataset line counts 1 skipped file"
check "grep -q '\"stage\":\"create\"' \"$T/out.jsonl\"" "create progress lines"
check "grep -q 'readme.txt' \"$T/out.jsonl\"" "the skipped file is named in the log"
for f in train.db val.db labels.txt mean.bin mean.png stats.json; do
    check "[ -s \"$T/job/$f\" ]" "$f written"
done
check "[ \"\$(head -c4 \"$T/job/train.db\")\" = CDDB ]" "train.db starts with CDDB"
check "[ \"\$(cat \"$T/job/labels.txt\" | tr '\n' ' ')\" = 'bag trouser tshirt_top ' ]" "labels.txt in sorted order"

# the same images as BMP (24-bit), PGM (binary, 16-bit) and PPM (text): the dataset's
# records are the PNG dataset's, byte for byte (the junk file skipped the same way)
python3 - "$T/img.idx" "$T/src" "$T/src-other" <<'PY'
import os, struct, sys
idx, png_root, out = sys.argv[1:]
data = open(idx, "rb").read()[16:]
rows, cols = 6, 5
def bmp(px):
    row = (cols * 3 + 3) // 4 * 4
    body = b"".join(bytes(v for x in range(cols) for v in (px[y * cols + x],) * 3).ljust(row, b"\0")
                    for y in reversed(range(rows)))
    head = struct.pack("<2sIHHIIiiHHIIiiII", b"BM", 54 + len(body), 0, 0, 54, 40, cols, rows, 1, 24, 0,
                       len(body), 2835, 2835, 0, 0)
    return head + body
def pgm16(px):
    return b"P5\n%d %d\n65535\n" % (cols, rows) + b"".join(struct.pack(">H", v * 257) for v in px)
def ppm_text(px):
    return (b"P3\n# gray as colour\n%d %d\n255\n" % (cols, rows) +
            b"\n".join(b"%d %d %d" % (v, v, v) for v in px) + b"\n")
writers = {"bag": (".bmp", bmp), "trouser": (".pgm", pgm16), "tshirt_top": (".ppm", ppm_text)}
for cls in sorted(os.listdir(png_root)):
    os.makedirs(os.path.join(out, cls))
    for name in sorted(os.listdir(os.path.join(png_root, cls))):
        if not name.endswith(".png"):
            continue
        i = int(name[:-4])
        ext, write = writers[cls]
        with open(os.path.join(out, cls, name[:-4] + ext), "wb") as f:
            f.write(write(data[i * rows * cols:(i + 1) * rows * cols]))
PY
echo "not an image" > "$T/src-other/bag/readme.txt"
for kind in src src-other; do
    mkdir -p "$T/job-$kind"
    cat > "$T/job-$kind/dataset.json" <<JSON
{"folder_train": "$T/$kind", "channels": 1, "width": 8, "height": 8,
 "resize_mode": "fill", "encoding": "none", "pct_val": 20, "seed": 3}
JSON
    "$W" dataset "$T/job-$kind" > "$T/$kind.jsonl" 2>&1
done
check "[ -s "$T/job-src-other/stats.json" ] && grep -q '\"skipped\":1' "$T/src-other.jsonl"" \
    "a dataset of BMP, PGM and PPM files is made ($(grep -o '"type":"error".*' "$T/src-other.jsonl" | head -c 300))"
check "cmp -s "$T/job-src/train.db" "$T/job-src-other/train.db" && cmp -s "$T/job-src/val.db" "$T/job-src-other/val.db"" \
    "its records are those of the same images as PNG"

# a bad value: error line naming the key and the choices, exit 1, no stats.json
mkdir -p "$T/bad"
echo "{\"folder_train\": \"$T/src\", \"resize_mode\": \"stretch\"}" > "$T/bad/dataset.json"
"$W" dataset "$T/bad" > "$T/bad.jsonl" 2>/dev/null
rc=$?
check "[ $rc -eq 1 ]" "bad resize_mode exits 1 (got $rc)"
check "grep -q '\"type\":\"error\".*resize_mode.*squash, crop, fill, half_crop' \"$T/bad.jsonl\"" "error names the key and the choices"
check "[ ! -e \"$T/bad/stats.json\" ]" "no stats.json after a failure"

# too few images per class
echo "{\"folder_train\": \"$T/src\", \"min_per_class\": 50}" > "$T/bad/dataset.json"
"$W" dataset "$T/bad" > "$T/bad.jsonl" 2>/dev/null
check "[ $? -eq 1 ] && grep -q 'no class has at least 50 images in' \"$T/bad.jsonl\"" "min_per_class error"

# a write that fails (a file size limit acts like a full disk): error line, exit 1,
# no stats.json and no temp file left
echo "{\"folder_train\": \"$T/src\", \"channels\": 1, \"width\": 64, \"height\": 64}" > "$T/bad/dataset.json"
(ulimit -f 16; exec "$W" dataset "$T/bad") > "$T/full.jsonl" 2>/dev/null
rc=$?
check "[ $rc -eq 1 ] && grep -q '\"type\":\"error\".*File too large' \"$T/full.jsonl\"" "a failed write is reported (exit $rc)"
check "[ ! -e \"$T/bad/stats.json\" ] && [ -z \"\$(ls \"$T/bad\" | grep tmp)\" ]" "nothing complete-looking or temporary is left"

"$W" dataset >/dev/null 2>&1
check "[ $? -eq 2 ]" "dataset without JOBDIR is a usage error"

if [ $fails -ne 0 ]; then
    echo "dataset_worker: $fails failed"
    exit 1
fi
echo "dataset_worker: all passed"
