#!/usr/bin/env bash
# classify_one against a real server and a trained LeNet: by path and by upload, at
# each snapshot (by epoch and by iteration), images of another size and channel count,
# bad input (a non-image upload, a truncated PNG, a missing snapshot epoch, a path
# outside the roots), the visualizations of every layer, the warm worker kept per
# (model, snapshot) and reused, parallel requests, warm requests answered alike, its
# stop when idle and when the model is deleted. (Latency is measured in bench/, never here.)
. "$(dirname "$0")/infer_lib.bash" || exit 1
# warm workers stay for the default idle time while the checks that need the same
# workers run; the idle stop is checked at the end on a server restarted with a short one
infer_setup

IMG=$(ls "$T/images/columns/"*.png | head -1)
URL=/models/images/classification/classify_one/json

http POST $URL -F job_id="$ML" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' "classify_one by path: 3 classes ranked"
check '[ "$(jv "abs(sum(p for _, p in d[\"predictions\"]) - 100) < 0.05")" = true ]' "the percentages add up to 100"
check '[ "$(jv "d[\"snapshot_iteration\"]")" = 6 ] && [ "$(jv "d[\"snapshot_epoch\"]")" = 2.0 ]' \
    "without snapshot_epoch the newest snapshot answers (iteration 6, epoch 2)"
check '[ "$(jv "[p for _, p in d[\"predictions\"]] == sorted([p for _, p in d[\"predictions\"]], reverse=True)")" = true ]' \
    "predictions are sorted by percent"
BYPATH=$(jv 'd["predictions"]')

http POST $URL -F job_id="$ML" -F image_file="@$IMG"
P=$(jv 'd["predictions"]')
check '[ "$CODE" = 200 ] && [ "$P" = "$BYPATH" ]' "classify_one by upload gives the same answer"

# the first snapshot: by epoch and by iteration
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F snapshot_epoch=1
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"snapshot_iteration\"]")" = 3 ]' "snapshot_epoch 1 is iteration 3"
EPOCH1=$(jv 'd["predictions"]')
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F snapshot_iteration=3
P=$(jv 'd["predictions"]')
check '[ "$CODE" = 200 ] && [ "$P" = "$EPOCH1" ]' "snapshot_iteration 3 answers as epoch 1"
check '[ "$EPOCH1" != "$BYPATH" ]' "the two snapshots answer differently ($EPOCH1 / $BYPATH)"
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F snapshot_epoch=7
check '[ "$CODE" = 404 ] && jv "d[\"error\"][\"description\"]" | grep -q "epochs 1, 2"' \
    "a snapshot epoch that does not exist is 404 naming those that do"
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F snapshot_epoch=abc
check '[ "$CODE" = 400 ]' "a snapshot epoch that is not a number is 400"

# images of another size and channel count are resized and converted
py '
import struct, zlib
w, h = 40, 30
raw = b"".join(b"\0" + bytes((x * 6 + c * 40 + y) % 256 for x in range(w) for c in range(3)) for y in range(h))
def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                              + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))' "$T/rgb40x30.png"
http POST $URL -F job_id="$ML" -F image_file="@$T/rgb40x30.png"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"predictions\"])")" = 3 ]' "a 40x30 RGB image is resized and made gray"
PNGP=$(jv 'd["predictions"]')
# the same pixels as a PPM: the same answer
py '
w, h = 40, 30
px = bytes((x * 6 + c * 40 + y) % 256 for y in range(h) for x in range(w) for c in range(3))
open(sys.argv[1], "wb").write(b"P6\n%d %d\n255\n" % (w, h) + px)' "$T/rgb40x30.ppm"
http POST $URL -F job_id="$ML" -F image_file="@$T/rgb40x30.ppm"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"predictions\"]")" = "$PNGP" ]' "the same image as a PPM upload gets the same answer"

# bad input
printf 'this is not an image\n' >"$T/note.png"
http POST $URL -F job_id="$ML" -F image_file="@$T/note.png"
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "not a PNG, JPEG, BMP, PGM or PPM image"' "a non-image upload is 400"
head -c 60 "$IMG" >"$T/truncated.png"
http POST $URL -F job_id="$ML" -F image_file="@$T/truncated.png"
check '[ "$CODE" = 400 ]' "a truncated PNG is 400 ($(jv 'd["error"]["description"]'))"
http POST $URL -F job_id="$ML" -F image_path=/etc/hostname
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"image_path\"][0]" | grep -q outside' "a path outside the data roots is refused"
http POST $URL -F job_id="$ML"
check '[ "$CODE" = 400 ] && jv "d[\"error\"][\"description\"]" | grep -q "image_path or image_file"' "no image is 400"
http POST $URL -F job_id="$DS" -F image_path="$IMG"
check '[ "$CODE" = 400 ]' "a dataset is not a model"
http POST $URL -F job_id=20000101-000000-dead -F image_path="$IMG"
check '[ "$CODE" = 404 ]' "an unknown job is 404"

