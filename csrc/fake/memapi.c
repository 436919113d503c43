/* Memory entry points: every allocation family, frees, arrays, VMM, pools, memory info, copies
 * and prefetch.  Budget and addresses come from memory.c. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "fake_internal.h"

#define ARRAY_MAGIC 0x41525231u
#define MIPMAP_MAGIC 0x4d495031u

#define DEVICE_KINDS                                                              \
    (FAKE_KIND_BIT(FAKE_ALLOC_PLAIN) | FAKE_KIND_BIT(FAKE_ALLOC_PITCH) |          \
     FAKE_KIND_BIT(FAKE_ALLOC_MANAGED))

struct CUarray_st {
    uint32_t magic;
    int dev;
    uint64_t bytes;
};

struct CUmipmappedArray_st {
    uint32_t magic;
    int dev;
    uint64_t bytes;
};

static CUresult current_dev(int *dev)
{
    if (!fake_initialized())
        return CUDA_ERROR_NOT_INITIALIZED;
    return fake_current_device(dev);
}

static CUresult alloc_device(CUdeviceptr *dptr, uint64_t bytes, int dev, int kind)
{
    if (dptr == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fake_mem_charge(dev, bytes);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t addr = fake_addr_new(bytes);
    if (addr == 0 || fake_alloc_put(addr, bytes, dev, kind) != 0) {
        fake_mem_uncharge(dev, bytes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)addr;
    return CUDA_SUCCESS;
}

static CUresult free_device(CUdeviceptr dptr)
{
    if (fake_pool_free(dptr) == 0)
        return CUDA_SUCCESS; /* back to its pool, which keeps it (pools.c) */
    uint64_t bytes;
    int dev;
    if (fake_alloc_take(dptr, DEVICE_KINDS, &bytes, &dev, NULL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fake_mem_uncharge(dev, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    FAKE_ENTER(cuMemGetInfo_v2);
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (free_b == NULL || total_b == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f, t;
    rc = fake_mem_info(dev, &f, &t);
    if (rc == CUDA_SUCCESS) {
        *free_b = (size_t)f;
        *total_b = (size_t)t;
    }
    return rc;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FAKE_ENTER(cuMemAlloc_v2);
    int dev;
    CUresult rc = current_dev(&dev);
    return rc != CUDA_SUCCESS ? rc : alloc_device(dptr, bytesize, dev, FAKE_ALLOC_PLAIN);
}

CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    FAKE_ENTER(cuMemFree_v2);
    FAKE_NEED_INIT();
    if (dptr == 0)
        return CUDA_SUCCESS;
    return free_device(dptr);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    FAKE_ENTER(cuMemAllocPitch_v2);
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (pPitch == NULL || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) / 512 * 512;
    rc = alloc_device(dptr, (uint64_t)pitch * Height, dev, FAKE_ALLOC_PITCH);
    if (rc == CUDA_SUCCESS)
        *pPitch = pitch;
    return rc;
}

CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FAKE_ENTER(cuMemAllocManaged);
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_device(dptr, bytesize, dev, FAKE_ALLOC_MANAGED);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t bytes, CUstream h, int per_thread)
{
    FAKE_NEED_INIT();
    int dev;
    CUresult rc = fake_stream_device(h, per_thread, &dev);
    return rc != CUDA_SUCCESS ? rc : fake_pool_alloc_current(dptr, bytes, dev);
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FAKE_ENTER(cuMemAllocAsync);
    return alloc_async(dptr, bytesize, hStream, 0);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    FAKE_ENTER(cuMemAllocAsync_ptsz);
    return alloc_async(dptr, bytesize, hStream, 1);
}

static CUresult alloc_from_pool(CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream h,
                                int per_thread)
{
    FAKE_NEED_INIT();
    int dev;
    CUresult rc = fake_stream_device(h, per_thread, &dev);
    return rc != CUDA_SUCCESS ? rc : fake_pool_alloc(dptr, bytes, pool);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream)
{
    FAKE_ENTER(cuMemAllocFromPoolAsync);
    return alloc_from_pool(dptr, bytesize, pool, hStream, 0);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream)
{
    FAKE_ENTER(cuMemAllocFromPoolAsync_ptsz);
    return alloc_from_pool(dptr, bytesize, pool, hStream, 1);
}

static CUresult free_async(CUdeviceptr dptr, CUstream h, int per_thread)
{
    FAKE_NEED_INIT();
    int dev;
    CUresult rc = fake_stream_device(h, per_thread, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    return free_device(dptr);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FAKE_ENTER(cuMemFreeAsync);
    return free_async(dptr, hStream, 0);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FAKE_ENTER(cuMemFreeAsync_ptsz);
    return free_async(dptr, hStream, 1);
}

/* ---- VMM ------------------------------------------------------------------------------------- */
CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                     const CUmemAllocationProp *prop, unsigned long long flags)
{
    FAKE_ENTER(cuMemCreate);
    FAKE_NEED_INIT();
    if (handle == NULL || prop == NULL || size == 0 || size % FAKE_GRANULARITY != 0 || flags != 0 ||
        prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    int dev = prop->location.id;
    if (dev < 0 || dev >= fake_device_count())
        return CUDA_ERROR_INVALID_DEVICE;
    CUresult rc = fake_mem_charge(dev, size);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t h = fake_addr_new(0); /* unique across processes, never a device pointer */
    if (h == 0 || fake_alloc_put(h, size, dev, FAKE_ALLOC_VMM_HANDLE) != 0) {
        fake_mem_uncharge(dev, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = h;
    return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    FAKE_ENTER(cuMemRelease);
    FAKE_NEED_INIT();
    uint64_t bytes;
    int dev;
    if (fake_alloc_take(handle, FAKE_KIND_BIT(FAKE_ALLOC_VMM_HANDLE), &bytes, &dev, NULL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    fake_mem_uncharge(dev, bytes);
    return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags)
{
    FAKE_ENTER(cuMemAddressReserve);
    FAKE_NEED_INIT();
    (void)addr;
    if (ptr == NULL || size == 0 || size % FAKE_GRANULARITY != 0 || flags != 0 ||
        (alignment != 0 && (alignment & (alignment - 1)) != 0))
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t extra = alignment > FAKE_GRANULARITY ? alignment : 0;
    uint64_t base = fake_addr_new(size + extra);
    if (extra != 0)
        base = (base + alignment - 1) & ~(uint64_t)(alignment - 1);
    if (base == 0 || fake_alloc_put(base, size, -1, FAKE_ALLOC_VMM_RESERVE) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = base;
    return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    FAKE_ENTER(cuMemAddressFree);
    FAKE_NEED_INIT();
    (void)size;
    if (fake_alloc_take(ptr, FAKE_KIND_BIT(FAKE_ALLOC_VMM_RESERVE), NULL, NULL, NULL) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags)
{
    FAKE_ENTER(cuMemMap);
    FAKE_NEED_INIT();
    uint64_t bytes;
    if (ptr == 0 || size == 0 || flags != 0 ||
        fake_alloc_find(handle, FAKE_KIND_BIT(FAKE_ALLOC_VMM_HANDLE), &bytes, NULL) != 0 ||
        offset + size > bytes)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    FAKE_ENTER(cuMemUnmap);
    FAKE_NEED_INIT();
    if (ptr == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count)
{
    FAKE_ENTER(cuMemSetAccess);
    FAKE_NEED_INIT();
    if (ptr == 0 || size == 0 || (count > 0 && desc == NULL))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option)
{
    FAKE_ENTER(cuMemGetAllocationGranularity);
    FAKE_NEED_INIT();
    (void)option;
    if (granularity == NULL || prop == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = FAKE_GRANULARITY;
    return CUDA_SUCCESS;
}

/* ---- arrays ----------------------------------------------------------------------------------- */
static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
    case CU_AD_FORMAT_UNORM_INT8X1:
    case CU_AD_FORMAT_SNORM_INT8X1:
    case CU_AD_FORMAT_NV12:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
    case CU_AD_FORMAT_UNORM_INT8X2:
    case CU_AD_FORMAT_SNORM_INT8X2:
    case CU_AD_FORMAT_UNORM_INT16X1:
    case CU_AD_FORMAT_SNORM_INT16X1:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
    case CU_AD_FORMAT_UNORM_INT8X4:
    case CU_AD_FORMAT_SNORM_INT8X4:
    case CU_AD_FORMAT_UNORM_INT16X2:
    case CU_AD_FORMAT_SNORM_INT16X2:
        return 4;
    case CU_AD_FORMAT_UNORM_INT16X4:
    case CU_AD_FORMAT_SNORM_INT16X4:
        return 8;
    default:
        return 0;
    }
}

static uint64_t max1(uint64_t x)
{
    return x > 0 ? x : 1;
}

/* Bytes of one array level, 0 if the descriptor is invalid. */
static uint64_t array_bytes(size_t w, size_t h, size_t d, CUarray_format f, unsigned channels)
{
    uint64_t fb = format_bytes(f);
    if (w == 0 || fb == 0 || (channels != 1 && channels != 2 && channels != 4))
        return 0;
    return (uint64_t)w * max1(h) * max1(d) * channels * fb;
}

static CUresult array_make(CUarray *ph, uint64_t bytes)
{
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (ph == NULL || bytes == 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUarray_st *a = calloc(1, sizeof *a);
    if (a == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = fake_mem_charge(dev, bytes);
    if (rc != CUDA_SUCCESS) {
        free(a);
        return rc;
    }
    a->dev = dev;
    a->bytes = bytes;
    a->magic = ARRAY_MAGIC;
    *ph = a;
    return CUDA_SUCCESS;
}

CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    FAKE_ENTER(cuArrayCreate_v2);
    FAKE_NEED_INIT();
    if (pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY_DESCRIPTOR *d = pAllocateArray;
    return array_make(pHandle, array_bytes(d->Width, d->Height, 0, d->Format, d->NumChannels));
}

CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    FAKE_ENTER(cuArray3DCreate_v2);
    FAKE_NEED_INIT();
    if (pAllocateArray == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = pAllocateArray;
    return array_make(pHandle,
                      array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels));
}

CUresult cuArrayDestroy(CUarray hArray)
{
    FAKE_ENTER(cuArrayDestroy);
    FAKE_NEED_INIT();
    if (hArray == NULL || hArray->magic != ARRAY_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hArray->magic = 0;
    fake_mem_uncharge(hArray->dev, hArray->bytes);
    free(hArray);
    return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                unsigned int numMipmapLevels)
{
    FAKE_ENTER(cuMipmappedArrayCreate);
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    const CUDA_ARRAY3D_DESCRIPTOR *d = pMipmappedArrayDesc;
    if (pHandle == NULL || d == NULL || numMipmapLevels == 0 || numMipmapLevels > 32)
        return CUDA_ERROR_INVALID_VALUE;
    int layered = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP)) != 0;
    uint64_t bytes = 0;
    for (unsigned l = 0; l < numMipmapLevels; l++) {
        size_t w = d->Width >> l, h = d->Height >> l, dd = layered ? d->Depth : d->Depth >> l;
        uint64_t b = array_bytes(max1(w), d->Height ? max1(h) : 0, d->Depth ? max1(dd) : 0,
                                 d->Format, d->NumChannels);
        if (b == 0)
            return CUDA_ERROR_INVALID_VALUE;
        bytes += b;
    }
    struct CUmipmappedArray_st *m = calloc(1, sizeof *m);
    if (m == NULL)
        return CUDA_ERROR_OUT_OF_MEMORY;
    rc = fake_mem_charge(dev, bytes);
    if (rc != CUDA_SUCCESS) {
        free(m);
        return rc;
    }
    m->dev = dev;
    m->bytes = bytes;
    m->magic = MIPMAP_MAGIC;
    *pHandle = m;
    return CUDA_SUCCESS;
}

CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    FAKE_ENTER(cuMipmappedArrayDestroy);
    FAKE_NEED_INIT();
    if (hMipmappedArray == NULL || hMipmappedArray->magic != MIPMAP_MAGIC)
        return CUDA_ERROR_INVALID_HANDLE;
    hMipmappedArray->magic = 0;
    fake_mem_uncharge(hMipmappedArray->dev, hMipmappedArray->bytes);
    free(hMipmappedArray);
    return CUDA_SUCCESS;
}

/* ---- copies and prefetch: no data moves (device memory is not backed); a synchronous copy
 * waits for the work queued before it, like the real one on the legacy stream. ---------------- */
static CUresult sync_copy(void *dst_host, size_t n, int dst_is_host, const void *src_host,
                          int src_is_host)
{
    int dev;
    CUresult rc = current_dev(&dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n > 0 && ((dst_is_host && dst_host == NULL) || (src_is_host && src_host == NULL)))
        return CUDA_ERROR_INVALID_VALUE;
    fake_sleep_until(fake_proc_tail(dev));
    if (dst_is_host && n > 0)
        memset(dst_host, 0, n); /* device memory reads as zeros */
    return CUDA_SUCCESS;
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpy);
    (void)dst;
    (void)src;
    return sync_copy(NULL, ByteCount, 0, NULL, 0);
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpy_ptds);
    (void)dst;
    (void)src;
    return sync_copy(NULL, ByteCount, 0, NULL, 0);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpyHtoD_v2);
    (void)dstDevice;
    return sync_copy(NULL, ByteCount, 0, srcHost, 1);
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpyHtoD_v2_ptds);
    (void)dstDevice;
    return sync_copy(NULL, ByteCount, 0, srcHost, 1);
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpyDtoH_v2);
    (void)srcDevice;
    return sync_copy(dstHost, ByteCount, 1, NULL, 0);
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    FAKE_ENTER(cuMemcpyDtoH_v2_ptds);
    (void)srcDevice;
    return sync_copy(dstHost, ByteCount, 1, NULL, 0);
}

static CUresult async_copy(void *dst_host, const void *src_host, size_t n, CUstream h,
                           int per_thread)
{
    FAKE_NEED_INIT();
    int dev;
    CUresult rc = fake_stream_device(h, per_thread, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    if (n > 0 && dst_host == NULL && src_host == NULL)
        return CUDA_ERROR_INVALID_VALUE;
    if (dst_host != NULL && n > 0)
        memset(dst_host, 0, n);
    return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    FAKE_ENTER(cuMemcpyHtoDAsync_v2);
    (void)dstDevice;
    return async_copy(NULL, srcHost, ByteCount, hStream, 0);
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    FAKE_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
    (void)dstDevice;
    return async_copy(NULL, srcHost, ByteCount, hStream, 1);
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream)
{
    FAKE_ENTER(cuMemcpyDtoHAsync_v2);
    (void)srcDevice;
    return async_copy(dstHost, NULL, ByteCount, hStream, 0);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream)
{
    FAKE_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
    (void)srcDevice;
    return async_copy(dstHost, NULL, ByteCount, hStream, 1);
}

#define FAKE_CU_DEVICE_CPU ((CUdevice)-1)

static int location_is_host(CUmemLocation loc)
{
    return loc.type == CU_MEM_LOCATION_TYPE_HOST || loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           loc.type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUstream h, int per_thread, int to_host)
{
    FAKE_NEED_INIT();
    int dev;
    CUresult rc = fake_stream_device(h, per_thread, &dev);
    if (rc != CUDA_SUCCESS)
        return rc;
    uint64_t bytes;
    if (fake_alloc_find(p, FAKE_KIND_BIT(FAKE_ALLOC_MANAGED), &bytes, NULL) != 0 || n > bytes)
        return CUDA_ERROR_INVALID_VALUE; /* only managed memory can be prefetched */
    if (to_host) {
        fake_self_um_count(FAKE_UM_PREFETCH_HOST);
    } else {
        fake_self_um_count(FAKE_UM_PREFETCH_DEVICE);
        fake_stream_note_prefetch(h, per_thread);
    }
    return CUDA_SUCCESS;
}

CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    FAKE_ENTER(cuMemPrefetchAsync);
    return prefetch(devPtr, count, hStream, 0, dstDevice == FAKE_CU_DEVICE_CPU);
}

CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                 CUstream hStream)
{
    FAKE_ENTER(cuMemPrefetchAsync_ptsz);
    return prefetch(devPtr, count, hStream, 1, dstDevice == FAKE_CU_DEVICE_CPU);
}

CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                               unsigned int flags, CUstream hStream)
{
    FAKE_ENTER(cuMemPrefetchAsync_v2);
    (void)flags;
    return prefetch(devPtr, count, hStream, 0, location_is_host(location));
}

CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                    unsigned int flags, CUstream hStream)
{
    FAKE_ENTER(cuMemPrefetchAsync_v2_ptsz);
    (void)flags;
    return prefetch(devPtr, count, hStream, 1, location_is_host(location));
}
