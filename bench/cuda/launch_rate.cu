// Empty-kernel launch rate (scenario S1).  Each of T threads has its own non-blocking stream and
// launches an empty kernel N times (<<<1,1>>>: cudaLaunchKernel -> cuLaunchKernel), then syncs.
// Also, on thread 0 only, launch+sync round trips.  One JSON line on stdout.
//   launch_rate [threads=1] [launches_per_thread=200000] [rtt_samples=2000]
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

__global__ void empty_kernel() {}

static double now_s()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 1;
    long n = argc > 2 ? atol(argv[2]) : 200000;
    int rtt_n = argc > 3 ? atoi(argv[3]) : 2000;
    cudaError_t err = cudaFree(0);  // context
    if (err != cudaSuccess) {
        printf("{\"error\": \"%s\"}\n", cudaGetErrorString(err));
        return 1;
    }
    std::vector<cudaStream_t> streams(threads);
    for (auto &s : streams)
        cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    // Warm-up: module load, first launches, the hook's first token.
    for (int t = 0; t < threads; t++) {
        for (int i = 0; i < 1000; i++)
            empty_kernel<<<1, 1, 0, streams[t]>>>();
        cudaStreamSynchronize(streams[t]);
    }
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> per(threads, 0.0);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) {
        pool.emplace_back([&, t] {
            ready++;
            while (!go.load())
                ;
            double t0 = now_s();
            for (long i = 0; i < n; i++)
                empty_kernel<<<1, 1, 0, streams[t]>>>();
            cudaStreamSynchronize(streams[t]);
            per[t] = now_s() - t0;
        });
    }
    while (ready.load() < threads)
        ;
    double t0 = now_s();
    go = true;
    for (auto &th : pool)
        th.join();
    double wall = now_s() - t0;
    err = cudaGetLastError();
    // Launch + sync round trip on one stream.
    std::vector<double> rtt(rtt_n);
    for (int i = 0; i < rtt_n; i++) {
        double a = now_s();
        empty_kernel<<<1, 1, 0, streams[0]>>>();
        cudaStreamSynchronize(streams[0]);
        rtt[i] = (now_s() - a) * 1e6;
    }
    std::sort(rtt.begin(), rtt.end());
    double worst = *std::max_element(per.begin(), per.end());
    printf("{\"threads\": %d, \"launches_per_thread\": %ld, \"wall_s\": %.6f, "
           "\"ns_per_launch\": %.2f, \"aggregate_per_s\": %.0f, \"rtt_us_p50\": %.2f, "
           "\"rtt_us_p99\": %.2f, \"error\": \"%s\"}\n",
           threads, n, wall, worst / (double)n * 1e9, (double)threads * (double)n / wall,
           rtt_n ? rtt[rtt_n / 2] : 0.0, rtt_n ? rtt[(size_t)(rtt_n * 0.99)] : 0.0,
           err == cudaSuccess ? "" : cudaGetErrorString(err));
    return err == cudaSuccess ? 0 : 1;
}
