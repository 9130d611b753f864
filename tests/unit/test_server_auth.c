/* Authentication without HTTP: the loopback rule of the options, users, sessions and
 * tokens in the store (expiry, revocation, who may revoke, cascades), argon2id hashes,
 * the secrets, the login throttle, and who may read or change a job. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/server/internal.h"
#include "serve_args.h"
#include "testutil.h"

static void test_exposure(void)
{
    static const char *const vars[] = {"CDIGITS_BIND", "CDIGITS_AUTH", "CDIGITS_JOB_VISIBILITY",
                                       "CDIGITS_WORKER_TIMEOUT", "CDIGITS_SESSION_TTL"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    cd_server_config_t cfg;
    cd_err_t err = {0};
    CHECK(serve_parse(&cfg, &err, NULL, NULL, NULL, NULL) == CD_OK && !cfg.auth_password && !cfg.visibility_own &&
              cfg.worker_timeout == 0,
          "defaults: %s", err.msg);
    /* any address off loopback, chosen at random, is refused without passwords */
    char addr[32];
    snprintf(addr, sizeof addr, "10.%u.%u.%u", (unsigned)(cd_test_rand_u64() % 256),
             (unsigned)(cd_test_rand_u64() % 256), (unsigned)(cd_test_rand_u64() % 254 + 1));
    const char *binds[] = {"0.0.0.0", addr, "192.168.1.7"};
    for (int i = 0; i < 3; i++) {
        err.msg[0] = 0;
        CHECK(serve_parse(&cfg, &err, "--bind", binds[i], NULL, NULL) == CD_ERR, "--bind %s without auth is refused",
              binds[i]);
        CHECK(strstr(err.msg, "--auth password") && strstr(err.msg, "--admin-password-file") &&
                  strstr(err.msg, binds[i]),
              "the refusal says how to turn authentication on: %s", err.msg);
        CHECK(serve_parse(&cfg, &err, "--bind", binds[i], "--auth", "password") == CD_OK && cfg.auth_password,
              "--bind %s --auth password: %s", binds[i], err.msg);
    }
    char lo[32];
    snprintf(lo, sizeof lo, "127.%u.0.%u", (unsigned)(cd_test_rand_u64() % 256),
             (unsigned)(cd_test_rand_u64() % 254 + 1));
    CHECK(serve_parse(&cfg, &err, "--bind", lo, NULL, NULL) == CD_OK, "all of 127/8 is loopback (%s): %s", lo, err.msg);
    setenv("CDIGITS_BIND", "0.0.0.0", 1);
    CHECK(serve_parse(&cfg, &err, NULL, NULL, NULL, NULL) == CD_ERR, "CDIGITS_BIND=0.0.0.0 alone is refused too");
    setenv("CDIGITS_AUTH", "password", 1);
    CHECK(serve_parse(&cfg, &err, NULL, NULL, NULL, NULL) == CD_OK, "CDIGITS_AUTH=password: %s", err.msg);
    unsetenv("CDIGITS_BIND");
    unsetenv("CDIGITS_AUTH");
    CHECK(serve_parse(&cfg, &err, "--auth", "kerberos", NULL, NULL) == CD_ERR && strstr(err.msg, "none"),
          "an unknown --auth names the choices: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "--job-visibility", "some", NULL, NULL) == CD_ERR && strstr(err.msg, "own"),
          "an unknown --job-visibility names the choices: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "--job-visibility", "own", "--worker-timeout", "2.5") == CD_OK && cfg.visibility_own &&
              cfg.worker_timeout == 2.5,
          "--job-visibility own --worker-timeout 2.5: %s", err.msg);
    CHECK(serve_parse(&cfg, &err, "--session-ttl", "5", NULL, NULL) == CD_ERR, "a session shorter than a minute");
}

static store_t *open_store(void)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/auth.db", cd_test_tmpdir());
    store_t *s = NULL;
    cd_err_t err = {0};
    CHECK(store_open(path, &s, &err) == CD_OK, "store_open: %s", err.msg);
    return s;
}

