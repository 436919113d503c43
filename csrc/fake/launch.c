/* Streams, kernel launches (plain, Ex, cooperative, graphs; each also _ptsz), stream capture,
 * graphs and events.  Streams and events are process-local; their times are points on the
 * shared timeline (timeline.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"


#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define GRAPH_MAGIC 0x47525048u
#define EXEC_MAGIC 0x47455845u

struct CUgraph_st {
    uint32_t magic;
    int dev;
    size_t n, cap;
    uint64_t *durs;
};

struct CUgraphExec_st {
    uint32_t magic;
    int dev;
    size_t n;
    uint64_t *durs;
};

struct CUstream_st {
    uint32_t magic;
    CUcontext ctx; /* made in it, and dead with its life (fake_ctx_alive); NULL: the legacy or
                    * a per-thread default stream, which outlive any */
    uint64_t life;
    int dev;
    int legacy; /* the NULL / CU_STREAM_LEGACY stream: waits for every blocking stream */
    int nonblocking; /* CU_STREAM_NON_BLOCKING: the legacy stream does not wait for it */
    pthread_mutex_t mu;
    uint64_t tail; /* end of the last kernel enqueued on it */
    uint64_t ring[FAKE_QUEUE_DEPTH]; /* ends of the last kernels, oldest at head */
    unsigned head, count;
    struct CUgraph_st *capture; /* non-NULL while capturing */
    CUstreamCaptureMode capture_mode;
    unsigned long capture_breaks; /* g_capture_breaks when the capture began */
    uint64_t pf_seen; /* the latest device prefetch (g_prefetch_seq) this stream is ordered after */
};

struct CUevent_st {
    uint32_t magic;
    CUcontext ctx;  /* made in it, and dead with its life (fake_ctx_alive) */
    uint64_t life;
    unsigned flags;
    int recorded;
    uint64_t t;
    uint64_t pf_seen; /* the recording stream's pf_seen */
};

/* Device prefetches issued by this process so far (each one numbered). */
static uint64_t g_prefetch_seq;

/* ---- stream handles -> stream objects ---------------------------------------------------------- */
static pthread_mutex_t g_legacy_mu = PTHREAD_MUTEX_INITIALIZER;
static struct CUstream_st *g_legacy[FAKE_MAX_DEVICES];
static pthread_key_t g_pts_key;
static pthread_once_t g_pts_once = PTHREAD_ONCE_INIT;

static struct CUstream_st *stream_new(int dev, int legacy)
{
    struct CUstream_st *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    s->dev = dev;
    s->legacy = legacy;
    s->magic = STREAM_MAGIC;
    return s;
}

static void pts_free(void *p)
{
    struct CUstream_st **arr = p;
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        free(arr[d]);
    free(arr);
}

static void pts_key_make(void)
{
    pthread_key_create(&g_pts_key, pts_free);
}

static struct CUstream_st *legacy_stream(int dev)
{
    pthread_mutex_lock(&g_legacy_mu);
    if (g_legacy[dev] == NULL)
        g_legacy[dev] = stream_new(dev, 1);
    struct CUstream_st *s = g_legacy[dev];
    pthread_mutex_unlock(&g_legacy_mu);
    return s;
}

static struct CUstream_st *per_thread_stream(int dev)
{
    pthread_once(&g_pts_once, pts_key_make);
    struct CUstream_st **arr = pthread_getspecific(g_pts_key);
    if (arr == NULL) {
        arr = calloc(FAKE_MAX_DEVICES, sizeof *arr);
        if (arr == NULL)
            return NULL;
        pthread_setspecific(g_pts_key, arr);
    }
    if (arr[dev] == NULL)
        arr[dev] = stream_new(dev, 0);
    return arr[dev];
}

static int g_global_captures; /* atomic: captures under way begun in global mode (see below) */
static unsigned long g_capture_breaks;      /* atomic: unsafe calls made during a capture */
static __thread int t_captures;             /* captures under way begun here, not relaxed */
static __thread CUstreamCaptureMode t_mode; /* this thread's mode (0: global) */

