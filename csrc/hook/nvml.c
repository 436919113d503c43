/* NVML answers for the client, not the card: what nvidia-smi, pynvml and the dashboards built
 * on them show inside the client agrees with cudaMemGetInfo (memory.c).
 *
 * On a GPU the client has a pod manager for:
 *   nvmlDeviceGetMemoryInfo[_v2]  total = the client's limit; used = what the whole client holds
 *       (all its processes, as this process's cuMemGetInfo counts it); free = total - used,
 *       never above what the card has free; reserved (v2) = 0.
 *   nvmlDeviceGetComputeRunningProcesses[_v2|_v3], nvmlDeviceGetRunningProcessDetailList
 *       (compute)  the client's processes, from the pod manager (PROCESS): the pid each process
 *       has in its own pid namespace, usedGpuMemory = the bytes the pod manager holds for it.
 *   Graphics and MPS process lists: empty.
 * On any other GPU (the client cannot make a context there): memory as the driver says (the
 * card), and empty process lists (the client has no process there; others' are not shown).
 *
 * Which GPU an NVML handle is: its UUID against each device ordinal i the hook has a pod manager
 * for: the CUDA driver's UUID of ordinal i where this process has initialised CUDA, else element
 * i of CUDA_VISIBLE_DEVICES (a UUID or a prefix of one; an index is taken as NVML's index,
 * which is CUDA's where all GPUs are the same model or CUDA_DEVICE_ORDER=PCI_BUS_ID), else
 * NVML index i.
 *
 * The pod manager is asked once per call, without waiting or retrying.  When it cannot be
 * reached, memory shows the last figures it gave this process, or, with none yet,
 * NVML_ERROR_UNKNOWN; process lists say NVML_ERROR_UNKNOWN.  Never the card's figures or
 * processes on the client's GPU.
 *
 * Not covered: MIG devices (a MIG handle is another GPU, shown as the driver says), utilisation
 * and per-process utilisation, BAR1, and NVML calls made in processes not under the hook. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_PROCS 1024 /* beyond this a list is cut short (one round trip per process) */

struct proc_use {
    unsigned int pid;
    uint64_t bytes;
};

void gem_nvml_on_connect(int dev)
{
    int32_t count = 0, pid = 0;
    uint64_t bytes = 0;
    /* a lost connection is told again on the next one */
    (void)gem_ipc_process_once(dev, -1, &count, &pid, &bytes);
}

/* ---- which GPU ------------------------------------------------------------------------------ */

/* Element `i` of CUDA_VISIBLE_DEVICES, trimmed, into out: 1; the list has no element i: -1;
 * no CUDA_VISIBLE_DEVICES: 0 (ordinal i is GPU i). */
static int visible_element(int i, char *out, size_t cap)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL)
        return 0;
    for (int k = 0;; k++) {
        while (*v == ' ')
            v++;
        size_t len = strcspn(v, ",");
        if (k == i) {
            while (len > 0 && v[len - 1] == ' ')
                len--;
            if (len == 0 || len >= cap)
                return -1;
            memcpy(out, v, len);
            out[len] = '\0';
            return 1;
        }
        if (v[len] == '\0')
            return -1;
        v += len + 1;
    }
}

