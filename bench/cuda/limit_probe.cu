// Memory-limit and launch probe for a program built by nvcc (static cudart, the default).
// Driver functions are taken with dlopen("libcuda.so.1") + dlsym, as a program that uses the
// driver API directly would (no -lcuda needed).  One JSON object on stdout.
//   limit_probe LIMIT_BYTES [what=paths,latency,launches,meminfo] [latency_n=300] [launches=2000]
// paths:    for each allocation path: one allocation of 1.25 x LIMIT (must fail), then 256 MiB
//           pieces until refused or 1.5 x LIMIT; "escapes" = pieces granted beyond LIMIT.
// latency:  cuMemAlloc_v2 / cuMemFree_v2 of 2 MiB, p50/p99 in us.
// launches: a kernel launched N times (the hook's stats count them).
// meminfo:  cudaMemGetInfo.
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
typedef CUresult (*free_fn)(CUdeviceptr);
typedef CUresult (*create_fn)(CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *,
                              unsigned long long);
typedef CUresult (*release_fn)(CUmemGenericAllocationHandle);
typedef CUresult (*gran_fn)(size_t *, const CUmemAllocationProp *, CUmemAllocationGranularity_flags);

static alloc_fn d_alloc;
static free_fn d_free;
static create_fn d_create;
static release_fn d_release;
static gran_fn d_gran;

__global__ void tiny(float *p)
{
    if (p)
        p[threadIdx.x] += 1.0f;
}

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct piece {
    void *p = nullptr;
    CUmemGenericAllocationHandle h = 0;
};

static const size_t PIECE = 256ull << 20;

