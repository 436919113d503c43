/* The connection to the pod manager: one persistent TCP (or Unix) connection per
 * (process, device), fixed 80-byte requests and 40-byte responses (gemini/wire.h).
 *
 * Several threads may have a request outstanding on one connection (a launch waiting for a
 * token must not hold up an allocation in another thread): each caller writes its frame, then
 * one caller at a time reads responses and hands each to the waiter whose request id it echoes
 * (leader/followers).  No lock is held across a blocking read.
 *
 * Failures never end the application: a call retries with backoff until the pod manager
 * answers (fail closed), printing one line when it becomes unreachable and one when it is back.
 * Writes use MSG_NOSIGNAL, so a dead peer cannot raise SIGPIPE.
 *
 * This file carries messages and nothing else: what a new connection means for the process's
 * memory and flags is the business of the on-connect callback (gem_ipc_on_connect), which runs
 * before the first request on every connection; what an unsolicited message from the pod
 * manager (a negative id, which says its kind: wire.h) asks is the business of the notify
 * callback (gem_ipc_on_notify).  Of each kind, the latest not yet handed on is kept.
 *
 * Unsolicited messages must be read even by a process that makes no request: one that sleeps,
 * waits for input, or runs long kernels on a token it holds, while a neighbour in its client
 * needs the bytes of its unspent lease.  So each connection has a watcher thread.  While
 * requests are out, their own threads read as above (no hand-over: replies cost no more than
 * before) and note any unsolicited message for the watcher; while none is out, the watcher
 * polls the socket and reads what comes.  The notify callback runs on the watcher, never on a
 * caller's thread (a launch waiting for its token is never held up by it), with no lock held.
 * The watcher polls its own duplicate of the socket, so that nobody closes the descriptor it
 * waits on; a dropped connection is shut down, which wakes it.  A reader that notes a message
 * wakes the watcher through an eventfd (its poll may have seen the bytes come and go). */
#include "internal.h"
#include "gemini/jitter.h"
#include "gemini/wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

struct waiter {
    struct waiter *next;
    int32_t id;
    int fd;   /* the connection the request went out on */
    int done; /* 1: answered, -1: connection lost */
    uint8_t rsp[GEM_RSP_MSG_LEN];
};

/* The kinds of unsolicited message, by id: GEM_NOTIFY_ID (-1) and GEM_CUT_ID (-2). */
#define NOTE_KINDS 2
#define NOTE_KIND(id) (-((id) + 1)) /* (id < 0; no overflow at INT32_MIN) */

struct conn {
    pthread_mutex_t m;
    pthread_cond_t cv;
    pthread_cond_t idle_cv; /* the watcher waits here for work or an idle connection */
    int fd;
    uint64_t gen; /* connections made so far: names the one in fd */
    int64_t since_ns; /* when the connection in fd was made (the watcher's backoff) */
    int connecting;
    int reading;
    int down_logged;
    int ever_connected;
    int announce_pending; /* a new connection: run the on-connect callback before a request */
    int announcing;       /* the callback runs: other threads' requests wait for it */
    int32_t next_id;
    struct waiter *waiters;
    int watcher_started;
    int watch_fd;         /* the watcher's duplicate of fd (only the watcher opens/closes it) */
    uint64_t watch_gen;   /* the connection watch_fd duplicates */
    int wake_fd;          /* eventfd: a message was noted for the watcher */
    /* Unsolicited messages that wait for the watcher, one of each kind (by id: NOTE_KIND). */
    int note_pending[NOTE_KINDS];
    uint64_t note_gen[NOTE_KINDS]; /* the connection each came on */
    uint8_t note[NOTE_KINDS][GEM_RSP_MSG_LEN];
};

static struct conn conns[GEM_MAX_DEVICES];
static pthread_once_t conns_once = PTHREAD_ONCE_INIT;
static _Atomic(gem_ipc_connect_fn) on_connect;
static _Atomic(gem_ipc_notify_fn) on_notify;

