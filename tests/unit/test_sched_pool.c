/* Resource pools: all-or-nothing GPU requests and counted slots, first by example, then
 * random acquire/release sequences against a plain reference model. */
#include <stdio.h>
#include <string.h>

#include "cdigits/sched.h"
#include "testutil.h"

static sched_pool_t make_pool(int ngpus, int cpu)
{
    sched_config_t cfg = {.ngpus = ngpus, .cpu_slots = cpu, .dataset_slots = 1, .inference_slots = 2};
    for (int i = 0; i < ngpus; i++)
        cfg.gpu_ids[i] = i;
    sched_pool_t p;
    pool_init(&p, &cfg);
    return p;
}

static void examples(void)
{
    sched_pool_t p = make_pool(2, 1);
    char why[256];
    int got[SCHED_MAX_GPUS], n;
    sched_req_t one = {.kind = SCHED_RES_GPU, .count = 1};
    sched_req_t both = {.kind = SCHED_RES_GPU, .nids = 2, .ids = {0, 1}};
    CHECK(pool_acquire(&p, &one, "A", got, &n, why, sizeof why) == CD_OK && n == 1 && got[0] == 0, "A gets GPU 0");
    CHECK(pool_acquire(&p, &both, "B", got, &n, why, sizeof why) == CD_ERR, "B waits for GPUs 0 and 1");
    CHECK(strstr(why, "GPU 0") && strstr(why, "job A"), "B says it waits for GPU 0 held by A: %s", why);
    CHECK(pool_gpus_free(&p) == 1, "B took nothing");
    CHECK(pool_acquire(&p, &one, "C", got, &n, why, sizeof why) == CD_OK && got[0] == 1, "C gets GPU 1");
    pool_release(&p, &one, "A");
    CHECK(pool_acquire(&p, &both, "B", got, &n, why, sizeof why) == CD_ERR && strstr(why, "GPU 1"),
          "B still waits, for GPU 1 now: %s", why);
    pool_release(&p, &one, "C");
    CHECK(pool_acquire(&p, &both, "B", got, &n, why, sizeof why) == CD_OK && n == 2, "B gets both");
    sched_req_t three = {.kind = SCHED_RES_GPU, .count = 3};
    CHECK(pool_check(&p, &three, why, sizeof why) == CD_ERR, "3 GPUs of 2 can never be met: %s", why);
    sched_req_t gpu7 = {.kind = SCHED_RES_GPU, .nids = 1, .ids = {7}};
    CHECK(pool_check(&p, &gpu7, why, sizeof why) == CD_ERR && strstr(why, "GPU 7"), "GPU 7 does not exist: %s", why);
    sched_req_t twice = {.kind = SCHED_RES_GPU, .nids = 2, .ids = {1, 1}};
    CHECK(pool_check(&p, &twice, why, sizeof why) == CD_ERR, "a GPU listed twice is refused");
    sched_req_t cpu = {.kind = SCHED_RES_CPU};
    CHECK(pool_acquire(&p, &cpu, "D", got, &n, why, sizeof why) == CD_OK, "one CPU slot");
    CHECK(pool_acquire(&p, &cpu, "E", got, &n, why, sizeof why) == CD_ERR && strstr(why, "CPU"), "no second: %s", why);
    pool_release(&p, &cpu, "D");
    CHECK(pool_acquire(&p, &cpu, "E", got, &n, why, sizeof why) == CD_OK, "E after D");
    sched_pool_t none = make_pool(0, 1);
    CHECK(pool_check(&none, &one, why, sizeof why) == CD_ERR, "a GPU on a machine without GPUs can never be met");
}

/* Random sequences: the reference is an owner per GPU and a count per slot kind. */
static void random_sequences(void)
{
    for (int round = 0; round < 200; round++) {
        int ngpus = 1 + (int)(cd_test_rand_u64() % 8), cpu = 1 + (int)(cd_test_rand_u64() % 3);
        sched_pool_t p = make_pool(ngpus, cpu);
        int owner[SCHED_MAX_GPUS];
        int cpu_used = 0;
        memset(owner, -1, sizeof owner);
        sched_req_t reqs[16];
        int held[16] = {0};
        for (int j = 0; j < 16; j++) {
            memset(&reqs[j], 0, sizeof reqs[j]);
            if (cd_test_rand_u64() % 4 == 0) {
                reqs[j].kind = SCHED_RES_CPU;
            } else if (cd_test_rand_u64() % 2) {
                reqs[j].kind = SCHED_RES_GPU;
                reqs[j].count = 1 + (int)(cd_test_rand_u64() % ngpus);
            } else {
                reqs[j].kind = SCHED_RES_GPU;
                int k = 1 + (int)(cd_test_rand_u64() % ngpus);
                int start = (int)(cd_test_rand_u64() % ngpus);
                for (int i = 0; i < k; i++)
                    reqs[j].ids[reqs[j].nids++] = (start + i) % ngpus;
            }
        }
        for (int step = 0; step < 100; step++) {
            int j = (int)(cd_test_rand_u64() % 16);
            char name[8], why[256];
            snprintf(name, sizeof name, "j%d", j);
            int got[SCHED_MAX_GPUS], n = 0;
            if (held[j]) {
                pool_release(&p, &reqs[j], name);
                if (reqs[j].kind == SCHED_RES_CPU)
                    cpu_used--;
                for (int g = 0; g < ngpus; g++)
                    if (owner[g] == j)
                        owner[g] = -1;
                held[j] = 0;
                continue;
            }
            int free_gpus = 0, ids_free = 1;
            for (int g = 0; g < ngpus; g++)
                free_gpus += owner[g] < 0;
            for (int i = 0; i < reqs[j].nids; i++)
                ids_free &= owner[reqs[j].ids[i]] < 0;
            int expect = reqs[j].kind == SCHED_RES_CPU ? cpu_used < cpu
                         : reqs[j].nids               ? ids_free
                                                      : free_gpus >= reqs[j].count;
            int rc = pool_acquire(&p, &reqs[j], name, got, &n, why, sizeof why);
            CHECK((rc == CD_OK) == expect, "round %d step %d: acquire %s gave %d, reference %d", round, step, name,
                  rc, expect);
            if (rc != CD_OK)
                continue;
            held[j] = 1;
            if (reqs[j].kind == SCHED_RES_CPU) {
                cpu_used++;
                CHECK(n == 0, "a slot hands out no GPU");
                continue;
            }
            int want = reqs[j].nids ? reqs[j].nids : reqs[j].count;
            CHECK(n == want, "all or nothing: got %d of %d", n, want);
            for (int i = 0; i < n; i++) {
                CHECK(owner[got[i]] < 0, "GPU %d handed out twice", got[i]);
                owner[got[i]] = j;
            }
            CHECK(pool_gpus_free(&p) == free_gpus - n, "free count follows");
        }
    }
}

int main(void)
{
    cd_test_init("test_sched_pool");
    examples();
    random_sequences();
    return cd_test_finish();
}
