#!/usr/bin/env bash
# The routes the browser UI needs, against a real server and the real cdigits-worker:
# text-list datasets (uploaded and local lists), the explorer's pages and record images
# (compared with the records read from the .db files by an independent reader), the
# folder picker and its image files, the network view from `check-net --json`, the
# standard networks' files, and a new model from a snapshot named by its listed epoch.
# Skips (tests/shell/skip.bash) while the worker is not built.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
# Two data roots: the images (class folders only), and a folder of lists, a text file,
# a sub-folder and a symlink out of the roots.
IMG=$T/images
MORE=$T/more
SEED=$((RANDOM * 32768 + RANDOM))
echo "images seed $SEED"
make_pngs "$IMG" --classes 3 --per-class 10 --size 28 --seed "$SEED"
mkdir -p "$T/outside/secret" "$MORE/sub"
cp "$(find "$IMG" -name '*.png' | head -1)" "$T/outside/secret/leak.png"
ln -s "$T/outside" "$MORE/escape"
echo "not an image" >"$MORE/notes.txt"
srv_start --data-root "$IMG" --data-root "$MORE" --abort-grace 5 --models "$SRC/models"
. "$(dirname "$0")/server_tiny_net.bash"
login_as fred

# ---- text-list datasets ---------------------------------------------------------------------
CLASSES=$(cd "$IMG" && find . -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | sort)
printf '%s\n' $CLASSES >"$T/labels.txt"
: >"$T/train.txt"
: >"$T/val.txt"
k=0
for c in $CLASSES; do
    # 8 images of each class for training (relative to the image folder), 2 for validation (absolute)
    ls "$IMG/$c" | sort | head -8 | sed "s|^|$c/|; s|\$| $k|" >>"$T/train.txt"
    ls "$IMG/$c" | sort | tail -2 | sed "s|^|$IMG/$c/|; s|\$| $k|" >>"$T/val.txt"
    k=$((k + 1))
done
http POST /datasets/images/classification/json -F method=textfile -F "textfile_train_images=@$T/train.txt" \
    -F "textfile_labels_file=@$T/labels.txt" -F textfile_use_val=true -F "textfile_val_images=@$T/val.txt" \
    -F textfile_train_folder="$IMG" -F dataset_name=lists -F resize_channels=1 -F resize_width=28 \
    -F resize_height=28 -F encoding=none
check '[ "$CODE" = 200 ] && [ -n "$(jv "d[\"id\"]")" ]' "a text-list dataset of uploaded lists is accepted (textfile_shuffle defaults)"
DT=$(jv 'd["id"]')
check 'wait_status "$DT" Done 120' "the text-list dataset reaches Done"
http GET "/datasets/$DT/json"
check '[ "$(jv "[d[\"splits\"].get(s, 0) for s in (\"train\", \"val\", \"test\")]")" = "[24, 6, 0]" ] && [ "$(jv "d[\"labels\"]")" = "$(python3 -c "import json,sys; print(json.dumps(sys.argv[1:]))" $CLASSES)" ]' \
    "its splits hold every listed image (24 train, 6 val) and its labels are labels.txt's"
DT_DIR=$(jv 'd["directory"]')

http POST /datasets/images/classification/json -F method=textfile -F textfile_use_local_files=true \
    -F textfile_local_train_images="$T/train.txt" -F textfile_local_labels_file="$T/labels.txt" \
    -F textfile_train_folder="$IMG" -F textfile_shuffle=false -F dataset_name=local -F resize_channels=3 \
    -F resize_width=200 -F resize_height=120 -F encoding=none
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"textfile_local_train_images\"][0]" | grep -q outside' \
    "lists on the server must lie inside the data roots too"
cp "$T/train.txt" "$T/labels.txt" "$MORE/"
http POST /datasets/images/classification/json -F method=textfile -F textfile_use_local_files=true \
    -F textfile_local_train_images="$MORE/train.txt" -F textfile_local_labels_file="$MORE/labels.txt" \
    -F textfile_train_folder="$IMG" -F textfile_shuffle=false -F dataset_name=local -F resize_channels=3 \
    -F resize_width=200 -F resize_height=120 -F encoding=none
check '[ "$CODE" = 200 ]' "a text-list dataset of lists on the server, color 200x120"
DC=$(jv 'd["id"]')
http POST /datasets/images/classification/json -F folder_train="$IMG" -F dataset_name=pngs -F resize_channels=1 \
    -F resize_width=28 -F resize_height=28 -F encoding=png -F folder_pct_val=0
