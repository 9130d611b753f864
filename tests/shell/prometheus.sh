#!/usr/bin/env bash
# GET /metrics with tests/shell/fake_worker.py: the scrape is Prometheus's text format
# 0.0.4 (its Content-Type, HELP and TYPE for every family, GPU families without samples
# on a machine without GPUs), open like /index/json; jobs by type and state follow a
# dataset and two models; a Running model shows its trainer's images/s and data-wait
# share under its id and name (a name with a quote and a backslash, escaped); queue
# waits count one observation per start; the request counter of a route grows by
# exactly the requests the test sent, by status class; every histogram's buckets are
# cumulative with +Inf equal to _count; and `promtool check metrics` accepts the scrape
# (skipped, after every other check, only where promtool is not installed). The GPU
# families come from a fake NVML (tests/shell/fake_nvml.c, built here with cc).
. "$(dirname "$0")/server_lib.bash"
need_server

# pm FILE 'python expr': evaluates expr on the scrape in FILE with
#   v(name, **labels)  the sum of the samples of name whose labels include labels (None: none)
#   n(name)            how many samples name has
#   help, types        {family: text}
#   env(key)           an environment variable (for text no quoting could carry)
#   hist()             "ok", or what is wrong with a histogram
cat >"$T/prom.py" <<'EOF'
import os, re, sys

samples, help, types = [], {}, {}
line_re = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')


def labels_of(text):
    out, i = {}, 0
    while i < len(text):
        eq = text.index("=", i)
        key = text[i:eq]
        assert text[eq + 1] == '"', text
        j, val = eq + 2, ""
        while text[j] != '"':
            if text[j] == "\\":
                val += {"\\": "\\", '"': '"', "n": "\n"}[text[j + 1]]
                j += 2
            else:
                val += text[j]
                j += 1
        out[key] = val
        i = j + 1
        if i < len(text):
            assert text[i] == ",", text
            i += 1
    return out


for line in open(sys.argv[1]).read().splitlines():
    if line.startswith("# HELP "):
        name, _, text = line[7:].partition(" ")
        help[name] = text
    elif line.startswith("# TYPE "):
        name, _, t = line[7:].partition(" ")
        types[name] = t
    elif line:
        m = line_re.match(line)
        assert m, "not a sample line: %r" % line
        samples.append((m.group(1), labels_of(m.group(2) or ""), float(m.group(3))))


def v(metric, /, **want):
    got = [val for name, lab, val in samples if name == metric and all(lab.get(k) == w for k, w in want.items())]
    return sum(got) if got else None


def env(key):
    return os.environ[key]


def n(name):
    return len([1 for s in samples if s[0] == name])


def hist():
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for name, lab, val in samples:
            if name in (fam + "_bucket", fam + "_sum", fam + "_count"):
                key = tuple(sorted((k, x) for k, x in lab.items() if k != "le"))
                series.setdefault(key, {"buckets": []})
                if name.endswith("_bucket"):
                    series[key]["buckets"].append((float(lab["le"]), val))
                else:
                    series[key][name[len(fam) + 1:]] = val
        for key, s in series.items():
            b = s["buckets"]
            if not b or b[-1][0] != float("inf"):
                return "%s %s: no +Inf bucket" % (fam, key)
            if [x[0] for x in b] != sorted(x[0] for x in b):
                return "%s %s: le out of order" % (fam, key)
            if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
                return "%s %s: buckets not cumulative" % (fam, key)
            if s.get("count") != b[-1][1] or s.get("sum", -1) < 0:
                return "%s %s: _count %s, +Inf %s, _sum %s" % (fam, key, s.get("count"), b[-1][1], s.get("sum"))
    return "ok"


print(eval(sys.argv[2]))
EOF
pm() { python3 "$T/prom.py" "$T/$1.txt" "$2"; }
# scrape NAME: GET /metrics without any cookie into $T/NAME.txt (headers in NAME.head)
scrape() { CODE=$(curl -s -D "$T/$1.head" -o "$T/$1.txt" -w '%{http_code}' --max-time 30 "$B/metrics"); BODY=$(head -c 600 "$T/$1.txt"); }

fake_images 4
fake_net plain >"$T/plain.prototxt"
fake_net fake:slow >"$T/slow.prototxt"
srv_start --worker "$FAKE" --data-root "$T"

