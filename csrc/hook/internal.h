/* Hook-private declarations.  Nothing here is exported: the library is built with
 * -fvisibility=hidden and only GEM_EXPORT functions (the cu* and nvml* wrappers of hooks.def
 * and dlsym) are visible, as libgemhook.map also says. */
#ifndef GEMINI_HOOK_INTERNAL_H
#define GEMINI_HOOK_INTERNAL_H

#include "gemini/cuda_subset.h"
#include "gemini/nvml_subset.h"
#include "gemini/ticks.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define GEM_EXPORT __attribute__((visibility("default")))
#define GEM_MAX_DEVICES 16

/* ---- the symbol table (real.c) ------------------------------------------------------------ */
enum gem_stream_kind { LEG = 0, PTS = 1, ANY = 2 };

enum gem_lib { GEM_LIB_CUDA = 0, GEM_LIB_NVML = 1 };

enum gem_sym {
#define GEM_HOOK(sym, base, ver, stream) GEM_SYM_##sym,
#define GEM_NVML_HOOK(sym) GEM_SYM_##sym,
#include "gemini/hooks.def"
#undef GEM_NVML_HOOK
#undef GEM_HOOK
    GEM_SYM_COUNT
};

/* Driver functions the hook calls but does not intercept. */
#define GEM_AUX_LIST(X)                                                                          \
    X(cuCtxGetDevice) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuEventCreate) X(cuEventRecord)    \
        X(cuEventElapsedTime) X(cuEventElapsedTime_v2) X(cuEventDestroy_v2)                      \
        X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamWaitEvent) X(cuStreamIsCapturing)      \
        X(cuMemPrefetchAsync_v2) X(cuEventQuery) X(cuDeviceGet) X(cuDeviceGetUuid_v2)         \
        X(cuDevicePrimaryCtxGetState) X(cuThreadExchangeStreamCaptureMode)       \
        X(cuMemPoolGetAttribute) X(cuDeviceGetMemPool) X(cuFuncGetName)
enum gem_aux {
#define GEM_AUX_ENUM(sym) GEM_AUX_##sym,
    GEM_AUX_LIST(GEM_AUX_ENUM)
#undef GEM_AUX_ENUM
        GEM_AUX_COUNT
};

/* NVML functions the hook calls but does not intercept (from the application's libnvidia-ml). */
#define GEM_NVML_AUX_LIST(X) X(nvmlDeviceGetUUID) X(nvmlDeviceGetIndex)
enum gem_nvml_aux {
#define GEM_NVML_AUX_ENUM(sym) GEM_NVML_AUX_##sym,
    GEM_NVML_AUX_LIST(GEM_NVML_AUX_ENUM)
#undef GEM_NVML_AUX_ENUM
        GEM_NVML_AUX_COUNT
};

struct gem_sym_info {
    const char *name;   /* exported name */
    const char *base;   /* cuGetProcAddress lookup name (NVML rows: the name) */
    int version;        /* first cudaVersion resolving to it */
    int stream;         /* enum gem_stream_kind */
    void *wrapper;      /* our function */
    int lib;            /* enum gem_lib: where the real one is */
};
extern const struct gem_sym_info gem_syms[GEM_SYM_COUNT];

typedef void *(*gem_dlsym_fn)(void *, const char *);
gem_dlsym_fn gem_real_dlsym_fn(void); /* glibc's dlsym; NULL if not found */
/* The real dlsym's answer, as asked from the hook: RTLD_NEXT means next after the hook. */
void *gem_real_dlsym(void *handle, const char *name);
void *gem_real_by_name(const char *name); /* the driver's exported symbol, NULL if none */
void *gem_real(enum gem_sym s);            /* never NULL: a stub returning "not found" */
void *gem_real_aux(enum gem_aux a);        /* NULL if the driver lacks it */
void *gem_real_nvml_aux(enum gem_nvml_aux a); /* NULL if no libnvidia-ml is loaded */
int gem_driver_loaded(void);               /* libcuda is in the process already (loads nothing) */
void gem_real_set(enum gem_sym s, void *fn); /* a pointer the driver gave (ignored if ours) */
void *gem_real_exported(enum gem_sym s);   /* the driver's exported symbol, or NULL */
int gem_sym_find(const char *name);        /* index in gem_syms or -1 */
int gem_is_wrapper(const void *fn);

