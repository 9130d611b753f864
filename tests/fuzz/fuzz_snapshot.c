/*
 * libFuzzer target for snapshot loading (weights .cdw and solver state .solverstate,
 * docs/formats.md) into a small network built once on the CPU backend. The first byte
 * picks the file kind (bit 0), whether a partial load is allowed (bit 1) and whether
 * the trailing FNV-1a checksum is repaired first (bit 2), so mutations reach the
 * tensor table instead of stopping at the checksum. A crash, a sanitizer report, a
 * leak, a failure without a message, or a load that succeeds with a tensor of the
 * wrong size is a bug.
 */
#include "fuzz_common.h" /* first: it defines _GNU_SOURCE */

#include "cdigits/backend.h"
#include "cdigits/net.h"
#include "cdigits/prototxt.h"
#include "cdigits/train.h"

#include <string.h>


static const char g_net[] =
    "name: \"fuzz\"\n"
    "layer { name: \"in\" type: \"Input\" top: \"data\" top: \"label\"\n"
    "  input_param { shape { dim: 2 dim: 1 dim: 6 dim: 6 } shape { dim: 2 } } }\n"
    "layer { name: \"conv\" type: \"Convolution\" bottom: \"data\" top: \"conv\"\n"
    "  convolution_param { num_output: 2 kernel_size: 3 weight_filler { type: \"xavier\" } } }\n"
    "layer { name: \"bn\" type: \"BatchNorm\" bottom: \"conv\" top: \"conv\" }\n"
    "layer { name: \"ip\" type: \"InnerProduct\" bottom: \"conv\" top: \"ip\"\n"
    "  inner_product_param { num_output: 3 weight_filler { type: \"xavier\" } } }\n"
    "layer { name: \"loss\" type: \"SoftmaxWithLoss\" bottom: \"ip\" bottom: \"label\" top: \"loss\" }\n";

static cd_backend_t *g_be;
static cd_pt_node *g_tree;
static cd_net *g_netp;

/* Builds the network once; aborts if the fixed definition does not build. */
static cd_net *net(void)
{
    if (g_netp)
        return g_netp;
    char err[1024] = "";
    g_be = cd_backend_cpu_new(1);
    g_tree = cd_pt_parse(g_net, strlen(g_net), "fuzz.prototxt", err, sizeof err);
    if (!g_tree || cd_pt_validate(g_tree, &cd_pt_net_parameter, "fuzz.prototxt", err, sizeof err) != 0)
        abort();
    cd_net_opts opts = {.stage = "train", .seed = 1};
    g_netp = cd_net_build(g_tree, "fuzz.prototxt", &opts, err, sizeof err);
    if (!g_netp || cd_net_alloc(g_netp, g_be, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_snapshot: the test network does not build: %s\n", err);
        abort();
    }
    return g_netp;
}

static uint64_t fnv1a(const uint8_t *p, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    cd_net *n = net();
    int state = data[0] & 1, partial = (data[0] >> 1) & 1, fix = (data[0] >> 2) & 1;
    size_t len = size - 1;
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy)
        return 0;
    memcpy(copy, data + 1, len);
    if (fix && len >= 16) {
        memcpy(copy, state ? "CDS1" : "CDW1", 4);
        uint64_t h = fnv1a(copy, len - 8);
        memcpy(copy + len - 8, &h, 8);
    }
    char path[64], err[1024] = "";
    int fd = fuzz_memfile(copy, len, path, sizeof path);
    free(copy);
    if (fd < 0)
        return 0;
    int rc;
    if (state) {
        long iter = -1;
        rc = cd_snapshot_load_state(n, &iter, path, err, sizeof err);
        if (rc == 0 && iter < 0)
            abort();
    } else {
        int loaded = -1;
        rc = cd_snapshot_load_weights(n, path, partial, &loaded, err, sizeof err);
        if (rc == 0 && partial && (loaded < 0 || loaded > n->nparams))
            abort();
    }
    if (rc != 0)
        fuzz_check_message(err);
    close(fd);
    return 0;
}
