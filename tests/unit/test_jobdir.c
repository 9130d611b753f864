/* The job folder's names and snapshot rules (cdigits/jobdir.h) on a temporary folder of
 * files made here: random iterations, some without their solver state (incomplete
 * pairs), gaps, names that only look like snapshots, epoch snapshots, the .epoch files
 * beside snapshots (present, missing, damaged, orphan), and the epoch rule against values
 * as a person types them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cdigits/jobdir.h"
#include "cdigits/util.h"
#include "testutil.h"

static void touch(const char *dir, const char *name)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot create %s", path);
    if (f) {
        fputs("x", f);
        fclose(f);
    }
}

static void test_names(void)
{
    char buf[64];
    CHECK(!strcmp(jobdir_name(JOBDIR_TRAIN_JSON), "train.json"), "train.json");
    CHECK(!strcmp(jobdir_name(JOBDIR_LABELS), "labels.txt"), "labels.txt");
    CHECK(!strcmp(jobdir_name(JOBDIR_MEAN_BIN), "mean.bin"), "mean.bin");
    CHECK(jobdir_name(JOBDIR_FILE_COUNT) == NULL, "out of range gives NULL");
    static const char *const dbs[] = {"train.db", "val.db", "test.db"};
    for (int split = 0; split < 3; split++)
        CHECK(!strcmp(jobdir_name(JOBDIR_TRAIN_DB + split), dbs[split]), "split %d's records: %s", split, dbs[split]);
    CHECK(jobdir_is_weights("snapshot_iter_12.cdw") && !jobdir_is_weights(".cdw") &&
              !jobdir_is_weights("snapshot_iter_12.solverstate") && !jobdir_is_weights("a.cdw.txt"),
          "a weights file is named by its .cdw extension");
    for (int f = 0; f < JOBDIR_FILE_COUNT; f++)
        CHECK(jobdir_name((jobdir_file)f) != NULL, "file %d has a name", f);
    CHECK(jobdir_path("/j", JOBDIR_MEAN_BIN, buf, sizeof buf) == CD_OK && !strcmp(buf, "/j/mean.bin"), "%s", buf);
    CHECK(jobdir_path("/a/long/folder", JOBDIR_TRAIN_JSON, buf, 8) == CD_ERR && buf[0] == 0, "truncation refused");
    CHECK(jobdir_snapshot_name(1200, JOBDIR_WEIGHTS, buf, sizeof buf) == CD_OK &&
              !strcmp(buf, "snapshot_iter_1200.cdw"), "%s", buf);
    CHECK(jobdir_snapshot_path("/j", 7, JOBDIR_STATE, buf, sizeof buf) == CD_OK &&
              !strcmp(buf, "/j/snapshot_iter_7.solverstate"), "%s", buf);
}

static void test_scan(void)
{
    const char *dir = cd_test_tmpdir();
    enum { N = 12 };
    long iters[N];
    int state[N], nstate = 0;
    long it = 0, newest_any = 0, newest_full = 0;
    for (int i = 0; i < N; i++) {
        it += 1 + (long)(cd_test_rand_u64() % 500); /* gaps of random size */
        iters[i] = it;
        state[i] = cd_test_rand_u64() % 3 != 0;
        char name[64];
        jobdir_snapshot_name(it, JOBDIR_WEIGHTS, name, sizeof name);
        touch(dir, name);
        if (state[i]) {
            jobdir_snapshot_name(it, JOBDIR_STATE, name, sizeof name);
            touch(dir, name);
            nstate++;
            newest_full = it;
        }
        newest_any = it;
    }
    /* a state without weights, names that only look like snapshots, and one by epoch */
    char name[64];
    snprintf(name, sizeof name, "snapshot_iter_%ld.solverstate", it + 10);
    touch(dir, name);
    touch(dir, "snapshot_iter_5.cdw.tmp");
    touch(dir, "snapshot_iter_.cdw");
    touch(dir, "snapshot_iter_9x.cdw");
    touch(dir, "snapshot_epoch_3.cdw");
    touch(dir, "snapshot_epoch_3.solverstate");

    jobdir_snapshot s[64];
    int n = jobdir_snapshots(dir, JOBDIR_ITER_ONLY, s, 64);
    CHECK(n == N, "iteration snapshots: %d, want %d", n, N);
    for (int i = 0; i < n && i < N; i++) {
        CHECK(s[i].number == iters[i] && s[i].by_iteration, "snapshot %d is %lld, want %ld", i, s[i].number, iters[i]);
        CHECK(s[i].has_state == state[i], "snapshot %ld: has_state %d, want %d", iters[i], s[i].has_state, state[i]);
    }
    n = jobdir_snapshots(dir, JOBDIR_ITER_ONLY | JOBDIR_NEED_STATE, s, 64);
    CHECK(n == nstate, "complete iteration snapshots: %d, want %d", n, nstate);
    n = jobdir_snapshots(dir, JOBDIR_NEED_STATE, s, 64);
    CHECK(n == nstate + 1, "complete snapshots of both kinds: %d, want %d", n, nstate + 1);
    CHECK(jobdir_snapshots(dir, 0, s, 3) == 3, "max is kept");

    jobdir_snapshot one;
    CHECK(jobdir_snapshot_newest(dir, JOBDIR_ITER_ONLY, &one) && one.number == newest_any, "newest weights %lld, want %ld",
          one.number, newest_any);
    int have = jobdir_snapshot_newest(dir, JOBDIR_ITER_ONLY | JOBDIR_NEED_STATE, &one);
    CHECK(have == (newest_full > 0) && (!have || one.number == newest_full), "newest complete %lld, want %ld",
          have ? one.number : 0, newest_full);
    if (have) {
        char want[64];
        jobdir_snapshot_name(newest_full, JOBDIR_WEIGHTS, want, sizeof want);
        CHECK(!strcmp(one.file, want), "file %s, want %s", one.file, want);
    }
    for (int i = 0; i < n; i++)
        CHECK(s[i].by_iteration ? s[i].epoch == -1 : s[i].epoch == (double)s[i].number,
              "%s: epoch %g without a .epoch file", s[i].file, s[i].epoch);
    CHECK(jobdir_snapshots("/nonexistent/jobdir", 0, s, 64) == 0, "a missing folder has none");
    CHECK(!jobdir_snapshot_newest("/nonexistent/jobdir", 0, &one), "a missing folder has no newest");
}

