#!/usr/bin/env bash
# DIGITS 6.1's webapp tests of digits/model/images/classification/test_views.py and
# digits/pretrained_model/test_views.py, ported to HTTP against the real server and
# worker: each case is "Class.method" with DIGITS's requests and assertions.
. "$(dirname "$0")/digits_lib.bash"

# one training at a time: a model created while another trains is Waiting
dg_setup --cpu-slots 1
NETWORK=$CAFFE_NETWORK

# ---- TestCaffeViews -------------------------------------------------------------------------------
t_page_model_new() {
    dreq GET /models/images/classification/new
    expect '[ "$CODE" = 200 ] && grep -q "New Image Classification Model" "$T/body"' \
        "GET /models/images/classification/new is 200 with 'New Image Classification Model'"
}
t_nonexistent_model() {
    dreq GET /models/foo
    expect '[ "$CODE" = 404 ]' "GET /models/foo is 404"
}
t_visualize_network() {
    printf '%s' "$CAFFE_NETWORK" >"$T/network.prototxt"
    dreq POST "/models/visualize-network?framework=caffe" -F "custom_network=<$T/network.prototxt"
    expect '[ "$CODE" = 200 ]' "POST /models/visualize-network?framework=caffe is 200"
}
t_customize() {
    dreq POST "/models/customize?network=lenet&framework=caffe"
    expect '[ "$CODE" = 200 ]' "POST /models/customize?network=lenet&framework=caffe is 200"
}
run_case TestCaffeViews.test_page_model_new t_page_model_new
run_case TestCaffeViews.test_nonexistent_model t_nonexistent_model
run_case TestCaffeViews.test_visualize_network t_visualize_network
run_case TestCaffeViews.test_customize t_customize

# ---- the dataset of every class (BaseViewsTestWithDataset.setUpClass) ----------------------------
# $1 class: its image size; sets DATASET_ID
declare -A CLASS_DS
class_dataset() { # KEY W H
    DS_W=$2 DS_H=$3
    if [ -z "${CLASS_DS[$1]:-}" ]; then
        create_dataset json || return 1
        CLASS_DS[$1]=$DS_ID
    fi
    DATASET_ID=${CLASS_DS[$1]}
    wait_done "$DATASET_ID" datasets
}
class_dataset 10x10 10 10 || { echo "FAIL BaseViewsTestWithDataset.setUpClass: $CASE_WHY"; finish; }

# ---- TestCaffeCreation: the cases that abort a model right after creating it -------------------
# DIGITS aborts a model the moment it is created and needs it still running: a long
# training (a million epochs) holds the one CPU slot, so the models created behind it are Waiting.
create_model json train_epochs=1000000 batch_size=1 snapshot_interval=1000000 val_interval=1000000 model_name=blocker
BLOCKER=$MODEL_ID
if ! wait_status "$BLOCKER" Running 120; then
    FAILS=$((FAILS + 1))
    echo "FAIL the training that holds the CPU slot did not start: $CASE_WHY $BODY"
fi