#define REAL(sym) ((__typeof__(&sym))gem_real(GEM_SYM_##sym))
#define REAL_AUX(sym) ((__typeof__(&sym))gem_real_aux(GEM_AUX_##sym))
#define REAL_NVML_AUX(sym) ((__typeof__(&sym))gem_real_nvml_aux(GEM_NVML_AUX_##sym))

/* ---- init, configuration, stats (init.c) ------------------------------------------------- */
struct gem_endpoint {
    char host[64];
    char unix_path[108]; /* non-empty: Unix socket */
    int port;
};

#define GEM_SECRET_LEN 16
enum gem_secret_state { GEM_SECRET_NONE = 0, GEM_SECRET_OK = 1, GEM_SECRET_BAD = -1 };

struct gem_config {
    int disabled;
    int ndev;
    struct gem_endpoint ep[GEM_MAX_DEVICES];
    char pod_name[64];
    char stats_path[256];
    int secret_state;                /* enum gem_secret_state, from GEMINI_SECRET_FILE */
    uint8_t secret[GEM_SECRET_LEN];  /* GEM_SECRET_OK: proved in a HELLO on each connection */
    char secret_error[320];          /* GEM_SECRET_BAD: why, for the "unreachable" line */
    int ticks;                       /* the hot path reads the time-stamp counter (gem_ticks) */
    struct gem_ticks_anchor ticks_anchor; /* ... and both clocks were read here at the start */
};
extern struct gem_config gem_cfg;
extern _Atomic uint64_t gem_calls[GEM_SYM_COUNT];
extern int gem_stats_on;

void gem_init(void);
/* The whole number in environment variable `name`, in [lo, hi]; unset or empty: `dflt`; anything
 * else (not a number, out of range) is logged once and gives `dflt`. */
long long gem_env_number(const char *name, long long dflt, long long lo, long long hi);
static inline void gem_enter(enum gem_sym s)
{
    gem_init();
    if (gem_stats_on)
        atomic_fetch_add_explicit(&gem_calls[s], 1, memory_order_relaxed);
}
#define GEM_ENTER(sym) gem_enter(GEM_SYM_##sym)

/* What the launch gate did (token*.c, inflight*.c), written beside the call counts as "gate.*":
 * where a launcher under the hook spends its time (holds, token requests), for diagnosis. */
enum gem_gate_stat {
    GEM_STAT_SLOW,          /* launches that took the slow path */
    GEM_STAT_MARKS,         /* marker events recorded */
    GEM_STAT_COSTS,         /* segments between two markers that taught the cost per launch */
    GEM_STAT_COST_GAPS,     /* ... that taught nothing: the GPU may have idled in between */
    GEM_STAT_COST_FAILS,    /* ... that taught nothing: their elapsed time was not to be had */
    GEM_STAT_HOLD_COSTS,    /* of GEM_STAT_COSTS, those that began at a hold (hold_teaches) */
    GEM_STAT_IDLE_GO,       /* launches allowed unmarked, no cost known, the GPU keeping up */
    GEM_STAT_HOLDS,         /* sleeps of a held launch: the queue would outlast the token */
    GEM_STAT_HOLD_NS,
    GEM_STAT_UNKNOWN_HOLDS, /* ... of which: the cost per launch was not known yet */
    GEM_STAT_FETCH_EXPIRED, /* token requests: no token, or it had expired */
    GEM_STAT_FETCH_TAIL,    /* ... in the token's tail */
    GEM_STAT_FETCH_BURST,   /* ... early: the predicted burst did not fit (v1) */
    GEM_STAT_FETCH_CREDIT,  /* ... by the renewer, the token gone, launching on credit (alone) */
    GEM_STAT_FETCH_ROOM,    /* ... early: a kernel that waits for its host lacked room */
    GEM_STAT_FETCH_NS,      /* time the launching thread waited for them */
    GEM_STAT_COUNT
};
extern _Atomic uint64_t gem_gate_stats[GEM_STAT_COUNT];
static inline void gem_stat_add(enum gem_gate_stat s, uint64_t n)
{
    if (gem_stats_on)
        atomic_fetch_add_explicit(&gem_gate_stats[s], n, memory_order_relaxed);
}
#define GEM_PASS() (gem_cfg.disabled)

/* Device index of the pod manager for a device ordinal / the current context; -1: the device has
 * none and must not be used (logged once; device.c). */
