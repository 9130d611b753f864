#!/usr/bin/env bash
# DIGITS 6.1 fields cdigits does not implement: set to anything but DIGITS's default they
# answer 400 {"errors": {field: [...]}} naming the field; left at the default (as DIGITS's
# own pages post them) they are accepted.
. "$(dirname "$0")/server_lib.bash" || exit 1
need_server

make_pngs "$T/images" --classes 2 --per-class 6 --size 8 --seed 5
srv_start --data-root "$T/images"
login_as tester
DSF=(-F folder_train="$T/images" -F encoding=png -F resize_channels=1 -F resize_width=8 -F resize_height=8
     -F folder_pct_val=25 -F compression=none)
JSON=(-H 'Accept: application/json')
refusal() { jv "' '.join(d['errors'].get('$1', []))"; }

# ---- datasets: backend other than lmdb
http POST /datasets/images/classification.json "${JSON[@]}" "${DSF[@]}" -F dataset_name=h5 -F backend=hdf5
check '[ "$CODE" = 400 ] && refusal backend | grep -q "cdigits does not implement .* (lmdb)"' \
    "backend=hdf5 is refused with 400 naming backend and its default"
http POST /datasets/images/classification.json "${JSON[@]}" "${DSF[@]}" -F dataset_name=lm -F backend=lmdb
check '[ "$CODE" = 200 ]' "backend=lmdb (DIGITS's default) is accepted"
DS=$(jv 'd["id"]')
wait_status "$DS" Done 120
check '[ $? = 0 ]' "the dataset posted with backend=lmdb is made"

# ---- models: Python layers, other frameworks (the augmentations are implemented)
NET=(-F model_name=m -F dataset="$DS" -F method=custom -F 'custom_network=layer { name: "x" type: "Input" }')
for kv in python_layer_server_file=/tmp/l.py framework=torch; do
    f=${kv%%=*}
    http POST /models/images/classification.json "${JSON[@]}" "${NET[@]}" -F "$kv"
    check '[ "$CODE" = 400 ] && refusal "$f" | grep -q "cdigits does not implement .*leave $f out or at its default"' \
        "$kv is refused with 400 naming $f"
done
http POST /models/images/classification.json "${JSON[@]}" "${NET[@]}" -F framework=caffe -F aug_quad_rot=none \
    -F aug_rot=0 -F aug_scale=0 -F aug_noise=0 -F aug_hsv_h=0.02 -F aug_hsv_s=0.04 -F aug_hsv_v=0.06 \
    -F python_layer_server_file= -F 'python_layer_client_file=@/dev/null;filename='
check '[ "$(jv "isinstance(d, dict)")" = true ] && [ -z "$(jv "\" \".join(k for k in d.get(\"errors\", {}) if k.startswith((\"aug_\", \"python_layer\", \"framework\")))")" ]' \
    "DIGITS's defaults for those fields are accepted (a JSON answer naming none of them)"
finish
