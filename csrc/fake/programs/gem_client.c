/* Test client that reaches the driver exactly the way the CUDA runtime does:
 * dlopen("libcuda.so.1") -> dlsym(handle, "cuGetProcAddress_v2") -> ask it for
 * "cuGetProcAddress" (version 12000) -> every other function through the pointer it returned,
 * by base name + version (+ flags CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM with --ptsz).
 * Commands: see client.h. */
#include "client.h"

#include <dlfcn.h>

static int client_load(struct api *a, int ptsz, char *err, size_t errlen)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(err, errlen, "dlopen libcuda.so.1 failed");
        return -1;
    }
    __typeof__(cuGetProcAddress_v2) *boot = NULL;
    *(void **)&boot = dlsym(h, "cuGetProcAddress_v2");
    if (boot == NULL) {
        snprintf(err, errlen, "dlsym cuGetProcAddress_v2 failed");
        return -1;
    }
    __typeof__(cuGetProcAddress_v2) *gpa = NULL;
    CUdriverProcAddressQueryResult qr;
    CUresult r = boot("cuGetProcAddress", (void **)&gpa, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &qr);
    if (r != CUDA_SUCCESS || gpa == NULL) {
        snprintf(err, errlen, "cuGetProcAddress_v2(cuGetProcAddress) = %d", (int)r);
        return -1;
    }
#define CLIENT_GPA(field, sym, psym, base, ver, pver)                                        \
    do {                                                                                     \
        int pt_ = ptsz && (pver) != 0;                                                       \
        r = gpa(base, (void **)&a->field, pt_ ? (pver) : (ver),                              \
                pt_ ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : CU_GET_PROC_ADDRESS_DEFAULT, \
                &qr);                                                                        \
        if (r != CUDA_SUCCESS || a->field == NULL) {                                         \
            snprintf(err, errlen, "cuGetProcAddress(%s, %d) = %d status %d", base,          \
                     pt_ ? (pver) : (ver), (int)r, (int)qr);                                 \
            return -1;                                                                       \
        }                                                                                    \
    } while (0);
    CLIENT_API(CLIENT_GPA)
#undef CLIENT_GPA
    return 0;
}

int main(int argc, char **argv)
{
    return client_main(argc, argv);
}
