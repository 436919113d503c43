/* A tiny stand-in CUDA driver for the hook's own tests (the full fake lives in csrc/fake).
 * Distinct functions per _ptsz variant, so a test can see which variant the hook forwarded to.
 * Every call is counted; MINI_DRIVER_LOG=path appends "name\n" per call. */
#include "gemini/cuda_subset.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long next_ptr = 0x7f0000000000ull;
static int initialised;

static void note(const char *name)
{
    const char *path = getenv("MINI_DRIVER_LOG");
    if (path == NULL)
        return;
    FILE *f = fopen(path, "a");
    if (f) {
        fprintf(f, "%s\n", name);
        fclose(f);
    }
}

CUresult cuInit(unsigned int flags) { (void)flags; initialised = 1; note("cuInit"); return CUDA_SUCCESS; }
CUresult cuCtxGetCurrent(CUcontext *c) { *c = (CUcontext)0x1000; return CUDA_SUCCESS; }
CUresult cuCtxSetCurrent(CUcontext c) { (void)c; return CUDA_SUCCESS; }
CUresult cuCtxGetDevice(CUdevice *d) { *d = 0; return CUDA_SUCCESS; }
CUresult cuEventCreate(CUevent *e, unsigned int f) { (void)f; *e = (CUevent)malloc(8); return CUDA_SUCCESS; }
CUresult cuEventRecord(CUevent e, CUstream s) { (void)e; (void)s; return CUDA_SUCCESS; }
CUresult cuEventSynchronize(CUevent e) { (void)e; note("cuEventSynchronize"); return CUDA_SUCCESS; }
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)a; (void)b; *ms = 0; return CUDA_SUCCESS; }
CUresult cuCtxSynchronize(void) { note("cuCtxSynchronize"); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize(CUstream s) { (void)s; note("cuStreamSynchronize"); return CUDA_SUCCESS; }
CUresult cuStreamSynchronize_ptsz(CUstream s) { (void)s; note("cuStreamSynchronize_ptsz"); return CUDA_SUCCESS; }
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **x)
{
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)p; (void)x;
    note("cuLaunchKernel");
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **x)
{
    (void)f; (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)sh; (void)s; (void)p; (void)x;
    note("cuLaunchKernel_ptsz");
    return CUDA_SUCCESS;
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **x)
{
    (void)c; (void)f; (void)p; (void)x;
    note("cuLaunchKernelEx");
    return CUDA_SUCCESS;
}
/* Two named functions (all others are unknown): XLA's delay kernel, which waits for its host,
 * and another kernel. */
CUresult cuFuncGetName(const char **name, CUfunction f)
{
    if (f == (CUfunction)0x10)
        *name = "_ZN15stream_executor3gpu12_GLOBAL__N_111DelayKernelEPVNS0_17GpuSemaphoreStateES3_";
    else if (f == (CUfunction)0x20)
        *name = "_Z12other_kernelPVi";
    else
        return CUDA_ERROR_INVALID_HANDLE;
    note("cuFuncGetName");
    return CUDA_SUCCESS;
}
/* The latest address freed is handed out again first (as real allocators do).  With
 * MINI_DRIVER_FREE_WAITS=1 a free returns only once another allocation took its address (or
 * after 2 s): the address is free before the call returns, and another thread may get it. */
static pthread_mutex_t mem_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mem_cv = PTHREAD_COND_INITIALIZER;
static unsigned long long reuse;
static int freeing;

int mini_driver_freeing(void) /* (for mini_client: a free waits for an allocation now) */
{
    pthread_mutex_lock(&mem_m);
    int f = freeing;
    pthread_mutex_unlock(&mem_m);
    return f;
}

/* mini_driver_hold_allocs(1, 0): each allocation waits in the driver until
 * mini_driver_hold_allocs(0, fail) lets it return (CUDA_ERROR_OUT_OF_MEMORY where `fail`);
 * mini_driver_allocating() says whether one waits now. */
static int hold_allocs, allocs_fail, allocating;

