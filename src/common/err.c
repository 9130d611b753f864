/* cd_err_set (include/cdigits/err.h). */
#include "cdigits/err.h"

#include <stdarg.h>
#include <stdio.h>

#include "cdigits/util.h"

int cd_err_set(cd_err_t *err, int kind, const char *fmt, ...)
{
    if (err) {
        err->kind = kind;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return CD_ERR;
}