scrape s0
check '[ "$CODE" = 200 ]' "GET /metrics answers without a login, as /index/json"
check 'grep -qi "^content-type: text/plain; version=0.0.4; charset=utf-8" "$T/s0.head"' "the Content-Type of format 0.0.4"
FAMILIES="cdigits_jobs cdigits_job_queue_wait_seconds cdigits_job_oldest_waiting_seconds cdigits_workers_running
    cdigits_tasks_queued cdigits_inference_workers cdigits_gpu_utilization_percent cdigits_gpu_memory_used_bytes
    cdigits_gpu_memory_total_bytes cdigits_gpu_temperature_celsius cdigits_training_images_per_second
    cdigits_training_data_wait_ratio cdigits_http_requests_total cdigits_http_request_duration_seconds"
for f in $FAMILIES; do
    check '[ "$(pm s0 "\"$f\" in help and \"$f\" in types")" = True ]' "$f has HELP and TYPE ($(pm s0 "types.get('$f')"))"
done
check '[ "$(pm s0 "v(\"cdigits_jobs\")")" = 0.0 ] && [ "$(pm s0 "n(\"cdigits_jobs\")")" = 12 ]' \
    "no job yet: 12 zero samples (2 types x 6 states)"
http GET /hardware/json
NGPU=$(jv 'len(d["gpus"])')
check '[ "$(pm s0 "n(\"cdigits_gpu_memory_total_bytes\")")" = "$NGPU" ]' "one memory sample per GPU of the monitor ($NGPU)"

login_as tester
http POST /datasets/images/classification/json -F dataset_name=cats -F folder_train="$IMG/train"
DS=$(jv 'd["id"]')
check 'wait_status "$DS" Done 120' "fake dataset Done"
post_model "$T/plain.prototxt" quick 1
MA=$MODEL
check 'wait_status "$MA" Done 120' "fake model Done"
export NAME='slow "b" \ x'
http POST /models/images/classification/json -F dataset="$DS" -F method=custom -F custom_network="<$T/slow.prototxt" \
    -F train_epochs=50 --form-string "model_name=$NAME"
