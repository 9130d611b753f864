#!/usr/bin/env bash
# DIGITS's dataset pages, with the real worker on generated images: the explorer
# (GET /datasets/images/classification/explore: "Items per page", a class filter, pages
# of records with their labels and images; 500 "status should be 'D'" for a dataset
# that is not Done), the summary fragment (GET /datasets/summary), the form pages'
# headings, and clones of a dataset of each encoding: clone=<id> on the form makes a
# copy (the saved fields over the posted ones, as DIGITS), POST /clone/<id> a copy with
# the posted fields over the saved ones. Every string of the pages is escaped.
. "$(dirname "$0")/server_lib.bash"
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"

SEED=$((RANDOM % 1000 + 1))
echo "images drawn with seed $SEED"
make_pngs "$T/images" --classes 3 --per-class 12 --size 16 --seed "$SEED"
mkdir "$T/lists"
mkfifo "$T/lists/blocker.png"
srv_start --data-root "$T/images" --data-root "$T/lists" --web "$SRC/web"
login_as tester
NAME='shapes <b>&"it'"'"'s'
ESCAPED='shapes &lt;b&gt;&amp;&quot;it&#39;s'
DSF=(-F folder_train="$T/images" -F resize_channels=3 -F resize_width=12 -F resize_height=10 -F folder_pct_val=25)

# ---- the form pages' headings
for p in datasets/images/classification/new:Dataset models/images/classification/new:Model; do
    http GET "/${p%%:*}"
    check '[ "$CODE" = 200 ] && grep -q "<h1>New Image Classification ${p##*:}</h1>" "$T/body" && grep -q "<title>New Image Classification ${p##*:}" "$T/body"' \
        "GET /${p%%:*} is headed 'New Image Classification ${p##*:}'"
done

# ---- one dataset of each encoding
declare -A DS
for enc in png jpg none; do
    http POST /datasets/images/classification/json "${DSF[@]}" -F encoding=$enc -F "dataset_name=$NAME $enc"
    DS[$enc]=$(jv 'd["id"]')
done
for enc in png jpg none; do
    wait_status "${DS[$enc]}" Done 120
    check '[ $? = 0 ]' "the $enc dataset is made"
done

# html_count PATTERN: how many times the extended regex matches in the last body
html_count() { grep -oE "$1" "$T/body" | wc -l; }

