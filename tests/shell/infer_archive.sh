#!/usr/bin/env bash
# The model download (tar, tar.gz, zip; by epoch), its upload as a pretrained model,
# and the round trip: the pretrained model, and a model fine-tuned from it with
# learning rate 0, classify exactly as the original did. Then new models from the
# pretrained weights: a renamed last layer and another number of classes start afresh
# (the other layers are taken), lr_mult 0 keeps a layer as it was; and archives that
# must be refused (paths leading out, links, no weights, not an archive).
. "$(dirname "$0")/infer_lib.bash" || exit 1
infer_setup

IMGS=$(ls "$T/images/bars/"*.png | head -2; ls "$T/images/columns/"*.png | head -2; ls "$T/images/diagonals/"*.png | head -2)
URL=/models/images/classification/classify_one/json
# predictions of every test image by one model (and snapshot): one line each
predict() {
    local job=$1 i
    shift
    for i in $IMGS; do
        http POST $URL -F job_id="$job" -F image_path="$i" "$@"
        [ "$CODE" = 200 ] && jv 'd["predictions"]' || echo "error $CODE $BODY"
    done
}
REF1=$(predict "$ML" -F snapshot_epoch=1)
REF2=$(predict "$ML")

# downloads
curl -s -D "$T/headers" -o "$T/m1.tar.gz" "$B/models/$ML/download.tar.gz?epoch=1"
check 'grep -qi "content-disposition: attachment; filename=\"${ML}_epoch_1.tar.gz\"" "$T/headers"' "download.tar.gz?epoch=1 is an attachment"
py '
import tarfile
t = tarfile.open(sys.argv[1])
names = sorted(t.getnames())
info = json.load(t.extractfile("info.json"))
w = t.extractfile("snapshot_iter_3.cdw").read() == open(sys.argv[2] + "/snapshot_iter_3.cdw", "rb").read()
orig = t.extractfile("original.prototxt").read() == open(sys.argv[3], "rb").read()
deploy = t.extractfile("deploy.prototxt").read().decode()
solver = t.extractfile("solver.prototxt").read().decode()
print(json.dumps({"names": names, "info": info, "weights": w, "original": orig, "deploy": deploy, "solver": solver}))' \
    "$T/m1.tar.gz" "$MDIR" "$SRC/models/lenet.prototxt" >"$T/body"
check '[ "$(jv "d[\"names\"]")" = "[\"deploy.prototxt\", \"info.json\", \"labels.txt\", \"mean.bin\", \"mean.png\", \"model.onnx\", \"original.prototxt\", \"snapshot_iter_3.cdw\", \"solver.prototxt\"]" ]' \
    "the archive has the networks, solver, labels, mean, weights, info.json and model.onnx"
check '[ "$(jv "d[\"weights\"] and d[\"original\"]")" = true ]' "the weights are epoch 1's snapshot and original.prototxt the network"
check '[ "$(jv "[d[\"info\"][k] for k in (\"snapshot file\", \"model file\", \"network file\", \"solver file\", \"labels file\", \"mean file\", \"framework\", \"name\", \"image dimensions\", \"image resize mode\")]")" = "[\"snapshot_iter_3.cdw\", \"deploy.prototxt\", \"original.prototxt\", \"solver.prototxt\", \"labels.txt\", \"mean.bin\", \"cdigits\", \"lenet\", [28, 28, 1], \"squash\"]" ]' \
    "info.json has DIGITS's keys"
check '[ "$(jv "\"type: \\\"Input\\\"\" in d[\"deploy\"] and \"SoftmaxWithLoss\" not in d[\"deploy\"] and \"num_output: 3\" in d[\"deploy\"] and \"include\" not in d[\"deploy\"]")" = true ]' \
    "deploy.prototxt is the deploy stage with an Input layer and num_output 3"
