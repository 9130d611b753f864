/* The job folder's file names and snapshot rules (include/cdigits/jobdir.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/jobdir.h"
#include "cdigits/util.h"

static const char *const g_names[JOBDIR_FILE_COUNT] = {
    [JOBDIR_TRAIN_JSON] = "train.json",     [JOBDIR_DATASET_JSON] = "dataset.json",
    [JOBDIR_NETWORK] = "network.prototxt",  [JOBDIR_LABELS] = "labels.txt",
    [JOBDIR_MEAN_BIN] = "mean.bin",         [JOBDIR_MEAN_PNG] = "mean.png",
    [JOBDIR_WORKER_OUT] = "worker.out.jsonl", [JOBDIR_INFO_JSON] = "info.json",
    [JOBDIR_WORKER_ERR] = "worker.err.log", [JOBDIR_STATS_JSON] = "stats.json",
    [JOBDIR_TRAIN_DB] = "train.db",         [JOBDIR_VAL_DB] = "val.db",
    [JOBDIR_TEST_DB] = "test.db",           [JOBDIR_DEPLOY] = "deploy.prototxt",
    [JOBDIR_SOLVER] = "solver.prototxt",    [JOBDIR_ORIGINAL] = "original.prototxt",
    [JOBDIR_TRAIN_VAL] = "train_val.prototxt", [JOBDIR_MEAN_JPG] = "mean.jpg",
    [JOBDIR_TRAIN_LABELS_DB] = "train_labels.db", [JOBDIR_VAL_LABELS_DB] = "val_labels.db",
    [JOBDIR_TEST_LABELS_DB] = "test_labels.db", [JOBDIR_PALETTE] = "palette.txt",
};

/* The two ways a snapshot is named, and the extension of each part. */
static const char *const g_kinds[2] = {"snapshot_epoch_", "snapshot_iter_"}; /* by by_iteration */
static const char *const g_parts[3] = {[JOBDIR_WEIGHTS] = ".cdw", [JOBDIR_STATE] = ".solverstate",
                                       [JOBDIR_EPOCH] = ".epoch"};

static int fit(char *buf, size_t len, int n)
{
    if (n < 0 || (size_t)n >= len) {
        if (len)
            buf[0] = 0;
        return CD_ERR;
    }
    return CD_OK;
}

const char *jobdir_name(jobdir_file f) { return (unsigned)f < JOBDIR_FILE_COUNT ? g_names[f] : NULL; }

int jobdir_path(const char *dir, jobdir_file f, char *buf, size_t len)
{
    const char *name = jobdir_name(f);
    if (!name)
        return fit(buf, len, -1);
    return fit(buf, len, snprintf(buf, len, "%s/%s", dir, name));
}

int jobdir_is_weights(const char *name)
{
    size_t n = strlen(name), e = strlen(g_parts[JOBDIR_WEIGHTS]);
    return n > e && !strcmp(name + n - e, g_parts[JOBDIR_WEIGHTS]);
}

/* The fields of Caffe's NetParameter (caffe.proto) with their protobuf wire types
 * (0 varint, 2 length-delimited; input_dim also packed); layer marks the layer lists. */
static const struct {
    unsigned field;
    unsigned wire_types; /* bit per allowed wire type */
    int layer;
} g_caffe_net_fields[] = {
    {1, 1u << 2, 0},            /* name */
    {2, 1u << 2, 1},            /* layers: V1LayerParameter */
    {3, 1u << 2, 0},            /* input */
    {4, 1u << 0 | 1u << 2, 0},  /* input_dim */
    {5, 1u << 0, 0},            /* force_backward */
    {6, 1u << 2, 0},            /* state */
    {7, 1u << 0, 0},            /* debug_info */
    {8, 1u << 2, 0},            /* input_shape */
    {100, 1u << 2, 1},          /* layer: LayerParameter */
};

/* A protobuf varint at p[*off..n): 1 with *v, 0 when it runs past n or 10 bytes. */
static int read_varint(const unsigned char *p, size_t n, size_t *off, unsigned long long *v)
{
    *v = 0;
    for (int shift = 0; shift < 70 && *off < n; shift += 7) {
        unsigned char b = p[(*off)++];
        *v |= (unsigned long long)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 1;
    }
    return 0;
}

static int is_caffe_net(const unsigned char *p, size_t n)
{
    size_t off = 0;
    int layers = 0;
    while (off < n) {
        unsigned long long tag, v;
        if (!read_varint(p, n, &off, &tag))
            return 0;
        unsigned field = (unsigned)(tag >> 3), wire = (unsigned)(tag & 7);
        size_t i = 0;
        while (i < CD_ARRAY_LEN(g_caffe_net_fields) && g_caffe_net_fields[i].field != field)
            i++;
        if (i == CD_ARRAY_LEN(g_caffe_net_fields) || tag >> 3 != field ||
            !(g_caffe_net_fields[i].wire_types & (1u << wire)))
            return 0;
        if (!read_varint(p, n, &off, &v))
            return 0;
        if (wire == 2) {
            if (v > n - off)
                return 0;
            off += (size_t)v;
        }
        layers += g_caffe_net_fields[i].layer;
    }
    return layers > 0;
}

jobdir_weights_kind jobdir_weights_kind_of(const void *data, size_t len)
{
    const size_t m = sizeof JOBDIR_WEIGHTS_MAGIC - 1;
    if (data && len >= m && !memcmp(data, JOBDIR_WEIGHTS_MAGIC, m))
        return JOBDIR_WEIGHTS_CDW;
    if (data && is_caffe_net(data, len))
        return JOBDIR_WEIGHTS_CAFFE;
    return JOBDIR_WEIGHTS_UNKNOWN;
}

