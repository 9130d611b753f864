#!/usr/bin/env bash
# DIGITS 6.1's dataset behaviour with the real worker on generated PNGs: one
# ParseFolderTasks entry per folder and each folder's own minimum and maximum per class,
# the val list's own folder (textfile_val_folder), a list whose images are all missing,
# mean.jpg under /files/<id>/, and /autocomplete/path inside the data roots.
. "$(dirname "${BASH_SOURCE[0]}")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"

IMG=$T/images
make_pngs "$IMG/train" --classes 3 --per-class 10 --size 12 --seed 3
make_pngs "$IMG/other" --classes 3 --per-class 8 --size 12 --seed 5
srv_start --data-root "$IMG"
login_as tester

# create NAME [curl args]: a folder dataset of $IMG/train, 12x10 (width x height), waited
# to its end; sets DS and ST (its final status) and leaves its JSON in $BODY
create() {
    local name=$1
    shift
    http POST /datasets/images/classification/json -F dataset_name="$name" -F folder_train="$IMG/train" \
        -F resize_width=12 -F resize_height=10 -F encoding=png "$@"
    DS=$(jv 'd["id"]')
    wait_status "$DS" Done 120
    ST=$?
    http GET "/datasets/$DS/json"
}

# 1. one parse task per folder; the separate folder's own limits
create plain -F folder_pct_val=20 -F folder_pct_test=10
check '[ $ST -eq 0 ] && [ "$(jv "len(d[\"ParseFolderTasks\"])")" = 1 ]' "one folder, one ParseFolderTasks entry"
check '[ "$(jv "[d[\"ParseFolderTasks\"][0][k] for k in (\"name\", \"label_count\", \"train_count\", \"val_count\", \"test_count\")]")" = "[\"Parse Folder (train/val/test)\", 3, 21, 6, 3]" ]' \
    "its name and counts are DIGITS's (20 % val, 10 % test of 30)"
create valdir -F has_val_folder=true -F folder_val="$IMG/other" -F folder_val_max_per_class=5 -F folder_pct_val=20
check '[ $ST -eq 0 ] && [ "$(jv "len(d[\"ParseFolderTasks\"])")" = 2 ]' "a val folder adds its own ParseFolderTasks entry"
check '[ "$(jv "[d[\"ParseFolderTasks\"][1][k] for k in (\"name\", \"label_count\", \"train_count\", \"val_count\", \"test_count\")]")" = "[\"Parse Folder (val)\", 3, 0, 15, 0]" ]' \
    "folder_val_max_per_class=5 keeps 5 of each class's 8"
check '[ "$(jv "d[\"ParseFolderTasks\"][0][\"val_count\"]")" = 0 ] && [ "$(jv "d[\"ParseFolderTasks\"][0][\"train_count\"]")" = 30 ]' \
    "the train folder gives nothing to val when a val folder is given"
check '[ "$(jv "d[\"splits\"][\"val\"]")" = 15 ]' "val.db holds the val folder's 15 images"
check '[ "$(python3 -c "import json, sys; print([[t[k] for k in (\"name\", \"label_count\", \"train_count\", \"val_count\")] for t in json.load(open(sys.argv[1]))[\"parse_tasks\"]])" "$(jv "d[\"directory\"]")/stats.json")" = "[['"'"'Parse Folder (train)'"'"', 3, 30, 0], ['"'"'Parse Folder (val)'"'"', 3, 0, 15]]" ]' \
    "the worker records both parses in stats.json"
create testdir -F has_test_folder=true -F folder_test="$IMG/other" -F folder_test_min_per_class=9
check '[ $ST -ne 0 ] && [ "$(jv "d[\"status\"]")" = Error ]' "a test folder whose classes are all below its minimum fails"
http GET "/jobs/$DS/status"
check 'printf %s "$BODY" | grep -q "gave no test images"' "and the error says why"
create testmin -F has_test_folder=true -F folder_test="$IMG/other" -F folder_test_min_per_class=8
check '[ $ST -eq 0 ] && [ "$(jv "[d[\"ParseFolderTasks\"][1][k] for k in (\"name\", \"label_count\", \"test_count\")]")" = "[\"Parse Folder (test)\", 3, 24]" ]' \
    "folder_test_min_per_class=8 keeps the classes of 8"
http POST /datasets/images/classification/json -F dataset_name=bad -F folder_train="$IMG/train" \
    -F has_val_folder=true -F folder_val="$IMG/other" -F folder_val_min_per_class=6 -F folder_val_max_per_class=3
check '[ "$CODE" = 400 ] && [ "$(jv "\"folder_val_max_per_class\" in d[\"errors\"]")" = true ]' \
    "a val maximum below the val minimum is a form error on its field"

# 2. textfile_val_folder resolves the val list; all-missing images fail the dataset
mkdir -p "$T/lists"
(cd "$IMG/train" && find . -name '*.png' | sort | awk -F/ '{c = $2; if (!(c in l)) l[c] = n++; print substr($0, 3), l[c]}') \
    > "$T/lists/train.txt"
