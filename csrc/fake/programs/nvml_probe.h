/* Shared body of the NVML probes: nvml_probe (dlopen("libnvidia-ml.so.1") + dlsym of every
 * function, as pynvml and nvidia-smi do) and direct_nvml_probe (linked against
 * libnvidia-ml.so.1, calls the exported names).  Each fills `struct nvml` in nvml_load().
 *
 *   <probe> [--cuda-alloc B] [--again]
 *
 * Prints one JSON line: for every GPU NVML lists, its UUID, nvmlDeviceGetMemoryInfo and _v2,
 * and its process lists (compute v1 / v2 / v3 with the count asked first, the detail list,
 * graphics v3).  --cuda-alloc B: first initialise CUDA on device 0 (through dlopen of
 * libcuda.so.1), allocate B bytes and add what cuMemGetInfo says.  --again: then wait for a
 * line on stdin and print the NVML part once more.  Exit status 0 unless NVML cannot be loaded
 * or initialised. */
#ifndef GEMINI_NVML_PROBE_H
#define GEMINI_NVML_PROBE_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gemini/cuda_subset.h"
#include "gemini/nvml_subset.h"

#define NVML_API(X)                                                                              \
    X(nvmlInit_v2) X(nvmlShutdown) X(nvmlDeviceGetCount_v2) X(nvmlDeviceGetHandleByIndex_v2)     \
        X(nvmlDeviceGetUUID) X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)            \
            X(nvmlDeviceGetComputeRunningProcesses) X(nvmlDeviceGetComputeRunningProcesses_v2)   \
                X(nvmlDeviceGetComputeRunningProcesses_v3)                                       \
                    X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                  \
                        X(nvmlDeviceGetRunningProcessDetailList)

struct nvml {
#define NVML_FIELD(sym) __typeof__(&sym) sym;
    NVML_API(NVML_FIELD)
#undef NVML_FIELD
};

static int nvml_load(struct nvml *n);

#define ROOM 64

static void print_list_v1(const char *key, nvmlReturn_t r, unsigned int count,
                          const nvmlProcessInfo_v1_t *p)
{
    printf(", \"%s\": {\"rc\": %d, \"procs\": [", key, (int)r);
    for (unsigned int i = 0; r == NVML_SUCCESS && i < count; i++)
        printf("%s[%u, %llu]", i ? ", " : "", p[i].pid, p[i].usedGpuMemory);
    printf("]}");
}

static void print_list_v2(const char *key, nvmlReturn_t r, unsigned int count,
                          const nvmlProcessInfo_v2_t *p)
{
    printf(", \"%s\": {\"rc\": %d, \"procs\": [", key, (int)r);
    for (unsigned int i = 0; r == NVML_SUCCESS && i < count; i++)
        printf("%s[%u, %llu]", i ? ", " : "", p[i].pid, p[i].usedGpuMemory);
    printf("]}");
}

static void probe_gpu(const struct nvml *n, unsigned int index)
{
    nvmlDevice_t h = NULL;
    nvmlReturn_t r = n->nvmlDeviceGetHandleByIndex_v2(index, &h);
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = "";
    if (r == NVML_SUCCESS)
        n->nvmlDeviceGetUUID(h, uuid, sizeof uuid);
    printf("{\"index\": %u, \"uuid\": \"%s\"", index, uuid);

    nvmlMemory_t m = {0};
    r = n->nvmlDeviceGetMemoryInfo(h, &m);
    printf(", \"mem\": {\"rc\": %d, \"total\": %llu, \"free\": %llu, \"used\": %llu}", (int)r,
           m.total, m.free, m.used);
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    r = n->nvmlDeviceGetMemoryInfo_v2(h, &m2);
    printf(", \"mem_v2\": {\"rc\": %d, \"total\": %llu, \"reserved\": %llu, \"free\": %llu, "
           "\"used\": %llu}",
           (int)r, m2.total, m2.reserved, m2.free, m2.used);

    /* v3 as nvidia-ml-py does it: ask the count with no room, then fetch */
    unsigned int count = 0;
    r = n->nvmlDeviceGetComputeRunningProcesses_v3(h, &count, NULL);
    printf(", \"count_rc\": %d, \"count\": %u", (int)r, count);
    nvmlProcessInfo_v2_t v2[ROOM];
    nvmlProcessInfo_v1_t v1[ROOM];
    count = ROOM;
    r = n->nvmlDeviceGetComputeRunningProcesses_v3(h, &count, v2);
    print_list_v2("compute_v3", r, count, v2);
    count = ROOM;
    r = n->nvmlDeviceGetComputeRunningProcesses_v2(h, &count, v2);
    print_list_v2("compute_v2", r, count, v2);
    count = ROOM;
    r = n->nvmlDeviceGetComputeRunningProcesses(h, &count, v1);
    print_list_v1("compute_v1", r, count, v1);
    count = ROOM;
    r = n->nvmlDeviceGetGraphicsRunningProcesses_v3(h, &count, v2);
    print_list_v2("graphics_v3", r, count, v2);

    nvmlProcessDetail_v1_t detail[ROOM];
    nvmlProcessDetailList_v1_t list = {.version = nvmlProcessDetailList_v1,
                                       .mode = NVML_PROCESS_MODE_COMPUTE,
                                       .numProcArrayEntries = ROOM,
                                       .procArray = detail};
    r = n->nvmlDeviceGetRunningProcessDetailList(h, &list);
    printf(", \"detail\": {\"rc\": %d, \"procs\": [", (int)r);
    for (unsigned int i = 0; r == NVML_SUCCESS && i < list.numProcArrayEntries; i++)
        printf("%s[%u, %llu]", i ? ", " : "", detail[i].pid, detail[i].usedGpuMemory);
    printf("]}}");
}

