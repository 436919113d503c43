/* Exported driver entry points: init, version, devices, contexts, modules, error strings, and
 * cuGetProcAddress(_v2), which answers by base name + version + flags from fake_symbols.h. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

/* ---- process-local driver state ------------------------------------------------------------ */
static int g_init;
static int g_ndev;
static uint64_t g_tail[FAKE_MAX_DEVICES]; /* latest kernel end enqueued by this process */
/* ... on streams the legacy default stream waits for (all but CU_STREAM_NON_BLOCKING ones) */
static uint64_t g_tail_blocking[FAKE_MAX_DEVICES];

int fake_initialized(void)
{
    return __atomic_load_n(&g_init, __ATOMIC_ACQUIRE);
}

int fake_device_count(void)
{
    return __atomic_load_n(&g_ndev, __ATOMIC_ACQUIRE);
}

/* Device ordinals as the process sees them -> the simulated GPUs of the machine
 * (CUDA_VISIBLE_DEVICES); the shared segment is indexed by the latter. */
static int g_physical[FAKE_MAX_DEVICES];

int fake_physical(int ordinal)
{
    if (ordinal < 0 || ordinal >= FAKE_MAX_DEVICES)
        return ordinal;
    return __atomic_load_n(&g_ndev, __ATOMIC_ACQUIRE) > ordinal ? g_physical[ordinal] : ordinal;
}

void fake_uuid_text(int physical, char *out, size_t cap)
{
    snprintf(out, cap, "GPU-fa4e0000-0000-0000-0000-0000000000%02x", physical & 0xff);
}

int fake_gpu_count(void)
{
    int n = 1;
    const char *v = getenv("GEMINI_FAKE_DEVICES");
    if (v != NULL && *v != '\0')
        n = atoi(v);
    return n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

void fake_gpu_uuid(int physical, char *out, size_t cap)
{
    fake_uuid_text(physical, out, cap);
}

/* One element of CUDA_VISIBLE_DEVICES: an index or a UUID of one of `n` GPUs; -1: neither. */
static int visible_one(const char *tok, int n)
{
    while (*tok == ' ')
        tok++;
    if (*tok >= '0' && *tok <= '9') {
        char *end = NULL;
        long i = strtol(tok, &end, 10);
        return (*end == '\0' || *end == ' ') && i < n ? (int)i : -1;
    }
    for (int i = 0; i < n; i++) {
        char uuid[64];
        fake_uuid_text(i, uuid, sizeof(uuid));
        if (strncmp(tok, uuid, strlen(uuid)) == 0)
            return i;
    }
    return -1;
}

/* As CUDA: the listed GPUs in order, up to the first element that names none (or a repeat). */
static int visible_devices(int n)
{
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    if (v == NULL) {
        for (int i = 0; i < n; i++)
            g_physical[i] = i;
        return n;
    }
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", v);
    int count = 0;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL && count < FAKE_MAX_DEVICES;
         tok = strtok_r(NULL, ",", &save)) {
        int i = visible_one(tok, n);
        for (int k = 0; k < count && i >= 0; k++)
            if (g_physical[k] == i)
                i = -1;
        if (i < 0)
            break;
        g_physical[count++] = i;
    }
    return count;
}

static void raise_to(uint64_t *slot, uint64_t end)
{
    uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (cur < end &&
           !__atomic_compare_exchange_n(slot, &cur, end, 1, __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
    }
}

void fake_proc_tail_note(int dev, uint64_t end, int blocking)
{
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return;
    raise_to(&g_tail[dev], end);
    if (blocking)
        raise_to(&g_tail_blocking[dev], end);
}

uint64_t fake_proc_tail_blocking(int dev)
{
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&g_tail_blocking[dev], __ATOMIC_ACQUIRE);
}

uint64_t fake_proc_tail(int dev)
{
    if (dev < 0 || dev >= FAKE_MAX_DEVICES)
        return 0;
    return __atomic_load_n(&g_tail[dev], __ATOMIC_ACQUIRE);
}