DP=$(jv 'd["id"]')
check 'wait_status "$DC" Done 120 && wait_status "$DP" Done 120' "the color and the PNG-encoded datasets reach Done"
http GET "/datasets/$DC/json"
DC_DIR=$(jv 'd["directory"]')
http GET "/datasets/$DP/json"
DP_DIR=$(jv 'd["directory"]')

# ---- explorer ----------------------------------------------------------------------------------
# An independent reader of the .db format (docs/formats.md) in Python: labels, and each
# record as planar bytes (none) or as its stored file (png).
cat >"$T/db.py" <<'PY'
import json, struct, sys, zlib
def read(path):
    b = open(path, "rb").read()
    c, h, w, enc = struct.unpack_from("<4I", b, 12)
    count, data_off, data_size, index_off, labels_off = struct.unpack_from("<5Q", b, 32)
    labels = list(struct.unpack_from("<%di" % count, b, labels_off))
    def record(i):
        if enc == 0:
            n = c * h * w
            return b[data_off + i * n:data_off + (i + 1) * n]
        off, size = struct.unpack_from("<2Q", b, index_off + 16 * i)
        return b[off:off + size]
    return c, h, w, enc, labels, record
def png_planar(data):
    # decodes the PNGs the server writes (8-bit gray or RGB, any filter) to planar bytes
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack_from(">I4s", data, pos)
        body = data[pos + 8:pos + 8 + n]
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == struct.unpack_from(">I", data, pos + 8 + n)[0], "bad CRC"
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack_from(">IIBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    c = {0: 1, 2: 3}[ctype]
    raw = zlib.decompress(idat)
    stride = w * c
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            a = line[x - c] if x >= c else 0
            up = prev[x]
            if f == 1: line[x] = (line[x] + a) & 255
            elif f == 2: line[x] = (line[x] + up) & 255
            elif f == 3: line[x] = (line[x] + (a + up) // 2) & 255
            elif f == 4:
                ul = prev[x - c] if x >= c else 0
                p = a + up - ul
                pa, pb, pc = abs(p - a), abs(p - up), abs(p - ul)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(bytes(line))
        prev = line
    inter = b"".join(rows)
    return w, h, c, bytes(inter[k::c][i] for k in range(c) for i in range(w * h)) if c > 1 else inter
if __name__ == "__main__":
    cmd = sys.argv[1]
    c, h, w, enc, labels, record = read(sys.argv[2])
    if cmd == "labels":
        print(json.dumps(labels))
    elif cmd == "same":  # same DB INDEX FILE: the served image is record INDEX
        got = open(sys.argv[4], "rb").read()
        rec = record(int(sys.argv[3]))
        if enc == 0:
            gw, gh, gc, px = png_planar(got)
            ok = (gw, gh, gc) == (w, h, c) and px == rec
        else:
            ok = got == rec
        print("same" if ok else "different")
PY
python3 "$T/db.py" labels "$DT_DIR/train.db" >"$T/train_labels.json"
http GET "/datasets/$DT/explore/json?split=train&size=1000"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"total\"]")" = 24 ] && [ "$(jv "d[\"count\"]")" = 24 ] && [ "$(jv "[x[\"label\"] for x in d[\"items\"]]")" = "$(cat "$T/train_labels.json")" ]' \
    "explore lists every train record with the labels the .db holds"
check '[ "$(jv "d[\"image_dims\"]")" = "[28, 28, 1]" ] && [ "$(jv "d[\"encoding\"]")" = none ]' "explore gives the records' shape and encoding"
http GET "/datasets/$DT/explore/json?split=train&label=1&page=1&size=3"
WANT=$(python3 -c "import json,sys; l=json.load(open(sys.argv[1])); print(json.dumps([i for i,x in enumerate(l) if x==1][3:6]))" "$T/train_labels.json")
check '[ "$(jv "d[\"total\"]")" = 8 ] && [ "$(jv "[x[\"index\"] for x in d[\"items\"]]")" = "$WANT" ] && [ "$(jv "set(x[\"label\"] for x in d[\"items\"])")" = "{1}" ]' \
    "explore filters by class and pages (page 1 of size 3: records $WANT)"
URL=$(jv 'd["items"][0]["url"]')
IDX=$(jv 'd["items"][0]["index"]')
check '[ "$URL" = "/datasets/$DT/images/train/$IDX" ]' "each item has the URL of its image"
http GET "/datasets/$DT/explore/json?split=train&label=1&page=9&size=3"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"items\"]")" = "[]" ] && [ "$(jv "d[\"total\"]")" = 8 ]' "a page past the end is empty"
http GET "/datasets/$DT/explore/json?split=test"
check '[ "$CODE" = 404 ] && jv "d[\"error\"][\"description\"]" | grep -q "no test records"' "a split without records is 404"
http GET "/datasets/$DT/explore/json?split=../../x"
check '[ "$CODE" = 404 ]' "an unknown split is 404"
for bad in size=0 size=1001 page=-1 label=x; do
    http GET "/datasets/$DT/explore/json?split=val&$bad"
    check '[ "$CODE" = 400 ]' "explore refuses $bad"
