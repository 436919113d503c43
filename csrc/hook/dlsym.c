/* The dlsym override.  CUDA runtimes dlopen libcuda.so.1 and look up cuGetProcAddress_v2 with
 * dlsym(handle, ...), which never reaches a preloaded definition: this is how we get in.
 *
 * It answers only for names in hooks.def, and only when the real dlsym finds the name too (we
 * never invent symbols).  NVML is reached the same way: pynvml and nvidia-smi dlopen
 * libnvidia-ml.so.1 and dlsym each function.  Every other lookup goes straight to the real dlsym with no other work:
 * the driver itself calls dlsym, and heavy work there hung processes on newer drivers. */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>

/* Where the compiler can promise a tail call (clang 13+, gcc 15+), it must; elsewhere -O2
 * makes one (tests/hook's RTLD_NEXT test fails if not). */
#if defined(__has_attribute)
#if __has_attribute(musttail)
#define GEM_TAIL_CALL __attribute__((musttail))
#endif
#endif
#ifndef GEM_TAIL_CALL
#define GEM_TAIL_CALL
#endif

GEM_EXPORT void *dlsym(void *handle, const char *symbol)
{
    int i = gem_sym_find(symbol);
    if (i < 0) {
        /* A tail call (a jump at -O2): glibc reads whose "next" RTLD_NEXT means from the
         * address dlsym returns to, which a jump leaves our caller's.  Called from here, it
         * was ours: a library preloaded after the hook found its own definition as the next
         * one, and a wrapper calling it recursed until the stack ran out. */
        gem_dlsym_fn real = gem_real_dlsym_fn();
        if (real == NULL)
            return NULL;
        GEM_TAIL_CALL return real(handle, symbol);
    }
    void *found = gem_real_dlsym(handle, symbol);
    if (found == NULL)
        return NULL;
    gem_init(); /* reads the environment only: no CUDA, no sockets */
    if (gem_cfg.disabled)
        return found;
    /* RTLD_DEFAULT lookups can find our own wrapper; gem_real_set ignores those. */
    gem_real_set((enum gem_sym)i, found);
    GEM_LOG(GEM_LOG_DEBUG, "dlsym(%s) -> hook", symbol);
    return gem_syms[i].wrapper;
}