t_create_json() {
    create_model json || return 1
    dreq POST "/models/$MODEL_ID/abort"
    return 0
}
t_create_delete() {
    create_model || return 1
    delete_then_gone "$MODEL_ID" models
}
t_create_abort_delete() {
    create_model || return 1
    dreq POST "/models/$MODEL_ID/abort"
    expect '[ "$CODE" = 200 ]' "abort right after creation is 200" || return 1
    delete_then_gone "$MODEL_ID" models
}
# BaseTestDatasetModelInteractions
t_delete_running_dataset_dependent_model() {
    create_dataset || return 1
    local ds=$DS_ID
    create_model "dataset=$ds" || return 1
    dreq DELETE "/datasets/$ds"
    expect '[ "$CODE" = 403 ]' "deleting a dataset a model depends on is 403" || return 1
    dreq POST "/datasets/$ds/abort"
    dreq POST "/models/$MODEL_ID/abort"
    return 0
}
t_create_model_deleted_dataset() {
    create_dataset || return 1
    local ds=$DS_ID
    dreq DELETE "/datasets/$ds"
    expect '[ "$CODE" = 200 ]' "DELETE /datasets/<id> is 200" || return 1
    job_exists "$ds" datasets
    local rc=$?
    [ $rc = 2 ] && return 1
    expect '[ $rc = 1 ]' "the deleted dataset is 404" || return 1
    create_model "dataset=$ds"
    expect '! { [ "$CODE" -ge 300 ] && [ "$CODE" -le 310 ]; }' "a model of a deleted dataset is not created"
}
run_case TestCaffeCreation.test_create_json t_create_json
run_case TestCaffeCreation.test_create_delete t_create_delete
run_case TestCaffeCreation.test_create_abort_delete t_create_abort_delete
run_case TestCaffeDatasetModelInteractions.test_delete_running_dataset_dependent_model t_delete_running_dataset_dependent_model
run_case TestCaffeDatasetModelInteractions.test_create_model_deleted_dataset t_create_model_deleted_dataset
dreq DELETE "/models/$BLOCKER"
[ "$CODE" = 200 ] || echo "FAIL the training that held the CPU slot was not deleted: $CODE $BODY"

# ---- TestCaffeCreation ------------------------------------------------------------------------
t_create_wait_delete() {
    create_model || return 1
    wait_done "$MODEL_ID" models || return 1
    delete_then_gone "$MODEL_ID" models
}
t_snapshot_count() { # expected-test FIELDS...
    local want=$1
    shift
    create_model "$@" || return 1
    wait_done "$MODEL_ID" models || return 1
    dreq GET "/models/$MODEL_ID.json"
    expect '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"snapshots\"]) $want")" = true ]' "len(snapshots) $want"
}
t_classify_one_mean() { # use_mean check
    create_model "use_mean=$1" || return 1
    wait_done "$MODEL_ID" models || return 1
    classify_one_for_job "$MODEL_ID" "$2"
}
t_retrain() {
    create_model || return 1
    local job1=$MODEL_ID
    wait_done "$job1" models || return 1
    dreq GET "/models/$job1.json"
    expect '[ "$CODE" = 200 ] && [ "$(jv "len(d[\"snapshots\"]) > 0")" = true ]' "job1 has snapshots" || return 1
    local snap
    snap=$(jv 'd["snapshots"][-1]')
    create_model method=previous "previous_networks=$job1" "$job1-snapshot=$snap" || return 1
    RETRAIN_ID=$MODEL_ID
    wait_done "$MODEL_ID" models
}
t_retrain_twice() {
    t_retrain || return 1
    local job2=$RETRAIN_ID
    create_model method=previous "previous_networks=$job2" "$job2-snapshot=-1" || return 1
    wait_done "$MODEL_ID" models
}
BOGUS_NETWORK="${CAFFE_HIDDEN_LAYER/InnerProduct/BogusCode}
$CAFFE_LOSS_LAYER
$CAFFE_SOFTMAX_LAYER"
t_bad_network_definition() {
    local saved=$NETWORK
    NETWORK=$BOGUS_NETWORK
    create_model json
    local rc=$?
    NETWORK=$saved
    [ $rc = 0 ] || return 1
    job_wait_completion "$MODEL_ID" models || return 1
    expect '[ "$WAIT_STATUS" = Error ]' "a network with a BogusCode layer ends in Error, not $WAIT_STATUS" || return 1
    dreq GET "/models/$MODEL_ID"
    expect '[ "$CODE" = 200 ] && grep -q BogusCode "$T/body"' "the model's page names BogusCode"
}
# BaseTestCreation.test_clone: the keys of DIGITS's model json_dict(True) but id,
# directory, creation time and job id
DIGITS_MODEL_KEYS='["name", "status", "dataset_id", "snapshots", "username", "image dimensions", "mean file",
 "snapshot file", "solver file", "train_val file", "deploy file", "framework", "caffe flavor", "caffe version",
 "model file", "digits version", "image resize mode", "labels file"]'
