/* The token gate (csrc/hook/token.c, token_fetch.c, token_tracker.c) with the rest of the hook
 * stubbed: what other launching threads do while one thread's request for the next token is
 * out.  That request handed the token back (v1's early request: its burst does not fit), so
 * no thread may launch until the answer comes; the tracker counts nothing launched after it.
 *
 *   token_handback tail     thread B comes in the old token's tail, after A's request
 *   token_handback straddle B's look at its queue began before A's request, and ended after
 *
 * Prints {"b_went_while_held": 0 or 1, "requests": N}.  The pod manager (gem_ipc_quota) holds
 * the second answer until thread B went, or 300 ms. */
#include "internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rest of the hook, stubbed ----------------------------------------------------------- */
struct gem_config gem_cfg;
_Atomic uint64_t gem_gate_stats[GEM_STAT_COUNT];
int gem_stats_on = 1;
int gem_log_level = GEM_LOG_WARN;

void gem_log(int level, const char *fmt, ...)
{
    (void)level;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

long long gem_env_number(const char *name, long long dflt, long long lo, long long hi)
{
    (void)lo;
    (void)hi;
    const char *v = getenv(name);
    return v != NULL ? atoll(v) : dflt;
}

void gem_sleep_ns(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int gem_thread_start(void *(*fn)(void *), void *arg)
{
    pthread_t th;
    int rc = pthread_create(&th, NULL, fn, arg);
    if (rc == 0)
        pthread_detach(th);
    return rc;
}

void *gem_real_aux(enum gem_aux which) { (void)which; return NULL; }
uint32_t gem_wire_run_word(uint64_t count, int graphs) { (void)count; (void)graphs; return 0; }
double gem_wire_rsp_quota_ms(const uint8_t *buf) { (void)buf; return 0.0; } /* (no cut here) */
double gem_wire_rsp_quota_sent_at(const uint8_t *buf) { (void)buf; return 0.0; }
void gem_inflight_allowance(int dev, int64_t room, uint64_t *launches, uint64_t *graphs)
{
    (void)dev;
    (void)room;
    *launches = 0;
    *graphs = 0;
}
int gem_inflight_capturing(CUstream s, int pts) { (void)s; (void)pts; return 0; }
struct gem_look gem_inflight_latest_look(int dev) { (void)dev; return (struct gem_look){0}; }
void gem_inflight_launch(int dev, CUstream s, int pts) { (void)dev; (void)s; (void)pts; }
int64_t gem_inflight_launch_ns(int dev) { (void)dev; return 5000000; }
void gem_inflight_mark(int dev, CUstream s, int pts, int64_t now, int how)
{
    (void)dev; (void)s; (void)pts; (void)now; (void)how;
}
void gem_inflight_measure_from(int dev, int64_t from, int64_t now)
{
    (void)dev; (void)from; (void)now;
}
void gem_inflight_measured(int dev, double *ms, uint64_t *count, int *graphs)
{
    (void)dev;
    *ms = 0.0;
    *count = 0;
    *graphs = 0;
}
int64_t gem_inflight_next_done_ns(int dev) { (void)dev; return 0; }
void gem_inflight_reset_after_fork(void) {}
uint64_t gem_inflight_seq(int dev) { (void)dev; return 0; }
void gem_inflight_set_sharers(int dev, uint32_t sharers) { (void)dev; (void)sharers; }
uint32_t gem_inflight_sharers(int dev) { (void)dev; return 2; } /* v1's early request applies */
int64_t gem_inflight_wait_all(int dev, uint64_t seq) { (void)dev; (void)seq; return gem_now_ns(); }
void gem_look_describe(const struct gem_look *look, char *buf, size_t n)
{
    (void)look;
    snprintf(buf, n, "-");
}
int gem_um_evicts(int dev) { (void)dev; return 0; }
int gem_um_maybe(int dev) { (void)dev; return 0; }
void gem_um_on_expiry(int dev, CUcontext ctx) { (void)dev; (void)ctx; }

/* ---- the scenario ---------------------------------------------------------------------------- */
/* Tokens of 200 ms, their tail (the time to ask for the next) the last 60: A's burst of 100 ms
 * fits in the first, and the next, 110 ms in, does not; B comes in the tail, at 170 ms. */
#define TOKEN_MS 200.0
#define TAIL_US "60000"
#define BURST_MS 100
#define A_ASKS_MS 110
#define B_COMES_MS 170

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int requests, held, b_went, b_went_while_held;
static __thread int is_b;
static int b_looks_across; /* "straddle": B's look waits for A's request to be out */

static void wait_until(int *flag)
{
    pthread_mutex_lock(&m);
    while (!*flag)
        pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
}

/* The queue ahead of a launch: none. */
int64_t gem_inflight_queued_ns(int dev, CUstream s, int pts, int64_t at, int graphs,
                               int64_t *hold)
{
    (void)dev; (void)s; (void)pts; (void)at; (void)graphs;
    *hold = 0;
    if (is_b && b_looks_across) {
        b_looks_across = 0;
        wait_until(&held);
    }
    return 0;
}

/* The pod manager: answers the first request at once, holds the second until B went. */
int gem_ipc_quota(int dev, double overuse_ms, double burst_ms, double gpu_wait_ms, float run_ms,
                  uint32_t run_launches, double *quota_ms, uint32_t *flags, uint32_t *sharers,
                  double *sent_at)
{
    (void)dev; (void)overuse_ms; (void)burst_ms; (void)gpu_wait_ms; (void)run_ms;
    (void)run_launches;
    pthread_mutex_lock(&m);
    if (++requests == 2) {
        held = 1;
        pthread_cond_broadcast(&cv);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 300000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        while (!b_went && pthread_cond_timedwait(&cv, &m, &until) == 0) {
        }
        held = 0;
    }
    pthread_mutex_unlock(&m);
    *quota_ms = TOKEN_MS;
    *flags = 0;
    *sharers = 2;
    *sent_at = 0.0; /* (not said) */
    return 0;
}

static int64_t token_start;

static void *thread_b(void *arg)
{
    int tail = *(int *)arg;
    is_b = 1;
    if (tail) { /* after A's request, in the old token's tail */
        wait_until(&held);
        while (gem_now_ns() < token_start + B_COMES_MS * 1000000LL)
            gem_sleep_ns(1000000);
    } /* else at once: its look waits for A's request (gem_inflight_queued_ns) */
    gem_token_acquire(0, (CUstream)0x10, 0, 0);
    pthread_mutex_lock(&m);
    b_went = 1;
    b_went_while_held = held;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    return NULL;
}

int main(int argc, char **argv)
{
    int tail = argc > 1 && strcmp(argv[1], "tail") == 0;
    b_looks_across = !tail;
    setenv("GEMINI_HOOK_TAIL_US", TAIL_US, 1);
    gem_token_acquire(0, NULL, 0, 0); /* the first token */
    token_start = gem_now_ns();
    pthread_t b;
    pthread_create(&b, NULL, thread_b, &tail);
    /* A's burst fits in it, ended by a sync: the next burst is predicted as long */
    gem_sleep_ns(BURST_MS * 1000000LL);
    int64_t now = gem_now_ns();
    gem_token_note_sync(0, now, now, now, 1);
    /* 10 ms on, 90 of the token left: the next burst does not fit, A asks (hands it back) */
    while (gem_now_ns() < token_start + A_ASKS_MS * 1000000LL)
        gem_sleep_ns(1000000);
    gem_token_acquire(0, NULL, 0, 0);
    pthread_join(b, NULL);
    printf("{\"b_went_while_held\": %d, \"requests\": %d, \"fetch_burst\": %llu}\n",
           b_went_while_held, requests,
           (unsigned long long)gem_gate_stats[GEM_STAT_FETCH_BURST]);
    return 0;
}
