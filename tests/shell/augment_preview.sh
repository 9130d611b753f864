#!/usr/bin/env bash
# POST /models/augment-preview/json against a real server and a real dataset: the
# defaults change nothing, a 180-degree turn is the pixels reversed (checked on the
# decoded PNGs), the same request draws the same images and another seed others, noise
# changes every image, whitening is drawn, and bad fields are form errors naming them.
. "$(dirname "$0")/server_lib.bash" || exit 1
need_server

make_pngs "$T/images" --classes 2 --per-class 6 --size 12 --seed 7
srv_start --data-root "$T/images"
login_as tester
JSON=(-H 'Accept: application/json')
http POST /datasets/images/classification.json "${JSON[@]}" -F dataset_name=aug -F folder_train="$T/images" \
    -F encoding=png -F resize_channels=3 -F resize_width=12 -F resize_height=12 -F folder_pct_val=25
check '[ "$CODE" = 200 ]' "a dataset job is made"
DS=$(jv 'd["id"]')
wait_status "$DS" Done 120
check '[ $? = 0 ]' "the dataset is done"

# (jv prints JSON: true; pngs prints Python: True)
# decodes the previews' PNGs (8-bit gray or RGB, not interlaced) and evaluates an expression
# over imgs = [(original, augmented)], each a list of rows of pixel tuples
pngs() {
    python3 - "$T/body" "$1" <<'EOF'
import base64, json, struct, sys, zlib
def decode(b64):
    data = base64.b64decode(b64)
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            ch = {0: 1, 2: 3}[color]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw, stride, rows, prev = zlib.decompress(idat), w * ch, [], bytearray(w * ch)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - ch] if i >= ch else 0
            b, c = prev[i], prev[i - ch] if i >= ch else 0
            p = a + b - c
            pred = [0, a, b, (a + b) // 2,
                    a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else b if abs(p - b) <= abs(p - c) else c][f]
            line[i] = (line[i] + pred) & 255
        rows.append([tuple(line[x * ch:(x + 1) * ch]) for x in range(w)])
        prev = line
    return rows
d = json.load(open(sys.argv[1]))
imgs = [(decode(i["original"]), decode(i["augmented"])) for i in d["images"]]
print(eval(sys.argv[2]))
EOF
}

P=/models/augment-preview/json
http POST $P "${JSON[@]}" -d dataset="$DS" -d count=4
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"images\"])")" = 4 ]' "four previews of the defaults"
check '[ "$(pngs "all(o == a for o, a in imgs) and len(imgs[0][0]) == 12 and len(imgs[0][0][0]) == 12 and len(imgs[0][0][0][0]) == 3")" = True ]' \
    "the defaults give every 12x12 RGB image back unchanged"
check '[ "$(jv "[i[\"params\"][\"scale\"] for i in d[\"images\"]] == [1, 1, 1, 1] and d[\"seed\"] == 1")" = true ]' \
    "their params are the identity, seed 1"

http POST $P "${JSON[@]}" -d dataset="$DS" -d count=8 -d aug_quad_rot=rot180 -d random_seed=3
check '[ "$CODE" = 200 ]' "rot180 answers"
check '[ "$(jv "sorted(set(i[\"params\"][\"quarter_turns\"] for i in d[\"images\"])) == [0, 2]")" = true ]' \
    "rot180 draws 0 and 2 quarter turns over 8 images"
check '[ "$(pngs "all((a == [row[::-1] for row in o[::-1]]) if i[\"params\"][\"quarter_turns\"] == 2 else a == o for (o, a), i in zip(imgs, d[\"images\"]))")" = True ]' \
    "a half turn is the pixels reversed, exactly; no turn the image itself"
cp "$T/body" "$T/first.json"
http POST $P "${JSON[@]}" -d dataset="$DS" -d count=8 -d aug_quad_rot=rot180 -d random_seed=3
check 'cmp -s "$T/body" "$T/first.json"' "the same request draws the same previews"
http POST $P "${JSON[@]}" -d dataset="$DS" -d count=8 -d aug_rot=30 -d random_seed=4
A4=$(jv '[i["params"]["angle"] for i in d["images"]]')
http POST $P "${JSON[@]}" -d dataset="$DS" -d count=8 -d aug_rot=30 -d random_seed=5
check '[ "$(jv "[i[\"params\"][\"angle\"] for i in d[\"images\"]]")" != "$A4" ] && [ "$(jv "all(abs(i[\"params\"][\"angle\"]) <= 30 for i in d[\"images\"])")" = true ]' \
    "another seed draws other angles, all within +-30"

http POST $P "${JSON[@]}" -d dataset="$DS" -d count=3 -d aug_noise=0.2 -d aug_whitening=true \
    -d aug_hsv_use=true -d aug_hsv_h=0.1
check '[ "$CODE" = 200 ] && [ "$(pngs "all(o != a for o, a in imgs)")" = True ]' "noise changes every image"
check '[ "$(jv "all(i[\"params\"][\"whiten\"] and i[\"params\"][\"noise\"] == 51 and i[\"params\"][\"hue\"] != 0 for i in d[\"images\"])")" = true ]' \
    "whitening, noise 0.2 (51 levels) and a hue shift are drawn"

http POST $P "${JSON[@]}" -d dataset="$DS" -d aug_rot=200 -d aug_quad_rot=sideways -d count=17
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"aug_rot\"][0]" | grep -q "between 0 and 180"' \
    "aug_rot=200 is a form error naming its range"
check 'jv "d[\"errors\"][\"aug_quad_rot\"][0]" | grep -q "one of none, rot90, rot180, rotall"' \
    "an unknown quarter-turn choice names the choices"
check 'jv "d[\"errors\"][\"count\"][0]" | grep -q "from 1 to 16"' "count 17 is refused"
http POST $P "${JSON[@]}" -d aug_rot=5
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"dataset\"][0]" | grep -q "Dataset is required"' "a preview needs a dataset"
http POST $P "${JSON[@]}" -d dataset=nope
check '[ "$CODE" = 404 ]' "an unknown dataset is 404"

# the model form takes the same fields and writes them to train.json under their keys
http POST /models/images/classification.json "${JSON[@]}" -F model_name=m -F dataset="$DS" -F method=standard \
    -F standard_networks=lenet -F train_epochs=1 -F aug_quad_rot=rotall -F aug_rot=15 -F aug_scale=0.07 \
    -F aug_noise=0.03 -F aug_contrast=0.8 -F aug_whitening=y -F aug_hsv_use=y -F aug_hsv_h=0.1
check '[ "$CODE" = 200 ]' "a model with augmentations is made"
M=$(jv 'd["id"]')
TJ=$(find "$T/data" -path "*$M*" -name train.json | head -1)
check '[ -n "$TJ" ] && python3 -c "import json, sys; t = json.load(open(sys.argv[1])); sys.exit(not (t[\"quad_rotation\"] == \"rotall\" and t[\"rotation\"] == 15 and t[\"rescale\"] == 0.07 and t[\"noise\"] == 0.03 and t[\"contrast\"] == 0.8 and t[\"whitening\"] is True and t[\"hsv_shift\"] is True and t[\"hsv_h\"] == 0.1 and t[\"hsv_v\"] == 0.06))" "$TJ"' \
    "its train.json holds quad_rotation, rotation, rescale, noise, contrast, whitening and hsv_* ($TJ)"
finish