for enc in png jpg none; do
    id=${DS[$enc]}
    http GET "/datasets/$id/json"
    cp "$T/body" "$T/ds.json"
    TRAIN=$(jv 'd["CreateDbTasks"][0]["entries"]')
    VAL=$(jv 'd["CreateDbTasks"][1]["entries"]')
    L1=$(jv 'd["labels"][1]')
    N1=$(jv 'd["classes"][1]["train"]')
    check '[ "$TRAIN" -gt 25 ] && [ "$VAL" -gt 0 ] && [ "$N1" -gt 0 ]' "the $enc dataset has $TRAIN train and $VAL val records"

    http GET "/datasets/images/classification/explore?job_id=$id&db=train"
    check '[ "$CODE" = 200 ] && grep -q "Items per page" "$T/body" && grep -q "<title>$ESCAPED $enc - Explorer</title>" "$T/body"' \
        "$enc: the explorer of train is 200 with 'Items per page' and the escaped name"
    check '! grep -q "<b>&" "$T/body" && [ "$(html_count "<img src=\"/datasets/$id/images/train/[0-9]+\"")" = 25 ]' \
        "$enc: its first page shows 25 of the records, nothing of the name unescaped"
    for k in 0 1 2; do
        lab=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["labels"][int(sys.argv[2])])' "$T/ds.json" $k)
        check 'grep -q "label=$k\">$lab</a>" "$T/body"' "$enc: the class filter links class $k ($lab)"
    done
    url=$(grep -oE "/datasets/$id/images/train/[0-9]+" "$T/body" | head -1)
    want=image/png
    [ "$enc" = jpg ] && want=image/jpeg
    ctype=$(curl -s -o "$T/img" -w '%{content_type}' -b "$JAR" "$B$url")
    check '[ "$ctype" = "$want" ] && [ -s "$T/img" ]' "$enc: the page's first image $url is $want"

    http GET "/datasets/images/classification/explore?job_id=$id&db=train&page=1&size=25"
    check '[ "$CODE" = 200 ] && [ "$(html_count "<img src=\"/datasets/$id/images/train/[0-9]+\"")" = $((TRAIN - 25)) ]' \
        "$enc: page 1 shows the other $((TRAIN - 25)) records"
    http GET "/datasets/images/classification/explore?job_id=$id&db=train&size=3&page=2"
    got=$(grep -oE "/datasets/$id/images/train/[0-9]+" "$T/body" | sed 's|.*/||' | tr '\n' ' ')
    last=$(((TRAIN - 1) / 3))
    check 'grep -q "page=$last&amp;size=3&amp;db=train\">$last</a>" "$T/body" && grep -q "page=2&amp;size=3&amp;db=train\" class=\"active\">2</a>" "$T/body"' \
        "$enc: the pager marks page 2 and links the last page $last"
    http GET "/datasets/$id/explore/json?split=train&size=3&page=2"
    check '[ "$got" = "$(jv "\" \".join(str(i[\"index\"]) for i in d[\"items\"]) + \" \"")" ]' \
        "$enc: page 2 of 3 shows the records the JSON explorer pages ($got)"

    http GET "/datasets/images/classification/explore?job_id=$id&db=train&label=1&size=100"
    check '[ "$CODE" = 200 ] && [ "$(html_count "<figcaption>")" = "$N1" ] && [ "$(html_count "<figcaption>$L1</figcaption>")" = "$N1" ]' \
        "$enc: label=1 shows the $N1 records of class $L1 and no other"
    http GET "/datasets/images/classification/explore?job_id=$id&db=VAL&label=None"
    check '[ "$CODE" = 200 ] && grep -q "Items per page" "$T/body" && [ "$(html_count "<img src=\"/datasets/$id/images/val/[0-9]+\"")" = "$VAL" ]' \
        "$enc: db=VAL (label=None, as DIGITS's links say) shows the $VAL val records"

    http GET "/datasets/summary?job_id=$id"
    check '[ "$CODE" = 200 ] && grep -q "$ESCAPED $enc</a>" "$T/body" && grep -q "<dd>12x10</dd>" "$T/body" && grep -q COLOR "$T/body" && grep -q "<dd>cddb</dd>" "$T/body" && grep -q "<dd>$TRAIN images</dd>" "$T/body"' \
        "$enc: the summary names the dataset (escaped), its 12x10 color images, cddb and $TRAIN train records"
    http PUT "/jobs/$id" -F "job_name=renamed <$enc>"
    http GET "/datasets/summary?job_id=$id"
    check '[ "$CODE" = 200 ] && grep -q "renamed &lt;$enc&gt;</a>" "$T/body"' "$enc: the summary shows the new name after PUT /jobs/<id>"

    # ---- clone=<id> on the form: a copy, whatever the script posts beside it
    http GET "/clone/$id/json"
    cp "$T/body" "$T/fields1.json"
    http POST /datasets/images/classification/json "${DSF[@]}" -F encoding=png -F resize_width=8 \
        -F dataset_name=other -F clone="$id"
    C=$(jv 'd["id"]')
    wait_status "$C" Done 120
    check '[ $? = 0 ]' "$enc: the clone of the form is made"
    http GET "/clone/$C/json"
    check 'python3 -c "import json,sys; a,b=(json.load(open(f))[\"fields\"] for f in sys.argv[1:]); sys.exit(a!=b)" "$T/fields1.json" "$T/body"' \
        "$enc: the clone was made with every field of the original"
    http GET "/datasets/$C/json"
    check 'python3 -c "import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); sys.exit(any(a[k]!=b[k] for k in (\"CreateDbTasks\",\"image_dims\",\"encoding\",\"resize_mode\")))" "$T/ds.json" "$T/body"' \
        "$enc: the clone's CreateDbTasks (encoding $enc) equal the original's"
    # ---- POST /clone/<id>: a copy with changes
    http POST "/clone/$id/json" -F encoding=png -F resize_width=8
    C=$(jv 'd["id"]')
    wait_status "$C" Done 120
    http GET "/datasets/$C/json"
    check '[ "$(jv "d[\"CreateDbTasks\"][0][\"encoding\"]")" = png ] && [ "$(jv "d[\"CreateDbTasks\"][0][\"image_width\"]")" = 8 ] && [ "$(jv "d[\"resize_mode\"]")" = "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[\"resize_mode\"])" "$T/ds.json")" ]' \
        "$enc: POST /clone/<id> makes the copy with the posted encoding and width"
