/* Driver declarations the fake exports that gemini/cuda_subset.h (owned by the hook) lacks, and
 * the fake's own control API.  Signatures as in CUDA 13.0's cuda.h. */
#ifndef GEMINI_FAKE_EXTRA_H
#define GEMINI_FAKE_EXTRA_H

#include <stdint.h>

#include "gemini/cuda_subset.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_CU_LAUNCH_PARAM_END ((void *)0x00)
#define FAKE_CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define FAKE_CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority);
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus);
CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream);
CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream);

/* ---- control API (tests drive it through cffi's ffi.dlopen) ------------------------------- */
int fake_attach(const char *segment_name); /* NULL: env GEMINI_FAKE_GPU or the default; 0/-errno */
const char *fake_segment_name(void);
int fake_unlink(void);                     /* shm_unlink the attached segment */
void fake_reset(void);                     /* timeline, accounting, memory, failures: all fresh */
int fake_reap(void);                       /* give back memory of dead processes; how many */
uint64_t fake_now_ns(void);                /* CLOCK_MONOTONIC, the timeline's clock */
uint64_t fake_busy_until(int dev);
uint64_t fake_busy_since(int dev);          /* when the GPU's current run of kernels began */
int fake_clock_boosted(uint64_t run_since, uint64_t at); /* its SM clock at peak (timeline.c) */
uint64_t fake_dev_busy_ns(int dev);        /* all kernel time ever enqueued on the device */
uint64_t fake_dev_kernels(int dev);
uint64_t fake_client_gpu_ns(const char *name); /* by POD_NAME */
uint64_t fake_client_kernels(const char *name);
uint64_t fake_pid_gpu_ns(int pid);         /* newest process slot of that pid */
uint64_t fake_pid_kernels(int pid);
uint64_t fake_pid_mem_used(int pid, int dev);
uint64_t fake_pid_call_count(int pid, const char *exported_name);
uint64_t fake_call_count(const char *exported_name); /* this process */
/* "prefetch_device", "prefetch_host" (cuMemPrefetchAsync* calls that succeeded, by destination),
 * "unordered_launches" (launches onto a stream not ordered, through events, after the process's
 * latest prefetch to a device) */
uint64_t fake_pid_um_count(int pid, const char *what);
int fake_fail_next(const char *exported_name, int code); /* next call by any process; 0/-1 */
uint64_t fake_mem_used(int dev);           /* after giving back memory of dead processes */
uint64_t fake_mem_total(int dev);
void fake_set_mem_total(int dev, uint64_t bytes);
void fake_set_kernel_ns(uint64_t ns);      /* default duration of kernels not named gem_sleep_kernel */
int fake_debug_hold_lock(int fd, uint64_t ns); /* take the segment lock, write "L\n" to fd, hold it ns */
/* The machine as the fake libnvidia-ml.so.1 shows it (no CUDA_VISIBLE_DEVICES there): */
int fake_gpu_count(void);                  /* GEMINI_FAKE_DEVICES, default 1 */
void fake_gpu_uuid(int physical, char *out, size_t cap);
/* Live processes holding memory on the GPU: their number; the first `cap` into pids/bytes. */
int fake_gpu_processes(int physical, int *pids, uint64_t *bytes, int cap);

#ifdef __cplusplus
}
#endif

#endif
