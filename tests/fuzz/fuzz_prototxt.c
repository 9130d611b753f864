/*
 * libFuzzer target for the prototxt parser: parse any bytes, validate what parses
 * against NetParameter and SolverParameter, read a few values, free. Any crash, leak,
 * sanitizer report or error message without a position is a bug.
 */
#include "cdigits/prototxt.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Every failure must say FILE:LINE:COL and what was expected. */
static void check_message(const char *err)
{
    if (strncmp(err, "fuzz.prototxt:", 14) != 0 || !strstr(err, "; expected"))
        abort();
}

/* Walk the tree with the lookups other modules use; values must not crash them. */
static void read_back(const cd_pt_node *msg)
{
    for (const cd_pt_node *c = msg->child; c; c = c->next) {
        (void)cd_pt_int(msg, c->name, 0);
        (void)cd_pt_float(msg, c->name, 0);
        (void)cd_pt_bool(msg, c->name, 0);
        (void)cd_pt_str(msg, c->name, NULL);
        if (c->kind == CD_PT_MESSAGE)
            read_back(c);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[1024];
    cd_pt_node *root = cd_pt_parse((const char *)data, size, "fuzz.prototxt", err, sizeof err);
    if (!root) {
        check_message(err);
        return 0;
    }
    if (cd_pt_validate(root, &cd_pt_net_parameter, "fuzz.prototxt", err, sizeof err) != 0)
        check_message(err);
    if (cd_pt_validate(root, &cd_pt_solver_parameter, "fuzz.prototxt", err, sizeof err) != 0)
        check_message(err);
    read_back(root);
    cd_pt_free(root);
    return 0;
}