done

# ---- what the explorer refuses
id=${DS[png]}
http GET "/datasets/images/classification/explore?job_id=$id&db=test"
check '[ "$CODE" = 500 ] && grep -q "No create_db task for test" "$T/body"' "a split the dataset has not is 500 'No create_db task'"
http GET "/datasets/images/classification/explore?job_id=$id&db=all"
check '[ "$CODE" = 400 ] && grep -q "db=train, db=val or db=test" "$T/body"' "a db that names no split is 400"
http GET "/datasets/images/classification/explore?job_id=$id&label=3"
check '[ "$CODE" = 400 ] && grep -q "label" "$T/body"' "a label the dataset has not is 400"
http GET "/datasets/images/classification/explore?job_id=$id&size=0"
check '[ "$CODE" = 400 ]' "size 0 is 400"
http GET "/datasets/images/classification/explore"
check '[ "$CODE" = 400 ] && grep -q "job_id is a required field" "$T/body"' "the explorer without job_id is 400"
http GET "/datasets/images/classification/explore?job_id=20000101-000000-dead"
check '[ "$CODE" = 404 ]' "the explorer of an unknown job is 404"
http GET "/datasets/summary?job_id=20000101-000000-dead"
check '[ "$CODE" = 404 ]' "the summary of an unknown job is 404"

# A dataset whose list names a pipe holds the one dataset slot (its worker waits on the
# pipe), so the one made behind it is Waiting when it is aborted.
printf 'blocker.png 0\n' >"$T/lists/train.txt"
printf 'a\n' >"$T/lists/labels.txt"
http POST /datasets/images/classification/json -F dataset_name=blocker -F method=textfile -F textfile_use_local_files=1 \
    -F textfile_local_train_images="$T/lists/train.txt" -F textfile_local_labels_file="$T/lists/labels.txt" \
    -F textfile_train_folder="$T/lists" -F resize_width=8 -F resize_height=8
BLOCKER=$(jv 'd["id"]')
wait_status "$BLOCKER" Running 120
check '[ $? = 0 ]' "the dataset that holds the slot runs"
http GET "/datasets/images/classification/explore?job_id=$BLOCKER&db=train"
check '[ "$CODE" = 500 ] && grep -q "status should be '"'D'"' but is '"'R'"'" "$T/body"' "the explorer of a running dataset is 500 'status should be'"
http POST /datasets/images/classification/json "${DSF[@]}" -F dataset_name=behind
BEHIND=$(jv 'd["id"]')
http POST "/datasets/$BEHIND/abort"
wait_status "$BEHIND" Aborted 60
check '[ $? = 0 ]' "the dataset behind it is aborted"
http GET "/datasets/images/classification/explore?job_id=$BEHIND&db=val"
check '[ "$CODE" = 500 ] && grep -q "status should be '"'D'"' but is '"'A'"'" "$T/body"' "the explorer of an aborted dataset is 500 'status should be'"
http POST "/datasets/$BLOCKER/abort"
wait_status "$BLOCKER" Aborted 60
check '[ $? = 0 ]' "the blocking dataset is aborted"
finish