static void probe_all(const struct nvml *n)
{
    unsigned int count = 0;
    nvmlReturn_t r = n->nvmlDeviceGetCount_v2(&count);
    printf("\"count_rc\": %d, \"gpus\": [", (int)r);
    for (unsigned int i = 0; r == NVML_SUCCESS && i < count; i++) {
        printf("%s", i ? ", " : "");
        probe_gpu(n, i);
    }
    printf("]");
}

/* Initialise CUDA on device 0 and allocate `bytes`; prints the "cuda" member. */
static void cuda_alloc(unsigned long long bytes)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    __typeof__(&cuInit) init = lib ? (__typeof__(&cuInit))dlsym(lib, "cuInit") : NULL;
    __typeof__(&cuDeviceGet) get = lib ? (__typeof__(&cuDeviceGet))dlsym(lib, "cuDeviceGet")
                                       : NULL;
    __typeof__(&cuDevicePrimaryCtxRetain) retain =
        lib ? (__typeof__(&cuDevicePrimaryCtxRetain))dlsym(lib, "cuDevicePrimaryCtxRetain")
            : NULL;
    __typeof__(&cuCtxSetCurrent) set =
        lib ? (__typeof__(&cuCtxSetCurrent))dlsym(lib, "cuCtxSetCurrent") : NULL;
    __typeof__(&cuMemAlloc_v2) alloc =
        lib ? (__typeof__(&cuMemAlloc_v2))dlsym(lib, "cuMemAlloc_v2") : NULL;
    __typeof__(&cuMemGetInfo_v2) info =
        lib ? (__typeof__(&cuMemGetInfo_v2))dlsym(lib, "cuMemGetInfo_v2") : NULL;
    CUresult rc = CUDA_ERROR_NOT_FOUND;
    size_t fr = 0, tot = 0;
    if (init && get && retain && set && alloc && info) {
        CUdevice d = 0;
        CUcontext ctx = NULL;
        CUdeviceptr p = 0;
        rc = init(0);
        if (rc == CUDA_SUCCESS)
            rc = get(&d, 0);
        if (rc == CUDA_SUCCESS)
            rc = retain(&ctx, d);
        if (rc == CUDA_SUCCESS)
            rc = set(ctx);
        if (rc == CUDA_SUCCESS && bytes > 0)
            rc = alloc(&p, bytes);
        if (rc == CUDA_SUCCESS)
            rc = info(&fr, &tot);
    }
    printf("\"cuda\": {\"rc\": %d, \"free\": %zu, \"total\": %zu}, ", (int)rc, fr, tot);
}

static int probe_main(int argc, char **argv)
{
    long long cuda_bytes = -1;
    int again = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--cuda-alloc") == 0 && i + 1 < argc)
            cuda_bytes = strtoll(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--again") == 0)
            again = 1;
        else {
            fprintf(stderr, "usage: %s [--cuda-alloc BYTES] [--again]\n", argv[0]);
            return 2;
        }
    }
    struct nvml n;
    if (nvml_load(&n) != 0)
        return 1;
    nvmlReturn_t r = n.nvmlInit_v2();
    if (r != NVML_SUCCESS) {
        fprintf(stderr, "nvmlInit_v2: %d\n", (int)r);
        return 1;
    }
    printf("{\"pid\": %d, ", (int)getpid());
    if (cuda_bytes >= 0)
        cuda_alloc((unsigned long long)cuda_bytes);
    probe_all(&n);
    printf("}\n");
    fflush(stdout);
    if (again) {
        char line[64];
        if (fgets(line, sizeof line, stdin) == NULL) {
            /* stdin closed: go on all the same */
        }
        printf("{\"pid\": %d, ", (int)getpid());
        probe_all(&n);
        printf("}\n");
        fflush(stdout);
    }
    n.nvmlShutdown();
    return 0;
}

#endif