static int all_digits(const char *s)
{
    if (*s == '\0')
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* Is the GPU behind `h` (whose UUID is `uuid`) device ordinal `ordinal` of this process? */
static int is_ordinal(nvmlDevice_t h, const char *uuid, int ordinal)
{
    char want[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    if (gem_dev_uuid(ordinal, want, sizeof want) == 0)
        return strcasecmp(uuid, want) == 0;
    int nvml_index = ordinal;
    switch (visible_element(ordinal, want, sizeof want)) {
    case -1:
        return 0;
    case 1:
        if (strncasecmp(want, "GPU-", 4) == 0)
            return strncasecmp(uuid, want, strlen(want)) == 0; /* CUDA takes prefixes too */
        if (!all_digits(want))
            return 0; /* MIG-... or not a GPU at all */
        nvml_index = atoi(want);
        break;
    default:
        break;
    }
    __typeof__(&nvmlDeviceGetIndex) get_index = REAL_NVML_AUX(nvmlDeviceGetIndex);
    unsigned int index = 0;
    return get_index != NULL && get_index(h, &index) == NVML_SUCCESS &&
           index == (unsigned int)nvml_index;
}

/* The pod manager (device index) of the GPU behind `h` into *dev, -1 for none.  An error of
 * NVML's (uninitialised, a bad handle) is returned as it is. */
static nvmlReturn_t pod_manager_of(nvmlDevice_t h, int *dev)
{
    __typeof__(&nvmlDeviceGetUUID) get_uuid = REAL_NVML_AUX(nvmlDeviceGetUUID);
    if (get_uuid == NULL)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    nvmlReturn_t r = get_uuid(h, uuid, sizeof uuid);
    if (r != NVML_SUCCESS)
        return r;
    *dev = -1;
    for (int d = 0; d < gem_cfg.ndev && *dev < 0; d++)
        if (is_ordinal(h, uuid, d))
            *dev = d;
    GEM_LOG(GEM_LOG_DEBUG, "NVML %s: %s", uuid, *dev < 0 ? "not the client's, the card" : "ours");
    return NVML_SUCCESS;
}

static void unreachable_once(void)
{
    static _Atomic int logged;
    if (!atomic_exchange(&logged, 1))
        GEM_LOG(GEM_LOG_WARN, "NVML: the pod manager cannot be reached; NVML says Unknown Error "
                              "for the client's GPU rather than show the whole card");
}

/* ---- memory ----------------------------------------------------------------------------------- */

struct client_memory {
    uint64_t total, used, free;
};

/* The client's memory on the GPU behind `h`: *mine = 1 and the figures; *mine = 0: not the
 * client's GPU.  card_free: what the driver says is free. */
static nvmlReturn_t client_memory(nvmlDevice_t h, uint64_t card_free, int *mine,
                                  struct client_memory *m)
{
    int dev = -1;
    nvmlReturn_t r = pod_manager_of(h, &dev);
    *mine = r == NVML_SUCCESS && dev >= 0;
    if (!*mine)
        return r;
    uint64_t used = 0, limit = 0;
    if (gem_mem_view(dev, &used, &limit) < 0) {
        unreachable_once();
        return NVML_ERROR_UNKNOWN;
    }
    used = gem_mem_used_seen(dev, used);
    uint64_t left = used >= limit ? 0 : limit - used;
    *m = (struct client_memory){.total = limit, .used = used,
                                .free = left < card_free ? left : card_free};
    return NVML_SUCCESS;
}

GEM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    GEM_ENTER(nvmlDeviceGetMemoryInfo);
    nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo)(device, memory);
    if (r != NVML_SUCCESS || GEM_PASS() || memory == NULL)
        return r;
    int mine = 0;
    struct client_memory m;
    r = client_memory(device, memory->free, &mine, &m);
    if (mine) {
        memory->total = m.total;
        memory->used = m.used;
        memory->free = m.free;
    }
    return r;
}

GEM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    GEM_ENTER(nvmlDeviceGetMemoryInfo_v2);
    nvmlReturn_t r = REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
    if (r != NVML_SUCCESS || GEM_PASS() || memory == NULL)
        return r;
    int mine = 0;
    struct client_memory m;
    r = client_memory(device, memory->free, &mine, &m);
    if (mine) {
        memory->total = m.total;
        memory->reserved = 0; /* the driver's own memory is not the client's to see */
        memory->used = m.used;
        memory->free = m.free;
    }
    return r;
}

/* ---- process lists ---------------------------------------------------------------------------- */

/* The client's processes from pod manager `dev`: 1 and their number in *n when there are more
 * than `room`; else 0 and at most `cap` of them into out, how many in *n; -1: unreachable. */
static int client_processes(int dev, unsigned int room, struct proc_use *out, unsigned int cap,
                            unsigned int *n)
{
    int32_t count = 0, pid = 0;
    uint64_t bytes = 0;
    *n = 0;
    if (gem_ipc_process_once(dev, 0, &count, &pid, &bytes) != 0)
        return -1;
    if (count > 0 && (unsigned int)count > room) {
        *n = (unsigned int)count;
        return 1;
    }
    for (int32_t i = 0; i < count && *n < cap; i++) {
        if (i > 0 && gem_ipc_process_once(dev, i, &count, &pid, &bytes) != 0)
            return -1;
        if (pid <= 0 || i >= count)
            break; /* the list shrank meanwhile */
        if (pid == (int32_t)getpid())
            bytes = gem_mem_used_seen(dev, bytes); /* as cuMemGetInfo counts our own */
        out[(*n)++] = (struct proc_use){(unsigned int)pid, bytes};
    }
    return 0;
}

enum layout { LAYOUT_V1, LAYOUT_V2, LAYOUT_DETAIL };