done
curl -s -o "$T/rec.png" -D "$T/rec.h" "$B$URL"
check 'grep -qi "content-type: image/png" "$T/rec.h" && [ "$(python3 "$T/db.py" same "$DT_DIR/train.db" "$IDX" "$T/rec.png")" = same ]' \
    "a gray record of encoding none comes as a PNG of exactly its pixels"
for i in 0 $((RANDOM % 6)) 5; do
    curl -s -o "$T/v.png" "$B/datasets/$DT/images/val/$i"
    check '[ "$(python3 "$T/db.py" same "$DT_DIR/val.db" "$i" "$T/v.png")" = same ]' "val record $i comes as its pixels"
done
i=$((RANDOM % 24))
curl -s -o "$T/c.png" "$B/datasets/$DC/images/train/$i"
check '[ "$(python3 "$T/db.py" same "$DC_DIR/train.db" "$i" "$T/c.png")" = same ]' \
    "a 200x120 color record comes as an RGB PNG of its pixels (record $i, several deflate blocks)"
i=$((RANDOM % 30))
curl -s -o "$T/p.png" -D "$T/p.h" "$B/datasets/$DP/images/train/$i"
check 'grep -qi "content-type: image/png" "$T/p.h" && [ "$(python3 "$T/db.py" same "$DP_DIR/train.db" "$i" "$T/p.png")" = same ]' \
    "a record of encoding png comes as its stored PNG (record $i)"
http GET "/datasets/$DT/images/train/24"
check '[ "$CODE" = 404 ]' "a record past the end is 404"
http GET "/datasets/$DT/images/train/-1"
check '[ "$CODE" = 404 ]' "a negative record is 404"
http GET "/datasets/$DT/images/train/1x"
check '[ "$CODE" = 404 ]' "a record number with junk is 404"
head -c 200 "$DT_DIR/val.db" >"$T/short.db"
cp "$DT_DIR/val.db" "$T/val.db.bak"
cp "$T/short.db" "$DT_DIR/val.db"
http GET "/datasets/$DT/explore/json?split=val"
check '[ "$CODE" = 500 ] && jv "d[\"error\"][\"description\"]" | grep -q "val.db: .*(truncated); recreate the dataset"' "a truncated .db is refused, not read, naming the file and what to do"
cp "$T/val.db.bak" "$DT_DIR/val.db"

# ---- folder picker and image files -------------------------------------------------------------
http GET /browse/json
REAL_IMG=$(cd "$IMG" && pwd -P)
REAL_MORE=$(cd "$MORE" && pwd -P)
check '[ "$(jv "d[\"path\"]")" = null ] && [ "$(jv "[x[\"path\"] for x in d[\"dirs\"]]")" = "[\"$REAL_IMG\", \"$REAL_MORE\"]" ] && [ "$(jv "d[\"sample\"]")" = null ]' \
    "browse without a path lists the roots"
http GET "/browse/json?path=$IMG"
check '[ "$(jv "[x[\"name\"] for x in d[\"dirs\"]]")" = "$(python3 -c "import json,sys; print(json.dumps(sys.argv[1:]))" $CLASSES)" ] && [ "$(jv "d[\"parent\"]")" = null ] && [ "$(jv "d[\"images\"]")" = 0 ]' \
    "browse lists the class folders of a root, and no parent above a root"