check '[ "$(jv "all(s in d[\"solver\"] for s in (\"base_lr: 0.02\", \"max_iter: 6\", \"lr_policy: \\\"fixed\\\"\", \"net: \\\"original.prototxt\\\"\"))")" = true ]' \
    "solver.prototxt has the training's settings in Caffe's form"
curl -s -o "$T/m2.zip" "$B/models/$ML/download.zip"
check '[ "$(py "import zipfile; z = zipfile.ZipFile(sys.argv[1]); print(z.testzip() is None and \"snapshot_iter_6.cdw\" in z.namelist())" "$T/m2.zip")" = True ]' \
    "download.zip (the newest snapshot) passes zip's CRC test"
curl -s -o "$T/m1.zip" -F snapshot_epoch=1 "$B/models/$ML/download.zip"
check '[ "$(py "import zipfile; print(\"snapshot_iter_3.cdw\" in zipfile.ZipFile(sys.argv[1]).namelist())" "$T/m1.zip")" = True ]' \
    "DIGITS's form post with snapshot_epoch"
curl -s -o "$T/m2.tar" "$B/models/$ML/download.tar"
check '[ "$(py "import tarfile; print(len(tarfile.open(sys.argv[1], \"r:\").getnames()))" "$T/m2.tar")" = 9 ]' "download.tar is a plain tar"
curl -s -o "$T/m2.tgz" "$B/models/$ML/download"
check '[ "$(head -c 2 "$T/m2.tgz" | od -An -tx1 | tr -d " ")" = 1f8b ]' "download without a suffix is a .tar.gz, as in DIGITS"
http GET "/models/$ML/download.zip?epoch=9"
check '[ "$CODE" = 404 ]' "a download of an epoch without a snapshot is 404"
http GET "/models/$DS/download"
check '[ "$CODE" = 404 ]' "a dataset has no download"

# upload as pretrained models, which classify as the original
CODE=$(curl -s -o /dev/null -w '%{http_code}' -F archive="@$T/m1.tar.gz" "$B/pretrained_models/upload_archive")
check '[ "$CODE" = 401 ]' "uploading needs a login"
http POST /pretrained_models/upload_archive -F archive="@$T/m1.tar.gz"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"status\"]")" = success ]' "the .tar.gz is a pretrained model"
PT=$(jv 'd["id"]')
http GET /pretrained_models/json
check '[ "$(jv "[(m[\"id\"], m[\"snapshot_epoch\"], m[\"image_dimensions\"], m[\"num_classes\"]) for m in d[\"pretrained_models\"]]")" = "[[\"$PT\", 1.0, [28, 28, 1], 3]]" ]' \
    "GET /pretrained_models/json lists it with its epoch, image size and classes"
http GET /completed_jobs/json
check '[ "$(jv "[[m[\"id\"] for m in d[\"pretrained_models\"]], \"$PT\" in [m[\"id\"] for m in d[\"models\"]]]")" = "[[\"$PT\"], false]" ]' \
    "GET /completed_jobs/json lists it under pretrained_models, not models"
check '[ "$(predict "$PT")" = "$REF1" ]' "the pretrained model classifies exactly as epoch 1 did"
http POST /pretrained_models/upload_archive -F archive="@$T/m2.zip" -F job_name=fromzip
PT2=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ "$(predict "$PT2")" = "$REF2" ]' "the .zip of the newest snapshot classifies as the newest snapshot"
# an archive with only the deploy network, in a folder
py '
import tarfile, io
src = tarfile.open(sys.argv[1]); out = tarfile.open(sys.argv[2], "w")
info = json.load(src.extractfile("info.json")); del info["network file"]
for m in src.getmembers():
    if m.name in ("original.prototxt", "solver.prototxt"):
        continue
    data = json.dumps(info).encode() if m.name == "info.json" else src.extractfile(m).read()
    ti = tarfile.TarInfo("model/" + m.name); ti.size = len(data)
    out.addfile(ti, io.BytesIO(data))
