/* The network view as a page: DIGITS's POST /models/visualize-network answers HTML. */
#ifndef CDIGITS_SERVER_NETWORK_PAGE_H
#define CDIGITS_SERVER_NETWORK_PAGE_H

#include <jansson.h>

#include "internal.h"

/* Replies 200 with a page of what `check-net --json` found (result: {stages, errors,
 * input, classes, crop, network}, borrowed): the engine's messages, then per stage its
 * layers with their bottoms, tops and shapes and the learnable values. Every string of
 * the result is escaped. */
void network_page_reply(req_t *r, json_t *result);

#endif