/* .epoch files: written and read back exactly, read by the scan for the snapshot beside
 * them, and a missing, empty, damaged or orphan one is an unknown epoch. */
static void test_epoch_files(void)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/epochs", cd_test_tmpdir()); /* apart from test_scan's files */
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
    enum { N = 8 };
    long iters[N];
    double epochs[N];
    int written[N];
    long it = 0;
    double per_epoch = 3 + (double)(cd_test_rand_u64() % 997); /* iterations per epoch */
    for (int i = 0; i < N; i++) {
        it += 1 + (long)(cd_test_rand_u64() % 300);
        iters[i] = it;
        epochs[i] = (double)it / per_epoch;
        written[i] = i == 0 || cd_test_rand_u64() % 4 != 0; /* some saved without one */
        char name[64];
        jobdir_snapshot_name(it, JOBDIR_WEIGHTS, name, sizeof name);
        touch(dir, name);
        if (written[i])
            CHECK(jobdir_snapshot_epoch_write(dir, it, epochs[i]) == CD_OK, "write the epoch of %ld", it);
    }
    char name[64];
    CHECK(jobdir_snapshot_name(7, JOBDIR_EPOCH, name, sizeof name) == CD_OK && !strcmp(name, "snapshot_iter_7.epoch"),
          "%s", name);
    CHECK(jobdir_snapshot_name(7, (jobdir_part)3, name, sizeof name) == CD_ERR, "part out of range refused");
    /* an epoch for a snapshot that is not there names nothing */
    CHECK(jobdir_snapshot_epoch_write(dir, it + 5, 99.0) == CD_OK, "orphan epoch");
    CHECK(jobdir_snapshot_epoch_write(dir, it + 6, -1.0) == CD_ERR, "a negative epoch is refused");

    jobdir_snapshot s[64];
    int n = jobdir_snapshots(dir, JOBDIR_ITER_ONLY, s, 64);
    CHECK(n == N, "snapshots: %d, want %d", n, N);
    for (int i = 0; i < n && i < N; i++) {
        double want = written[i] ? epochs[i] : -1;
        CHECK(s[i].number == iters[i] && s[i].epoch == want, "snapshot %ld: epoch %.17g, want %.17g", iters[i],
              s[i].epoch, want);
        CHECK(jobdir_snapshot_epoch_read(dir, iters[i]) == want, "read %ld", iters[i]);
    }
    /* damaged files: empty, not a number, a number and more */
    static const char *const bad[] = {"", "two\n", "1.5 x\n", "-2\n", "nan\n"};
    for (size_t b = 0; b < sizeof bad / sizeof *bad; b++) {
        char path[4400];
        jobdir_snapshot_path(dir, iters[0], JOBDIR_EPOCH, path, sizeof path);
        CHECK(cd_write_file_atomic(path, bad[b], strlen(bad[b])) == CD_OK, "write %s", path);
        CHECK(jobdir_snapshot_epoch_read(dir, iters[0]) == -1, "\"%s\" is an unknown epoch", bad[b]);
        n = jobdir_snapshots(dir, JOBDIR_ITER_ONLY, s, 64);
        CHECK(n == N && s[0].epoch == -1, "scan of \"%s\": %g", bad[b], n ? s[0].epoch : 0);
    }
    CHECK(jobdir_snapshot_epoch_read(dir, it + 100) == -1, "a missing file is an unknown epoch");
}

