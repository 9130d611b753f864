#!/usr/bin/env bash
# DIGITS 6.1's webapp tests of digits/test_views.py and
# digits/dataset/images/classification/test_views.py, ported to HTTP against the real
# server and worker: each case is "Class.method" with DIGITS's requests and assertions.
. "$(dirname "$0")/digits_lib.bash"

dg_setup

# ---- digits/test_views.py TestViews -----------------------------------------------------------
t_homepage() {
    dreq GET /
    expect '[ "$CODE" = 200 ]' "GET / is 200" || return 1
    local w
    for w in Home Datasets Models; do
        expect 'grep -q "$w" "$T/body"' "the home page contains '$w'" || return 1
    done
}
t_invalid_page() {
    dreq GET /foo
    expect '[ "$CODE" = 404 ]' "GET /foo is 404"
}
t_autocomplete() { # absolute_path
    local q=%2F
    [ "$1" = True ] || q=.%2F
    dreq GET "/autocomplete/path?query=$q"
    expect '[ "$CODE" = 200 ] && [ "$(jv "\"suggestions\" in d")" = true ]' "GET /autocomplete/path?query=$q is 200 with suggestions"
}
run_case test_views.TestViews.test_homepage t_homepage
run_case test_views.TestViews.test_invalid_page t_invalid_page
run_case "test_views.TestViews.test_autocomplete(absolute_path=True)" t_autocomplete True
run_case "test_views.TestViews.test_autocomplete(absolute_path=False)" t_autocomplete False

# ---- TestCreation: the cases that abort a job right after creating it -----------------------
# DIGITS aborts a dataset the moment it is created and needs it still running. A dataset
# whose list names a pipe holds the one dataset slot (its worker waits on the pipe), so the
# jobs created behind it are Waiting when the abort comes, however fast the machine is.
mkdir "$T/blocker"
mkfifo "$T/blocker/0.png"
printf 'blocker/0.png 0\nimageset/red-to-right/0.png 0\nimageset/green-to-top/0.png 1\n' >"$T/blocker.txt"
printf 'red\ngreen\n' >"$T/blocker_labels.txt"
dreq POST /datasets/images/classification.json -F dataset_name=blocker -F method=textfile \
    -F "textfile_train_images=@$T/blocker.txt" -F "textfile_labels_file=@$T/blocker_labels.txt" \
    -F "textfile_train_folder=$T" -F resize_width=10 -F resize_height=10
BLOCKER=$(jv 'd["id"]')
if ! wait_status "$BLOCKER" Running 120; then
    echo "FAIL the dataset that holds the dataset slot did not start: $BODY"
    finish
fi

t_create_json() {
    create_dataset json || return 1
    dreq POST "/datasets/$DS_ID/abort"
    return 0
}
t_create_abort_delete() {
    create_dataset || return 1
    dreq POST "/datasets/$DS_ID/abort"
    expect '[ "$CODE" = 200 ]' "abort right after creation is 200" || return 1
    delete_then_gone "$DS_ID" datasets
}
t_abort_explore_fail() {
    create_dataset || return 1
    dreq POST "/datasets/$DS_ID/abort"
    dreq GET "/datasets/images/classification/explore?job_id=$DS_ID&db=val"
    expect '[ "$CODE" = 500 ] && grep -q "status should be" "$T/body"' \
        "explore of an aborted dataset is 500 and says 'status should be'"
}
t_create_delete() {
    create_dataset || return 1
    delete_then_gone "$DS_ID" datasets
}
run_case TestCreation.test_create_json t_create_json
run_case TestCreation.test_create_abort_delete t_create_abort_delete
run_case TestCreation.test_abort_explore_fail t_abort_explore_fail
run_case TestCreation.test_create_delete t_create_delete
dreq POST "/datasets/$BLOCKER/abort"
wait_status "$BLOCKER" Aborted 120 || echo "FAIL the blocking dataset was not aborted"

