/* The real driver and the real NVML: the only file that resolves their symbols.
 *
 * One slot per hooked symbol holds the driver's function for that exact variant.  A slot is
 * filled by whoever learns the pointer first: the driver's answer to cuGetProcAddress for that
 * (name, version, flags), the application's own dlsym on the driver, or, for programs linked
 * directly against libcuda, a dlsym on our own dlopen handle of the driver.
 *
 * NVML rows come from the libnvidia-ml.so.1 the application itself loaded (we never load one):
 * the library of the first real NVML pointer we see (its dlsym, or RTLD_NEXT for a program
 * linked against it), so that our calls reach the copy the application initialised. */
#define _GNU_SOURCE
#include "internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

const struct gem_sym_info gem_syms[GEM_SYM_COUNT] = {
#define GEM_HOOK(sym, base, ver, stream)                                                         \
    [GEM_SYM_##sym] = {#sym, base, ver, stream, (void *)&sym, GEM_LIB_CUDA},
#define GEM_NVML_HOOK(sym) [GEM_SYM_##sym] = {#sym, #sym, 0, ANY, (void *)&sym, GEM_LIB_NVML},
#include "gemini/hooks.def"
#undef GEM_NVML_HOOK
#undef GEM_HOOK
};

static const char *const aux_names[GEM_AUX_COUNT] = {
#define GEM_AUX_NAME(sym) [GEM_AUX_##sym] = #sym,
    GEM_AUX_LIST(GEM_AUX_NAME)
#undef GEM_AUX_NAME
};

static const char *const nvml_aux_names[GEM_NVML_AUX_COUNT] = {
#define GEM_NVML_AUX_NAME(sym) [GEM_NVML_AUX_##sym] = #sym,
    GEM_NVML_AUX_LIST(GEM_NVML_AUX_NAME)
#undef GEM_NVML_AUX_NAME
};

static _Atomic(void *) slots[GEM_SYM_COUNT];
static _Atomic(void *) aux_slots[GEM_AUX_COUNT];
static _Atomic(void *) nvml_aux_slots[GEM_NVML_AUX_COUNT];
static _Atomic(void *) nvml_lib; /* a handle of the application's libnvidia-ml */
static void *driver;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static _Atomic(gem_dlsym_fn) real_dlsym_fn;

/* glibc >= 2.34 moved dlsym into libc (GLIBC_2.34) and dropped the private __libc_dlsym; older
 * glibc has only the GLIBC_2.2.5 (x86-64) / GLIBC_2.17 (aarch64) version.  dlvsym is not
 * overridden, so this cannot recurse into our own dlsym. */
gem_dlsym_fn gem_real_dlsym_fn(void)
{
    gem_dlsym_fn fn = atomic_load_explicit(&real_dlsym_fn, memory_order_acquire);
    if (fn == NULL) {
        static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
        for (size_t i = 0; fn == NULL && i < sizeof(versions) / sizeof(versions[0]); i++)
            fn = (gem_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (fn != NULL)
            atomic_store_explicit(&real_dlsym_fn, fn, memory_order_release);
    }
    return fn;
}

void *gem_real_dlsym(void *handle, const char *name)
{
    gem_dlsym_fn fn = gem_real_dlsym_fn();
    return fn != NULL ? fn(handle, name) : NULL;
}

static const char *driver_path(void)
{
    const char *path = getenv("GEMINI_REAL_LIBCUDA");
    return path == NULL || path[0] == '\0' ? "libcuda.so.1" : path;
}

static void open_driver(void)
{
    const char *path = driver_path();
    driver = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (driver == NULL)
        GEM_LOG(GEM_LOG_ERROR, "cannot open the CUDA driver %s: %s", path, dlerror());
}

int gem_driver_loaded(void)
{
    void *h = dlopen(driver_path(), RTLD_NOW | RTLD_NOLOAD);
    if (h != NULL)
        dlclose(h); /* only drops the reference RTLD_NOLOAD took */
    return h != NULL;
}

/* Remember the library a real NVML function lives in (the first one wins). */
static void note_nvml_library(void *fn)
{
    Dl_info info;
    if (fn == NULL || atomic_load_explicit(&nvml_lib, memory_order_acquire) != NULL ||
        dladdr(fn, &info) == 0 || info.dli_fname == NULL)
        return;
    /* RTLD_NOLOAD: the same loaded copy, kept loaded while we hold the handle */
    void *h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    void *none = NULL;
    if (h != NULL && !atomic_compare_exchange_strong(&nvml_lib, &none, h))
        dlclose(h);
}

static void *nvml_symbol(const char *name)
{
    void *lib = atomic_load_explicit(&nvml_lib, memory_order_acquire);
    void *fn = lib != NULL ? gem_real_dlsym(lib, name) : NULL;
    if (fn == NULL) {
        fn = gem_real_dlsym(RTLD_NEXT, name); /* a program linked against libnvidia-ml */
        if (gem_is_wrapper(fn))
            fn = NULL;
        note_nvml_library(fn);
    }
    if (fn == NULL) {
        /* loaded with RTLD_LOCAL and never looked up through dlsym: find it by its name */
        void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_NOLOAD);
        if (h != NULL) {
            fn = gem_real_dlsym(h, name);
            note_nvml_library(fn);
            dlclose(h);
        }
    }
    return fn;
}

static void *driver_symbol(const char *name)
{
    pthread_once(&driver_once, open_driver);
    return driver ? gem_real_dlsym(driver, name) : NULL;
}

static CUresult missing(void)
{
    return CUDA_ERROR_NOT_FOUND;
}

static nvmlReturn_t missing_nvml(void)
{
    return NVML_ERROR_FUNCTION_NOT_FOUND;
}

void *gem_real(enum gem_sym s)
{
    void *fn = atomic_load_explicit(&slots[s], memory_order_acquire);
    if (__builtin_expect(fn != NULL, 1))
        return fn;
    int nvml = gem_syms[s].lib == GEM_LIB_NVML;
    fn = nvml ? nvml_symbol(gem_syms[s].name) : driver_symbol(gem_syms[s].name);
    if (fn == NULL || gem_is_wrapper(fn)) {
        static _Atomic uint64_t warned; /* once per symbol */
        if (!(atomic_fetch_or(&warned, 1ull << (s % 64)) & (1ull << (s % 64))))
            GEM_LOG(GEM_LOG_WARN, "the %s has no %s", nvml ? "NVML library" : "driver",
                    gem_syms[s].name);
        /* called with the caller's arguments, which it ignores */
        return nvml ? (void *)&missing_nvml : (void *)&missing;
    }
    atomic_store_explicit(&slots[s], fn, memory_order_release);
    return fn;
}

void *gem_real_by_name(const char *name)
{
    void *fn = driver_symbol(name);
    return gem_is_wrapper(fn) ? NULL : fn;
}

void *gem_real_exported(enum gem_sym s)
{
    void *fn = driver_symbol(gem_syms[s].name);
    return gem_is_wrapper(fn) ? NULL : fn;
}

void *gem_real_aux(enum gem_aux a)
{
    void *fn = atomic_load_explicit(&aux_slots[a], memory_order_acquire);
    if (fn == NULL) {
        fn = driver_symbol(aux_names[a]);
        if (fn != NULL)
            atomic_store_explicit(&aux_slots[a], fn, memory_order_release);
    }
    return fn;
}

void *gem_real_nvml_aux(enum gem_nvml_aux a)
{
    void *fn = atomic_load_explicit(&nvml_aux_slots[a], memory_order_acquire);
    if (fn == NULL) {
        fn = nvml_symbol(nvml_aux_names[a]);
        if (fn != NULL)
            atomic_store_explicit(&nvml_aux_slots[a], fn, memory_order_release);
    }
    return fn;
}

void gem_real_set(enum gem_sym s, void *fn)
{
    if (fn == NULL || gem_is_wrapper(fn))
        return;
    atomic_store_explicit(&slots[s], fn, memory_order_release);
    if (gem_syms[s].lib == GEM_LIB_NVML)
        note_nvml_library(fn);
}

int gem_sym_find(const char *name)
{
    if (name == NULL || (strncmp(name, "cu", 2) != 0 && strncmp(name, "nvml", 4) != 0))
        return -1;
    for (int i = 0; i < GEM_SYM_COUNT; i++)
        if (strcmp(name, gem_syms[i].name) == 0)
            return i;
    return -1;
}

int gem_is_wrapper(const void *fn)
{
    if (fn == NULL)
        return 0;
    for (int i = 0; i < GEM_SYM_COUNT; i++)
        if (gem_syms[i].wrapper == fn)
            return 1;
    return 0;
}