(cd "$IMG/other" && find . -name '*.png' | sort | awk -F/ '{c = $2; if (!(c in l)) l[c] = n++; print substr($0, 3), l[c]}') \
    > "$T/lists/val.txt"
ls "$IMG/train" > "$T/lists/labels.txt"
textds() {
    http POST /datasets/images/classification/json -F dataset_name="$1" -F method=textfile \
        -F resize_width=12 -F resize_height=10 -F "textfile_train_images=@$T/lists/train.txt" \
        -F "textfile_labels_file=@$T/lists/labels.txt" -F textfile_train_folder="$IMG/train" \
        -F textfile_use_val=y -F "textfile_val_images=@$T/lists/val.txt" "${@:2}"
    DS=$(jv 'd["id"]')
    wait_status "$DS" Done 120
    ST=$?
    http GET "/datasets/$DS/json"
}
textds listroot -F textfile_val_folder="$IMG/other"
check '[ $ST -eq 0 ] && [ "$(jv "d[\"splits\"][\"val\"]")" = 24 ] && [ "$(jv "d[\"skipped\"]")" = 0 ]' \
    "textfile_val_folder: the val list's 24 images are found"
http POST /datasets/images/classification/json -F dataset_name=nofolder -F method=textfile \
    -F "textfile_train_images=@$T/lists/train.txt" -F "textfile_labels_file=@$T/lists/labels.txt" \
    -F textfile_use_val=y -F "textfile_val_images=@$T/lists/val.txt" -F textfile_val_folder="$IMG/nowhere"
check '[ "$CODE" = 400 ] && [ "$(jv "\"textfile_val_folder\" in d[\"errors\"]")" = true ]' \
    "a textfile_val_folder that does not exist is refused"
mkdir -p "$IMG/empty"
textds listempty -F textfile_val_folder="$IMG/empty"
check '[ $ST -ne 0 ] && [ "$(jv "d[\"status\"]")" = Error ]' "a val list whose images are all missing does not end Done"
http GET "/jobs/$DS/status"
check 'printf %s "$BODY" | grep -q "none of the 24 val images could be read (24 files skipped"' \
    "its error counts the skipped images"

# 3. mean.jpg beside mean.png, 12x10 as DIGITS's test_mean_dimensions reads it
create meanjpg -F folder_pct_val=25
curl -s -o "$T/mean.jpg" -w '%{http_code} %{content_type}' "$B/files/$DS/mean.jpg" > "$T/mean.code"
check '[ "$(cat "$T/mean.code")" = "200 image/jpeg" ]' "GET /files/<id>/mean.jpg is a JPEG"
check '[ "$(python3 -c "
import struct, sys
b = open(sys.argv[1], \"rb\").read()
i = 2
while i < len(b) and b[i] == 0xFF and b[i + 1] not in (0xC0, 0xC1, 0xC2):
    i += 2 + struct.unpack(\">H\", b[i + 2:i + 4])[0]
h, w = struct.unpack(\">HH\", b[i + 5:i + 9])
print(w, h)" "$T/mean.jpg")" = "12 10" ]' "mean.jpg is the dataset's size (width 12, height 10)"
curl -s -o /dev/null -w '%{http_code}' "$B/files/$DS/mean.png" > "$T/mean.code"
check '[ "$(cat "$T/mean.code")" = 200 ]' "mean.png is still served"

# 4. /autocomplete/path
http GET "/autocomplete/path?query=$IMG/tr"
check '[ "$CODE" = 200 ] && [ "$(jv "d[\"suggestions\"]")" = "[\"$IMG/train\"]" ]' "completes a folder inside the roots"
http GET "/autocomplete/path?query=$IMG/"
check '[ "$(jv "d[\"suggestions\"]")" = "[\"$IMG/empty\", \"$IMG/other\", \"$IMG/train\"]" ]' "lists a root's entries, sorted"
FIRST=$(ls "$IMG/train" | head -n 1)
http GET "/autocomplete/path?query=$IMG/train/$FIRST/00"
check '[ "$(jv "d[\"suggestions\"] == [\"$IMG/train/$FIRST/%03d.png\" % i for i in range(10)]")" = true ]' \
    "completes file names inside a class folder"
for q in /etc/pass /etc/ ./ / "$IMG/../" "$IMG/train/../../"; do
    http GET "/autocomplete/path?query=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$q")"
    check '[ "$CODE" = 200 ] && [ "$(jv "[s for s in d[\"suggestions\"] if not s.startswith(\"$IMG\")]")" = "[]" ]' \
        "query $q: 200 and nothing outside the roots"
done
ln -s /etc "$IMG/train/link-out"
http GET "/autocomplete/path?query=$IMG/train/link"
check '[ "$(jv "d[\"suggestions\"]")" = "[]" ]' "a symlink out of the roots is not offered"
finish
