/* Secrets of --auth password: argon2id password hashes (libsodium's crypto_pwhash at
 * its interactive limits), random session ids, CSRF tokens and API tokens, the hashes
 * the store keeps of them, and the throttle on failed logins. */
#include "internal.h"

#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifdef CDIGITS_HAVE_SODIUM
#include <sodium.h>
#endif

#include "cdigits/util.h"

#define AUTH_MAX_HASHING 2 /* argon2id at the interactive limit holds 64 MiB while it runs */

int auth_random_bytes(unsigned char *buf, size_t n)
{
#ifdef CDIGITS_HAVE_SODIUM
    if (sodium_init() >= 0) {
        randombytes_buf(buf, n);
        return CD_OK;
    }
#endif
    /* without libsodium there are no passwords; ids still come from the kernel */
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    size_t got = 0;
    while (fd >= 0 && got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    if (got < n) {
        cd_error("auth: /dev/urandom gave %zu of %zu bytes", got, n);
        return CD_ERR;
    }
    return CD_OK;
}

void auth_random_hex(char *out, size_t nbytes)
{
    unsigned char buf[64];
    if (nbytes > sizeof buf)
        nbytes = sizeof buf;
    if (auth_random_bytes(buf, nbytes) != CD_OK) {
        cd_error("auth: refusing to make a weak secret");
        memset(buf, 0, nbytes); /* a zero secret matches nothing the store holds as a hash of random data */
    }
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < nbytes; i++) {
        out[2 * i] = hex[buf[i] >> 4];
        out[2 * i + 1] = hex[buf[i] & 15];
    }
    out[2 * nbytes] = 0;
}

void auth_secret_hash(const char *secret, char *out)
{
    unsigned char h[32];
#ifdef CDIGITS_HAVE_SODIUM
    crypto_generichash(h, sizeof h, (const unsigned char *)secret, strlen(secret), NULL, 0);
#else
    /* FNV-1a stretched to 32 bytes: only reached without libsodium, where nothing is
     * stored but username logins */
    uint64_t x = 1469598103934665603ULL;
    for (size_t i = 0; i < sizeof h; i++) {
        for (const char *p = secret; *p; p++)
            x = (x ^ (unsigned char)*p) * 1099511628211ULL;
        x ^= i;
        h[i] = (unsigned char)(x >> 24);
    }
#endif
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof h; i++) {
        out[2 * i] = hex[h[i] >> 4];
        out[2 * i + 1] = hex[h[i] & 15];
    }
    out[64] = 0;
}

/* Waits for a hashing slot: at most AUTH_MAX_HASHING argon2 runs at once. */
static void hashing_enter(server_t *srv)
{
    struct security *sec = srv ? srv->sec : NULL;
    if (!sec)
        return;
    pthread_mutex_lock(&sec->lock);
    while (sec->hashing >= AUTH_MAX_HASHING)
        pthread_cond_wait(&sec->hash_cond, &sec->lock);
    sec->hashing++;
    pthread_mutex_unlock(&sec->lock);
}

static void hashing_leave(server_t *srv)
{
    struct security *sec = srv ? srv->sec : NULL;
    if (!sec)
        return;
    pthread_mutex_lock(&sec->lock);
    sec->hashing--;
    pthread_cond_signal(&sec->hash_cond);
    pthread_mutex_unlock(&sec->lock);
}

const char *auth_password_problem(const char *password)
{
    if (!password || !*password)
        return "password is required";
    size_t n = strlen(password);
    if (n < 8)
        return "A password has at least 8 characters";
    if (n > 1024)
        return "A password has at most 1024 characters";
    return NULL;
}

const char *auth_username_problem(const char *u)
{
    if (!u || !*u)
        return "username is required: send username=<name>";
    if (!islower((unsigned char)u[0]))
        return "Must start with a lowercase letter";
    for (const char *p = u; *p; p++)
        if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return "Only lowercase letters, numbers, periods, dashes and underscores allowed";
    if (strlen(u) > 63)
        return "A username has at most 63 characters";
    return NULL;
}

#ifdef CDIGITS_HAVE_SODIUM
/* The hash an unknown user's password is checked against: a login for a name that does
 * not exist costs what a wrong password costs, so timing does not tell them apart. */
static char g_dummy_hash[crypto_pwhash_STRBYTES];
static pthread_once_t g_dummy_once = PTHREAD_ONCE_INIT;

static void make_dummy_hash(void)
{
    char pw[33];
    auth_random_hex(pw, 16);
    if (crypto_pwhash_str(g_dummy_hash, pw, strlen(pw), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                          crypto_pwhash_MEMLIMIT_INTERACTIVE) != 0)
        g_dummy_hash[0] = 0;
}
#endif

