/* Shared body of the two test clients, gem_client (reaches the driver the way cudart does:
 * dlopen -> dlsym("cuGetProcAddress_v2") -> that for "cuGetProcAddress" -> everything through
 * the pointer it returned) and direct_client (linked against libcuda.so.1, calls the exported
 * names).  Each program fills `struct api` its own way in client_load() and calls client_main().
 *
 * Commands (one JSON line on stdout at the end; exit status 0 even when a CUDA call fails):
 *   work --kernel-ms F --burst N (--seconds S | --bursts M) [--launch kernel|ex|coop|graph]
 *        [--sync stream|ctx|event|hostfn|query|none] (none: never waits; the queue grows as
 *        deep as the driver lets it; hostfn: waits for a host function queued after the burst
 *        to run, as XLA's block_until_ready does; query: asks cuStreamQuery again and again,
 *        yielding the CPU between, or sleeping --query-every-ms F, until the burst has run)
 *        [--idle-ms F] (sleep after each burst's sync: an
 *        interactive client)
 *        [--ptsz] [--report-every SEC] [--kernel-name NAME]
 *        [--warmup-bursts W --warmup-kernel-ms F] (first W synced bursts of kernels of F ms, a
 *        framework's set-up: a different kernel size before the loop, not counted)
 *        [--warmup-launches L] (L kernels in each warm-up burst; default: --burst)
 *        [--warmup-stream created|null] (the warm-up on a stream of its own, the loop's stream
 *        then waited for as a context sync: PyTorch's warm-up before a graph capture)
 *        [--threads T] (T threads, each on its own stream, same loop; totals summed)
 *        [--light-kernels N] (N kernels of 4 us after each replay, as a framework's copies
 *        between replays, or after each kernel, as a compiled model's small kernels between
 *        its matmuls; not counted in kernels or gpu_ms)
 *        [--capture-gap-ms F] (graph: capture after the warm-up, its last burst not waited
 *        for, in global mode, sleeping F ms between the captured launches: a framework
 *        capturing while its earlier work runs and its tokens come and go)
 *        [--stream created|nonblocking|null] (null: the default stream; the per-thread one
 *        with --ptsz; nonblocking: created with CU_STREAM_NON_BLOCKING)
 *        [--streams N] (created ones: N per thread, each burst on the next: a program with a
 *        stream per worker, more of them than the hook has lanes)
 *        (gpu_ms assumes the default gem_sleep_kernel, whose duration is its first parameter;
 *        other names run GEMINI_FAKE_KERNEL_NS each)
 *        [--allocs N --bytes B [--free-allocs K]] (first cuMemAlloc N buffers of B bytes, free
 *        the first K of them, keep the rest until the end: unified-memory tests)
 *   fork-work <work options>      the same in a forked child too (one line per process)
 *   alloc --path alloc|pitch|managed|async|pool|vmm|array|array3d|mipmapped --bytes B [--hold]
 *        [--hold-freed] (--hold: wait for a line on stdin before the free; --hold-freed: after)
 *   ctx-alloc --bytes B [--path P] [--hold]   allocate in a context of its own, destroy it
 *   primary-reset --bytes B [--path P] [--release [--retain-twice]] [--hold]   allocate in the
 *        primary context, then reset it (--release: release the session's retain instead, which
 *        resets it too; --retain-twice: retain it once more first, so it stays active)
 *   ctx-swap [--release] [--bursts N] [--allocs K --bytes B]   K allocations of B bytes and N
 *        bursts of three kernels and a sync (default 1) in a context of its own, destroyed,
 *        then in a new one (--release: in the primary context, whose release resets it, then
 *        in it again)
 *   pool-destroy --bytes B [--hold]   allocate from a pool of its own, destroy the pool with
 *        the allocation still out, (hold,) free it, (hold again)
 *   meminfo
 *   all-paths [--ptsz]
 * Common options: --device D (default 0). */
#ifndef GEMINI_FAKE_CLIENT_H
#define GEMINI_FAKE_CLIENT_H

#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gemini/cuda_subset.h"

/*   X(field, exported symbol, exported per-thread symbol, base name, version, per-thread version)
 * A per-thread version of 0: the function has no per-thread variant (flags 0 always). */
