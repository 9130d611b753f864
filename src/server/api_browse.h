/* Handlers of api_browse.c that the route table names beside those of internal.h. */
#ifndef CDIGITS_SERVER_API_BROWSE_H
#define CDIGITS_SERVER_API_BROWSE_H

#include "internal.h"

/* GET /autocomplete/path?query=Q: DIGITS's path completion, {"suggestions": [...]}, the
 * paths inside the data roots that start with Q (a "/" is put first when Q does not
 * start with one); an empty list for anything outside the roots. */
void h_autocomplete_path(req_t *r);

#endif