/* ---- contexts ------------------------------------------------------------------------------- */
#define CTX_MAGIC 0x43545831u
#define CTX_STACK 16

struct CUctx_st {
    uint32_t magic;
    int dev;
    int primary;
    int refs;
    uint64_t life; /* bumped as a real one's resources die (a primary's reset, its last release):
                    * its events and streams of an older life are dead (fake_ctx_alive) */
};

static struct CUctx_st g_primary[FAKE_MAX_DEVICES];
static pthread_mutex_t g_ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread CUcontext tl_stack[CTX_STACK];
static __thread int tl_depth;

static int ctx_ok(CUcontext c)
{
    return c != NULL && c->magic == CTX_MAGIC;
}

static CUcontext ctx_current(void)
{
    return tl_depth > 0 ? tl_stack[tl_depth - 1] : NULL;
}

CUcontext fake_current_ctx_life(uint64_t *life)
{
    CUcontext c = ctx_current();
    *life = ctx_ok(c) ? __atomic_load_n(&c->life, __ATOMIC_ACQUIRE) : 0;
    return c;
}

int fake_ctx_alive(CUcontext ctx, uint64_t life)
{
    return ctx_ok(ctx) && __atomic_load_n(&ctx->life, __ATOMIC_ACQUIRE) == life;
}

CUresult fake_current_device(int *dev)
{
    CUcontext c = ctx_current();
    if (!ctx_ok(c))
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->dev;
    return CUDA_SUCCESS;
}

void fake_driver_atfork_child(void)
{
    /* Like a real driver, a forked child has to initialise CUDA itself. */
    __atomic_store_n(&g_init, 0, __ATOMIC_RELEASE);
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        g_tail[d] = g_tail_blocking[d] = 0;
        g_primary[d].refs = 0;
    }
    pthread_mutex_init(&g_ctx_mu, NULL);
    tl_depth = 0;
}

static int dev_valid(CUdevice dev)
{
    return dev >= 0 && dev < fake_device_count();
}

