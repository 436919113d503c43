/* NVML probe that reaches NVML the way nvidia-ml-py (pynvml) and nvidia-smi do:
 * dlopen("libnvidia-ml.so.1", RTLD_LOCAL) and dlsym(handle, name) for every function.
 * Usage: see nvml_probe.h. */
#include "nvml_probe.h"

static int nvml_load(struct nvml *n)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "dlopen libnvidia-ml.so.1: %s\n", dlerror());
        return -1;
    }
#define NVML_DLSYM(sym)                                                                          \
    *(void **)&n->sym = dlsym(h, #sym);                                                          \
    if (n->sym == NULL) {                                                                        \
        fprintf(stderr, "dlsym %s failed\n", #sym);                                              \
        return -1;                                                                               \
    }
    NVML_API(NVML_DLSYM)
#undef NVML_DLSYM
    return 0;
}

int main(int argc, char **argv)
{
    return probe_main(argc, argv);
}