#define CLIENT_API(X)                                                                            \
    X(Init, cuInit, cuInit, "cuInit", 2000, 0)                                                   \
    X(DriverGetVersion, cuDriverGetVersion, cuDriverGetVersion, "cuDriverGetVersion", 2020, 0)   \
    X(DeviceGet, cuDeviceGet, cuDeviceGet, "cuDeviceGet", 2000, 0)                               \
    X(DeviceGetCount, cuDeviceGetCount, cuDeviceGetCount, "cuDeviceGetCount", 2000, 0)           \
    X(DeviceGetName, cuDeviceGetName, cuDeviceGetName, "cuDeviceGetName", 2000, 0)               \
    X(DeviceTotalMem, cuDeviceTotalMem_v2, cuDeviceTotalMem_v2, "cuDeviceTotalMem", 3020, 0)     \
    X(DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain,                \
      "cuDevicePrimaryCtxRetain", 7000, 0)                                                       \
    X(DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2,       \
      "cuDevicePrimaryCtxRelease", 11000, 0)                                                     \
    X(DevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2,             \
      "cuDevicePrimaryCtxReset", 11000, 0)                                                       \
    X(CtxSetCurrent, cuCtxSetCurrent, cuCtxSetCurrent, "cuCtxSetCurrent", 4000, 0)               \
    X(CtxCreate2, cuCtxCreate_v2, cuCtxCreate_v2, "cuCtxCreate", 3020, 0)                         \
    X(CtxCreate4, cuCtxCreate_v4, cuCtxCreate_v4, "cuCtxCreate", 12050, 0)                        \
    X(CtxDestroy, cuCtxDestroy_v2, cuCtxDestroy_v2, "cuCtxDestroy", 4000, 0)                     \
    X(CtxSynchronize, cuCtxSynchronize, cuCtxSynchronize, "cuCtxSynchronize", 2000, 0)           \
    X(CtxSynchronizeV2, cuCtxSynchronize_v2, cuCtxSynchronize_v2, "cuCtxSynchronize", 13000, 0)  \
    X(ModuleLoadData, cuModuleLoadData, cuModuleLoadData, "cuModuleLoadData", 2000, 0)           \
    X(ModuleGetFunction, cuModuleGetFunction, cuModuleGetFunction, "cuModuleGetFunction", 2000,  \
      0)                                                                                         \
    X(LaunchKernel, cuLaunchKernel, cuLaunchKernel_ptsz, "cuLaunchKernel", 4000, 7000)           \
    X(LaunchKernelEx, cuLaunchKernelEx, cuLaunchKernelEx_ptsz, "cuLaunchKernelEx", 11060, 11060) \
    X(LaunchCooperativeKernel, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz,        \
      "cuLaunchCooperativeKernel", 9000, 9000)                                                   \
    X(GraphLaunch, cuGraphLaunch, cuGraphLaunch_ptsz, "cuGraphLaunch", 10000, 10000)             \
    X(StreamCreate, cuStreamCreate, cuStreamCreate, "cuStreamCreate", 2000, 0)                   \
    X(StreamDestroy, cuStreamDestroy_v2, cuStreamDestroy_v2, "cuStreamDestroy", 4000, 0)         \
    X(StreamSynchronize, cuStreamSynchronize, cuStreamSynchronize_ptsz, "cuStreamSynchronize",   \
      2000, 7000)                                                                                \
    X(StreamQuery, cuStreamQuery, cuStreamQuery_ptsz, "cuStreamQuery", 2000, 7000)               \
    X(LaunchHostFunc, cuLaunchHostFunc, cuLaunchHostFunc_ptsz, "cuLaunchHostFunc", 10000, 10000) \
    X(StreamBeginCapture, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz,                 \
      "cuStreamBeginCapture", 10010, 10010)                                                      \
    X(StreamEndCapture, cuStreamEndCapture, cuStreamEndCapture_ptsz, "cuStreamEndCapture",       \
      10000, 10000)                                                                              \
    X(GraphInstantiateWithFlags, cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags,       \
      "cuGraphInstantiateWithFlags", 11040, 0)                                                   \
    X(GraphDestroy, cuGraphDestroy, cuGraphDestroy, "cuGraphDestroy", 10000, 0)                  \
    X(GraphExecDestroy, cuGraphExecDestroy, cuGraphExecDestroy, "cuGraphExecDestroy", 10000, 0)  \
    X(EventCreate, cuEventCreate, cuEventCreate, "cuEventCreate", 2000, 0)                       \
    X(EventRecord, cuEventRecord, cuEventRecord_ptsz, "cuEventRecord", 2000, 7000)               \
    X(EventSynchronize, cuEventSynchronize, cuEventSynchronize, "cuEventSynchronize", 2000, 0)   \
    X(EventQuery, cuEventQuery, cuEventQuery, "cuEventQuery", 2000, 0)                           \
    X(EventElapsedTime, cuEventElapsedTime, cuEventElapsedTime, "cuEventElapsedTime", 2000, 0)   \
    X(EventElapsedTime2, cuEventElapsedTime_v2, cuEventElapsedTime_v2, "cuEventElapsedTime",     \
      12080, 0)                                                                                  \
    X(EventDestroy, cuEventDestroy_v2, cuEventDestroy_v2, "cuEventDestroy", 4000, 0)             \
    X(MemGetInfo, cuMemGetInfo_v2, cuMemGetInfo_v2, "cuMemGetInfo", 3020, 0)                     \
    X(MemAlloc, cuMemAlloc_v2, cuMemAlloc_v2, "cuMemAlloc", 3020, 0)                             \
    X(MemFree, cuMemFree_v2, cuMemFree_v2, "cuMemFree", 3020, 0)                                 \
    X(MemAllocPitch, cuMemAllocPitch_v2, cuMemAllocPitch_v2, "cuMemAllocPitch", 3020, 0)         \
    X(MemAllocManaged, cuMemAllocManaged, cuMemAllocManaged, "cuMemAllocManaged", 6000, 0)       \
    X(MemAllocAsync, cuMemAllocAsync, cuMemAllocAsync_ptsz, "cuMemAllocAsync", 11020, 11020)     \
    X(MemAllocFromPoolAsync, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz,              \
      "cuMemAllocFromPoolAsync", 11020, 11020)                                                   \
    X(MemFreeAsync, cuMemFreeAsync, cuMemFreeAsync_ptsz, "cuMemFreeAsync", 11020, 11020)         \
    X(MemPoolCreate, cuMemPoolCreate, cuMemPoolCreate, "cuMemPoolCreate", 11020, 0)              \
    X(MemPoolDestroy, cuMemPoolDestroy, cuMemPoolDestroy, "cuMemPoolDestroy", 11020, 0)          \
    X(MemPoolTrimTo, cuMemPoolTrimTo, cuMemPoolTrimTo, "cuMemPoolTrimTo", 11020, 0)              \
    X(MemCreate, cuMemCreate, cuMemCreate, "cuMemCreate", 10020, 0)                              \
    X(MemRelease, cuMemRelease, cuMemRelease, "cuMemRelease", 10020, 0)                          \
    X(MemAddressReserve, cuMemAddressReserve, cuMemAddressReserve, "cuMemAddressReserve", 10020, \
      0)                                                                                         \
    X(MemAddressFree, cuMemAddressFree, cuMemAddressFree, "cuMemAddressFree", 10020, 0)          \
    X(MemMap, cuMemMap, cuMemMap, "cuMemMap", 10020, 0)                                          \
    X(MemUnmap, cuMemUnmap, cuMemUnmap, "cuMemUnmap", 10020, 0)                                  \
    X(MemSetAccess, cuMemSetAccess, cuMemSetAccess, "cuMemSetAccess", 10020, 0)                  \
    X(MemGetAllocationGranularity, cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, \
      "cuMemGetAllocationGranularity", 10020, 0)                                                 \
    X(ArrayCreate, cuArrayCreate_v2, cuArrayCreate_v2, "cuArrayCreate", 3020, 0)                 \
    X(Array3DCreate, cuArray3DCreate_v2, cuArray3DCreate_v2, "cuArray3DCreate", 3020, 0)         \
    X(ArrayDestroy, cuArrayDestroy, cuArrayDestroy, "cuArrayDestroy", 2000, 0)                   \
    X(MipmappedArrayCreate, cuMipmappedArrayCreate, cuMipmappedArrayCreate,                      \
      "cuMipmappedArrayCreate", 5000, 0)                                                         \
    X(MipmappedArrayDestroy, cuMipmappedArrayDestroy, cuMipmappedArrayDestroy,                   \
      "cuMipmappedArrayDestroy", 5000, 0)                                                        \
    X(Memcpy, cuMemcpy, cuMemcpy_ptds, "cuMemcpy", 4000, 7000)                                   \
    X(MemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds, "cuMemcpyHtoD", 3020, 7000)             \
    X(MemcpyDtoH, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds, "cuMemcpyDtoH", 3020, 7000)             \
    X(MemcpyHtoDAsync, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync",     \
      3020, 7000)                                                                                \
    X(MemcpyDtoHAsync, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz, "cuMemcpyDtoHAsync",     \
      3020, 7000)                                                                                \
    X(MemPrefetchAsync, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz, "cuMemPrefetchAsync", \
      12020, 12020)                                                                              \
    X(GetErrorName, cuGetErrorName, cuGetErrorName, "cuGetErrorName", 6000, 0)

struct api {
#define CLIENT_FIELD(field, sym, psym, base, ver, pver) __typeof__(sym) *field;
    CLIENT_API(CLIENT_FIELD)
#undef CLIENT_FIELD
};

/* Implemented by each program: fill *a (per-thread variants if ptsz); 0 or -1 with err set. */
static int client_load(struct api *a, int ptsz, char *err, size_t errlen);

/* ---- options ------------------------------------------------------------------------------- */
struct opts {
    const char *cmd;
    double kernel_ms;
    long burst;
    double seconds;
    long bursts; /* > 0: exactly this many bursts, ignoring --seconds */
    const char *launch;
    const char *sync;
    int ptsz;
    double report_every;
    double idle_ms;
    double query_every_ms; /* --sync query: between two queries (0: yield the CPU only) */
    long warmup_bursts;
    long warmup_launches;
    double warmup_kernel_ms;
    double capture_gap_ms;
    long light_kernels;
    const char *path;
    const char *kernel_name;
    const char *stream;
    const char *warmup_stream;
    int threads;
    int streams;
    unsigned long long bytes;
    int hold;
    int hold_freed;
    int release;
    int retain_twice;
    int device;
    int allocs;
    int free_allocs;
};

static int parse_opts(int argc, char **argv, struct opts *o)
{
    memset(o, 0, sizeof *o);
    o->kernel_ms = 1.0;
    o->burst = 1;
    o->seconds = 1.0;
    o->launch = "kernel";
    o->sync = "stream";
    o->path = "alloc";
    o->kernel_name = "gem_sleep_kernel";
    o->stream = "created";
    o->threads = 1;
    o->streams = 1;
    o->bytes = 1 << 20;
    if (argc < 2)
        return -1;
    o->cmd = argv[1];
    /* Options without a value: present sets them to 1. */
    const struct {
        const char *name;
        int *field;
    } switches[] = {{"--ptsz", &o->ptsz},
                    {"--hold", &o->hold},
                    {"--hold-freed", &o->hold_freed},
                    {"--release", &o->release},
                    {"--retain-twice", &o->retain_twice}};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int is_switch = 0;
        for (size_t k = 0; k < sizeof switches / sizeof switches[0] && !is_switch; k++)
            if (strcmp(a, switches[k].name) == 0)
                *switches[k].field = is_switch = 1;
        if (is_switch)
            continue;
        if (v == NULL)
            return -1;
        i++;
        if (strcmp(a, "--kernel-ms") == 0)
            o->kernel_ms = atof(v);
        else if (strcmp(a, "--burst") == 0)
            o->burst = atol(v);
        else if (strcmp(a, "--seconds") == 0)
            o->seconds = atof(v);
        else if (strcmp(a, "--bursts") == 0)
            o->bursts = atol(v);
        else if (strcmp(a, "--launch") == 0)
            o->launch = v;
        else if (strcmp(a, "--sync") == 0)
            o->sync = v;
        else if (strcmp(a, "--idle-ms") == 0)
            o->idle_ms = atof(v);
        else if (strcmp(a, "--query-every-ms") == 0)
            o->query_every_ms = atof(v);
        else if (strcmp(a, "--warmup-bursts") == 0)
            o->warmup_bursts = atol(v);
        else if (strcmp(a, "--warmup-launches") == 0)
            o->warmup_launches = atol(v);
        else if (strcmp(a, "--warmup-kernel-ms") == 0)
            o->warmup_kernel_ms = atof(v);
        else if (strcmp(a, "--capture-gap-ms") == 0)
            o->capture_gap_ms = atof(v);
        else if (strcmp(a, "--light-kernels") == 0)
            o->light_kernels = atol(v);
        else if (strcmp(a, "--report-every") == 0)
            o->report_every = atof(v);
        else if (strcmp(a, "--threads") == 0)
            o->threads = atoi(v);
        else if (strcmp(a, "--stream") == 0)
            o->stream = v;
        else if (strcmp(a, "--streams") == 0)
            o->streams = atoi(v);
        else if (strcmp(a, "--warmup-stream") == 0)
            o->warmup_stream = v;
        else if (strcmp(a, "--kernel-name") == 0)
            o->kernel_name = v;
        else if (strcmp(a, "--path") == 0)
            o->path = v;
        else if (strcmp(a, "--bytes") == 0)
            o->bytes = strtoull(v, NULL, 0);
        else if (strcmp(a, "--device") == 0)
            o->device = atoi(v);
        else if (strcmp(a, "--allocs") == 0)
            o->allocs = atoi(v);
        else if (strcmp(a, "--free-allocs") == 0)
            o->free_allocs = atoi(v);
        else
            return -1;
    }
    return o->burst > 0 && o->streams > 0 ? 0 : -1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- setup ------------------------------------------------------------------------------------ */
struct session {
    struct api a;
    CUdevice dev;
    CUcontext ctx;
    const char *failed; /* the call that failed first */
    int rc;
};

#define CHECK(s, call, name)             \
    do {                                 \
        CUresult r_ = (call);            \
        if (r_ != CUDA_SUCCESS) {        \
            if ((s)->rc == 0) {          \
                (s)->rc = (int)r_;       \
                (s)->failed = (name);    \
            }                            \
        }                                \
    } while (0)

static void print_fail(const struct session *s)
{
    if (s->failed != NULL)
        printf(", \"failed\": \"%s\"", s->failed);
}

static int session_open(struct session *s, const struct opts *o)
{
    char err[256] = "";
    memset(s, 0, sizeof *s);
    if (client_load(&s->a, o->ptsz, err, sizeof err) != 0) {
        printf("{\"rc\": -1, \"error\": \"%s\", \"pid\": %d}\n", err, (int)getpid());
        return -1;
    }
    CHECK(s, s->a.Init(0), "cuInit");
    if (s->rc == 0)
        CHECK(s, s->a.DeviceGet(&s->dev, o->device), "cuDeviceGet");
    if (s->rc == 0)
        CHECK(s, s->a.DevicePrimaryCtxRetain(&s->ctx, s->dev), "cuDevicePrimaryCtxRetain");
    if (s->rc == 0)
        CHECK(s, s->a.CtxSetCurrent(s->ctx), "cuCtxSetCurrent");
    if (s->rc != 0) {
        printf("{\"rc\": %d", s->rc);
        print_fail(s);
        printf(", \"pid\": %d}\n", (int)getpid());
        return -1;
    }
    return 0;
}

static const char g_image[] = "gemini fake module";

/* ---- work ------------------------------------------------------------------------------------- */
/* Kernel `name` of the fake's image, in the current context (NULL, and s->rc set, if not). */
static CUfunction load_kernel(struct session *s, const char *name)
{
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CHECK(s, s->a.ModuleLoadData(&mod, g_image), "cuModuleLoadData");
    if (s->rc == 0)
        CHECK(s, s->a.ModuleGetFunction(&f, mod, name), "cuModuleGetFunction");
    return f;
}

static CUresult launch_one(struct session *s, const char *how, CUfunction f, CUstream st,
                           uint64_t *ns)
{
    void *params[] = {ns};
    if (strcmp(how, "ex") == 0) {
        CUlaunchConfig c;
        memset(&c, 0, sizeof c);
        c.gridDimX = c.gridDimY = c.gridDimZ = 1;
        c.blockDimX = c.blockDimY = c.blockDimZ = 1;
        c.hStream = st;
        return s->a.LaunchKernelEx(&c, f, params, NULL);
    }
    if (strcmp(how, "coop") == 0)
        return s->a.LaunchCooperativeKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params);
    return s->a.LaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL);
}