int gem_dev_of_ordinal(int ordinal);
int gem_current_dev(void);
/* The driver's UUID of a device ordinal ("GPU-xxxxxxxx-..."), only where CUDA is initialised in
 * this process already (nothing here initialises it); 0, or -1 when not known. */
int gem_dev_uuid(int ordinal, char *out, size_t cap);

static inline int64_t gem_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
/* gem_now_ns()'s clock at `at_ns`, for pthread_cond_timedwait on a CLOCK_MONOTONIC condition. */
static inline void gem_timespec_at(struct timespec *ts, int64_t at_ns)
{
    ts->tv_sec = at_ns / 1000000000;
    ts->tv_nsec = at_ns % 1000000000;
}
void gem_sleep_ns(int64_t ns);

/* The launch gate's hot-path clock (ticks.h): the time-stamp counter, on x86-64 where the
 * kernel keeps it as its clocksource (gem_cfg.ticks; GEMINI_HOOK_TICKS=0 turns it off). */
static inline uint64_t gem_ticks(void)
{
#if defined(__x86_64__)
    return __builtin_ia32_rdtsc();
#else
    return 0;
#endif
}

/* ---- log.c ------------------------------------------------------------------------------- */
enum gem_log_level { GEM_LOG_ERROR = 0, GEM_LOG_WARN = 1, GEM_LOG_INFO = 2, GEM_LOG_DEBUG = 3 };
extern int gem_log_level;
void gem_log_init(void);
void gem_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define GEM_LOG(level, ...)                                                                      \
    do {                                                                                         \
        if ((level) <= gem_log_level)                                                            \
            gem_log((level), __VA_ARGS__);                                                       \
    } while (0)

/* ---- threads.c --------------------------------------------------------------------------- */
/* Starts fn(arg) on a detached thread with every signal blocked: a signal sent to the process
 * goes to one of the application's threads, where its handlers expect to run (started from a
 * launching thread, ours took its mask, often with everything open).  0, or pthread_create's
 * error. */
int gem_thread_start(void *(*fn)(void *), void *arg);

/* ---- ipc.c ------------------------------------------------------------------------------- */
/* Blocking calls that retry until the pod manager answers (fail closed).  0 on success.
 * is_allocate: GEM_MEM_FREE, GEM_MEM_ALLOC or GEM_MEM_LEASE (wire.h). */
int gem_ipc_quota(int dev, double overuse_ms, double burst_ms, double gpu_wait_ms,
                  float run_ms, uint32_t run_launches, double *quota_ms, uint32_t *flags,
                  uint32_t *sharers, double *sent_at);
int gem_ipc_mem_limit(int dev, uint64_t *used, uint64_t *limit, uint64_t *flags);
int gem_ipc_mem_update(int dev, uint64_t bytes, int is_allocate, int *verdict);
/* One attempt, no retry: -1 when the connection failed (a new one announces itself again) or
 * the pod manager refused the request as a whole (a status other than OK). */
int gem_ipc_mem_update_once(int dev, uint64_t bytes, int is_allocate, int *verdict);
int gem_ipc_mem_limit_once(int dev, uint64_t *used, uint64_t *limit, uint64_t *flags);
/* The same on the connection open now only, never a new one: -1 also when there is none (or
 * it is not yet announced). */
int gem_ipc_mem_update_open(int dev, uint64_t bytes, int is_allocate, int *verdict);
/* PROCESS with this process's pid: the client's process at `index` (see wire.h). */
int gem_ipc_process_once(int dev, int32_t index, int32_t *count, int32_t *pid, uint64_t *bytes);
/* Runs before the first request on each new connection; `reconnect`: an earlier one was lost.
 * 0: done; else it runs again before the connection's next request (what it told the pod
 * manager was refused: it may know its client's limit by then). */
typedef int (*gem_ipc_connect_fn)(int dev, int reconnect);
void gem_ipc_on_connect(gem_ipc_connect_fn fn);
/* Runs on the connection's watcher thread, no lock held, for an unsolicited message (a lease
 * recall, a token cut: its id says which) that came on connection number `conn_gen` of dev. */
typedef void (*gem_ipc_notify_fn)(int dev, uint64_t conn_gen, const uint8_t *msg);
void gem_ipc_on_notify(gem_ipc_notify_fn fn);
/* RECALL on connection `conn_gen` only (never a new one): `take` gives the bytes to send back,
 * read under the connection's lock (so that they are bytes this connection granted); *taken
 * says what it gave (0 if the connection was gone).  0 answered, -1 not sent or lost. */
