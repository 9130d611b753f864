/* Replays every input kept in tests/fuzz/corpus/NAME (the seeds and each input that
 * once crashed a fuzz target, named crash-*) through the fuzz targets of the file
 * readers, under this build's sanitizers: PNG, JPEG, BMP, PGM/PPM, IDX, .db records, snapshots and
 * prototxt. A target aborts on a finding, which fails the test loudly. The server's
 * request decoding has its own replay (test_server_auth_fuzz, which links the server). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "testutil.h"

#define LLVMFuzzerTestOneInput fuzz_png_one
#include "../fuzz/fuzz_png.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_jpeg_one
#include "../fuzz/fuzz_jpeg.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_bmp_pnm_one
#include "../fuzz/fuzz_bmp_pnm.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_idx_one
#include "../fuzz/fuzz_idx.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_db_one
#include "../fuzz/fuzz_db.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_snapshot_one
#include "../fuzz/fuzz_snapshot.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_prototxt_one
#include "../fuzz/fuzz_prototxt.c"
#undef LLVMFuzzerTestOneInput

int main(void)
{
    cd_test_init("test_fuzz_regressions");
    static const struct {
        const char *name;
        int (*fn)(const uint8_t *, size_t);
        int min_crashes; /* findings kept as regression inputs */
    } targets[] = {
        {"png", fuzz_png_one, 0},         {"jpeg", fuzz_jpeg_one, 0},   {"idx", fuzz_idx_one, 1},
        {"bmp_pnm", fuzz_bmp_pnm_one, 0},
        {"db", fuzz_db_one, 0},           {"snapshot", fuzz_snapshot_one, 2},
        {"prototxt", fuzz_prototxt_one, 0},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        int crashes = 0;
        int n = cd_test_replay_corpus(targets[i].name, targets[i].fn, &crashes);
        CHECK(n > 0, "corpus/%s is empty", targets[i].name);
        CHECK(crashes >= targets[i].min_crashes, "corpus/%s keeps %d crash inputs, expected at least %d",
              targets[i].name, crashes, targets[i].min_crashes);
        printf("%s: %d inputs replayed (%d once crashed)\n", targets[i].name, n, crashes);
    }
    if (g_netp) { /* the snapshot target's network */
        cd_net_free(g_netp);
        cd_pt_free(g_tree);
        cd_backend_free(g_be);
    }
    return cd_test_finish();
}
