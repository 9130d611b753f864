/* Who may reach the server and what they may do (docs/security.md): the loopback rule,
 * password logins, sessions and API tokens (auth*.c), the checks every request passes
 * before its handler (security.c: host, cross-site requests, login, admin, whose job),
 * the reading rule the home lists and streams filter with, and security headers.
 * Included by internal.h. */
#ifndef CDIGITS_SERVER_SECURITY_H
#define CDIGITS_SERVER_SECURITY_H

#include <stddef.h>

enum auth_via {
    AUTH_ANON = 0,        /* nobody: no credential */
    AUTH_USERNAME_COOKIE, /* DIGITS's username cookie (--auth none) */
    AUTH_SESSION,         /* a password login's session cookie */
    AUTH_TOKEN,           /* Authorization: Bearer <API token> */
};

#define AUTH_SESSION_COOKIE "cdigits_session"
#define AUTH_CSRF_COOKIE "cdigits_csrf"
#define AUTH_CSRF_HEADER "X-CSRF-Token"
#define AUTH_TOKEN_PREFIX "cdt_"

/* The login throttle: a leaky bucket per user name and per client address; each failed
 * login adds one, --login-attempts drain away per minute, a full bucket waits. */
#define AUTH_THROTTLE_SLOTS 1024
#define AUTH_THROTTLE_KEY 96
typedef struct auth_throttle_slot {
    char key[AUTH_THROTTLE_KEY]; /* "user:NAME" or "addr:ADDRESS"; "" when free */
    double level;  /* failures not yet drained at time t */
    double t;
} auth_throttle_slot_t;

struct security {
    pthread_mutex_t lock;
    auth_throttle_slot_t slots[AUTH_THROTTLE_SLOTS];
    pthread_cond_t hash_cond; /* password hashes at once are bounded (64 MiB each) */
    int hashing;
    double next_purge;        /* when expired sessions are removed next */
};

/* 127.0.0.0/8 or "localhost". */
int server_bind_is_loopback(const char *bind);

/* ---- security.c -------------------------------------------------------------------- */

/* At start (the store is open): the login throttle, the administrator from
 * --admin-password-file, and the refusal of a password server nobody can log in to;
 * also hands --worker-timeout to the scheduler. CD_ERR with the reason. */
int security_init(server_t *srv, cd_err_t *err);
void security_free(server_t *srv);
/* As soon as the headers are in, before any body is read: the Host header and
 * cross-site origins of state-changing requests. CD_ERR after a reply. */
int security_check_early(req_t *r);
/* Before the handler (fields decoded): who is asking, the CSRF rule for cookies,
 * login, admin, and whether the jobs a request names may be read. CD_ERR after a reply. */
int security_check_request(req_t *r);
/* Headers every response carries (CSP, nosniff, frame refusal, referrer policy). */
void security_headers(const req_t *r, struct MHD_Response *resp);
/* Whether the asker may change (abort, delete, edit, resume) / read this job. The
 * reading rule (--job-visibility): with all, everyone reads every job, as DIGITS; with
 * own, a user reads their own jobs and those nobody owns, an administrator every job.
 * Every list, stream and route that shows a job asks security_may_read. */
int security_may_edit(const req_t *r, json_t *job);
int security_may_read(const req_t *r, json_t *job);
/* 1 when security_may_read holds for every job this asker could name (--job-visibility
 * all, or an administrator): a list need not look at owners. */
int security_reads_all(const req_t *r);
/* The client's address as text ("" when unknown). */
void security_peer(const req_t *r, char *out, size_t len);

/* ---- auth.c: secrets and the login throttle ----------------------------------------- */

/* n random bytes from libsodium or /dev/urandom: CD_OK, or CD_ERR (logged) when the
 * kernel gave fewer. */
int auth_random_bytes(unsigned char *buf, size_t n);
/* n random bytes as 2n hex digits into out (2n + 1 bytes). */
void auth_random_hex(char *out, size_t nbytes);
/* The hex BLAKE2b-256 of a secret (session id, token): what the store keeps. out: 65 bytes. */
void auth_secret_hash(const char *secret, char *out);
/* An argon2id hash of password in out (crypto_pwhash_STRBYTES). CD_ERR with a message. */
int auth_password_hash(server_t *srv, const char *password, char *out, size_t outlen, cd_err_t *err);
/* 1 when password matches the stored hash (a NULL hash still costs one hash's time). */
int auth_password_verify(server_t *srv, const char *stored_hash, const char *password);
/* The login throttle: seconds to wait before another attempt for this user or this
 * address (0: go ahead), and the record of a failure or a success. */
double auth_throttle_wait(server_t *srv, const char *user, const char *peer);
void auth_throttle_fail(server_t *srv, const char *user, const char *peer);
void auth_throttle_ok(server_t *srv, const char *user);
/* A problem with a password (length), or NULL. */
const char *auth_password_problem(const char *password);
/* DIGITS's username rule; NULL when valid, else the message. */
const char *auth_username_problem(const char *u);

/* handlers: login (api_auth.c), API tokens (auth_tokens.c), users (auth_users.c) */
void h_tokens_list(req_t *r);
void h_token_create(req_t *r);
void h_token_revoke(req_t *r);
void h_users_list(req_t *r);
void h_user_create(req_t *r);
void h_user_delete(req_t *r);
void h_user_password(req_t *r);

#endif
