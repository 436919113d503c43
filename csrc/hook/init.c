/* gem_init(): once per process, from every entry point (dlsym and cuGetProcAddress can run
 * before cuInit).  Reads the environment and the secret file it names, nothing else: no CUDA
 * call, no socket, no signal handler.  A pthread_atfork child handler drops inherited
 * connections, tokens and threads.
 *
 *   POD_MANAGER_IP    default 127.0.0.1
 *   POD_MANAGER_PORT  default 50052; comma-separated list, element i = pod manager of device i
 *                     (a device beyond the list cannot be used: device.c); an element
 *                     "unix:/path" is a Unix socket
 *   POD_NAME          default the host name; GEMINI_CLIENT, where set, comes first (the
 *                     Kubernetes agent sets it: a container's own env, which wins over the
 *                     device plugin's, often sets POD_NAME to the pod's name)
 *   GEMINI_SECRET_FILE  32 hex digits (whitespace around them allowed): proved to the pod
 *                     manager in a HELLO after each connect.  Read once, here; a missing or bad
 *                     file leaves the pod manager unreachable (fail closed, one line, never exit)
 *   GEMINI_HOOK_DISABLE=1   pure pass-through
 *   GEMINI_HOOK_STATS=path  per-symbol call counts written as JSON at exit
 *   GEMINI_HOOK_TICKS=0     the launch gate's hot path reads clock_gettime, not the CPU's
 *                     time-stamp counter (used only where the kernel's clocksource is "tsc")
 *   GEMINI_LOG, CU_HOOK_DEBUG   see log.c */
#include "internal.h"
#include "gemini/wire.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct gem_config gem_cfg;
_Atomic uint64_t gem_calls[GEM_SYM_COUNT];
_Atomic uint64_t gem_gate_stats[GEM_STAT_COUNT];
static const char *const gate_stat_names[GEM_STAT_COUNT] = {
    [GEM_STAT_SLOW] = "gate.slow",
    [GEM_STAT_MARKS] = "gate.marks",
    [GEM_STAT_COSTS] = "gate.costs_learnt",
    [GEM_STAT_COST_GAPS] = "gate.cost_gaps",
    [GEM_STAT_COST_FAILS] = "gate.cost_fails",
    [GEM_STAT_HOLD_COSTS] = "gate.costs_from_holds",
    [GEM_STAT_IDLE_GO] = "gate.idle_allowance",
    [GEM_STAT_HOLDS] = "gate.holds",
    [GEM_STAT_HOLD_NS] = "gate.hold_ns",
    [GEM_STAT_UNKNOWN_HOLDS] = "gate.unknown_cost_holds",
    [GEM_STAT_FETCH_EXPIRED] = "gate.fetch_expired",
    [GEM_STAT_FETCH_TAIL] = "gate.fetch_tail",
    [GEM_STAT_FETCH_BURST] = "gate.fetch_burst",
    [GEM_STAT_FETCH_CREDIT] = "gate.fetch_credit",
    [GEM_STAT_FETCH_ROOM] = "gate.fetch_room",
    [GEM_STAT_FETCH_NS] = "gate.fetch_ns",
};
int gem_stats_on;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static void parse_endpoints(const char *host, const char *ports)
{
    char buf[1024];
    copy(buf, sizeof(buf), ports);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok && gem_cfg.ndev < GEM_MAX_DEVICES;
         tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        struct gem_endpoint *ep = &gem_cfg.ep[gem_cfg.ndev];
        copy(ep->host, sizeof(ep->host), host);
        if (strncmp(tok, "unix:", 5) == 0) {
            copy(ep->unix_path, sizeof(ep->unix_path), tok + 5);
        } else {
            char *end = NULL;
            long port = strtol(tok, &end, 10);
            if (end == tok || port <= 0 || port > 65535) {
                GEM_LOG(GEM_LOG_ERROR, "bad POD_MANAGER_PORT element '%s' (ignored)", tok);
                continue;
            }
            ep->port = (int)port;
        }
        gem_cfg.ndev++;
    }
}