void mini_driver_hold_allocs(int hold, int fail)
{
    pthread_mutex_lock(&mem_m);
    hold_allocs = hold;
    allocs_fail = fail;
    pthread_cond_broadcast(&mem_cv);
    pthread_mutex_unlock(&mem_m);
}

int mini_driver_allocating(void)
{
    pthread_mutex_lock(&mem_m);
    int a = allocating;
    pthread_mutex_unlock(&mem_m);
    return a;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n)
{
    note("cuMemAlloc_v2");
    if (n > (1ull << 40))
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&mem_m);
    allocating = hold_allocs;
    while (hold_allocs)
        pthread_cond_wait(&mem_cv, &mem_m);
    allocating = 0;
    if (allocs_fail) {
        pthread_mutex_unlock(&mem_m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (reuse != 0) {
        *p = reuse;
        reuse = 0;
        pthread_cond_broadcast(&mem_cv);
    } else {
        *p = next_ptr;
        next_ptr += (n + 4095) & ~4095ull;
    }
    pthread_mutex_unlock(&mem_m);
    return CUDA_SUCCESS;
}

CUresult cuMemFree_v2(CUdeviceptr p)
{
    note("cuMemFree_v2");
    const char *waits = getenv("MINI_DRIVER_FREE_WAITS");
    pthread_mutex_lock(&mem_m);
    reuse = p;
    if (waits != NULL && strcmp(waits, "1") == 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 2;
        freeing = 1;
        while (reuse == p && pthread_cond_timedwait(&mem_cv, &mem_m, &until) == 0) {
        }
        freeing = 0;
    }
    pthread_mutex_unlock(&mem_m);
    return CUDA_SUCCESS;
}
static unsigned long long next_handle = 1;
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop,
                     unsigned long long flags)
{
    (void)n; (void)prop; (void)flags;
    note("cuMemCreate");
    pthread_mutex_lock(&mem_m);
    *h = next_handle++;
    pthread_mutex_unlock(&mem_m);
    return CUDA_SUCCESS;
}
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { (void)h; note("cuMemRelease"); return CUDA_SUCCESS; }
CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total) { *free_b = 70ull << 30; *total = 80ull << 30; return CUDA_SUCCESS; }
CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { (void)d; *b = 80ull << 30; return CUDA_SUCCESS; }

struct row { const char *base; int version; int ptsz; void *fn; };
static const struct row rows[] = {
    {"cuInit", 2000, -1, (void *)cuInit},
    {"cuGetProcAddress", 12000, -1, (void *)cuGetProcAddress_v2},
    {"cuGetProcAddress", 11030, -1, (void *)cuGetProcAddress},
    {"cuCtxGetCurrent", 4000, -1, (void *)cuCtxGetCurrent},
    {"cuCtxSynchronize", 2000, -1, (void *)cuCtxSynchronize},
    {"cuStreamSynchronize", 7000, 1, (void *)cuStreamSynchronize_ptsz},
    {"cuStreamSynchronize", 2000, 0, (void *)cuStreamSynchronize},
    {"cuLaunchKernel", 7000, 1, (void *)cuLaunchKernel_ptsz},
    {"cuLaunchKernel", 4000, 0, (void *)cuLaunchKernel},
    {"cuLaunchKernelEx", 11060, 0, (void *)cuLaunchKernelEx},
    {"cuMemAlloc", 3020, -1, (void *)cuMemAlloc_v2},
    {"cuMemFree", 3020, -1, (void *)cuMemFree_v2},
    {"cuMemGetInfo", 3020, -1, (void *)cuMemGetInfo_v2},
    {"cuMemCreate", 10020, -1, (void *)cuMemCreate},
    {"cuMemRelease", 10020, -1, (void *)cuMemRelease},
    {"cuDeviceTotalMem", 3020, -1, (void *)cuDeviceTotalMem_v2},
};

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    int ptsz = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        if (strcmp(rows[i].base, symbol) != 0 || rows[i].version > version)
            continue;
        if (rows[i].ptsz >= 0 && rows[i].ptsz != ptsz)
            continue;
        *pfn = rows[i].fn;
        if (status)
            *status = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, version, flags, NULL);
}
