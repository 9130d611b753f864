#!/usr/bin/env bash
# The training settings over HTTP: GET /models/train-keys.json answers the table both
# programs read (the same rows as `cdigits-worker train-keys --markdown`), and the model
# form refuses what the worker would refuse, with a 400 naming the form's field: a step
# size of 150% of training, a weight decay past the worker's bound. Skips
# (tests/shell/skip.bash) while the server or the worker is not built.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
srv_start
login_as fred

http GET /models/train-keys.json
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"keys\"]) > 40")" = true ]' "train-keys.json answers the table"
check '[ "$(jv "[(k[\"key\"], k[\"min\"], k[\"max\"], k[\"default\"]) for k in d[\"keys\"] if k[\"field\"] == \"lr_step_size\"]")" = "[[\"lr_policy.stepsize\", 0, 100, 33]]" ]' \
    "lr_step_size is lr_policy.stepsize, 0 to 100, 33 by default"
check '[ "$(jv "[(k[\"type\"], k[\"choices\"], k[\"default\"]) for k in d[\"keys\"] if k[\"key\"] == \"use_mean\"]")" = "[[\"enum\", [\"none\", \"image\", \"pixel\"], \"image\"]]" ]' \
    "use_mean's choices and default"
check '[ "$(jv "sorted(set(k) for k in d[\"keys\"])[0] == {\"key\", \"field\", \"type\", \"min\", \"max\", \"default\", \"choices\", \"label\", \"doc\"}")" = true ]' \
    "every row has key, field, type, min, max, default, choices, label and doc"
"$BUILD/cdigits-worker" train-keys --markdown >"$T/table.md"
check 'python3 - "$T/body" "$T/table.md" <<PY
import json, sys
keys = json.load(open(sys.argv[1]))["keys"]
cells = [[c.strip().strip("\`") for c in l.strip().strip("|").split("|")] for l in open(sys.argv[2]) if l.startswith("| \`")]
md = [(c[0], c[1] or None) for c in cells]
sys.exit(md != [(k["key"], k["field"]) for k in keys])
PY' "the same rows, in the same order, as train-keys --markdown"

# the form refuses what the worker refuses, naming its own field (400)
model() { http POST /models/images/classification/json -F dataset=nope -F model_name=m -F method=custom -F custom_network=x "$@"; }
model -F lr_policy=step -F lr_step_size=150
check '[ "$CODE" = 400 ] && [ "$(jv "d[\"errors\"][\"lr_step_size\"][0]")" = "Step size (% of training) must be between 0 and 100; got 150" ]' \
    "lr_step_size=150 is a 400 naming lr_step_size and its bounds"
model -F lr_policy=step -F lr_step_size=100 -F weight_decay=1000
check '[ "$CODE" = 400 ] && [ "$(jv "sorted(d[\"errors\"])")" = "[\"dataset\"]" ]' \
    "lr_step_size=100 and weight_decay=1000 are inside the bounds (only the missing dataset is refused)"
model -F weight_decay=1000.5 -F lr_policy=exp -F lr_exp_gamma=1e7
check '[ "$CODE" = 400 ] && jv "d[\"errors\"][\"weight_decay\"][0]" | grep -q "between 0 and 1000; got 1000.5" && jv "d[\"errors\"][\"lr_exp_gamma\"][0]" | grep -q "between 0 and 1000000; got 1e7"' \
    "weight decay and gamma past the worker's bounds are refused by the form"
finish
