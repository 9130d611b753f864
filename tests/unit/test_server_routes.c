/* The route table against docs/api.md (both ways), and the pattern matcher. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/server/internal.h"
#include "testutil.h"

static void check_match(const char *pattern, unsigned flags, const char *path, int want, const char *p0)
{
    char params[REQ_MAX_PARAMS][512];
    int n = 0;
    int got = route_match(pattern, flags, path, params, &n);
    CHECK(got == want, "%s on %s: got %d, want %d", pattern, path, got, want);
    if (got && want && p0)
        CHECK(n >= 1 && strcmp(params[0], p0) == 0, "%s on %s: param %s, want %s", pattern, path, n ? params[0] : "-",
              p0);
}

static void test_matcher(void)
{
    check_match("/index/json", 0, "/index/json", 1, NULL);
    check_match("/index/json", 0, "/index.json", 1, NULL);
    check_match("/index/json", 0, "/index", 0, NULL);
    check_match("/index/json", 0, "/index/jsonx", 0, NULL);
    check_match("/datasets/<id>/json", 0, "/datasets/20240101-000000-ab12/json", 1, "20240101-000000-ab12");
    check_match("/datasets/<id>/json", 0, "/datasets/20240101-000000-ab12.json", 1, "20240101-000000-ab12");
    check_match("/datasets/<id>/json", 0, "/datasets//json", 0, NULL);
    check_match("/datasets/<id>/json", 0, "/datasets/a/b/json", 0, NULL);
    check_match("/datasets/<id>", 0, "/datasets/abc", 1, "abc");
    check_match("/datasets/<id>", 0, "/datasets/abc/", 0, NULL);
    check_match("/datasets/<id>/status", 0, "/datasets/abc/status", 1, "abc");
    check_match("/files/<path>", R_RAW, "/files/a/b/c.txt", 1, "a/b/c.txt");
    check_match("/files/<path>", R_RAW, "/files/", 0, NULL);
    check_match("/clone/<id>/json", 0, "/clone/x.json", 1, "x");
    /* a random id round-trips through both suffixes */
    for (int i = 0; i < 50; i++) {
        char id[32], path[64];
        snprintf(id, sizeof id, "%08llx-%04llx", (unsigned long long)(cd_test_rand_u64() & 0xffffffff),
                 (unsigned long long)(cd_test_rand_u64() & 0xffff));
        snprintf(path, sizeof path, "/models/%s%s", id, (cd_test_rand_u64() & 1) ? "/json" : ".json");
        check_match("/models/<id>/json", 0, path, 1, id);
    }
}

/* Every table row appears in docs/api.md as "| METHOD | `PATTERN` |", and every such
 * row of the document is in the table. */
static void test_docs(void)
{
    size_t len = 0;
    char *doc = cd_read_file(cd_test_source_path("docs/api.md"), &len);
    CHECK(doc != NULL, "cannot read docs/api.md");
    if (!doc)
        return;
    for (size_t i = 0; i < cd_nroutes; i++) {
        char row[512];
        snprintf(row, sizeof row, "| %s | `%s` |", cd_routes[i].method, cd_routes[i].pattern);
        CHECK(strstr(doc, row) != NULL, "docs/api.md does not list %s %s", cd_routes[i].method, cd_routes[i].pattern);
        CHECK(cd_routes[i].summary && cd_routes[i].summary[0], "route %s %s has no summary", cd_routes[i].method,
              cd_routes[i].pattern);
        for (size_t k = 0; k < i; k++)
            CHECK(!(strcmp(cd_routes[k].method, cd_routes[i].method) == 0 &&
                    strcmp(cd_routes[k].pattern, cd_routes[i].pattern) == 0),
                  "route %s %s is in the table twice", cd_routes[i].method, cd_routes[i].pattern);
    }
    int rows = 0;
    for (char *line = doc; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next = 0;
        char method[16], pattern[256];
        if (sscanf(line, "| %15[A-Z] | `%255[^`]` |", method, pattern) == 2) {
            rows++;
            int found = 0;
            for (size_t i = 0; i < cd_nroutes; i++)
                found |= strcmp(cd_routes[i].method, method) == 0 && strcmp(cd_routes[i].pattern, pattern) == 0;
            CHECK(found, "docs/api.md lists %s %s but the route table has no such route", method, pattern);
        }
        line = next ? next + 1 : NULL;
    }
    CHECK(rows == (int)cd_nroutes, "docs/api.md has %d route rows, the table %zu", rows, cd_nroutes);
    free(doc);
}

int main(void)
{
    cd_test_init("test_server_routes");
    test_matcher();
    test_docs();
    return cd_test_finish();
}
