/* Host synchronisation points: the end of a burst for the predictor (spec §6.7, widened to
 * stream/event syncs and every blocking copy as §14.2 asks).  The stop is marked after the
 * real call returns, whatever it returned.
 *
 * A context or stream sync that succeeded also tells inflight.c that what was launched before
 * it has run: else the launches after the newest marker (hot-path ones carry none) would still
 * count as queued, and a burst starting near a token's end would be held with the GPU idle.
 * Every sync point tells it how long the host waited (see gem_inflight_waited). */
#include "internal.h"

/* `call`, then: a burst ended, and inflight.c hears how long the host waited (markers that
 * ran meanwhile prove nothing of the GPU keeping up; a long wait, that the GPU was behind) and,
 * `all_ran` and the call succeeded, that everything launched before it has run. */
#define WAITED_FOR(call, all_ran)                                                                \
    do {                                                                                         \
        if (GEM_PASS())                                                                          \
            return call;                                                                         \
        int dev_ = gem_current_dev();                                                            \
        struct gem_launch_count before_ = {0};                                                   \
        if (dev_ >= 0)                                                                           \
            before_ = gem_inflight_count(dev_);                                                  \
        int64_t from_ = gem_now_ns();                                                            \
        CUresult r_ = call;                                                                      \
        int64_t to_ = gem_now_ns(), ran_by_ = to_;                                               \
        if (dev_ >= 0)                                                                           \
            ran_by_ = gem_inflight_waited(dev_, before_, from_, to_,                             \
                                          (all_ran) && r_ == CUDA_SUCCESS);                      \
        gem_token_note_sync(dev_, from_, to_, ran_by_, r_ == CUDA_SUCCESS);                      \
        return r_;                                                                               \
    } while (0)
#define SYNCED(call) WAITED_FOR(call, 1)
#define WAITED(call) WAITED_FOR(call, 0)

GEM_EXPORT CUresult cuCtxSynchronize(void)
{
    GEM_ENTER(cuCtxSynchronize);
    SYNCED(REAL(cuCtxSynchronize)());
}

GEM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    GEM_ENTER(cuCtxSynchronize_v2);
    SYNCED(REAL(cuCtxSynchronize_v2)(ctx));
}

GEM_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    GEM_ENTER(cuStreamSynchronize);
    SYNCED(REAL(cuStreamSynchronize)(s));
}

GEM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    GEM_ENTER(cuStreamSynchronize_ptsz);
    SYNCED(REAL(cuStreamSynchronize_ptsz)(s));
}

GEM_EXPORT CUresult cuEventSynchronize(CUevent e)
{
    GEM_ENTER(cuEventSynchronize);
    WAITED(REAL(cuEventSynchronize)(e));
}

GEM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpy);
    WAITED(REAL(cuMemcpy)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpy_ptds);
    WAITED(REAL(cuMemcpy_ptds)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    GEM_ENTER(cuMemcpyHtoD_v2);
    WAITED(REAL(cuMemcpyHtoD_v2)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n)
{
    GEM_ENTER(cuMemcpyHtoD_v2_ptds);
    WAITED(REAL(cuMemcpyHtoD_v2_ptds)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpyDtoH_v2);
    WAITED(REAL(cuMemcpyDtoH_v2)(dst, src, n));
}

GEM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n)
{
    GEM_ENTER(cuMemcpyDtoH_v2_ptds);
    WAITED(REAL(cuMemcpyDtoH_v2_ptds)(dst, src, n));
}
