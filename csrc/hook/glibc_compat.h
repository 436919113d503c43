/* Force-included into every file of the hook (gemini/native/_build.py: -include).
 *
 * Why: glibc 2.32 and 2.34 moved pthread_* and dl* into libc under new symbol versions, and a
 * library linked there asks for those versions.  Preloaded into a container image with an older
 * glibc (Ubuntu 20.04: 2.31; RHEL 8: 2.28), ld.so drops such a library with one line and the
 * program runs unhooked: neither limited nor shared.  So the hook asks for the first version
 * of each, which every glibc since has kept; on an older glibc they are in libdl.so.2 and
 * libpthread.so.0, which the hook therefore names as needed (both are still shipped, empty,
 * since 2.34).  Nothing else the hook uses is newer than glibc 2.17 (tests/hook/
 * test_hook_mini.py holds it there).  Other architectures link as they come. */
#ifndef GEMINI_HOOK_GLIBC_COMPAT_H
#define GEMINI_HOOK_GLIBC_COMPAT_H

#if defined(__x86_64__)
#define GEM_GLIBC_FIRST "GLIBC_2.2.5"
#define GEM_GLIBC_SETCLOCK "GLIBC_2.3.3"
#elif defined(__aarch64__)
#define GEM_GLIBC_FIRST "GLIBC_2.17"
#define GEM_GLIBC_SETCLOCK "GLIBC_2.17"
#endif

#ifdef GEM_GLIBC_FIRST
__asm__(".symver dlopen,dlopen@" GEM_GLIBC_FIRST);
__asm__(".symver dlclose,dlclose@" GEM_GLIBC_FIRST);
__asm__(".symver dlerror,dlerror@" GEM_GLIBC_FIRST);
__asm__(".symver dladdr,dladdr@" GEM_GLIBC_FIRST);
__asm__(".symver dlvsym,dlvsym@" GEM_GLIBC_FIRST);
__asm__(".symver pthread_create,pthread_create@" GEM_GLIBC_FIRST);
__asm__(".symver pthread_detach,pthread_detach@" GEM_GLIBC_FIRST);
__asm__(".symver pthread_once,pthread_once@" GEM_GLIBC_FIRST);
__asm__(".symver pthread_sigmask,pthread_sigmask@" GEM_GLIBC_FIRST);
__asm__(".symver pthread_condattr_setclock,pthread_condattr_setclock@" GEM_GLIBC_SETCLOCK);
#endif

#endif
