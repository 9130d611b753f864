/* Request decoding and validation: urlencoded and JSON bodies into fields, form
 * tables (required, ranges, choices, conditions), path roots with symlinks and "..",
 * and the SSE hub across threads. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/server/internal.h"
#include "testutil.h"

static void test_urlencoded(void)
{
    fields_t *f = fields_new();
    const char body[] = "a=1&b=hello+world&c=%2Fpath%2fx&job_ids[]=x&job_ids[]=y&empty=&flag";
    CHECK(fields_parse_urlencoded(f, body, strlen(body)) == CD_OK, "parse");
    CHECK(!strcmp(fields_get(f, "b"), "hello world"), "+ is a space");
    CHECK(!strcmp(fields_get(f, "c"), "/path/x"), "%%XX decoded: %s", fields_get(f, "c"));
    const char *ids[4];
    CHECK(fields_get_all(f, "job_ids", ids, 4) == 2 && !strcmp(ids[1], "y"), "job_ids[] read as job_ids");
    CHECK(fields_get(f, "empty") && !fields_get(f, "empty")[0], "empty value");
    CHECK(fields_get(f, "flag") != NULL, "a name without =");
    CHECK(fields_get(f, "nope") == NULL, "absent");
    fields_t *g = fields_new();
    CHECK(fields_parse_urlencoded(g, "a=%zz", 5) == CD_ERR, "a bad escape is refused");
    CHECK(fields_parse_urlencoded(g, "a=%2", 4) == CD_ERR, "a cut escape is refused");
    fields_free(g);
    /* random bytes encoded then decoded come back */
    for (int round = 0; round < 100; round++) {
        unsigned char raw[64];
        size_t n = 1 + cd_test_rand_u64() % 63;
        char enc[256] = "k=";
        size_t e = 2;
        for (size_t i = 0; i < n; i++) {
            raw[i] = (unsigned char)(1 + cd_test_rand_u64() % 255);
            e += (size_t)snprintf(enc + e, sizeof enc - e, "%%%02X", raw[i]);
        }
        fields_t *h = fields_new();
        CHECK(fields_parse_urlencoded(h, enc, e) == CD_OK, "parse random");
        const field_t *x = fields_find(h, "k");
        CHECK(x && x->len == n && memcmp(x->value, raw, n) == 0, "random bytes round-trip");
        fields_free(h);
    }
    json_t *j = fields_to_json(f);
    CHECK(json_is_array(json_object_get(j, "job_ids")) && json_array_size(json_object_get(j, "job_ids")) == 2,
          "repeated names become a list");
    json_decref(j);
    fields_free(f);
}

static void test_json(void)
{
    char err[256];
    fields_t *f = fields_new();
    json_t *o = json_loads("{\"s\": \"x\", \"i\": 3, \"r\": 0.5, \"t\": true, \"n\": null, \"l\": [1, \"a\"]}", 0, NULL);
    CHECK(fields_from_json(f, o, err, sizeof err) == CD_OK, "json: %s", err);
    CHECK(!strcmp(fields_get(f, "i"), "3") && !strcmp(fields_get(f, "t"), "true"), "scalars as text");
    CHECK(fields_get(f, "n") == NULL, "null is absent");
    const char *l[4];
    CHECK(fields_get_all(f, "l", l, 4) == 2, "a list is repeated fields");
    json_decref(o);
    o = json_loads("{\"a\": {\"b\": 1}}", 0, NULL);
    CHECK(fields_from_json(f, o, err, sizeof err) == CD_ERR, "nested objects are refused");
    json_decref(o);
    o = json_loads("[1, 2]", 0, NULL);
    CHECK(fields_from_json(f, o, err, sizeof err) == CD_ERR, "a top-level list is refused");
    json_decref(o);
    fields_free(f);
    CHECK(!field_truthy(NULL) && !field_truthy("") && !field_truthy("false") && !field_truthy("0") &&
              !field_truthy("off") && field_truthy("on") && field_truthy("1") && field_truthy("true") &&
              field_truthy("y"),
          "checkbox truthiness");
}

static server_t g_srv;

