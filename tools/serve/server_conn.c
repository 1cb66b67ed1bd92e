/* server_conn.c - `hamer serve`: one record per open connection, and the
 * watchdog thread that enforces what libmicrohttpd cannot:
 *
 *   - fixed deadlines. libmicrohttpd's connection timeout is an idle
 *     timeout: every byte restarts it, so a client trickling one header
 *     byte a second holds its connection (and its fd) forever. Here the
 *     request line and headers must be complete header_timeout_s after the
 *     connection opened (or after the previous answer, for keep-alive), and
 *     the body timeout_s after the headers; past that the socket is shut
 *     down, which libmicrohttpd sees as a dead peer and cleans up at once.
 *   - clients gone. A half-closed upload is never read again by
 *     libmicrohttpd, and a suspended connection (its request queued or
 *     running) is not polled at all, so a client that closed would be
 *     noticed only at the idle timeout, holding its body (up to
 *     --max-body-mb) and its inference. The watchdog polls those sockets
 *     for the peer's FIN and then frees the upload at once, or cancels the
 *     job nobody waits for.
 *
 * The records live in one table allocated at start (as many as
 * --max-connections plus slack), taken and returned under s->cmu by the
 * libmicrohttpd notify callback: nothing is allocated per connection or
 * request. The watchdog acts on a socket only under s->cmu and only while
 * its record is live; the CLOSED notification (which libmicrohttpd sends
 * before it closes the fd) takes the same lock, so the watchdog can never
 * shut down an fd number that was closed and reused by another connection.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include "serve/server.h"


#define TICK_MS 100
#define PRESSURE_US 1000000LL
#define SLACK 64   /* libmicrohttpd frees its count a little after CLOSED */

static int table_size(const hm_srv *s) { return s->cfg.max_conns + SLACK; }

static long long now_us(void) { return (long long)(hm_now() * 1e6); }

/* Written and read on libmicrohttpd's one polling thread only. */
static int mhd_error_status;

void hm_srv_mhd_status_note(int status) { mhd_error_status = status; }

int hm_srv_mhd_status_take(void) {
    int st = mhd_error_status;
    mhd_error_status = 0;
    return st;
}

int hm_srv_conn_init(hm_srv *s, size_t req_size) {
    int n = table_size(s);
    s->conns = calloc((size_t)n, sizeof *s->conns);
    if (!s->conns || pthread_mutex_init(&s->cmu, NULL)) return -1;
    size_t rsz = req_size;
    for (int i = n - 1; i >= 0; i--) {
        hm_srv_conn *k = &s->conns[i];
        if (!(k->req = calloc(1, rsz))) return -1;
        atomic_init(&k->deadline_us, 0);
        atomic_init(&k->armed_us, 0);
        atomic_init(&k->why, 0);
        atomic_init(&k->closed_by, 0);
        k->fd = -1;
        k->next_free = s->conn_free;
        s->conn_free = k;
    }
    atomic_init(&s->watchdog_stop, 0);
    return 0;
}

void hm_srv_conn_free(hm_srv *s) {
    if (!s->conns) return;
    for (int i = 0; i < table_size(s); i++) free(s->conns[i].req);
    free(s->conns);
    s->conns = NULL;
    pthread_mutex_destroy(&s->cmu);
}

void hm_srv_conn_deadline(hm_srv_conn *k, int why, double seconds) {
    if (!k) return;
    long long now = now_us();
    atomic_store(&k->why, why);
    atomic_store(&k->armed_us, now);
    atomic_store(&k->deadline_us, seconds > 0 ? now + (long long)(seconds * 1e6) : 0);
}

void hm_srv_conn_set_job(hm_srv *s, hm_srv_conn *k, hm_srv_job *job) {
    if (!k) return;
    pthread_mutex_lock(&s->cmu);
    k->job = job;
    pthread_mutex_unlock(&s->cmu);
}

void hm_srv_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
    hm_srv *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        pthread_mutex_lock(&s->cmu);
        hm_srv_conn *k = s->conn_free;
        if (k) {
            s->conn_free = k->next_free;
            k->conn = c;
            k->fd = fi ? fi->connect_fd : -1;
            k->job = NULL;
            k->awaiting = 1;
            k->last_status = 0;
            atomic_store(&k->closed_by, 0);
        }
        pthread_mutex_unlock(&s->cmu);
        /* No record (cannot happen while the table exceeds the connection
         * limit): the connection works, without deadlines. */
        if (k) hm_srv_conn_deadline(k, HM_SRV_DL_HEADER, s->cfg.header_timeout_s);
        *socket_context = k;
        return;
    }
    hm_srv_conn *k = *socket_context;
    if (!k) return;
    if (k->awaiting) {
        /* libmicrohttpd refused a request before its URI was known (request
         * line too long: 414, bad version: 505, malformed: 400): count it. */
        /* The connection no longer has its response here: the status is
         * the one libmicrohttpd's error line named (same thread, just before). */
        int st = hm_srv_mhd_status_take();
        if (st >= 400 && st < 600 && st != k->last_status) {
            hm_srv_metrics_request(&s->metrics, HM_SRV_EP_OTHER, st);
            if (!s->cfg.quiet) hm_srv_log("- - %d (refused by libmicrohttpd before the request line was read)", st);
        }
    }
    pthread_mutex_lock(&s->cmu);
    k->conn = NULL;
    k->fd = -1;
    k->job = NULL;
    atomic_store(&k->deadline_us, 0);
    k->next_free = s->conn_free;
    s->conn_free = k;
    pthread_mutex_unlock(&s->cmu);
    *socket_context = NULL;
}