static void test_epoch_rule(void)
{
    /* snapshots every 1/3 epoch, as 3 decimals print them */
    double third[6];
    for (int i = 0; i < 6; i++)
        third[i] = (i + 1) / 3.0;
    CHECK(jobdir_epoch_pick(third, 6, "0.667") == 1, "0.667 names 2/3");
    CHECK(jobdir_epoch_pick(third, 6, "0.67") == 1, "0.67 names 2/3");
    CHECK(jobdir_epoch_pick(third, 6, "2") == 5, "2 names epoch 2");
    CHECK(jobdir_epoch_pick(third, 6, "1.0 ") == 2, "trailing space");
    CHECK(jobdir_epoch_pick(third, 6, "0.5") == -1, "0.5 lies between two snapshots");
    CHECK(jobdir_epoch_pick(third, 6, "0.669") == -1, "0.669 is too far from 0.6667");
    CHECK(jobdir_epoch_pick(third, 6, "3") == -1, "no snapshot of epoch 3");
    CHECK(jobdir_epoch_pick(third, 6, "two") == -1, "not a number");
    CHECK(jobdir_epoch_pick(third, 6, "") == -1, "empty");
    CHECK(jobdir_epoch_pick(third, 0, "1") == -1, "no snapshots");
    /* snapshots closer together than 1e-3: each one still named by its own value */
    double close[3] = {1.0, 1.0004, 1.0008};
    CHECK(jobdir_epoch_pick(close, 3, "1.0004") == 1, "1.0004 names the middle one");
    CHECK(jobdir_epoch_pick(close, 3, "1.0002") == -1, "1.0002 is as close to two");
    /* random epochs, each named by its own value printed with 6 decimals */
    double r[20], e = 0;
    for (int i = 0; i < 20; i++)
        r[i] = e += cd_test_uniform(0.01, 2.0);
    for (int i = 0; i < 20; i++) {
        char text[32];
        snprintf(text, sizeof text, "%.6f", r[i]);
        CHECK(jobdir_epoch_pick(r, 20, text) == i, "%s names snapshot %d", text, i);
    }
    double unknown[2] = {-1, 2.0};
    CHECK(jobdir_epoch_pick(unknown, 2, "2") == 1 && jobdir_epoch_pick(unknown, 2, "-1") == -1,
          "an unknown epoch is never named");
}

int main(void)
{
    cd_test_init("test_jobdir");
    test_names();
    test_scan();
    test_epoch_files();
    test_epoch_rule();
    return cd_test_finish();
}
