/* Launches: one shape each: count -> token gate -> real launch -> (sometimes) a marker.
 * With a valid token inside a running burst the gate is a clock read and a few atomics.
 * When the gate took its slow path, a marker event follows the launch on the same stream, so
 * that inflight*.c see how far the GPU has got on every stream the process launches on.
 * Until a graph launch's cost is known, a marker also goes just before each graph launch, and
 * one goes before each token's first launch, so that the GPU time of that launch alone is
 * measured even where the GPU had run dry before it.
 * When the gate fetched a new token, a unified-memory client's memory is prefetched and the
 * launch's stream ordered after it (um.c); `pts`: a per-thread-default-stream entry point. */
#include "internal.h"

static inline int gate(int pts, CUstream s, int dev, int heavy, int waits_for_host)
{
    int g = __builtin_expect(waits_for_host, 0)
                ? gem_token_acquire_host_wait(dev, s, pts)
                : gem_token_acquire(dev, s, pts, heavy);
    if (__builtin_expect(g & GEM_GATE_FETCHED, 0))
        gem_um_on_grant(dev, s, pts);
    if (g & GEM_GATE_MARK_BEFORE)
        gem_inflight_mark(dev, s, pts, gem_now_ns(), GEM_MARK_BEFORE_LAUNCH | GEM_MARK_ALONE);
    else if (heavy && (g & GEM_GATE_MARK)) /* (recorded only until a graph's cost is known) */
        gem_inflight_mark(dev, s, pts, gem_now_ns(),
                          GEM_MARK_BEFORE_LAUNCH | GEM_MARK_BEFORE_GRAPH);
    return g;
}

/* When the launch call began, where a marker follows it (else 0: the hot path reads no clock
 * for it). */
static inline int64_t call_start(int g)
{
    return __builtin_expect(g & GEM_GATE_MARK, 0) ? gem_now_ns() : 0;
}

/* The marker after a launch says if the call held the host long: the first launch of a
 * kernel loads its module (CUDA's lazy loading), and the GPU may idle meanwhile, so the
 * segment it ends teaches a cost only where none better is known (gemini/cost.h).
 * Any long call counts (a full launch queue too, with the GPU busy: a segment lost, no
 * more).  A hot-path launch is not timed: a kernel first launched there still teaches its
 * load; nor does the flag reach another thread's marker on a lane they share (the legacy
 * stream), whose segment may hold the stalled launch. */
static inline CUresult marked(CUresult rc, int g, int dev, CUstream s, int pts, int heavy,
                              int64_t from)
{
    if (heavy && rc == CUDA_SUCCESS) /* (counted once queued: a marker before it must not) */
        gem_inflight_graph_launch(dev, s, pts);
    if (__builtin_expect(g & GEM_GATE_MARK, 0) && rc == CUDA_SUCCESS) {
        int64_t now = gem_now_ns();
        int how = heavy || (g & (GEM_GATE_MARK_ALWAYS | GEM_GATE_MARK_BEFORE)) ? GEM_MARK_ALWAYS
                                                                                : 0;
        gem_inflight_mark(dev, s, pts, now,
                          now - from >= GEM_STALL_NS ? how | GEM_MARK_AFTER_STALL : how);
    }
    return rc;
}

/* The body of every launch wrapper: `call` is the argument list of the real function; heavy:
 * a launch of many kernels (a graph); waits: a kernel that waits for its host (host_wait.c). */
#define GATED(sym, pts, heavy, waits, stream, call)                                              \
    do {                                                                                         \
        GEM_ENTER(sym);                                                                          \
        if (GEM_PASS())                                                                          \
            return REAL(sym) call;                                                               \
        int dev_ = gem_current_dev();                                                            \
        if (__builtin_expect(dev_ < 0, 0)) /* no pod manager: never unlimited */                 \
            return CUDA_ERROR_INVALID_DEVICE;                                                    \
        int g_ = gate((pts), (stream), dev_, (heavy), (waits));                                  \
        int64_t from_ = call_start(g_);                                                          \
        return marked(REAL(sym) call, g_, dev_, (stream), (pts), (heavy), from_);                \
    } while (0)
#define GATED_LAUNCH(sym, pts, stream, call, f, gx, gy, gz, bx, by, bz)                          \
    GATED(sym, pts, 0, gem_host_waits(f, gx, gy, gz, bx, by, bz), stream, call)
#define GATED_LAUNCH_EX(sym, pts, config, call, f)                                               \
    GATED(sym, pts, 0,                                                                           \
          (config) != NULL && gem_host_waits(f, (config)->gridDimX, (config)->gridDimY,          \
                                             (config)->gridDimZ, (config)->blockDimX,            \
                                             (config)->blockDimY, (config)->blockDimZ),          \
          (config) ? (config)->hStream : NULL, call)

GEM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shmem, CUstream s, void **params, void **extra)
{
    GATED_LAUNCH(cuLaunchKernel, 0, s, (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra), f,
                 gx, gy, gz, bx, by, bz);
}

GEM_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shmem, CUstream s,
                                        void **params, void **extra)
{
    GATED_LAUNCH(cuLaunchKernel_ptsz, 1, s, (f, gx, gy, gz, bx, by, bz, shmem, s, params, extra),
                 f, gx, gy, gz, bx, by, bz);
}

GEM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                     void **extra)
{
    GATED_LAUNCH_EX(cuLaunchKernelEx, 0, config, (config, f, params, extra), f);
}

GEM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **params, void **extra)
{
    GATED_LAUNCH_EX(cuLaunchKernelEx_ptsz, 1, config, (config, f, params, extra), f);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                              unsigned int gz, unsigned int bx, unsigned int by,
                                              unsigned int bz, unsigned int shmem, CUstream s,
                                              void **params)
{
    GATED_LAUNCH(cuLaunchCooperativeKernel, 0, s, (f, gx, gy, gz, bx, by, bz, shmem, s, params),
                 f, gx, gy, gz, bx, by, bz);
}

GEM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int shmem, CUstream s, void **params)
{
    GATED_LAUNCH(cuLaunchCooperativeKernel_ptsz, 1, s,
                 (f, gx, gy, gz, bx, by, bz, shmem, s, params), f, gx, gy, gz, bx, by, bz);
}

GEM_EXPORT CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
    GATED(cuGraphLaunch, 0, 1, 0, s, (g, s));
}

GEM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s)
{
    GATED(cuGraphLaunch_ptsz, 1, 1, 0, s, (g, s));
}
