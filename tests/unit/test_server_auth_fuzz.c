/* Replays every input kept in tests/fuzz/corpus/fields and tests/fuzz/corpus/http (the
 * seeds and each input that once failed, named crash-*) through the fuzz targets of the
 * server's request decoding and request checks, under this build's sanitizers: the
 * field decoders and form validation, and whole HTTP requests against a real daemon
 * (bodies, cookies, cross-site headers). A target aborts on a finding. */
#define _GNU_SOURCE
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

int main(void)
{
    cd_test_init("test_server_auth_fuzz");
    CHECK(cd_test_replay_corpus("fields", fuzz_fields_one, NULL) > 0, "corpus/fields is empty");
    CHECK(cd_test_replay_corpus("http", fuzz_http_one, NULL) > 0, "corpus/http is empty");
    fuzz_http_teardown();
    return cd_test_finish();
}
