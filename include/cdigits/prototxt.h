/*
 * Protobuf text format (Caffe prototxt) parsing into a generic tree, and validation
 * of that tree against a schema of known messages and fields (NetParameter here).
 *
 * The tree keeps every field in file order with its line and column so that errors
 * later (shape checks, missing bottoms) can point at the place in the file.
 */
#ifndef CDIGITS_PROTOTXT_H
#define CDIGITS_PROTOTXT_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Limits that keep a hostile or broken file from exhausting the stack or memory:
 * deeper nesting or a larger input is a parse error, never a crash. */
#define CD_PT_MAX_DEPTH 64
#define CD_PT_MAX_BYTES ((size_t)16 << 20)

enum cd_pt_kind {
    CD_PT_MESSAGE = 0, /* name { ... } or name: { ... } */
    CD_PT_NUMBER,      /* 12, -3.5e-4, 0x1F, inf, nan */
    CD_PT_STRING,      /* "..." or '...' (escapes decoded; adjacent strings joined) */
    CD_PT_IDENT,       /* true, false, MAX, ACROSS_CHANNELS ... */
};

typedef struct cd_pt_node {
    char *name;                /* field name */
    int kind;                  /* enum cd_pt_kind */
    char *text;                /* scalar value text (decoded for strings); NULL for messages */
    int line, col;             /* 1-based position of the field name */
    struct cd_pt_node *child;  /* first field of a message */
    struct cd_pt_node *next;   /* next sibling */
} cd_pt_node;

/* Parse text (len bytes, need not be NUL-terminated) into a tree whose root is a
 * message named "" holding the top-level fields. On error returns NULL and writes
 * "FILE:LINE:COL: what was found; what was expected" into err. */
cd_pt_node *cd_pt_parse(const char *text, size_t len, const char *filename, char *err,
                        size_t errlen);
void cd_pt_free(cd_pt_node *root);
/* Read and parse a file; NULL with "PATH: why; what to do" or a parse error in err. */
cd_pt_node *cd_pt_parse_file(const char *path, char *err, size_t errlen);

/* Schema: one table of fields per message type. */
/* INT is int32, UINT uint32, INT64 int64 (as in caffe.proto); each is range-checked. */
enum cd_pt_type { CD_PT_T_INT, CD_PT_T_UINT, CD_PT_T_FLOAT, CD_PT_T_BOOL, CD_PT_T_STRING,
                  CD_PT_T_ENUM, CD_PT_T_MSG, CD_PT_T_INT64 };

typedef struct cd_pt_message cd_pt_message;
typedef struct cd_pt_field {
    const char *name;
    int type;                      /* enum cd_pt_type */
    int repeated;                  /* may appear more than once */
    const char *const *enum_names; /* NULL-terminated, for CD_PT_T_ENUM */
    const cd_pt_message *msg;      /* for CD_PT_T_MSG */
} cd_pt_field;

struct cd_pt_message {
    const char *name;              /* "LayerParameter" */
    const cd_pt_field *fields;     /* terminated by a field with name NULL */
};

/* Caffe's NetParameter as far as cdigits reads it (every field of every supported
 * layer's parameter message, plus the fields of standard Caffe files that carry no
 * meaning here such as data_param's source, which are accepted and ignored). */
extern const cd_pt_message cd_pt_net_parameter;
/* Caffe's SolverParameter subset (for solver.prototxt files in archives). */
extern const cd_pt_message cd_pt_solver_parameter;

/* Check every field of the tree against msg, recursively: unknown fields, wrong
 * value kinds, an integer field given 1.5, an enum name not in the list, a
 * non-repeated field given twice. CD_OK, or CD_ERR with "FILE:LINE:COL: ..." in err. */
int cd_pt_validate(const cd_pt_node *root, const cd_pt_message *msg, const char *filename,
                   char *err, size_t errlen);
/* The field called name in msg's table, or NULL. */
const cd_pt_field *cd_pt_find_field(const cd_pt_message *msg, const char *name);
/* Write "FILE:LINE:COL: <formatted text>" for node into err, so that later checks
 * (shapes, missing bottoms) point at the place in the file the same way the parser does.
 * Returns CD_ERR so callers can `return cd_pt_error_at(...)`. */
int cd_pt_error_at(const cd_pt_node *node, const char *filename, char *err, size_t errlen,
                   const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Lookups on a message node (after validation the values are well-formed). Each
 * accepts msg NULL and returns def (or NULL / 0) when the field is absent or its
 * value is not of the asked kind. Integers are decimal or 0x hex, optionally negative. */
const cd_pt_node *cd_pt_get(const cd_pt_node *msg, const char *name);   /* first or NULL */
int cd_pt_count(const cd_pt_node *msg, const char *name);
/* the i-th occurrence of name, or NULL */
const cd_pt_node *cd_pt_nth(const cd_pt_node *msg, const char *name, int i);
long cd_pt_int(const cd_pt_node *msg, const char *name, long def);
double cd_pt_float(const cd_pt_node *msg, const char *name, double def);
int cd_pt_bool(const cd_pt_node *msg, const char *name, int def);
/* string or enum text, or def */
const char *cd_pt_str(const cd_pt_node *msg, const char *name, const char *def);

#ifdef __cplusplus
}
#endif
#endif
