/* Leveled logging: one line per event on stderr, written with a single write(2),
 * prefixed "gemini-hook[<POD_NAME> <pid>]" (debug lines also with CLOCK_MONOTONIC seconds, the
 * clock of Python's time.monotonic() and of the daemons' traces).  Level read once from GEMINI_LOG
 * (error|warn|info|debug, default warn) or CU_HOOK_DEBUG=1 (debug). */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int gem_log_level = GEM_LOG_WARN;

void gem_log_init(void)
{
    const char *v = getenv("GEMINI_LOG");
    const char *dbg = getenv("CU_HOOK_DEBUG");
    if (v != NULL) {
        static const char *const names[] = {"error", "warn", "info", "debug"};
        for (int i = 0; i < 4; i++)
            if (strcasecmp(v, names[i]) == 0)
                gem_log_level = i;
    }
    if (dbg != NULL && strcmp(dbg, "1") == 0)
        gem_log_level = GEM_LOG_DEBUG;
}

void gem_log(int level, const char *fmt, ...)
{
    static const char *const tags[] = {"error", "warn", "info", "debug"};
    char line[512];
    const char *name = gem_cfg.pod_name[0] ? gem_cfg.pod_name : "?";
    int n = snprintf(line, sizeof(line), "gemini-hook[%s %d] %s: ", name, (int)getpid(),
                     tags[level < 0 ? 0 : level > 3 ? 3 : level]);
    if (level >= GEM_LOG_DEBUG && n > 0 && n < (int)sizeof(line)) /* to line up with traces */
        n += snprintf(line + n, sizeof(line) - (size_t)n, "[%.6f] ", (double)gem_now_ns() / 1e9);
    if (n < 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof(line) - 2)
        len = sizeof(line) - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
