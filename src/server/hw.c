/* NVML through dlopen: the few entry points the server needs, declared here. Why NVML
 * is not there (no library, a symbol missing, a call failing) is kept for the API. */
#include "cdigits/server_hw.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cdigits/util.h"

/* NVML's ABI, as in nvml.h (stable since NVML 5). */
typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
#define NVML_TEMPERATURE_GPU 0

struct cd_hw {
    void *lib;
    pthread_mutex_t lock;
    int count;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    nvmlReturn_t (*device_count)(unsigned int *);
    nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned int *);
    const char *(*error_string)(nvmlReturn_t);
    const char *init_name, *count_name; /* the entry points found (nvmlInit_v2 or nvmlInit) */
    char reason[512];                   /* why NVML is not loaded; "" when it is */
};

static void say(cd_hw_t *hw, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(cd_hw_t *hw, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(hw->reason, sizeof hw->reason, fmt, ap);
    va_end(ap);
}

/* The reason of a failed NVML call: its name, NVML's error string and code. */
static void say_call(cd_hw_t *hw, const char *call, nvmlReturn_t rc)
{
    const char *e = hw->error_string ? hw->error_string(rc) : NULL;
    snprintf(hw->reason, sizeof hw->reason, "%s failed: %s (NVML error %d): no GPU monitoring", call,
             e && e[0] ? e : "unknown error", rc);
}

static cd_hw_t *opened(cd_hw_t *hw, char *why, size_t whylen)
{
    if (why && whylen)
        snprintf(why, whylen, "%s", hw->reason);
    return hw;
}

cd_hw_t *hw_open(char *why, size_t whylen)
{
    cd_hw_t *hw = calloc(1, sizeof *hw);
    if (!hw)
        return NULL;
    pthread_mutex_init(&hw->lock, NULL);
    const char *path = getenv("CDIGITS_NVML");
    if (!path)
        path = "libnvidia-ml.so.1";
    if (!path[0]) {
        say(hw, "NVML disabled (CDIGITS_NVML is empty): no GPU monitoring");
        return opened(hw, why, whylen);
    }
    hw->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!hw->lib) {
        const char *e = dlerror();
        if (e && strstr(e, "No such file"))
            say(hw, "%s not found (no NVIDIA driver): no GPU monitoring", path);
        else
            say(hw, "%s not loaded (%s): no GPU monitoring", path, e ? e : "dlopen gave no reason");
        return opened(hw, why, whylen);
    }
    struct {
        void **slot;
        const char *names[2];
        const char **found;
    } syms[] = {
        {(void **)&hw->init, {"nvmlInit_v2", "nvmlInit"}, &hw->init_name},
        {(void **)&hw->shutdown, {"nvmlShutdown", NULL}, NULL},
        {(void **)&hw->device_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, &hw->count_name},
        {(void **)&hw->handle_by_index, {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, NULL},
        {(void **)&hw->name, {"nvmlDeviceGetName", NULL}, NULL},
        {(void **)&hw->memory, {"nvmlDeviceGetMemoryInfo", NULL}, NULL},
        {(void **)&hw->utilization, {"nvmlDeviceGetUtilizationRates", NULL}, NULL},
        {(void **)&hw->temperature, {"nvmlDeviceGetTemperature", NULL}, NULL},
        {(void **)&hw->error_string, {"nvmlErrorString", NULL}, NULL},
    };
    for (size_t i = 0; i < CD_ARRAY_LEN(syms); i++) {
        for (int k = 0; k < 2 && !*syms[i].slot && syms[i].names[k]; k++) {
            *syms[i].slot = dlsym(hw->lib, syms[i].names[k]);
            if (*syms[i].slot && syms[i].found)
                *syms[i].found = syms[i].names[k];
        }
        if (!*syms[i].slot) {
            say(hw, "%s lacks %s (is it NVML?): no GPU monitoring", path, syms[i].names[0]);
            goto unload;
        }
    }
    nvmlReturn_t rc = hw->init();
    if (rc != 0) {
        say_call(hw, hw->init_name, rc);
        goto unload;
    }
    unsigned int n = 0;
    rc = hw->device_count(&n);
    if (rc != 0) {
        say_call(hw, hw->count_name, rc);
        hw->shutdown();
        goto unload;
    }
    hw->count = (int)n;
    return opened(hw, why, whylen);
unload:
    dlclose(hw->lib);
    hw->lib = NULL;
    hw->count = 0;
    return opened(hw, why, whylen);
}

void hw_close(cd_hw_t *hw)
{
    if (!hw)
        return;
    if (hw->lib) {
        hw->shutdown();
        dlclose(hw->lib);
    }
    pthread_mutex_destroy(&hw->lock);
    free(hw);
}

int hw_gpu_count(cd_hw_t *hw) { return hw ? hw->count : 0; }

int hw_nvml_loaded(const cd_hw_t *hw) { return hw && hw->lib; }

const char *hw_nvml_reason(const cd_hw_t *hw)
{
    if (!hw)
        return "NVML was not opened: no GPU monitoring";
    return hw->lib ? "" : hw->reason;
}

json_t *hw_nvml_json(const cd_hw_t *hw)
{
    json_t *reason = json_string(hw_nvml_reason(hw)); /* NULL for a path that is not UTF-8 */
    return json_pack("{s:b, s:o}", "loaded", hw_nvml_loaded(hw), "reason",
                     reason ? reason : json_string("NVML is not loaded (its path is not UTF-8): no GPU monitoring"));
}

int hw_nvidia_device(const char *dev_dir, char *path, size_t len)
{
    static const char *const nodes[] = {"nvidiactl", "nvidia0"};
    for (size_t i = 0; i < CD_ARRAY_LEN(nodes); i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dev_dir ? dev_dir : "/dev", nodes[i]);
        if (access(p, F_OK) == 0) {
            if (path && len)
                snprintf(path, len, "%s", p);
            return 1;
        }
    }
    if (path && len)
        path[0] = 0;
    return 0;
}

