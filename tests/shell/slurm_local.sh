#!/usr/bin/env bash
# The server with --executor slurm on a real single-host Slurm (scripts/slurm-local.sh):
# the cluster runs `sbatch --wrap hostname`; a dataset and a short training job go
# through Slurm to Done with a snapshot, the Slurm job id and its node in the job's JSON;
# a job aborted through the API ends Aborted by scancel with nothing left in squeue; a
# job cancelled from outside with scancel ends Aborted with Slurm's reason; a server
# SIGKILLed while a job runs is started again and follows that job on to Done; a model of
# 2 ranks on the node trains as 2 MPI ranks under srun, and one asking for 2 nodes is
# accepted. Every wait polls for a state with a deadline.
. "$(dirname "$0")/server_lib.bash"
exec </dev/null # srun, sbatch and friends must not read the test's stdin
need_server
[ -x "$BUILD/cdigits-worker" ] || skip_test "$BUILD/cdigits-worker is not built yet"
[ "$(id -u)" = 0 ] || skip_test "needs root: scripts/slurm-local.sh starts munged, slurmctld and slurmd"
command -v slurmctld >/dev/null || skip_test "slurmctld is not installed (scripts/setup.sh --test installs Slurm)"
. "$(dirname "$0")/server_tiny_net.bash"

CL=$T/cluster
cluster_stop() {
    "$SRC/scripts/slurm-local.sh" stop "$CL" >>"$T/cluster.log" 2>&1
}
trap 'srv_cleanup_all' EXIT
srv_cleanup_all() {
    if [ -n "$SRV_PID" ]; then
        kill -TERM "$SRV_PID" 2>/dev/null
        wait "$SRV_PID" 2>/dev/null
        SRV_PID=""
    fi
    cluster_stop
    srv_cleanup
}

if ! out=$("$SRC/scripts/slurm-local.sh" start "$CL" 2>>"$T/cluster.log"); then
    echo "FAIL the local Slurm cluster did not start:"
    cat "$T/cluster.log"
    exit 1
fi
eval "$out"
check '[ "$SLURM_CONF" = "$CL/slurm.conf" ] && [ "$(sinfo -h -N -t idle -o %N)" = n1 ]' "the cluster's node n1 is idle"
J=$(sbatch --parsable -o "$CL/hostname.out" --wrap hostname)
check 'wait_until 60 "scontrol show job -o $J | grep -q JobState=COMPLETED" && [ "$(cat "$CL/hostname.out")" = "$(hostname)" ]' \
    "sbatch --wrap hostname completes (Slurm job $J)"

# slurm_id ID: the Slurm job id of cdigits job ID (the reply stays its JSON)
slurm_id() {
    http GET "/jobs/$1/json"
    jv 'd.get("slurm_job_id") or ""'
}
# slurm_state SLURM_ID: Slurm's state of a job (scontrol keeps finished ones for MinJobAge)
slurm_state() {
    scontrol show job -o "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2
}
# model NAME EPOCHS NET: fred's model of $DS for EPOCHS epochs, a snapshot and validation
# at the end; M gets its id
model() {
    "$3" >"$T/$1.prototxt"
    http POST /models/images/classification/json -F method=custom -F custom_network="<$T/$1.prototxt" \
        -F train_epochs="$2" -F snapshot_interval="$2" -F val_interval="$2" -F model_name="$1" -F dataset="$DS" \
        -F random_seed=1 -F lr_policy=fixed
    M=$(jv 'd["id"]')
}
# the same, asking for nodes=1 (and the default ranks_per_node)
model_one_node() {
    "$3" >"$T/$1.prototxt"
    http POST /models/images/classification/json -F method=custom -F custom_network="<$T/$1.prototxt" \
        -F train_epochs="$2" -F snapshot_interval="$2" -F val_interval="$2" -F model_name="$1" -F dataset="$DS" \
        -F random_seed=1 -F lr_policy=fixed -F nodes=1
    M=$(jv 'd["id"]')
}
long_net() { wide_net 36 12; }

make_pngs "$T/images" --classes 3 --per-class 16 --size 28 --seed 7
SERVE=(--data-root "$T/images" --abort-grace 3 --executor slurm)
srv_start "${SERVE[@]}"
login_as fred
http POST /datasets/images/classification/json -F folder_train="$T/images" -F resize_channels=1 \
    -F resize_width=28 -F resize_height=28 -F folder_pct_val=25 -F dataset_name=shapes
DS=$(jv 'd["id"]')
check 'wait_status "$DS" Done 180' "the dataset is made through Slurm"
SID=$(slurm_id "$DS")
check '[ -n "$SID" ] && [ "$(slurm_state "$SID")" = COMPLETED ] && [ -s "$T/data/jobs/$DS/slurm.sbatch" ]' \
    "the dataset ran as Slurm job ${SID:-?} from its slurm.sbatch"