# ---- TestViews (datasets) -------------------------------------------------------------------
t_page_dataset_new() {
    dreq GET /datasets/images/classification/new
    expect '[ "$CODE" = 200 ] && grep -q "New Image Classification Dataset" "$T/body"' \
        "GET /datasets/images/classification/new is 200 with 'New Image Classification Dataset'"
}
t_nonexistent_dataset() {
    job_exists foo datasets
    local rc=$?
    [ $rc = 2 ] && return 1
    expect '[ $rc = 1 ]' "GET /datasets/foo is 404"
}
run_case dataset.TestViews.test_page_dataset_new t_page_dataset_new
run_case dataset.TestViews.test_nonexistent_dataset t_nonexistent_dataset

# ---- TestCreation ---------------------------------------------------------------------------
t_nonexistent_folder() {
    create_dataset folder_train=/not-a-directory
    expect '! { [ "$CODE" -ge 300 ] && [ "$CODE" -le 310 ]; }' "a folder that does not exist is not a redirect"
}
t_create_wait_delete() {
    create_dataset || return 1
    wait_done "$DS_ID" datasets || return 1
    delete_then_gone "$DS_ID" datasets
}
# check_textfiles(absolute_path, local_path): the lists in the order of DIGITS's dict
t_textfiles() {
    local absolute=$1 local_path=$2 label_id=0 cat i prefix=""
    [ "$absolute" = True ] && prefix="$IMG/"
    local list=$T/tf_train.txt labels=$T/tf_labels.txt
    [ "$local_path" = True ] && list=$IMG/local_train.txt labels=$IMG/local_labels.txt
    : >"$list"
    : >"$labels"
    for cat in red-to-right green-to-top blue-to-left; do
        echo "$cat" >>"$labels"
        for i in $(seq 0 $((IMAGE_COUNT - 1))); do echo "$prefix$cat/$i.png $label_id" >>"$list"; done
        label_id=$((label_id + 1))
    done
    local args=(method=textfile textfile_use_val=y)
    if [ "$local_path" = True ]; then
        args+=(textfile_use_local_files=True "textfile_local_train_images=$list" "textfile_local_val_images=$list"
            "textfile_local_labels_file=$labels")
    else
        args+=("textfile_train_images=@$list;filename=train.txt" "textfile_val_images=@$list;filename=val.txt"
            "textfile_labels_file=@$labels;filename=labels.txt")
    fi
    [ "$absolute" = True ] || args+=("textfile_train_folder=$IMG" "textfile_val_folder=$IMG")
    create_dataset "${args[@]}" || return 1
    wait_done "$DS_ID" datasets
}
run_case TestCreation.test_nonexistent_folder t_nonexistent_folder
run_case TestCreation.test_create_wait_delete t_create_wait_delete
for abs in True False; do
    for loc in True False; do
        run_case "TestCreation.test_textfiles(absolute_path=$abs, local_path=$loc)" t_textfiles $abs $loc
    done
done

