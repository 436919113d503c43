/* Test client linked against libcuda.so.1, calling the exported names (cuMemAlloc_v2,
 * cuLaunchKernel_ptsz with --ptsz, ...) through the PLT, like a program built with -lcuda.
 * Commands: see client.h. */
#include "client.h"

static int client_load(struct api *a, int ptsz, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
#define CLIENT_DIRECT(field, sym, psym, base, ver, pver) a->field = ptsz ? &psym : &sym;
    CLIENT_API(CLIENT_DIRECT)
#undef CLIENT_DIRECT
    return 0;
}

int main(int argc, char **argv)
{
    return client_main(argc, argv);
}