static void test_store(store_t *s)
{
    cd_err_t err = {0};
    double now = cd_wall_time();
    CHECK(store_user_count_passwords(s) == 0, "no passwords in a new store");
    /* a name first seen at a username login takes a password later */
    CHECK(store_user_login(s, "fred", &err) == CD_OK, "username login: %s", err.msg);
    CHECK(store_user_create(s, "fred", "$argon2id$fake-fred", 0, &err) == CD_OK, "fred gets a password: %s",
          err.msg);
    CHECK(store_user_create(s, "fred", "$argon2id$other", 1, &err) == CD_ERR && err.kind == CD_E_CONFLICT,
          "a second create of fred is a conflict: %s", err.msg);
    CHECK(store_user_create(s, "root", "$argon2id$fake-root", 1, &err) == CD_OK, "admin: %s", err.msg);
    json_t *u = store_user_get(s, "fred");
    CHECK(u && !json_is_true(json_object_get(u, "is_admin")) &&
              !strcmp(json_string_value(json_object_get(u, "password_hash")), "$argon2id$fake-fred"),
          "fred's row keeps the first hash and is no admin");
    json_decref(u);
    json_t *list = store_user_list(s);
    CHECK(json_array_size(list) == 2 && !json_object_get(json_array_get(list, 0), "password_hash"),
          "the user list never holds hashes");
    json_decref(list);
    CHECK(store_user_count_passwords(s) == 2, "two users with passwords");

    /* sessions: found until they expire; random ids */
    char sid[65], h1[65], h2[65], csrf[65];
    auth_random_hex(sid, 32);
    auth_random_hex(csrf, 32);
    auth_secret_hash(sid, h1);
    CHECK(store_session_add(s, h1, "fred", csrf, now, now + 100, &err) == CD_OK, "session: %s", err.msg);
    auth_random_hex(sid, 32);
    auth_secret_hash(sid, h2);
    CHECK(store_session_add(s, h2, "fred", csrf, now - 200, now - 100, &err) == CD_OK, "old session: %s", err.msg);
    json_t *row = store_session_get(s, h1, now);
    CHECK(row && !strcmp(json_string_value(json_object_get(row, "username")), "fred") &&
              !strcmp(json_string_value(json_object_get(row, "csrf")), csrf),
          "a live session names its user and CSRF token");
    json_decref(row);
    CHECK(store_session_get(s, h2, now) == NULL, "an expired session is not found");
    CHECK(store_session_get(s, h1, now + 101) == NULL, "a session is not found after its expiry");
    CHECK(store_session_purge(s, now, &err) == CD_OK, "purge");
    CHECK(store_session_get(s, h2, now - 150) == NULL, "purge removed the expired session");

    /* tokens: found by hash, revoked only by their owner (or with NULL, an admin) */
    char tok[80], th[65];
    snprintf(tok, sizeof tok, "cdt_");
    auth_random_hex(tok + 4, 32);
    auth_secret_hash(tok, th);
    long long id = 0;
    CHECK(store_token_add(s, "fred", "nightly", th, "cdt_12345678", now, 0, &id, &err) == CD_OK && id > 0,
          "token: %s", err.msg);
    row = store_token_find(s, th, now);
    CHECK(row && !strcmp(json_string_value(json_object_get(row, "username")), "fred"), "the token finds fred");
    json_decref(row);
    char wrong[65];
    tok[10] ^= 1;
    auth_secret_hash(tok, wrong);
    CHECK(store_token_find(s, wrong, now) == NULL, "a token one character off finds nobody");
    list = store_token_list(s, "fred");
    CHECK(json_array_size(list) == 1 && !json_object_get(json_array_get(list, 0), "hash"),
          "the token list holds no hashes");
    json_decref(list);
    CHECK(store_token_delete(s, id, "root", &err) == CD_ERR && err.kind == CD_E_NOTFOUND,
          "another user cannot revoke fred's token");
    CHECK(store_token_delete(s, id, "fred", &err) == CD_OK, "fred revokes it: %s", err.msg);
    CHECK(store_token_find(s, th, now) == NULL, "a revoked token finds nobody");
    CHECK(store_token_add(s, "fred", "short", th, "cdt_12345678", now - 10, now - 1, &id, &err) == CD_OK,
          "expiring token: %s", err.msg);
    CHECK(store_token_find(s, th, now) == NULL, "an expired token finds nobody");

    /* deleting a user ends their sessions and tokens */
    CHECK(store_user_delete(s, "fred", &err) == CD_OK, "delete fred: %s", err.msg);
    CHECK(store_session_get(s, h1, now) == NULL, "fred's session went with him");
    CHECK(store_user_delete(s, "fred", &err) == CD_ERR && err.kind == CD_E_NOTFOUND, "twice: not found");
}