void gem_ipc_on_connect(gem_ipc_connect_fn fn)
{
    atomic_store(&on_connect, fn);
}

void gem_ipc_on_notify(gem_ipc_notify_fn fn)
{
    atomic_store(&on_notify, fn);
}

static void conns_init(void)
{
    for (int i = 0; i < GEM_MAX_DEVICES; i++) {
        pthread_mutex_init(&conns[i].m, NULL);
        pthread_cond_init(&conns[i].cv, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* (the watcher's backoff) */
        pthread_cond_init(&conns[i].idle_cv, &ca);
        pthread_condattr_destroy(&ca);
        conns[i].fd = -1;
        conns[i].gen = 0;
        conns[i].since_ns = 0;
        conns[i].connecting = 0;
        conns[i].reading = 0;
        conns[i].down_logged = 0;
        conns[i].ever_connected = 0;
        conns[i].announce_pending = 0;
        conns[i].announcing = 0;
        conns[i].next_id = 0;
        conns[i].waiters = NULL;
        conns[i].watcher_started = 0;
        conns[i].watch_fd = -1;
        conns[i].watch_gen = 0;
        conns[i].wake_fd = -1;
        for (int k = 0; k < NOTE_KINDS; k++) {
            conns[i].note_pending[k] = 0;
            conns[i].note_gen[k] = 0;
        }
    }
}

void gem_ipc_reset_after_fork(void)
{
    pthread_once(&conns_once, conns_init);
    /* The parent's connection stays open in the parent; the child has no watcher (threads do
     * not survive fork) and must not share the parent's eventfd. */
    for (int i = 0; i < GEM_MAX_DEVICES; i++) {
        if (conns[i].fd >= 0)
            close(conns[i].fd);
        if (conns[i].watch_fd >= 0)
            close(conns[i].watch_fd);
        if (conns[i].wake_fd >= 0)
            close(conns[i].wake_fd);
    }
    conns_init();
}

static const char *where(int dev, char *buf, size_t cap)
{
    const struct gem_endpoint *ep = &gem_cfg.ep[dev];
    if (ep->unix_path[0])
        snprintf(buf, cap, "unix:%s", ep->unix_path);
    else
        snprintf(buf, cap, "%s:%d", ep->host, ep->port);
    return buf;
}

static int open_socket(int dev)
{
    const struct gem_endpoint *ep = &gem_cfg.ep[dev];
    int fd;
    if (ep->unix_path[0]) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", ep->unix_path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", ep->port);
    int rc = getaddrinfo(ep->host, port, &hints, &res);
    if (rc != 0) {
        errno = EHOSTUNREACH;
        return -1;
    }
    fd = -1;
    int e = ECONNREFUSED;
    for (struct addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            e = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd >= 0) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    errno = e;
    return fd;
}

static int write_all(int fd, const uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int read_all(int fd, uint8_t *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = recv(fd, buf, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* With a secret, the first message on a fresh connection proves it.  Nobody else can use fd
 * yet (c->fd is still -1 and c->connecting holds the others back), so the reply is read right
 * here.  NULL when admitted, else why not. */
static const char *say_hello(int fd)
{
    if (gem_cfg.secret_state != GEM_SECRET_OK)
        return NULL;
    uint8_t req[GEM_REQ_MSG_LEN], rsp[GEM_RSP_MSG_LEN];
    if (gem_wire_encode_hello(req, gem_cfg.pod_name, 0, gem_cfg.secret) < 0)
        return "POD_NAME is empty or too long";
    /* A peer that never answers must not hang the first CUDA call: a bounded wait, then
     * the usual retry. */
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (write_all(fd, req, sizeof(req)) != 0 || read_all(fd, rsp, sizeof(rsp)) != 0)
        return "no answer to our HELLO: an old pod manager, or not one at all";
    struct timeval forever = {0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &forever, sizeof(forever));
    if (gem_wire_rsp_status(rsp) != GEM_STATUS_OK)
        return "it refused the secret of GEMINI_SECRET_FILE";
    return NULL;
}

static void start_watcher(struct conn *c, int dev);

/* Wake the watcher: work for it, or the connection may have become idle (c->m held). */
static void wake_watcher(struct conn *c, int note)
{
    if (note && c->wake_fd >= 0) { /* it may be in poll(), not waiting on idle_cv */
        uint64_t one = 1;
        ssize_t n = write(c->wake_fd, &one, sizeof(one));
        (void)n; /* non-blocking; a full counter is a pending wake already */
    }
    pthread_cond_signal(&c->idle_cv);
}

/* Called with c->m held; drops it while connecting.  Returns 0 when c->fd is usable. */
static int ensure_connected(struct conn *c, int dev)
{
    while (c->fd < 0 && c->connecting)
        pthread_cond_wait(&c->cv, &c->m);
    if (c->fd >= 0)
        return 0;
    c->connecting = 1;
    pthread_mutex_unlock(&c->m);
    /* A bad secret file fails closed: the pod manager would refuse us anyway. */
    const char *why = gem_cfg.secret_state == GEM_SECRET_BAD ? gem_cfg.secret_error : NULL;
    int fd = why == NULL ? open_socket(dev) : -1;
    int err = errno;
    if (fd >= 0 && (why = say_hello(fd)) != NULL) {
        close(fd);
        fd = -1;
    }
    pthread_mutex_lock(&c->m);
    c->connecting = 0;
    char buf[160];
    if (fd < 0) {
        if (!c->down_logged)
            GEM_LOG(GEM_LOG_ERROR, "pod manager %s unreachable (%s); waiting and retrying",
                    where(dev, buf, sizeof(buf)), why != NULL ? why : strerror(err));
        c->down_logged = 1;
    } else {
        if (c->down_logged)
            GEM_LOG(GEM_LOG_WARN, "pod manager %s reachable again", where(dev, buf, sizeof(buf)));
        c->down_logged = 0;
        c->fd = fd;
        c->gen++;
        c->since_ns = gem_now_ns();
        c->announce_pending = 1 + c->ever_connected; /* 2: after a lost one */
        c->ever_connected = 1;
        start_watcher(c, dev);
        wake_watcher(c, 0);
    }
    pthread_cond_broadcast(&c->cv);
    return fd < 0 ? -1 : 0;
}

/* Close a broken connection once.  While another thread is blocked reading it, only shut it
 * down (that reader wakes up and closes it), so an fd number is never closed under a reader.
 * Always shut down: the watcher's duplicate keeps the socket open and its poll() asleep. */
static void drop_connection(struct conn *c, int fd, int i_am_reader)
{
    if (c->fd == fd) {
        c->fd = -1;
        for (struct waiter *w = c->waiters; w != NULL; w = w->next)
            if (w->fd == fd && !w->done)
                w->done = -1;
        shutdown(fd, SHUT_RDWR);
        if (!c->reading || i_am_reader)
            close(fd);
        wake_watcher(c, 0);
    } else if (i_am_reader) {
        close(fd); /* dropped by a writer while we were reading: ours to close */
    }
    pthread_cond_broadcast(&c->cv);
}

static void unlink_waiter(struct conn *c, struct waiter *me)
{
    for (struct waiter **p = &c->waiters; *p != NULL; p = &(*p)->next)
        if (*p == me) {
            *p = me->next;
            break;
        }
    if (c->waiters == NULL)
        wake_watcher(c, 0); /* no request out: the watcher reads from now on */
}

/* A frame read from fd (c->m held): a reply goes to the waiter whose id it echoes; an
 * unsolicited message is noted for the watcher, if it came on the connection still in use
 * (one from a dropped connection asks nothing any more).  -1: a reply to no request, which
 * a pod manager never sends (every request waits for its reply on the connection it went
 * on): the stream is out of step, and every reply after it would be read askew. */
static int deliver(struct conn *c, int fd, const uint8_t *buf)
{
    int32_t id = gem_wire_rsp_id(buf);
    if (id < 0) {
        /* (a kind a newer pod manager sends, or from a dropped connection: it asks nothing) */
        if (c->fd != fd || NOTE_KIND(id) >= NOTE_KINDS)
            return 0;
        int k = NOTE_KIND(id);
        memcpy(c->note[k], buf, GEM_RSP_MSG_LEN);
        c->note_gen[k] = c->gen;
        c->note_pending[k] = 1; /* several before the watcher runs: the latest stands */
        wake_watcher(c, 1);
        return 0;
    }
    for (struct waiter *w = c->waiters; w != NULL; w = w->next)
        if (w->id == id && w->done == 0) {
            memcpy(w->rsp, buf, GEM_RSP_MSG_LEN);
            w->done = 1;
            return 0;
        }
    return -1;
}

static void log_lost(struct conn *c, int dev)
{
    if (c->down_logged)
        return;
    char where_buf[160];
    GEM_LOG(GEM_LOG_ERROR, "lost the pod manager %s; reconnecting",
            where(dev, where_buf, sizeof(where_buf)));
    c->down_logged = 1;
}

/* Read one frame with the lock dropped (c->reading: nobody else reads meanwhile), then drop
 * the connection or hand the frame out, and wake the threads waiting on it.  c->m held on
 * entry and on return; returns read_all's result. */
static int read_one(struct conn *c, int fd)
{
    c->reading = 1;
    pthread_mutex_unlock(&c->m);
    uint8_t buf[GEM_RSP_MSG_LEN];
    int rc = read_all(fd, buf, sizeof(buf));
    pthread_mutex_lock(&c->m);
    c->reading = 0;
    if (rc == 0 && deliver(c, fd, buf) != 0) {
        GEM_LOG(GEM_LOG_ERROR, "the pod manager sent a reply to no request (id %d): out of "
                "step, so this connection is dropped", (int)gem_wire_rsp_id(buf));
        rc = -1;
    }
    if (rc != 0)
        drop_connection(c, fd, 1);
    pthread_cond_broadcast(&c->cv);
    return rc;
}

/* The connection whose on-connect callback this thread runs (0: none): the callback's own
 * requests go on it and on no other (a new one would run the callback again, within it). */
static __thread uint64_t announcing_gen;

/* A new connection's on-connect callback, before anything else on it: the other threads'
 * requests wait meanwhile (c->announcing), or a lease asked for there was granted against a
 * count without this process's bytes.  c->m held on entry and on return (dropped for the
 * callback).  The connection may be gone after it (the caller backs off). */
static void announce(struct conn *c, int dev)
{
    int reconnect = c->announce_pending == 2;
    uint64_t gen = c->gen;
    c->announce_pending = 0;
    c->announcing = 1;
    gem_ipc_connect_fn fn = atomic_load(&on_connect);
    pthread_mutex_unlock(&c->m);
    announcing_gen = gen;
    int again = fn != NULL && fn(dev, reconnect) != 0;
    announcing_gen = 0;
    pthread_mutex_lock(&c->m);
    c->announcing = 0;
    if (again && c->fd >= 0 && c->gen == gen && !c->announce_pending)
        c->announce_pending = 1 + reconnect; /* (the next request tries again) */
    pthread_cond_broadcast(&c->cv);
    pthread_cond_signal(&c->idle_cv);
}

#define REJOIN_FIRST_NS 50000000LL
#define REJOIN_MAX_NS 1000000000LL
#define REJOIN_LIVED_NS 1000000000LL

/* A state for gem_jitter_ns, its own to each process: the hooks of one pod manager lost it at
 * one instant (a forked child seeds its own where its watcher or call starts). */
static uint64_t jitter_seed(void)
{
    return (uint64_t)gem_now_ns() ^ ((uint64_t)getpid() << 32);
}

/* The watcher's pause before it connects again (c->m held): 50 ms, doubling to 1 s, each drawn
 * from the upper half of its step (jitter.h).  A request or a new connection ends it early. */
static void rejoin_backoff(struct conn *c, int64_t *backoff_ns, uint64_t *jitter)
{
    struct timespec ts;
    gem_timespec_at(&ts, gem_now_ns() + gem_jitter_ns(*backoff_ns, jitter));
    pthread_cond_timedwait(&c->idle_cv, &c->m, &ts);
    *backoff_ns = *backoff_ns * 2 > REJOIN_MAX_NS ? REJOIN_MAX_NS : *backoff_ns * 2;
}

/* Is there something (a message, or the end) to read on fd right now?  Never blocks. */
static int readable_now(int fd)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* The watcher of conns[dev] (see the head of this file).  Runs for the life of the process. */
static void *watch_main(void *arg)
{
    int dev = (int)(intptr_t)arg;
    struct conn *c = &conns[dev];
    int64_t backoff_ns = REJOIN_FIRST_NS;
    uint64_t jitter = jitter_seed();
    uint64_t lost_gen = 0; /* the connection whose loss the backoff counts from */
    pthread_mutex_lock(&c->m);
    for (;;) {
        int k = 0;
        while (k < NOTE_KINDS && !c->note_pending[k])
            k++;
        if (k < NOTE_KINDS) {
            uint8_t note[GEM_RSP_MSG_LEN];
            memcpy(note, c->note[k], sizeof(note));
            uint64_t gen = c->note_gen[k];
            c->note_pending[k] = 0;
            gem_ipc_notify_fn fn = atomic_load(&on_notify);
            pthread_mutex_unlock(&c->m);
            if (fn != NULL)
                fn(dev, gen, note);
            pthread_mutex_lock(&c->m);
            continue;
        }
        if (c->watch_fd >= 0 && (c->fd < 0 || c->watch_gen != c->gen)) {
            close(c->watch_fd); /* a duplicate of a connection that is gone */
            c->watch_fd = -1;
        }
        if (c->fd < 0 && c->waiters == NULL && !c->reading) {
            /* Lost while no request is out: connected again now, not at the next request, so
             * that a new pod manager hears at once what this process holds (the on-connect
             * callback).  An idle process that kept its memory claimed it only when it next
             * asked: meanwhile its neighbours were let allocate its bytes too.  A connection
             * that lived a second starts the backoff over; one dropped at once does not. */
            if (c->gen != lost_gen) {
                lost_gen = c->gen;
                if (gem_now_ns() - c->since_ns > REJOIN_LIVED_NS)
                    backoff_ns = REJOIN_FIRST_NS;
            }
            rejoin_backoff(c, &backoff_ns, &jitter);
            if (c->fd < 0 && c->waiters == NULL && !c->reading)
                (void)ensure_connected(c, dev); /* (announced below, on the next turn) */
            continue;
        }
        if (c->fd >= 0 && c->announce_pending && !c->announcing && c->waiters == NULL &&
            !c->reading) {
            announce(c, dev); /* (lost during it: the branch above connects again, paced) */
            if (c->fd >= 0 && c->announce_pending) /* refused (a pod manager that does not know */
                rejoin_backoff(c, &backoff_ns, &jitter); /* its limit yet): paced too */
            continue;
        }
        if (c->fd < 0 || c->waiters != NULL || c->reading) {
            pthread_cond_wait(&c->idle_cv, &c->m); /* the requests' threads read meanwhile */
            continue;
        }
        if (c->watch_fd < 0) {
            c->watch_fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
            c->watch_gen = c->gen;
            if (c->watch_fd < 0) { /* out of descriptors: requests still read their replies */
                pthread_cond_wait(&c->idle_cv, &c->m);
                continue;
            }
        }
        int fd = c->fd;
        uint64_t gen = c->gen;
        int wake_fd = c->wake_fd;
        struct pollfd p[2] = {{.fd = c->watch_fd, .events = POLLIN},
                              {.fd = wake_fd, .events = POLLIN}};
        pthread_mutex_unlock(&c->m);
        int n = poll(p, wake_fd >= 0 ? 2 : 1, -1);
        if (n > 0 && wake_fd >= 0 && (p[1].revents & POLLIN)) {
            uint64_t count;
            ssize_t r = read(wake_fd, &count, sizeof(count)); /* reset the eventfd */
            (void)r;
        }
        pthread_mutex_lock(&c->m);
        /* Read only on the same connection, only if nobody else will, and only what is there
         * (the bytes poll() saw may have gone to a request's thread meanwhile). */
        if (n <= 0 || p[0].revents == 0 || c->fd != fd || c->gen != gen || c->waiters != NULL ||
            c->reading || !readable_now(fd))
            continue;
        if (read_one(c, fd) != 0)
            log_lost(c, dev);
    }
    return NULL;
}

/* One watcher per connection slot, started with its first connection (c->m held). */
static void start_watcher(struct conn *c, int dev)
{
    if (c->watcher_started)
        return;
    c->watcher_started = 1; /* one try: without it, recalls wait for this process's requests */
    c->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    int rc = gem_thread_start(watch_main, (void *)(intptr_t)dev);
    if (rc != 0)
        GEM_LOG(GEM_LOG_WARN, "cannot start the pod manager watcher (%s): lease recalls are "
                "answered at this process's next request only", strerror(rc));
}

typedef int (*encode_fn)(uint8_t *buf, int32_t id, const void *arg);

/* attempt()'s pin for the connection open now, whichever it is (connection numbers count up
 * from 1 and never reach it). */
#define PIN_OPEN UINT64_MAX

/* One attempt: 0 answered, -1 connection problem (the caller backs off and retries).
 * pin != 0: only on connection number `pin` (or PIN_OPEN), and never a new one (-1 if it is
 * gone, or not yet announced). */
static int attempt(int dev, encode_fn encode, const void *arg, uint8_t *rsp, uint64_t pin)
{
    pthread_once(&conns_once, conns_init);
    struct conn *c = &conns[dev];
    pthread_mutex_lock(&c->m);
    if (pin == 0 && announcing_gen != 0)
        pin = announcing_gen; /* (the on-connect callback's request) */
    while (c->announcing && announcing_gen == 0)
        pthread_cond_wait(&c->cv, &c->m); /* another thread tells the new one about us */
    if (pin == PIN_OPEN && c->fd >= 0)
        pin = c->gen;
    if (pin != 0 && (c->fd < 0 || c->gen != pin || c->announce_pending)) {
        pthread_mutex_unlock(&c->m);
        return -1;
    }
    if (ensure_connected(c, dev) != 0) {
        pthread_mutex_unlock(&c->m);
        return -1;
    }
    while (c->announcing && announcing_gen == 0) /* (begun while we waited to connect) */
        pthread_cond_wait(&c->cv, &c->m);
    if (pin != 0 && (c->fd < 0 || c->gen != pin)) {
        pthread_mutex_unlock(&c->m);
        return -1;
    }
    if (c->fd >= 0 && c->announce_pending && announcing_gen == 0) {
        uint64_t gen = c->gen;
        announce(c, dev);
        if (c->fd < 0 || c->gen != gen) { /* lost during it: the caller backs off, retries */
            pthread_mutex_unlock(&c->m);
            return -1;
        }
    }
    if (c->fd < 0) {
        pthread_mutex_unlock(&c->m);
        return -1;
    }
    struct waiter me = {.id = c->next_id};
    c->next_id = c->next_id == INT32_MAX ? 0 : c->next_id + 1; /* (never negative: unsolicited) */
    uint8_t req[GEM_REQ_MSG_LEN];
    if (encode(req, me.id, arg) < 0) {
        pthread_mutex_unlock(&c->m);
        GEM_LOG(GEM_LOG_ERROR, "POD_NAME '%s' is empty or longer than %d bytes",
                gem_cfg.pod_name, GEM_MAX_NAME_LEN);
        return -1;
    }
    int fd = c->fd;
    me.fd = fd;
    me.next = c->waiters;
    c->waiters = &me;
    /* Short write of 80 bytes to a local peer: done under the connection lock so that frames
     * from several threads never interleave. */
    if (write_all(fd, req, sizeof(req)) != 0)
        drop_connection(c, fd, 0);
    while (me.done == 0) {
        if (c->reading) {
            pthread_cond_wait(&c->cv, &c->m);
            continue;
        }
        read_one(c, fd);
    }
    unlink_waiter(c, &me);
    if (me.done < 0)
        log_lost(c, dev);
    pthread_mutex_unlock(&c->m);
    if (me.done < 0)
        return -1;
    memcpy(rsp, me.rsp, sizeof(me.rsp));
    return 0;
}

/* What a refusal means to the program's user. */
static const char *refusal(int32_t status)
{
    switch (status) {
    case GEM_STATUS_UNKNOWN_CLIENT:
        return "this client is not in the scheduler's config: waiting until it is";
    case GEM_STATUS_CLIENT_REMOVED:
        return "this client was removed from the config: waiting until it is added back";
    case GEM_STATUS_BAD_REQUEST:
        return "the request was bad; retrying";
    default:
        return "retrying";
    }
}

/* Retries until answered with status OK.  Backoff 50 ms doubling to 1 s, jittered as the
 * watcher's (jitter.h).  A refusal is said
 * once (then in the debug log): a removed client's process wrote the same line every second,
 * for as long as it waited, and none of them said why. */
static void call(int dev, encode_fn encode, const void *arg, uint8_t *rsp)
{
    int64_t backoff = 50000000;
    uint64_t jitter = 0; /* seeded at the first retry: most calls are answered at once */
    int32_t said = GEM_STATUS_OK;
    for (;;) {
        if (attempt(dev, encode, arg, rsp, 0) == 0) {
            int32_t status = gem_wire_rsp_status(rsp);
            if (status == GEM_STATUS_OK)
                return;
            GEM_LOG(status == said ? GEM_LOG_DEBUG : GEM_LOG_ERROR,
                    "pod manager refused a request (status %d): %s", (int)status,
                    refusal(status));
            said = status;
        }
        if (jitter == 0)
            jitter = jitter_seed();
        gem_sleep_ns(gem_jitter_ns(backoff, &jitter));
        backoff = backoff * 2 > 1000000000 ? 1000000000 : backoff * 2;
    }
}

struct quota_arg {
    double overuse_ms, burst_ms, gpu_wait_ms;
    float run_ms;
    uint32_t run_launches;
};
struct update_arg {
    uint64_t bytes;
    int is_allocate;
};

static int enc_quota(uint8_t *buf, int32_t id, const void *arg)
{
    const struct quota_arg *a = arg;
    return gem_wire_encode_quota(buf, gem_cfg.pod_name, id, a->overuse_ms, a->burst_ms,
                                 a->gpu_wait_ms, a->run_ms, a->run_launches);
}

static int enc_limit(uint8_t *buf, int32_t id, const void *arg)
{
    (void)arg;
    return gem_wire_encode_mem_limit(buf, gem_cfg.pod_name, id);
}

static int enc_update(uint8_t *buf, int32_t id, const void *arg)
{
    const struct update_arg *a = arg;
    return gem_wire_encode_mem_update(buf, gem_cfg.pod_name, id, a->bytes, a->is_allocate);
}

static int enc_process(uint8_t *buf, int32_t id, const void *arg)
{
    /* (this channel hands cuts on: NOTE_KINDS) */
    return gem_wire_encode_process(buf, gem_cfg.pod_name, id, (int32_t)getpid(),
                                   *(const int32_t *)arg, GEM_PROCESS_READS_CUTS);
}

int gem_ipc_quota(int dev, double overuse_ms, double burst_ms, double gpu_wait_ms,
                  float run_ms, uint32_t run_launches, double *quota_ms, uint32_t *flags,
                  uint32_t *sharers, double *sent_at)
{
    struct quota_arg a = {overuse_ms, burst_ms, gpu_wait_ms, run_ms, run_launches};
    uint8_t rsp[GEM_RSP_MSG_LEN];
    call(dev, enc_quota, &a, rsp);
    *quota_ms = gem_wire_rsp_quota_ms(rsp);
    *flags = gem_wire_rsp_quota_flags(rsp);
    *sharers = gem_wire_rsp_quota_sharers(rsp);
    *sent_at = gem_wire_rsp_quota_sent_at(rsp);
    return 0;
}

int gem_ipc_mem_limit(int dev, uint64_t *used, uint64_t *limit, uint64_t *flags)
{
    uint8_t rsp[GEM_RSP_MSG_LEN];
    call(dev, enc_limit, NULL, rsp);
    gem_wire_rsp_mem_limit(rsp, used, limit);
    *flags = gem_wire_rsp_mem_flags(rsp);
    return 0;
}

int gem_ipc_mem_limit_once(int dev, uint64_t *used, uint64_t *limit, uint64_t *flags)
{
    uint8_t rsp[GEM_RSP_MSG_LEN];
    if (attempt(dev, enc_limit, NULL, rsp, 0) != 0 ||
        gem_wire_rsp_status(rsp) != GEM_STATUS_OK)
        return -1;
    gem_wire_rsp_mem_limit(rsp, used, limit);
    *flags = gem_wire_rsp_mem_flags(rsp);
    return 0;
}

int gem_ipc_process_once(int dev, int32_t index, int32_t *count, int32_t *pid, uint64_t *bytes)
{
    uint8_t rsp[GEM_RSP_MSG_LEN];
    if (attempt(dev, enc_process, &index, rsp, 0) != 0 ||
        gem_wire_rsp_status(rsp) != GEM_STATUS_OK)
        return -1;
    gem_wire_rsp_process(rsp, count, pid, bytes);
    return 0;
}

/* One MEM_UPDATE on connection `pin` (attempt's): -1 not answered, or refused as a whole. */
static int update_once(int dev, uint64_t bytes, int is_allocate, int *verdict, uint64_t pin)
{
    struct update_arg a = {bytes, is_allocate};
    uint8_t rsp[GEM_RSP_MSG_LEN];
    if (attempt(dev, enc_update, &a, rsp, pin) != 0 || gem_wire_rsp_status(rsp) != GEM_STATUS_OK)
        return -1;
    *verdict = gem_wire_rsp_verdict(rsp);
    return 0;
}

int gem_ipc_mem_update_once(int dev, uint64_t bytes, int is_allocate, int *verdict)
{
    return update_once(dev, bytes, is_allocate, verdict, 0);
}

int gem_ipc_mem_update_open(int dev, uint64_t bytes, int is_allocate, int *verdict)
{
    return update_once(dev, bytes, is_allocate, verdict, PIN_OPEN);
}

int gem_ipc_mem_update(int dev, uint64_t bytes, int is_allocate, int *verdict)
{
    struct update_arg a = {bytes, is_allocate};
    uint8_t rsp[GEM_RSP_MSG_LEN];
    call(dev, enc_update, &a, rsp);
    *verdict = gem_wire_rsp_verdict(rsp);
    return 0;
}

struct recall_arg {
    int dev;
    gem_ipc_take_fn take;
    uint64_t *taken;
};

static int enc_recall(uint8_t *buf, int32_t id, const void *arg)
{
    const struct recall_arg *a = arg;
    *a->taken = a->take(a->dev); /* under the connection's lock: what it granted */
    return gem_wire_encode_recall(buf, gem_cfg.pod_name, id, *a->taken);
}

int gem_ipc_recall_once(int dev, uint64_t conn_gen, gem_ipc_take_fn take, uint64_t *taken)
{
    struct recall_arg a = {dev, take, taken};
    uint8_t rsp[GEM_RSP_MSG_LEN];
    *taken = 0;
    if (attempt(dev, enc_recall, &a, rsp, conn_gen) != 0)
        return -1;
    return gem_wire_rsp_status(rsp) == GEM_STATUS_OK ? 0 : -1;
}