/* Totals shared by the worker threads of one `work` (atomics: progress lines read them). */
struct totals {
    long long kernels;
    long long gpu_ns;
    long long event_ns;
    long long launch_ns; /* host time spent launching (blocked when the GPU queue is full) */
};

static void work_line(const char *kind, struct totals *t, double wall, int rc, const char *failed)
{
    printf("{%s\"kernels\": %lld, \"gpu_ms\": %.3f, \"wall_s\": %.6f, \"event_ms\": %.3f, "
           "\"launch_s\": %.6f, \"pid\": %d, \"rc\": %d",
           kind, __atomic_load_n(&t->kernels, __ATOMIC_RELAXED),
           (double)__atomic_load_n(&t->gpu_ns, __ATOMIC_RELAXED) / 1e6, wall,
           (double)__atomic_load_n(&t->event_ns, __ATOMIC_RELAXED) / 1e6,
           (double)__atomic_load_n(&t->launch_ns, __ATOMIC_RELAXED) / 1e9, (int)getpid(), rc);
    if (failed != NULL)
        printf(", \"failed\": \"%s\"", failed);
    printf("}\n");
    fflush(stdout);
}

struct worker {
    struct session *s;
    const struct opts *o;
    CUfunction f;
    struct totals *t;
    double t0;
    int index;
    int rc;
    const char *failed;
    pthread_t tid;
};