void fake_streams_atfork_child(void)
{
    g_prefetch_seq = 0;
    g_global_captures = 0; /* the child's threads capture nothing */
    pthread_mutex_init(&g_legacy_mu, NULL);
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        g_legacy[d] = NULL; /* the parent's queue is not the child's */
}

/* A use of a stream or an event whose context was destroyed or reset since it was made: a
 * real driver frees them with it, and may hand their handles to the next ones made, so a stale
 * one may be another's.  Here the struct stays (the error is safe to return), and the first
 * such use in the process is said on stderr, for the tests. */
static CUresult stale(const char *what, const char *of)
{
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "fake driver: %s on %s of a context destroyed or reset since\n", what,
                of);
    return CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

static CUresult stream_get(CUstream h, int per_thread, struct CUstream_st **out)
{
    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (h != NULL && h != CU_STREAM_LEGACY && h != CU_STREAM_PER_THREAD) {
        if (h->magic != STREAM_MAGIC)
            return CUDA_ERROR_INVALID_HANDLE;
        if (h->ctx != NULL && !fake_ctx_alive(h->ctx, h->life))
            return stale("a call", "a stream");
        *out = h;
        return CUDA_SUCCESS;
    }
    int dev;
    CUresult rc = fake_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (h == CU_STREAM_PER_THREAD || (h == NULL && per_thread))
        *out = per_thread_stream(dev);
    else
        *out = legacy_stream(dev);
    return *out != NULL ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult fake_stream_device(CUstream h, int per_thread, int *dev)
{
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc == CUDA_SUCCESS)
        *dev = s->dev;
    return rc;
}

void fake_stream_note_prefetch(CUstream h, int per_thread)
{
    struct CUstream_st *s;
    if (stream_get(h, per_thread, &s) != CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&s->mu);
    s->pf_seen = __atomic_add_fetch(&g_prefetch_seq, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_unlock(&s->mu);
}

/* ---- the launch path shared by every launch entry point --------------------------------------- */
static CUresult graph_append(struct CUgraph_st *g, const uint64_t *durs, size_t n)
{
    if (g->n + n > g->cap) {
        size_t cap = g->cap ? g->cap : 16;
        while (cap < g->n + n)
            cap *= 2;
        uint64_t *p = realloc(g->durs, cap * sizeof *p);
        if (p == NULL)
            return CUDA_ERROR_OUT_OF_MEMORY;
        g->durs = p;
        g->cap = cap;
    }
    memcpy(g->durs + g->n, durs, n * sizeof *durs);
    g->n += n;
    return CUDA_SUCCESS;
}

/* Block (stream unlocked) while the stream has FAKE_QUEUE_DEPTH kernels not finished or its tail
 * is more than FAKE_QUEUE_AHEAD_NS ahead: a real GPU's queue is bounded too. */
static void wait_for_room(struct CUstream_st *s)
{
    for (;;) {
        uint64_t now = fake_now_ns();
        uint64_t until = 0;
        if (s->count == FAKE_QUEUE_DEPTH && s->ring[s->head] > now)
            until = s->ring[s->head];
        else if (s->tail > now + FAKE_QUEUE_AHEAD_NS)
            until = s->tail - FAKE_QUEUE_AHEAD_NS;
        if (until == 0)
            return;
        pthread_mutex_unlock(&s->mu);
        fake_sleep_until(until);
        pthread_mutex_lock(&s->mu);
    }
}

static void ring_push(struct CUstream_st *s, uint64_t end)
{
    if (s->count < FAKE_QUEUE_DEPTH) {
        s->ring[(s->head + s->count) % FAKE_QUEUE_DEPTH] = end;
        s->count++;
    } else {
        s->ring[s->head] = end;
        s->head = (s->head + 1) % FAKE_QUEUE_DEPTH;
    }
}

static CUresult enqueue(struct CUstream_st *s, const uint64_t *durs, size_t n)
{
    CUresult rc = CUDA_SUCCESS;
    pthread_mutex_lock(&s->mu);
    if (s->capture != NULL) {
        rc = graph_append(s->capture, durs, n);
        pthread_mutex_unlock(&s->mu);
        return rc;
    }
    if (s->pf_seen < __atomic_load_n(&g_prefetch_seq, __ATOMIC_ACQUIRE))
        fake_self_um_count(FAKE_UM_UNORDERED);
    while (n > 0 && rc == CUDA_SUCCESS) {
        wait_for_room(s);
        uint64_t ends[64];
        size_t k = n < 64 ? n : 64;
        rc = fake_tl_enqueue(s->dev, &s->tail, durs, k, ends);
        if (rc == CUDA_SUCCESS) {
            for (size_t i = 0; i < k; i++)
                ring_push(s, ends[i]);
            fake_proc_tail_note(s->dev, s->tail, !s->nonblocking);
        }
        durs += k;
        n -= k;
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

static CUresult launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, CUstream h, int per_thread, void **params,
                       void **extra)
{
    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t ns;
    CUresult rc = fake_function_ns(f, params, extra, &ns);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s;
    rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    fake_function_load(f);
    return enqueue(s, &ns, 1);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    FAKE_ENTER(cuLaunchKernel);
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 0,
                  kernelParams, extra);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void **kernelParams, void **extra)
{
    FAKE_ENTER(cuLaunchKernel_ptsz);
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 1,
                  kernelParams, extra);
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          int per_thread)
{
    if (c == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (c->numAttrs > 0 && c->attrs == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->hStream, per_thread, params, extra);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    FAKE_ENTER(cuLaunchKernelEx);
    return launch_ex(config, f, kernelParams, extra, 0);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                               void **extra)
{
    FAKE_ENTER(cuLaunchKernelEx_ptsz);
    return launch_ex(config, f, kernelParams, extra, 1);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    FAKE_ENTER(cuLaunchCooperativeKernel);
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 0,
                  kernelParams, NULL);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                        unsigned int gridDimY, unsigned int gridDimZ,
                                        unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes,
                                        CUstream hStream, void **kernelParams)
{
    FAKE_ENTER(cuLaunchCooperativeKernel_ptsz);
    (void)sharedMemBytes;
    return launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, hStream, 1,
                  kernelParams, NULL);
}

