/* cd_list_line_split (include/cdigits/list_line.h). */
#include "cdigits/list_line.h"

#include <ctype.h>
#include <string.h>

/* An integer as a label is written: digits after an optional '-'. */
static int is_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

int cd_list_line_split(char *line, int label_optional, char **path, char **label)
{
    if ((unsigned char)line[0] == 0xEF && (unsigned char)line[1] == 0xBB && (unsigned char)line[2] == 0xBF)
        line += 3;
    while (isspace((unsigned char)*line))
        line++;
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = 0;
    *path = line;
    *label = NULL;
    if (!len || line[0] == '#')
        return 0;
    char *word = line + len;
    while (word > line && !isspace((unsigned char)word[-1]))
        word--;
    if (word == line || (label_optional && !is_integer(word)))
        return 1;
    *label = word;
    char *t = word;
    while (t > line && isspace((unsigned char)t[-1]))
        t--;
    *t = 0;
    return 1;
}
