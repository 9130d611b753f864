/* labels.txt: class names, one per line; line n is label n. */
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/dataset.h"
#include "cdigits/util.h"

static _Thread_local char g_last_error[1024];

const char *cd_dataset_strerror(void) { return g_last_error; }

int ds_set_last_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    return CD_ERR;
}

void cd_labels_free(char **names, int count)
{
    if (!names)
        return;
    for (int i = 0; i < count; i++)
        free(names[i]);
    free(names);
}

int cd_labels_load(const char *path, char ***names, int *count)
{
    *names = NULL;
    *count = 0;
    size_t len = 0;
    char *text = cd_read_file(path, &len);
    if (!text)
        return ds_set_last_error("cannot read %s: %s; is the dataset complete?", path,
                                 strerror(errno));
    char **out = NULL;
    int n = 0, cap = 0;
    char *save = NULL;
    for (char *line = strtok_r(ds_skip_bom(text), "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *end = line + strlen(line);
        while (end > line && isspace((unsigned char)end[-1]))
            *--end = 0;
        while (isspace((unsigned char)*line))
            line++;
        if (!*line)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            out = cd_xrealloc(out, sizeof(char *) * (size_t)cap);
        }
        out[n++] = cd_xstrdup(line);
    }
    free(text);
    if (n == 0) {
        free(out);
        return ds_set_last_error("%s has no class names; write one name per line", path);
    }
    *names = out;
    *count = n;
    return CD_OK;
}

int cd_labels_save(const char *path, char *const *names, int count, char *err, size_t errlen)
{
    size_t len = 0;
    for (int i = 0; i < count; i++)
        len += strlen(names[i]) + 1;
    char *buf = cd_xmalloc(len + 1), *p = buf;
    for (int i = 0; i < count; i++) {
        size_t l = strlen(names[i]);
        memcpy(p, names[i], l);
        p[l] = '\n';
        p += l + 1;
    }
    int rc = ds_write_file(path, buf, len, err, errlen);
    free(buf);
    return rc;
}

/* ---- palette.txt: "r g b" per line, line n is class n -------------------------- */

int cd_palette_load(const char *path, uint8_t (*rgb)[3], int max, int *count)
{
    *count = 0;
    size_t len = 0;
    char *text = cd_read_file(path, &len);
    if (!text)
        return ds_set_last_error("cannot read %s: %s; is the dataset complete?", path, strerror(errno));
    int n = 0, lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(ds_skip_bom(text), "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (!line[strspn(line, " \t\r")])
            continue; /* a blank line (CRLF files have "\r" ones) */
        int r, g, b, used = 0;
        if (sscanf(line, " %d %d %d %n", &r, &g, &b, &used) != 3 || line[used] || r < 0 || r > 255 ||
            g < 0 || g > 255 || b < 0 || b > 255 || n >= max) {
            free(text);
            return ds_set_last_error(n >= max ? "%s:%d: more than %d colours" :
                                     "%s:%d: not three numbers 0..255 (\"r g b\")", path, lineno, max);
        }
        rgb[n][0] = (uint8_t)r, rgb[n][1] = (uint8_t)g, rgb[n][2] = (uint8_t)b;
        n++;
    }
    free(text);
    *count = n;
    return CD_OK;
}

int cd_palette_save(const char *path, const uint8_t (*rgb)[3], int count, char *err, size_t errlen)
{
    char *buf = cd_xmalloc((size_t)count * 12 + 1), *p = buf;
    for (int i = 0; i < count; i++)
        p += sprintf(p, "%u %u %u\n", rgb[i][0], rgb[i][1], rgb[i][2]);
    int rc = ds_write_file(path, buf, (size_t)(p - buf), err, errlen);
    free(buf);
    return rc;
}

void cd_palette_default(uint8_t (*rgb)[3], int count)
{
    /* Pascal VOC's colours: class k's bits spread over the high bits of r, g and b */
    for (int k = 0; k < count; k++) {
        int r = 0, g = 0, b = 0, c = k;
        for (int j = 0; j < 8; j++, c >>= 3) {
            r |= ((c >> 0) & 1) << (7 - j);
            g |= ((c >> 1) & 1) << (7 - j);
            b |= ((c >> 2) & 1) << (7 - j);
        }
        rgb[k][0] = (uint8_t)r, rgb[k][1] = (uint8_t)g, rgb[k][2] = (uint8_t)b;
    }
}
