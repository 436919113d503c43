/* A library preloaded after the hook that wraps getpid the usual way, dlsym(RTLD_NEXT, ...):
 * glibc reads "next" from the return address of dlsym's caller, so the hook's dlsym must
 * leave that address the shim's.  At load it prints whether it found a getpid other than its
 * own (else a wrapper calling it would recurse until the stack ran out). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <sys/types.h>
#include <unistd.h>

pid_t getpid(void)
{
    static pid_t (*next)(void);
    if (next == NULL)
        next = (pid_t(*)(void))dlsym(RTLD_NEXT, "getpid");
    return next != NULL && next != getpid ? next() : -1;
}

__attribute__((constructor)) static void say(void)
{
    void *next = dlsym(RTLD_NEXT, "getpid");
    printf("{\"next_found\": %d, \"next_is_own\": %d}\n", next != NULL, next == (void *)getpid);
    fflush(stdout);
}
