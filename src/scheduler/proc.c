/* What /proc says about a process: start time, command line, working folder, CPU time,
 * memory. */
#include "cdigits/sched.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

/* Reads /proc/<pid>/stat and returns a pointer just after the ")" that ends the
 * command name (which may itself hold spaces and parentheses). */
static char *read_stat(pid_t pid, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, len - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p ? p + 1 : NULL;
}

/* the k-th field (1-based, as in proc(5)) after the command name: field 3 is the state */
static const char *stat_field(const char *rest, int k)
{
    const char *p = rest;
    for (int field = 3; field < k; field++) {
        while (*p == ' ')
            p++;
        while (*p && *p != ' ')
            p++;
    }
    while (*p == ' ')
        p++;
    return *p ? p : NULL;
}

long long proc_start_ticks(pid_t pid)
{
    char buf[2048];
    char *rest = read_stat(pid, buf, sizeof buf);
    if (!rest)
        return -1;
    const char *state = stat_field(rest, 3);
    if (!state || *state == 'Z' || *state == 'X')
        return -1;
    const char *start = stat_field(rest, 22);
    return start ? strtoll(start, NULL, 10) : -1;
}

static int ends_with_name(const char *arg, const char *name)
{
    const char *base = strrchr(arg, '/');
    base = base ? base + 1 : arg;
    return strcmp(base, name) == 0;
}

int proc_runs(pid_t pid, const char *name)
{
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    if (n == 0)
        return 0;
    const char *arg0 = buf;
    const char *arg1 = strlen(arg0) + 1 < n ? arg0 + strlen(arg0) + 1 : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    return ends_with_name(arg0, base) || ends_with_name(arg1, base);
}

int proc_cwd_is(pid_t pid, const char *dir)
{
    char link[64], cwd[PATH_MAX], want[PATH_MAX];
    snprintf(link, sizeof link, "/proc/%d/cwd", (int)pid);
    ssize_t n = readlink(link, cwd, sizeof cwd - 1);
    if (n <= 0 || !realpath(dir, want))
        return 0;
    cwd[n] = 0;
    return strcmp(cwd, want) == 0;
}

int proc_usage(pid_t pid, unsigned long long *cpu_ticks, unsigned long long *rss_bytes)
{
    char buf[2048];
    char *rest = read_stat(pid, buf, sizeof buf);
    if (!rest)
        return CD_ERR;
    const char *ut = stat_field(rest, 14), *st = stat_field(rest, 15), *rss = stat_field(rest, 24);
    if (!ut || !st || !rss)
        return CD_ERR;
    *cpu_ticks = strtoull(ut, NULL, 10) + strtoull(st, NULL, 10);
    long page = sysconf(_SC_PAGESIZE);
    *rss_bytes = strtoull(rss, NULL, 10) * (unsigned long long)(page > 0 ? page : 4096);
    return CD_OK;
}

long proc_ticks_per_sec(void)
{
    long t = sysconf(_SC_CLK_TCK);
    return t > 0 ? t : 100;
}