# ---- TestImageCount, TestMaxPerClass, TestMinPerClass ------------------------------------------
# split_args TYPE: the fields that make TYPE's images come from a folder of its own
split_args() {
    case $1 in
    train) SPLIT=() ;;
    val) SPLIT=(has_val_folder=True "folder_val=$FOLDER") ;;
    test) SPLIT=(has_test_folder=True "folder_test=$FOLDER") ;;
    esac
}
# parse_task TYPE: reads GET /datasets/<id>.json; checks the number of ParseFolderTasks
parse_task() {
    dreq GET "/datasets/$DS_ID.json"
    expect '[ "$CODE" = 200 ]' "GET /datasets/$DS_ID.json is 200" || return 1
    local n=1 p=0
    [ "$1" = train ] || n=2 p=1
    PT="d[\"ParseFolderTasks\"][$p]"
    expect '[ "$(jv "len(d[\"ParseFolderTasks\"])")" = $n ]' "ParseFolderTasks has $n entries for a $1 folder"
}
t_image_count() {
    FOLDER=$IMG
    split_args "$1"
    create_dataset folder_pct_val=20 folder_pct_test=10 "${SPLIT[@]}" || return 1
    wait_done "$DS_ID" datasets || return 1
    parse_task "$1" || return 1
    local count
    case $1 in
    train)
        count=$(jv "$PT[\"train_count\"] + $PT[\"val_count\"] + $PT[\"test_count\"]")
        expect '[ "$(jv "$PT[\"val_count\"] == 0.2 * $count and $PT[\"test_count\"] == 0.1 * $count")" = true ]' \
            "val_count is 20% and test_count 10% of $count" || return 1
        ;;
    val)
        expect '[ "$(jv "$PT[\"train_count\"] == 0 and $PT[\"test_count\"] == 0")" = true ]' "the val folder's train and test counts are 0" || return 1
        count=$(jv "$PT[\"val_count\"]")
        ;;
    test)
        expect '[ "$(jv "$PT[\"train_count\"] == 0 and $PT[\"val_count\"] == 0")" = true ]' "the test folder's train and val counts are 0" || return 1
        count=$(jv "$PT[\"test_count\"]")
        ;;
    esac
    expect '[ "$(jv "$PT[\"label_count\"]")" = 3 ]' "label_count is the 3 categories" || return 1
    expect '[ "$count" = $((IMAGE_COUNT * 3)) ]' "the image count $count is $IMAGE_COUNT per category" || return 1
    delete_then_gone "$DS_ID" datasets
}
t_max_per_class() {
    FOLDER=$IMG
    split_args "$1"
    local max=$((IMAGE_COUNT / 2))
    case $1 in
    train) SPLIT+=("folder_train_max_per_class=$max") ;;
    *) SPLIT+=("folder_$1_max_per_class=$max") ;;
    esac
    create_dataset folder_pct_val=0 "${SPLIT[@]}" || return 1
    wait_done "$DS_ID" datasets || return 1
    parse_task "$1" || return 1
    expect '[ "$(jv "$PT[\"train_count\"] + $PT[\"val_count\"] + $PT[\"test_count\"] == $max * $PT[\"label_count\"]")" = true ]' \
        "the $1 folder gives $max images per class" || return 1
    delete_then_gone "$DS_ID" datasets
}
UNBALANCED=$T/imageset_unbalanced
make_imageset "$UNBALANCED" "$IMAGE_COUNT" unbalanced
t_min_per_class() {
    FOLDER=$UNBALANCED
    split_args "$1"
    local min=$((IMAGE_COUNT / 2 + 1))
    SPLIT+=("folder_$1_min_per_class=$min")
    create_dataset folder_pct_val=0 "folder_train=$UNBALANCED" "${SPLIT[@]}" || return 1
    wait_done "$DS_ID" datasets || return 1
    parse_task "$1" || return 1
    expect '[ "$(jv "$PT[\"label_count\"]")" = 3 ]' "the category of 5 images is dropped: 4 == label_count + 1" || return 1
    delete_then_gone "$DS_ID" datasets
}
for ty in train val test; do run_case "TestImageCount.test_image_count($ty)" t_image_count $ty; done
for ty in train val test; do run_case "TestMaxPerClass.test_max_per_class($ty)" t_max_per_class $ty; done
for ty in train val test; do run_case "TestMinPerClass.test_min_per_class($ty)" t_min_per_class $ty; done

# ---- TestCreated and its variants ----------------------------------------------------------------
# BaseViewsTestWithDataset.setUpClass: a JSON create waited to Done. Each class's dataset
# is created first; the classes then run in turn.
CREATED=(TestCreated TestCreatedGrayscale TestCreatedWide TestCreatedTall TestCreatedJPEG TestCreatedRaw
    TestCreatedRawGrayscale)
declare -A CREATED_ID CREATED_ATTRS
CREATED_ATTRS=([TestCreated]="10 10 3 png" [TestCreatedGrayscale]="10 10 1 png" [TestCreatedWide]="20 10 3 png"
    [TestCreatedTall]="10 20 3 png" [TestCreatedJPEG]="10 10 3 jpg" [TestCreatedRaw]="10 10 3 none"
    [TestCreatedRawGrayscale]="10 10 1 none")
use_class() {
    read -r DS_W DS_H DS_C DS_ENCODING <<<"${CREATED_ATTRS[$1]}"
}
for cls in "${CREATED[@]}"; do
    use_class "$cls"
    create_dataset json || { echo "FAIL $cls.setUpClass: $CASE_WHY"; continue; }
    CREATED_ID[$cls]=$DS_ID
done

