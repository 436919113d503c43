/* NVML probe linked against libnvidia-ml.so.1, calling the exported names through the PLT,
 * like a program built with -lnvidia-ml.  Usage: see nvml_probe.h. */
#include "nvml_probe.h"

static int nvml_load(struct nvml *n)
{
#define NVML_DIRECT(sym) n->sym = &sym;
    NVML_API(NVML_DIRECT)
#undef NVML_DIRECT
    return 0;
}

int main(int argc, char **argv)
{
    return probe_main(argc, argv);
}