out.close()' "$T/m1.tar.gz" "$T/deploy_only.tar"
http POST /pretrained_models/upload_archive -F archive="@$T/deploy_only.tar"
PT3=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && [ "$(predict "$PT3")" = "$REF1" ]' "an archive with only deploy.prototxt (in a folder) classifies the same"

# a fine-tune from the pretrained model with learning rate 0 changes nothing
http POST /models/images/classification/json -F method=pretrained -F pretrained_networks="$PT" -F dataset="$DS" \
    -F train_epochs=1 -F learning_rate=0 -F batch_size=12 -F model_name=lr0
FT=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$FT" Done 120' "a model from the pretrained one (method pretrained, learning rate 0) trains"
http GET "/jobs/$FT/log/json"
check 'jv "d[\"log\"]" | grep -q "took 8 parameter tensors"' "it starts from all 8 of the pretrained tensors"
check '[ "$(predict "$FT")" = "$REF1" ]' "and classifies exactly as the original's epoch 1"

# a renamed last layer starts afresh; so does one of another number of classes
sed 's/name: "ip2"/name: "ip2new"/' "$SRC/models/lenet.prototxt" >"$T/renamed.prototxt"
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/renamed.prototxt" \
    -F custom_network_snapshot="$T/data/jobs/$PT/snapshot_iter_3.cdw" -F dataset="$DS" \
    -F train_epochs=1 -F batch_size=12 -F model_name=renamed
RN=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$RN" Done 120' "a network with its last layer renamed trains from the pretrained weights"
http GET "/jobs/$RN/log/json"
check 'jv "d[\"log\"]" | grep -q "took 6 parameter tensors"' "it takes 6 tensors: all but the renamed layer's two"
make_pngs "$T/images/four" --classes 4 --per-class 8 --size 28 --seed 9
http POST /datasets/images/classification/json -F folder_train="$T/images/four" -F encoding=png \
    -F resize_channels=1 -F resize_width=28 -F resize_height=28 -F dataset_name=four
DS4=$(jv 'd["id"]')
check 'wait_status "$DS4" Done 60' "a dataset of 4 classes"
http POST /models/images/classification/json -F method=pretrained -F pretrained_networks="$PT" -F dataset="$DS4" \
    -F train_epochs=1 -F batch_size=8 -F model_name=four
F4=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$F4" Done 60' "the pretrained model fine-tunes on 4 classes"
http GET "/jobs/$F4/log/json"
check 'jv "d[\"log\"]" | grep -q "took 6 parameter tensors"' "the last layer (3 outputs, 4 needed) starts afresh, the rest is taken"
http POST $URL -F job_id="$F4" -F image_path="$(ls "$T/images/four/bars/"*.png | head -1)"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"predictions\"])")" = 4 ]' "it classifies into 4 classes"

# lr_mult 0 keeps a layer as the pretrained weights have it
python3 - "$SRC/models/lenet.prototxt" "$T/frozen.prototxt" <<'EOF'
import sys
s = open(sys.argv[1]).read()
i = s.index('name: "conv1"')
j = s.index("param { lr_mult: 1 }", i)
s = s[:j] + "param { lr_mult: 0 }\n  param { lr_mult: 0 }" + s[s.index("param { lr_mult: 2 }", j) + len("param { lr_mult: 2 }"):]
open(sys.argv[2], "w").write(s)
EOF
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/frozen.prototxt" \
    -F custom_network_snapshot="$T/data/jobs/$PT/snapshot_iter_3.cdw" -F dataset="$DS" -F train_epochs=1 \
    -F batch_size=12 -F learning_rate=0.05 -F model_name=frozen
