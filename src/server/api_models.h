/* Model handlers of api_models.c that the route table names beside those of internal.h. */
#ifndef CDIGITS_SERVER_API_MODELS_H
#define CDIGITS_SERVER_API_MODELS_H

#include "internal.h"

/* POST /models/customize?network=NAME|JOB_ID: the network to edit in the model form. */
void h_model_customize(req_t *r);

#endif
