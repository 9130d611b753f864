/*
 * IDX files (the format of MNIST and Fashion-MNIST): a big-endian magic 0x000008NN
 * (0x08: unsigned bytes, NN: number of dimensions), NN big-endian u32 sizes, then the
 * bytes. Gzipped files are read through zlib.
 *
 * import-idx turns an image file (N, rows, cols) and a label file (N) into
 * OUT/<class name>/<index>.png, the folder layout a dataset is made from.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

#define IDX_MAX_BYTES ((size_t)1 << 34) /* 16 GiB: far above any IDX data set */

static int append(uint8_t **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
    if (*len + n > IDX_MAX_BYTES)
        return CD_ERR;
    if (*len + n > *cap) {
        size_t c = *cap ? *cap : 1 << 20;
        while (c < *len + n)
            c *= 2;
        *buf = cd_xrealloc(*buf, c);
        *cap = c;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    return CD_OK;
}

static int read_gzip(const char *path, uint8_t **data, size_t *len, char *err, size_t errlen)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return ds_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
    gzbuffer(gz, 1 << 17);
    uint8_t chunk[1 << 16];
    size_t cap = 0;
    int n, rc = CD_OK;
    *data = NULL;
    *len = 0;
    while ((n = gzread(gz, chunk, sizeof chunk)) > 0)
        if (append(data, len, &cap, chunk, (size_t)n) != CD_OK) {
            rc = ds_err(err, errlen, "%s is larger than %zu bytes uncompressed; not an IDX "
                        "file?", path, IDX_MAX_BYTES);
            break;
        }
    int zerr = Z_OK;
    /* gzerror's text lives in the gzFile: copy it before gzclose_r frees it */
    char msg[256] = "";
    if (n < 0)
        snprintf(msg, sizeof msg, "%s", gzerror(gz, &zerr));
    int close_rc = gzclose_r(gz);
    if (rc == CD_OK && (n < 0 || close_rc != Z_OK))
        rc = ds_err(err, errlen, "%s: the gzip data is damaged or truncated (%s); download the "
                    "file again", path, msg[0] ? msg : "unexpected end of file");
    if (rc != CD_OK) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

void cd_idx_free(cd_idx_t *idx)
{
    if (!idx)
        return;
    free(idx->data);
    memset(idx, 0, sizeof *idx);
}

int cd_idx_load(const char *path, cd_idx_t *idx, char *err, size_t errlen)
{
    memset(idx, 0, sizeof *idx);
    uint8_t *buf = NULL;
    size_t len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return ds_err(err, errlen, "cannot open %s: %s; check the path", path, strerror(errno));
    uint8_t head[2] = {0};
    ssize_t got = read(fd, head, 2);
    close(fd);
    if (got == 2 && head[0] == 0x1F && head[1] == 0x8B) {
        if (read_gzip(path, &buf, &len, err, errlen) != CD_OK)
            return CD_ERR;
    } else if (!(buf = (uint8_t *)cd_read_file(path, &len))) {
        return ds_err(err, errlen, "cannot read %s: %s", path, strerror(errno));
    }
    int rc = CD_ERR;
    if (len < 4 || buf[0] != 0 || buf[1] != 0) {
        ds_err(err, errlen, "%s is not an IDX file (it does not start with 00 00 08); give the "
               "MNIST-style images/labels file", path);
        goto out;
    }
    if (buf[2] != 0x08) {
        ds_err(err, errlen, "%s: IDX data type 0x%02x is not supported; only unsigned bytes "
               "(0x08, as in MNIST) are", path, buf[2]);
        goto out;
    }
    int nd = buf[3];
    if (nd < 1 || nd > 4 || len < 4 + 4 * (size_t)nd) {
        ds_err(err, errlen, "%s: bad IDX header (%d dimensions, %zu bytes)", path, nd, len);
        goto out;
    }
    size_t want = 1;
    for (int d = 0; d < nd; d++) {
        const uint8_t *p = buf + 4 + 4 * d; /* big-endian */
        idx->dims[d] = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (idx->dims[d] && want > IDX_MAX_BYTES / idx->dims[d]) {
            ds_err(err, errlen, "%s: IDX sizes are too large", path);
            goto out;
        }
        want *= idx->dims[d];
    }
    size_t hdr = 4 + 4 * (size_t)nd;
    if (len - hdr != want) {
        ds_err(err, errlen, "%s: the header promises %zu data bytes but the file has %zu (%s); "
               "download the file again", path, want, len - hdr,
               len - hdr < want ? "truncated" : "extra bytes");
        goto out;
    }
    idx->ndim = nd;
    idx->size = want;
    idx->data = cd_xmalloc(want ? want : 1);
    memcpy(idx->data, buf + hdr, want);
    rc = CD_OK;
out:
    free(buf);
    return rc;
}

/* ---- import ---------------------------------------------------------------- */

static int valid_name(const char *s)
{
    return s[0] && strcmp(s, ".") != 0 && strcmp(s, "..") != 0 && !strchr(s, '/');
}

/* Class names: from "a,b,c" (spaces around names trimmed) or "0".."n-1". */
static int class_names(const char *list, int need, char ***names, int *count, char *err,
                       size_t errlen)
{
    char **v = NULL;
    int n = 0;
    if (!list || !*list) {
        v = cd_xcalloc((size_t)need, sizeof *v);
        for (n = 0; n < need; n++) {
            char num[16];
            snprintf(num, sizeof num, "%d", n);
            v[n] = cd_xstrdup(num);
        }
    } else {
        char *copy = cd_xstrdup(list), *save = NULL;
        v = cd_xcalloc(strlen(list) + 1, sizeof *v);
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            while (*t == ' ')
                t++;
            char *e = t + strlen(t);
            while (e > t && e[-1] == ' ')
                *--e = 0;
            v[n++] = cd_xstrdup(t);
        }
        free(copy);
        for (int i = 0; i < n; i++)
            if (!valid_name(v[i])) {
                ds_err(err, errlen, "--labels-names: \"%s\" cannot be a folder name; use names "
                       "without '/' that are not empty, '.' or '..'", v[i]);
                goto fail;
            }
        if (n < need) {
            ds_err(err, errlen, "--labels-names gives %d names but the labels go up to %d; give "
                   "%d names", n, need - 1, need);
            goto fail;
        }
    }
    *names = v;
    *count = n;
    return CD_OK;
fail:
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
    return CD_ERR;
}

