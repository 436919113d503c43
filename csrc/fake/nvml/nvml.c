/* A fake libnvidia-ml.so.1 for tests: the fake driver's simulated GPUs as NVML shows a machine.
 *
 * GPUs: GEMINI_FAKE_DEVICES of them (NVML ignores CUDA_VISIBLE_DEVICES), indexed like the
 * shared segment, with the fake's UUIDs.  Memory: the segment's total and used bytes of the GPU
 * (every process's allocations).  Compute processes: the live processes that hold memory on the
 * GPU, with the bytes they hold.  Graphics and MPS processes: none.  The SM clock: see
 * nvmlDeviceGetClockInfo.
 *
 * It reads the segment through the fake driver's control API (fake_extra.h), so it needs the
 * fake libcuda.so.1 beside it (DT_NEEDED, found through $ORIGIN); loading it initialises no
 * CUDA.  Only what the hook intercepts or calls, and what a probe needs to find a GPU, exists. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../fake_extra.h"
#include "gemini/nvml_subset.h"

#define MAX_GPUS 8
#define MAX_LIST 256

struct nvmlDevice_st {
    unsigned int index;
};

static struct nvmlDevice_st gpus[MAX_GPUS] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}};
static _Atomic int init_count;

static int gpu_count(void)
{
    int n = fake_gpu_count();
    return n > MAX_GPUS ? MAX_GPUS : n;
}

/* NVML_SUCCESS and the device's index, or why not. */
static nvmlReturn_t check(nvmlDevice_t device, int *index)
{
    if (atomic_load(&init_count) <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device < &gpus[0] || device >= &gpus[gpu_count()])
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (int)device->index;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void)
{
    atomic_fetch_add(&init_count, 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void)
{
    return nvmlInit_v2();
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    return nvmlInit_v2();
}

nvmlReturn_t nvmlShutdown(void)
{
    if (atomic_load(&init_count) <= 0)
        return NVML_ERROR_UNINITIALIZED;
    atomic_fetch_sub(&init_count, 1);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (atomic_load(&init_count) <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (deviceCount == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = (unsigned int)gpu_count();
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (atomic_load(&init_count) <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= (unsigned int)gpu_count())
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &gpus[index];
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    if (atomic_load(&init_count) <= 0)
        return NVML_ERROR_UNINITIALIZED;
    if (uuid == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < gpu_count(); i++) {
        char mine[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
        fake_gpu_uuid(i, mine, sizeof mine);
        if (strcasecmp(mine, uuid) == 0) {
            *device = &gpus[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    int i = 0;
    nvmlReturn_t r = check(device, &i);
    if (r == NVML_SUCCESS && index == NULL)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *index = (unsigned int)i;
    return r;
}

static nvmlReturn_t copy_text(char *out, unsigned int length, const char *text)
{
    if (out == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(text) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, text, strlen(text) + 1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    int i = 0;
    nvmlReturn_t r = check(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    fake_gpu_uuid(i, text, sizeof text);
    return copy_text(uuid, length, text);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i = 0;
    nvmlReturn_t r = check(device, &i);
    return r != NVML_SUCCESS ? r : copy_text(name, length, "Gemini Fake GPU");
}

/* ---- clock --------------------------------------------------------------------------------- */

/* A whole number > 0 from the environment, or `fallback`. */
static unsigned int env_mhz(const char *name, unsigned int fallback)
{
    const char *text = getenv(name);
    long v = text != NULL ? strtol(text, NULL, 10) : 0;
    return v > 0 ? (unsigned int)v : fallback;
}

/* A power-limited GPU's SM clock, as a step: GEMINI_FAKE_SM_MHZ (1410) while the GPU runs
 * kernels with its clock settled (fake_clock_boosted: GEMINI_FAKE_SM_SETTLE_MS into a run, or
 * by GEMINI_FAKE_SM_SWING_MS), GEMINI_FAKE_SM_PEAK_MHZ (the same clock: no boost unless asked
 * for) otherwise, idle included.  The fake's kernels run faster
 * so too where the launching process has the same variables (timeline.c); a gap under 1 ms
 * does not end a run.
 * NVML_SUCCESS and the GPU's index and both clocks (MHz), or why not. */
static nvmlReturn_t clocks(nvmlDevice_t device, int type, unsigned int *clock, int *index,
                           unsigned int *settled, unsigned int *peak)
{
    nvmlReturn_t r = check(device, index);
    if (r != NVML_SUCCESS)
        return r;
    if (clock == NULL || (type != NVML_CLOCK_SM && type != NVML_CLOCK_GRAPHICS))
        return NVML_ERROR_INVALID_ARGUMENT;
    *settled = env_mhz("GEMINI_FAKE_SM_MHZ", 1410);
    *peak = env_mhz("GEMINI_FAKE_SM_PEAK_MHZ", *settled);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
    int i = 0;
    unsigned int settled = 0, peak = 0;
    nvmlReturn_t r = clocks(device, type, clock, &i, &settled, &peak);
    if (r != NVML_SUCCESS)
        return r;
    uint64_t now = fake_now_ns();
    int settled_run = fake_busy_until(i) > now && !fake_clock_boosted(fake_busy_since(i), now);
    *clock = settled_run ? settled : peak;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock)
{
    int i = 0;
    unsigned int settled = 0, peak = 0;
    nvmlReturn_t r = clocks(device, type, clock, &i, &settled, &peak);
    if (r == NVML_SUCCESS)
        *clock = peak > settled ? peak : settled;
    return r;
}


/* ---- memory ------------------------------------------------------------------------------- */

static nvmlReturn_t card_memory(nvmlDevice_t device, uint64_t *total, uint64_t *used)
{
    int i = 0;
    nvmlReturn_t r = check(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    *total = fake_mem_total(i);
    *used = fake_mem_used(i);
    if (*used > *total)
        *used = *total;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    uint64_t total = 0, used = 0;
    nvmlReturn_t r = card_memory(device, &total, &used);
    if (r == NVML_SUCCESS && memory == NULL)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS)
        *memory = (nvmlMemory_t){.total = total, .free = total - used, .used = used};
    return r;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    uint64_t total = 0, used = 0;
    nvmlReturn_t r = card_memory(device, &total, &used);
    if (r == NVML_SUCCESS && memory == NULL)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && memory->version != nvmlMemory_v2)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (r == NVML_SUCCESS) {
        /* a real card keeps some for the driver: show some, so that the hook must hide it */
        uint64_t reserved = total / 64;
        if (used + reserved > total)
            reserved = total - used;
        *memory = (nvmlMemory_v2_t){.version = nvmlMemory_v2, .total = total,
                                    .reserved = reserved, .free = total - used - reserved,
                                    .used = used};
    }
    return r;
}

/* ---- processes ---------------------------------------------------------------------------- */

enum layout { LAYOUT_V1, LAYOUT_V2, LAYOUT_DETAIL };

static nvmlReturn_t processes(nvmlDevice_t device, int mode, unsigned int *count, void *infos,
                              enum layout layout)
{
    int i = 0;
    nvmlReturn_t r = check(device, &i);
    if (r != NVML_SUCCESS)
        return r;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    int pids[MAX_LIST];
    uint64_t bytes[MAX_LIST];
    int n = mode == NVML_PROCESS_MODE_COMPUTE ? fake_gpu_processes(i, pids, bytes, MAX_LIST) : 0;
    if (n > MAX_LIST)
        n = MAX_LIST;
    unsigned int room = infos == NULL ? 0 : *count;
    *count = (unsigned int)n;
    if ((unsigned int)n > room)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    for (int k = 0; k < n; k++) {
        unsigned int pid = (unsigned int)pids[k];
        if (layout == LAYOUT_V1)
            ((nvmlProcessInfo_v1_t *)infos)[k] = (nvmlProcessInfo_v1_t){pid, bytes[k]};
        else if (layout == LAYOUT_V2)
            ((nvmlProcessInfo_v2_t *)infos)[k] = (nvmlProcessInfo_v2_t){
                pid, bytes[k], NVML_VALUE_NOT_AVAILABLE_UINT, NVML_VALUE_NOT_AVAILABLE_UINT};
        else
            ((nvmlProcessDetail_v1_t *)infos)[k] = (nvmlProcessDetail_v1_t){
                pid, bytes[k], NVML_VALUE_NOT_AVAILABLE_UINT, NVML_VALUE_NOT_AVAILABLE_UINT, 0};
    }
    return NVML_SUCCESS;
}

#define LIST(sym, info_t, mode, layout)                                                          \
    nvmlReturn_t sym(nvmlDevice_t device, unsigned int *infoCount, info_t *infos)              \
    {                                                                                            \
        return processes(device, mode, infoCount, infos, layout);                               \
    }

LIST(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t, NVML_PROCESS_MODE_COMPUTE,
     LAYOUT_V1)
LIST(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_COMPUTE,
     LAYOUT_V2)
LIST(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_COMPUTE,
     LAYOUT_V2)
LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t, NVML_PROCESS_MODE_GRAPHICS,
     LAYOUT_V1)
LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_GRAPHICS,
     LAYOUT_V2)
LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_GRAPHICS,
     LAYOUT_V2)
LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t, NVML_PROCESS_MODE_MPS,
     LAYOUT_V1)
LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_MPS,
     LAYOUT_V2)
LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_v2_t, NVML_PROCESS_MODE_MPS,
     LAYOUT_V2)

nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                   nvmlProcessDetailList_v1_t *plist)
{
    if (plist == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (plist->version != nvmlProcessDetailList_v1)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (plist->mode > NVML_PROCESS_MODE_MPS)
        return NVML_ERROR_INVALID_ARGUMENT;
    return processes(device, (int)plist->mode, &plist->numProcArrayEntries, plist->procArray,
                     LAYOUT_DETAIL);
}
