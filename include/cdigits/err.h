/* An error a caller can show the user, for the server, the scheduler and the store: a
 * kind that picks the HTTP status and a message that names what is wrong and what to
 * do. Below every module that returns one, so none of them includes another's header
 * for an error type. */
#ifndef CDIGITS_ERR_H
#define CDIGITS_ERR_H

#ifdef __cplusplus
extern "C" {
#endif

enum cd_err_kind {
    CD_E_NONE = 0,
    CD_E_INVALID,      /* 400: the request is wrong */
    CD_E_UNAUTHORIZED, /* 401: log in first */
    CD_E_FORBIDDEN,    /* 403: not yours, or not allowed in this state */
    CD_E_NOTFOUND,     /* 404 */
    CD_E_CONFLICT,     /* 409: the job is in a state that does not allow it */
    CD_E_TOOLARGE,     /* 413 */
    CD_E_INTERNAL,     /* 500: disk, database, fork */
};
typedef struct cd_err {
    int kind;
    char msg[1024];
} cd_err_t;
/* Fills err (when not NULL) and returns CD_ERR, so callers can `return cd_err_set(...)`. */
int cd_err_set(cd_err_t *err, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#ifdef __cplusplus
}
#endif
#endif
