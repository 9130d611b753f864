# Setup shared by the inference tests (sourced by tests/shell/infer_*.sh; not a test
# itself): a real server on a free loopback port with a temporary --data folder
# (server_lib.bash), a dataset of generated 28x28 gray PNGs in 3 classes, and a LeNet
# trained on it for 2 epochs with a snapshot per epoch.
#
#   infer_setup [serve flags]   sets DS (dataset id), ML (model id), MDIR (its folder)
#   serve_pids DIR              the pids of serve-model workers of the model in DIR
#   py 'code'                   python3 with json, sys and the helpers below
. "$(dirname "${BASH_SOURCE[0]}")/server_lib.bash"
need_server
WORKER=$BUILD/cdigits-worker
[ -x "$WORKER" ] || skip_test "$WORKER is not built yet"

infer_setup() {
    shapes_dataset 28 16 7 "$@"
    http POST /models/images/classification/json -F method=standard -F standard_networks=lenet \
        -F train_epochs=2 -F batch_size=12 -F learning_rate=0.02 -F lr_policy=fixed -F random_seed=4 \
        -F model_name=lenet -F dataset="$DS"
    ML=$(jv 'd["id"]')
    if ! wait_status "$ML" Done 120; then
        echo "FAIL the LeNet did not train: $BODY"
        finish
    fi
    http GET "/models/$ML/json"
    MDIR=$(jv 'd["directory"]')
}

# The serve-model processes of one model folder (found through /proc, as
# server_lib.bash finds workers).
serve_pids() {
    local d
    for d in /proc/[0-9]*; do
        if tr '\0' ' ' 2>/dev/null <"$d/cmdline" | grep -q -- "serve-model --model $1 "; then
            echo "${d#/proc/}"
        fi
    done
}

py() {
    python3 -c "import json, sys, os
$1" "${@:2}"
}
