/* Reaches the driver the way CUDA 12/13 runtimes do: dlopen("libcuda.so.1"),
 * dlsym(handle, "cuGetProcAddress_v2"), then cuGetProcAddress("cuGetProcAddress") and every
 * other function through the pointer that returned.
 *   mini_client launch N [ptsz]     N launches then one stream sync; prints {"launched": N}
 *   mini_client hostwait F [MS [T [ex]]]  a launch, MS ms later T threads (1) of function F
 *                                   (0x10: XLA's delay kernel; by cuLaunchKernelEx with "ex"),
 *                                   another launch, a stream sync
 *   mini_client alloc BYTES         prints {"rc": R}
 *   mini_client alloc2 A B          allocates A and B bytes, prints {"ready": [RA, RB]}, waits
 *                                   for a line on stdin, frees B, prints {"freed": R}, asks
 *                                   cuMemGetInfo, prints {"meminfo_free": F}, and waits for
 *                                   stdin's end
 *   mini_client meminfo             prints {"free": F, "total": T}
 *   mini_client threads             3 launches, then prints {"threads": N, "sigint_open": K}:
 *                                   of the threads other than main, how many take SIGINT
 *   mini_client fork                launch in a forked child too
 *   mini_client reuse A B C         a thread allocates A bytes and frees them; while its free
 *                                   is in the driver (MINI_DRIVER_FREE_WAITS=1), B bytes are
 *                                   allocated at the address it gave back, then C bytes;
 *                                   prints {"b": RB, "same": S, "c": RC}
 *   mini_client vmm B host|device   cuMemCreate of B bytes located there, then cuMemRelease;
 *                                   prints {"rc": R}
 *   mini_client freeing A B         allocates A and B bytes, prints {"ready": [RA, RB]}; at a
 *                                   line on stdin frees A on a thread and, its free in the
 *                                   driver (MINI_DRIVER_FREE_WAITS=1), prints {"freeing": 1};
 *                                   at the next line asks cuMemGetInfo (the pod manager gone
 *                                   meanwhile: it reconnects), lets the free return, prints
 *                                   {"freed": R}, and waits for stdin's end, B still allocated
 *   mini_client allocating A B ok|fail  allocates B, then A on a thread, held in the driver;
 *                                   prints {"allocating": 1}; at a line on stdin lets it return
 *                                   (failed with "fail"), prints {"allocated": R, "meminfo": F}
 *                                   (cuMemGetInfo's free after it), then allocates B again at
 *                                   the next line, prints {"again": R}, and waits for stdin's
 *                                   end */
#include "gemini/cuda_subset.h"

#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef CUresult (*gpa_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
static gpa_fn gpa;

static void *get(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    if (gpa(name, &fn, version, flags, &st) != CUDA_SUCCESS || fn == NULL) {
        fprintf(stderr, "lookup of %s failed\n", name);
        exit(3);
    }
    return fn;
}