typedef uint64_t (*gem_ipc_take_fn)(int dev);
int gem_ipc_recall_once(int dev, uint64_t conn_gen, gem_ipc_take_fn take, uint64_t *taken);

/* lease.c: allocations reserve through a local lease of bytes (1: granted, 0: refused;
 * `drops_at`, unless NULL: gem_lease_drops() as the bytes became ours). */
int gem_lease_take(int dev, uint64_t bytes, uint64_t *drops_at);
void gem_lease_give(int dev, uint64_t bytes);
uint64_t gem_lease_spare(int dev);
void gem_lease_drop(int dev);
uint64_t gem_lease_drops(int dev); /* the leases dropped so far: connections made again */
/* The pod manager recalls our unspent lease (an unsolicited message: GEM_NOTIFY_ID). */
void gem_lease_on_recall(int dev, uint64_t conn_gen, const uint8_t *msg);
void gem_lease_reset_after_fork(void);
void gem_ipc_reset_after_fork(void);

/* ---- inflight*.c (inflight.h): GPU work queued, from marker events on every stream --------- */
/* One more launch on dev, to stream s (pts: through a per-thread default stream entry point).
 * gem_inflight_count: the device's launches so far (a sum: not for the hot path). */
void gem_inflight_launch(int dev, CUstream s, int pts);
/* The launch just counted, on stream s, is a graph launch. */
void gem_inflight_graph_launch(int dev, CUstream s, int pts);
struct gem_launch_count {
    uint64_t launches;
    uint64_t graphs; /* of which graph launches */
};
struct gem_launch_count gem_inflight_count(int dev);
#define GEM_INFLIGHT_UNKNOWN (-1) /* gem_inflight_queued_ns: not known yet, hold briefly */
#define GEM_SYNC_BEHIND_NS 200000 /* a host wait this long at a sync: the GPU was behind */
/* The estimate of the queue up to the end of the launch at the gate (a graph launch:
 * `graph`), as of the caller's time `asked_ns` (however long ago: what ran since is not taken
 * off), and in *half_ns half the launch's own estimate (0 where no cost is known): the token
 * gate lets it go where its middle fits (token.c).  Polls, never waits. */
int64_t gem_inflight_queued_ns(int dev, CUstream s, int pts, int64_t asked_ns, int graph,
                               int64_t *half_ns);
/* The host waited for the GPU (any sync point) from `from` until `now`, the launches in
 * `before` counted when it began; all_ran: a context or stream sync that succeeded, after which
 * those launches have run.  Returns by when they had run, at the latest: `now`, or earlier
 * where a marker after the last of them says so (the host may have returned late). */
int64_t gem_inflight_waited(int dev, struct gem_launch_count before, int64_t from, int64_t now,
                            int all_ran);
/* How many kernel launches, and graph launches, may go on the hot path in room_ns. */
void gem_inflight_allowance(int dev, int64_t room_ns, uint64_t *kernels, uint64_t *graphs);
/* How many processes of the client share its token (the latest grant said; 0 or 1: this one). */
void gem_inflight_set_sharers(int dev, uint32_t sharers);
uint32_t gem_inflight_sharers(int dev);
/* The GPU time of one launch: the longer of a kernel launch's and a graph launch's learnt cost
 * (0: neither known yet). */
int64_t gem_inflight_launch_ns(int dev);
/* When the oldest marker out should finish, by the estimate (0: none out, or no estimate). */
int64_t gem_inflight_next_done_ns(int dev);
/* The gate's estimate of the queue at a look (gem_inflight_queued_ns), kept at debug level
 * for the debug log: when (0: no look with a cost known yet), how long, over how many
 * launches, at what cost (the one learnt, and the one as of the token's start: the launches
 * were taken at the higher), and the drain factor. */
