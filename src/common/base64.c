/* Base64 encoding and decoding (see base64.h). */
#include "cdigits/base64.h"

#include <stdlib.h>

static const char g_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *cd_base64_encode(const void *data, size_t n)
{
    const unsigned char *p = data;
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        *o++ = g_alphabet[v >> 18];
        *o++ = g_alphabet[(v >> 12) & 63];
        *o++ = g_alphabet[(v >> 6) & 63];
        *o++ = g_alphabet[v & 63];
    }
    if (i < n) { /* one or two bytes left: two or three characters and padding */
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0);
        *o++ = g_alphabet[v >> 18];
        *o++ = g_alphabet[(v >> 12) & 63];
        *o++ = i + 1 < n ? g_alphabet[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = 0;
    return out;
}

/* The 6-bit value of a character of either alphabet, -1 for any other. */
static int digit_value(int ch)
{
    if (ch >= 'A' && ch <= 'Z')
        return ch - 'A';
    if (ch >= 'a' && ch <= 'z')
        return ch - 'a' + 26;
    if (ch >= '0' && ch <= '9')
        return ch - '0' + 52;
    if (ch == '+' || ch == '-')
        return 62;
    if (ch == '/' || ch == '_')
        return 63;
    return -1;
}

unsigned char *cd_base64_decode(const char *s, size_t len, size_t *out_len)
{
    /* at most 3 bytes per 4 characters, plus what a short unpadded tail adds */
    unsigned char *out = malloc(len / 4 * 3 + 3);
    if (!out)
        return NULL;
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int ch = (unsigned char)s[i];
        if (ch == '=' || ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t')
            continue;
        int v = digit_value(ch);
        if (v < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    *out_len = n;
    return out;
}
