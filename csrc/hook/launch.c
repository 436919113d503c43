/* Launches: one shape each: count -> token gate -> real launch.  A graph launch is one burst.
 * With a valid token inside a running burst the gate is a clock read and two atomic loads.
 * When the gate fetched a new token, a unified-memory client's memory is prefetched and the
 * launch's stream ordered after it (um.c); `pts`: a per-thread-default-stream entry point. */
#include "internal.h"

static inline void gate(int pts, CUstream s)
{
    int dev = gem_current_dev();
    if (__builtin_expect(gem_token_acquire(dev), 0))
        gem_um_on_grant(dev, s, pts);
}

#define GATE(sym, pts, stream)                                                                   \
    GEM_ENTER(sym);                                                                              \
    if (!GEM_PASS())                                                                             \
    gate((pts), (stream))

GEM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream s, void **params, void **extra)
{
    GATE(cuLaunchKernel, 0, s);
    return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream s,
                                        void **params, void **extra)
{
    GATE(cuLaunchKernel_ptsz, 1, s);
    return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                     void **extra)
{
    GATE(cuLaunchKernelEx, 0, config ? config->hStream : NULL);
    return REAL(cuLaunchKernelEx)(config, f, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **params, void **extra)
{
    GATE(cuLaunchKernelEx_ptsz, 1, config ? config->hStream : NULL);
    return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                              unsigned int gz, unsigned int bx, unsigned int by,
                                              unsigned int bz, unsigned int shmem, CUstream s,
                                              void **params)
{
    GATE(cuLaunchCooperativeKernel, 0, s);
    return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int shmem, CUstream s, void **params)
{
    GATE(cuLaunchCooperativeKernel_ptsz, 1, s);
    return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

GEM_EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    GATE(cuGraphLaunch, 0, s);
    return REAL(cuGraphLaunch)(g, s);
}

GEM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    GATE(cuGraphLaunch_ptsz, 1, s);
    return REAL(cuGraphLaunch_ptsz)(g, s);
}