struct gem_look {
    int64_t at_ns, queued_ns;
    uint64_t pending;
    double per_ns, at_start_ns, factor;
    int64_t seen_ns; /* when the newest finished marker was seen ... */
    unsigned out;    /* ... and the markers out then */
};
struct gem_look gem_inflight_latest_look(int dev);
void gem_look_describe(const struct gem_look *l, char *buf, size_t n);
/* After a launch (within MARK_GAP_NS of the last marker only if GEM_MARK_ALWAYS), or, with
 * GEM_MARK_BEFORE_LAUNCH, just before one (counted, not queued yet).  GEM_MARK_BEFORE_GRAPH:
 * just before a graph launch, and only while no graph launch's cost is known.  Either that or
 * GEM_MARK_ALONE (just before a launch, with a marker after it): the launch is measured alone,
 * even where the GPU ran dry before it.  GEM_MARK_IF_LAUNCHED: only where launches went on the
 * stream since its newest marker, the one it went just before included (a sync is about to
 * wait for them), and not where the stream cannot say whether it captures.  GEM_MARK_AFTER_STALL:
 * after a launch call that held the host GEM_STALL_NS or more (the GPU may have idled). */
enum {
    GEM_MARK_BEFORE_LAUNCH = 1,
    GEM_MARK_ALWAYS = 2,
    GEM_MARK_QUEUE_END = 4,
    GEM_MARK_BEFORE_GRAPH = 8,
    GEM_MARK_ALONE = 16,
    GEM_MARK_IF_LAUNCHED = 32,
    GEM_MARK_AFTER_STALL = 64
};
#define GEM_STALL_NS 100000 /* a launch call takes microseconds; a module's lazy load, ms */
void gem_inflight_mark(int dev, CUstream s, int per_thread, int64_t now, int how);
int gem_inflight_capturing(CUstream s, int per_thread); /* launches there go into a graph */
uint64_t gem_inflight_seq(int dev); /* markers recorded so far */
/* The GPU time and launches of the segments measured running back to back (the cost's samples)
 * that began to run from `from_ns` on (a new token: gem_inflight_measure_from, at `now`);
 * gem_inflight_measured says (once) those of the token before the latest, whose queue has run. */
void gem_inflight_measure_from(int dev, int64_t from_ns, int64_t now);
void gem_inflight_measured(int dev, double *gpu_ms, uint64_t *count, int *graphs);
/* Waits until the markers recorded up to `seq` have run, on every stream; by when they had
 * (their GPU time bounds a look that came late), or -1. */
int64_t gem_inflight_wait_all(int dev, uint64_t seq);
void gem_inflight_reset_after_fork(void);
/* Context ctx is being destroyed or reset: the markers recorded in it are dropped, their
 * events left to it (freed with it, their handles may be reused for the application's). */
void gem_inflight_forget_ctx(CUcontext ctx);

/* ---- host_wait.c ------------------------------------------------------------------------ */
/* f is a kernel that spins on the GPU until its host says go (XLA's autotuning timer). */
int gem_host_wait_kernel(CUfunction f);
/* A launch of one thread in one block of such a kernel (the dimensions first: the hot path). */
static inline int gem_host_waits(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz)
{
    return __builtin_expect(gx == 1 && bx == 1, 0) && gy == 1 && gz == 1 && by == 1 && bz == 1 &&
           gem_host_wait_kernel(f);
}

/* ---- token*.c (token.h) ------------------------------------------------------------------ */
/* GEM_GATE_MARK_ALWAYS: mark even within MARK_GAP_NS of the last marker (a calibration's
 * measured part: token.c).  GEM_GATE_MARK_BEFORE: mark just before the launch too, to measure
 * it alone (a token's first: token.c). */
enum {
    GEM_GATE_FETCHED = 1,
    GEM_GATE_MARK = 2,
    GEM_GATE_MARK_ALWAYS = 4,
    GEM_GATE_MARK_BEFORE = 8
};
/* GEM_GATE_* bits: a new token was fetched; mark after launch.  s, per_thread: the stream the
 * launch goes to (a token handed back is marked on it first). */
/* dev >= 0 (launch.c refuses others); heavy: a launch of many kernels (a graph), always on the
 * slow path (launch.c marks it after the launch, whatever the gap since the last marker). */
int gem_token_acquire(int dev, CUstream s, int per_thread, int heavy);
/* The same for a launch of a kernel that waits for its host (host_wait.c): it goes only with
 * room left in the token, else on the next token (always the slow path; token.c). */
int gem_token_acquire_host_wait(int dev, CUstream s, int per_thread);
/* A stream sync on `s` is called at `now` (before the wait). */
void gem_token_before_stream_sync(int dev, CUstream s, int per_thread, int64_t now);
void gem_token_before_ctx_sync(int dev, int64_t now);
/* A sync point called at `from_ns` returned at `to_ns` (`ok`: it succeeded), the GPU having
 * run what it waited for by `ran_by_ns` (gem_inflight_waited). */
