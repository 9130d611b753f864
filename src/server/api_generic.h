/* Generic datasets and models (api_generic.c): DIGITS 6.1's data extensions, each a
 * form whose fields become dataset.json keys (docs/worker-protocol.md), the models
 * trained on them, and the label records of their label dbs. */
#ifndef CDIGITS_SERVER_API_GENERIC_H
#define CDIGITS_SERVER_API_GENERIC_H

#include "internal.h"

/* The extension id of a generic dataset job, or of a model trained on one (the
 * "extension_id" of its config), or NULL for image classification. Borrowed from job. */
const char *generic_job_extension(json_t *job);
/* Whether id names a data extension ("image-segmentation", ...). */
int generic_extension_known(const char *id);
/* "image-segmentation, image-regression, image-siamese", for messages. */
const char *generic_extension_list(void);

/* Creates a generic dataset of extension ext from fields f (the route and POST
 * /clone/<id> share it): 404 for an unknown extension, 400 {"errors": ...} naming a bad
 * or missing field, else the new job as api_reply_created answers it. */
void generic_dataset_create_fields(req_t *r, const char *ext, const fields_t *f);

/* The model form's rule between the route and the dataset: a model posted to
 * /models/images/generic must name a generic dataset, one posted to
 * /models/images/classification an image classification dataset (other routes, such
 * as POST /clone/<id>, take the dataset's kind). Adds the error to errors under
 * "dataset"; returns 1 when the dataset fits. */
int generic_model_dataset_fits(const req_t *r, json_t *dataset, json_t *errors);

/* DIGITS's GenericDatasetJob keys of a generic dataset's JSON: extension_id, task,
 * create_db_tasks [{name, stage, entry_count, feature_db_path, label_db_path}],
 * feature_dims [h, w, c] (and cdigits's label_shape, palette_file), added to d. */
void generic_dataset_detail(server_t *srv, json_t *job, json_t *d);

/* POST /datasets/generic/create/<extension_id>[.json]: clone=<id>, then the above. */
void h_generic_dataset_create(req_t *r);
/* GET /datasets/<id>/labels/<split>/<index>: the label record of a generic dataset. */
void h_generic_label(req_t *r);
/* GET /datasets/generic/new/<extension_id>, GET /models/images/generic/new (api_pages.c). */
void h_page_generic_dataset_new(req_t *r);
void h_page_generic_model_new(req_t *r);

#endif