static void test_secrets(server_t *srv)
{
    char a[65], b[65], ha[65], hb[65];
    auth_random_hex(a, 32);
    auth_random_hex(b, 32);
    CHECK(strlen(a) == 64 && strcmp(a, b) != 0, "random ids are 64 hex digits and differ");
    auth_secret_hash(a, ha);
    auth_secret_hash(a, hb);
    CHECK(!strcmp(ha, hb) && strcmp(ha, a) != 0, "the stored hash is a function of the secret, not the secret");
#ifdef CDIGITS_HAVE_SODIUM
    char pw[40], hash[256];
    auth_random_hex(pw, 12);
    cd_err_t err = {0};
    CHECK(auth_password_hash(srv, pw, hash, sizeof hash, &err) == CD_OK && !strncmp(hash, "$argon2id$", 10),
          "an argon2id hash: %s", err.msg);
    CHECK(auth_password_verify(srv, hash, pw), "the password verifies");
    pw[3] ^= 1;
    CHECK(!auth_password_verify(srv, hash, pw), "a changed password does not");
    CHECK(!auth_password_verify(srv, NULL, pw), "no hash (an unknown user) never verifies");
#else
    (void)srv;
    cd_test_cannot("password hashes: built without libsodium (apt-get install libsodium-dev)");
#endif
    CHECK(auth_password_problem("short") != NULL && auth_password_problem("long enough") == NULL,
          "passwords have at least 8 characters");
    CHECK(auth_username_problem("Fred") && auth_username_problem("a/b") && !auth_username_problem("fred.b-2"),
          "DIGITS's username rule");
}

static void test_throttle(server_t *srv)
{
    /* 60 a minute drains one a second; the 61st failure in a row must wait */
    srv->cfg.login_attempts = 60;
    char user[32], peer[32];
    snprintf(user, sizeof user, "u%llu", (unsigned long long)(cd_test_rand_u64() % 100000));
    snprintf(peer, sizeof peer, "10.0.0.%u", (unsigned)(cd_test_rand_u64() % 250 + 1));
    CHECK(auth_throttle_wait(srv, user, peer) == 0, "no wait before any failure");
    for (int i = 0; i < 59; i++)
        auth_throttle_fail(srv, user, peer);
    CHECK(auth_throttle_wait(srv, user, peer) == 0, "59 failures in a minute are allowed");
    auth_throttle_fail(srv, user, peer);
    double w = auth_throttle_wait(srv, user, peer);
    CHECK(w > 0 && w <= 1.5, "the 60th failure means a wait of about a second (%g)", w);
    CHECK(auth_throttle_wait(srv, "someone-else", peer) > 0, "the address is throttled for every name");
    CHECK(auth_throttle_wait(srv, user, "10.9.9.9") > 0, "the name is throttled from every address");
    CHECK(auth_throttle_wait(srv, "someone-else", "10.9.9.9") == 0, "others are not");
    usleep(1300 * 1000);
    CHECK(auth_throttle_wait(srv, user, "10.9.9.9") == 0, "the bucket drains with time");
    auth_throttle_ok(srv, user);
}

/* A password server nobody could log in to refuses to start; --admin-password-file
 * makes the administrator once and is not applied again. */
