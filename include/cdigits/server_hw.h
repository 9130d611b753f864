/*
 * GPU monitoring through NVML, loaded at run time with dlopen (libnvidia-ml.so.1), so
 * the server links no CUDA library and runs where there is none. Without NVML the GPU
 * list is empty, and hw_nvml_reason says why (the library not found, a symbol it lacks,
 * or the NVML call that failed with NVML's error string), for /hardware/json, the
 * server's log and the model form's GPU errors.
 */
#ifndef CDIGITS_SERVER_HW_H
#define CDIGITS_SERVER_HW_H

#include <stddef.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cd_hw cd_hw_t;

typedef struct cd_gpu_info {
    int index;                      /* NVML index (PCI bus order) */
    char name[96];
    unsigned long long mem_used;    /* bytes */
    unsigned long long mem_total;
    int utilization;                /* percent, -1 when NVML cannot tell */
    int memory_utilization;         /* percent, -1 when unknown */
    int temperature;                /* degrees C, -1 when unknown */
} cd_gpu_info_t;

/* Never fails for a missing library: *why (may be NULL) then says why there are no
 * GPUs ("libnvidia-ml.so.1 not found (no NVIDIA driver): no GPU monitoring"), as
 * hw_nvml_reason does. CDIGITS_NVML names another library ("" turns NVML off). NULL
 * only when out of memory. */
cd_hw_t *hw_open(char *why, size_t whylen);
void hw_close(cd_hw_t *hw); /* accepts NULL */
int hw_gpu_count(cd_hw_t *hw);
/* 1 when NVML loaded and answered nvmlInit and nvmlDeviceGetCount (0 GPUs included). */
int hw_nvml_loaded(const cd_hw_t *hw);
/* Why NVML is not loaded (never empty then); "" when it is. Owned by hw. */
const char *hw_nvml_reason(const cd_hw_t *hw);
/* {"loaded": true|false, "reason": "..."} */
json_t *hw_nvml_json(const cd_hw_t *hw);
/* 1 when dev_dir (NULL: /dev) has an NVIDIA device node (nvidiactl or nvidia0), a
 * driver whose NVML should load; its path goes to path (may be NULL). */
int hw_nvidia_device(const char *dev_dir, char *path, size_t len);
/* Fills up to max entries; returns how many. Thread-safe. */
int hw_gpu_query(cd_hw_t *hw, cd_gpu_info_t *out, int max);
/* [{index, name, memory: {used, total}, utilization: {gpu, memory}, temperature}] */
json_t *hw_gpus_json(cd_hw_t *hw);

#ifdef __cplusplus
}
#endif
#endif
