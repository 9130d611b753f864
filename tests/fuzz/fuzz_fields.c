/*
 * libFuzzer target for the JSON API's request decoding without the HTTP layer: a body
 * as urlencoded text or as a JSON object (first byte), decoded into the field list every
 * handler reads, read back the way handlers read it, turned back into JSON (clone), and
 * validated against a form table with every field type (forms.c, the code behind the
 * dataset and model forms). A crash, a sanitizer report, a leak, a validation that
 * says "valid" and "error" at once, or a decoded field that is not NUL-terminated is a
 * bug.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "../../src/server/internal.h"

#include <math.h>
#include <string.h>


static const form_field_t g_spec[] = {
    {"name", F_STRING, NULL, NAN, NAN, NULL, NULL, 1, "Name"},
    {"notes", F_TEXT, NULL, NAN, NAN, NULL, NULL, 0, "Notes"},
    {"epochs", F_INT, "30", 1, 1e6, NULL, NULL, 0, "Training epochs"},
    {"rate", F_FLOAT, "0.01", 0, 1e3, NULL, "method=standard", 0, "Learning rate"},
    {"mirror", F_BOOL, NULL, NAN, NAN, NULL, NULL, 0, "Mirror"},
    {"method", F_CHOICE, "standard", NAN, NAN, "standard|custom|previous", NULL, 0, "Method"},
    {"batch_size", F_INTS, NULL, 1, 4096, NULL, "batch_size!=auto", 0, "Batch size"},
    {"learning_rate", F_FLOATS, "0.01", 0, 10, NULL, NULL, 0, "Learning rates"},
    {"folder", F_DIR, NULL, NAN, NAN, NULL, "method=custom&mirror=1", 0, "Folder"},
    {"list", F_FILE, NULL, NAN, NAN, NULL, "method=previous", 0, "List"},
    {"upload", F_UPLOAD, NULL, NAN, NAN, NULL, NULL, 0, "Upload"},
};

static server_t g_form_srv;

static void form_setup(void)
{
    if (g_form_srv.nroots)
        return;
    snprintf(g_form_srv.roots[0], sizeof g_form_srv.roots[0], "/tmp");
    snprintf(g_form_srv.roots_text, sizeof g_form_srv.roots_text, "/tmp");
    snprintf(g_form_srv.jobs_dir, sizeof g_form_srv.jobs_dir, "/nonexistent-jobs");
    g_form_srv.nroots = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    form_setup();
    fields_t *f = fields_new();
    if (!f)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    int rc;
    if (data[0] & 1) {
        json_t *obj = json_loadb(body, len, 0, NULL);
        char msg[256] = "";
        rc = obj ? fields_from_json(f, obj, msg, sizeof msg) : CD_ERR;
        if (obj && rc != CD_OK && !msg[0])
            abort();
        json_decref(obj);
    } else {
        rc = fields_parse_urlencoded(f, body, len);
    }
    for (size_t i = 0; i < f->n; i++)
        if (!f->v[i].name || !f->v[i].value || f->v[i].value[f->v[i].len] != 0)
            abort();
    const char *all[64];
    int n = fields_get_all(f, "job_ids", all, 64);
    for (int i = 0; i < n; i++)
        (void)field_truthy(all[i]);
    (void)fields_get(f, "name");
    json_t *back = fields_to_json(f);
    json_decref(back);
    if (rc == CD_OK) {
        json_t *values = NULL, *errors = NULL;
        int ok = form_validate(&g_form_srv, g_spec, sizeof g_spec / sizeof g_spec[0], f, &values, &errors);
        if (ok != (json_object_size(errors) == 0))
            abort();
        json_decref(values);
        json_decref(errors);
    }
    fields_free(f);
    return 0;
}
