#!/usr/bin/env bash
# Training ranks as processes under MPI (docs/cluster.md): cdigits-worker train started
# by mpirun -np 2 is one job of 2 ranks.
#
#  (a) 2 MPI ranks on the CPU report the same losses and accuracies as the same job with
#      "replicas": 2 (threads of one process), and write byte-identical snapshots (the
#      MPI group sums every element in rank order, as the threads do);
#  (b) stopped (SIGUSR1 to mpirun, which forwards it to every rank; the job's wrapper
#      here turns the SIGTERM a server sends into it) the 2 ranks exit 3 with a snapshot,
#      and resumed with 2 ranks they match the run never stopped exactly;
#  (c) a rank that fails (a damaged record only rank 1 reads) ends the job at once, its
#      error line naming the rank and its host;
#  (d) a rank killed by SIGKILL ends the job non-zero within a bounded time, mpirun naming
#      the rank, and no process of the job is left.
#
# The data is made here: 600 synthetic 16x16 gray images in 4 classes (lib_train.py
# make-idx), and the network is a small LeNet. Skips when mpirun is missing. As root,
# mpirun needs OMPI_ALLOW_RUN_AS_ROOT; --oversubscribe lets 2 ranks run on fewer cores.
set -u

. "$(dirname "$0")/train_lib.bash"
. "$(dirname "$0")/skip.bash"
command -v mpirun >/dev/null || skip_test "mpirun is not installed (Debian: openmpi-bin, libopenmpi-dev)"
train_setup mpi_ranks

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# the worker under mpirun, as a server would start it: SIGTERM to this wrapper becomes
# SIGUSR1 to mpirun (mpirun answers SIGTERM by killing every rank a second later)
mpi_worker=$tmp/mpi-worker
cat >"$mpi_worker" <<EOF
#!/usr/bin/env bash
mpirun -np \${MPI_RANKS:-2} --oversubscribe "$worker" "\$@" &
pid=\$!
trap 'kill -USR1 \$pid 2>/dev/null' TERM INT
while :; do
    wait \$pid
    rc=\$?
    [ \$rc -gt 128 ] && kill -0 \$pid 2>/dev/null && continue
    break
done
exit \$rc
EOF
chmod +x "$mpi_worker"
run_mpi() {
    python3 "$lib" run "$mpi_worker" "$1" "$1.log" ${2:+"$2"}
}

# ---- data -----------------------------------------------------------------------------

small_dataset "$tmp/dataset-none" none
small_dataset "$tmp/dataset-png" png

# job DIR JSON-FIELDS [DATASET]: a fresh job folder with a small LeNet and train.json
job() {
    rm -rf "$1" "$1.log"*
    mkdir -p "$1"
    tiny_net "$1/network.prototxt"
    printf '{"dataset_dir": "%s", %s}\n' "${3:-$tmp/dataset-none}" "$2" >"$1/train.json"
}

# ---- (a) 2 ranks equal 2 thread replicas ------------------------------------------------

fields='"epochs": 3, "snapshot_interval": 1, "validation_interval": 1, "random_seed": 9,
    "batch_size": 64, "learning_rate": 0.02'
job "$tmp/threads" "$fields, \"replicas\": 2"
job "$tmp/ranks" "$fields"
run "$tmp/threads"
run_mpi "$tmp/ranks"
same_run() {
    python3 - "$1" "$2" <<'EOF'
import os, sys
sys.path.insert(0, os.environ["LIBDIR"])
import lib_train as L
a, b = sys.argv[1], sys.argv[2]
ck = L.Checker("2 ranks = 2 threads")
for log in (a, b):
    ck.expect(L.read_status(log + ".log")["rc"] == 0, "%s exited %s" % (log, L.read_status(log + ".log")["rc"]))
la, lb = L.read_log(a + ".log"), L.read_log(b + ".log")
ma, mb = L.metrics(la), L.metrics(lb)
ck.expect(ma and set(ma) == set(mb), "different metrics reported: %s" % sorted(set(ma) ^ set(mb))[:5])
diff = [(k, ma[k], mb[k]) for k in sorted(set(ma) & set(mb)) if ma[k] != mb[k]]
for k, x, y in diff[:5]:
    ck.fail("%s at iteration %d: threads %r, ranks %r" % ("/".join(k[:2]), k[2], x, y))
print("%d metrics compared, %d differ" % (len(set(ma) & set(mb)), len(diff)))
sa, sb = L.snapshots(la), L.snapshots(lb)
ck.expect(sa and [s["file"] for s in sa] == [s["file"] for s in sb], "different snapshots")
n = 0
for s in sa:
    for ext in (".cdw", ".solverstate"):
        f = s["file"][:-4] + ext
        with open(os.path.join(a, f), "rb") as x, open(os.path.join(b, f), "rb") as y:
            ck.expect(x.read() == y.read(), "%s differs" % f)
        n += 1
print("%d snapshot files compared byte for byte" % n)
dev = [l for l in lb if l.get("type") == "device"]
ck.expect(len(dev) == 1 and dev[0].get("ranks") == 2, "the ranks' device lines: %s" % dev)
ck.done()
EOF
}
export LIBDIR=$here
check "2 ranks train as 2 thread replicas, bit for bit" same_run "$tmp/threads" "$tmp/ranks"
check "rank 0 alone reports: one training line" test "$(grep -c '"message":"training ' "$tmp/ranks.log")" = 1
check "the group is said to be 2 replicas" grep -q "data parallel over 2 replicas" "$tmp/ranks.log"