# ---- a short training job waits behind a job that holds the node, then trains to Done
BLOCK=$(sbatch --parsable --exclusive -o /dev/null --wrap "sleep 600")
blocker_runs() { [ "$(slurm_state "$BLOCK")" = RUNNING ]; }
waits_for_resources() {
    http GET "/models/$M/json"
    [ "$(jv 'd["status"]')" = Waiting ] && jv 'd["wait_reason"]' | grep -q "is PENDING: Resources"
}
check 'wait_until 60 blocker_runs' "Slurm job $BLOCK holds the whole node"
model_one_node short 2 tiny_net
check '[ "$CODE" = 200 ] && [ -n "$M" ]' "a short model is created"
check 'wait_until 60 waits_for_resources' "while it waits, its wait_reason gives Slurm's reason (Resources)"
scancel "$BLOCK"
check 'wait_status "$M" Done 300' "the short model trains to Done"
SID=$(slurm_id "$M")
http GET "/models/$M/json"
check '[ -n "$SID" ] && [ "$(jv "d[\"nodes\"]")" = n1 ] && [ "$(jv "d[\"snapshots\"]")" != "[]" ]' \
    "its JSON names Slurm job ${SID:-?} on node $(jv 'd["nodes"]') and a snapshot ($(jv 'd["snapshots"]'))"
check '[ "$(jv "d[\"resources\"][\"nodes\"]")" = 1 ] && [ "$(jv "d[\"resources\"][\"ranks_per_node\"]")" = 1 ]' \
    "nodes=1 is stored with the default ranks_per_node 1"
check '[ "$(slurm_state "$SID")" = COMPLETED ] && grep -q -- "--ntasks-per-node=1" "$T/data/jobs/$M/slurm.sbatch"' \
    "Slurm ran it: job $SID COMPLETED, from a script with --ntasks-per-node=1"
http GET "/jobs/$M/log/json?n=1000"
check '[ "$(jv "any(\"Slurm job $SID ended COMPLETED\" in l[\"message\"] for l in d[\"log\"])")" = true ]' \
    "the log says Slurm job $SID ended COMPLETED"

# ---- ranks as processes: 2 CPU ranks on the node are one srun step of 2 MPI ranks
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/short.prototxt" \
    -F train_epochs=2 -F snapshot_interval=2 -F val_interval=2 -F model_name=ranks -F dataset="$DS" \
    -F random_seed=1 -F lr_policy=fixed -F nodes=1 -F ranks_per_node=2 -F batch_size=8
M=$(jv 'd["id"]')
check '[ "$CODE" = 200 ] && wait_status "$M" Done 300' "a model of ranks_per_node 2 trains to Done"
check 'grep -q -- "--ntasks-per-node=2" "$T/data/jobs/$M/slurm.sbatch" && grep -q "^exec srun --mpi=pmix " "$T/data/jobs/$M/slurm.sbatch"' \
    "its slurm.sbatch starts the worker as 2 tasks of srun --mpi=pmix"
http GET "/jobs/$M/log/json?n=1000"
check '[ "$(jv "any(\"data parallel over 2 replicas\" in l[\"message\"] for l in d[\"log\"])")" = true ]' \
    "its log says it trained data parallel over the 2 ranks"
# more than one node is a job of ranks too: no longer refused
http POST /models/images/classification/json -F method=custom -F custom_network="<$T/short.prototxt" \
    -F train_epochs=1 -F model_name=two -F dataset="$DS" -F nodes=2
check '[ "$CODE" = 200 ]' "nodes=2 is accepted (a job of MPI ranks)"
M2=$(jv 'd["id"]')
[ -n "$M2" ] && http POST "/models/$M2/abort"

# ---- abort through the API: scancel, Aborted, nothing left in squeue
model aborted 400 long_net
check 'training "$M" 300' "a long model trains"
SID=$(slurm_id "$M")
check '[ "$(squeue -h -j "$SID" -o %T)" = RUNNING ]' "squeue shows its Slurm job ${SID:-?} RUNNING"
http POST "/models/$M/abort"
check 'wait_status "$M" Aborted 120' "the aborted model ends Aborted"
check 'has_snapshot "$M"' "it saved a snapshot on scancel --signal=TERM"
check 'wait_until 60 "[ -z \"\$(squeue -h -o %i)\" ]"' "nothing is left in squeue ($(slurm_state "$SID"))"

# ---- scancel from outside: Aborted with Slurm's reason
model outside 400 long_net
check 'training "$M" 300' "another long model trains"
SID=$(slurm_id "$M")
scancel "$SID"
check 'wait_status "$M" Aborted 120' "the model cancelled with scancel $SID ends Aborted"
http GET "/models/$M/json"
check 'printf %s "$(jv "d[\"error\"]")" | grep -q "Slurm job $SID was cancelled outside cdigits (scancel.*Slurm: CANCELLED"' \
    "its error gives Slurm's reason: $(jv 'd["error"]' | head -c 200)"

# ---- a server killed mid-job is started again and follows the job on to Done
model restarted 150 long_net
check 'training "$M" 300' "a third model trains"
SID=$(slurm_id "$M")
srv_kill9
check '[ "$(squeue -h -j "$SID" -o %T)" = RUNNING ]' "its Slurm job $SID runs on without the server"
srv_start "${SERVE[@]}"
http GET "/jobs/$M/log/json?n=100000"
check '[ "$(jv "any(\"Following Slurm job $SID again\" in l[\"message\"] for l in d[\"log\"])")" = true ]' \
    "the restarted server follows Slurm job $SID again"
check 'wait_status "$M" Done 600' "the job goes on to Done"
http GET "/models/$M/json"
check '[ "$(jv "[h[0] for h in d[\"status_history\"]].count(\"Running\")")" = 1 ] && [ "$(slurm_state "$SID")" = COMPLETED ]' \
    "one Running in its history and Slurm job $SID COMPLETED"

srv_stop
finish
