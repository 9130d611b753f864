/*
 * cd_utf8_scrub: well-formed UTF-8 is left alone, every other byte becomes '?'. Fixed
 * cases at the edges of RFC 3629 (overlongs, surrogates, past U+10FFFF, truncated
 * sequences), then random byte strings against jansson's own UTF-8 check as the
 * oracle: a string jansson accepts is untouched, and whatever scrub leaves jansson
 * accepts, with the same length.
 */
#include <jansson.h>
#include <string.h>

#include "cdigits/util.h"
#include "testutil.h"

static const struct {
    const char *in, *out;
} g_cases[] = {
    {"plain ascii", "plain ascii"},
    {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80"},
    {"\xed\x9f\xbf \xee\x80\x80 \xf4\x8f\xbf\xbf", "\xed\x9f\xbf \xee\x80\x80 \xf4\x8f\xbf\xbf"}, /* U+D7FF, U+E000, U+10FFFF */
    {"a\xff" "b\xfe", "a?b?"},
    {"\x80 lone continuation", "? lone continuation"},
    {"overlong \xc0\x80 \xc1\xbf \xe0\x80\x80 \xf0\x80\x80\x80", "overlong ?? ?? ??? ????"},
    {"surrogate \xed\xa0\x80", "surrogate ???"},
    {"past U+10FFFF \xf4\x90\x80\x80 \xf5\x80\x80\x80", "past U+10FFFF ???? ????"},
    {"cut \xe2\x82", "cut ??"},
    {"cut \xf0\x9f\x98", "cut ???"},
    {"\xe2\x82\xac\xe2\x82", "\xe2\x82\xac??"},
    {"", ""},
};

int main(void)
{
    cd_test_init("test_utf8");
    for (size_t i = 0; i < sizeof g_cases / sizeof *g_cases; i++) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", g_cases[i].in);
        size_t want = 0;
        for (size_t k = 0; g_cases[i].out[k]; k++)
            want += g_cases[i].out[k] == '?' && g_cases[i].in[k] != '?';
        size_t got = cd_utf8_scrub(buf);
        CHECK(strcmp(buf, g_cases[i].out) == 0 && got == want, "case %zu: \"%s\" (%zu replaced, %zu wanted)", i,
              buf, got, want);
    }
    /* random strings biased to bytes >= 0x80, so that many are near-valid sequences */
    static const unsigned char pool[] = {'a', 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0,
                                         0xe1, 0xed, 0xee, 0xef, 0xf0, 0xf1, 0xf4, 0xf5, 0xff};
    int valid_seen = 0, bad = 0;
    for (int r = 0; r < 200000; r++) {
        char buf[16];
        size_t n = 1 + cd_test_rand_u64() % (sizeof buf - 1);
        for (size_t k = 0; k < n; k++)
            buf[k] = (char)pool[cd_test_rand_u64() % sizeof pool];
        buf[n] = 0;
        json_t *before = json_stringn(buf, n);
        size_t replaced = cd_utf8_scrub(buf);
        json_t *after = json_stringn(buf, n);
        if (before)
            valid_seen++;
        if ((before && replaced) || !after || strlen(buf) != n || (!before && !replaced))
            bad++;
        json_decref(before);
        json_decref(after);
    }
    CHECK(bad == 0, "%d of 200000 random strings scrubbed unlike jansson's check", bad);
    CHECK(valid_seen > 1000, "only %d random strings were valid UTF-8: the test reaches too little", valid_seen);
    return cd_test_finish();
}