int jobdir_snapshot_name(long iteration, jobdir_part part, char *buf, size_t len)
{
    if ((unsigned)part > JOBDIR_EPOCH)
        return fit(buf, len, -1);
    return fit(buf, len, snprintf(buf, len, "%s%ld%s", g_kinds[1], iteration, g_parts[part]));
}

int jobdir_snapshot_path(const char *dir, long iteration, jobdir_part part, char *buf, size_t len)
{
    if ((unsigned)part > JOBDIR_EPOCH)
        return fit(buf, len, -1);
    return fit(buf, len, snprintf(buf, len, "%s/%s%ld%s", dir, g_kinds[1], iteration, g_parts[part]));
}

int jobdir_snapshot_epoch_write(const char *dir, long iteration, double epoch)
{
    char path[4400], text[64];
    if (!isfinite(epoch) || epoch < 0 || jobdir_snapshot_path(dir, iteration, JOBDIR_EPOCH, path, sizeof path) != CD_OK) {
        errno = EINVAL;
        return CD_ERR;
    }
    /* %.17g: the reader gets back the very double the trainer had */
    int n = snprintf(text, sizeof text, "%.17g\n", epoch);
    return cd_write_file_atomic(path, text, (size_t)n);
}

double jobdir_snapshot_epoch_read(const char *dir, long iteration)
{
    char path[4400], text[64];
    if (jobdir_snapshot_path(dir, iteration, JOBDIR_EPOCH, path, sizeof path) != CD_OK)
        return -1;
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t got = fread(text, 1, sizeof text - 1, f);
    int more = fgetc(f) != EOF; /* longer than any number we write: not ours */
    fclose(f);
    text[got] = 0;
    char *end;
    double e = strtod(text, &end);
    if (end == text || more)
        return -1;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r')
        end++;
    return *end || !isfinite(e) || e < 0 ? -1 : e;
}

/* N and the kind of a weights file name ("snapshot_iter_N.cdw"): 1, or 0 for any other
 * name (digits only in N, nothing after .cdw). */
static int parse_weights(const char *name, long long *num, int *by_iter)
{
    for (int k = 0; k < 2; k++) {
        size_t pre = strlen(g_kinds[k]);
        if (strncmp(name, g_kinds[k], pre) != 0)
            continue;
        const char *p = name + pre, *q = p;
        while (*q >= '0' && *q <= '9')
            q++;
        if (q == p || q - p > 18 || strcmp(q, g_parts[JOBDIR_WEIGHTS]) != 0)
            return 0;
        *num = strtoll(p, NULL, 10);
        *by_iter = k;
        return 1;
    }
    return 0;
}

static int cmp_snap(const void *a, const void *b)
{
    const jobdir_snapshot *x = a, *y = b;
    if (x->number != y->number)
        return (x->number > y->number) - (x->number < y->number);
    return x->by_iteration - y->by_iteration;
}

int jobdir_snapshots(const char *dir, int flags, jobdir_snapshot *out, int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while (n < max && (e = readdir(d))) {
        jobdir_snapshot s = {0};
        if (!parse_weights(e->d_name, &s.number, &s.by_iteration) || (flags & JOBDIR_ITER_ONLY && !s.by_iteration))
            continue;
        char state[4400];
        if (fit(state, sizeof state,
                snprintf(state, sizeof state, "%s/%s%lld%s", dir, g_kinds[s.by_iteration], s.number,
                         g_parts[JOBDIR_STATE])) == CD_OK)
            s.has_state = access(state, R_OK) == 0;
        if (flags & JOBDIR_NEED_STATE && !s.has_state)
            continue;
        snprintf(s.file, sizeof s.file, "%s", e->d_name);
        s.epoch = s.by_iteration ? jobdir_snapshot_epoch_read(dir, (long)s.number) : (double)s.number;
        out[n++] = s;
    }
    closedir(d);
    qsort(out, (size_t)n, sizeof *out, cmp_snap);
    return n;
}

int jobdir_snapshot_newest(const char *dir, int flags, jobdir_snapshot *out)
{
    enum { MAX = 4096 };
    jobdir_snapshot *all = cd_xmalloc(sizeof *all * MAX);
    int n = jobdir_snapshots(dir, flags, all, MAX);
    if (n > 0)
        *out = all[n - 1];
    free(all);
    return n > 0;
}

int jobdir_epoch_pick(const double *epochs, int n, const char *text)
{
    char *end;
    double want = text ? strtod(text, &end) : NAN;
    if (text && end != text)
        while (*end == ' ' || *end == '\t')
            end++;
    if (!text || end == text || *end || !isfinite(want))
        return -1;
    const char *dot = strchr(text, '.');
    int decimals = 0;
    if (dot)
        while (dot[1 + decimals] >= '0' && dot[1 + decimals] <= '9')
            decimals++;
    double tol = strpbrk(text, "eE") ? 1e-6 : 0.5 * pow(10, -decimals);
    if (tol < 5e-4)
        tol = 5e-4;
    int best = -1;
    double best_diff = INFINITY;
    for (int i = 0; i < n; i++)
        if (epochs[i] >= 0 && fabs(epochs[i] - want) < best_diff) {
            best_diff = fabs(epochs[i] - want);
            best = i;
        }
    if (best < 0 || best_diff > tol + 1e-9)
        return -1;
    for (int i = 0; i < n; i++) {
        double gap = fabs(epochs[i] - epochs[best]);
        if (i != best && epochs[i] >= 0 && gap > 0 && best_diff >= gap / 2)
            return -1;
    }
    return best;
}
