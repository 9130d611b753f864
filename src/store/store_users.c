/* Users: a name recorded at each login (DIGITS asks for no password). */
#include "internal.h"

#include "cdigits/util.h"

int store_user_login(store_t *s, const char *name, cd_err_t *err)
{
    store_conn_t *c = store_writer(s);
    sqlite3_stmt *q = store_stmt(c, Q_USER_LOGIN);
    store_bind_text(q, 1, name);
    sqlite3_bind_double(q, 2, cd_wall_time());
    int rc = store_exec(c, q, "recording the login", err);
    store_release(c);
    return rc;
}

json_t *store_user_get(store_t *s, const char *name)
{
    store_conn_t *c = store_reader(s);
    sqlite3_stmt *q = store_stmt(c, Q_USER_GET);
    store_bind_text(q, 1, name);
    json_t *row = store_row(c, q);
    store_release(c);
    return row;
}
