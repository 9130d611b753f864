/* import-onnx: an ONNX model (docs/formats.md, "ONNX import") as a cdigits network and
 * weights in DIR: deploy.prototxt (an Input layer shaped from the graph input),
 * network.prototxt (DIGITS's one-file train/val/deploy form, for a classifier of one
 * image input) and weights.cdw. The deploy network is built before anything is written,
 * so what is written is a network cdigits runs. Prints one JSON object on stdout:
 * {"deploy", "network" (null without one), "weights", "layers", "parameters",
 * "inputs": [{"name", "blob", "shape"}], "outputs": [...], "opset"}; a refusal is a
 * message on stderr and exit status 1. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cdigits/jobdir.h"
#include "cdigits/net.h"
#include "cdigits/onnx_import.h"
#include "cdigits/prototxt.h"
#include "cdigits/util.h"
#include "commands.h"

#define USAGE "usage: cdigits-worker import-onnx FILE.onnx --out DIR\n"

static const char g_weights_name[] = "weights.cdw";

/* Parses, validates and builds text (no memory): the check that the import runs. */
static int check_builds(const char *text, const char *name, const char *stage, const cd_onnx_model *m, char *err,
                        size_t errlen)
{
    cd_pt_node *tree = cd_pt_parse(text, strlen(text), name, err, errlen);
    if (!tree)
        return CD_ERR;
    int rc = cd_pt_validate(tree, &cd_pt_net_parameter, name, err, errlen);
    if (rc == CD_OK) {
        cd_net_opts o = {.stage = stage, .batch = 1};
        if (m->ninputs == 1 && m->inputs[0].ndim == 4) {
            o.input_c = m->inputs[0].dims[1];
            o.input_h = m->inputs[0].dims[2];
            o.input_w = m->inputs[0].dims[3];
        }
        cd_net *net = cd_net_build(tree, name, &o, err, errlen);
        rc = net ? CD_OK : CD_ERR;
        cd_net_free(net);
    }
    cd_pt_free(tree);
    return rc;
}

static json_t *io_json(const cd_onnx_io *io, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        json_t *shape = json_array();
        for (int d = 0; d < io[i].ndim; d++)
            json_array_append_new(shape, json_integer(io[i].dims[d]));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "name", io[i].onnx_name, "blob", io[i].blob, "shape",
                                           shape));
    }
    return a;
}

static int write_text(const char *dir, const char *name, const char *text, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    if (cd_write_file_atomic(path, text, strlen(text)) != CD_OK) {
        fprintf(stderr, "import-onnx: cannot write %s: %s\n", path, strerror(errno));
        return CD_ERR;
    }
    return CD_OK;
}

int cd_cmd_import_onnx(int argc, char **argv)
{
    const char *file = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] != '-' && !file) {
            file = argv[i];
        } else {
            fprintf(stderr, "import-onnx: unexpected argument %s\n" USAGE, argv[i]);
            return 2;
        }
    }
    if (!file || !out) {
        fprintf(stderr, "import-onnx: %s is missing\n" USAGE, file ? "--out DIR" : "the ONNX file");
        return 2;
    }
    size_t len = 0;
    char *data = cd_read_file(file, &len);
    if (!data) {
        fprintf(stderr, "import-onnx: cannot read %s: %s\n", file, strerror(errno));
        return 1;
    }
    char err[2048];
    cd_onnx_model m;
    int rc = cd_onnx_import(data, len, file, &m, err, sizeof err);
    free(data);
    if (rc != CD_OK) {
        fprintf(stderr, "%s\n", err);
        cd_onnx_model_free(&m);
        return 1;
    }
    const char *deploy = jobdir_name(JOBDIR_DEPLOY), *network = jobdir_name(JOBDIR_NETWORK);
    if (check_builds(m.deploy, deploy, "deploy", &m, err, sizeof err) != CD_OK ||
        (m.network && check_builds(m.network, network, "train", &m, err, sizeof err) != CD_OK)) {
        fprintf(stderr, "import-onnx: %s: the imported network does not build in cdigits: %s\n", file, err);
        cd_onnx_model_free(&m);
        return 1;
    }
    if (cd_mkdirs(out, 0755) != CD_OK) {
        fprintf(stderr, "import-onnx: cannot make the folder %s: %s\n", out, strerror(errno));
        cd_onnx_model_free(&m);
        return 1;
    }
    char dpath[PATH_MAX + 64], npath[PATH_MAX + 64], wpath[PATH_MAX + 64];
    rc = 1;
    if (write_text(out, deploy, m.deploy, dpath, sizeof dpath) != CD_OK ||
        (m.network && write_text(out, network, m.network, npath, sizeof npath) != CD_OK))
        goto done;
    snprintf(wpath, sizeof wpath, "%s/%s", out, g_weights_name);
    if (cd_onnx_write_weights(&m, wpath, err, sizeof err) != CD_OK) {
        fprintf(stderr, "import-onnx: %s\n", err);
        goto done;
    }
    if (!m.network)
        fprintf(stderr, "import-onnx: no %s: %s\n", network, m.why_no_network);
    json_t *o = json_pack("{s:s, s:s?, s:s, s:i, s:i, s:o, s:o, s:I}", "deploy", dpath, "network",
                          m.network ? npath : NULL, "weights", wpath, "layers", m.nlayers, "parameters", m.nparams,
                          "inputs", io_json(m.inputs, m.ninputs), "outputs", io_json(m.outputs, m.noutputs),
                          "opset", (json_int_t)m.opset);
    char *text = json_dumps(o, JSON_COMPACT);
    printf("%s\n", text);
    free(text);
    json_decref(o);
    rc = 0;
done:
    cd_onnx_model_free(&m);
    return rc;
}
