/*
 * GPU monitoring through NVML, loaded at run time with dlopen (libnvidia-ml.so.1), so
 * the server links no CUDA library and runs where there is none: without NVML (or
 * without GPUs) the GPU list is empty and nothing is an error.
 */
#ifndef CDIGITS_SERVER_HW_H
#define CDIGITS_SERVER_HW_H

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
 * GPUs ("libnvidia-ml.so.1 not found"). NULL only when out of memory. */
cd_hw_t *hw_open(char *why, size_t whylen);
void hw_close(cd_hw_t *hw); /* accepts NULL */
int hw_gpu_count(cd_hw_t *hw);
/* Fills up to max entries; returns how many. Thread-safe. */
int hw_gpu_query(cd_hw_t *hw, cd_gpu_info_t *out, int max);
/* [{index, name, memory: {used, total}, utilization: {gpu, memory}, temperature}] */
json_t *hw_gpus_json(cd_hw_t *hw);

#ifdef __cplusplus
}
#endif
#endif