static CUresult graph_launch(CUgraphExec e, CUstream h, int per_thread)
{
    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (e == NULL || e->magic != EXEC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    return enqueue(s, e->durs, e->n);
}

CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    FAKE_ENTER(cuGraphLaunch);
    return graph_launch(hGraphExec, hStream, 0);
}

CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    FAKE_ENTER(cuGraphLaunch_ptsz);
    return graph_launch(hGraphExec, hStream, 1);
}

/* ---- streams ------------------------------------------------------------------------------------ */
static CUresult stream_create(CUstream *ph, unsigned flags)
{
    FAKE_NEED_INIT();
    if (ph == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult rc = fake_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s = stream_new(dev, 0);
    if (s == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->nonblocking = (flags & CU_STREAM_NON_BLOCKING) != 0;
    s->ctx = fake_current_ctx_life(&s->life);
    *ph = s;
    return CUDA_SUCCESS;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FAKE_ENTER(cuStreamCreate);
    if (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_create(phStream, Flags);
}

CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    FAKE_ENTER(cuStreamCreateWithPriority);
    (void)priority;
    if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    return stream_create(phStream, flags);
}

CUresult cuStreamDestroy_v2(CUstream hStream)
{
    FAKE_ENTER(cuStreamDestroy_v2);
    FAKE_NEED_INIT();
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD ||
        hStream->magic != STREAM_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    /* Its queued kernels still run (they are on the timeline and in the process tail). */
    hStream->magic = 0;
    if (hStream->capture != NULL)
        free(hStream->capture->durs);
    free(hStream->capture);
    free(hStream);
    return CUDA_SUCCESS;
}

/* When the work queued on stream `h` so far has run (*at): what a sync waits for, and when a
 * host function queued now runs.  Not while it captures. */
static CUresult stream_done_at(CUstream h, int per_thread, uint64_t *at)
{
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&s->mu);
    uint64_t t = s->tail;
    int capturing = s->capture != NULL;
    pthread_mutex_unlock(&s->mu);
    if (capturing)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->legacy) {
        uint64_t all = fake_proc_tail_blocking(s->dev); /* it waits for every blocking stream */
        if (all > t)
            t = all;
    }
    *at = t;
    return CUDA_SUCCESS;
}

