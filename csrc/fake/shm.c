/* The shared-memory segment that holds the simulated GPU, its robust lock, and this process's
 * slot in it (call counters, kernel time, memory held). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fake_internal.h"

static pthread_mutex_t g_attach_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fake_shm *g_shm;          /* atomic */
static struct fake_proc_slot *g_self;   /* atomic; slot of this process in g_shm */
static char g_name[FAKE_SEGMENT_NAME_LEN];

static const char *const g_symbol_names[FAKE_N_SYMBOLS] = {
#define FAKE_X_NAME(sym, base, ver, kind) #sym,
    FAKE_SYMBOLS(FAKE_X_NAME)
#undef FAKE_X_NAME
};

int fake_symbol_id(const char *name)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < FAKE_N_SYMBOLS; i++)
        if (strcmp(g_symbol_names[i], name) == 0)
            return i;
    return -1;
}

uint64_t fake_env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0')
        return dflt;
    char *end = NULL;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 0);
    if (errno != 0 || end == v)
        return dflt;
    return (uint64_t)x;
}

void fake_shm_init_locked(struct fake_shm *s)
{
    size_t head = offsetof(struct fake_shm, next_addr);
    memset((char *)s + head, 0, sizeof(*s) - head);
    s->next_addr = FAKE_ADDR_BASE;
    s->default_kernel_ns = fake_env_u64("GEMINI_FAKE_KERNEL_NS", FAKE_DEFAULT_KERNEL_NS);
    uint64_t mem = fake_env_u64("GEMINI_FAKE_GPU_MEM", FAKE_DEFAULT_MEM);
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        s->dev[d].mem_total = mem;
    for (int i = 0; i < FAKE_MAX_FAILS; i++)
        s->fails[i].id = -1;
    for (int i = 0; i < FAKE_MAX_PROCS; i++)
        s->procs[i].client = -1;
}

static void default_name(char *out, size_t len)
{
    const char *v = getenv("GEMINI_FAKE_GPU");
    if (v != NULL && *v != '\0')
        snprintf(out, len, "%s%s", v[0] == '/' ? "" : "/", v);
    else
        snprintf(out, len, "/gemini-fake-gpu-%u", (unsigned)getuid());
}

static int sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    return nanosleep(&ts, NULL);
}

static struct fake_shm *map_segment(const char *name, int *err)
{
    size_t size = sizeof(struct fake_shm);
    int creator = 1;
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) {
        creator = 0;
        fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    }
    if (fd < 0) {
        *err = errno;
        return NULL;
    }
    if (creator) {
        if (ftruncate(fd, (off_t)size) != 0) {
            *err = errno;
            close(fd);
            shm_unlink(name);
            return NULL;
        }
    } else {
        /* The creator may still be between shm_open and ftruncate. */
        struct stat st;
        int tries = 0;
        while (fstat(fd, &st) == 0 && (size_t)st.st_size < size && tries++ < 2000)
            sleep_ms(1);
        if ((size_t)st.st_size != size) {
            *err = EPROTO; /* wrong size, or still empty after 2 s */
            close(fd);
            return NULL;
        }
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) {
        *err = errno;
        return NULL;
    }
    struct fake_shm *s = p;
    if (creator) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&s->mu, &a);
        pthread_mutexattr_destroy(&a);
        s->layout_size = size;
        fake_shm_init_locked(s);
        __atomic_store_n(&s->magic, FAKE_SHM_MAGIC, __ATOMIC_RELEASE);
    } else {
        int tries = 0;
        while (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != FAKE_SHM_MAGIC && tries++ < 2000)
            sleep_ms(1);
        if (__atomic_load_n(&s->magic, __ATOMIC_ACQUIRE) != FAKE_SHM_MAGIC ||
            s->layout_size != size) {
            *err = EPROTO;
            munmap(p, size);
            return NULL;
        }
    }
    return s;
}