static void test_paths(void)
{
    const char *tmp = cd_test_tmpdir();
    char root[PATH_MAX], out[PATH_MAX], msg[1024], p[PATH_MAX + 64], link[PATH_MAX + 64];
    snprintf(root, sizeof root, "%s/root", tmp);
    snprintf(p, sizeof p, "%s/root/cls", tmp);
    cd_mkdirs(p, 0755);
    snprintf(p, sizeof p, "%s/outside", tmp);
    cd_mkdirs(p, 0755);
    snprintf(p, sizeof p, "%s/root2", tmp);
    cd_mkdirs(p, 0755);
    snprintf(link, sizeof link, "%s/root/escape", tmp);
    snprintf(p, sizeof p, "%s/outside", tmp);
    CHECK(symlink(p, link) == 0, "symlink");
    memset(&g_srv, 0, sizeof g_srv);
    CHECK(realpath(root, g_srv.roots[0]) != NULL, "realpath root");
    g_srv.nroots = 1;
    snprintf(g_srv.roots_text, sizeof g_srv.roots_text, "%s", g_srv.roots[0]);
    snprintf(g_srv.jobs_dir, sizeof g_srv.jobs_dir, "%s/jobs", tmp);
    snprintf(p, sizeof p, "%s/root/cls", tmp);
    CHECK(paths_check_field(&g_srv, p, 1, 0, out, sizeof out, msg, sizeof msg) == CD_OK, "a folder inside: %s", msg);
    CHECK(paths_check_field(&g_srv, link, 1, 0, out, sizeof out, msg, sizeof msg) == CD_ERR && strstr(msg, "outside"),
          "a symlink out is refused: %s", msg);
    snprintf(p, sizeof p, "%s/root/../outside", tmp);
    CHECK(paths_check_field(&g_srv, p, 1, 0, out, sizeof out, msg, sizeof msg) == CD_ERR, ".. out is refused");
    snprintf(p, sizeof p, "%s/root2", tmp);
    CHECK(paths_check_field(&g_srv, p, 1, 0, out, sizeof out, msg, sizeof msg) == CD_ERR,
          "a sibling with the root's name as a prefix is outside: %s", msg);
    CHECK(paths_check_field(&g_srv, "relative/x", 1, 0, out, sizeof out, msg, sizeof msg) == CD_ERR &&
              strstr(msg, "absolute"),
          "relative paths are refused");
    snprintf(p, sizeof p, "%s/root/missing", tmp);
    CHECK(paths_check_field(&g_srv, p, 1, 0, out, sizeof out, msg, sizeof msg) == CD_ERR && strstr(msg, "does not exist"),
          "a missing folder says so");
    CHECK(paths_inside("/a/b", "/a") && paths_inside("/a", "/a") && !paths_inside("/ab", "/a") &&
              paths_inside("/x", "/"),
          "paths_inside boundaries");
    CHECK(paths_resolve_under(g_srv.roots[0], "../outside", out, sizeof out) == CD_ERR, "resolve_under refuses ..");
    CHECK(paths_resolve_under(g_srv.roots[0], "escape/x", out, sizeof out) == CD_ERR, "resolve_under refuses a symlink out");
}

static const form_field_t g_form[] = {
    {"name", F_STRING, NULL, NAN, NAN, NULL, NULL, 1, "Name"},
    {"method", F_CHOICE, "a", NAN, NAN, "a|b", NULL, 1, "Method"},
    {"n", F_INT, "5", 1, 10, NULL, NULL, 1, "N"},
    {"x", F_FLOAT, NULL, 0, NAN, NULL, "method=b", 1, "X"},
    {"on", F_BOOL, "false", NAN, NAN, NULL, NULL, 0, "On"},
    {"y", F_INT, NULL, NAN, NAN, NULL, "method=b&on=1", 1, "Y"},
    {"lr", F_FLOATS, "0.01", 0, NAN, NULL, NULL, 1, "LR"},
    {"dir", F_DIR, NULL, NAN, NAN, NULL, NULL, 0, "Dir"},
};

static int validate(const char *body, json_t **v, json_t **e)
{
    fields_t *f = fields_new();
    fields_parse_urlencoded(f, body, strlen(body));
    int ok = form_validate(&g_srv, g_form, sizeof g_form / sizeof g_form[0], f, v, e);
    fields_free(f);
    return ok;
}

