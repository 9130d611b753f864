/* Replays every input kept in tests/fuzz/corpus/NAME (the seeds and each input that
 * once crashed a fuzz target, named crash-*) through the fuzz targets of the file
 * readers, under this build's sanitizers: PNG, JPEG, IDX, .db records, snapshots and
 * prototxt. A target aborts on a finding, which fails the test loudly. The server's
 * request decoding has its own replay (test_server_auth_fuzz, which links the server). */
#define _GNU_SOURCE
#include <dirent.h>
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

typedef int (*target_fn)(const uint8_t *, size_t);

/* Runs every file of corpus/name through fn; returns how many, and how many crash-*. */
static int replay(const char *name, target_fn fn, int *crashes)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", cd_test_source_path("tests/fuzz/corpus"), name);
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[4500];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *data = cd_read_file(path, &len);
        CHECK(data != NULL, "cannot read %s", path);
        if (!data)
            continue;
        /* printed first: if the target aborts, this names the input */
        printf("replay %s/%s (%zu bytes)\n", name, e->d_name, len);
        fflush(stdout);
        fn((const uint8_t *)data, len);
        free(data);
        n++;
        if (strncmp(e->d_name, "crash-", 6) == 0)
            (*crashes)++;
        cd_test_passed++;
    }
    closedir(d);
    return n;
}

int main(void)
{
    cd_test_init("test_fuzz_regressions");
    static const struct {
        const char *name;
        target_fn fn;
        int min_crashes; /* findings kept as regression inputs */
    } targets[] = {
        {"png", fuzz_png_one, 0},         {"jpeg", fuzz_jpeg_one, 0},   {"idx", fuzz_idx_one, 1},
        {"db", fuzz_db_one, 0},           {"snapshot", fuzz_snapshot_one, 2},
        {"prototxt", fuzz_prototxt_one, 0},
    };
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        int crashes = 0;
        int n = replay(targets[i].name, targets[i].fn, &crashes);
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
