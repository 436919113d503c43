/* cuGetProcAddress (CUDA 11.3-11.8 ABI, 4 arguments) and cuGetProcAddress_v2 (CUDA 12+).
 *
 * The real function is called first with the caller's exact arguments.  If the name is in
 * hooks.def, the pointer it returned is kept as the real function of the variant it is, and the
 * caller gets our wrapper of that same variant.  The variant is found by identity (the pointer is
 * the driver's exported function of one of our rows); otherwise by the rule the driver uses: the
 * row of that base name with the highest first_version <= cudaVersion, matching the stream kind
 * asked for by flags.  A variant we do not wrap (e.g. a pre-3.2 cuMemAlloc) is passed through. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Is `fn` the driver's export of a variant of `symbol` that we do not wrap?  CUDA 13 runtimes
 * ask for "cuCtxSynchronize" at 13000 and get cuCtxSynchronize_v2, which takes a context:
 * answering with our wrapper of the older variant would call it with the wrong arguments. */
static int unwrapped_variant(const char *symbol, void *fn)
{
    static const char *const suffixes[] = {"_v2", "_v3", "_v4", "_v5", "_v6", "_ptsz", "_ptds",
                                           "_v2_ptsz", "_v2_ptds", "_v3_ptsz", "_v3_ptds"};
    char name[128];
    for (size_t k = 0; k < sizeof suffixes / sizeof suffixes[0]; k++) {
        if (snprintf(name, sizeof name, "%s%s", symbol, suffixes[k]) >= (int)sizeof name)
            continue;
        int ours = 0;
        for (int i = 0; i < GEM_SYM_COUNT && !ours; i++)
            ours = strcmp(gem_syms[i].name, name) == 0;
        if (!ours && gem_real_by_name(name) == fn)
            return 1;
    }
    return 0;
}

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
    if (best >= 0 && unwrapped_variant(symbol, fn))
        return -1; /* pass the driver's pointer through untouched */
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
