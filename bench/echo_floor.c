/* The floor under a token round trip on this host, with no Python anywhere (bench/rtt_floor.py
 * builds and runs it): an 80-byte request, a 40-byte answer, over loopback TCP between C
 * processes that block in read(), as two daemons that sleep between messages would.
 *
 *   echo_floor HOPS PACE_US N SPIN
 *
 * HOPS processes in a chain (1: an echo server; 2: a relay in front of it, as hook -> pod
 * manager -> scheduler); the client sends N requests, PACE_US apart (slept, or spun when SPIN
 * is 1), and prints "p50 p90" of the round trip in microseconds.  What a daemon in any language
 * pays when it must be woken for each message is in these numbers. */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define REQ 80
#define RSP 40

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int read_all(int fd, char *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, buf + got, len - got);
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static void no_delay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int listen_any(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 1) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    *port = ntohs(a.sin_port);
    return fd;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        return -1;
    no_delay(fd);
    return fd;
}

/* One process of the chain: answers each request on `listener`'s connection, itself or (when
 * `upstream` >= 0) by asking upstream first. */
static void serve(int listener, int upstream)
{
    int fd = accept(listener, NULL, NULL);
    if (fd < 0)
        _exit(1);
    no_delay(fd);
    char req[REQ], rsp[RSP];
    while (read_all(fd, req, REQ) == 0) {
        if (upstream >= 0 && (write(upstream, req, REQ) != REQ || read_all(upstream, rsp, RSP)))
            break;
        if (upstream < 0)
            memcpy(rsp, req, RSP);
        if (write(fd, rsp, RSP) != RSP)
            break;
    }
    _exit(0);
}

/* On a failure: the processes of the chain started so far may wait in accept() for ever. */
static int stop_chain(const pid_t *kids, int n, const char *why)
{
    if (errno != 0)
        perror(why);
    else
        fprintf(stderr, "%s\n", why); /* (a peer closed: no error to name) */
    for (int h = 0; h < n; h++)
        kill(kids[h], SIGTERM);
    return 1;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: echo_floor HOPS PACE_US N SPIN\n");
        return 2;
    }
    int hops = atoi(argv[1]), n = atoi(argv[3]), spin = atoi(argv[4]);
    int64_t pace = atoll(argv[2]) * 1000;
    if (hops < 1 || hops > 4 || n < 1) {
        fprintf(stderr, "echo_floor: 1-4 hops, at least 1 request\n");
        return 2;
    }
    int upstream = -1, port = 0;
    pid_t kids[4];
    for (int h = 0; h < hops; h++) { /* the far end first */
        int listener = listen_any(&port);
        if (listener < 0 || (kids[h] = fork()) < 0)
            return stop_chain(kids, h, "echo_floor");
        if (kids[h] == 0)
            serve(listener, upstream);
        close(listener);
        if (upstream >= 0)
            close(upstream);
        upstream = connect_to(port);
        if (upstream < 0)
            return stop_chain(kids, h + 1, "echo_floor: connect");
    }
    int64_t *rtt = calloc((size_t)n, sizeof(*rtt));
    char req[REQ] = {0}, rsp[RSP];
    for (int i = -20; i < n; i++) { /* 20 to warm up */
        int64_t next = now_ns() + pace;
        if (spin)
            while (now_ns() < next) {
            }
        else if (pace > 0)
            usleep((useconds_t)(pace / 1000));
        int64_t t = now_ns();
        errno = 0;
        if (write(upstream, req, REQ) != REQ || read_all(upstream, rsp, RSP) != 0)
            return stop_chain(kids, hops, "echo_floor: the chain broke");
        if (i >= 0)
            rtt[i] = now_ns() - t;
    }
    close(upstream);
    for (int h = 0; h < hops; h++)
        waitpid(kids[h], NULL, 0);
    qsort(rtt, (size_t)n, sizeof(*rtt), cmp);
    printf("%.1f %.1f\n", (double)rtt[n / 2] / 1e3, (double)rtt[n * 9 / 10] / 1e3);
    free(rtt);
    return 0;
}
