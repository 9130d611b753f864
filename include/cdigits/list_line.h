/* The lines of DIGITS's image lists, `path label`: one rule for the dataset's text
 * files, the classify_many upload the server checks, and the lists the worker
 * classifies. */
#ifndef CDIGITS_LIST_LINE_H
#define CDIGITS_LIST_LINE_H

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Splits one line in place. A UTF-8 byte order mark at its start (the first line of a
 * file saved by Notepad), its line ending (LF or CRLF) and the white space around it
 * are dropped. The label is the last word, after white space, so a path may hold
 * spaces; with label_optional, only a last word that is an integer (digits after an
 * optional '-') is a label, and a line without one is all path. Returns 0 for a line
 * to skip (blank, or a `#` comment), else 1 with *path and *label pointing into line
 * (*label NULL when there is none). The label is not checked further: the caller
 * knows the classes.
 */
int cd_list_line_split(char *line, int label_optional, char **path, char **label);

#ifdef __cplusplus
}
#endif
#endif