t_model_clone() {
    create_model shuffle=True snapshot_interval=2.0 lr_step_size=33.0 lr_inv_power=0.5 lr_inv_gamma=0.1 \
        lr_poly_power=3.0 lr_exp_gamma=0.9 use_mean=image lr_multistep_gamma=0.5 lr_policy=exp val_interval=3.0 \
        random_seed=123 learning_rate=0.0125 lr_step_gamma=0.1 lr_sigmoid_step=50.0 lr_sigmoid_gamma=0.1 \
        lr_multistep_values=50,85 || return 1
    local job1=$MODEL_ID
    wait_done "$job1" models || return 1
    dreq GET "/models/$job1.json"
    cp "$T/body" "$T/clone1.json"
    create_model "clone=$job1" || return 1
    wait_done "$MODEL_ID" models || return 1
    dreq GET "/models/$MODEL_ID.json"
    json_same "$T/clone1.json" "$T/body" "$DIGITS_MODEL_KEYS"
}
run_case TestCaffeCreation.test_create_wait_delete t_create_wait_delete
run_case TestCaffeCreation.test_snapshot_interval_2 t_snapshot_count '> 1' snapshot_interval=0.5
run_case TestCaffeCreation.test_snapshot_interval_0_5 t_snapshot_count '== 2' train_epochs=4 snapshot_interval=2
not_applicable TestCaffeCreation.test_select_gpu "needs a GPU; this server trains on the CPU (--gpus none)"
not_applicable TestCaffeCreation.test_select_gpus "multi-GPU"
run_case TestCaffeCreation.test_classify_one_mean_image t_classify_one_mean image 1
run_case TestCaffeCreation.test_classify_one_mean_pixel t_classify_one_mean pixel 1
run_case TestCaffeCreation.test_classify_one_mean_none t_classify_one_mean none 0
run_case TestCaffeCreation.test_retrain t_retrain
run_case TestCaffeCreation.test_retrain_twice t_retrain_twice
run_case TestCaffeCreation.test_bad_network_definition t_bad_network_definition
run_case TestCaffeCreation.test_clone t_model_clone

# ---- TestCaffeDatasetModelInteractions ---------------------------------------------------------------
t_create_model_running_dataset() {
    create_dataset || return 1
    local ds=$DS_ID st end=$((SECONDS + 120))
    create_model "dataset=$ds" || return 1
    # the model's status is read before the dataset's: a model seen Running while its
    # dataset is still seen running afterwards is the fault DIGITS's test looks for (read
    # the other way round, the dataset may finish and the model start between the reads)
    while :; do
        st=$(job_status "$MODEL_ID" models)
        [ "$(job_status "$ds" datasets)" = Done ] && break
        [ "$st" = Waiting ] && break
        expect '[ "$st" = Initialized ]' "the model of a running dataset is Initialized or Waiting, not $st" || return 1
        expect '[ $SECONDS -lt $end ]' "the dataset took more than 120 seconds" || return 1
    done
    wait_done "$ds" datasets || return 1
    # DIGITS looks one second later; here: once the model has left Waiting
    wait_until 120 '! case "$(job_status "$MODEL_ID" models)" in Initialized|Waiting) true;; *) false;; esac'
    st=$(job_status "$MODEL_ID" models)
    expect '[ "$st" = Running ] || [ "$st" = Done ]' "the model runs once its dataset is Done (status $st)" || return 1
    dreq POST "/models/$MODEL_ID/abort"
    return 0
}
t_delete_dataset_dependent_model() {
    create_dataset || return 1
    local ds=$DS_ID
    create_model "dataset=$ds" || return 1
    wait_done "$ds" datasets || return 1
    dreq DELETE "/datasets/$ds"
    expect '[ "$CODE" = 403 ]' "deleting a Done dataset a model depends on is 403" || return 1
    dreq POST "/models/$MODEL_ID/abort"
    return 0
}
run_case TestCaffeDatasetModelInteractions.test_create_model_running_dataset t_create_model_running_dataset
run_case TestCaffeDatasetModelInteractions.test_delete_dataset_dependent_model t_delete_dataset_dependent_model
run_case TestCaffeDatasetModelInteractions.test_clone t_dataset_clone