# ---- (b) stopped and resumed with 2 ranks -----------------------------------------------

mpi_case_job() {
    job "$1" "\"epochs\": $2, \"snapshot_interval\": 0.5, \"validation_interval\": 1, \"random_seed\": 5,
        \"batch_size\": 32, \"learning_rate\": 0.02"
}
worker_plain=$worker
worker=$mpi_worker # resume_check runs "$worker"
resume_check ranks mpi_case_job
worker=$worker_plain

# ---- (c) a rank that fails ends the job, naming itself ---------------------------------

# shuffle off, batch 64 over 2 ranks: rank 1 reads positions 32..63 of the first batch,
# rank 0 never reaches record 40
if python3 "$lib" corrupt-record "$tmp/dataset-png/train.db" 40; then
    job "$tmp/rank-fails" '"epochs": 1, "random_seed": 3, "batch_size": 64, "shuffle": false' "$tmp/dataset-png"
    run_mpi "$tmp/rank-fails"
    host=$(hostname)
    check "a rank fails: the job ends, naming rank 1 and its host" python3 - "$tmp/rank-fails.log" "$host" <<'EOF'
import os, re, sys
sys.path.insert(0, os.environ["LIBDIR"])
import lib_train as L
log, host = sys.argv[1], sys.argv[2]
ck, lines = L.check_error("a rank fails", log, r"rank 1 of 2 \(host %s\)" % re.escape(host), r"record 40\b")
ck.expect(L.read_status(log)["rc"] not in (0, 3, "timeout"), "exit %s" % L.read_status(log)["rc"])
ck.expect(not L.snapshots(lines), "a snapshot was written")
ck.done()
EOF
else
    check "a PNG dataset to damage" false
fi

# ---- (d) a rank killed: the job ends, nothing is left ----------------------------------

job "$tmp/rank-killed" '"epochs": 200, "random_seed": 4, "batch_size": 32, "snapshot_interval": 0'
check "a rank killed by SIGKILL: the job ends within 60 s, naming it, nothing left" \
    python3 - "$mpi_worker" "$tmp/rank-killed" "$worker" <<'EOF'
import json, os, signal, subprocess, sys, time
wrapper, jobdir, worker = sys.argv[1:4]
def ranks():
    """{rank: pid} of this job's worker processes (their environment says the rank)."""
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                cmd = f.read().split(b"\0")
            with open("/proc/%s/environ" % pid, "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        if len(cmd) > 2 and cmd[0].decode() == worker and cmd[2].decode() == jobdir and b"OMPI_COMM_WORLD_RANK" in env:
            out[int(env[b"OMPI_COMM_WORLD_RANK"])] = int(pid)
    return out
def running(pid):
    """Whether pid still runs (a zombie, not yet reaped by its new parent, does not)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
p = subprocess.Popen([wrapper, "train", jobdir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
fails = []
for line in p.stdout:
    if json.loads(line).get("type") == "progress":
        break
pids = ranks()
if sorted(pids) != [0, 1]:
    fails.append("ranks found: %s" % pids)
    p.kill()
else:
    os.kill(pids[1], signal.SIGKILL)
    t0 = time.monotonic()
    try:
        rest = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        rest = p.communicate()
        fails.append("the job still ran 60 s after rank 1 was killed")
    took = time.monotonic() - t0
    print("exit %s %.1f s after SIGKILL to rank 1" % (p.returncode, took))
    if p.returncode in (0, 3):
        fails.append("exit status %s" % p.returncode)
    if "rank 1" not in rest[1]:
        fails.append("stderr does not name rank 1: %r" % rest[1][-400:])
    # the launcher's exit may come a moment before its ranks are reaped: they must be
    # gone within a bounded time, not at once
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and ([pid for pid in pids.values() if running(pid)] or ranks()):
        time.sleep(0.05)
    left = [pid for pid in pids.values() if running(pid)]
    if left or ranks():
        fails.append("processes left: %s %s" % (left, ranks()))
for f in fails:
    print("FAIL: " + f)
sys.exit(1 if fails else 0)
EOF

train_finish
