/* A stand-in for libnvidia-ml.so.1 with the entry points src/server/hw.c loads, for the
 * server's tests on machines without a GPU (CDIGITS_NVML=<this library>). Two GPUs with
 * fixed readings; GPU 1 has a quote in its name and no temperature sensor, as some
 * boards answer NVML_ERROR_NOT_SUPPORTED (3). Built by the test that uses it:
 *   cc -shared -fPIC -o libfakenvml.so tests/shell/fake_nvml.c */
#include <stdio.h>

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

static const struct {
    const char *name;
    unsigned long long total, used;
    unsigned int util, mem_util;
    int temperature; /* -1: not supported */
} g_gpus[] = {
    {"Fake GPU", 16ULL << 30, 3ULL << 30, 37, 12, 61},
    {"Fake \"Q\" GPU", 80ULL << 30, 1ULL << 20, 100, 0, -1},
};
#define NGPUS (sizeof g_gpus / sizeof g_gpus[0])
static char g_handles[NGPUS]; /* a device handle is the address of its byte */

static int index_of(nvmlDevice_t d)
{
    for (unsigned i = 0; i < NGPUS; i++)
        if ((char *)d == &g_handles[i])
            return (int)i;
    return -1;
}

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n)
{
    *n = NGPUS;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
    if (i >= NGPUS)
        return 2; /* NVML_ERROR_INVALID_ARGUMENT */
    *d = (nvmlDevice_t)&g_handles[i];
    return 0;
}
int nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int len)
{
    int i = index_of(d);
    if (i < 0)
        return 2;
    snprintf(name, len, "%s", g_gpus[i].name);
    return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    int i = index_of(d);
    if (i < 0)
        return 2;
    m->total = g_gpus[i].total;
    m->used = g_gpus[i].used;
    m->free = m->total - m->used;
    return 0;
}
int nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
    int i = index_of(d);
    if (i < 0)
        return 2;
    u->gpu = g_gpus[i].util;
    u->memory = g_gpus[i].mem_util;
    return 0;
}
int nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
    int i = index_of(d);
    if (i < 0 || sensor != 0)
        return 2;
    if (g_gpus[i].temperature < 0)
        return 3; /* NVML_ERROR_NOT_SUPPORTED */
    *t = (unsigned int)g_gpus[i].temperature;
    return 0;
}
const char *nvmlErrorString(int rc) { return rc == 3 ? "Not Supported" : rc ? "Invalid Argument" : "Success"; }