MB=$(jv 'd["id"]')
check 'wait_status "$MB" Running 120' "slow fake model Running"
reports() { scrape s1; [ "$(pm s1 "v(\"cdigits_training_images_per_second\", job_id=\"$MB\")")" != None ]; }
check 'wait_until 120 reports' "the running model's throughput shows up"

check '[ "$(pm s1 "v(\"cdigits_jobs\", type=\"dataset\", state=\"Done\")")" = 1.0 ]' "jobs: 1 dataset Done"
check '[ "$(pm s1 "v(\"cdigits_jobs\", type=\"model\", state=\"Done\")")" = 1.0 ]' "jobs: 1 model Done"
check '[ "$(pm s1 "v(\"cdigits_jobs\", type=\"model\", state=\"Running\")")" = 1.0 ]' "jobs: 1 model Running"
check '[ "$(pm s1 "v(\"cdigits_jobs\")")" = 3.0 ]' "jobs: 3 in all"
check '[ "$(pm s1 "v(\"cdigits_workers_running\")")" = 1.0 ]' "one worker process runs"
check '[ "$(pm s1 "v(\"cdigits_training_images_per_second\", job_id=\"$MB\", name=env(\"NAME\"))")" = 40.0 ]' \
    "images/s of the running model under its id and escaped name: 8 images per 0.2 s step"
check '[ "$(pm s1 "v(\"cdigits_training_data_wait_ratio\", job_id=\"$MB\")")" = 0.125 ]' "its data-wait share"
check '[ "$(pm s1 "v(\"cdigits_training_images_per_second\", job_id=\"$MA\")")" = None ]' "a Done model has no throughput sample"
check '[ "$(pm s1 "v(\"cdigits_job_queue_wait_seconds_count\", type=\"dataset\")")" = 1.0 ]' "queue waits: one dataset start"
check '[ "$(pm s1 "v(\"cdigits_job_queue_wait_seconds_count\", type=\"model\")")" = 2.0 ]' "queue waits: two model starts"
check '[ "$(pm s1 "v(\"cdigits_job_oldest_waiting_seconds\")")" = 0.0 ]' "no job waits now"

# what the test sends between two scrapes is what the counters grow by
S2XX=$(pm s1 "v('cdigits_http_requests_total', route='/jobs/<id>/status', method='GET', status='2xx') or 0")
S4XX=$(pm s1 "v('cdigits_http_requests_total', route='/jobs/<id>/status', method='GET', status='4xx') or 0")
M2XX=$(pm s1 "v('cdigits_http_requests_total', route='/metrics', method='GET', status='2xx') or 0")
for i in 1 2 3 4 5 6 7; do http GET "/jobs/$MB/status"; done
for i in 1 2; do http GET "/jobs/20000101-000000-none/status"; done
http GET /no/such/route
scrape s2
check '[ "$(pm s2 "v(\"cdigits_http_requests_total\", route=\"/jobs/<id>/status\", status=\"2xx\") - $S2XX")" = 7.0 ]' \
    "the status route's 2xx counter grew by the 7 requests sent"
check '[ "$(pm s2 "v(\"cdigits_http_requests_total\", route=\"/jobs/<id>/status\", status=\"4xx\") - $S4XX")" = 2.0 ]' \
    "its 4xx counter by the 2 requests for an unknown job"
check '[ "$(pm s2 "v(\"cdigits_http_requests_total\", route=\"/metrics\", status=\"2xx\") - $M2XX")" = 1.0 ]' \
    "the metrics route's counter by the one scrape between"
check '[ "$(pm s2 "v(\"cdigits_http_requests_total\", route=\"(static)\", status=\"4xx\")")" = 1.0 ]' \
    "an unmatched URL counts under (static), not under its own path"
check '[ "$(pm s2 "len([1 for s in samples if \"20000101\" in str(s[1]) or \"/no/such\" in str(s[1])])")" = 0 ]' \
    "no raw URL is a label"
check '[ "$(pm s2 "v(\"cdigits_http_request_duration_seconds_count\", route=\"/jobs/<id>/status\") == v(\"cdigits_http_requests_total\", route=\"/jobs/<id>/status\")")" = True ]' \
    "the latency histogram counts every reply of the route"
check '[ "$(pm s2 "hist()")" = ok ]' "every histogram: cumulative buckets, +Inf = _count ($(pm s2 "hist()"))"
check '[ "$(pm s1 "hist()")" = ok ]' "and in the earlier scrape"

http POST "/models/$MB/abort"
check 'wait_status "$MB" Aborted 120' "the slow model aborted"
stopped() { scrape s3; [ "$(pm s3 "v(\"cdigits_workers_running\")")" = 0.0 ]; }
check 'wait_until 120 stopped' "no worker runs after the abort"
check '[ "$(pm s3 "v(\"cdigits_jobs\", type=\"model\", state=\"Aborted\")")" = 1.0 ] && [ "$(pm s3 "v(\"cdigits_jobs\", type=\"model\", state=\"Running\")")" = 0.0 ]' \
    "jobs: the model moved from Running to Aborted"
check '[ "$(pm s3 "n(\"cdigits_training_images_per_second\")")" = 0 ]' "no throughput sample once nothing trains"

# GPUs: a server whose NVML is tests/shell/fake_nvml.c (two GPUs; the second has a quote
# in its name and no temperature reading) shows the monitor's sample
srv_stop
check '${CC:-cc} -shared -fPIC -o "$T/libfakenvml.so" "$SRC/tests/shell/fake_nvml.c" 2>"$T/cc.txt"' \
    "the fake NVML library builds ($(head -c 300 "$T/cc.txt" 2>/dev/null))"
export CDIGITS_NVML=$T/libfakenvml.so
srv_start --worker "$FAKE" --data-root "$T" --gpus none
unset CDIGITS_NVML
sampled() { scrape s4; [ "$(pm s4 "n(\"cdigits_gpu_memory_total_bytes\")")" = 2 ]; }
check 'wait_until 120 sampled' "one memory sample per fake GPU once the monitor ran"
check '[ "$(pm s4 "v(\"cdigits_gpu_utilization_percent\", gpu=\"0\", name=\"Fake GPU\")")" = 37.0 ]' "GPU 0: utilization %"
check '[ "$(pm s4 "v(\"cdigits_gpu_memory_used_bytes\", gpu=\"0\")")" = "$((3 << 30)).0" ]' "GPU 0: memory used"
check '[ "$(pm s4 "v(\"cdigits_gpu_memory_total_bytes\", gpu=\"1\", name=\"Fake \\\"Q\\\" GPU\")")" = "$((80 << 30)).0" ]' \
    "GPU 1: memory total, under its escaped name"
check '[ "$(pm s4 "v(\"cdigits_gpu_temperature_celsius\", gpu=\"0\")")" = 61.0 ] && [ "$(pm s4 "n(\"cdigits_gpu_temperature_celsius\")")" = 1 ]' \
    "a temperature for GPU 0 only: GPU 1 gives no reading"

if command -v promtool >/dev/null 2>&1; then
    for s in s0 s2 s3 s4; do
        promtool check metrics <"$T/$s.txt" >"$T/promtool-$s.txt" 2>&1
        PROMTOOL_RC=$?
        check '[ "$PROMTOOL_RC" = 0 ]' "promtool check metrics accepts scrape $s ($(tr '\n' ' ' <"$T/promtool-$s.txt" | head -c 400))"
    done
else
    [ "$FAILS" -eq 0 ] && skip_test "promtool is not installed (Debian: apt-get install prometheus); every other check passed"
fi
finish