FZ=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$FZ" Done 120' "a network with conv1 at lr_mult 0 trains from the pretrained weights"
# the weights files side by side: conv1 as it was, ip1 moved
SAME=$(py '
import struct
def tensors(path):
    b = open(path, "rb").read(); o = 12; out = {}
    for _ in range(struct.unpack_from("<I", b, 8)[0]):
        n = struct.unpack_from("<I", b, o)[0]; name = b[o + 4:o + 4 + n].decode(); o += 4 + n + 4 + 16
        c = struct.unpack_from("<Q", b, o)[0]; o += 8
        out[name] = b[o:o + 4 * c]; o += 4 * c
    return out
a = tensors(sys.argv[1]); b = tensors(sys.argv[2])
print(a["conv1/0"] == b["conv1/0"] and a["conv1/1"] == b["conv1/1"] and a["ip1/0"] != b["ip1/0"])' \
    "$T/data/jobs/$PT/snapshot_iter_3.cdw" "$T/data/jobs/$FZ/snapshot_iter_3.cdw")
check '[ "$SAME" = True ]' "conv1 is unchanged (lr_mult 0) while ip1 has learned"

# archives that are refused, leaving nothing behind
http GET /index/json
NJOBS=$(jv 'len(d["models"]) + len(d["datasets"])')
NDIRS=$(ls "$T/data/jobs" | wc -l)
py '
import tarfile, zipfile, io
def tar(path, entries):
    t = tarfile.open(path, "w")
    for name, kind, data in entries:
        ti = tarfile.TarInfo(name)
        if kind == "sym": ti.type = tarfile.SYMTYPE; ti.linkname = "/etc/passwd"
        elif kind == "hard": ti.type = tarfile.LNKTYPE; ti.linkname = "info.json"
        else: ti.size = len(data)
        t.addfile(ti, io.BytesIO(data) if kind == "file" else None)
    t.close()
good = tarfile.open(sys.argv[1])
files = [(m.name, "file", good.extractfile(m).read()) for m in good.getmembers()]
d = sys.argv[2]
tar(d + "/dotdot.tar", files + [("../evil.txt", "file", b"x")])
tar(d + "/absolute.tar", files + [("/tmp/evil.txt", "file", b"x")])
tar(d + "/symlink.tar", files + [("evil", "sym", b"")])
tar(d + "/hardlink.tar", files + [("evil", "hard", b"")])
tar(d + "/noweights.tar", [f for f in files if not f[0].endswith(".cdw")])
tar(d + "/caffe.tar", [(n, k, json.dumps(dict(json.loads(x), framework="caffe")).encode() if n == "info.json" else x) for n, k, x in files])
z = zipfile.ZipFile(d + "/dotdot.zip", "w"); z.writestr("../evil.txt", "x"); z.close()
z = zipfile.ZipFile(d + "/symlink.zip", "w")
zi = zipfile.ZipInfo("evil"); zi.create_system = 3; zi.external_attr = (0o120777 << 16); z.writestr(zi, "/etc/passwd"); z.close()
# bytes of no archive kind (fixed, so they can never start like a gzip or zip by chance)
import random
open(d + "/random.bin", "wb").write(b"\0" + random.Random(7).randbytes(4095))' "$T/m1.tar.gz" "$T"
for bad in dotdot.tar:'\.\.' absolute.tar:absolute symlink.tar:'symbolic link' hardlink.tar:'hard link' \
    noweights.tar:'no weights' caffe.tar:caffe dotdot.zip:'\.\.' symlink.zip:'symbolic link' random.bin:'not a tar'; do
    http POST /pretrained_models/upload_archive -F archive="@$T/${bad%%:*}"
    check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "${bad#*:}"' "${bad%%:*} is refused ($(jv 'd["error"]["description"]' | head -c 120))"
done
check '[ ! -e "$T/data/evil.txt" ] && [ ! -e /tmp/evil.txt ] && [ "$(ls "$T/data/jobs" | wc -l)" = "$NDIRS" ]' \
    "nothing was written outside, and no job folder is left behind"
http GET /index/json
check '[ "$(jv "len(d[\"models\"]) + len(d[\"datasets\"])")" = "$NJOBS" ]' "no job was made"
srv_stop
finish
