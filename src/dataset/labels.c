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