int auth_password_hash(server_t *srv, const char *password, char *out, size_t outlen, cd_err_t *err)
{
#ifdef CDIGITS_HAVE_SODIUM
    if (sodium_init() < 0)
        return cd_err_set(err, CD_E_INTERNAL, "libsodium could not start");
    if (outlen < crypto_pwhash_STRBYTES)
        return cd_err_set(err, CD_E_INTERNAL, "password hash buffer too small");
    hashing_enter(srv);
    int rc = crypto_pwhash_str(out, password, strlen(password), crypto_pwhash_OPSLIMIT_INTERACTIVE,
                               crypto_pwhash_MEMLIMIT_INTERACTIVE);
    hashing_leave(srv);
    if (rc != 0)
        return cd_err_set(err, CD_E_INTERNAL, "out of memory hashing the password (argon2id needs 64 MiB)");
    return CD_OK;
#else
    (void)srv;
    (void)password;
    (void)out;
    (void)outlen;
    return cd_err_set(err, CD_E_INTERNAL, "this cdigits was built without libsodium: no passwords");
#endif
}

int auth_password_verify(server_t *srv, const char *stored_hash, const char *password)
{
#ifdef CDIGITS_HAVE_SODIUM
    if (sodium_init() < 0)
        return 0;
    int ok = 0;
    hashing_enter(srv);
    if (!stored_hash || !*stored_hash) {
        pthread_once(&g_dummy_once, make_dummy_hash);
        if (g_dummy_hash[0] && crypto_pwhash_str_verify(g_dummy_hash, password, strlen(password)) == 0)
            cd_debug("auth: a random password matched; nothing follows from it");
    } else {
        ok = crypto_pwhash_str_verify(stored_hash, password, strlen(password)) == 0;
    }
    hashing_leave(srv);
    return ok;
#else
    (void)srv;
    (void)stored_hash;
    (void)password;
    return 0;
#endif
}

/* ---- the throttle ------------------------------------------------------------------------ */

/* The slot of key (a free or the most drained one when absent and create is set). */
static auth_throttle_slot_t *slot_for(struct security *sec, const char *key, double now, double rate, int create)
{
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = key; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    auth_throttle_slot_t *best = NULL;
    double best_level = 1e300;
    for (int probe = 0; probe < 16; probe++) {
        auth_throttle_slot_t *s = &sec->slots[(h + (uint64_t)probe) % AUTH_THROTTLE_SLOTS];
        if (strcmp(s->key, key) == 0)
            return s;
        double level = s->key[0] ? s->level - rate * (now - s->t) : -1;
        if (level < best_level) {
            best_level = level;
            best = s;
        }
    }
    if (!create)
        return NULL;
    snprintf(best->key, sizeof best->key, "%s", key);
    best->level = 0;
    best->t = now;
    return best;
}

/* The buckets a login attempt fills: its user name's and its client address's. */
static void throttle_keys(const char *user, const char *peer, char key[2][AUTH_THROTTLE_KEY])
{
    snprintf(key[0], sizeof key[0], "user:%s", user ? user : "");
    snprintf(key[1], sizeof key[1], "addr:%s", peer ? peer : "");
}

static double drained(const auth_throttle_slot_t *s, double now, double rate)
{
    double level = s->level - rate * (now - s->t);
    return level > 0 ? level : 0;
}

double auth_throttle_wait(server_t *srv, const char *user, const char *peer)
{
    struct security *sec = srv->sec;
    if (!sec)
        return 0;
    double cap = srv->cfg.login_attempts, rate = cap / 60.0, now = cd_now(), wait = 0;
    char key[2][AUTH_THROTTLE_KEY];
    throttle_keys(user, peer, key);
    pthread_mutex_lock(&sec->lock);
    for (int k = 0; k < 2; k++) {
        auth_throttle_slot_t *s = slot_for(sec, key[k], now, rate, 0);
        if (!s)
            continue;
        double level = drained(s, now, rate);
        if (level > cap - 1) { /* one more failure would overflow: wait until it would not */
            double w = (level - cap + 1) / rate;
            if (w > wait)
                wait = w;
        }
    }
    pthread_mutex_unlock(&sec->lock);
    return wait;
}

void auth_throttle_fail(server_t *srv, const char *user, const char *peer)
{
    struct security *sec = srv->sec;
    if (!sec)
        return;
    double rate = srv->cfg.login_attempts / 60.0, now = cd_now();
    char key[2][AUTH_THROTTLE_KEY];
    throttle_keys(user, peer, key);
    pthread_mutex_lock(&sec->lock);
    for (int k = 0; k < 2; k++) {
        auth_throttle_slot_t *s = slot_for(sec, key[k], now, rate, 1);
        s->level = drained(s, now, rate) + 1;
        s->t = now;
    }
    pthread_mutex_unlock(&sec->lock);
}

void auth_throttle_ok(server_t *srv, const char *user)
{
    struct security *sec = srv->sec;
    if (!sec)
        return;
    char key[2][AUTH_THROTTLE_KEY];
    throttle_keys(user, NULL, key);
    pthread_mutex_lock(&sec->lock);
    auth_throttle_slot_t *s = slot_for(sec, key[0], cd_now(), 0, 0);
    if (s)
        s->key[0] = 0;
    pthread_mutex_unlock(&sec->lock);
}