static void test_bootstrap(void)
{
    char dir[4200], db[4300], pwfile[4300];
    snprintf(dir, sizeof dir, "%s", cd_test_tmpdir());
    snprintf(db, sizeof db, "%s/boot.db", dir);
    snprintf(pwfile, sizeof pwfile, "%s/pw", dir);
    server_t *srv = calloc(1, sizeof *srv);
    cd_err_t err = {0};
    char *argv[] = {"serve", "--auth", "password", NULL};
    CHECK(server_config_parse(&srv->cfg, 3, argv, &err) == CD_OK, "config: %s", err.msg);
    CHECK(store_open(db, &srv->store, &err) == CD_OK, "store: %s", err.msg);
    CHECK(security_init(srv, &err) == CD_ERR && strstr(err.msg, "--admin-password-file"),
          "no user with a password: refused with the way out: %s", err.msg);
    security_free(srv);
#ifdef CDIGITS_HAVE_SODIUM
    char pw[40];
    auth_random_hex(pw, 10);
    FILE *f = fopen(pwfile, "w");
    fprintf(f, "%s\n", pw);
    fclose(f);
    snprintf(srv->cfg.admin_password_file, sizeof srv->cfg.admin_password_file, "%s", pwfile);
    CHECK(security_init(srv, &err) == CD_OK, "with --admin-password-file: %s", err.msg);
    json_t *u = store_user_get(srv->store, "admin");
    CHECK(u && json_is_true(json_object_get(u, "is_admin")) &&
              auth_password_verify(srv, json_string_value(json_object_get(u, "password_hash")), pw),
          "the administrator has the file's password");
    json_decref(u);
    security_free(srv);
    f = fopen(pwfile, "w");
    fprintf(f, "another-password\n");
    fclose(f);
    CHECK(security_init(srv, &err) == CD_OK, "second start: %s", err.msg);
    u = store_user_get(srv->store, "admin");
    CHECK(u && auth_password_verify(srv, json_string_value(json_object_get(u, "password_hash")), pw),
          "a second start keeps the password the administrator has");
    json_decref(u);
    security_free(srv);
    f = fopen(pwfile, "w");
    fprintf(f, "short\n");
    fclose(f);
    snprintf(srv->cfg.admin_user, sizeof srv->cfg.admin_user, "boss");
    CHECK(security_init(srv, &err) == CD_ERR && strstr(err.msg, "8 characters"), "a short password: %s", err.msg);
    security_free(srv);
#endif
    store_close(srv->store);
    free(srv);
}

static void test_ownership(server_t *srv)
{
    req_t r;
    memset(&r, 0, sizeof r);
    r.srv = srv;
    json_t *mine = json_pack("{s:s}", "username", "fred"), *theirs = json_pack("{s:s}", "username", "ann"),
           *nobody = json_pack("{s:n}", "username");
    srv->cfg.auth_password = 0;
    srv->cfg.visibility_own = 0;
    CHECK(!security_may_edit(&r, mine), "nobody logged in changes nothing");
    snprintf(r.username, sizeof r.username, "fred");
    CHECK(security_may_edit(&r, mine) && !security_may_edit(&r, theirs), "fred changes his jobs, not ann's");
    CHECK(security_may_edit(&r, nobody), "without passwords a job nobody owns is anyone's");
    CHECK(security_may_read(&r, theirs), "everyone reads every job by default");
    srv->cfg.auth_password = 1;
    CHECK(!security_may_edit(&r, nobody), "with passwords a job nobody owns is the admins'");
    srv->cfg.visibility_own = 1;
    CHECK(security_may_read(&r, mine) && !security_may_read(&r, theirs) && security_may_read(&r, nobody),
          "--job-visibility own: fred reads his jobs and unowned ones only");
    r.is_admin = 1;
    CHECK(security_may_edit(&r, theirs) && security_may_read(&r, theirs) && security_may_edit(&r, nobody),
          "an admin reads and changes every job");
    json_decref(mine);
    json_decref(theirs);
    json_decref(nobody);
}

int main(void)
{
    cd_test_init("test_server_auth");
    test_exposure();
    test_bootstrap();
    server_t *srv = calloc(1, sizeof *srv);
    cd_err_t err = {0};
    char *argv[] = {"serve", NULL};
    CHECK(server_config_parse(&srv->cfg, 1, argv, &err) == CD_OK, "config: %s", err.msg);
    srv->store = open_store();
    CHECK(security_init(srv, &err) == CD_OK, "security_init without passwords: %s", err.msg);
    if (srv->store) {
        test_store(srv->store);
        test_secrets(srv);
        test_throttle(srv);
        test_ownership(srv);
    }
    security_free(srv);
    store_close(srv->store);
    free(srv);
    return cd_test_finish();
}
