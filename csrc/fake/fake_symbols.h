/* The one list of what the fake driver exports, and how cuGetProcAddress finds it.
 *
 *   X(exported_symbol, base_name, min_cuda_version, kind)
 *
 * kind D: the default (legacy stream) variant, answered when flags lack
 *         CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
 * kind P: the per-thread variant (_ptsz / _ptds), answered when that flag is set (falling back to
 *         the D rows when no P row is old enough).
 * Among the rows of one base name and kind, the one with the highest min_cuda_version that is
 * <= the asked version wins (this is how "cuMemAlloc"@3020 becomes cuMemAlloc_v2).
 * Versions follow the PFN_<name>_v<version> typedefs of CUDA 13.0's cudaTypedefs.h.
 *
 * Every row gets a per-process call counter (fake_call_count) and one-shot fault injection
 * (fake_fail_next). */
#ifndef GEMINI_FAKE_SYMBOLS_H
#define GEMINI_FAKE_SYMBOLS_H

#define FAKE_SYMBOLS(X)                                                             \
    X(cuInit, cuInit, 2000, D)                                                      \
    X(cuDriverGetVersion, cuDriverGetVersion, 2020, D)                              \
    X(cuGetErrorString, cuGetErrorString, 6000, D)                                  \
    X(cuGetErrorName, cuGetErrorName, 6000, D)                                      \
    X(cuGetProcAddress, cuGetProcAddress, 11030, D)                                 \
    X(cuGetProcAddress_v2, cuGetProcAddress, 12000, D)                              \
    X(cuDeviceGet, cuDeviceGet, 2000, D)                                            \
    X(cuDeviceGetCount, cuDeviceGetCount, 2000, D)                                  \
    X(cuDeviceGetName, cuDeviceGetName, 2000, D)                                    \
    X(cuDeviceGetUuid_v2, cuDeviceGetUuid, 11040, D)                                \
    X(cuDeviceTotalMem_v2, cuDeviceTotalMem, 3020, D)                               \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, D)                          \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, D)                  \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease, 11000, D)            \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset, 11000, D)                \
    X(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState, 7000, D)              \
    X(cuCtxCreate_v2, cuCtxCreate, 3020, D)                                         \
    X(cuCtxCreate_v4, cuCtxCreate, 12050, D)                                        \
    X(cuCtxDestroy_v2, cuCtxDestroy, 4000, D)                                       \
    X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, D)                                    \
    X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, D)                                    \
    X(cuCtxGetDevice, cuCtxGetDevice, 2000, D)                                      \
    X(cuCtxGetDevice_v2, cuCtxGetDevice, 13000, D)                                  \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, D)                                  \
    X(cuCtxSynchronize_v2, cuCtxSynchronize, 13000, D)                              \
    X(cuCtxPushCurrent_v2, cuCtxPushCurrent, 4000, D)                               \
    X(cuCtxPopCurrent_v2, cuCtxPopCurrent, 4000, D)                                 \
    X(cuModuleLoadData, cuModuleLoadData, 2000, D)                                  \
    X(cuModuleGetFunction, cuModuleGetFunction, 2000, D)                            \
    X(cuFuncGetName, cuFuncGetName, 12030, D)                                       \
    X(cuModuleUnload, cuModuleUnload, 2000, D)                                      \
    X(cuLaunchKernel, cuLaunchKernel, 4000, D)                                      \
    X(cuLaunchKernel_ptsz, cuLaunchKernel, 7000, P)                                 \
    X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, D)                                 \
    X(cuLaunchKernelEx_ptsz, cuLaunchKernelEx, 11060, P)                            \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, D)                \
    X(cuLaunchCooperativeKernel_ptsz, cuLaunchCooperativeKernel, 9000, P)           \
    X(cuGraphLaunch, cuGraphLaunch, 10000, D)                                       \
    X(cuGraphLaunch_ptsz, cuGraphLaunch, 10000, P)                                  \
    X(cuStreamCreate, cuStreamCreate, 2000, D)                                      \
    X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050, D)              \
    X(cuStreamDestroy_v2, cuStreamDestroy, 4000, D)                                 \
    X(cuStreamSynchronize, cuStreamSynchronize, 2000, D)                            \
    X(cuStreamSynchronize_ptsz, cuStreamSynchronize, 7000, P)                       \
    X(cuStreamQuery, cuStreamQuery, 2000, D)                                        \
    X(cuStreamQuery_ptsz, cuStreamQuery, 7000, P)                                   \
    X(cuLaunchHostFunc, cuLaunchHostFunc, 10000, D)                                 \
    X(cuLaunchHostFunc_ptsz, cuLaunchHostFunc, 10000, P)                            \
    X(cuStreamWaitEvent, cuStreamWaitEvent, 3020, D)                                \
    X(cuStreamWaitEvent_ptsz, cuStreamWaitEvent, 7000, P)                           \
    X(cuStreamBeginCapture_v2, cuStreamBeginCapture, 10010, D)                      \
    X(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture, 10010, P)                 \
    X(cuStreamEndCapture, cuStreamEndCapture, 10000, D)                             \
    X(cuStreamEndCapture_ptsz, cuStreamEndCapture, 10000, P)                        \
    X(cuStreamIsCapturing, cuStreamIsCapturing, 10000, D)                           \
    X(cuStreamIsCapturing_ptsz, cuStreamIsCapturing, 10000, P)                      \
    X(cuThreadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode, 10010, D) \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags, 11040, D)           \
    X(cuGraphDestroy, cuGraphDestroy, 10000, D)                                     \
    X(cuGraphExecDestroy, cuGraphExecDestroy, 10000, D)                             \
    X(cuEventCreate, cuEventCreate, 2000, D)                                        \
    X(cuEventRecord, cuEventRecord, 2000, D)                                        \
    X(cuEventRecord_ptsz, cuEventRecord, 7000, P)                                   \
    X(cuEventSynchronize, cuEventSynchronize, 2000, D)                              \
    X(cuEventQuery, cuEventQuery, 2000, D)                                          \
    X(cuEventElapsedTime, cuEventElapsedTime, 2000, D)                              \
    X(cuEventElapsedTime_v2, cuEventElapsedTime, 12080, D)                          \
    X(cuEventDestroy_v2, cuEventDestroy, 4000, D)                                   \
    X(cuMemGetInfo_v2, cuMemGetInfo, 3020, D)                                       \
    X(cuMemAlloc_v2, cuMemAlloc, 3020, D)                                           \
    X(cuMemFree_v2, cuMemFree, 3020, D)                                             \
    X(cuMemAllocPitch_v2, cuMemAllocPitch, 3020, D)                                 \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, D)                                \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, D)                                   \
    X(cuMemAllocAsync_ptsz, cuMemAllocAsync, 11020, P)                              \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, D)                   \
    X(cuMemAllocFromPoolAsync_ptsz, cuMemAllocFromPoolAsync, 11020, P)              \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, D)                                     \
    X(cuMemFreeAsync_ptsz, cuMemFreeAsync, 11020, P)                                \
    X(cuMemPoolCreate, cuMemPoolCreate, 11020, D)                                   \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, D)                                 \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, D)                                   \
    X(cuMemPoolGetAttribute, cuMemPoolGetAttribute, 11020, D)                       \
    X(cuMemPoolSetAttribute, cuMemPoolSetAttribute, 11020, D)                       \
    X(cuDeviceGetDefaultMemPool, cuDeviceGetDefaultMemPool, 11020, D)               \
    X(cuDeviceGetMemPool, cuDeviceGetMemPool, 11020, D)                             \
    X(cuDeviceSetMemPool, cuDeviceSetMemPool, 11020, D)                             \
    X(cuMemCreate, cuMemCreate, 10020, D)                                           \
    X(cuMemRelease, cuMemRelease, 10020, D)                                         \
    X(cuMemAddressReserve, cuMemAddressReserve, 10020, D)                           \
    X(cuMemAddressFree, cuMemAddressFree, 10020, D)                                 \
    X(cuMemMap, cuMemMap, 10020, D)                                                 \
    X(cuMemUnmap, cuMemUnmap, 10020, D)                                             \
    X(cuMemSetAccess, cuMemSetAccess, 10020, D)                                     \
    X(cuMemGetAllocationGranularity, cuMemGetAllocationGranularity, 10020, D)       \
    X(cuArrayCreate_v2, cuArrayCreate, 3020, D)                                     \
    X(cuArray3DCreate_v2, cuArray3DCreate, 3020, D)                                 \
    X(cuArrayDestroy, cuArrayDestroy, 2000, D)                                      \
    X(cuMipmappedArrayCreate, cuMipmappedArrayCreate, 5000, D)                      \
    X(cuMipmappedArrayDestroy, cuMipmappedArrayDestroy, 5000, D)                    \
    X(cuMemcpy, cuMemcpy, 4000, D)                                                  \
    X(cuMemcpy_ptds, cuMemcpy, 7000, P)                                             \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD, 3020, D)                                       \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD, 7000, P)                                  \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH, 3020, D)                                       \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH, 7000, P)                                  \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync, 3020, D)                             \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync, 7000, P)                        \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync, 3020, D)                             \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync, 7000, P)                        \
    X(cuMemPrefetchAsync, cuMemPrefetchAsync, 8000, D)                              \
    X(cuMemPrefetchAsync_ptsz, cuMemPrefetchAsync, 8000, P)                         \
    X(cuMemPrefetchAsync_v2, cuMemPrefetchAsync, 12020, D)                          \
    X(cuMemPrefetchAsync_v2_ptsz, cuMemPrefetchAsync, 12020, P)

enum fake_symbol_id {
#define FAKE_X_ENUM(sym, base, ver, kind) FAKE_ID_##sym,
    FAKE_SYMBOLS(FAKE_X_ENUM)
#undef FAKE_X_ENUM
        FAKE_N_SYMBOLS
};

#endif
