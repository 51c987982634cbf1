/* B6's open-loop load on an exact schedule: request i leaves at t0 + i/R on connection
 * i % C (HTTP/1.1 keep-alive, one request in flight per connection), so 1000 rps over 16
 * connections is one request every millisecond, never a burst. A request whose connection
 * is still busy at its time waits and its latency counts from its scheduled time (no
 * coordinated omission). One line per request, as h2load's --log-file writes them:
 * "<start us since the epoch>\t<status>\t<latency us>".
 *
 *   openloop <ipv4> <port> <host header> <rps> <connections> <requests> <log file>
 *
 * Built by bench/mtls/grid.py with the machine's cc; Linux only (epoll, timerfd). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    long busy;       /* index of the request in flight, -1 if idle */
    long queued[64]; /* requests waiting for this connection, in order */
    int nqueued;
    char buf[65536];
    size_t len;
} Conn;

static int64_t now_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static int64_t *sched_ns, *done_ns, *sent_real_us;
static int *status;
static char request[512];
static size_t request_len;

static void send_request(Conn *c, long i) {
    c->busy = i;
    sent_real_us[i] = now_ns(CLOCK_REALTIME) / 1000;
    if (write(c->fd, request, request_len) != (ssize_t)request_len) die("write");
}

/* A whole response at the front of c->buf: its length, or 0 if incomplete. */
static size_t response_length(Conn *c, int *code) {
    c->buf[c->len < sizeof c->buf ? c->len : sizeof c->buf - 1] = 0;
    char *end = strstr(c->buf, "\r\n\r\n");
    if (!end) return 0;
    size_t head = (size_t)(end - c->buf) + 4;
    long body = 0;
    char *cl = strcasestr(c->buf, "\r\ncontent-length:");
    if (cl && cl < end) body = strtol(cl + 17, NULL, 10);
    if (c->len < head + (size_t)body) return 0;
    *code = atoi(c->buf + 9);
    return head + (size_t)body;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: openloop ip port host rps connections requests log\n");
        return 2;
    }
    const char *ip = argv[1], *host = argv[3], *log_path = argv[7];
    int port = atoi(argv[2]), nconn = atoi(argv[5]);
    double rps = atof(argv[4]);
    long total = atol(argv[6]);
    request_len = (size_t)snprintf(request, sizeof request,
                                   "GET / HTTP/1.1\r\nHost: %s\r\nUser-Agent: openloop\r\n\r\n", host);
    sched_ns = calloc((size_t)total, sizeof *sched_ns);
    done_ns = calloc((size_t)total, sizeof *done_ns);
    sent_real_us = calloc((size_t)total, sizeof *sent_real_us);
    status = calloc((size_t)total, sizeof *status);
    Conn *conns = calloc((size_t)nconn, sizeof *conns);
    int ep = epoll_create1(0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &addr.sin_addr) != 1) die("address");
    for (int k = 0; k < nconn; k++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[k] = (Conn){.fd = fd, .busy = -1};
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)k};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
    int tfd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
    epoll_ctl(ep, EPOLL_CTL_ADD, tfd, &tev);
    int64_t t0 = now_ns(CLOCK_MONOTONIC) + 10000000; /* 10 ms from now */
    for (long i = 0; i < total; i++) sched_ns[i] = t0 + (int64_t)(i * 1e9 / rps);
    long next = 0, finished = 0;
    while (finished < total) {
        /* send everything due, then arm the timer for the next one */
        int64_t t = now_ns(CLOCK_MONOTONIC);
        while (next < total && sched_ns[next] <= t) {
            Conn *c = &conns[next % nconn];
            if (c->busy < 0) send_request(c, next);
            else if (c->nqueued < 64) c->queued[c->nqueued++] = next;
            else die("connection backlog");
            next++;
        }
        if (next < total) {
            struct itimerspec when = {0};
            when.it_value.tv_sec = sched_ns[next] / 1000000000;
            when.it_value.tv_nsec = sched_ns[next] % 1000000000;
            timerfd_settime(tfd, TFD_TIMER_ABSTIME, &when, NULL);
        }
        struct epoll_event events[64];
        int n = epoll_wait(ep, events, 64, 1000);
        if (n < 0 && errno != EINTR) die("epoll_wait");
        for (int e = 0; e < n; e++) {
            if (events[e].data.u32 == UINT32_MAX) {
                uint64_t fired;
                if (read(tfd, &fired, sizeof fired) < 0 && errno != EAGAIN) die("timerfd");
                continue;
            }
            Conn *c = &conns[events[e].data.u32];
            ssize_t got = read(c->fd, c->buf + c->len, sizeof c->buf - 1 - c->len);
            if (got <= 0) die("read (connection closed)");
            c->len += (size_t)got;
            int code;
            size_t used;
            while (c->busy >= 0 && (used = response_length(c, &code)) > 0) {
                done_ns[c->busy] = now_ns(CLOCK_MONOTONIC);
                status[c->busy] = code;
                finished++;
                memmove(c->buf, c->buf + used, c->len - used);
                c->len -= used;
                c->busy = -1;
                if (c->nqueued > 0) {
                    long i = c->queued[0];
                    memmove(c->queued, c->queued + 1, (size_t)--c->nqueued * sizeof(long));
                    send_request(c, i);
                }
            }
        }
    }
    FILE *log = fopen(log_path, "w");
    if (!log) die("log");
    for (long i = 0; i < total; i++)
        fprintf(log, "%lld\t%d\t%lld\n", (long long)sent_real_us[i], status[i],
                (long long)((done_ns[i] - sched_ns[i]) / 1000));
    fclose(log);
    return 0;
}