http GET "/browse/json?path=$MORE"
check '[ "$(jv "[x[\"name\"] for x in d[\"dirs\"]]")" = "[\"sub\"]" ] && [ "$(jv "d[\"images\"]")" = 0 ]' \
    "browse does not offer the symlink out of the roots, nor count text files as images"
http GET "/browse/json?path=$MORE/sub"
check '[ "$(jv "d[\"parent\"]")" = "$REAL_MORE" ] && [ "$(jv "d[\"dirs\"]")" = "[]" ]' "browse names the parent of a sub-folder"
FIRST=$(echo $CLASSES | cut -d' ' -f1)
http GET "/browse/json?path=$IMG/$FIRST"
check '[ "$(jv "d[\"images\"]")" = 10 ] && [ "$(jv "d[\"sample\"]")" = "$REAL_IMG/$FIRST/$(ls "$IMG/$FIRST" | sort | head -1)" ]' \
    "browse counts the images and names the first as a sample"
http GET "/browse/json?path=$IMG/$FIRST/../../outside"
check '[ "$CODE" = 400 ]' "browse refuses a .. out of the roots"
http GET "/browse/json?path=$MORE/escape"
check '[ "$CODE" = 400 ]' "browse refuses a symlink out of the roots"
SAMPLE=$IMG/$FIRST/$(ls "$IMG/$FIRST" | sort | head -1)
curl -s -o "$T/sample" -D "$T/sample.h" "$B/browse/file?path=$SAMPLE"
check 'cmp -s "$T/sample" "$SAMPLE" && grep -qi "content-type: image/png" "$T/sample.h"' "browse/file serves an image of the roots"
http GET "/browse/file?path=$MORE/escape/secret/leak.png"
check '[ "$CODE" = 403 ]' "browse/file refuses an image behind a symlink out of the roots"
http GET "/browse/file?path=$MORE/notes.txt"
check '[ "$CODE" = 403 ]' "browse/file refuses a file that is not an image"
http GET "/browse/file?path=$IMG/none.png"
check '[ "$CODE" = 404 ]' "browse/file: a missing image is 404"

# ---- standard networks -------------------------------------------------------------------------
curl -s -o "$T/lenet" -w '%{http_code}' "$B/models/standard/lenet.prototxt" >"$T/code"
check '[ "$(cat "$T/code")" = 200 ] && cmp -s "$T/lenet" "$SRC/models/lenet.prototxt"' "models/standard/lenet.prototxt is models/lenet.prototxt"
for bad in vgg.prototxt lenet.txt "..%2fCMakeLists.txt" ".prototxt"; do
    http GET "/models/standard/$bad"
    check '[ "$CODE" = 404 ]' "models/standard/$bad is 404"
done

# ---- network view ------------------------------------------------------------------------------
http POST /models/visualize-network/json -F method=standard -F standard_networks=lenet -F dataset="$DT"
# LeNet for 3 classes, by hand: conv1 20*1*5*5+20, conv2 50*20*5*5+50, ip1 500*800+500, ip2 3*500+3
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"errors\"]")" = "[]" ] && [ "$(jv "[d[\"stages\"][s][\"params\"] for s in (\"train\", \"val\", \"deploy\")]")" = "[427573, 427573, 427573]" ]' \
    "visualize-network: LeNet on the dataset has 427,573 parameters in every stage"
check '[ "$(jv "d[\"input\"]")" = "[1, 28, 28]" ] && [ "$(jv "d[\"classes\"]")" = 3 ] && [ "$(jv "[t[\"shape\"] for l in d[\"stages\"][\"train\"][\"layers\"] for t in l[\"tops\"] if l[\"name\"]==\"pool2\"][0]")" = "[64, 50, 4, 4]" ]' \
    "the engine's shapes: the dataset's 1x28x28 input, pool2 64x50x4x4"
check '[ "$(jv "d[\"stages\"][\"deploy\"][\"layers\"][0][\"type\"]")" = Input ] && [ "$(jv "[l[\"params\"] for l in d[\"stages\"][\"train\"][\"layers\"] if l[\"name\"]==\"conv1\"][0]")" = 520 ]' \
    "deploy starts with an Input layer; conv1 has 520 parameters"
http POST /models/visualize-network/json -F method=standard -F standard_networks=alexnet -F crop_size=200 -F batch_size=2
check '[ "$CODE" = 200 ] && [ "$(jv "[t[\"shape\"] for t in d[\"stages\"][\"train\"][\"layers\"][0][\"tops\"]]")" = "[[2, 3, 200, 200], [2]]" ]' \
    "crop_size and batch_size reach the engine (AlexNet data 2x3x200x200)"