static int hex_value(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* 0, or -1 with the reason in gem_cfg.secret_error. */
static int parse_secret(const char *text)
{
    while (isspace((unsigned char)*text))
        text++;
    size_t len = strlen(text);
    while (len > 0 && isspace((unsigned char)text[len - 1]))
        len--;
    if (len != 2 * GEM_SECRET_LEN)
        return -1;
    for (int i = 0; i < GEM_SECRET_LEN; i++) {
        int hi = hex_value((unsigned char)text[2 * i]);
        int lo = hex_value((unsigned char)text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        gem_cfg.secret[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

static void read_secret(const char *path)
{
    char text[128]; /* longer files are wrong anyway: the read stops short and fails to parse */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = -1;
    while (fd >= 0 && (n = read(fd, text, sizeof(text) - 1)) < 0 && errno == EINTR) {
    }
    const char *why = n < 0 ? strerror(errno) : NULL;
    if (fd >= 0)
        close(fd);
    if (why == NULL) {
        text[n] = '\0';
        if (parse_secret(text) == 0) {
            gem_cfg.secret_state = GEM_SECRET_OK;
            return;
        }
        why = "not 32 hex digits";
    }
    gem_cfg.secret_state = GEM_SECRET_BAD;
    snprintf(gem_cfg.secret_error, sizeof(gem_cfg.secret_error), "GEMINI_SECRET_FILE %.200s: %s",
             path, why);
}

static void write_stats(void)
{
    if (!gem_stats_on)
        return;
    char path[300];
    snprintf(path, sizeof(path), "%s", gem_cfg.stats_path);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        GEM_LOG(GEM_LOG_WARN, "cannot write stats to %s: %s", path, strerror(errno));
        return;
    }
    fputc('{', f);
    for (int i = 0; i < GEM_SYM_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", gem_syms[i].name,
                (unsigned long long)atomic_load(&gem_calls[i]));
    for (int i = 0; i < GEM_STAT_COUNT; i++)
        fprintf(f, ", \"%s\": %llu", gate_stat_names[i],
                (unsigned long long)atomic_load(&gem_gate_stats[i]));
    fputs("}\n", f);
    fclose(f);
}

static void after_fork_child(void)
{
    gem_ipc_reset_after_fork();
    gem_token_reset_after_fork();
    gem_mem_reset_after_fork();
    if (gem_stats_on) { /* the child writes its own counts, to <path>.<pid> */
        char path[sizeof(gem_cfg.stats_path)];
        snprintf(path, sizeof(path), "%.200s.%d", gem_cfg.stats_path, (int)getpid());
        copy(gem_cfg.stats_path, sizeof(gem_cfg.stats_path), path);
        for (int i = 0; i < GEM_SYM_COUNT; i++)
            atomic_store(&gem_calls[i], 0);
        for (int i = 0; i < GEM_STAT_COUNT; i++)
            atomic_store(&gem_gate_stats[i], 0);
    }
}

/* What a new pod manager connection must learn from us: who we are (the client's process
 * list, nvml.c), then the memory we still hold after a lost one (memory.c). */
static int on_connect(int dev, int reconnect)
{
    gem_nvml_on_connect(dev);
    return gem_mem_on_connect(dev, reconnect);
}

/* What an unsolicited message from the pod manager asks, by its id (gemini/wire.h). */
static void on_notify(int dev, uint64_t conn_gen, const uint8_t *msg)
{
    if (gem_wire_rsp_id(msg) == GEM_CUT_ID)
        gem_token_on_cut(dev, msg);
    else
        gem_lease_on_recall(dev, conn_gen, msg);
}

/* The time-stamp counter serves the hot path where the kernel itself keeps time by it: then it
 * runs at a fixed rate and alike on every CPU (ticks.h).  Elsewhere (another clocksource, as
 * in some VMs, another architecture, /sys not mounted) clock_gettime does. */
static int ticks_usable(void)
{
    const char *off = getenv("GEMINI_HOOK_TICKS");
    if (gem_ticks() == 0 || (off != NULL && strcmp(off, "0") == 0))
        return 0;
    int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char buf[16] = "";
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    return n >= 3 && strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

static void init_once(void)
{
    gem_cfg.ticks = ticks_usable();
    gem_cfg.ticks_anchor.tick = gem_ticks();
    gem_cfg.ticks_anchor.ns = gem_now_ns();
    gem_log_init();
    const char *name = getenv("GEMINI_CLIENT");
    if (name == NULL || name[0] == '\0')
        name = getenv("POD_NAME");
    if (name != NULL && name[0] != '\0')
        copy(gem_cfg.pod_name, sizeof(gem_cfg.pod_name), name);
    else if (gethostname(gem_cfg.pod_name, sizeof(gem_cfg.pod_name) - 1) != 0)
        copy(gem_cfg.pod_name, sizeof(gem_cfg.pod_name), "unknown");
    const char *disable = getenv("GEMINI_HOOK_DISABLE");
    gem_cfg.disabled = disable != NULL && strcmp(disable, "1") == 0;
    const char *host = getenv("POD_MANAGER_IP");
    const char *ports = getenv("POD_MANAGER_PORT");
    parse_endpoints(host && host[0] ? host : "127.0.0.1", ports && ports[0] ? ports : "50052");
    if (gem_cfg.ndev == 0)
        parse_endpoints("127.0.0.1", "50052");
    const char *secret = getenv("GEMINI_SECRET_FILE");
    if (secret != NULL && secret[0] != '\0')
        read_secret(secret);
    const char *stats = getenv("GEMINI_HOOK_STATS");
    if (stats != NULL && stats[0] != '\0') {
        copy(gem_cfg.stats_path, sizeof(gem_cfg.stats_path), stats);
        gem_stats_on = 1;
        atexit(write_stats);
    }
    gem_ipc_on_connect(on_connect);
    gem_ipc_on_notify(on_notify);
    pthread_atfork(NULL, NULL, after_fork_child);
    GEM_LOG(GEM_LOG_DEBUG, "loaded: %d pod manager(s)%s", gem_cfg.ndev,
            gem_cfg.disabled ? ", disabled (pass-through)" : "");
}

long long gem_env_number(const char *name, long long dflt, long long lo, long long hi)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0')
        return dflt;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    while (end != NULL && isspace((unsigned char)*end))
        end++;
    if (errno == 0 && end != v && *end == '\0' && n >= lo && n <= hi)
        return n;
    GEM_LOG(GEM_LOG_WARN, "%s=%s is not a whole number from %lld to %lld; using %lld", name, v,
            lo, hi, dflt);
    return dflt;
}

void gem_init(void)
{
    pthread_once(&once, init_once);
}

void gem_sleep_ns(int64_t ns)
{
    struct timespec ts = {.tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