# ---- TestSweepCreation, TestBatchAccumulationCaffe, TestPythonLayer ---------------------------------
t_sweep() {
    create_model json "learning_rate=[0.01, 0.02]" "batch_size=[8, 10]" || return 1
    local ids=$MODEL_IDS id n
    n=$(echo $ids | wc -w)
    expect '[ "$n" = 4 ]' "the sweep made 4 jobs, not $n" || return 1
    for id in $ids; do
        wait_done "$id" models || return 1
        delete_then_gone "$id" models || return 1
    done
}
t_batch_accumulation() {
    create_model batch_size=10 batch_accumulation=2 || return 1
    wait_done "$MODEL_ID" models || return 1
    dreq GET "/models/$MODEL_ID.json"
    local solver
    solver=$(python3 -c 'import json, os, sys; d = json.load(open(sys.argv[1])); print(os.path.join(d["directory"], d["solver file"]))' "$T/body" 2>/dev/null)
    expect '[ -n "$solver" ] && [ -f "$solver" ]' "the JSON names the solver file in the job directory ('$solver')" || return 1
    expect 'grep -Eq "^iter_size: *2\b" "$solver" && grep -Eq "^max_iter: *2\b" "$solver"' \
        "the solver has iter_size 2 and max_iter ceil(30 / 20) = 2"
}
run_case TestSweepCreation.test_sweep t_sweep
run_case TestSweepCreation.test_clone t_dataset_clone
run_case TestBatchAccumulationCaffe.test_batch_accumulation_calculations t_batch_accumulation
run_case TestBatchAccumulationCaffe.test_clone t_dataset_clone
not_applicable TestPythonLayer.test_python_layer "Python layers"
not_applicable TestPythonLayer.test_clone "its class needs Caffe's Python layers"

# ---- BaseTestCreated classes ------------------------------------------------------------------------
MORE_NUM_OUTPUT_NETWORK=$(python3 -c 'import sys
print(sys.argv[1].replace("top: \"output\"\n}", "top: \"output\"\n    inner_product_param { num_output: 1000 }\n}", 1))' "$CAFFE_NETWORK")
CROP_NETWORK='layer {
    name: "data"
    type: "Data"
    top: "data"
    top: "label"
    include {
        phase: TRAIN
    }
    transform_param {
        crop_size: 8
    }
}
layer {
    name: "data"
    type: "Data"
    top: "data"
    top: "label"
    include {
        phase: TEST
    }
    transform_param {
        crop_size: 8
    }
}
'$CAFFE_NETWORK
LENET_NETWORK=$(cat "$SRC/models/lenet.prototxt")

