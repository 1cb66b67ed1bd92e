/* worker_redis.c - one blocking hiredis connection: connect (AUTH,
 * SELECT), commands as argument vectors, pipelines, and the classes of
 * failures the worker reacts to differently (reconnect, wait, recreate the
 * group, give up). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include "common/common.h"
#include "worker/worker.h"

/* One line per call: stdio's lock keeps lines whole across threads. */
void hm_wk_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hm_tool_vlog("hamer worker", fmt, ap);
    va_end(ap);
}

void hm_wk_cmd_init(hm_wk_cmd *c) { c->n = 0; }

/* Append a word of n bytes (binary-safe); words past HM_WK_MAX_ARGS are dropped. */
void hm_wk_argn(hm_wk_cmd *c, const char *p, size_t n) {
    /* The callers build fixed command shapes well under the bound. */
    if (c->n >= HM_WK_MAX_ARGS) return;
    c->v[c->n] = p;
    c->len[c->n] = n;
    c->n++;
}

void hm_wk_arg(hm_wk_cmd *c, const char *s) { hm_wk_argn(c, s, strlen(s)); }

/* Drop the connection, if any. */
void hm_wk_redis_close(hm_wk_redis *r) {
    if (r->c) redisFree(r->c);
    r->c = NULL;
}

/* The connection is unusable: remember why, drop it. */
static int lost(hm_wk_redis *r, const char *what) {
    char show[600];
    hm_wk_url_show(&r->url, show, sizeof show);
    snprintf(r->err, sizeof r->err, "%.300s: %s: %.150s", show, what,
             r->c && r->c->errstr[0] ? r->c->errstr : "connection closed");
    hm_wk_redis_close(r);
    return HM_WK_CONN;
}

/* Busy states wait, NOGROUP recreates, READONLY reconnects, anything else is fatal. */
int hm_wk_reply_class(hm_wk_redis *r, const redisReply *rep, const char *what) {
    if (!rep || rep->type != REDIS_REPLY_ERROR) return HM_WK_OK;
    const char *e = rep->str ? rep->str : "";
    snprintf(r->err, sizeof r->err, "%s: %.400s", what, e);
    static const char *busy[] = {"LOADING", "BUSY", "OOM", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS"};
    for (size_t i = 0; i < sizeof busy / sizeof busy[0]; i++)
        if (!strncmp(e, busy[i], strlen(busy[i]))) return HM_WK_BUSY;
    if (!strncmp(e, "NOGROUP", 7)) return HM_WK_NOGROUP;
    /* A replica after a failover: reconnecting may reach the new primary. */
    if (!strncmp(e, "READONLY", 8)) {
        hm_wk_redis_close(r);
        return HM_WK_CONN;
    }
    return HM_WK_FATAL;
}

/* Queue the command in hiredis's output buffer; HM_WK_CONN when not connected. */
int hm_wk_append(hm_wk_redis *r, const hm_wk_cmd *c) {
    if (!r->c) return lost(r, "not connected");
    const char *v[HM_WK_MAX_ARGS];  /* hiredis wants them non-const */
    memcpy(v, c->v, (size_t)c->n * sizeof *v);
    if (redisAppendCommandArgv(r->c, c->n, v, c->len) != REDIS_OK) return lost(r, "cannot send");
    return HM_WK_OK;
}

/* Flush what is queued and read one reply; HM_WK_CONN drops the connection. */
int hm_wk_read(hm_wk_redis *r, redisReply **reply) {
    *reply = NULL;
    if (!r->c) return lost(r, "not connected");
    void *p = NULL;
    if (redisGetReply(r->c, &p) != REDIS_OK || !p) {
        if (p) freeReplyObject(p);
        return lost(r, "no reply");
    }
    *reply = p;
    return HM_WK_OK;
}

/* Append + read + classify. */
int hm_wk_call(hm_wk_redis *r, const hm_wk_cmd *c, redisReply **reply, const char *what) {
    *reply = NULL;
    int rc = hm_wk_append(r, c);
    if (!rc) rc = hm_wk_read(r, reply);
    if (rc) return rc;
    rc = hm_wk_reply_class(r, *reply, what);
    if (rc) {
        freeReplyObject(*reply);
        *reply = NULL;
    }
    return rc;
}

/* A timeval of s seconds. */
static struct timeval tv_of(double s) {
    struct timeval tv;
    tv.tv_sec = (time_t)s;
    tv.tv_usec = (suseconds_t)((s - (double)tv.tv_sec) * 1e6);
    return tv;
}

/* TCP connect with the timeout, reply timeout and keepalive, AUTH, SELECT. */
int hm_wk_redis_connect(hm_wk_redis *r) {
    hm_wk_redis_close(r);
    char show[600];
    hm_wk_url_show(&r->url, show, sizeof show);
    r->c = redisConnectWithTimeout(r->url.host, r->url.port, tv_of(r->timeout_s));
    if (!r->c) {
        snprintf(r->err, sizeof r->err, "%.300s: cannot connect: out of memory", show);
        return HM_WK_CONN;
    }
    if (r->c->err) return lost(r, "cannot connect");
    /* Every reply wait is bounded: a peer that vanished without a reset
     * (a dead machine) must not hang the worker. Blocking reads ask for
     * far less than this. */
    if (redisSetTimeout(r->c, tv_of(r->timeout_s)) != REDIS_OK) return lost(r, "cannot set the timeout");
    redisEnableKeepAlive(r->c);
    redisReply *rep = NULL;
    hm_wk_cmd c;
    if (r->url.password[0]) {
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "AUTH");
        if (r->url.user[0]) hm_wk_arg(&c, r->url.user);
        hm_wk_arg(&c, r->url.password);
        int rc = hm_wk_call(r, &c, &rep, "AUTH");
        freeReplyObject(rep);
        if (rc) {
            /* A refused password is FATAL: retrying cannot fix it. */
            hm_wk_redis_close(r);
            return rc;
        }
    }
    if (r->url.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->url.db);
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "SELECT");
        hm_wk_arg(&c, db);
        int rc = hm_wk_call(r, &c, &rep, "SELECT");
        freeReplyObject(rep);
        if (rc) {
            hm_wk_redis_close(r);
            return rc;
        }
    }
    return HM_WK_OK;
}
