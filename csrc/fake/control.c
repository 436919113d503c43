/* The fake_* control API, for tests (cffi ABI mode: ffi.dlopen the fake libcuda.so.1). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_internal.h"

int fake_attach(const char *segment_name)
{
    return fake_shm_attach(segment_name);
}

const char *fake_segment_name(void)
{
    return fake_shm_name();
}

int fake_unlink(void)
{
    return fake_shm_unlink();
}

void fake_reset(void)
{
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return;
    const char *v = getenv("GEMINI_FAKE_GPU_MEM");
    uint64_t mem = v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : FAKE_DEFAULT_MEM;
    v = getenv("GEMINI_FAKE_KERNEL_NS");
    s->default_kernel_ns = v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : FAKE_DEFAULT_KERNEL_NS;
    memset(s->dev, 0, sizeof s->dev);
    for (int d = 0; d < FAKE_MAX_DEVICES; d++)
        s->dev[d].mem_total = mem;
    for (int i = 0; i < FAKE_MAX_FAILS; i++)
        s->fails[i].id = -1;
    s->fails_pending = 0;
    for (int i = 0; i < FAKE_MAX_CLIENTS; i++) {
        s->clients[i].gpu_ns = 0;
        s->clients[i].kernels = 0;
    }
    /* Process slots keep who they are (live processes hold pointers to them); counters go. */
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        struct fake_proc_slot *p = &s->procs[i];
        p->gpu_ns = 0;
        p->kernels = 0;
        memset(p->mem, 0, sizeof p->mem);
        memset(p->calls, 0, sizeof p->calls);
    }
    fake_unlock(s);
}

int fake_reap(void)
{
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return -1;
    int n = fake_reap_locked(s);
    fake_unlock(s);
    return n;
}

static int dev_ok(int dev)
{
    return dev >= 0 && dev < FAKE_MAX_DEVICES;
}

#define READ_LOCKED(expr)                   \
    do {                                    \
        struct fake_shm *s = fake_lock();   \
        if (s == NULL)                      \
            return 0;                       \
        uint64_t v_ = (expr);               \
        fake_unlock(s);                     \
        return v_;                          \
    } while (0)

uint64_t fake_busy_until(int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(s->dev[dev].busy_until);
}

uint64_t fake_busy_since(int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(s->dev[dev].busy_since);
}

uint64_t fake_dev_busy_ns(int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(s->dev[dev].busy_ns);
}

uint64_t fake_dev_kernels(int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(s->dev[dev].kernels);
}

static const struct fake_client_slot *client_locked(struct fake_shm *s, const char *name)
{
    if (name == NULL)
        return NULL;
    for (uint32_t i = 0; i < s->nclients && i < FAKE_MAX_CLIENTS; i++)
        if (strncmp(s->clients[i].name, name, FAKE_CLIENT_NAME_LEN - 1) == 0)
            return &s->clients[i];
    return NULL;
}

uint64_t fake_client_gpu_ns(const char *name)
{
    READ_LOCKED(client_locked(s, name) ? client_locked(s, name)->gpu_ns : 0);
}

uint64_t fake_client_kernels(const char *name)
{
    READ_LOCKED(client_locked(s, name) ? client_locked(s, name)->kernels : 0);
}

static const struct fake_proc_slot *pid_locked(struct fake_shm *s, int pid)
{
    const struct fake_proc_slot *best = NULL;
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        const struct fake_proc_slot *p = &s->procs[i];
        if (p->pid == pid && pid != 0 && (best == NULL || p->seq > best->seq))
            best = p;
    }
    return best;
}

uint64_t fake_pid_gpu_ns(int pid)
{
    READ_LOCKED(pid_locked(s, pid) ? pid_locked(s, pid)->gpu_ns : 0);
}

uint64_t fake_pid_kernels(int pid)
{
    READ_LOCKED(pid_locked(s, pid) ? pid_locked(s, pid)->kernels : 0);
}

uint64_t fake_pid_mem_used(int pid, int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(pid_locked(s, pid) ? pid_locked(s, pid)->mem[dev] : 0);
}

uint64_t fake_pid_call_count(int pid, const char *exported_name)
{
    int id = fake_symbol_id(exported_name);
    if (id < 0)
        return 0;
    READ_LOCKED(pid_locked(s, pid) ? pid_locked(s, pid)->calls[id] : 0);
}

uint64_t fake_pid_um_count(int pid, const char *what)
{
    static const char *const names[FAKE_UM_COUNTERS] = {"prefetch_device", "prefetch_host",
                                                        "unordered_launches"};
    int c = -1;
    for (int i = 0; i < FAKE_UM_COUNTERS && what != NULL; i++)
        if (strcmp(names[i], what) == 0)
            c = i;
    if (c < 0)
        return 0;
    READ_LOCKED(pid_locked(s, pid) ? pid_locked(s, pid)->um[c] : 0);
}

uint64_t fake_call_count(const char *exported_name)
{
    int id = fake_symbol_id(exported_name);
    return id < 0 ? 0 : fake_self_calls((enum fake_symbol_id)id);
}

int fake_fail_next(const char *exported_name, int code)
{
    int id = fake_symbol_id(exported_name);
    if (id < 0)
        return -1;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return -1;
    int rc = -1;
    for (int i = 0; i < FAKE_MAX_FAILS; i++) {
        if (s->fails[i].id < 0) {
            s->fails[i].code = code;
            s->fails[i].id = id;
            __atomic_fetch_add(&s->fails_pending, 1, __ATOMIC_RELEASE);
            rc = 0;
            break;
        }
    }
    fake_unlock(s);
    return rc;
}

uint64_t fake_mem_used(int dev)
{
    if (!dev_ok(dev))
        return 0;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return 0;
    fake_reap_locked(s);
    uint64_t v = s->dev[dev].mem_used;
    fake_unlock(s);
    return v;
}

uint64_t fake_mem_total(int dev)
{
    if (!dev_ok(dev))
        return 0;
    READ_LOCKED(s->dev[dev].mem_total);
}

void fake_set_mem_total(int dev, uint64_t bytes)
{
    if (!dev_ok(dev))
        return;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return;
    s->dev[dev].mem_total = bytes;
    fake_unlock(s);
}

void fake_set_kernel_ns(uint64_t ns)
{
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return;
    s->default_kernel_ns = ns;
    fake_unlock(s);
}

int fake_debug_hold_lock(int fd, uint64_t ns)
{
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return -1;
    ssize_t w = write(fd, "L\n", 2);
    fake_sleep_until(fake_now_ns() + ns);
    fake_unlock(s);
    return w == 2 ? 0 : -1;
}

int fake_gpu_processes(int physical, int *pids, uint64_t *bytes, int cap)
{
    if (!dev_ok(physical))
        return 0;
    struct fake_shm *s = fake_lock();
    if (s == NULL)
        return 0;
    fake_reap_locked(s);
    int n = 0;
    for (int i = 0; i < FAKE_MAX_PROCS; i++) {
        const struct fake_proc_slot *p = &s->procs[i];
        if (p->pid == 0 || !p->alive || p->mem[physical] == 0)
            continue; /* a live slot per pid: a reused pid buries the older one */
        if (n < cap) {
            pids[n] = p->pid;
            bytes[n] = p->mem[physical];
        }
        n++;
    }
    fake_unlock(s);
    return n;
}
