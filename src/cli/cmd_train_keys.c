/* train-keys --markdown: the table of training settings (cdigits/train_keys.h) as the
 * markdown table of docs/training.md, which tests/shell/train_keys_doc.sh compares with
 * this output. Exit status 0, or 2 for a usage error. */
#include <stdio.h>
#include <string.h>

#include "cdigits/train_keys.h"
#include "commands.h"

#define USAGE "usage: cdigits-worker train-keys --markdown\n"

/* `text` in a cell, or an empty cell for NULL */
static void code_cell(const char *text)
{
    if (text)
        printf(" `%s` |", text);
    else
        printf(" |");
}

int cd_cmd_train_keys(int argc, char **argv)
{
    if (argc != 2 || strcmp(argv[1], "--markdown") != 0) {
        fprintf(stderr, "train-keys: %s%s", argc < 2 ? "give --markdown; " : "", USAGE);
        return 2;
    }
    printf("| key | form field | type | takes | default | meaning |\n");
    printf("| --- | --- | --- | --- | --- | --- |\n");
    for (size_t i = 0; i < cd_train_key_count(); i++) {
        const cd_train_key *k = cd_train_key_at(i);
        char takes[320];
        printf("|");
        code_cell(k->key);
        code_cell(k->field);
        printf(" %s | %s |", cd_train_key_type_name(k->type), cd_train_key_want(k, takes, sizeof takes));
        code_cell(k->def);
        printf(" %s: %s |\n", k->label, k->doc);
    }
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
