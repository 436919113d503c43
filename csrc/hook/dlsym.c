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

GEM_EXPORT void *dlsym(void *handle, const char *symbol)
{
    void *found = gem_real_dlsym(handle, symbol);
    int i = gem_sym_find(symbol);
    if (i < 0 || found == NULL)
        return found;
    gem_init(); /* reads the environment only: no CUDA, no sockets */
    if (gem_cfg.disabled)
        return found;
    /* RTLD_DEFAULT lookups can find our own wrapper; gem_real_set ignores those. */
    gem_real_set((enum gem_sym)i, found);
    GEM_LOG(GEM_LOG_DEBUG, "dlsym(%s) -> hook", symbol);
    return gem_syms[i].wrapper;
}
