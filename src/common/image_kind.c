/* Which files are images this project reads: by their first bytes (the decoders' choice)
 * and by their names (folder scans, the folder browser). One table for both. */
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "cdigits/image_kind.h"
#include "cdigits/util.h"

static const struct {
    int format;
    const char *ext;
} g_exts[] = {
    {CD_IMAGE_PNG, ".png"}, {CD_IMAGE_JPEG, ".jpg"}, {CD_IMAGE_JPEG, ".jpeg"}, {CD_IMAGE_JPEG, ".jpe"},
    {CD_IMAGE_BMP, ".bmp"}, {CD_IMAGE_PNM, ".pgm"},  {CD_IMAGE_PNM, ".ppm"},   {CD_IMAGE_PNM, ".pnm"},
};

int cd_image_sniff(const void *buf, size_t len)
{
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    const uint8_t *p = buf;
    if (len >= 8 && memcmp(p, png_sig, 8) == 0)
        return CD_IMAGE_PNG;
    if (len >= 3 && p[0] == 0xFF && p[1] == 0xD8 && p[2] == 0xFF)
        return CD_IMAGE_JPEG;
    if (len >= 26 && p[0] == 'B' && p[1] == 'M')
        return CD_IMAGE_BMP;
    /* netpbm: P1..P6 then white space (the decoder refuses P1 and P4 by name) */
    if (len >= 3 && p[0] == 'P' && p[1] >= '1' && p[1] <= '6' && strchr(" \t\r\n#", p[2]) && p[2])
        return CD_IMAGE_PNM;
    return CD_IMAGE_UNKNOWN;
}

int cd_image_name_ok(const char *name)
{
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < CD_ARRAY_LEN(g_exts); i++)
        if (strcasecmp(dot, g_exts[i].ext) == 0)
            return 1;
    return 0;
}

const char *cd_image_kinds(void)
{
    return "PNG, JPEG, BMP, PGM or PPM";
}