static void post_done(void *sem)
{
    sem_post(sem);
}

/* Queue a host function on `st` and wait for the driver to run it (as XLA's block_until_ready
 * waits for its work). */
static CUresult wait_host_fn(struct session *s, CUstream st)
{
    sem_t ran;
    sem_init(&ran, 0, 0);
    CUresult r = s->a.LaunchHostFunc(st, post_done, &ran);
    while (r == CUDA_SUCCESS && sem_wait(&ran) != 0 && errno == EINTR)
        ;
    sem_destroy(&ran);
    return r;
}

/* Ask whether `st` has run everything queued on it until it says so (a program that spins
 * rather than syncs), yielding the CPU between two questions, or sleeping `every_ms`. */
static CUresult spin_on_stream(struct session *s, CUstream st, double every_ms)
{
    struct timespec pause = {(time_t)(every_ms / 1000), (long)(fmod(every_ms, 1000.0) * 1e6)};
    CUresult r;
    while ((r = s->a.StreamQuery(st)) == CUDA_ERROR_NOT_READY) {
        if (every_ms > 0)
            nanosleep(&pause, NULL);
        else
            sched_yield();
    }
    return r;
}

/* Capture one burst of kernels into a graph (global mode) and instantiate it. */
static void capture(struct worker *w, CUstream st, CUgraph *g, CUgraphExec *ge, double gap_ms)
{
    struct session *s = w->s;
    uint64_t ns = (uint64_t)(w->o->kernel_ms * 1e6);
    struct timespec gap = {(time_t)(gap_ms / 1000), (long)(fmod(gap_ms, 1000.0) * 1e6)};
    CHECK(w, s->a.StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture");
    for (long i = 0; i < w->o->burst && w->rc == 0; i++) {
        CHECK(w, launch_one(s, "kernel", w->f, st, &ns), "launch");
        if (gap_ms > 0)
            nanosleep(&gap, NULL);
    }
    CHECK(w, s->a.StreamEndCapture(st, g), "cuStreamEndCapture");
    if (w->rc == 0)
        CHECK(w, s->a.GraphInstantiateWithFlags(ge, *g, 0), "cuGraphInstantiateWithFlags");
}

static void *work_thread(void *arg)
{
    struct worker *w = arg;
    struct session *s = w->s;
    const struct opts *o = w->o;
    int graph = strcmp(o->launch, "graph") == 0;
    const char *how = graph ? "kernel" : o->launch;
    CUstream st = NULL; /* --stream null: the default stream (per-thread one with --ptsz) */
    CUevent ev0 = NULL, ev1 = NULL;
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    uint64_t ns = (uint64_t)(o->kernel_ms * 1e6);
    CHECK(w, s->a.CtxSetCurrent(s->ctx), "cuCtxSetCurrent"); /* a new thread has none */
    int n_streams = strcmp(o->stream, "null") != 0 ? o->streams : 1;
    CUstream *streams = calloc((size_t)n_streams, sizeof *streams); /* [0]: st */
    if (streams == NULL)
        w->rc = 1;
    if (w->rc == 0 && strcmp(o->stream, "null") != 0) {
        unsigned flags = strcmp(o->stream, "nonblocking") == 0 ? CU_STREAM_NON_BLOCKING : 0;
        for (int i = 0; i < n_streams && w->rc == 0; i++)
            CHECK(w, s->a.StreamCreate(&streams[i], flags), "cuStreamCreate");
        st = streams[0];
    }
    if (w->rc == 0 && strcmp(o->sync, "event") == 0) {
        CHECK(w, s->a.EventCreate(&ev0, 0), "cuEventCreate");
        CHECK(w, s->a.EventCreate(&ev1, 0), "cuEventCreate");
    }
    if (w->rc == 0 && graph && o->capture_gap_ms <= 0)
        capture(w, st, &g, &ge, 0.0);
    uint64_t warm_ns = (uint64_t)(o->warmup_kernel_ms * 1e6);
    int late_capture = graph && o->capture_gap_ms > 0;
    long warm_launches = o->warmup_launches > 0 ? o->warmup_launches : o->burst;
    CUstream warm = o->warmup_stream != NULL ? NULL : st; /* (--warmup-stream null: NULL) */
    if (w->rc == 0 && o->warmup_stream != NULL && strcmp(o->warmup_stream, "created") == 0)
        CHECK(w, s->a.StreamCreate(&warm, 0), "cuStreamCreate");
    for (long b = 0; b < o->warmup_bursts && w->rc == 0; b++) {
        for (long i = 0; i < warm_launches && w->rc == 0; i++)
            CHECK(w, launch_one(s, how, w->f, warm, &warm_ns), "launch");
        if (warm != st)
            CHECK(w, s->a.CtxSynchronize(), "cuCtxSynchronize");
        else if (!late_capture || b + 1 < o->warmup_bursts)
            CHECK(w, s->a.StreamSynchronize(st), "cuStreamSynchronize");
    }
    if (w->rc == 0 && late_capture)
        capture(w, st, &g, &ge, o->capture_gap_ms);
    double next_report = w->t0 + o->report_every;
    long done = 0;
    while (w->rc == 0) {
        if (n_streams > 1)
            st = streams[done % n_streams]; /* --streams: each burst on the next */
        if (ev0 != NULL)
            CHECK(w, s->a.EventRecord(ev0, st), "cuEventRecord");
        double l0 = now_s();
        uint64_t light_ns = 4000; /* --light-kernels: 4 us each */
        if (graph) {
            CHECK(w, s->a.GraphLaunch(ge, st), "cuGraphLaunch");
            for (long i = 0; i < o->light_kernels && w->rc == 0; i++)
                CHECK(w, launch_one(s, "kernel", w->f, st, &light_ns), "launch");
        } else {
            for (long i = 0; i < o->burst && w->rc == 0; i++) {
                CHECK(w, launch_one(s, how, w->f, st, &ns), "launch");
                for (long j = 0; j < o->light_kernels && w->rc == 0; j++)
                    CHECK(w, launch_one(s, how, w->f, st, &light_ns), "launch");
            }
        }
        __atomic_fetch_add(&w->t->launch_ns, (long long)((now_s() - l0) * 1e9), __ATOMIC_RELAXED);
        if (w->rc != 0)
            break;
        __atomic_fetch_add(&w->t->kernels, o->burst, __ATOMIC_RELAXED);
        __atomic_fetch_add(&w->t->gpu_ns, o->burst * (long long)ns, __ATOMIC_RELAXED);
        if (strcmp(o->sync, "none") == 0) {
            /* never wait: only the driver's queue limits how far ahead this runs */
        } else if (strcmp(o->sync, "ctx") == 0) {
            CHECK(w, s->a.CtxSynchronize(), "cuCtxSynchronize");
        } else if (strcmp(o->sync, "hostfn") == 0) {
            CHECK(w, wait_host_fn(s, st), "cuLaunchHostFunc");
        } else if (strcmp(o->sync, "query") == 0) {
            CHECK(w, spin_on_stream(s, st, o->query_every_ms), "cuStreamQuery");
        } else if (ev1 != NULL) {
            CHECK(w, s->a.EventRecord(ev1, st), "cuEventRecord");
            CHECK(w, s->a.EventSynchronize(ev1), "cuEventSynchronize");
            float ms = 0;
            CHECK(w, s->a.EventElapsedTime2(&ms, ev0, ev1), "cuEventElapsedTime");
            __atomic_fetch_add(&w->t->event_ns, (long long)((double)ms * 1e6), __ATOMIC_RELAXED);
        } else {
            CHECK(w, s->a.StreamSynchronize(st), "cuStreamSynchronize");
        }
        done++;
        if (o->idle_ms > 0) {
            struct timespec idle = {(time_t)(o->idle_ms / 1000),
                                    (long)(fmod(o->idle_ms, 1000.0) * 1e6)};
            nanosleep(&idle, NULL);
        }
        double t = now_s();
        if (w->index == 0 && o->report_every > 0 && t >= next_report) {
            work_line("\"progress\": true, ", w->t, t - w->t0, w->rc, w->failed);
            while (next_report <= t)
                next_report += o->report_every;
        }
        if (o->bursts > 0 ? done >= o->bursts : t - w->t0 >= o->seconds)
            break;
    }
    if (ge != NULL)
        s->a.GraphExecDestroy(ge);
    if (g != NULL)
        s->a.GraphDestroy(g);
    if (ev0 != NULL)
        s->a.EventDestroy(ev0);
    if (ev1 != NULL)
        s->a.EventDestroy(ev1);
    for (int i = 0; streams != NULL && i < n_streams; i++)
        if (streams[i] != NULL)
            s->a.StreamDestroy(streams[i]);
    free(streams);
    return NULL;
}

static int cmd_work(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    const char *how = o->launch;
    if (strcmp(how, "kernel") != 0 && strcmp(how, "ex") != 0 && strcmp(how, "coop") != 0 &&
        strcmp(how, "graph") != 0) {
        printf("{\"rc\": -1, \"error\": \"bad --launch\"}\n");
        return 0;
    }
    CUfunction f = load_kernel(&s, o->kernel_name);
    CUdeviceptr *bufs = o->allocs > 0 ? calloc((size_t)o->allocs, sizeof *bufs) : NULL;
    for (int i = 0; i < o->allocs && s.rc == 0 && bufs != NULL; i++)
        CHECK(&s, s.a.MemAlloc(&bufs[i], o->bytes), "cuMemAlloc");
    for (int i = 0; i < o->free_allocs && i < o->allocs && s.rc == 0 && bufs != NULL; i++) {
        CHECK(&s, s.a.MemFree(bufs[i]), "cuMemFree");
        bufs[i] = 0;
    }
    struct totals t;
    memset(&t, 0, sizeof t);
    int n = o->threads > 0 ? o->threads : 1;
    struct worker *ws = calloc((size_t)n, sizeof *ws);
    double t0 = now_s();
    for (int i = 0; i < n && s.rc == 0 && ws != NULL; i++) {
        ws[i] = (struct worker){.s = &s, .o = o, .f = f, .t = &t, .t0 = t0, .index = i};
        if (i > 0 && pthread_create(&ws[i].tid, NULL, work_thread, &ws[i]) != 0)
            ws[i].rc = -1, ws[i].failed = "pthread_create";
    }
    if (s.rc == 0 && ws != NULL) {
        work_thread(&ws[0]); /* the main thread is worker 0 */
        for (int i = 1; i < n; i++)
            if (ws[i].failed == NULL || strcmp(ws[i].failed, "pthread_create") != 0)
                pthread_join(ws[i].tid, NULL);
        for (int i = 0; i < n; i++)
            if (s.rc == 0 && ws[i].rc != 0) {
                s.rc = ws[i].rc;
                s.failed = ws[i].failed;
            }
    }
    free(ws);
    for (int i = 0; i < o->allocs && bufs != NULL; i++)
        if (bufs[i] != 0)
            s.a.MemFree(bufs[i]);
    free(bufs);
    work_line("", &t, now_s() - t0, s.rc, s.failed);
    return 0;
}

static int cmd_fork_work(const struct opts *o)
{
    fflush(stdout);
    pid_t child = fork();
    if (child < 0) {
        printf("{\"rc\": -1, \"error\": \"fork: %s\"}\n", strerror(errno));
        return 0;
    }
    cmd_work(o);
    if (child == 0) {
        fflush(stdout);
        _exit(0);
    }
    int status;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    return 0;
}

/* ---- alloc ------------------------------------------------------------------------------------ */
struct held {
    const char *path;
    CUdeviceptr p;
    CUstream st;
    CUmemoryPool pool;
    CUmemGenericAllocationHandle h;
    size_t vmm_size;
    CUarray arr;
    CUmipmappedArray mip;
};

static CUresult alloc_path(struct session *s, struct held *x, unsigned long long bytes)
{
    const char *p = x->path;
    if (strcmp(p, "alloc") == 0)
        return s->a.MemAlloc(&x->p, bytes);
    if (strcmp(p, "pitch") == 0) {
        size_t pitch;
        return s->a.MemAllocPitch(&x->p, &pitch, bytes, 1, 4);
    }
    if (strcmp(p, "managed") == 0)
        return s->a.MemAllocManaged(&x->p, bytes, CU_MEM_ATTACH_GLOBAL);
    if (strcmp(p, "async") == 0) {
        CUresult r = s->a.StreamCreate(&x->st, 0);
        return r != CUDA_SUCCESS ? r : s->a.MemAllocAsync(&x->p, bytes, x->st);
    }
    if (strcmp(p, "pool") == 0) {
        CUmemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        props.location.id = s->dev;
        CUresult r = s->a.StreamCreate(&x->st, 0);
        if (r == CUDA_SUCCESS)
            r = s->a.MemPoolCreate(&x->pool, &props);
        return r != CUDA_SUCCESS ? r : s->a.MemAllocFromPoolAsync(&x->p, bytes, x->pool, x->st);
    }
    if (strcmp(p, "vmm") == 0) {
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = s->dev;
        size_t gran = 0;
        CUresult r = s->a.MemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        if (r != CUDA_SUCCESS)
            return r;
        x->vmm_size = (bytes + gran - 1) / gran * gran;
        r = s->a.MemCreate(&x->h, x->vmm_size, &prop, 0);
        if (r != CUDA_SUCCESS)
            return r;
        r = s->a.MemAddressReserve(&x->p, x->vmm_size, 0, 0, 0);
        if (r == CUDA_SUCCESS)
            r = s->a.MemMap(x->p, x->vmm_size, 0, x->h, 0);
        if (r == CUDA_SUCCESS) {
            CUmemAccessDesc d;
            memset(&d, 0, sizeof d);
            d.location = prop.location;
            d.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            r = s->a.MemSetAccess(x->p, x->vmm_size, &d, 1);
        }
        return r;
    }
    if (strcmp(p, "array") == 0) {
        CUDA_ARRAY_DESCRIPTOR d = {bytes, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1};
        return s->a.ArrayCreate(&x->arr, &d);
    }
    if (strcmp(p, "array3d") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR d = {bytes, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        return s->a.Array3DCreate(&x->arr, &d);
    }
    if (strcmp(p, "mipmapped") == 0) {
        CUDA_ARRAY3D_DESCRIPTOR d = {bytes, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
        return s->a.MipmappedArrayCreate(&x->mip, &d, 1);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_path(struct session *s, struct held *x)
{
    const char *p = x->path;
    CUresult r = CUDA_SUCCESS;
    if (strcmp(p, "alloc") == 0 || strcmp(p, "pitch") == 0 || strcmp(p, "managed") == 0) {
        r = x->p ? s->a.MemFree(x->p) : CUDA_SUCCESS;
    } else if (strcmp(p, "async") == 0 || strcmp(p, "pool") == 0) {
        if (x->p)
            r = s->a.MemFreeAsync(x->p, x->st);
        if (x->st)
            s->a.StreamSynchronize(x->st);
        if (x->pool) {
            s->a.MemPoolTrimTo(x->pool, 0);
            s->a.MemPoolDestroy(x->pool);
        }
        if (x->st)
            s->a.StreamDestroy(x->st);
    } else if (strcmp(p, "vmm") == 0) {
        if (x->p) {
            s->a.MemUnmap(x->p, x->vmm_size);
            s->a.MemAddressFree(x->p, x->vmm_size);
        }
        if (x->h)
            r = s->a.MemRelease(x->h);
    } else if (strcmp(p, "array") == 0 || strcmp(p, "array3d") == 0) {
        r = x->arr ? s->a.ArrayDestroy(x->arr) : CUDA_SUCCESS;
    } else if (strcmp(p, "mipmapped") == 0) {
        r = x->mip ? s->a.MipmappedArrayDestroy(x->mip) : CUDA_SUCCESS;
    }
    return r;
}

/* Wait for a line on stdin (or its end) before going on, if `on`. */
static void hold_if(int on)
{
    char line[64];
    if (on && fgets(line, sizeof line, stdin) == NULL) {
        /* stdin closed: go on all the same */
    }
}

/* --hold: wait for a line on stdin (or its end) before going on. */
static void hold_until_told(const struct opts *o)
{
    hold_if(o->hold);
}

static int cmd_alloc(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    struct held x;
    memset(&x, 0, sizeof x);
    x.path = o->path;
    CUresult rc = alloc_path(&s, &x, o->bytes);
    size_t fr = 0, tot = 0;
    CUresult mrc = s.a.MemGetInfo(&fr, &tot);
    printf("{\"rc\": %d, \"mem_free\": %zu, \"mem_total\": %zu, \"meminfo_rc\": %d, \"pid\": %d}\n",
           (int)rc, fr, tot, (int)mrc, (int)getpid());
    fflush(stdout);
    hold_until_told(o); /* then free */
    CUresult frc = free_path(&s, &x);
    s.a.MemGetInfo(&fr, &tot);
    printf("{\"free_rc\": %d, \"mem_free\": %zu, \"mem_total\": %zu}\n", (int)frc, fr, tot);
    fflush(stdout);
    hold_if(o->hold_freed);
    return 0;
}

/* ---- primary-reset: memory of the primary context, which is reset -------------------------- */
static int cmd_primary_reset(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    struct held x;
    memset(&x, 0, sizeof x);
    x.path = o->path;
    CUresult rc = alloc_path(&s, &x, o->bytes);
    CUcontext again = NULL;
    if (rc == CUDA_SUCCESS && o->retain_twice)
        rc = s.a.DevicePrimaryCtxRetain(&again, s.dev);
    CUresult rrc = o->release ? s.a.DevicePrimaryCtxRelease(s.dev)
                              : s.a.DevicePrimaryCtxReset(s.dev);
    printf("{\"rc\": %d, \"reset_rc\": %d, \"pid\": %d}\n", (int)rc, (int)rrc, (int)getpid());
    fflush(stdout);
    hold_until_told(o);
    return 0;
}

/* ---- ctx-swap: kernels in a context that is destroyed (or reset), then in the next one ------ */
static void synced_bursts(struct session *s, long bursts)
{
    CUfunction f = load_kernel(s, "gem_sleep_kernel");
    uint64_t ns = 100000; /* 0.1 ms */
    for (long b = 0; b < bursts && s->rc == 0; b++) {
        for (int i = 0; i < 3 && s->rc == 0; i++)
            CHECK(s, launch_one(s, "kernel", f, NULL, &ns), "cuLaunchKernel");
        if (s->rc == 0)
            CHECK(s, s->a.CtxSynchronize(), "cuCtxSynchronize");
    }
}

static int cmd_ctx_swap(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    for (int round = 0; round < 2 && s.rc == 0; round++) {
        CUcontext own = NULL;
        if (!o->release)
            CHECK(&s, s.a.CtxCreate2(&own, 0, s.dev), "cuCtxCreate");
        for (int i = 0; i < o->allocs && s.rc == 0; i++) { /* (freed with the context) */
            CUdeviceptr p = 0;
            CHECK(&s, s.a.MemAlloc(&p, o->bytes), "cuMemAlloc");
        }
        synced_bursts(&s, o->bursts > 0 ? o->bursts : 1);
        if (own != NULL)
            CHECK(&s, s.a.CtxDestroy(own), "cuCtxDestroy");
        else if (round == 0) { /* the session's retain was the only one: a reset */
            CHECK(&s, s.a.DevicePrimaryCtxRelease(s.dev), "cuDevicePrimaryCtxRelease");
            CHECK(&s, s.a.DevicePrimaryCtxRetain(&s.ctx, s.dev), "cuDevicePrimaryCtxRetain");
        }
        s.a.CtxSetCurrent(s.ctx);
    }
    printf("{\"rc\": %d, \"failed\": \"%s\", \"pid\": %d}\n", s.rc,
           s.failed != NULL ? s.failed : "", (int)getpid());
    return 0;
}

/* ---- pool-destroy: a pool destroyed while an allocation from it is still out --------------- */
static int cmd_pool_destroy(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    struct held x;
    memset(&x, 0, sizeof x);
    x.path = "pool";
    CUresult rc = alloc_path(&s, &x, o->bytes);
    CUresult drc = x.pool != NULL ? s.a.MemPoolDestroy(x.pool) : rc;
    x.pool = NULL;
    printf("{\"rc\": %d, \"destroy_rc\": %d, \"pid\": %d}\n", (int)rc, (int)drc,
           (int)getpid());
    fflush(stdout);
    hold_until_told(o);
    CUresult frc = free_path(&s, &x); /* the allocation outlives its pool until freed */
    printf("{\"free_rc\": %d}\n", (int)frc);
    fflush(stdout);
    hold_until_told(o);
    return 0;
}

/* ---- ctx-alloc: memory of a context that is destroyed ------------------------------------------ */
static int cmd_ctx_alloc(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    CUcontext own = NULL;
    CUresult crc = s.a.CtxCreate2(&own, 0, s.dev);
    struct held x;
    memset(&x, 0, sizeof x);
    x.path = o->path;
    CUresult rc = crc == CUDA_SUCCESS ? alloc_path(&s, &x, o->bytes) : crc;
    CUresult drc = own != NULL ? s.a.CtxDestroy(own) : crc;
    s.a.CtxSetCurrent(s.ctx);
    printf("{\"rc\": %d, \"destroy_rc\": %d, \"pid\": %d}\n", (int)rc, (int)drc,
           (int)getpid());
    fflush(stdout);
    hold_until_told(o);
    return 0;
}

/* ---- meminfo ---------------------------------------------------------------------------------- */
static int cmd_meminfo(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    size_t fr = 0, tot = 0, dtot = 0;
    int count = 0, version = 0;
    char name[64] = "";
    CHECK(&s, s.a.MemGetInfo(&fr, &tot), "cuMemGetInfo");
    CHECK(&s, s.a.DeviceTotalMem(&dtot, s.dev), "cuDeviceTotalMem");
    CHECK(&s, s.a.DeviceGetCount(&count), "cuDeviceGetCount");
    CHECK(&s, s.a.DriverGetVersion(&version), "cuDriverGetVersion");
    CHECK(&s, s.a.DeviceGetName(name, (int)sizeof name, s.dev), "cuDeviceGetName");
    printf("{\"free\": %zu, \"total\": %zu, \"device_total\": %zu, \"devices\": %d, "
           "\"driver_version\": %d, \"name\": \"%s\", \"rc\": %d, \"pid\": %d}\n",
           fr, tot, dtot, count, version, name, s.rc, (int)getpid());
    return 0;
}

/* ---- all-paths -------------------------------------------------------------------------------- */
struct calls {
    int n;
    int first_rc;
};

static void note(struct calls *c, const char *name, CUresult r)
{
    printf("%s\"%s\": %d", c->n++ ? ", " : "", name, (int)r);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && c->first_rc == 0)
        c->first_rc = (int)r;
}

static int cmd_all_paths(const struct opts *o)
{
    struct session s;
    if (session_open(&s, o) != 0)
        return 0;
    struct calls c = {0, 0};
    CUmodule mod = NULL;
    CUfunction f = NULL;
    CUstream st = NULL;
    CUevent e0 = NULL, e1 = NULL;
    uint64_t ns = 100000; /* 0.1 ms */
    printf("{\"calls\": {");
    note(&c, "cuModuleLoadData", s.a.ModuleLoadData(&mod, g_image));
    note(&c, "cuModuleGetFunction", s.a.ModuleGetFunction(&f, mod, "gem_sleep_kernel"));
    note(&c, "cuStreamCreate", s.a.StreamCreate(&st, 0));
    note(&c, "cuEventCreate", s.a.EventCreate(&e0, 0));
    s.a.EventCreate(&e1, 0);
    s.a.EventRecord(e0, st);
    note(&c, "cuLaunchKernel", launch_one(&s, "kernel", f, st, &ns));
    note(&c, "cuLaunchKernelEx", launch_one(&s, "ex", f, st, &ns));
    note(&c, "cuLaunchCooperativeKernel", launch_one(&s, "coop", f, st, &ns));
    CUgraph g = NULL;
    CUgraphExec ge = NULL;
    note(&c, "cuStreamBeginCapture", s.a.StreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch_one(&s, "kernel", f, st, &ns);
    note(&c, "cuStreamEndCapture", s.a.StreamEndCapture(st, &g));
    note(&c, "cuGraphInstantiateWithFlags", s.a.GraphInstantiateWithFlags(&ge, g, 0));
    note(&c, "cuGraphLaunch", s.a.GraphLaunch(ge, st));
    note(&c, "cuEventRecord", s.a.EventRecord(e1, st));
    note(&c, "cuStreamQuery", s.a.StreamQuery(st));
    note(&c, "cuEventQuery", s.a.EventQuery(e1));
    note(&c, "cuEventSynchronize", s.a.EventSynchronize(e1));
    float ms = 0;
    note(&c, "cuEventElapsedTime", s.a.EventElapsedTime(&ms, e0, e1));
    note(&c, "cuEventElapsedTime_v2", s.a.EventElapsedTime2(&ms, e0, e1));
    note(&c, "cuLaunchHostFunc", wait_host_fn(&s, st));
    note(&c, "cuStreamSynchronize", s.a.StreamSynchronize(st));
    note(&c, "cuCtxSynchronize", s.a.CtxSynchronize());
    note(&c, "cuCtxSynchronize_v2", s.a.CtxSynchronizeV2(s.ctx));
    note(&c, "cuGraphExecDestroy", s.a.GraphExecDestroy(ge));
    note(&c, "cuGraphDestroy", s.a.GraphDestroy(g));
    CUcontext own = NULL;
    note(&c, "cuCtxCreate_v2", s.a.CtxCreate2(&own, 0, s.dev));
    if (own != NULL)
        s.a.CtxDestroy(own);
    own = NULL;
    note(&c, "cuCtxCreate_v4", s.a.CtxCreate4(&own, NULL, 0, s.dev));
    if (own != NULL)
        s.a.CtxDestroy(own);
    s.a.CtxSetCurrent(s.ctx);

    static const char *const paths[] = {"alloc", "pitch", "managed", "async", "pool",
                                        "vmm", "array", "array3d", "mipmapped"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        struct held x;
        memset(&x, 0, sizeof x);
        x.path = paths[i];
        char name[64];
        snprintf(name, sizeof name, "alloc:%s", paths[i]);
        note(&c, name, alloc_path(&s, &x, 1 << 20));
        if (strcmp(paths[i], "managed") == 0) {
            CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, s.dev};
            note(&c, "cuMemPrefetchAsync", s.a.MemPrefetchAsync(x.p, 1 << 20, loc, 0, st));
        }
        if (strcmp(paths[i], "alloc") == 0) {
            char buf[64] = "hello";
            note(&c, "cuMemcpyHtoD", s.a.MemcpyHtoD(x.p, buf, sizeof buf));
            note(&c, "cuMemcpyDtoH", s.a.MemcpyDtoH(buf, x.p, sizeof buf));
            note(&c, "cuMemcpyHtoDAsync", s.a.MemcpyHtoDAsync(x.p, buf, sizeof buf, st));
            note(&c, "cuMemcpyDtoHAsync", s.a.MemcpyDtoHAsync(buf, x.p, sizeof buf, st));
            note(&c, "cuMemcpy", s.a.Memcpy(x.p, x.p, sizeof buf));
        }
        snprintf(name, sizeof name, "free:%s", paths[i]);
        note(&c, name, free_path(&s, &x));
    }
    size_t fr = 0, tot = 0, dtot = 0;
    note(&c, "cuMemGetInfo", s.a.MemGetInfo(&fr, &tot));
    note(&c, "cuDeviceTotalMem", s.a.DeviceTotalMem(&dtot, s.dev));
    note(&c, "cuEventDestroy", s.a.EventDestroy(e0));
    s.a.EventDestroy(e1);
    note(&c, "cuStreamDestroy", s.a.StreamDestroy(st));
    note(&c, "cuDevicePrimaryCtxReset", s.a.DevicePrimaryCtxReset(s.dev));
    note(&c, "cuDevicePrimaryCtxRelease", s.a.DevicePrimaryCtxRelease(s.dev));
    printf("}, \"mem_free\": %zu, \"mem_total\": %zu, \"device_total\": %zu, \"pid\": %d, "
           "\"rc\": %d}\n",
           fr, tot, dtot, (int)getpid(), c.first_rc);
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: work|fork-work|alloc|ctx-alloc|primary-reset|ctx-swap|pool-destroy|meminfo|"
                    "all-paths [options] (see client.h)\n");
    return 2;
}

static int client_main(int argc, char **argv)
{
    struct opts o;
    if (parse_opts(argc, argv, &o) != 0)
        return usage();
    if (strcmp(o.cmd, "work") == 0)
        return cmd_work(&o);
    if (strcmp(o.cmd, "fork-work") == 0)
        return cmd_fork_work(&o);
    if (strcmp(o.cmd, "alloc") == 0)
        return cmd_alloc(&o);
    if (strcmp(o.cmd, "ctx-alloc") == 0)
        return cmd_ctx_alloc(&o);
    if (strcmp(o.cmd, "primary-reset") == 0)
        return cmd_primary_reset(&o);
    if (strcmp(o.cmd, "pool-destroy") == 0)
        return cmd_pool_destroy(&o);
    if (strcmp(o.cmd, "ctx-swap") == 0)
        return cmd_ctx_swap(&o);
    if (strcmp(o.cmd, "meminfo") == 0)
        return cmd_meminfo(&o);
    if (strcmp(o.cmd, "all-paths") == 0)
        return cmd_all_paths(&o);
    return usage();
}

#endif