/* Write one file in place (no temp name: a killed import leaves at worst one cut PNG,
 * which dataset creation skips and names). */
static int write_file(const char *path, const uint8_t *data, size_t len, char *err,
                      size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd >= 0 && cd_write_all(fd, data, len) == CD_OK ? CD_OK : CD_ERR;
    int e = errno;
    if (fd >= 0 && close(fd) != 0 && rc == CD_OK) {
        rc = CD_ERR;
        e = errno;
    }
    if (rc != CD_OK) {
        if (fd >= 0)
            unlink(path);
        ds_err(err, errlen, "cannot write %s: %s; %s", path, strerror(e), ds_errno_advice(e));
    }
    return rc;
}

int cd_idx_import(const cd_idx_import_opts *o, size_t *written, char *err, size_t errlen)
{
    cd_idx_t im = {0}, lb = {0};
    char **names = NULL;
    int nnames = 0, rc = CD_ERR;
    *written = 0;
    if (!o->images || !o->labels || !o->out_dir)
        return ds_err(err, errlen, "give --images, --labels and --out");
    if (cd_idx_load(o->images, &im, err, errlen) != CD_OK ||
        cd_idx_load(o->labels, &lb, err, errlen) != CD_OK)
        goto out;
    if (im.ndim != 3) {
        ds_err(err, errlen, "%s has %d dimensions (magic 0x%08x); an image file has 3 (magic "
               "0x00000803)%s", o->images, im.ndim, 0x800 + im.ndim,
               im.ndim == 1 ? ": did you swap --images and --labels?" : "");
        goto out;
    }
    if (lb.ndim != 1) {
        ds_err(err, errlen, "%s has %d dimensions (magic 0x%08x); a label file has 1 (magic "
               "0x00000801)%s", o->labels, lb.ndim, 0x800 + lb.ndim,
               lb.ndim == 3 ? ": did you swap --images and --labels?" : "");
        goto out;
    }
    size_t n = im.dims[0];
    int rows = (int)im.dims[1], cols = (int)im.dims[2];
    if (lb.dims[0] != n) {
        ds_err(err, errlen, "%s has %zu images but %s has %u labels; give matching files",
               o->images, n, o->labels, lb.dims[0]);
        goto out;
    }
    if (rows < 1 || cols < 1 || rows > CD_IMAGE_MAX_SIDE || cols > CD_IMAGE_MAX_SIDE) {
        ds_err(err, errlen, "%s: images of %dx%d are not supported", o->images, cols, rows);
        goto out;
    }
    if (o->limit && o->limit < n)
        n = o->limit;
    int maxl = 0;
    for (size_t i = 0; i < n; i++)
        maxl = lb.data[i] > maxl ? lb.data[i] : maxl;
    if (class_names(o->label_names, maxl + 1, &names, &nnames, err, errlen) != CD_OK)
        goto out;
    for (int c = 0; c < nnames; c++) {
        char *dir = cd_xmalloc(strlen(o->out_dir) + strlen(names[c]) + 2);
        sprintf(dir, "%s/%s", o->out_dir, names[c]);
        int mk = cd_mkdirs(dir, 0755);
        int e = errno;
        if (mk != CD_OK)
            ds_err(err, errlen, "cannot create %s: %s; %s", dir, strerror(e), ds_errno_advice(e));
        free(dir);
        if (mk != CD_OK)
            goto out;
    }
    /* names are as wide as the file's last index, whatever --limit says, so that a
     * partial and a full import name the same image the same way */
    int digits = 1;
    for (size_t k = im.dims[0] > 1 ? im.dims[0] - 1 : 0; k >= 10; k /= 10)
        digits++;
    /* PNG encoding runs on all threads a chunk at a time; the files are then written by
     * this thread alone: parallel creates in the same folders only contend for the
     * folders' locks and run slower than one writer. */
    size_t plane = (size_t)rows * cols;
    const size_t chunk = 4096;
    int nthreads = o->threads > 0 ? o->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
    uint8_t **bufs = cd_xcalloc(chunk, sizeof *bufs);
    size_t *lens = cd_xcalloc(chunk, sizeof *lens);
    int failed = 0;
    for (size_t start = 0; start < n && !failed; start += chunk) {
        size_t end = start + chunk < n ? start + chunk : n;
#pragma omp parallel for schedule(dynamic, 64) num_threads(nthreads > 0 ? nthreads : 1)
        for (size_t i = start; i < end; i++) {
            cd_image_t img = {1, rows, cols, im.data + i * plane};
            if (cd_image_encode_png(&img, 6, &bufs[i - start], &lens[i - start], NULL, 0) != CD_OK)
                bufs[i - start] = NULL;
        }
        char path[4096];
        for (size_t i = start; i < end && !failed; i++) {
            if (snprintf(path, sizeof path, "%s/%s/%0*zu.png", o->out_dir, names[lb.data[i]],
                         digits, i) >= (int)sizeof path)
                failed = ds_err(err, errlen, "--out %s is too long a path", o->out_dir) == CD_ERR;
            else if (!bufs[i - start])
                failed = ds_err(err, errlen, "out of memory encoding %s", path) == CD_ERR;
            else
                failed = write_file(path, bufs[i - start], lens[i - start], err, errlen) != CD_OK;
        }
        for (size_t i = start; i < end; i++) {
            free(bufs[i - start]);
            bufs[i - start] = NULL;
        }
        ds_emit_progress(o->progress, "import", NULL, end, n);
    }
    free(bufs);
    free(lens);
    if (failed)
        goto out;
    ds_emit_log(o->progress, "info", "wrote %zu %dx%d images in %d classes to %s", n, cols, rows,
                nnames, o->out_dir);
    *written = n;
    rc = CD_OK;
out:
    for (int c = 0; c < nnames; c++)
        free(names[c]);
    free(names);
    cd_idx_free(&im);
    cd_idx_free(&lb);
    return rc;
}