t_download() { # ext
    dreq GET "/models/$MODEL_ID/download.$1"
    expect '[ "$CODE" = 200 ]' "GET /models/<id>/download.$1 is 200"
}
t_model_index_json() {
    dreq GET /index.json
    expect '[ "$CODE" = 200 ] && [ "$(jv "\"$MODEL_ID\" in [x[\"id\"] for x in d[\"models\"]]")" = true ]' "/index.json lists the model"
}
t_model_json() {
    dreq GET "/models/$MODEL_ID.json"
    expect '[ "$CODE" = 200 ] && [ "$(jv "d[\"id\"] == \"$MODEL_ID\" and d[\"dataset_id\"] == \"$DATASET_ID\" and len(d[\"snapshots\"]) > 0")" = true ]' \
        "the model JSON has its id, dataset_id and snapshots"
}
t_edit() { # field value
    dreq PUT "/jobs/$DATASET_ID" -F "$1=$2"
    expect '[ "$CODE" = 200 ]' "PUT /jobs/<dataset id> $1 is 200"
}
t_classify_one() {
    local cat top
    cat=$(first_category)
    classify_one_post "$MODEL_ID" "$cat" 0 "" -F show_visualizations=y
    expect '[ "$CODE" = 200 ]' "classify_one is 200" || return 1
    top=$(html_top_prediction)
    expect '[ "$top" = "$cat" ]' "the first prediction is $cat, not '$top'"
}
t_classify_one_json() {
    local cat
    cat=$(last_category)
    classify_one_post "$MODEL_ID" "$cat" $((IMAGE_COUNT - 1)) .json -F show_visualizations=y
    expect '[ "$CODE" = 200 ] && [ "$(jv "d[\"predictions\"][0][0]")" = "$cat" ]' "classify_one.json's first prediction is $cat"
}
# DIGITS's dict order of the imageset's classes, the labels of its lists
first_category() { echo red-to-right; }
last_category() { echo blue-to-left; }
image_list() { # absolute|relative [bad labels]
    local label_id=0 cat i prefix="" l
    [ "$1" = absolute ] && prefix="$IMG/"
    : >"$T/images.txt"
    for cat in red-to-right green-to-top blue-to-left; do
        l=$label_id
        [ "${2:-}" = bad ] && l=$((3 * label_id - 1))
        for i in $(seq 0 $((IMAGE_COUNT - 1))); do echo "$prefix$cat/$i.png $l" >>"$T/images.txt"; done
        label_id=$((label_id + 1))
    done
}
t_classify_many() { # route absolute|relative [bad]
    image_list "$2" "${3:-}"
    local folder=()
    [ "$2" = relative ] && folder=(-F "image_folder=$IMG")
    dreq POST "/models/images/classification/$1?job_id=$MODEL_ID" -F "image_list=@$T/images.txt;filename=images.txt" "${folder[@]}"
    expect '[ "$CODE" = 200 ]' "POST $1 is 200"
}
t_classify_many_json() {
    image_list absolute
    dreq POST "/models/images/classification/classify_many.json?job_id=$MODEL_ID" -F "image_list=@$T/images.txt;filename=images.txt"
    expect '[ "$CODE" = 200 ] && [ "$(jv "\"classifications\" in d")" = true ]' "classify_many.json is 200 with classifications" || return 1
    local cat
    for cat in red-to-right green-to-top blue-to-left; do
        expect '[ "$(jv "d[\"classifications\"][\"$IMG/$cat/0.png\"][0][0]")" = "$cat" ]' "$cat/0.png is classified $cat" || return 1
    done
}
t_top_n() { # absolute|relative
    t_classify_many top_n "$1" || return 1
    local cat
    for cat in red-to-right green-to-top blue-to-left; do
        expect 'grep -q -- "$cat" "$T/body"' "top_n's page names $cat" || return 1
    done
}
t_inference_while_training() {
    local trained=$MODEL_ID
    create_model select_gpu_count=1 batch_size=10 train_epochs=1000 || return 1
    local job2=$MODEL_ID st end=$((SECONDS + 120))
    MODEL_ID=$trained
    while :; do
        st=$(job_status "$job2" models)
        case "$st" in
        Initialized | Waiting) ;;
        Running) break ;;
        *) expect false "the second training is $st, not Running" || return 1 ;;
        esac
        expect '[ $SECONDS -lt $end ]' "the second training did not start in 120 seconds" || return 1
        sleep 0.01
    done
    dreq POST "/models/images/classification/classify_one.json?job_id=$trained" -F "image_file=@$IMG/red-to-right/0.png;filename=image.png"
    local parsed
    parsed=$(jv 'isinstance(d, dict)')
    dreq DELETE "/models/$job2"
    expect '[ "$parsed" = true ]' "classify_one.json answers JSON while another model trains" || return 1
}
# CREATED_CLASS NAME: the class's image size, network and fields
declare -A CREATED_ATTRS
CREATED_ATTRS=([TestCaffeCreatedWideMoreNumOutput]="20 10 MORE_NUM_OUTPUT_NETWORK -"
    [TestCaffeCreatedCropInForm]="10 10 CAFFE_NETWORK crop_size=8" [TestCaffeCreatedCropInNetwork]="10 10 CROP_NETWORK -"
    [TestCaffeCreatedTallMultiStepLR]="10 20 CAFFE_NETWORK lr_policy=multistep,lr_multistep_values=50,75,90"
    [TestCaffeLeNet]="28 28 LENET_NETWORK -")
