/* DIGITS's request_wants_json (http_wants_json): the path rule, the cases DIGITS's
 * documentation of the rule names, and random Accept headers against the rule worked
 * out from the qualities the test drew. */
#include <stdio.h>
#include <string.h>

#include "../../src/server/internal.h"
#include "testutil.h"

static void check_case(const char *path, const char *accept, int want)
{
    int got = http_wants_json(path, accept);
    CHECK(got == want, "%s with Accept %s: wants json %d, want %d", path, accept ? accept : "(none)", got, want);
}

/* The path rule: .json (query strings are not part of it) and cdigits's /json; with the
 * Accept header given (NULL: none), whether the request wants JSON */
static const struct {
    const char *path, *accept;
    int want;
} g_paths[] = {
    {"/datasets/images/classification.json", NULL, 1},
    {"/datasets/images/classification/json", "text/html", 1},
    {"/models/images/classification", NULL, 0},
    {"/models/images/classification.jsonx", "*/*", 0},
    {"/json", NULL, 1},
    {"/x", NULL, 0},
};

/* Accept on a path without .json, as routes.md spells DIGITS's behaviour out */
static const struct {
    const char *accept;
    int want;
} g_accepts[] = {
    {"application/json", 1},
    {"*/*", 0},
    {"", 0},
    {"application/json, text/html;q=0.9", 1},
    {"text/html, application/json", 0},
    {"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", 0},
    {"application/json;q=0.5, */*;q=0.1", 1},
    {"application/*, text/html;q=0.2", 1},
    {"application/json;q=0", 0},
    {"APPLICATION/JSON", 1},
    {"text/*;q=0.3, application/json ; q=0.4", 1},
    {"application/json;q=0.3, text/*;q=0.4", 0},
};

static void test_cases(void)
{
    for (size_t i = 0; i < sizeof g_paths / sizeof *g_paths; i++)
        check_case(g_paths[i].path, g_paths[i].accept, g_paths[i].want);
    for (size_t i = 0; i < sizeof g_accepts / sizeof *g_accepts; i++)
        check_case("/datasets/images/classification", g_accepts[i].accept, g_accepts[i].want);
}

/* Random headers of up to five entries drawn from exact types, wildcard subtypes and
 * the full wildcard, in a random order with random qualities: JSON exactly when the
 * highest quality of an entry matching application/json is above the highest matching
 * text/html. */
static void test_random(void)
{
    static const char *const types[] = {"application/json", "text/html", "application/*", "text/*", "*/*",
                                        "image/png", "application/xml"};
    static const int json_match[] = {1, 0, 1, 0, 1, 0, 0};
    static const int html_match[] = {0, 1, 0, 1, 1, 0, 0};
    for (int iter = 0; iter < 2000; iter++) {
        char accept[512] = "";
        size_t len = 0;
        int n = 1 + (int)(cd_test_rand_u64() % 5);
        int qj = 0, qh = 0; /* thousandths */
        for (int i = 0; i < n; i++) {
            int t = (int)(cd_test_rand_u64() % CD_ARRAY_LEN(types));
            int with_q = (int)(cd_test_rand_u64() % 3) != 0;
            int q = with_q ? (int)(cd_test_rand_u64() % 1001) : 1000;
            if (with_q)
                len += (size_t)snprintf(accept + len, sizeof accept - len, "%s%s;q=%d.%03d", i ? ", " : "", types[t],
                                        q / 1000, q % 1000);
            else
                len += (size_t)snprintf(accept + len, sizeof accept - len, "%s%s", i ? "," : "", types[t]);
            if (json_match[t] && q > qj)
                qj = q;
            if (html_match[t] && q > qh)
                qh = q;
        }
        check_case("/datasets/images/classification", accept, qj > qh);
    }
}

int main(void)
{
    cd_test_init("test_server_wants_json");
    test_cases();
    test_random();
    return cd_test_finish();
}
