#!/usr/bin/env bash
# Black-box test of the TensorBoard events file every training job writes (docs/training.md):
# a tiny job trained with the real worker, then resumed for more epochs, and its job
# folder's events.out.tfevents.* files read back with google.protobuf, the Event
# classes built at test time from proto/tensorboard_event.proto (protoc-c's descriptor
# set, through a descriptor pool). Checked: every record's framing (length and data
# CRC32C, masked, computed here), the first event's file_version "brain.Event:2", that
# the scalars are exactly the worker's metric lines (tag <phase>/<name>, step = the
# iteration, the value to float32 rounding), wall times in order and within the run,
# that the resume added a second file rather than touching the first, and that two
# data-parallel replicas write one file (rank 0's).
# Needs CDIGITS_BUILD_DIR (ctest sets it), /usr/bin/python3 with python3-protobuf and
# protoc-c (scripts/setup.sh --test).
set -u

. "$(dirname "$0")/train_lib.bash"
. "$(dirname "$0")/skip.bash"
src=${CDIGITS_SOURCE_DIR:-$(cd "$here/../.." && pwd)}
py=/usr/bin/python3
if ! [ -x "$py" ] || ! "$py" -c 'import google.protobuf' 2>/dev/null; then
    skip_test "python3-protobuf is missing (/usr/bin/python3 cannot import google.protobuf): scripts/setup.sh --test installs it"
fi
if ! command -v protoc-c >/dev/null; then
    skip_test "protoc-c is missing (protobuf-c-compiler, which the build needs too): scripts/setup.sh installs it"
fi
train_setup tensorboard

# ---- data and job ----------------------------------------------------------------------

small_dataset "$tmp/dataset" none

job=$tmp/job
mkdir -p "$job"
cat >"$job/network.prototxt" <<NET
name: "tiny"
$(data_layers 32 50)
layer { name: "scale" type: "Power" bottom: "data" top: "scaled" power_param { scale: 0.0125 } }
layer { name: "ip1" type: "InnerProduct" bottom: "scaled" top: "ip1"
  inner_product_param { num_output: 16 weight_filler { type: "xavier" } } }
layer { name: "relu1" type: "ReLU" bottom: "ip1" top: "ip1" }
layer { name: "ip2" type: "InnerProduct" bottom: "ip1" top: "ip2"
  inner_product_param { weight_filler { type: "xavier" } } }
layer { name: "accuracy" type: "Accuracy" bottom: "ip2" bottom: "label" top: "accuracy"
  include { stage: "val" } }
layer { name: "loss" type: "SoftmaxWithLoss" bottom: "ip2" bottom: "label" top: "loss"
  exclude { stage: "deploy" } }
NET
write_config() {
    printf '{"dataset_dir": "%s", "epochs": %s, "snapshot_interval": 1, "validation_interval": 0.5, "random_seed": 3, "learning_rate": 0.01%s}\n' \
        "$tmp/dataset" "$1" "${2:-}" >"$job/train.json"
}

# the first run: 1 epoch, validating twice
write_config 1
run "$job"
events() { ls "$job" | grep -E '^events\.out\.tfevents\.[0-9]+\.' | sort; }
check "the first run finished" grep -q '"type":"done"' "$job.log"
check "the first run wrote one events file" test "$(events | wc -l)" = 1
first=$(events | head -1)
cp "$job/$first" "$tmp/first.copy"

# resumed for a second epoch: a new file beside the first, which stays as it was
mv "$job.log" "$tmp/run1.log"
write_config 2 ', "resume": true'
run "$job"
check "the resumed run finished" grep -q '"type":"done"' "$job.log"
check "the resume added a second events file" test "$(events | wc -l)" = 2
check "the resume left the first file alone" cmp -s "$job/$first" "$tmp/first.copy"
cp "$job.log" "$tmp/run2.log"

# ---- read the files back -------------------------------------------------------------

if ! protoc-c --descriptor_set_out="$tmp/event.desc" -I"$src/proto" "$src/proto/tensorboard_event.proto" \
        >"$tmp/protoc.log" 2>&1; then
    cat "$tmp/protoc.log"
    failed=$((failed + 1))
    echo "FAILED: protoc-c cannot read proto/tensorboard_event.proto"
fi