static void test_forms(void)
{
    json_t *v, *e;
    CHECK(validate("name=a", &v, &e), "defaults fill the rest");
    CHECK(json_integer_value(json_object_get(v, "n")) == 5, "default n");
    CHECK(json_array_size(json_object_get(v, "lr")) == 1, "default list");
    CHECK(!json_object_get(v, "x"), "x is not validated when method=a");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("n=11&method=c&dir=/nonexistent", &v, &e), "errors");
    CHECK(json_object_get(e, "name") && json_object_get(e, "n") && json_object_get(e, "method") &&
              json_object_get(e, "dir"),
          "every bad field is named");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("name=a&method=b", &v, &e) && json_object_get(e, "x") && !json_object_get(e, "y"),
          "x is required when method=b, y only when on");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("name=a&method=b&x=1&on=on", &v, &e) && json_object_get(e, "y"), "y required when on");
    json_decref(v);
    json_decref(e);
    CHECK(validate("name=a&lr=0.1,0.2&lr=0.3", &v, &e) && json_array_size(json_object_get(v, "lr")) == 3,
          "comma lists and repeats make one list");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("name=a&lr=0.1,x", &v, &e) && json_object_get(e, "lr"), "a bad list item");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("name=a&n=3.5", &v, &e) && json_object_get(e, "n"), "an int field refuses 3.5");
    json_decref(v);
    json_decref(e);
    CHECK(!validate("name=a&n=99999999999999999999", &v, &e), "an overflowing int is refused");
    json_decref(v);
    json_decref(e);
}

typedef struct {
    cd_events_t *ev;
    int n;
} pub_arg;

static void *publisher(void *arg)
{
    pub_arg *a = arg;
    for (int i = 0; i < a->n; i++) {
        json_t *d = json_pack("{s:i}", "i", i);
        events_publish(a->ev, (i % 2) ? "job:a" : "job:b", "metric", d);
        json_decref(d);
        if (i % 16 == 0)
            usleep(100);
    }
    return NULL;
}

static void test_events(void)
{
    cd_events_t *ev = events_new(4096);
    uint64_t cursor = events_last_id(ev);
    pub_arg a = {ev, 200 + (int)(cd_test_rand_u64() % 200)};
    pthread_t th;
    pthread_create(&th, NULL, publisher, &a);
    int got = 0, last = -1, ordered = 1;
    double end = cd_now() + 10;
    while (got < a.n / 2 && cd_now() < end) {
        char *buf = NULL;
        size_t len = 0;
        int n = events_wait(ev, "job:a", &cursor, 1.0, &buf, &len);
        for (char *p = buf; p && (p = strstr(p, "data: {\"i\":")); p++) {
            int i = atoi(p + 11);
            ordered &= i > last && (i % 2) == 1;
            last = i;
            got++;
        }
        (void)n;
        free(buf);
    }
    pthread_join(th, NULL);
    CHECK(got == a.n / 2, "every job:a event arrived once (%d of %d)", got, a.n / 2);
    CHECK(ordered, "in order, and none of job:b");
    char *buf = NULL;
    size_t len = 0;
    CHECK(events_wait(ev, "job:a", &cursor, 0.05, &buf, &len) == 0, "nothing more: timeout");
    free(buf);
    events_close(ev);
    buf = NULL;
    CHECK(events_wait(ev, "job:a", &cursor, 5, &buf, &len) == -1, "closed");
    free(buf);
    events_free(ev);

    /* a small ring drops what a slow reader missed, never returns garbage */
    ev = events_new(8);
    cursor = 0;
    for (int i = 0; i < 20; i++)
        events_publish(ev, "home", "x", NULL);
    buf = NULL;
    len = 0;
    int n = events_wait(ev, "home", &cursor, 0.1, &buf, &len);
    CHECK(n == 8 && cursor == 20, "the ring keeps the newest 8 (got %d, cursor %llu)", n, (unsigned long long)cursor);
    free(buf);
    events_free(ev);
}

int main(void)
{
    cd_test_init("test_server_fields");
    test_urlencoded();
    test_json();
    test_paths();
    test_forms();
    test_events();
    cd_test_tmpdir_remove();
    return cd_test_finish();
}