static uint64_t sync_late_ns;
static pthread_once_t sync_late_once = PTHREAD_ONCE_INIT;

static void read_sync_late(void)
{
    sync_late_ns = fake_env_u64("GEMINI_FAKE_SYNC_LATE_MS", 0) * 1000000ULL;
}

/* A stream or context sync returns GEMINI_FAKE_SYNC_LATE_MS (0) after the work it waits for
 * ran out: a host that got back to the program late (a loaded machine, a stop), whose sync
 * then says nothing of when the GPU ran out. */
uint64_t fake_sync_late_ns(void)
{
    pthread_once(&sync_late_once, read_sync_late);
    return sync_late_ns;
}

static CUresult stream_sync(CUstream h, int per_thread)
{
    uint64_t t;
    CUresult rc = stream_done_at(h, per_thread, &t);
    if (rc == CUDA_SUCCESS) {
        fake_sleep_until(t + fake_sync_late_ns());
        fake_pools_sync();
    }
    return rc;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    FAKE_ENTER(cuStreamSynchronize);
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return stream_sync(hStream, 0);
}

CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    FAKE_ENTER(cuStreamSynchronize_ptsz);
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&s->mu);
    uint64_t t = s->tail;
    pthread_mutex_unlock(&s->mu);
    return t > fake_now_ns() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
}

CUresult cuStreamQuery(CUstream hStream)
{
    FAKE_ENTER(cuStreamQuery);
    return stream_query(hStream, 0);
}

CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    FAKE_ENTER(cuStreamQuery_ptsz);
    return stream_query(hStream, 1);
}

/* A host function runs on a thread of the driver's once the work queued before it has run.
 * (Simplified: the stream's later work does not wait for it to return.) */
struct host_call {
    CUhostFn fn;
    void *data;
    uint64_t at;
};

static void *host_call_main(void *arg)
{
    struct host_call *c = arg;
    fake_sleep_until(c->at);
    c->fn(c->data);
    free(c);
    return NULL;
}

static CUresult launch_host_func(CUstream h, int per_thread, CUhostFn fn, void *data)
{
    uint64_t at;
    CUresult rc = stream_done_at(h, per_thread, &at); /* (in a capture: a host node, not simulated) */
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fn == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct host_call *c = malloc(sizeof(*c));
    if (c == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = (struct host_call){fn, data, at};
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int err = pthread_create(&t, &attr, host_call_main, c);
    pthread_attr_destroy(&attr);
    if (err != 0) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    FAKE_ENTER(cuLaunchHostFunc);
    return launch_host_func(hStream, 0, fn, userData);
}

CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    FAKE_ENTER(cuLaunchHostFunc_ptsz);
    return launch_host_func(hStream, 1, fn, userData);
}

static CUresult stream_wait_event(CUstream h, CUevent e, int per_thread)
{
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (e == NULL || e->magic != EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->recorded) {
        pthread_mutex_lock(&s->mu);
        if (s->capture == NULL && e->t > s->tail)
            s->tail = e->t;
        if (s->capture == NULL && e->pf_seen > s->pf_seen)
            s->pf_seen = e->pf_seen;
        pthread_mutex_unlock(&s->mu);
    }
    return CUDA_SUCCESS;
}

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FAKE_ENTER(cuStreamWaitEvent);
    (void)Flags;
    return stream_wait_event(hStream, hEvent, 0);
}

CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    FAKE_ENTER(cuStreamWaitEvent_ptsz);
    (void)Flags;
    return stream_wait_event(hStream, hEvent, 1);
}

/* ---- capture and graphs ----------------------------------------------------------------------- */
/* As the real driver: while a capture begun in global mode runs on any thread, or one not
 * relaxed on the calling thread, a potentially unsafe call (a sync, an event query) from a
 * thread not in relaxed mode (cuThreadExchangeStreamCaptureMode) fails and invalidates the
 * captures under way: their cuStreamEndCapture then fails.  (Thread-local mode ignores the
 * other threads' captures.) */