void gem_token_note_sync(int dev, int64_t from_ns, int64_t to_ns, int64_t ran_by_ns, int ok);
/* `ns` more waited on the GPU, seen other than in a sync (a host function: sync.c). */
void gem_token_note_waited(int dev, int64_t ns);
void gem_token_reset_after_fork(void);
/* The pod manager cut our token (an unsolicited QUOTA reply, GEM_CUT_ID: a lowered cap). */
void gem_token_on_cut(int dev, const uint8_t *msg);

/* ---- memory.c ---------------------------------------------------------------------------- */
uint64_t gem_mem_live_bytes(int dev);
/* Forget (and give back) every allocation made while `ctx` was current: it was destroyed. */
void gem_mem_forget_ctx(CUcontext ctx);
/* The ipc.c on-connect callback: a new pod manager knows nothing of us (-1: the claim of our
 * live bytes was not taken, to be made again). */
int gem_mem_on_connect(int dev, int reconnect);
/* The client's memory use and limit on dev (MEM_LIMIT); its flags go to um.c. */
void gem_mem_limit(int dev, uint64_t *used, uint64_t *limit);
/* The same for NVML, one attempt: 0 fresh, 1 the last figures the pod manager gave this
 * process (it cannot be reached now), -1 none. */
int gem_mem_view(int dev, uint64_t *used, uint64_t *limit);
/* The client's use as this process's cuMemGetInfo counts it: its own unspent lease is free. */
uint64_t gem_mem_used_seen(int dev, uint64_t used);

/* ---- nvml.c ------------------------------------------------------------------------------ */
void gem_nvml_on_connect(int dev); /* tells the pod manager this process's pid */
struct gem_um_range {
    CUdeviceptr ptr;
    uint64_t bytes;
};
/* The device's live allocations served as managed memory: a malloc'd array (free it), or NULL. */
struct gem_um_range *gem_mem_um_ranges(int dev, size_t *n);

/* ---- um.c: unified-memory mode (flags from MEM_LIMIT, prefetch at grant, evict at expiry) -- */
void gem_um_note_flags(int dev, uint64_t flags); /* every MEM_LIMIT reply */
void gem_um_forget_flags(int dev);               /* a new connection: ask again when needed */
uint64_t gem_um_flags(int dev);                  /* asks MEM_LIMIT if unknown: slow paths only */
int gem_um_maybe(int dev); /* a unified-memory client, or not known yet; never asks */
void gem_um_on_grant(int dev, CUstream launch_stream, int per_thread);
void gem_um_on_expiry(int dev, CUcontext ctx);
int gem_um_evicts(int dev); /* evict-on-release known to be on (no request) */
void gem_um_reset_after_fork(void);
/* Context ctx is being destroyed or reset: the hook's stream and event there go with it. */
void gem_um_forget_ctx(CUcontext ctx);
void gem_mem_reset_after_fork(void);

/* ---- memory pools' reserves (pools.c) ------------------------------------------------------ */
CUmemoryPool gem_pool_current(void); /* cuMemAllocAsync's: the current device's (NULL: unknown) */
/* Before an allocation of `bytes` from `pool`: what its frees left counted that it may reuse
 * (d->drawn; the caller reserves the rest), its book's ticket, and the pool's reserve then;
 * gem_pool_undraw if the allocation fails, gem_pool_lent if it succeeds (the ticket for its
 * entry; 0: not tracked, more pools than books). */
struct gem_pool_draw {
    uint64_t ticket, drawn, reserved_before;
};
void gem_pool_draw(CUmemoryPool pool, int dev, uint64_t bytes, struct gem_pool_draw *d);
void gem_pool_undraw(const struct gem_pool_draw *d, int dev);
uint64_t gem_pool_lent(const struct gem_pool_draw *d, int dev, uint64_t bytes);
/* An allocation of the ticket's pool freed; `counted`: its bytes are still counted (then kept).
 * Returns what the caller gives back (gem_lease_give), after any lock of its own. */
uint64_t gem_pool_returned(uint64_t ticket, uint64_t bytes, int counted);
int gem_pools_settle(void); /* what the pools released goes back; 1: something did */
uint64_t gem_pools_kept(int dev); /* counted in books: kept, and drawn by allocations in flight */
void gem_pools_reset_after_fork(void);

#endif