int fake_shm_attach(const char *name)
{
    char want[FAKE_SEGMENT_NAME_LEN];
    if (name != NULL && *name != '\0')
        snprintf(want, sizeof want, "%s%s", name[0] == '/' ? "" : "/", name);
    else
        default_name(want, sizeof want);
    pthread_mutex_lock(&g_attach_mu);
    int err = 0;
    struct fake_shm *s = map_segment(want, &err);
    if (s == NULL && err == EPROTO) {
        /* A segment of another layout (an older build) or one whose creator died before
         * initialising it: replace it with a fresh one. */
        shm_unlink(want);
        s = map_segment(want, &err);
    }
    if (s != NULL) {
        /* An earlier mapping stays mapped: other threads may still hold pointers into it. */
        __atomic_store_n(&g_self, NULL, __ATOMIC_RELEASE);
        snprintf(g_name, sizeof g_name, "%s", want);
        __atomic_store_n(&g_shm, s, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_attach_mu);
    return s != NULL ? 0 : -err;
}

struct fake_shm *fake_shm_get(void)
{
    struct fake_shm *s = __atomic_load_n(&g_shm, __ATOMIC_ACQUIRE);
    if (s != NULL)
        return s;
    pthread_mutex_lock(&g_attach_mu);
    s = __atomic_load_n(&g_shm, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&g_attach_mu);
    if (s == NULL && fake_shm_attach(NULL) == 0)
        s = __atomic_load_n(&g_shm, __ATOMIC_ACQUIRE);
    return s;
}

const char *fake_shm_name(void)
{
    return fake_shm_get() != NULL ? g_name : "";
}

int fake_shm_unlink(void)
{
    if (fake_shm_get() == NULL)
        return -ENOENT;
    return shm_unlink(g_name) == 0 ? 0 : -errno;
}

struct fake_shm *fake_lock(void)
{
    struct fake_shm *s = fake_shm_get();
    if (s == NULL)
        return NULL;
    int rc = pthread_mutex_lock(&s->mu);
    if (rc == EOWNERDEAD) {
        /* A process died holding the lock (SIGKILL).  Every update under it is small and leaves
         * counters consistent enough; mark the mutex usable again. */
        pthread_mutex_consistent(&s->mu);
        rc = 0;
    }
    return rc == 0 ? s : NULL;
}

void fake_unlock(struct fake_shm *s)
{
    if (s != NULL)
        pthread_mutex_unlock(&s->mu);
}

/* From /proc/<pid>/stat: field 3 (state) and field 22 (start time in clock ticks since boot).
 * Returns 0 if unreadable. */
static uint64_t proc_stat(int pid, char *state)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    for (int field = 3; field <= 22; field++) {
        while (*p == ' ')
            p++;
        if (field == 3 && state != NULL)
            *state = *p;
        if (field == 22)
            return strtoull(p, NULL, 10);
        while (*p != ' ' && *p != '\0')
            p++;
        if (*p == '\0')
            return 0;
    }
    return 0;
}

static uint64_t proc_starttime(int pid)
{
    return proc_stat(pid, NULL);
}

static int slot_dead(const struct fake_proc_slot *p)
{
    if (kill(p->pid, 0) != 0 && errno == ESRCH)
        return 1;
    char state = '?';
    uint64_t st = proc_stat(p->pid, &state);
    if (state == 'Z' || state == 'X')
        return 1; /* exited, not yet waited for by its parent */
    if (p->starttime != 0 && st != 0 && st != p->starttime)
        return 1; /* the pid was reused by another process */
    return 0;
}

static void slot_bury(struct fake_shm *s, struct fake_proc_slot *p)
{
    for (int d = 0; d < FAKE_MAX_DEVICES; d++) {
        uint64_t m = p->mem[d];
        s->dev[d].mem_used = s->dev[d].mem_used >= m ? s->dev[d].mem_used - m : 0;
        p->mem[d] = 0;
    }
    p->alive = 0;
}

int fake_reap_locked(struct fake_shm *s)
{
    int n = 0;
    int me = getpid();
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        struct fake_proc_slot *p = &s->procs[i];
        if (p->pid == 0 || !p->alive || p->pid == me)
            continue;
        if (slot_dead(p)) {
            slot_bury(s, p);
            n++;
        }
    }
    return n;
}