/* ---- init and devices ----------------------------------------------------------------------- */
CUresult cuInit(unsigned int Flags)
{
    FAKE_ENTER(cuInit);
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (fake_shm_get() == NULL)
        return CUDA_ERROR_NO_DEVICE;
    int n = fake_gpu_count();
    n = n > 0 ? visible_devices(n) : 0;
    if (n <= 0)
        return CUDA_ERROR_NO_DEVICE;
    __atomic_store_n(&g_ndev, n, __ATOMIC_RELEASE);
    __atomic_store_n(&g_init, 1, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

CUresult cuDriverGetVersion(int *driverVersion)
{
    FAKE_ENTER(cuDriverGetVersion);
    if (driverVersion == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = FAKE_DRIVER_VERSION;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    FAKE_ENTER(cuDeviceGet);
    FAKE_NEED_INIT();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(ordinal))
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int *count)
{
    FAKE_ENTER(cuDeviceGetCount);
    FAKE_NEED_INIT();
    if (count == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *count = fake_device_count();
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    FAKE_ENTER(cuDeviceGetName);
    FAKE_NEED_INIT();
    if (name == NULL || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "Gemini Fake GPU %d", dev);
    return CUDA_SUCCESS;
}

/* The bytes of fake_uuid_text's UUID: fa 4e 00 .. 00 NN. */
CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    FAKE_ENTER(cuDeviceGetUuid_v2);
    FAKE_NEED_INIT();
    if (uuid == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    memset(uuid->bytes, 0, sizeof uuid->bytes);
    uuid->bytes[0] = (char)0xfa;
    uuid->bytes[1] = 0x4e;
    uuid->bytes[15] = (char)(fake_physical(dev) & 0xff);
    return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    FAKE_ENTER(cuDeviceTotalMem_v2);
    FAKE_NEED_INIT();
    if (bytes == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    uint64_t total = 0;
    CUresult rc = fake_mem_info(dev, NULL, &total);
    if (rc == CUDA_SUCCESS)
        *bytes = (size_t)total;
    return rc;
}

CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    FAKE_ENTER(cuDeviceGetAttribute);
    FAKE_NEED_INIT();
    if (pi == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: *pi = 0x10 + dev; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *pi = 1; break;
    default:
        if ((int)attrib <= 0 || (int)attrib > 200)
            return CUDA_ERROR_INVALID_VALUE;
        *pi = 0;
    }
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FAKE_ENTER(cuDevicePrimaryCtxRetain);
    FAKE_NEED_INIT();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_ctx_mu);
    struct CUctx_st *c = &g_primary[dev];
    c->dev = dev;
    c->primary = 1;
    c->refs++;
    __atomic_store_n(&c->magic, CTX_MAGIC, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_ctx_mu);
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    FAKE_ENTER(cuDevicePrimaryCtxRelease_v2);
    FAKE_NEED_INIT();
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_ctx_mu);
    CUresult rc = CUDA_SUCCESS;
    if (g_primary[dev].refs > 0) {
        /* The struct stays usable (a real one is made anew at the next retain); what lived in
         * it does not. */
        if (--g_primary[dev].refs == 0)
            __atomic_add_fetch(&g_primary[dev].life, 1, __ATOMIC_RELEASE);
    } else
        rc = CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_unlock(&g_ctx_mu);
    return rc;
}

/* A real primary context is destroyed with its memory when reset, and when its last retain is
 * released.  Here the struct stays usable either way; the state says what a real one's would. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    FAKE_ENTER(cuDevicePrimaryCtxReset_v2);
    FAKE_NEED_INIT();
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    fake_sleep_until(fake_proc_tail(dev)); /* its work ends with it */
    __atomic_add_fetch(&g_primary[dev].life, 1, __ATOMIC_RELEASE); /* and its events */
    return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    FAKE_ENTER(cuDevicePrimaryCtxGetState);
    FAKE_NEED_INIT();
    if (flags == NULL || active == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_ctx_mu);
    *active = g_primary[dev].refs > 0;
    pthread_mutex_unlock(&g_ctx_mu);
    *flags = 0;
    return CUDA_SUCCESS;
}