t_index_json() {
    dreq GET /index.json
    expect '[ "$CODE" = 200 ] && [ "$(jv "\"$DATASET_ID\" in [x[\"id\"] for x in d[\"datasets\"]]")" = true ]' \
        "/index.json lists the dataset"
}
t_dataset_json() {
    dreq GET "/datasets/$DATASET_ID.json"
    expect '[ "$CODE" = 200 ] && [ "$(jv "d[\"id\"]")" = "$DATASET_ID" ]' "/datasets/<id>.json has the id"
}
t_mean_dimensions() {
    dreq GET "/files/$DATASET_ID/mean.jpg"
    expect '[ "$CODE" = 200 ]' "GET /files/<id>/mean.jpg is 200" || return 1
    local size
    size=$(python3 - "$T/body" <<'EOF'
import struct, sys
b = open(sys.argv[1], "rb").read()
i = 2
while b[:2] == b"\xff\xd8" and i + 9 < len(b):
    if b[i] != 0xFF:
        break
    m = b[i + 1]
    n = struct.unpack(">H", b[i + 2:i + 4])[0]
    if m in (0xC0, 0xC1, 0xC2):
        h, w = struct.unpack(">HH", b[i + 5:i + 9])
        print("%dx%d" % (w, h))
        break
    i += 2 + n
EOF
)
    expect '[ "$size" = "${DS_W}x${DS_H}" ]' "mean.jpg is ${DS_W}x${DS_H} (width x height), not '$size'"
}
t_edit_name() {
    dreq PUT "/jobs/$DATASET_ID" -F "job_name=new name"
    expect '[ "$CODE" = 200 ]' "PUT /jobs/<id> job_name is 200" || return 1
    dreq GET "/datasets/summary?job_id=$DATASET_ID"
    expect '[ "$CODE" = 200 ] && grep -q "new name" "$T/body"' "/datasets/summary is 200 with the new name"
}
t_edit_notes() {
    dreq PUT "/jobs/$DATASET_ID" -F "job_notes=new notes"
    expect '[ "$CODE" = 200 ]' "PUT /jobs/<id> job_notes is 200"
}
t_backend_selection() {
    dreq GET "/datasets/$DATASET_ID.json"
    # a deliberate difference (docs/api.md): the records are cdigits's own files, and
    # each CreateDbTasks entry names them "cddb" where DIGITS said "lmdb"
    expect '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"CreateDbTasks\"]) > 0 and all(t[\"backend\"] == \"cddb\" for t in d[\"CreateDbTasks\"])")" = true ]' \
        "every CreateDbTasks entry names its backend (cddb where DIGITS says lmdb: docs/api.md)"
}
t_explore() { # db
    dreq GET "/datasets/images/classification/explore?job_id=$DATASET_ID&db=$1"
    expect '[ "$CODE" = 200 ] && grep -q "Items per page" "$T/body"' "explore of db=$1 is 200 with 'Items per page'"
}
for cls in "${CREATED[@]}"; do
    [ -n "${CREATED_ID[$cls]:-}" ] || continue
    use_class "$cls"
    DATASET_ID=${CREATED_ID[$cls]}
    if ! wait_done "$DATASET_ID" datasets; then
        echo "FAIL $cls.setUpClass: $CASE_WHY"
        FAILS=$((FAILS + 1))
        continue
    fi
    run_case "$cls.test_index_json" t_index_json
    run_case "$cls.test_dataset_json" t_dataset_json
    run_case "$cls.test_mean_dimensions" t_mean_dimensions
    run_case "$cls.test_edit_name" t_edit_name
    run_case "$cls.test_edit_notes" t_edit_notes
    run_case "$cls.test_backend_selection" t_backend_selection
    run_case "$cls.test_explore_train" t_explore train
    run_case "$cls.test_explore_val" t_explore val
    run_case "$cls.test_clone" t_dataset_clone
done
for cls in TestCreatedHdf5 TestCreatedHdf5Gzip; do
    for m in test_index_json test_dataset_json test_mean_dimensions test_edit_name test_edit_notes \
        test_backend_selection test_explore_train test_explore_val test_compression_method test_clone; do
        not_applicable "$cls.$m" "HDF5 backend: cdigits writes its own .db files"
    done
done

finish