CREATED=(TestCaffeCreatedWideMoreNumOutput TestCaffeCreatedCropInForm TestCaffeCreatedCropInNetwork
    TestCaffeCreatedTallMultiStepLR TestCaffeLeNet)
use_created() {
    local w h net extra
    read -r w h net extra <<<"${CREATED_ATTRS[$1]}"
    class_dataset "${w}x$h" "$w" "$h" || return 1
    NETWORK=${!net}
    MODEL_EXTRA=()
    case "$extra" in
    -) ;;
    lr_policy=multistep,*) MODEL_EXTRA=(lr_policy=multistep lr_multistep_values=50,75,90) ;;
    *) MODEL_EXTRA=("$extra") ;;
    esac
}
for cls in "${CREATED[@]}"; do
    if ! use_created "$cls" || ! create_model json || ! wait_done "$MODEL_ID" models; then
        echo "FAIL $cls.setUpClass: $CASE_WHY"
        FAILS=$((FAILS + 1))
        continue
    fi
    not_applicable "$cls.test_save" "internal API"
    not_applicable "$cls.test_get_snapshot" "internal API"
    for ext in tar zip tar.gz tar.bz2; do run_case "$cls.test_download($ext)" t_download "$ext"; done
    run_case "$cls.test_index_json" t_model_index_json
    run_case "$cls.test_model_json" t_model_json
    run_case "$cls.test_edit_name" t_edit job_name "new name"
    run_case "$cls.test_edit_notes" t_edit job_notes "new notes"
    run_case "$cls.test_classify_one" t_classify_one
    run_case "$cls.test_classify_one_json" t_classify_one_json
    run_case "$cls.test_classify_many" t_classify_many classify_many absolute
    run_case "$cls.test_classify_many_from_folder" t_classify_many classify_many relative
    run_case "$cls.test_classify_many_invalid_ground_truth" t_classify_many classify_many absolute bad
    run_case "$cls.test_classify_many_json" t_classify_many_json
    run_case "$cls.test_top_n" t_top_n absolute
    run_case "$cls.test_top_n_from_folder" t_top_n relative
    run_case "$cls.test_inference_while_training" t_inference_while_training
    run_case "$cls.test_clone" t_dataset_clone
done
NETWORK=$CAFFE_NETWORK
MODEL_EXTRA=()