int fake_capture_forbids(void)
{
    if (t_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return 0;
    int others = t_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                 __atomic_load_n(&g_global_captures, __ATOMIC_ACQUIRE) > 0;
    if (!others && t_captures == 0)
        return 0;
    __atomic_fetch_add(&g_capture_breaks, 1, __ATOMIC_ACQ_REL);
    return 1;
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FAKE_ENTER(cuThreadExchangeStreamCaptureMode);
    if (mode == NULL || (int)*mode < CU_STREAM_CAPTURE_MODE_GLOBAL ||
        (int)*mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = t_mode;
    t_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

static void capture_counts(CUstreamCaptureMode mode, int delta)
{
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL)
        __atomic_fetch_add(&g_global_captures, delta, __ATOMIC_ACQ_REL);
    if (mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        t_captures += delta;
}

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int per_thread)
{
    if ((int)mode < CU_STREAM_CAPTURE_MODE_GLOBAL || (int)mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (s->legacy)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct CUgraph_st *g = calloc(1, sizeof *g);
    if (g == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GRAPH_MAGIC;
    g->dev = s->dev;
    pthread_mutex_lock(&s->mu);
    if (s->capture != NULL) {
        pthread_mutex_unlock(&s->mu);
        free(g);
        return CUDA_ERROR_INVALID_VALUE; /* the real driver says CUDA_ERROR_ILLEGAL_STATE */
    }
    s->capture = g;
    s->capture_mode = mode;
    s->capture_breaks = __atomic_load_n(&g_capture_breaks, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&s->mu);
    capture_counts(mode, 1);
    return CUDA_SUCCESS;
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    FAKE_ENTER(cuStreamBeginCapture_v2);
    return begin_capture(hStream, mode, 0);
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    FAKE_ENTER(cuStreamBeginCapture_v2_ptsz);
    return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *pg, int per_thread)
{
    if (pg == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&s->mu);
    struct CUgraph_st *g = s->capture;
    s->capture = NULL;
    int broken = s->capture_breaks != __atomic_load_n(&g_capture_breaks, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&s->mu);
    if (g == NULL)
        return CUDA_ERROR_INVALID_VALUE; /* not capturing (real: CUDA_ERROR_ILLEGAL_STATE) */
    capture_counts(s->capture_mode, -1);
    if (broken) {
        free(g->durs);
        free(g);
        *pg = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *pg = g;
    return CUDA_SUCCESS;
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    FAKE_ENTER(cuStreamEndCapture);
    return end_capture(hStream, phGraph, 0);
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    FAKE_ENTER(cuStreamEndCapture_ptsz);
    return end_capture(hStream, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *st, int per_thread)
{
    if (st == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s;
    CUresult rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&s->mu);
    *st = s->capture != NULL ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FAKE_ENTER(cuStreamIsCapturing);
    return is_capturing(hStream, captureStatus, 0);
}

CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    FAKE_ENTER(cuStreamIsCapturing_ptsz);
    return is_capturing(hStream, captureStatus, 1);
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    FAKE_ENTER(cuGraphInstantiateWithFlags);
    FAKE_NEED_INIT();
    (void)flags;
    if (phGraphExec == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (hGraph == NULL || hGraph->magic != GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    struct CUgraphExec_st *e = calloc(1, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->durs = malloc((hGraph->n ? hGraph->n : 1) * sizeof *e->durs);
    if (e->durs == NULL) {
        free(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (hGraph->n > 0)
        memcpy(e->durs, hGraph->durs, hGraph->n * sizeof *e->durs);
    e->n = hGraph->n;
    e->dev = hGraph->dev;
    e->magic = EXEC_MAGIC;
    *phGraphExec = e;
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    FAKE_ENTER(cuGraphDestroy);
    FAKE_NEED_INIT();
    if (hGraph == NULL || hGraph->magic != GRAPH_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hGraph->magic = 0;
    free(hGraph->durs);
    free(hGraph);
    return CUDA_SUCCESS;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    FAKE_ENTER(cuGraphExecDestroy);
    FAKE_NEED_INIT();
    if (hGraphExec == NULL || hGraphExec->magic != EXEC_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hGraphExec->magic = 0;
    free(hGraphExec->durs);
    free(hGraphExec);
    return CUDA_SUCCESS;
}

/* ---- events ------------------------------------------------------------------------------------- */
/* CUDA_SUCCESS, or what a use of event e in `what` returns. */
static CUresult event_check(CUevent e, const char *what)
{
    if (e == NULL || e->magic != EVENT_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    return fake_ctx_alive(e->ctx, e->life) ? CUDA_SUCCESS : stale(what, "an event");
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    FAKE_ENTER(cuEventCreate);
    FAKE_NEED_INIT();
    if (phEvent == NULL || (Flags & ~0x7u))
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult rc = fake_current_device(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUevent_st *e = calloc(1, sizeof *e);
    if (e == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->ctx = fake_current_ctx_life(&e->life);
    e->magic = EVENT_MAGIC;
    *phEvent = e;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream h, int per_thread)
{
    CUresult rc = event_check(e, "cuEventRecord");
    if (rc != CUDA_SUCCESS)
        return rc;
    struct CUstream_st *s;
    rc = stream_get(h, per_thread, &s);
    if (rc != CUDA_SUCCESS)
        return rc;
    pthread_mutex_lock(&s->mu);
    if (s->capture == NULL) { /* recorded into a graph: nothing to time here */
        uint64_t t = s->tail;
        if (s->legacy && fake_proc_tail_blocking(s->dev) > t)
            t = fake_proc_tail_blocking(s->dev);
        uint64_t now = fake_now_ns();
        __atomic_store_n(&e->t, t > now ? t : now, __ATOMIC_RELAXED);
        __atomic_store_n(&e->pf_seen, s->pf_seen, __ATOMIC_RELAXED);
        __atomic_store_n(&e->recorded, 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&s->mu);
    return CUDA_SUCCESS;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    FAKE_ENTER(cuEventRecord);
    return event_record(hEvent, hStream, 0);
}

CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    FAKE_ENTER(cuEventRecord_ptsz);
    return event_record(hEvent, hStream, 1);
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    FAKE_ENTER(cuEventSynchronize);
    FAKE_NEED_INIT();
    CUresult rc = event_check(hEvent, "cuEventSynchronize");
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (__atomic_load_n(&hEvent->recorded, __ATOMIC_ACQUIRE))
        fake_sleep_until(__atomic_load_n(&hEvent->t, __ATOMIC_RELAXED));
    fake_pools_sync();
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent)
{
    FAKE_ENTER(cuEventQuery);
    FAKE_NEED_INIT();
    CUresult rc = event_check(hEvent, "cuEventQuery");
    if (rc != CUDA_SUCCESS)
        return rc;
    if (fake_capture_forbids())
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (__atomic_load_n(&hEvent->recorded, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&hEvent->t, __ATOMIC_RELAXED) > fake_now_ns())
        return CUDA_ERROR_NOT_READY;
    return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    FAKE_NEED_INIT();
    if (ms == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = event_check(a, "cuEventElapsedTime");
    if (rc == CUDA_SUCCESS)
        rc = event_check(b, "cuEventElapsedTime");
    if (rc != CUDA_SUCCESS)
        return rc;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!__atomic_load_n(&a->recorded, __ATOMIC_ACQUIRE) ||
        !__atomic_load_n(&b->recorded, __ATOMIC_ACQUIRE))
        return CUDA_ERROR_INVALID_HANDLE;
    uint64_t ta = __atomic_load_n(&a->t, __ATOMIC_RELAXED);
    uint64_t tb = __atomic_load_n(&b->t, __ATOMIC_RELAXED);
    uint64_t now = fake_now_ns();
    if (ta > now || tb > now)
        return CUDA_ERROR_NOT_READY;
    *ms = (float)(((double)tb - (double)ta) / 1e6);
    return CUDA_SUCCESS;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FAKE_ENTER(cuEventElapsedTime);
    return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    FAKE_ENTER(cuEventElapsedTime_v2);
    return elapsed(pMilliseconds, hStart, hEnd);
}

CUresult cuEventDestroy_v2(CUevent hEvent)
{
    FAKE_ENTER(cuEventDestroy_v2);
    FAKE_NEED_INIT();
    CUresult rc = event_check(hEvent, "cuEventDestroy");
    if (rc != CUDA_SUCCESS)
        return rc;
    hEvent->magic = 0;
    free(hEvent);
    return CUDA_SUCCESS;
}