int hw_gpu_query(cd_hw_t *hw, cd_gpu_info_t *out, int max)
{
    if (!hw || !hw->lib)
        return 0;
    int n = 0;
    pthread_mutex_lock(&hw->lock);
    for (int i = 0; i < hw->count && n < max; i++) {
        nvmlDevice_t dev;
        if (hw->handle_by_index((unsigned)i, &dev) != 0)
            continue;
        cd_gpu_info_t *g = &out[n++];
        memset(g, 0, sizeof *g);
        g->index = i;
        if (hw->name(dev, g->name, sizeof g->name) != 0)
            snprintf(g->name, sizeof g->name, "GPU %d", i);
        nvmlMemory_t mem;
        if (hw->memory(dev, &mem) == 0) {
            g->mem_used = mem.used;
            g->mem_total = mem.total;
        }
        nvmlUtilization_t u;
        if (hw->utilization(dev, &u) == 0) {
            g->utilization = (int)u.gpu;
            g->memory_utilization = (int)u.memory;
        } else {
            g->utilization = g->memory_utilization = -1;
        }
        unsigned int temp;
        g->temperature = hw->temperature(dev, NVML_TEMPERATURE_GPU, &temp) == 0 ? (int)temp : -1;
    }
    pthread_mutex_unlock(&hw->lock);
    return n;
}

json_t *hw_gpus_json(cd_hw_t *hw)
{
    cd_gpu_info_t g[64];
    int n = hw_gpu_query(hw, g, 64);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_pack("{s:i, s:s, s:{s:I, s:I}}", "index", g[i].index, "name", g[i].name, "memory", "used",
                              (json_int_t)g[i].mem_used, "total", (json_int_t)g[i].mem_total);
        json_object_set_new(o, "utilization",
                            json_pack("{s:o, s:o}", "gpu",
                                      g[i].utilization >= 0 ? json_integer(g[i].utilization) : json_null(),
                                      "memory",
                                      g[i].memory_utilization >= 0 ? json_integer(g[i].memory_utilization)
                                                                   : json_null()));
        json_object_set_new(o, "temperature", g[i].temperature >= 0 ? json_integer(g[i].temperature) : json_null());
        json_array_append_new(arr, o);
    }
    return arr;
}