static int launch(long n, int ptsz)
{
    cuuint64_t flags = ptsz ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0;
    __typeof__(&cuLaunchKernel) lk = get("cuLaunchKernel", 12000, flags);
    __typeof__(&cuStreamSynchronize) ss = get("cuStreamSynchronize", 12000, flags);
    for (long i = 0; i < n; i++)
        if (lk(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return 1;
    return ss(NULL) != CUDA_SUCCESS;
}

/* A launch that starts a token, `after_ms` later `f` (0x10: XLA's delay kernel, 0x20: another;
 * mini_driver.c names them) in `threads` threads of one block (by cuLaunchKernelEx with `ex`),
 * then the kernel it would time, and a sync. */
static int host_wait(CUfunction f, long after_ms, unsigned threads, int ex)
{
    __typeof__(&cuLaunchKernel) lk = get("cuLaunchKernel", 12000, 0);
    __typeof__(&cuLaunchKernelEx) lkx = get("cuLaunchKernelEx", 12000, 0);
    __typeof__(&cuStreamSynchronize) ss = get("cuStreamSynchronize", 12000, 0);
    if (lk(NULL, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 1;
    struct timespec pause = {after_ms / 1000, (after_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL); /* (where in the token the next launch comes) */
    CUlaunchConfig one = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = threads,
                          .blockDimY = 1, .blockDimZ = 1};
    CUresult rc = ex ? lkx(&one, f, NULL, NULL)
                     : lk(f, 1, 1, 1, threads, 1, 1, 0, NULL, NULL, NULL);
    if (rc != CUDA_SUCCESS || lk(NULL, 64, 1, 1, 256, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 1;
    return ss(NULL) != CUDA_SUCCESS;
}

/* Of this process's threads other than main, how many leave SIGINT unblocked (its
 * /proc/self/task/TID/status SigBlk line); *threads: how many there are. */
static int sigint_open(int *threads)
{
    int open = 0;
    *threads = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.' || atoi(e->d_name) == getpid())
            continue;
        char path[300], line[256];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        while (f != NULL && fgets(line, sizeof line, f) != NULL)
            if (strncmp(line, "SigBlk:", 7) == 0) {
                ++*threads;
                open += !(strtoull(line + 7, NULL, 16) & (1ull << (SIGINT - 1)));
            }
        if (f != NULL)
            fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return open;
}

static int alloc_two(unsigned long long a_bytes, unsigned long long b_bytes)
{
    __typeof__(&cuMemAlloc_v2) alloc = get("cuMemAlloc", 12000, 0);
    __typeof__(&cuMemFree_v2) release = get("cuMemFree", 12000, 0);
    CUdeviceptr a = 0, b = 0;
    int ra = (int)alloc(&a, a_bytes), rb = (int)alloc(&b, b_bytes);
    printf("{\"ready\": [%d, %d]}\n", ra, rb);
    fflush(stdout);
    char line[64];
    if (fgets(line, sizeof line, stdin) == NULL)
        return 1;
    printf("{\"freed\": %d}\n", (int)release(b));
    fflush(stdout);
    __typeof__(&cuMemGetInfo_v2) info = get("cuMemGetInfo", 12000, 0);
    size_t free_bytes = 0, total = 0;
    info(&free_bytes, &total);
    printf("{\"meminfo_free\": %zu}\n", free_bytes);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL)
        ;
    return 0;
}

struct freer {
    __typeof__(&cuMemFree_v2) release;
    CUdeviceptr ptr;
    int rc;
};

static void *free_it(void *arg)
{
    struct freer *f = arg;
    f->rc = (int)f->release(f->ptr);
    return NULL;
}

static int reuse_race(void *driver, unsigned long long a_bytes, unsigned long long b_bytes,
                      unsigned long long c_bytes)
{
    __typeof__(&cuMemAlloc_v2) alloc = get("cuMemAlloc", 12000, 0);
    int (*freeing)(void) = (int (*)(void))dlsym(driver, "mini_driver_freeing");
    struct freer f = {get("cuMemFree", 12000, 0), 0, 0};
    if (freeing == NULL || alloc(&f.ptr, a_bytes) != CUDA_SUCCESS)
        return 1;
    pthread_t t;
    pthread_create(&t, NULL, free_it, &f);
    while (!freeing()) /* the address is free, the free not returned yet */
        usleep(100);
    CUdeviceptr b = 0, c = 0;
    int rb = (int)alloc(&b, b_bytes);
    pthread_join(t, NULL);
    int rc = (int)alloc(&c, c_bytes);
    printf("{\"b\": %d, \"same\": %d, \"c\": %d}\n", rb, b == f.ptr, rc);
    return 0;
}

/* Run `fn` on a thread of its own until the driver says it is in (`in`), print {"<said>": 1},
 * and wait for a line on stdin: 0, or 1 at stdin's end. */
static int in_driver_then_a_line(void *(*fn)(void *), void *arg, int (*in)(void),
                                 const char *said, pthread_t *t)
{
    char line[64];
    pthread_create(t, NULL, fn, arg);
    while (!in())
        usleep(100);
    printf("{\"%s\": 1}\n", said);
    fflush(stdout);
    return fgets(line, sizeof line, stdin) == NULL;
}

static int free_across_a_reconnect(void *driver, unsigned long long a_bytes,
                                   unsigned long long b_bytes)
{
    __typeof__(&cuMemAlloc_v2) alloc = get("cuMemAlloc", 12000, 0);
    __typeof__(&cuMemGetInfo_v2) info = get("cuMemGetInfo", 12000, 0);
    int (*freeing)(void) = (int (*)(void))dlsym(driver, "mini_driver_freeing");
    struct freer f = {get("cuMemFree", 12000, 0), 0, 0};
    CUdeviceptr b = 0;
    int ra = (int)alloc(&f.ptr, a_bytes), rb = (int)alloc(&b, b_bytes);
    printf("{\"ready\": [%d, %d]}\n", ra, rb);
    fflush(stdout);
    char line[64];
    if (freeing == NULL || fgets(line, sizeof line, stdin) == NULL)
        return 1;
    pthread_t t;
    if (in_driver_then_a_line(free_it, &f, freeing, "freeing", &t))
        return 1;
    size_t free_bytes = 0, total = 0;
    info(&free_bytes, &total); /* reconnects: the hook claims its live bytes */
    pthread_join(t, NULL);     /* (the free returns once the driver's wait times out) */
    printf("{\"freed\": %d}\n", f.rc);
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL)
        ;
    return 0;
}

struct allocer {
    __typeof__(&cuMemAlloc_v2) alloc;
    CUdeviceptr ptr;
    unsigned long long bytes;
    int rc;
};

static void *alloc_it(void *arg)
{
    struct allocer *a = arg;
    a->rc = (int)a->alloc(&a->ptr, a->bytes);
    return NULL;
}

static int alloc_across_a_reconnect(void *driver, unsigned long long a_bytes,
                                    unsigned long long b_bytes, int fail)
{
    void (*hold)(int, int) = (void (*)(int, int))dlsym(driver, "mini_driver_hold_allocs");
    int (*allocating)(void) = (int (*)(void))dlsym(driver, "mini_driver_allocating");
    __typeof__(&cuMemGetInfo_v2) info = get("cuMemGetInfo", 12000, 0);
    struct allocer a = {get("cuMemAlloc", 12000, 0), 0, a_bytes, -1};
    CUdeviceptr b = 0, b2 = 0;
    char line[64];
    if (hold == NULL || allocating == NULL || a.alloc(&b, b_bytes) != CUDA_SUCCESS)
        return 1;
    hold(1, fail);
    pthread_t t;
    if (in_driver_then_a_line(alloc_it, &a, allocating, "allocating", &t))
        return 1;
    hold(0, fail);
    pthread_join(t, NULL);
    size_t free_bytes = 0, total = 0;
    info(&free_bytes, &total);
    printf("{\"allocated\": %d, \"meminfo\": %zu}\n", a.rc, free_bytes);
    fflush(stdout);
    if (fgets(line, sizeof line, stdin) == NULL)
        return 1;
    hold(0, 0);
    printf("{\"again\": %d}\n", (int)a.alloc(&b2, b_bytes));
    fflush(stdout);
    while (fgets(line, sizeof line, stdin) != NULL)
        ;
    return 0;
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    gpa = (gpa_fn)dlsym(h, "cuGetProcAddress_v2");
    gpa = (gpa_fn)get("cuGetProcAddress", 12000, 0);
    __typeof__(&cuInit) init = get("cuInit", 12000, 0);
    init(0);
    if (argc >= 3 && strcmp(argv[1], "launch") == 0) {
        long n = atol(argv[2]);
        int rc = launch(n, argc > 3 && strcmp(argv[3], "ptsz") == 0);
        printf("{\"launched\": %ld, \"rc\": %d}\n", n, rc);
        return rc;
    }
    if (argc >= 3 && strcmp(argv[1], "hostwait") == 0)
        return host_wait((CUfunction)(uintptr_t)strtoul(argv[2], NULL, 0),
                         argc > 3 ? atol(argv[3]) : 0, argc > 4 ? (unsigned)atoi(argv[4]) : 1,
                         argc > 5 && strcmp(argv[5], "ex") == 0);
    if (argc >= 3 && strcmp(argv[1], "alloc") == 0) {
        __typeof__(&cuMemAlloc_v2) alloc = get("cuMemAlloc", 12000, 0);
        __typeof__(&cuMemFree_v2) release = get("cuMemFree", 12000, 0);
        CUdeviceptr p = 0;
        CUresult rc = alloc(&p, strtoull(argv[2], NULL, 10));
        if (rc == CUDA_SUCCESS && argc > 3 && strcmp(argv[3], "free") == 0)
            release(p);
        printf("{\"rc\": %d}\n", (int)rc);
        return 0;
    }
    if (argc >= 5 && strcmp(argv[1], "allocating") == 0)
        return alloc_across_a_reconnect(h, strtoull(argv[2], NULL, 10),
                                        strtoull(argv[3], NULL, 10), strcmp(argv[4], "fail") == 0);
    if (argc >= 4 && strcmp(argv[1], "alloc2") == 0)
        return alloc_two(strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10));
    if (argc >= 2 && strcmp(argv[1], "threads") == 0) {
        int rc = launch(3, 0), threads = 0;
        int open = sigint_open(&threads);
        printf("{\"rc\": %d, \"threads\": %d, \"sigint_open\": %d}\n", rc, threads, open);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "meminfo") == 0) {
        __typeof__(&cuMemGetInfo_v2) info = get("cuMemGetInfo", 12000, 0);
        size_t f = 0, t = 0;
        CUresult rc = info(&f, &t);
        printf("{\"rc\": %d, \"free\": %zu, \"total\": %zu}\n", (int)rc, f, t);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "gpa11") == 0) { /* the CUDA 11 4-argument entry point */
        typedef CUresult (*gpa11_fn)(const char *, void **, int, cuuint64_t);
        gpa11_fn gpa11 = (gpa11_fn)get("cuGetProcAddress", 11030, 0);
        void *lk = NULL;
        CUresult rc = gpa11("cuLaunchKernel", &lk, 11030, 0);
        if (rc == CUDA_SUCCESS)
            rc = ((__typeof__(&cuLaunchKernel))lk)(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
        printf("{\"rc\": %d}\n", (int)rc);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "fork") == 0) {
        launch(1, 0);
        pid_t pid = fork();
        if (pid == 0)
            _exit(launch(3, 0));
        int status = 0;
        waitpid(pid, &status, 0);
        printf("{\"child\": %d}\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "vmm") == 0) {
        __typeof__(&cuMemCreate) create = get("cuMemCreate", 12000, 0);
        __typeof__(&cuMemRelease) release = get("cuMemRelease", 12000, 0);
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = strcmp(argv[3], "host") == 0 ? CU_MEM_LOCATION_TYPE_HOST_NUMA
                                                           : CU_MEM_LOCATION_TYPE_DEVICE;
        CUmemGenericAllocationHandle h = 0;
        CUresult rc = create(&h, strtoull(argv[2], NULL, 10), &prop, 0);
        if (rc == CUDA_SUCCESS)
            release(h);
        printf("{\"rc\": %d}\n", (int)rc);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "freeing") == 0)
        return free_across_a_reconnect(h, strtoull(argv[2], NULL, 10),
                                       strtoull(argv[3], NULL, 10));
    if (argc >= 5 && strcmp(argv[1], "reuse") == 0)
        return reuse_race(h, strtoull(argv[2], NULL, 10), strtoull(argv[3], NULL, 10),
                          strtoull(argv[4], NULL, 10));
    fprintf(stderr, "usage: mini_client launch N [ptsz] | alloc B [free] | alloc2 A B | meminfo | threads | fork | reuse A B C | freeing A B | vmm B host|device\n");
    return 2;
}
