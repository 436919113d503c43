/* Launches: one shape each: count -> token gate -> real launch.  A graph launch is one burst.
 * With a valid token inside a running burst the gate is a clock read and two atomic loads. */
#include "internal.h"

#define GATE(sym)                                                                                \
    GEM_ENTER(sym);                                                                              \
    if (!GEM_PASS())                                                                             \
    gem_token_acquire(gem_current_dev())

GEM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream s, void **params, void **extra)
{
    GATE(cuLaunchKernel);
    return REAL(cuLaunchKernel)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream s,
                                        void **params, void **extra)
{
    GATE(cuLaunchKernel_ptsz);
    return REAL(cuLaunchKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                     void **extra)
{
    GATE(cuLaunchKernelEx);
    return REAL(cuLaunchKernelEx)(config, f, params, extra);
}

GEM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **params, void **extra)
{
    GATE(cuLaunchKernelEx_ptsz);
    return REAL(cuLaunchKernelEx_ptsz)(config, f, params, extra);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                              unsigned int gz, unsigned int bx, unsigned int by,
                                              unsigned int bz, unsigned int shmem, CUstream s,
                                              void **params)
{
    GATE(cuLaunchCooperativeKernel);
    return REAL(cuLaunchCooperativeKernel)(f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int shmem, CUstream s, void **params)
{
    GATE(cuLaunchCooperativeKernel_ptsz);
    return REAL(cuLaunchCooperativeKernel_ptsz)(f, gx, gy, gz, bx, by, bz, shmem, s, params);
}

GEM_EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    GATE(cuGraphLaunch);
    return REAL(cuGraphLaunch)(g, s);
}

GEM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    GATE(cuGraphLaunch_ptsz);
    return REAL(cuGraphLaunch_ptsz)(g, s);
}
