/* Replays every input kept in tests/fuzz/corpus/fields and tests/fuzz/corpus/http (the
 * seeds and each input that once failed, named crash-*) through the fuzz targets of the
 * server's request decoding and request checks, under this build's sanitizers: the
 * field decoders and form validation, and whole HTTP requests against a real daemon
 * (bodies, cookies, cross-site headers). A target aborts on a finding. */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/util.h"
#include "testutil.h"

#define LLVMFuzzerTestOneInput fuzz_fields_one
#include "../fuzz/fuzz_fields.c"
#undef LLVMFuzzerTestOneInput
#define LLVMFuzzerTestOneInput fuzz_http_one
#include "../fuzz/fuzz_http.c"
#undef LLVMFuzzerTestOneInput

typedef int (*target_fn)(const uint8_t *, size_t);

static int replay(const char *name, target_fn fn)
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
        printf("replay %s/%s (%zu bytes)\n", name, e->d_name, len);
        fflush(stdout);
        fn((const uint8_t *)data, len);
        free(data);
        n++;
        cd_test_passed++;
    }
    closedir(d);
    return n;
}

int main(void)
{
    cd_test_init("test_server_auth_fuzz");
    CHECK(replay("fields", fuzz_fields_one) > 0, "corpus/fields is empty");
    CHECK(replay("http", fuzz_http_one) > 0, "corpus/http is empty");
    fuzz_http_teardown();
    return cd_test_finish();
}