# ---- TestCaffeUpload (digits/pretrained_model/test_views.py) ----------------------------------------
t_upload_manual() {
    dreq GET "/models/$UPLOAD_MODEL.json"
    expect '[ "$CODE" = 200 ]' "GET /models/<id>.json is 200" || return 1
    local info=$T/upload_info.json
    cp "$T/body" "$info"
    local q='import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))'
    local snap model labels dims
    snap=$(python3 -c "$q" "$info" 'd["snapshot file"]' 2>/dev/null)
    model=$(python3 -c "$q" "$info" 'd["model file"]' 2>/dev/null)
    labels=$(python3 -c "$q" "$info" 'd["labels file"]' 2>/dev/null)
    dims=$(python3 -c "$q" "$info" '" ".join(str(x) for x in d["image dimensions"]) + " " + d["image resize mode"] + " " + d["framework"]' 2>/dev/null)
    expect '[ -n "$snap" ] && [ -n "$model" ] && [ -n "$labels" ] && [ -n "$dims" ]' \
        "the model JSON has DIGITS's snapshot file, model file, labels file, image dimensions, image resize mode and framework" || return 1
    local h w c mode fw
    read -r h w c mode fw <<<"$dims"
    curl -s -o "$T/weights.caffemodel" "$B/files/$UPLOAD_MODEL/$snap" &&
        curl -s -o "$T/original.prototxt" "$B/files/$UPLOAD_MODEL/$model" &&
        curl -s -o "$T/labels.txt" "$B/files/$DATASET_ID/$labels"
    dreq POST /pretrained_models/new -F "weights_file=@$T/weights.caffemodel" -F "model_def_file=@$T/original.prototxt" \
        -F "labels_file=@$T/labels.txt" -F "framework=$fw" -F "image_type=$c" -F "resize_mode=$mode" \
        -F "width=$h" -F "height=$w" -F job_name=test_create_pretrained_model_job
    expect '[ "$CODE" = 302 ]' "POST /pretrained_models/new is 302"
}
t_upload_archive() {
    curl -s -o "$T/model.tar" -w '' "$B/models/$UPLOAD_MODEL/download.tar"
    dreq POST /pretrained_models/upload_archive -F "archive=@$T/model.tar"
    expect '[ "$CODE" = 200 ]' "POST /pretrained_models/upload_archive is 200"
}
class_dataset 10x10 10 10 || true
if create_model json && wait_done "$MODEL_ID" models; then
    UPLOAD_MODEL=$MODEL_ID
    run_case TestCaffeUpload.test_upload_manual t_upload_manual
    run_case TestCaffeUpload.test_upload_archive t_upload_archive
    run_case TestCaffeUpload.test_clone t_dataset_clone
else
    echo "FAIL TestCaffeUpload.setUpClass: $CASE_WHY"
    FAILS=$((FAILS + 1))
fi

# ---- Torch and TensorFlow ---------------------------------------------------------------------------
for m in test_page_model_new test_nonexistent_model test_visualize_network test_customize; do
    not_applicable "TestTorchViews.$m" "Torch"
done
for m in test_create_json test_create_delete test_create_wait_delete test_create_abort_delete test_snapshot_interval_2 \
    test_snapshot_interval_0_5 test_select_gpu test_select_gpus test_classify_one_mean_image test_classify_one_mean_pixel \
    test_classify_one_mean_none test_retrain test_retrain_twice test_bad_network_definition test_clone; do
    not_applicable "TestTorchCreation.$m" "Torch"
done
for cls in TestTorchCreatedUnencodedShuffle TestTorchCreatedHdf5 TestTorchCreatedTallHdf5Shuffle TestTorchCreatedCropInForm \
    TestTorchCreatedDataAug TestTorchCreatedCropInNetwork TestTorchCreatedWideMultiStepLR TestTorchLeNet TestTorchLeNetHdf5Shuffle; do
    for m in test_save test_get_snapshot test_download test_index_json test_model_json test_edit_name test_edit_notes \
        test_classify_one test_classify_one_json test_classify_many test_classify_many_from_folder \
        test_classify_many_invalid_ground_truth test_classify_many_json test_top_n test_top_n_from_folder \
        test_inference_while_training test_clone; do
        not_applicable "$cls.$m" "Torch"
    done
done
for m in test_create_model_deleted_dataset test_create_model_running_dataset test_delete_dataset_dependent_model \
    test_delete_running_dataset_dependent_model test_clone; do
    not_applicable "TestTorchDatasetModelInteractions.$m" "Torch"
done
for m in test_upload_manual test_upload_archive test_clone; do not_applicable "TestTorchUpload.$m" "Torch"; done
not_applicable "TestTensorflow*" "TensorFlow"

finish
