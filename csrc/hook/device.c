/* Which devices the process may use: those with a pod manager, and no other (fail closed).
 *
 * Device i of the process (after CUDA_VISIBLE_DEVICES, which launch-command sets to the
 * client's GPUs) is managed by element i of POD_MANAGER_PORT: its own token, limit and
 * accounting.  A device beyond the list has nobody to limit it, so a context cannot be created
 * on it (primary or not), and launches and allocations on it fail with
 * CUDA_ERROR_INVALID_DEVICE and one line in the log.  With one pod manager the launch path
 * asks for no device at all (every context the process can have is on device 0); with more it
 * asks the driver which device the current context is on. */
#include "internal.h"

#include <stdio.h>

static _Atomic uint64_t refused_logged; /* bit d: the refusal of device d was logged */

static int refuse(int ordinal)
{
    uint64_t bit = ordinal >= 0 && ordinal < 64 ? 1ull << ordinal : 1ull << 63;
    if (!(atomic_fetch_or(&refused_logged, bit) & bit))
        GEM_LOG(GEM_LOG_ERROR,
                "device %d has no pod manager (POD_MANAGER_PORT lists %d): it cannot be used "
                "here (launch-command --gpus gives a client its GPUs)",
                ordinal, gem_cfg.ndev);
    return -1;
}

int gem_dev_of_ordinal(int ordinal)
{
    if (ordinal < 0 || ordinal >= gem_cfg.ndev)
        return refuse(ordinal);
    return ordinal;
}

int gem_current_dev(void)
{
    if (gem_cfg.ndev == 1)
        return 0; /* contexts exist on device 0 only (below) */
    CUdevice d = 0;
    __typeof__(&cuCtxGetDevice) get = REAL_AUX(cuCtxGetDevice);
    if (get == NULL || get(&d) != CUDA_SUCCESS)
        d = 0;
    return gem_dev_of_ordinal(d);
}

int gem_dev_uuid(int ordinal, char *out, size_t cap)
{
    /* Never cuInit here: a process that initialises CUDA and then forks workers breaks their
     * CUDA (vLLM asks NVML, not CUDA, before it forks for exactly that reason).  Without cuInit
     * the driver answers CUDA_ERROR_NOT_INITIALIZED and changes nothing. */
    if (!gem_driver_loaded())
        return -1;
    __typeof__(&cuDeviceGet) get = REAL_AUX(cuDeviceGet);
    __typeof__(&cuDeviceGetUuid_v2) uuid_of = REAL_AUX(cuDeviceGetUuid_v2);
    CUdevice d = 0;
    CUuuid u;
    if (get == NULL || uuid_of == NULL || get(&d, ordinal) != CUDA_SUCCESS ||
        uuid_of(&u, d) != CUDA_SUCCESS)
        return -1;
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(out, cap,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
             b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
    return 0;
}

/* Each device's primary context as its latest retain returned it: the handle its allocations
 * remember (memory.c), so that they can be given back when it goes. */
static _Atomic(CUcontext) primary[GEM_MAX_DEVICES];

GEM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    GEM_ENTER(cuDevicePrimaryCtxRetain);
    if (GEM_PASS())
        return REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
    if (gem_dev_of_ordinal(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = REAL(cuDevicePrimaryCtxRetain)(pctx, dev);
    if (r == CUDA_SUCCESS && pctx != NULL)
        atomic_store(&primary[dev], *pctx);
    return r;
}

/* Context ctx is being destroyed or reset: what the hook made in it (the markers' events, the
 * unified-memory stream) goes with it, and is never used or destroyed again. */
static void ctx_going(CUcontext ctx)
{
    gem_inflight_forget_ctx(ctx);
    gem_um_forget_ctx(ctx);
}

/* A primary context takes its memory with it when it is reset (cudaDeviceReset) and when its
 * last retain is released (the driver then resets it): the bytes go back to the client's limit
 * then, not when the process exits.  Whether a release was the last is the driver's to say
 * (cuDevicePrimaryCtxGetState): retains counted here would miss those of a library loaded with
 * the hook off, and a count too low would give back memory still in use.  VMM handles stay
 * counted until released (memory.c). */
static void primary_gone(CUdevice dev)
{
    CUcontext ctx = atomic_load(&primary[dev]);
    if (ctx != NULL)
        gem_mem_forget_ctx(ctx);
}

GEM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GEM_ENTER(cuDevicePrimaryCtxRelease_v2);
    CUresult r = REAL(cuDevicePrimaryCtxRelease_v2)(dev);
    if (r != CUDA_SUCCESS || GEM_PASS() || dev < 0 || dev >= gem_cfg.ndev)
        return r;
    __typeof__(&cuDevicePrimaryCtxGetState) get_state = REAL_AUX(cuDevicePrimaryCtxGetState);
    unsigned int flags = 0;
    int active = 1;
    if (get_state != NULL && get_state(dev, &flags, &active) == CUDA_SUCCESS && !active) {
        ctx_going(atomic_load(&primary[dev])); /* (after: only the last release) */
        primary_gone(dev);
    }
    return r;
}

GEM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GEM_ENTER(cuDevicePrimaryCtxReset_v2);
    if (!GEM_PASS() && dev >= 0 && dev < gem_cfg.ndev)
        ctx_going(atomic_load(&primary[dev])); /* before: its events go with it */
    CUresult r = REAL(cuDevicePrimaryCtxReset_v2)(dev);
    if (r == CUDA_SUCCESS && !GEM_PASS() && dev >= 0 && dev < gem_cfg.ndev)
        primary_gone(dev);
    return r;
}

GEM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GEM_ENTER(cuCtxCreate_v2);
    if (!GEM_PASS() && gem_dev_of_ordinal(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return REAL(cuCtxCreate_v2)(pctx, flags, dev);
}

GEM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags,
                                   CUdevice dev)
{
    GEM_ENTER(cuCtxCreate_v4);
    if (!GEM_PASS() && gem_dev_of_ordinal(dev) < 0)
        return CUDA_ERROR_INVALID_DEVICE;
    return REAL(cuCtxCreate_v4)(pctx, params, flags, dev);
}

/* A destroyed context takes its memory with it: the bytes go back to the client's limit now,
 * not when the process exits. */
GEM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GEM_ENTER(cuCtxDestroy_v2);
    if (!GEM_PASS())
        ctx_going(ctx); /* before: its events go with it */
    CUresult r = REAL(cuCtxDestroy_v2)(ctx);
    if (r == CUDA_SUCCESS && !GEM_PASS())
        gem_mem_forget_ctx(ctx);
    return r;
}