# compare FILES... -- LOGS...: the events files against the metric lines of the logs
compare() {
    "$py" - "$tmp/event.desc" "$@" <<'PY'
import json, math, struct, sys
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

args = sys.argv[2:]
files, logs = args[:args.index("--")], args[args.index("--") + 1:]
bad = []

# CRC-32C (Castagnoli), bit by bit: a reference apart from the worker's table
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

assert crc32c(b"123456789") == 0xE3069283, "the test's CRC32C is wrong"

fds = descriptor_pb2.FileDescriptorSet()
fds.ParseFromString(open(sys.argv[1], "rb").read())
pool = descriptor_pool.DescriptorPool()
for f in fds.file:
    pool.Add(f)
desc = pool.FindMessageTypeByName("tensorflow.Event")
Event = (message_factory.GetMessageClass(desc) if hasattr(message_factory, "GetMessageClass")
         else message_factory.MessageFactory(pool).GetPrototype(desc))

scalars = []
walls = []
for path in files:
    data = open(path, "rb").read()
    pos = n = 0
    while pos < len(data):
        if len(data) - pos < 12:
            bad.append("%s: %d stray bytes at offset %d" % (path, len(data) - pos, pos))
            break
        head = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if hcrc != masked(head):
            bad.append("%s: record %d: length CRC %08x, expected %08x" % (path, n, hcrc, masked(head)))
            break
        body = data[pos + 12:pos + 12 + length]
        if len(body) != length or len(data) < pos + 16 + length:
            bad.append("%s: record %d is cut short" % (path, n))
            break
        (dcrc,) = struct.unpack("<I", data[pos + 12 + length:pos + 16 + length])
        if dcrc != masked(body):
            bad.append("%s: record %d: data CRC %08x, expected %08x" % (path, n, dcrc, masked(body)))
        ev = Event()
        ev.ParseFromString(body)
        if n == 0:
            if ev.WhichOneof("what") != "file_version" or ev.file_version != "brain.Event:2":
                bad.append("%s: the first event is %r, not file_version brain.Event:2" % (path, ev))
        elif ev.WhichOneof("what") != "summary" or len(ev.summary.value) != 1:
            bad.append("%s: record %d is not one scalar summary: %r" % (path, n, ev))
        else:
            v = ev.summary.value[0]
            if v.WhichOneof("value") != "simple_value":
                bad.append("%s: record %d (%s) holds no simple_value" % (path, n, v.tag))
            scalars.append((v.tag, ev.step, v.simple_value))
        walls.append(ev.wall_time)
        pos += 16 + length
        n += 1

def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]

def ulp32(x):
    a = abs(f32(x))
    return (struct.unpack("<f", struct.pack("<I", struct.unpack("<I", struct.pack("<f", a))[0] + 1))[0] - a
            if math.isfinite(a) else 0)

expected = []
for path in logs:
    for raw in open(path):
        line = json.loads(raw)
        if line.get("type") == "metric":
            expected.append(("%s/%s" % (line["phase"], line["name"]), line["iteration"], line["value"]))

if len(scalars) != len(expected):
    bad.append("%d scalars in the events files, %d metric lines in the logs" % (len(scalars), len(expected)))
for i, (got, want) in enumerate(zip(scalars, expected)):
    tag, step, value = got
    wtag, wstep, wvalue = want
    # the log prints 9 significant digits of the double, the file holds its float32
    if tag != wtag or step != wstep or not (value == f32(wvalue) or abs(value - wvalue) <= ulp32(wvalue)):
        bad.append("scalar %d is %s@%d = %.9g; the log's metric line %d says %s@%d = %.9g"
                   % (i, tag, step, value, i, wtag, wstep, wvalue))
if any(b < a for a, b in zip(walls, walls[1:])):
    bad.append("wall times go backwards")
if not scalars:
    bad.append("no scalars at all")
tags = sorted(set(t for t, _, _ in scalars))
for want in ("train/loss", "train/learning_rate", "val/loss", "val/accuracy"):
    if want not in tags:
        bad.append("no %s scalar (tags: %s)" % (want, ", ".join(tags)))
for b in bad[:20]:
    print("  " + b)
print("  %d files, %d scalars, tags %s" % (len(files), len(scalars), ", ".join(tags)))
sys.exit(1 if bad else 0)
PY
}

files=()
for f in $(events); do files+=("$job/$f"); done
check "the first file holds the first run's metrics" compare "$job/$first" -- "$tmp/run1.log"
check "both files hold both runs' metrics" compare "${files[@]}" -- "$tmp/run1.log" "$tmp/run2.log"
# two data-parallel replicas: one file, rank 0's, with the metric lines once
rm -f "$job"/events.out.tfevents.* "$job"/snapshot_iter_*
write_config 1 ', "replicas": 2'
run "$job"
check "the data-parallel run finished" grep -q '"type":"done"' "$job.log"
check "the data-parallel run wrote one events file" test "$(events | wc -l)" = 1
check "the data-parallel file holds the metrics once" compare "$job/$(events | head -1)" -- "$job.log"

# the first file is named for the second its run started, within the test
check "the file names carry the time of day" "$py" -c '
import sys, time
t = int(sys.argv[1].split(".")[3])
sys.exit(0 if int(sys.argv[2]) <= t <= time.time() else 1)' "$first" "$t0"

train_finish