static void put(void *infos, enum layout layout, unsigned int i, struct proc_use p)
{
    switch (layout) {
    case LAYOUT_V1:
        ((nvmlProcessInfo_v1_t *)infos)[i] = (nvmlProcessInfo_v1_t){p.pid, p.bytes};
        break;
    case LAYOUT_V2:
        ((nvmlProcessInfo_v2_t *)infos)[i] = (nvmlProcessInfo_v2_t){
            p.pid, p.bytes, NVML_VALUE_NOT_AVAILABLE_UINT, NVML_VALUE_NOT_AVAILABLE_UINT};
        break;
    case LAYOUT_DETAIL:
        ((nvmlProcessDetail_v1_t *)infos)[i] = (nvmlProcessDetail_v1_t){
            p.pid, p.bytes, NVML_VALUE_NOT_AVAILABLE_UINT, NVML_VALUE_NOT_AVAILABLE_UINT, 0};
        break;
    }
}

/* Answer a process-list call for the client, with NVML's rules: *count in: room in infos;
 * out: how many there are (INSUFFICIENT_SIZE when they do not fit). */
static nvmlReturn_t answer_processes(nvmlDevice_t device, int mode, unsigned int *count,
                                     void *infos, enum layout layout)
{
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    int dev = -1;
    nvmlReturn_t r = pod_manager_of(device, &dev);
    if (r != NVML_SUCCESS)
        return r;
    unsigned int room = infos == NULL ? 0 : *count;
    unsigned int n = 0;
    struct proc_use *procs = NULL;
    if (dev >= 0 && mode == NVML_PROCESS_MODE_COMPUTE) {
        unsigned int cap = room < MAX_PROCS ? room : MAX_PROCS;
        procs = cap > 0 ? calloc(cap, sizeof(*procs)) : NULL;
        if (cap > 0 && procs == NULL)
            return NVML_ERROR_UNKNOWN;
        int got = client_processes(dev, room, procs, cap, &n);
        if (got != 0)
            free(procs);
        if (got < 0) {
            unreachable_once();
            return NVML_ERROR_UNKNOWN;
        }
        if (got > 0) {
            *count = n;
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
    }
    for (unsigned int i = 0; i < n; i++)
        put(infos, layout, i, procs[i]);
    free(procs);
    *count = n;
    return NVML_SUCCESS;
}

#define PROCESS_LIST(sym, info_t, mode, layout)                                                  \
    GEM_EXPORT nvmlReturn_t sym(nvmlDevice_t device, unsigned int *infoCount, info_t *infos)   \
    {                                                                                            \
        GEM_ENTER(sym);                                                                          \
        if (GEM_PASS())                                                                          \
            return REAL(sym)(device, infoCount, infos);                                          \
        return answer_processes(device, mode, infoCount, infos, layout);                        \
    }

PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses, nvmlProcessInfo_v1_t,
             NVML_PROCESS_MODE_COMPUTE, LAYOUT_V1)
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v2, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_COMPUTE, LAYOUT_V2)
PROCESS_LIST(nvmlDeviceGetComputeRunningProcesses_v3, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_COMPUTE, LAYOUT_V2)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses, nvmlProcessInfo_v1_t,
             NVML_PROCESS_MODE_GRAPHICS, LAYOUT_V1)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_GRAPHICS, LAYOUT_V2)
PROCESS_LIST(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_GRAPHICS, LAYOUT_V2)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses, nvmlProcessInfo_v1_t,
             NVML_PROCESS_MODE_MPS, LAYOUT_V1)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v2, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_MPS, LAYOUT_V2)
PROCESS_LIST(nvmlDeviceGetMPSComputeRunningProcesses_v3, nvmlProcessInfo_v2_t,
             NVML_PROCESS_MODE_MPS, LAYOUT_V2)

GEM_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device,
                                                              nvmlProcessDetailList_v1_t *plist)
{
    GEM_ENTER(nvmlDeviceGetRunningProcessDetailList);
    /* a version or mode we do not know: the library's own answer (an error) */
    if (GEM_PASS() || plist == NULL || plist->version != nvmlProcessDetailList_v1 ||
        plist->mode > NVML_PROCESS_MODE_MPS)
        return REAL(nvmlDeviceGetRunningProcessDetailList)(device, plist);
    return answer_processes(device, (int)plist->mode, &plist->numProcArrayEntries,
                            plist->procArray, LAYOUT_DETAIL);
}