# visualizations: every layer's activations, and weights with statistics
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F show_visualizations=1
cp "$T/body" "$T/vis.json"
P=$(jv 'd["predictions"]')
check '[ "$CODE" = 200 ] && [ "$P" = "$BYPATH" ]' "with visualizations the predictions are the same"
check '[ "$(jv "[v[\"param_count\"] for v in d[\"visualizations\"] if v[\"name\"]==\"conv1\" and v[\"vis_type\"]==\"Weights\"]")" = "[520]" ]' \
    "conv1's weights: 520 parameters (20 5x5 filters and 20 biases)"
check '[ "$(jv "[v[\"data_stats\"][\"shape\"] for v in d[\"visualizations\"] if v[\"name\"]==\"conv1\" and v[\"vis_type\"]==\"Activation\"]")" = "[[1, 20, 24, 24]]" ]' \
    "conv1's activations are 20 maps of 24x24"
check '[ "$(jv "all(len(v[\"data_stats\"][\"histogram\"][0]) == 20 and sum(v[\"data_stats\"][\"histogram\"][0]) == __import__(\"math\").prod(v[\"data_stats\"][\"shape\"]) for v in d[\"visualizations\"])")" = true ]' \
    "every histogram has 20 bins that count every value"
check '[ "$(jv "[v[\"name\"] for v in d[\"visualizations\"] if v[\"vis_type\"]==\"Weights\"]")" = "[\"conv1\", \"conv2\", \"ip1\", \"ip2\"]" ]' \
    "the layers with weights are conv1, conv2, ip1 and ip2"
# the softmax activation is the prediction
check '[ "$(jv "abs(max(v[\"data_stats\"][\"histogram\"][2][2] for v in d[\"visualizations\"] if v[\"name\"]==\"softmax\") * 100 - d[\"predictions\"][0][1]) < 0.01")" = true ]' \
    "the softmax layer's largest value is the top prediction"
pngs_ok=1
for u in $(python3 -c 'import json,sys; print(" ".join(v["image"] for v in json.load(open(sys.argv[1]))["visualizations"]))' "$T/vis.json"); do
    curl -s -o "$T/vis.png" "$B$u"
    [ "$(head -c 4 "$T/vis.png" | od -An -c | tr -d ' ')" = "211PNG" ] || { pngs_ok=0; echo "     not a PNG: $u"; }
done
check '[ "$pngs_ok" = 1 ]' "every visualization is a PNG served under /files/"

# one warm worker per (model, snapshot), reused
http POST $URL -F job_id="$ML" -F image_path="$IMG" -F snapshot_epoch=1
check '[ "$(serve_pids "$MDIR" | wc -l)" = 2 ]' "two warm workers: the newest snapshot and epoch 1"
BEFORE=$(serve_pids "$MDIR" | sort | tr '\n' ' ')
PIDS=""
for i in 1 2 3 4; do
    curl -s -o "$T/par$i" -w '%{http_code}' -F job_id="$ML" -F image_path="$IMG" "$B$URL" >"$T/par$i.code" &
    PIDS="$PIDS $!"
done
wait $PIDS
par_ok=1
for i in 1 2 3 4; do
    [ "$(cat "$T/par$i.code")" = 200 ] && [ "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predictions"])' "$T/par$i" | tr -d "'" | tr -d ' ')" = "$(printf %s "$BYPATH" | tr -d '"' | tr -d ' ')" ] || par_ok=0
done
check '[ "$par_ok" = 1 ]' "four requests at once all answer the same"
check '[ "$(serve_pids "$MDIR" | sort | tr "\n" " ")" = "$BEFORE" ]' "the same worker processes answered them"

# warm requests, one after another, each answered alike by the same workers
for i in $(seq 1 20); do
    curl -s -o "$T/warm-$i.json" -w '%{http_code}\n' -F job_id="$ML" -F image_path="$IMG" "$B$URL"
done >"$T/codes"
same=1
for i in $(seq 2 20); do cmp -s "$T/warm-1.json" "$T/warm-$i.json" || same=0; done
check '[ "$(grep -cx 200 "$T/codes")" = 20 ] && [ "$same" = 1 ]' \
    "20 warm classify_one requests all answer 200 with the same predictions"
check '[ "$(serve_pids "$MDIR" | sort | tr "\n" " ")" = "$BEFORE" ]' "by the same worker processes"

# idle workers stop: the same data on a server whose workers idle 2 s at most
srv_stop
check 'wait_until 120 "[ -z \"\$(serve_pids \"$MDIR\")\" ]"' "the server's stop ends its warm workers"
srv_start --data-root "$T/images" --model-idle 2
login_as tester
http POST $URL -F job_id="$ML" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(serve_pids "$MDIR" | wc -l)" = 1 ]' "after a restart a request starts a warm worker"
check 'wait_until 120 "[ -z \"\$(serve_pids \"$MDIR\")\" ]"' "an idle worker stops after --model-idle seconds"

# deleting the model stops its worker
http POST $URL -F job_id="$ML" -F image_path="$IMG"
check '[ "$CODE" = 200 ] && [ "$(serve_pids "$MDIR" | wc -l)" = 1 ]' "a new request starts a worker again"
http DELETE "/models/$ML"
check '[ "$CODE" = 200 ]' "model deleted"
check 'wait_until 120 "[ -z \"\$(serve_pids \"$MDIR\")\" ]"' "deleting the model stops its worker"
srv_stop
finish
