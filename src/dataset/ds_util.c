/* Small helpers of the dataset module: error text, CRC-32, shuffling, pixel layout,
 * checked writes, the settings every task checks, list paths. */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

int ds_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return CD_ERR;
}

/* CRC-32 slicing-by-8: eight 256-entry tables built once (thread-safe through
 * pthread_once), about 1.5 GB/s, enough to check a dataset in a blink. */
static uint32_t g_crc_tab[8][256];
static pthread_once_t g_crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        g_crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            g_crc_tab[t][i] = (g_crc_tab[t - 1][i] >> 8) ^ g_crc_tab[0][g_crc_tab[t - 1][i] & 0xFF];
}

uint32_t ds_crc32(uint32_t crc, const void *buf, size_t len)
{
    pthread_once(&g_crc_once, crc_init);
    const uint8_t *p = buf;
    crc = ~crc;
    while (len >= 8) {
        uint32_t a = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                            (uint32_t)p[3] << 24);
        crc = g_crc_tab[7][a & 0xFF] ^ g_crc_tab[6][(a >> 8) & 0xFF] ^
              g_crc_tab[5][(a >> 16) & 0xFF] ^ g_crc_tab[4][a >> 24] ^ g_crc_tab[3][p[4]] ^
              g_crc_tab[2][p[5]] ^ g_crc_tab[1][p[6]] ^ g_crc_tab[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--)
        crc = g_crc_tab[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

void ds_shuffle(void *base, size_t n, size_t size, uint64_t *state)
{
    unsigned char tmp[256], *a = base;
    if (n < 2 || size > sizeof tmp)
        return;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)ds_rand_below(state, (uint64_t)i + 1);
        if (j == i)
            continue;
        memcpy(tmp, a + i * size, size);
        memcpy(a + i * size, a + j * size, size);
        memcpy(a + j * size, tmp, size);
    }
}

void ds_shuffle_split(uint64_t seed, int split, void *base, size_t n, size_t size)
{
    uint64_t rng = ds_seed_mix(seed, DS_STREAM_ORDER, (uint64_t)split);
    ds_shuffle(base, n, size, &rng);
}

void ds_hwc_to_chw(const uint8_t *hwc, uint8_t *chw, int c, int h, int w)
{
    size_t plane = (size_t)h * w;
    if (c == 1) {
        memcpy(chw, hwc, plane);
        return;
    }
    if (c == 3) {
        uint8_t *r = chw, *g = chw + plane, *b = chw + 2 * plane;
        for (size_t i = 0; i < plane; i++) {
            r[i] = hwc[3 * i];
            g[i] = hwc[3 * i + 1];
            b[i] = hwc[3 * i + 2];
        }
        return;
    }
    for (size_t i = 0; i < plane; i++)
        for (int k = 0; k < c; k++)
            chw[k * plane + i] = hwc[i * c + k];
}

void ds_chw_to_hwc(const uint8_t *chw, uint8_t *hwc, int c, int h, int w)
{
    size_t plane = (size_t)h * w;
    if (c == 1) {
        memcpy(hwc, chw, plane);
        return;
    }
    for (size_t i = 0; i < plane; i++)
        for (int k = 0; k < c; k++)
            hwc[i * c + k] = chw[k * plane + i];
}

int ds_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    if (cd_write_file_atomic(path, data, len) == CD_OK)
        return CD_OK;
    int e = errno;
    return ds_err(err, errlen, "cannot write %s: %s; %s", path, strerror(e), ds_errno_advice(e));
}

const char *ds_errno_advice(int e)
{
    switch (e) {
    case ENOSPC:
    case EDQUOT:
        return "the disk is full; free disk space (or choose another job folder) and run again";
    case EACCES:
    case EPERM:
    case EROFS:
        return "check that the job folder is writable";
    case EFBIG:
        return "a file size limit was reached (ulimit -f or the file system's maximum); raise "
               "it, or choose encoding png or jpg for smaller files";
    case EIO:
        return "the disk reported an I/O error; check the disk";
    default:
        return "check the job folder and run again";
    }
}

int ds_fsync_dir(const char *path)
{
    char buf[4096];
    if (strlen(path) >= sizeof buf)
        return CD_ERR;
    strcpy(buf, path);
    int fd = open(dirname(buf), O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return CD_ERR;
    int rc = fsync(fd);
    close(fd);
    return rc == 0 ? CD_OK : CD_ERR;
}

char *ds_skip_bom(char *text)
{
    return text && strncmp(text, "\xEF\xBB\xBF", 3) == 0 ? text + 3 : text;
}

int ds_thread_count(const cd_dataset_config_t *cfg)
{
    if (cfg->threads > 0)
        return cfg->threads;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : n > 64 ? 64 : (int)n;
}

int ds_check_image_cfg(const cd_dataset_config_t *cfg, char *err, size_t errlen)
{
    if ((cfg->channels != 1 && cfg->channels != 3) || cfg->width < 1 || cfg->height < 1 ||
        cfg->width > CD_IMAGE_MAX_SIDE || cfg->height > CD_IMAGE_MAX_SIDE ||
        cfg->resize_mode < 0 || cfg->resize_mode >= CD_RESIZE_COUNT || cfg->encoding < 0 ||
        cfg->encoding >= CD_ENC_IMAGE_COUNT)
        return ds_err(err, errlen, "bad dataset settings: channels %d, size %dx%d, resize mode "
                      "%d, encoding %d", cfg->channels, cfg->width, cfg->height,
                      cfg->resize_mode, cfg->encoding);
    return CD_OK;
}

char *ds_resolve_path(const char *root, const char *path)
{
    if (path[0] == '/' || !root[0])
        return cd_xstrdup(path);
    char *p = cd_xmalloc(strlen(root) + strlen(path) + 2);
    sprintf(p, "%s/%s", root, path);
    return p;
}

int ds_load_converted(const cd_dataset_config_t *cfg, const uint8_t *buf, size_t len, cd_image_t *img, char *err,
                      size_t errlen)
{
    if (cfg->channel_conversion)
        return cd_image_decode(buf, len, cfg->channel_conversion, img, err, errlen);
    uint8_t *hwc = NULL;
    int c = 0, h = 0, w = 0;
    if (ds_image_decode_hwc(buf, len, 0, &hwc, &c, &h, &w, err, errlen) != CD_OK)
        return CD_ERR;
    int rc = cd_image_alloc(img, c, h, w, err, errlen);
    if (rc == CD_OK)
        ds_hwc_to_chw(hwc, img->data, c, h, w);
    free(hwc);
    return rc;
}