printf 'name: "broken"\nlayer { name: "d" type: "Input" top: "data" input_param { shape { dim: 1 dim: 1 dim: 8 dim: 8 } } }\nlayer { name: "c" type: "Convolution" bottom: "data" top: "c"\n  convolution_param { num_output: 2 kernel_sise: 3 } }\n' >"$T/broken.prototxt"
http POST /models/visualize-network/json -F method=custom -F "custom_network=<$T/broken.prototxt"
check '[ "$CODE" = 200 ] && jv "d[\"errors\"][0]" | grep -q "^custom_network:4:[0-9]*: unknown field \"kernel_sise\"" && [ "$(jv "d[\"stages\"]")" = "{}" ]' \
    "a broken network answers the engine's message at file:line:col ($(jv 'd["errors"]' | head -c 120))"
check '! jv "d[\"errors\"]" | grep -q "/tmp/"' "the message names the network as the form does, not the temporary file"
check '[ -z "$(ls "$T/data/tmp" 2>/dev/null | grep network-)" ]' "no temporary network file is left"
http POST /models/visualize-network/json -F method=custom
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"custom_network\"][0]")" ]' "no custom network is a form error"
http POST /models/visualize-network/json -F method=standard -F standard_networks=lenet -F dataset=nope
check '[ "$CODE" = 400 ] && [ -n "$(jv "d[\"errors\"][\"dataset\"][0]")" ]' "an unknown dataset is a form error"

# ---- a new model from a snapshot named by its listed epoch --------------------------------------
tiny_net >"$T/tiny.prototxt"
# 24 training images in batches of 2: 12 iterations an epoch, a snapshot every 4 (epochs 1/3, 2/3, 1, ...)
http POST /models/images/classification/json -F dataset="$DT" -F method=custom -F "custom_network=<$T/tiny.prototxt" \
    -F train_epochs=2 -F batch_size=2 -F snapshot_interval=0.34 -F model_name=thirds -F random_seed=3
check '[ "$CODE" = 200 ]' "a model with snapshots every third of an epoch"
MT=$(jv 'd["id"]')
check 'wait_status "$MT" Done 120' "it trains to Done"
http GET "/models/$MT/json"
check '[ "$(jv "d[\"snapshots\"]")" = "[0.333, 0.667, 1, 1.333, 1.667, 2]" ]' "its snapshots list as [0.333, 0.667, 1, 1.333, 1.667, 2]"
SNAP_FILE=$(jv '[s["file"] for s in d["snapshot_files"] if s["iteration"] == 16][0]')
for e in 1.333 1.3333333333333333 1.33; do
    http POST /models/images/classification/json -F dataset="$DT" -F method=previous -F previous_networks="$MT" \
        -F "$MT-snapshot=$e" -F train_epochs=1 -F batch_size=2 -F model_name="from $e"
    check '[ "$CODE" = 200 ]' "a new model from the snapshot listed as epoch $e"
    M2=$(jv 'd["id"]')
    http GET "/models/$M2/json"
    check '[ "$(jv "d[\"train\"][\"pretrained\"]")" = "$T/data/jobs/$MT/$SNAP_FILE" ] && [ "$(jv "abs(d[\"network\"][\"epoch\"] - 4/3) < 1e-6")" = true ]' \
        "it starts from $SNAP_FILE (iteration 16, epoch 4/3)"
    wait_status "$M2" Done 60 >/dev/null
done
for e in 1.2 1.5 3; do
    http POST /models/images/classification/json -F dataset="$DT" -F method=previous -F previous_networks="$MT" \
        -F "$MT-snapshot=$e" -F train_epochs=1 -F model_name=nope
    check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"previous_networks\"][0]" | grep -q "epoch $e does not exist"' \
        "epoch $e names no snapshot"
done
http POST /models/visualize-network/json -F method=previous -F previous_networks="$MT" -F dataset="$DT"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"network\"]")" = "$MT/network.prototxt" ] && [ "$(jv "d[\"stages\"][\"train\"][\"params\"]")" = $((28 * 28 * 16 + 16 + 16 * 3 + 3)) ]' \
    "visualize-network reads a previous model's network"

srv_stop
check '[ "$SRV_RC" = 0 ]' "the server stops cleanly"
finish
