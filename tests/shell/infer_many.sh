#!/usr/bin/env bash
# classify_many and top_n against a real server and a trained LeNet: a labelled list
# whose confusion matrix is checked against two independent counts (the test's own,
# from the per-image answers, and `cdigits-worker classify --list`), bad lines reported
# per line, num_test_images, a list given as a text field, a list of 2,000 images, and
# the top_n images per class.
. "$(dirname "$0")/infer_lib.bash" || exit 1
infer_setup

http GET "/datasets/$DS/json"
LABELS=$(jv 'd["labels"]')
# every image with its class number (labels.txt order), relative to image_folder; the
# last 3 of each class carry the next class's number, so that the matrix has errors
py '
labels = json.loads(sys.argv[1]); root = sys.argv[2]
with open(sys.argv[3], "w") as rel, open(sys.argv[4], "w") as ab:
    for k, name in enumerate(labels):
        files = sorted(os.listdir(os.path.join(root, name)))
        for i, f in enumerate(files):
            label = k if i < len(files) - 3 else (k + 1) % len(labels)
            rel.write("%s/%s %d\n" % (name, f, label))
            ab.write("%s/%s/%s %d\n" % (root, name, f, label))' "$LABELS" "$T/images" "$T/list.txt" "$T/list_abs.txt"
NGOOD=$(wc -l <"$T/list.txt")
printf 'not an image\n' >"$T/images/notes.txt"
cp "$T/list.txt" "$T/list_bad.txt"
cat >>"$T/list_bad.txt" <<EOF

# a comment
/etc/hostname 1
missing/none.png 0
notes.txt 2
bars/000.png 7
EOF

URL=/models/images/classification/classify_many/json
http POST $URL -F job_id="$ML" -F image_list="@$T/list_bad.txt" -F image_folder="$T/images"
cp "$T/body" "$T/many.json"
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"classifications\"])")" = "$NGOOD" ]' "classify_many classifies the $NGOOD images"
check '[ "$(jv "sorted(d[\"skipped\"])")" = "[\"/etc/hostname\", \"$T/images/bars/000.png\", \"$T/images/missing/none.png\", \"$T/images/notes.txt\"]" ]' \
    "the outside path, the missing file, the non-image and the bad label are reported by line ($(jv 'd["skipped"]'))"
check '[ "$(jv "d[\"skipped\"][\"/etc/hostname\"].startswith(\"line $((NGOOD + 3)):\")")" = true ]' "a skipped line says its number"
check '[ "$(jv "d[\"labelled\"]")" = "$NGOOD" ] && [ "$(jv "d[\"failed\"]")" = 1 ]' "labelled and failed counts"
check '[ "$(jv "d[\"snapshot_iteration\"]")" = 6 ]' "the newest snapshot answered"

