/*
 * The training settings: one table with a row for every key of train.json
 * (docs/worker-protocol.md) and the model form's field that sets it (DIGITS's name),
 * with its type, bounds, default, choices, label and a line of documentation.
 * Backend-free (library cd_core): the worker reads train.json by it, the server's model
 * form takes its bounds and defaults from it and answers it at GET
 * /models/train-keys/json for the browser's form, and `cdigits-worker train-keys
 * --markdown` prints it for docs/training.md. A value one side accepts is therefore
 * never refused by the other.
 *
 * A key the form sets through several fields (lr_policy.gamma: lr_step_gamma,
 * lr_exp_gamma, ...) has one row per field, each with the policy's own default and the
 * same bounds; cd_train_key_find gives the first.
 */
#ifndef CDIGITS_TRAIN_KEYS_H
#define CDIGITS_TRAIN_KEYS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

enum cd_train_key_type {
    CD_TK_NUMBER, /* a JSON number */
    CD_TK_INT,    /* a whole number */
    CD_TK_BOOL,   /* true or false */
    CD_TK_ENUM,   /* one of choices (case does not matter) */
    CD_TK_STRING, /* text: a path */
    CD_TK_LIST,   /* numbers, each within lo..hi: a JSON array or a comma-separated string */
    CD_TK_TYPE_COUNT
};

typedef struct cd_train_key {
    const char *key;     /* train.json's name; "lr_policy.gamma" is "gamma" inside "lr_policy" */
    const char *field;   /* the model form's field, NULL where only train.json has it */
    int type;            /* enum cd_train_key_type */
    double lo, hi;       /* inclusive bounds of a number or of each item of a list; NAN: none */
    int max_items;       /* CD_TK_LIST: at most this many items */
    const char *def;     /* the default as the form's text ("30", "true", "image", "50,85");
                          * NULL when there is none or it follows from other keys (doc says) */
    const char *choices; /* CD_TK_ENUM: "none|image|pixel"; choice i is value i */
    const char *alias;   /* CD_TK_ENUM: other names of a choice, "gpu=cuda", or NULL */
    const char *label;   /* what the form calls it */
    const char *doc;     /* what it means, one line */
} cd_train_key;

/* The rows in order (the order of docs/training.md's table). */
size_t cd_train_key_count(void);
/* Row i, or NULL for i >= cd_train_key_count(). */
const cd_train_key *cd_train_key_at(size_t i);
/* The first row of a train.json key ("epochs", "lr_policy.stepsize"), or NULL. */
const cd_train_key *cd_train_key_find(const char *key);
/* The row of a model form field ("train_epochs"), or NULL. */
const cd_train_key *cd_train_key_by_field(const char *field);
/* The key's name inside its object: "gamma" for "lr_policy.gamma", the key itself for
 * a top-level one. */
const char *cd_train_key_member(const cd_train_key *k);

/* "number", "int", "bool", "enum", "string", "list"; "?" out of range. */
const char *cd_train_key_type_name(int type);
/* The index of name among the choices of an enum row (an alias counts as its choice),
 * case-insensitively; -1 when it is none of them. */
int cd_train_key_choice(const cd_train_key *k, const char *name);
/* Choice i of an enum row into buf ("image"); "" when out of range. Returns buf. */
const char *cd_train_key_choice_name(const cd_train_key *k, int i, char *buf, size_t len);
/* The choices joined by sep into buf: "none, image, pixel" with sep ", ". Returns buf. */
const char *cd_train_key_choice_list(const cd_train_key *k, const char *sep, char *buf, size_t len);

/* What the key takes, for messages and docs: "a number between 0 and 100", "a whole
 * number between 1 and 1024", "true or false", "one of none, image, pixel", "text",
 * "numbers between 0 and 100, at most 32". Returns buf. */
const char *cd_train_key_want(const cd_train_key *k, char *buf, size_t len);
/* Whether v is within the row's bounds (and whole for CD_TK_INT). CD_OK, or CD_ERR with
 * a message naming the key and the allowed range:
 * train.json: "lr_policy.stepsize" must be between 0 and 100 (got 150). */
int cd_train_key_check(const cd_train_key *k, double v, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
