/*
 * cd_buf: random sequences of appends (bytes, single characters, formatted text, room
 * filled by the caller, resets) against a plain array built alongside as the reference;
 * after every step the contents, the length and the NUL after them must match.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "testutil.h"

enum { REF_MAX = 1 << 20 };

int main(void)
{
    cd_test_init("test_buf");
    cd_buf b = {0};
    cd_buf_reset(&b);
    CHECK(b.p && b.n == 0 && b.p[0] == 0, "a reset buffer is the empty string");
    char *ref = malloc(REF_MAX);
    size_t rn = 0;
    int bad = 0;
    for (int step = 0; step < 20000; step++) {
        unsigned char chunk[700];
        size_t n = cd_test_rand_u64() % sizeof chunk;
        for (size_t i = 0; i < n; i++)
            chunk[i] = (unsigned char)cd_test_rand_u64(); /* NULs included: binary data */
        if (rn + sizeof chunk + 64 > REF_MAX) {
            cd_buf_reset(&b);
            rn = 0;
        }
        switch (cd_test_rand_u64() % 5) {
        case 0:
            cd_buf_put(&b, chunk, n);
            memcpy(ref + rn, chunk, n);
            rn += n;
            break;
        case 1:
            cd_buf_putc(&b, (char)chunk[0]);
            ref[rn++] = (char)chunk[0];
            break;
        case 2: {
            long long v = (long long)cd_test_rand_u64();
            double d = cd_test_gauss();
            cd_buf_printf(&b, "[%lld %.9g %s]", v, d, "text");
            rn += (size_t)snprintf(ref + rn, REF_MAX - rn, "[%lld %.9g %s]", v, d, "text");
            break;
        }
        case 3:
            memcpy(cd_buf_extend(&b, n), chunk, n);
            memcpy(ref + rn, chunk, n);
            rn += n;
            break;
        default:
            if (cd_test_rand_u64() % 50 == 0) {
                cd_buf_reset(&b);
                rn = 0;
            }
        }
        if (b.n != rn || b.cap <= b.n || (rn && memcmp(b.p, ref, rn) != 0) || b.p[b.n] != 0)
            bad++;
    }
    CHECK(bad == 0, "%d of 20000 steps left the buffer unlike the reference", bad);
    /* a long formatted text (past any fixed scratch size) comes out whole */
    char *big = malloc(5001);
    memset(big, 'x', 5000);
    big[5000] = 0;
    cd_buf_reset(&b);
    cd_buf_printf(&b, "<%s>", big);
    CHECK(b.n == 5002 && b.p[0] == '<' && b.p[5001] == '>' && b.p[5002] == 0 && strspn(b.p + 1, "x") == 5000,
          "a 5002-byte formatted text is %zu bytes", b.n);
    cd_buf_free(&b);
    CHECK(b.p == NULL && b.n == 0 && b.cap == 0, "a freed buffer is empty");
    cd_buf_free(&b); /* twice is harmless */
    free(big);
    free(ref);
    return cd_test_finish();
}