# the confusion matrix against the test's own count from the per-image answers
COUNT=$(py '
d = json.load(open(sys.argv[1])); labels = json.loads(sys.argv[2]); root = sys.argv[3]
m = [[0] * len(labels) for _ in labels]
top1 = 0
for line in open(sys.argv[4]):
    path, k = line.split()
    best = d["classifications"][root + "/" + path][0][0]
    m[int(k)][labels.index(best)] += 1
    top1 += labels.index(best) == int(k)
print(json.dumps({"m": m, "top1": round(100.0 * top1 / sum(map(sum, m)), 2)}))' "$T/many.json" "$LABELS" "$T/images" "$T/list.txt")
check '[ "$(jv "{\"m\": d[\"confusion_matrix\"], \"top1\": d[\"top1_accuracy\"]}")" = "$COUNT" ]' \
    "the confusion matrix and top-1 accuracy match the test's own count ($COUNT)"
check '[ "$(jv "d[\"top5_accuracy\"]")" = 100.0 ] && [ "$(jv "d[\"labels\"]")" = "$LABELS" ]' "top-5 accuracy is 100 with 3 classes"
check '[ "$(jv "sum(d[\"confusion_matrix\"][i][j] for i in range(3) for j in range(3) if i != j) >= 6")" = true ]' \
    "the wrongly labelled lines show off the diagonal"
check '[ "$(jv "[round(100.0 * r[i] / sum(r), 2) for i, r in enumerate(d[\"confusion_matrix\"])] == d[\"per_class_accuracy\"]")" = true ]' \
    "per-class accuracy is the matrix's diagonal over its rows"

# ... and against the command line, which runs no server
"$WORKER" classify --model "$MDIR" --list "$T/list_abs.txt" >"$T/cli.json" 2>"$T/cli.err"
check '[ $? = 0 ]' "cdigits-worker classify --list runs"
SAME=$(py '
a = json.load(open(sys.argv[1])); b = json.load(open(sys.argv[2]))
print(a["confusion_matrix"] == b["confusion_matrix"] and a["top1_accuracy"] == b["top1_accuracy"]
      and a["classifications"] == b["classifications"] and b["iteration"] == 6)' "$T/many.json" "$T/cli.json")
check '[ "$SAME" = True ]' "the command line gives the same classifications and confusion matrix"
"$WORKER" classify --model "$MDIR" --epoch 1 --list "$T/list.txt" --folder "$T/images" --jsonl >"$T/cli1.jsonl"
check '[ "$(tail -1 "$T/cli1.jsonl" | python3 -c "import json,sys; print(json.load(sys.stdin)[\"summary\"][\"iteration\"])")" = 3 ]' \
    "the command line's --epoch 1 takes iteration 3"
"$WORKER" classify --model "$MDIR" --epoch 5 --list "$T/list.txt" >/dev/null 2>"$T/cli5.err"
check '[ $? = 1 ] && grep -q "epochs 1, 2" "$T/cli5.err"' "the command line names the epochs that exist"

# num_test_images, a list as a text field, a snapshot by epoch
http POST $URL -F job_id="$ML" -F image_list="@$T/list.txt" -F image_folder="$T/images" -F num_test_images=10
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"classifications\"])")" = 10 ]' "num_test_images=10 classifies 10"
http POST $URL -F job_id="$ML" -F image_list="$(head -5 "$T/list_abs.txt")" -F snapshot_epoch=1
check '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"classifications\"])")" = 5 ] && [ "$(jv "d[\"snapshot_iteration\"]")" = 3 ]' \
    "a list as a text field, at epoch 1"
http POST $URL -F job_id="$ML" -F image_list="/etc/hostname"
check '[ "$CODE" = 400 ]' "a list without a usable line is 400"
http POST $URL -F job_id="$ML"
check '[ "$CODE" = 400 ]' "no list is 400"

# 2,000 images (links to the same files) go through in batches
mkdir -p "$T/images/many"
py '
import glob
files = sorted(glob.glob(sys.argv[1] + "/*/*.png"))
with open(sys.argv[2], "w") as out:
    for i in range(2000):
        link = "%s/many/%05d.png" % (sys.argv[1], i)
        os.symlink(files[i % len(files)], link)
        out.write(link + "\n")' "$T/images" "$T/big.txt"
START=$SECONDS
http POST $URL -F job_id="$ML" -F image_list="@$T/big.txt" --max-time 120
check '[ "$CODE" = 200 ] && [ "$(python3 -c "import json,sys; print(len(json.load(open(sys.argv[1]))[\"classifications\"]))" "$T/body")" = 2000 ]' \
    "a list of 2,000 images is classified ($((SECONDS - START)) s)"

# top_n: the best images of each class
http POST /models/images/classification/top_n/json -F job_id="$ML" -F image_list="@$T/list.txt" \
    -F image_folder="$T/images" -F top_n=4
cp "$T/body" "$T/topn.json"
check '[ "$CODE" = 200 ] && [ "$(jv "[r[0] for r in d[\"results\"]]")" = "$LABELS" ]' "top_n answers per class"
TOPN=$(py '
t = json.load(open(sys.argv[1])); d = json.load(open(sys.argv[2]))
ok = True
for label, images in t["results"]:
    got = [p for _, p in images]
    want = sorted((dict(v)[label] for v in d["classifications"].values()), reverse=True)[:4]
    ok = ok and got == want and all(dict(d["classifications"][path])[label] == p for path, p in images)
print(ok)' "$T/topn.json" "$T/many.json")
check '[ "$TOPN" = True ]' "each class's images are the 4 that score highest for it (checked against classify_many)"
http POST /models/images/classification/top_n/json -F job_id="$ML" -F image_list="@$T/list.txt" -F top_n=0
check '[ "$CODE" = 400 ]' "top_n=0 is refused"
srv_stop
finish
