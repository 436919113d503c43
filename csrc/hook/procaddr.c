/* cuGetProcAddress (CUDA 11.3-11.8 ABI, 4 arguments) and cuGetProcAddress_v2 (CUDA 12+).
 *
 * The real function is called first with the caller's exact arguments.  If the name is in
 * hooks.def, the pointer it returned is kept as the real function of the variant it is, and the
 * caller gets our wrapper of that same variant.  The variant is found by identity (the pointer is
 * the driver's exported function of one of our rows); otherwise by the rule the driver uses: the
 * row of that base name with the highest first_version <= cudaVersion, matching the stream kind
 * asked for by flags.  A variant we do not wrap (e.g. a pre-3.2 cuMemAlloc) is passed through. */
#include "internal.h"

#include <string.h>

static int variant_of(const char *symbol, void *fn, int version, cuuint64_t flags)
{
    int best = -1;
    int stream = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? PTS : LEG;
    for (int i = 0; i < GEM_SYM_COUNT; i++) {
        const struct gem_sym_info *s = &gem_syms[i];
        if (strcmp(s->base, symbol) != 0)
            continue;
        if (gem_real_exported((enum gem_sym)i) == fn)
            return i;
        if (s->version > version || (s->stream != ANY && s->stream != stream))
            continue;
        if (best < 0 || s->version > gem_syms[best].version)
            best = i;
    }
    return best;
}

static void swap(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (pfn == NULL || *pfn == NULL || gem_cfg.disabled || symbol == NULL)
        return;
    if (strncmp(symbol, "cu", 2) != 0)
        return;
    int i = variant_of(symbol, *pfn, version, flags);
    if (i < 0)
        return;
    gem_real_set((enum gem_sym)i, *pfn);
    GEM_LOG(GEM_LOG_DEBUG, "cuGetProcAddress(%s, %d, %llu) -> hook %s", symbol, version,
            (unsigned long long)flags, gem_syms[i].name);
    *pfn = gem_syms[i].wrapper;
}

GEM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags)
{
    GEM_ENTER(cuGetProcAddress);
    CUresult r = REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS)
        swap(symbol, pfn, cudaVersion, flags);
    return r;
}

GEM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    GEM_ENTER(cuGetProcAddress_v2);
    CUresult r = REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
    /* symbolStatus stays exactly as the driver wrote it */
    if (r == CUDA_SUCCESS && (symbolStatus == NULL || *symbolStatus == CU_GET_PROC_ADDRESS_SUCCESS))
        swap(symbol, pfn, cudaVersion, flags);
    return r;
}
