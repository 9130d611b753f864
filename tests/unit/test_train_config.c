/* The train command's options over train.json (cd_train_config_args): --resume, --gpus
 * and --backend replace their keys, a train.json without them keeps its own values
 * ("resume": true by hand still resumes), and every bad option is refused with a
 * message that names it. The GPU lists are drawn at random and compared with the same
 * list given in train.json. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cdigits/backend_select.h"
#include "cdigits/train.h"
#include "cdigits/util.h"
#include "testutil.h"

static int load(const char *json, cd_train_config *c, char *err, size_t errlen)
{
    if (cd_test_write("train.json", json) != CD_OK)
        return CD_ERR;
    cd_train_config_init(c);
    return cd_train_config_load(c, cd_test_tmpdir(), err, errlen);
}

/* Loads json, then applies the options (a NULL-terminated list). */
static int load_with(const char *json, cd_train_config *c, char *err, size_t errlen, ...)
{
    char *argv[16];
    int argc = 0;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; argc < 15 && (a = va_arg(ap, char *)) != NULL;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    if (load(json, c, err, errlen) != CD_OK)
        return -1;
    return cd_train_config_args(c, argc, argv, err, errlen);
}

/* Without options train.json decides; "resume": true written by hand still resumes. */
static void test_file_alone(void)
{
    cd_train_config c;
    char err[1024] = "";
    CHECK(load_with("{\"dataset_dir\": \"d\", \"gpus\": [3, 1], \"backend\": \"cuda\", \"resume\": true}", &c, err,
                    sizeof err, NULL) == CD_OK,
          "load: %s", err);
    CHECK(c.resume == 1 && c.ngpus == 2 && c.gpus[0] == 3 && c.gpus[1] == 1 && c.backend == CD_BACKEND_CUDA,
          "train.json alone: resume %d, %d GPUs, backend %d", c.resume, c.ngpus, c.backend);
    CHECK(load_with("{\"dataset_dir\": \"d\"}", &c, err, sizeof err, NULL) == CD_OK, "load: %s", err);
    CHECK(c.resume == 0 && c.ngpus == 0 && c.backend == CD_BACKEND_AUTO, "defaults: resume %d, %d GPUs, backend %d",
          c.resume, c.ngpus, c.backend);
}

/* Random GPU lists: --gpus gives what the same list in train.json gives, and replaces
 * the file's list instead of adding to it. */
static void test_gpus(void)
{
    for (int round = 0; round < 20; round++) {
        int n = 1 + (int)(cd_test_rand_u64() % 16), ids[16];
        char list[256] = "", json[512];
        for (int i = 0; i < n; i++) {
            int id, dup;
            do {
                id = (int)(cd_test_rand_u64() % 1024);
                dup = 0;
                for (int k = 0; k < i; k++)
                    dup |= ids[k] == id;
            } while (dup);
            ids[i] = id;
            size_t used = strlen(list);
            snprintf(list + used, sizeof list - used, "%s%d", i ? "," : "", id);
        }
        snprintf(json, sizeof json, "{\"dataset_dir\": \"d\", \"gpus\": [%s]}", list);
        cd_train_config from_file, from_args;
        char err[1024] = "";
        CHECK(load(json, &from_file, err, sizeof err) == CD_OK, "%s: %s", json, err);
        CHECK(load_with("{\"dataset_dir\": \"d\", \"gpus\": [7, 8, 9]}", &from_args, err, sizeof err, "--gpus", list,
                        NULL) == CD_OK,
              "--gpus %s: %s", list, err);
        int same = from_file.ngpus == n && from_args.ngpus == n;
        for (int i = 0; same && i < n; i++)
            same = from_file.gpus[i] == ids[i] && from_args.gpus[i] == ids[i];
        CHECK(same, "--gpus %s: %d GPUs from the file, %d from the option", list, from_file.ngpus, from_args.ngpus);
        CHECK(from_args.backend == CD_BACKEND_AUTO && from_args.resume == 0,
              "--gpus alone leaves backend (%d) and resume (%d)", from_args.backend, from_args.resume);
    }
}

/* --resume and --backend override what train.json says, in any order. */
static void test_overrides(void)
{
    static const char *file = "{\"dataset_dir\": \"d\", \"backend\": \"cpu\", \"gpus\": [], \"resume\": false}";
    cd_train_config c;
    char err[1024] = "";
    CHECK(load_with(file, &c, err, sizeof err, "--backend", "cuda", "--resume", "--gpus", "1,0", NULL) == CD_OK,
          "options: %s", err);
    CHECK(c.resume == 1 && c.backend == CD_BACKEND_CUDA && c.ngpus == 2 && c.gpus[0] == 1 && c.gpus[1] == 0,
          "--backend cuda --resume --gpus 1,0: resume %d, backend %d, %d GPUs", c.resume, c.backend, c.ngpus);
    CHECK(load_with("{\"dataset_dir\": \"d\", \"backend\": \"cuda\"}", &c, err, sizeof err, "--backend", "CPU",
                    NULL) == CD_OK &&
              c.backend == CD_BACKEND_CPU,
          "--backend CPU over cuda: backend %d (%s)", c.backend, err);
    CHECK(load_with(file, &c, err, sizeof err, "--backend", "auto", NULL) == CD_OK && c.backend == CD_BACKEND_AUTO,
          "--backend auto over cpu: backend %d (%s)", c.backend, err);
}

/* Every bad option is refused, the message naming it. */
static void test_errors(void)
{
    static const struct {
        const char *args[4];
        const char *names; /* the message must contain this */
    } cases[] = {
        {{"--gpus", "0,1,0"}, "--gpus lists GPU 0 twice"},
        {{"--gpus", "-1"}, "--gpus -1"},
        {{"--gpus", "1024"}, "--gpus 1024"},
        {{"--gpus", ""}, "--gpus"},
        {{"--gpus", "0,"}, "--gpus 0,"},
        {{"--gpus", "0,,1"}, "--gpus 0,,1"},
        {{"--gpus", "1 2"}, "--gpus 1 2"},
        {{"--gpus", "0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16"}, "up to 16"},
        {{"--gpus"}, "--gpus needs a value"},
        {{"--backend", "tpu"}, "--backend tpu"},
        {{"--backend"}, "--backend needs a value"},
        {{"--resum"}, "--resum is not an option"},
        {{"--resume", "--epochs", "3"}, "--epochs is not an option"},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(cases); i++) {
        cd_train_config c;
        char err[1024] = "";
        int argc = 0;
        while (argc < 4 && cases[i].args[argc])
            argc++;
        int rc = load("{\"dataset_dir\": \"d\"}", &c, err, sizeof err);
        CHECK(rc == CD_OK, "load: %s", err);
        rc = cd_train_config_args(&c, argc, (char **)cases[i].args, err, sizeof err);
        CHECK(rc != CD_OK && strstr(err, cases[i].names), "%s %s: refused naming it (\"%s\"): rc %d, \"%s\"",
              cases[i].args[0], cases[i].args[1] ? cases[i].args[1] : "", cases[i].names, rc, err);
    }
}

int main(void)
{
    cd_test_init("test_train_config");
    test_file_alone();
    test_gpus();
    test_overrides();
    test_errors();
    return cd_test_finish();
}