static int client_index_locked(struct fake_shm *s, const char *name)
{
    if (name == NULL || *name == '\0')
        return -1;
    for (uint32_t i = 0; i < s->nclients && i < FAKE_MAX_CLIENTS; i++)
        if (strncmp(s->clients[i].name, name, FAKE_CLIENT_NAME_LEN - 1) == 0)
            return (int)i;
    if (s->nclients >= FAKE_MAX_CLIENTS)
        return -1;
    int i = (int)s->nclients++;
    snprintf(s->clients[i].name, FAKE_CLIENT_NAME_LEN, "%s", name);
    return i;
}

static struct fake_proc_slot *pick_slot_locked(struct fake_shm *s)
{
    struct fake_proc_slot *best = NULL;
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        struct fake_proc_slot *p = &s->procs[i];
        if (p->pid == 0)
            return p;
        if (!p->alive && (best == NULL || p->seq < best->seq))
            best = p; /* the oldest dead one */
    }
    return best;
}

struct fake_proc_slot *fake_self_locked(struct fake_shm *s)
{
    struct fake_proc_slot *me = __atomic_load_n(&g_self, __ATOMIC_ACQUIRE);
    if (me != NULL)
        return me;
    int pid = getpid();
    uint64_t st = proc_starttime(pid);
    /* An older slot with our pid belongs to a dead process whose pid we reuse. */
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        struct fake_proc_slot *p = &s->procs[i];
        if (p->pid == pid && p->alive)
            slot_bury(s, p);
    }
    me = pick_slot_locked(s);
    if (me == NULL) {
        fake_reap_locked(s);
        me = pick_slot_locked(s);
    }
    if (me == NULL)
        return NULL;
    memset(me, 0, sizeof *me);
    me->pid = pid;
    me->alive = 1;
    me->starttime = st;
    me->seq = ++s->seq;
    me->client = client_index_locked(s, getenv("POD_NAME"));
    __atomic_store_n(&g_self, me, __ATOMIC_RELEASE);
    return me;
}

CUresult fake_enter(enum fake_symbol_id id)
{
    struct fake_shm *s = fake_shm_get();
    if (s == NULL)
        return CUDA_SUCCESS;
    struct fake_proc_slot *me = __atomic_load_n(&g_self, __ATOMIC_ACQUIRE);
    if (me == NULL) {
        struct fake_shm *l = fake_lock();
        if (l != NULL)
            me = fake_self_locked(l);
        fake_unlock(l);
    }
    if (me != NULL)
        __atomic_fetch_add(&me->calls[id], 1, __ATOMIC_RELAXED);
    if (__atomic_load_n(&s->fails_pending, __ATOMIC_ACQUIRE) == 0)
        return CUDA_SUCCESS;
    CUresult rc = CUDA_SUCCESS;
    struct fake_shm *l = fake_lock();
    if (l == NULL)
        return CUDA_SUCCESS;
    for (int i = 0; i < FAKE_MAX_FAILS; i++) {
        if (l->fails[i].id == (int32_t)id) {
            rc = (CUresult)l->fails[i].code;
            l->fails[i].id = -1;
            l->fails_pending--;
            break;
        }
    }
    fake_unlock(l);
    return rc;
}

void fake_self_um_count(enum fake_um_counter c)
{
    struct fake_proc_slot *me = __atomic_load_n(&g_self, __ATOMIC_ACQUIRE);
    if (me != NULL)
        __atomic_fetch_add(&me->um[c], 1, __ATOMIC_RELAXED);
}

uint64_t fake_self_calls(enum fake_symbol_id id)
{
    struct fake_proc_slot *me = __atomic_load_n(&g_self, __ATOMIC_ACQUIRE);
    return me != NULL ? __atomic_load_n(&me->calls[id], __ATOMIC_RELAXED) : 0;
}

static void atfork_child(void)
{
    __atomic_store_n(&g_self, NULL, __ATOMIC_RELEASE); /* the child registers as itself */
    pthread_mutex_init(&g_attach_mu, NULL);
    fake_driver_atfork_child();
    fake_streams_atfork_child();
    fake_memory_atfork_child();
}

__attribute__((constructor)) static void fake_shm_ctor(void)
{
    pthread_atfork(NULL, NULL, atfork_child);
}