/* The peer sent FIN (or the socket failed) and nothing is left to read: a
 * request already read in full has nobody left to answer. */
static int peer_gone(int fd, short revents) {
    if (revents & (POLLERR | POLLHUP | POLLNVAL)) return 1;
    if (!(revents & POLLRDHUP)) return 0;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void *watchdog_main(void *arg) {
    hm_srv *s = arg;
    int n = table_size(s);
    struct pollfd *pf = malloc(sizeof *pf * (size_t)n);
    int *slot = malloc(sizeof *slot * (size_t)n);
    hm_srv_job **gone = malloc(sizeof *gone * (size_t)n);
    if (!pf || !slot || !gone) {
        hm_srv_log("watchdog: out of memory; header/body deadlines are not enforced");
        free(pf), free(slot), free(gone);
        return NULL;
    }
    while (!atomic_load(&s->watchdog_stop)) {
        struct timespec ts = {0, TICK_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
        long long now = now_us();
        int np = 0, ngone = 0, live = 0;
        pthread_mutex_lock(&s->cmu);
        for (int i = 0; i < n; i++) live += s->conns[i].conn != NULL;
        /* Nearly full (a flood from many addresses): connections still
         * without their headers after PRESSURE_US are shed, so that the
         * slots turn over in about a second instead of --header-timeout-s
         * and a real client waiting in the accept queue gets in. Real
         * clients send their headers in one go. */
        int pressure = live * 10 >= s->cfg.max_conns * 9;
        for (int i = 0; i < n; i++) {
            hm_srv_conn *k = &s->conns[i];
            if (!k->conn || k->fd < 0) continue;
            long long dl = atomic_load(&k->deadline_us);
            if (dl && pressure && atomic_load(&k->why) == HM_SRV_DL_HEADER && now - atomic_load(&k->armed_us) > PRESSURE_US)
                dl = now - 1;
            if (dl && now > dl) {
                atomic_store(&k->deadline_us, 0);
                atomic_store(&k->closed_by, atomic_load(&k->why));
                atomic_fetch_add(&s->metrics.deadline_closed, 1);
                shutdown(k->fd, SHUT_RDWR);
                continue;
            }
            /* Uploads and suspended requests: is the client still there? */
            if (k->job || atomic_load(&k->why) == HM_SRV_DL_BODY) {
                pf[np].fd = k->fd, pf[np].events = POLLRDHUP, pf[np].revents = 0;
                slot[np++] = i;
            }
        }
        if (np && poll(pf, (nfds_t)np, 0) > 0) {
            for (int j = 0; j < np; j++) {
                hm_srv_conn *k = &s->conns[slot[j]];
                if (!pf[j].revents || !peer_gone(pf[j].fd, pf[j].revents)) continue;
                if (k->job) {
                    atomic_fetch_add(&k->job->refs, 1);
                    gone[ngone++] = k->job;
                    k->job = NULL;
                } else if (atomic_load(&k->deadline_us)) {
                    /* A half-closed upload: libmicrohttpd would keep it (and
                     * its body) until the idle timeout. */
                    atomic_store(&k->deadline_us, 0);
                    atomic_store(&k->closed_by, -1);
                    shutdown(k->fd, SHUT_RDWR);
                }
            }
        }
        pthread_mutex_unlock(&s->cmu);
        /* Outside cmu: abandoning takes the queue lock and resumes. */
        for (int j = 0; j < ngone; j++) {
            hm_srv_work_abandon(s, gone[j]);
            hm_srv_job_unref(gone[j]);
        }
    }
    free(pf), free(slot), free(gone);
    return NULL;
}

int hm_srv_conn_watchdog_start(hm_srv *s) {
    if (pthread_create(&s->watchdog, NULL, watchdog_main, s)) return -1;
    s->watchdog_started = 1;
    return 0;
}

void hm_srv_conn_watchdog_stop(hm_srv *s) {
    if (!s->watchdog_started) return;
    atomic_store(&s->watchdog_stop, 1);
    pthread_join(s->watchdog, NULL);
    s->watchdog_started = 0;
}