// One allocation on `path`; returns the error code (0 = granted).
static int alloc_on(const std::string &path, size_t bytes, piece &out, cudaStream_t st,
                    cudaMemPool_t pool)
{
    if (path == "cudaMalloc")
        return (int)cudaMalloc(&out.p, bytes);
    if (path == "cudaMallocPitch") {
        size_t pitch = 0;
        return (int)cudaMallocPitch(&out.p, &pitch, bytes / 4096, 4096);
    }
    if (path == "cudaMallocAsync") {
        int r = (int)cudaMallocAsync(&out.p, bytes, st);
        cudaStreamSynchronize(st);
        return r;
    }
    if (path == "cudaMallocFromPoolAsync") {
        int r = (int)cudaMallocFromPoolAsync(&out.p, bytes, pool, st);
        cudaStreamSynchronize(st);
        return r;
    }
    if (path == "cuMemAlloc_v2") {
        CUdeviceptr d = 0;
        int r = d_alloc ? (int)d_alloc(&d, bytes) : -1;
        out.p = (void *)d;
        return r;
    }
    if (path == "cuMemCreate") {
        if (!d_create)
            return -1;
        CUmemAllocationProp prop;
        memset(&prop, 0, sizeof prop);
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = 0;
        size_t g = 2 << 20;
        if (d_gran)
            d_gran(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
        size_t sz = (bytes + g - 1) / g * g;
        return (int)d_create(&out.h, sz, &prop, 0);
    }
    return -1;
}

static void free_on(const std::string &path, piece &x, cudaStream_t st)
{
    if (path == "cudaMallocAsync" || path == "cudaMallocFromPoolAsync") {
        if (x.p)
            cudaFreeAsync(x.p, st);
        cudaStreamSynchronize(st);
    } else if (path == "cuMemAlloc_v2") {
        if (x.p && d_free)
            d_free((CUdeviceptr)x.p);
    } else if (path == "cuMemCreate") {
        if (x.h && d_release)
            d_release(x.h);
    } else if (x.p) {
        cudaFree(x.p);
    }
    x = piece();
}

static void run_paths(size_t limit, std::string &json)
{
    const char *paths[] = {"cudaMalloc", "cudaMallocPitch", "cudaMallocAsync",
                           "cudaMallocFromPoolAsync", "cuMemAlloc_v2", "cuMemCreate"};
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    cudaMemPool_t pool = nullptr, defpool = nullptr;
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    int pool_rc = (int)cudaMemPoolCreate(&pool, &props);
    cudaDeviceGetDefaultMemPool(&defpool, 0);
    json += "\"paths\": {";
    bool first = true;
    for (const char *pc : paths) {
        std::string path = pc;
        piece big;
        int over_rc = alloc_on(path, limit + limit / 4, big, st, pool);
        if (over_rc == 0)
            free_on(path, big, st);
        std::vector<piece> held;
        size_t granted = 0;
        int escapes = 0, stop_rc = 0;
        while (granted < limit + limit / 2) {
            piece x;
            int r = alloc_on(path, PIECE, x, st, pool);
            if (r != 0) {
                stop_rc = r;
                break;
            }
            held.push_back(x);
            granted += PIECE;
            if (granted > limit)
                escapes++;
        }
        for (auto &x : held)
            free_on(path, x, st);
        if (pool)
            cudaMemPoolTrimTo(pool, 0);
        if (defpool)
            cudaMemPoolTrimTo(defpool, 0);
        cudaGetLastError();  // clear a sticky-free error from a refused allocation
        char buf[400];
        snprintf(buf, sizeof buf,
                 "%s\"%s\": {\"over_rc\": %d, \"first_piece_ok\": %s, \"granted_bytes\": %zu, "
                 "\"pieces\": %zu, \"escapes\": %d, \"refused_rc\": %d}",
                 first ? "" : ", ", pc, over_rc, held.empty() ? "false" : "true", granted,
                 held.size(), escapes, stop_rc);
        json += buf;
        first = false;
    }
    json += "}, \"pool_create_rc\": " + std::to_string(pool_rc);
    if (pool)
        cudaMemPoolDestroy(pool);
    cudaStreamDestroy(st);
}

static void run_latency(int n, std::string &json)
{
    std::vector<double> a(n), f(n);
    int fails = 0;
    for (int i = 0; i < n + 20; i++) {
        CUdeviceptr p = 0;
        double t0 = now_s();
        CUresult r = d_alloc(&p, 2u << 20);
        double t1 = now_s();
        if (r == CUDA_SUCCESS)
            d_free(p);
        double t2 = now_s();
        if (r != CUDA_SUCCESS)
            fails++;
        if (i >= 20) {  // warm-up excluded
            a[i - 20] = (t1 - t0) * 1e6;
            f[i - 20] = (t2 - t1) * 1e6;
        }
    }
    std::sort(a.begin(), a.end());
    std::sort(f.begin(), f.end());
    char buf[300];
    snprintf(buf, sizeof buf,
             "\"alloc2m_us_p50\": %.2f, \"alloc2m_us_p99\": %.2f, \"free2m_us_p50\": %.2f, "
             "\"free2m_us_p99\": %.2f, \"latency_n\": %d, \"latency_fails\": %d",
             a[n / 2], a[(size_t)(n * 0.99)], f[n / 2], f[(size_t)(n * 0.99)], n, fails);
    json += buf;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: limit_probe LIMIT_BYTES [what] [latency_n] [launches]\n");
        return 2;
    }
    size_t limit = strtoull(argv[1], nullptr, 0);
    std::string what = argc > 2 ? argv[2] : "paths,latency,launches,meminfo";
    int lat_n = argc > 3 ? atoi(argv[3]) : 300;
    int launches = argc > 4 ? atoi(argv[4]) : 2000;
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("{\"error\": \"%s\"}\n", cudaGetErrorString(e));
        return 1;
    }
    void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (drv) {
        d_alloc = (alloc_fn)dlsym(drv, "cuMemAlloc_v2");
        d_free = (free_fn)dlsym(drv, "cuMemFree_v2");
        d_create = (create_fn)dlsym(drv, "cuMemCreate");
        d_release = (release_fn)dlsym(drv, "cuMemRelease");
        d_gran = (gran_fn)dlsym(drv, "cuMemGetAllocationGranularity");
    }
    std::string json = "{\"limit\": " + std::to_string(limit);
    if (what.find("meminfo") != std::string::npos) {
        size_t fr = 0, tot = 0;
        int r = (int)cudaMemGetInfo(&fr, &tot);
        json += ", \"meminfo_rc\": " + std::to_string(r) + ", \"mem_free\": " + std::to_string(fr) +
                ", \"mem_total\": " + std::to_string(tot);
    }
    if (what.find("launches") != std::string::npos) {
        float *p = nullptr;
        cudaMalloc(&p, 1024 * sizeof(float));
        double t0 = now_s();
        for (int i = 0; i < launches; i++) {
            tiny<<<1, 32>>>(p);
            if (i % 64 == 63)
                cudaDeviceSynchronize();
        }
        cudaError_t le = cudaDeviceSynchronize();
        json += ", \"launches\": " + std::to_string(launches) + ", \"launch_rc\": " +
                std::to_string((int)le) + ", \"launch_s\": " + std::to_string(now_s() - t0);
        cudaFree(p);
    }
    if (what.find("latency") != std::string::npos && d_alloc && d_free) {
        json += ", ";
        run_latency(lat_n, json);
    }
    if (what.find("paths") != std::string::npos) {
        json += ", ";
        run_paths(limit, json);
    }
    json += "}";
    printf("%s\n", json.c_str());
    return 0;
}