static CUresult ctx_push(CUcontext c)
{
    if (tl_depth >= CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    tl_stack[tl_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (!dev_valid(dev))
        return CUDA_ERROR_INVALID_DEVICE;
    struct CUctx_st *c = calloc(1, sizeof *c);
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->refs = 1;
    c->magic = CTX_MAGIC;
    CUresult rc = ctx_push(c);
    if (rc != CUDA_SUCCESS) {
        free(c);
        return rc;
    }
    *pctx = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    FAKE_ENTER(cuCtxCreate_v2);
    FAKE_NEED_INIT();
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    FAKE_ENTER(cuCtxCreate_v4);
    FAKE_NEED_INIT();
    (void)ctxCreateParams;
    (void)flags;
    return ctx_create(pctx, dev);
}

CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    FAKE_ENTER(cuCtxDestroy_v2);
    FAKE_NEED_INIT();
    if (!ctx_ok(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_current() == ctx)
        tl_depth--;
    /* Wait for its work, then retire it.  The struct is left allocated (marked dead) so that a
     * stale handle in another thread is an error, not a use after free. */
    fake_sleep_until(fake_proc_tail(ctx->dev));
    ctx->magic = 0;
    return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx)
{
    FAKE_ENTER(cuCtxSetCurrent);
    FAKE_NEED_INIT();
    if (ctx == NULL) {
        if (tl_depth > 0)
            tl_depth--;
        return CUDA_SUCCESS;
    }
    if (!ctx_ok(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_depth == 0)
        return ctx_push(ctx);
    tl_stack[tl_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    FAKE_ENTER(cuCtxGetCurrent);
    FAKE_NEED_INIT();
    if (pctx == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx_current();
    return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    FAKE_ENTER(cuCtxGetDevice);
    FAKE_NEED_INIT();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return fake_current_device(device);
}

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    FAKE_ENTER(cuCtxGetDevice_v2);
    FAKE_NEED_INIT();
    if (device == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (ctx == NULL)
        return fake_current_device(device);
    if (!ctx_ok(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *device = ctx->dev;
    return CUDA_SUCCESS;
}

static CUresult ctx_sync(CUcontext ctx)
{
    if (!ctx_ok(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    fake_sleep_until(fake_proc_tail(ctx->dev) + fake_sync_late_ns());
    fake_pools_sync();
    return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void)
{
    FAKE_ENTER(cuCtxSynchronize);
    FAKE_NEED_INIT();
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return ctx_sync(ctx_current());
}

CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    FAKE_ENTER(cuCtxSynchronize_v2);
    FAKE_NEED_INIT();
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return ctx_sync(ctx != NULL ? ctx : ctx_current());
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    FAKE_ENTER(cuCtxPushCurrent_v2);
    FAKE_NEED_INIT();
    if (!ctx_ok(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_push(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FAKE_ENTER(cuCtxPopCurrent_v2);
    FAKE_NEED_INIT();
    if (tl_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = tl_stack[--tl_depth];
    if (pctx != NULL)
        *pctx = c;
    return CUDA_SUCCESS;
}

/* ---- modules and functions ------------------------------------------------------------------ */
#define MOD_MAGIC 0x4d4f4431u
#define FUNC_MAGIC 0x46554e31u
#define FUNC_NAME_LEN 128

struct CUfunc_st {
    uint32_t magic;
    int sleep; /* gem_sleep_kernel: duration in ns = first kernel parameter */
    _Atomic int launched; /* (fake_function_load) */
    struct CUfunc_st *next;
    char name[FUNC_NAME_LEN];
};

struct CUmod_st {
    uint32_t magic;
    pthread_mutex_t mu;
    struct CUfunc_st *funcs;
};

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    FAKE_ENTER(cuModuleLoadData);
    FAKE_NEED_INIT();
    if (module == NULL || image == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult rc = fake_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUmod_st *m = calloc(1, sizeof *m);
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_init(&m->mu, NULL);
    m->magic = MOD_MAGIC;
    *module = m;
    return CUDA_SUCCESS;
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    FAKE_ENTER(cuModuleGetFunction);
    FAKE_NEED_INIT();
    if (hfunc == NULL || name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (hmod == NULL || hmod->magic != MOD_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&hmod->mu);
    struct CUfunc_st *f = hmod->funcs;
    while (f != NULL && strncmp(f->name, name, FUNC_NAME_LEN - 1) != 0)
        f = f->next;
    if (f == NULL) {
        f = calloc(1, sizeof *f);
        if (f == NULL) {
            pthread_mutex_unlock(&hmod->mu);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        snprintf(f->name, sizeof f->name, "%s", name);
        f->sleep = strcmp(name, "gem_sleep_kernel") == 0;
        f->magic = FUNC_MAGIC;
        f->next = hmod->funcs;
        hmod->funcs = f;
    }
    pthread_mutex_unlock(&hmod->mu);
    *hfunc = f;
    return CUDA_SUCCESS;
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    FAKE_ENTER(cuFuncGetName);
    FAKE_NEED_INIT();
    if (name == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (hfunc == NULL || hfunc->magic != FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = hfunc->name;
    return CUDA_SUCCESS;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    FAKE_ENTER(cuModuleUnload);
    FAKE_NEED_INIT();
    if (hmod == NULL || hmod->magic != MOD_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hmod->magic = 0; /* functions stay allocated: launches already queued may name them */
    return CUDA_SUCCESS;
}

CUresult fake_function_ns(CUfunction f, void **kernelParams, void **extra, uint64_t *ns)
{
    if (f == NULL || f->magic != FUNC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (f->sleep) {
        if (kernelParams != NULL && kernelParams[0] != NULL) {
            memcpy(ns, kernelParams[0], sizeof *ns);
            return CUDA_SUCCESS;
        }
        for (void **e = extra; e != NULL && *e != FAKE_CU_LAUNCH_PARAM_END; e += 2) {
            if (e[0] == FAKE_CU_LAUNCH_PARAM_BUFFER_POINTER && e[1] != NULL) {
                memcpy(ns, e[1], sizeof *ns);
                return CUDA_SUCCESS;
            }
        }
        return CUDA_ERROR_INVALID_VALUE;
    }
    *ns = fake_kernel_ns_default();
    return CUDA_SUCCESS;
}

/* CUDA 12 and later load a module lazily, in the first launch of each of its functions (the
 * default, CUDA_MODULE_LOADING=LAZY): that launch call holds the host, the GPU idle meanwhile
 * (2.5 ms on the H200, torch's first `add_`).  Here it takes GEMINI_FAKE_LOAD_MS (0). */
static uint64_t load_ns;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void read_load(void)
{
    load_ns = fake_env_u64("GEMINI_FAKE_LOAD_MS", 0) * 1000000ULL;
}

void fake_function_load(CUfunction f)
{
    pthread_once(&load_once, read_load);
    if (load_ns != 0 && !atomic_exchange(&f->launched, 1))
        fake_sleep_until(fake_now_ns() + load_ns);
}

/* ---- error strings -------------------------------------------------------------------------- */
struct err_row {
    CUresult code;
    const char *name;
    const char *text;
};

static const struct err_row g_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct err_row *err_find(CUresult e)
{
    for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
        if (g_errors[i].code == e)
            return &g_errors[i];
    return NULL;
}

CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    FAKE_ENTER(cuGetErrorString);
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_row *r = err_find(error);
    *pStr = r != NULL ? r->text : NULL;
    return r != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    FAKE_ENTER(cuGetErrorName);
    if (pStr == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const struct err_row *r = err_find(error);
    *pStr = r != NULL ? r->name : NULL;
    return r != NULL ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- cuGetProcAddress ----------------------------------------------------------------------- */
struct proc_row {
    const char *base;
    int version;
    int per_thread;
    void *fn;
};

#define FAKE_KIND_D 0
#define FAKE_KIND_P 1
static const struct proc_row g_procs[] = {
#define FAKE_X_PROC(sym, base, ver, kind) {#base, ver, FAKE_KIND_##kind, (void *)&sym},
    FAKE_SYMBOLS(FAKE_X_PROC)
#undef FAKE_X_PROC
};

/* The best row of one kind: highest version <= the asked one.  *seen tells whether any row of
 * that base name exists at all (for the not-found vs version-too-low answer). */
static const struct proc_row *proc_pick(const char *symbol, int version, int per_thread, int *seen)
{
    const struct proc_row *best = NULL;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const struct proc_row *r = &g_procs[i];
        if (strcmp(r->base, symbol) != 0)
            continue;
        *seen = 1;
        if (r->per_thread != per_thread || r->version > version)
            continue;
        if (best == NULL || r->version > best->version)
            best = r;
    }
    return best;
}

static CUresult proc_lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *status)
{
    if (symbol == NULL || pfn == NULL) {
        if (status != NULL)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_INVALID_VALUE;
    }
    int seen = 0;
    const struct proc_row *r = NULL;
    if (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)
        r = proc_pick(symbol, cudaVersion, 1, &seen);
    if (r == NULL)
        r = proc_pick(symbol, cudaVersion, 0, &seen);
    if (r == NULL) {
        *pfn = NULL;
        if (status != NULL)
            *status = seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = r->fn;
    if (status != NULL)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    FAKE_ENTER(cuGetProcAddress);
    return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    FAKE_ENTER(cuGetProcAddress_v2);
    return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}
