/* worker_queue.c - the consumer group side of a worker: create the group,
 * read new and pending entries, take over idle ones, and answer a job
 * (result + done marker + XACK, and a dead letter when it is one) in one
 * MULTI/EXEC.
 *
 * Why one result per job id: the answer's XADD, the marker's SET and the
 * XACK run in one MULTI/EXEC, which Redis applies whole or not at all, and
 * the transaction is guarded by a WATCH on the marker. A worker that
 * crashes before EXEC leaves the job pending, unanswered (it is claimed and
 * computed again); one that crashes after EXEC has answered and
 * acknowledged it. Two workers finishing the same job (the slow owner and
 * the one that claimed it) race on the marker: the second EXEC aborts
 * (WATCH) or the second look finds the marker, and it only acknowledges.
 * The marker lives --result-ttl-s, which must exceed the longest a job can
 * stay pending or be submitted again under the same id.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "worker/worker.h"

/* Free the reply and the jobs pointing into it; the batch is empty after. */
void hm_wk_batch_free(hm_wk_batch *b) {
    if (b->reply) freeReplyObject(b->reply);
    free(b->jobs);
    memset(b, 0, sizeof *b);
}

/* The done marker's key of a job: <results>:done:<id> (malloc'd). */
static char *marker_key(const hm_wk_queue *q, const hm_wk_job *job) {
    size_t n = strlen(q->results) + strlen(job->id) + 8;
    char *k = malloc(n);
    if (k) snprintf(k, n, "%s:done:%s", q->results, job->id);
    return k;
}

/* TYPE of key must be one of the allowed (space-separated) or "none". */
static int check_type(hm_wk_redis *r, const char *key, const char *allowed) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "TYPE");
    hm_wk_arg(&c, key);
    redisReply *rep;
    int rc = hm_wk_call(r, &c, &rep, "TYPE");
    if (rc) return rc;
    const char *t = rep->type == REDIS_REPLY_STATUS || rep->type == REDIS_REPLY_STRING ? rep->str : "?";
    if (strcmp(t, "none") && strcmp(t, allowed)) {
        snprintf(r->err, sizeof r->err, "key '%.200s' holds a %.20s, not a %s: choose another name", key, t,
                 allowed);
        rc = HM_WK_FATAL;
    }
    freeReplyObject(rep);
    return rc;
}

/* Check the key types, then create the group (BUSYGROUP: it exists, fine). */
int hm_wk_queue_prepare(hm_wk_redis *r, const hm_wk_queue *q) {
    /* A wrong type would fail inside EXEC after other commands applied. */
    int rc = check_type(r, q->stream, "stream");
    if (!rc) rc = check_type(r, q->results, "stream");
    if (!rc) rc = check_type(r, q->dead, "stream");
    if (!rc) rc = check_type(r, q->errors, "hash");
    if (rc) return rc;
    /* From 0: jobs submitted before the first worker started are served. */
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XGROUP");
    hm_wk_arg(&c, "CREATE");
    hm_wk_arg(&c, q->stream);
    hm_wk_arg(&c, q->group);
    hm_wk_arg(&c, "0");
    hm_wk_arg(&c, "MKSTREAM");
    redisReply *rep;
    rc = hm_wk_append(r, &c);
    if (!rc) rc = hm_wk_read(r, &rep);
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSYGROUP", 9)) rc = HM_WK_OK;
    else rc = hm_wk_reply_class(r, rep, "XGROUP CREATE");
    freeReplyObject(rep);
    return rc;
}

/* Jobs from an array of entries (the batch keeps the reply they point into). */
static int parse_entries(const hm_wk_queue *q, const redisReply *entries, hm_wk_batch *b) {
    b->n = 0;
    if (!entries || entries->type != REDIS_REPLY_ARRAY || !entries->elements) return HM_WK_OK;
    b->jobs = calloc(entries->elements, sizeof *b->jobs);
    if (!b->jobs) return HM_WK_BUSY;
    for (size_t i = 0; i < entries->elements; i++) hm_wk_job_parse(entries->element[i], q->payload_max, &b->jobs[b->n++]);
    return HM_WK_OK;
}

/* Each job's delivery count (XPENDING <stream> <group> ID ID 1, pipelined). */
static int delivery_counts(hm_wk_redis *r, const hm_wk_queue *q, hm_wk_batch *b) {
    for (int i = 0; i < b->n; i++) {
        hm_wk_cmd c;
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XPENDING");
        hm_wk_arg(&c, q->stream);
        hm_wk_arg(&c, q->group);
        hm_wk_arg(&c, b->jobs[i].entry);
        hm_wk_arg(&c, b->jobs[i].entry);
        hm_wk_arg(&c, "1");
        int rc = hm_wk_append(r, &c);
        if (rc) return rc;
    }
    int first = HM_WK_OK;
    for (int i = 0; i < b->n; i++) {
        redisReply *rep;
        int rc = hm_wk_read(r, &rep);
        if (rc) return rc;
        rc = hm_wk_reply_class(r, rep, "XPENDING");
        /* [[id, consumer, idle, count]]; an entry no longer pending keeps 1. */
        if (!rc && rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && rep->element[0]->type == REDIS_REPLY_ARRAY &&
            rep->element[0]->elements == 4 && rep->element[0]->element[3]->type == REDIS_REPLY_INTEGER)
            b->jobs[i].deliveries = rep->element[0]->element[3]->integer;
        if (rc && !first) first = rc;
        freeReplyObject(rep);
    }
    return first;
}

int hm_wk_queue_read(hm_wk_redis *r, const hm_wk_queue *q, char *history, size_t historylen, int block_ms,
                     hm_wk_batch *b) {
    memset(b, 0, sizeof *b);
    char count[16], block[16];
    snprintf(count, sizeof count, "%d", q->batch);
    snprintf(block, sizeof block, "%d", block_ms);
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XREADGROUP");
    hm_wk_arg(&c, "GROUP");
    hm_wk_arg(&c, q->group);
    hm_wk_arg(&c, q->consumer);
    hm_wk_arg(&c, "COUNT");
    hm_wk_arg(&c, count);
    if (!history) {
        hm_wk_arg(&c, "BLOCK");
        hm_wk_arg(&c, block);
    }
    hm_wk_arg(&c, "STREAMS");
    hm_wk_arg(&c, q->stream);
    hm_wk_arg(&c, history ? history : ">");
    int rc = hm_wk_call(r, &c, &b->reply, "XREADGROUP");
    if (rc) return rc;
    /* nil: the block timed out; else [[stream, [entry, ...]]]. */
    const redisReply *rep = b->reply;
    if (rep->type == REDIS_REPLY_ARRAY && rep->elements == 1 && rep->element[0]->type == REDIS_REPLY_ARRAY &&
        rep->element[0]->elements == 2)
        rc = parse_entries(q, rep->element[0]->element[1], b);
    if (rc || !history) return rc;
    if (b->n) snprintf(history, historylen, "%s", b->jobs[b->n - 1].entry);
    return delivery_counts(r, q, b);
}

int hm_wk_queue_claim(hm_wk_redis *r, const hm_wk_queue *q, char *cursor, size_t cursorlen, hm_wk_batch *b,
                      hm_wk_metrics *m) {
    memset(b, 0, sizeof *b);
    b->claimed = 1;
    char idle[32], count[16];
    snprintf(idle, sizeof idle, "%lld", q->claim_idle_ms);
    snprintf(count, sizeof count, "%d", q->batch);
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XAUTOCLAIM");
    hm_wk_arg(&c, q->stream);
    hm_wk_arg(&c, q->group);
    hm_wk_arg(&c, q->consumer);
    hm_wk_arg(&c, idle);
    hm_wk_arg(&c, cursor);
    hm_wk_arg(&c, "COUNT");
    hm_wk_arg(&c, count);
    int rc = hm_wk_call(r, &c, &b->reply, "XAUTOCLAIM");
    if (rc) return rc;
    /* [next cursor, [entry, ...], [deleted id, ...]] (Redis 7). */
    const redisReply *rep = b->reply;
    if (rep->type != REDIS_REPLY_ARRAY || rep->elements < 2 || rep->element[0]->type != REDIS_REPLY_STRING) {
        snprintf(r->err, sizeof r->err, "XAUTOCLAIM: unexpected reply (Redis >= 7 is needed)");
        return HM_WK_FATAL;
    }
    snprintf(cursor, cursorlen, "%s", rep->element[0]->str);
    if (rep->elements >= 3 && rep->element[2]->type == REDIS_REPLY_ARRAY && rep->element[2]->elements) {
        /* Redis already dropped them from the pending list: their data is gone. */
        atomic_fetch_add(&m->deleted, rep->element[2]->elements);
        hm_wk_log("%zu pending entries were deleted from %s before being answered (trimmed?)",
                  rep->element[2]->elements, q->stream);
    }
    rc = parse_entries(q, rep->element[1], b);
    if (!rc) rc = delivery_counts(r, q, b);
    return rc;
}

/* One pipelined EXISTS per job's marker (deleted entries skipped). */
int hm_wk_queue_done(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_batch *b, int *done) {
    int rc = HM_WK_OK;
    for (int i = 0; i < b->n && !rc; i++) {
        done[i] = 0;
        if (b->jobs[i].deleted) continue;
        char *key = marker_key(q, &b->jobs[i]);
        if (!key) return HM_WK_BUSY;
        hm_wk_cmd c;
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "EXISTS");
        hm_wk_arg(&c, key);
        rc = hm_wk_append(r, &c);   /* hiredis copies the words */
        free(key);
    }
    if (rc) return rc;
    int first = HM_WK_OK;
    for (int i = 0; i < b->n; i++) {
        if (b->jobs[i].deleted) continue;
        redisReply *rep;
        rc = hm_wk_read(r, &rep);
        if (rc) return rc;
        int cls = hm_wk_reply_class(r, rep, "EXISTS");
        if (!cls && rep->type == REDIS_REPLY_INTEGER) done[i] = rep->integer > 0;
        if (cls && !first) first = cls;
        freeReplyObject(rep);
    }
    return first;
}

/* XACK one entry of the group. */
int hm_wk_queue_ack(hm_wk_redis *r, const hm_wk_queue *q, const char *entry) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XACK");
    hm_wk_arg(&c, q->stream);
    hm_wk_arg(&c, q->group);
    hm_wk_arg(&c, entry);
    redisReply *rep;
    int rc = hm_wk_call(r, &c, &rep, "XACK");
    if (!rc) freeReplyObject(rep);
    return rc;
}

/* Send the queued commands' replies through: n replies, each must not be
 * an error; the last one is returned in *last (caller frees). */
static int read_replies(hm_wk_redis *r, int n, redisReply **last, const char *what) {
    int first = HM_WK_OK;
    *last = NULL;
    for (int i = 0; i < n; i++) {
        redisReply *rep;
        int rc = hm_wk_read(r, &rep);
        if (rc) return rc;
        int cls = hm_wk_reply_class(r, rep, what);
        if (cls && !first) first = cls;
        if (i == n - 1 && !cls) *last = rep;
        else freeReplyObject(rep);
    }
    return first;
}

/* One try of the commit; HM_WK_BUSY with *aborted = 1 when the WATCH fired. */
static int commit_once(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, int kind, const char *text,
                       int dead, const char *key, int *written, int *aborted) {
    *written = 0, *aborted = 0;
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "WATCH");
    hm_wk_arg(&c, key);
    int rc = hm_wk_append(r, &c);
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "EXISTS");
    hm_wk_arg(&c, key);
    if (!rc) rc = hm_wk_append(r, &c);
    redisReply *rep = NULL;
    if (!rc) rc = read_replies(r, 2, &rep, "WATCH/EXISTS");
    if (rc) return rc;
    int exists = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
    freeReplyObject(rep);
    if (exists) {
        /* Answered already (by another worker, or by this one before a lost reply). */
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "UNWATCH");
        rc = hm_wk_append(r, &c);
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XACK");
        hm_wk_arg(&c, q->stream);
        hm_wk_arg(&c, q->group);
        hm_wk_arg(&c, job->entry);
        if (!rc) rc = hm_wk_append(r, &c);
        if (!rc) rc = read_replies(r, 2, &rep, "XACK");
        if (rep) freeReplyObject(rep);
        return rc;
    }
    const char *status = kind == HM_WK_RESULT_OK ? "ok" : "error";
    char ttl[32], deliveries[32];
    snprintf(ttl, sizeof ttl, "%lld", q->result_ttl_s);
    snprintf(deliveries, sizeof deliveries, "%lld", job->deliveries);
    int n = 0;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "MULTI");
    rc = hm_wk_append(r, &c), n++;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XADD");
    hm_wk_arg(&c, q->results);
    hm_wk_arg(&c, "*");
    hm_wk_arg(&c, "id");
    hm_wk_arg(&c, job->id);
    hm_wk_arg(&c, "entry");
    hm_wk_arg(&c, job->entry);
    hm_wk_arg(&c, "status");
    hm_wk_arg(&c, status);
    hm_wk_arg(&c, kind == HM_WK_RESULT_OK ? "result" : "error");
    hm_wk_arg(&c, text);
    hm_wk_arg(&c, "worker");
    hm_wk_arg(&c, q->consumer);
    if (!rc) rc = hm_wk_append(r, &c), n++;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "SET");
    hm_wk_arg(&c, key);
    hm_wk_arg(&c, status);
    hm_wk_arg(&c, "EX");
    hm_wk_arg(&c, ttl);
    if (!rc) rc = hm_wk_append(r, &c), n++;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XACK");
    hm_wk_arg(&c, q->stream);
    hm_wk_arg(&c, q->group);
    hm_wk_arg(&c, job->entry);
    if (!rc) rc = hm_wk_append(r, &c), n++;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "HDEL");
    hm_wk_arg(&c, q->errors);
    hm_wk_arg(&c, job->entry);
    if (!rc) rc = hm_wk_append(r, &c), n++;
    if (dead) {
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XADD");
        hm_wk_arg(&c, q->dead);
        hm_wk_arg(&c, "*");
        hm_wk_arg(&c, "id");
        hm_wk_arg(&c, job->id);
        hm_wk_arg(&c, "entry");
        hm_wk_arg(&c, job->entry);
        hm_wk_arg(&c, "deliveries");
        hm_wk_arg(&c, deliveries);
        hm_wk_arg(&c, "error");
        hm_wk_arg(&c, text);
        hm_wk_arg(&c, "worker");
        hm_wk_arg(&c, q->consumer);
        if (!rc) rc = hm_wk_append(r, &c), n++;
    }
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "EXEC");
    if (!rc) rc = hm_wk_append(r, &c), n++;
    if (!rc) rc = read_replies(r, n, &rep, "MULTI/EXEC");
    if (rc) {
        /* An error before EXEC (EXECABORT) applied nothing. */
        if (rep) freeReplyObject(rep);
        return rc;
    }
    if (rep->type == REDIS_REPLY_NIL) {
        freeReplyObject(rep);
        *aborted = 1;
        return HM_WK_BUSY;
    }
    /* EXEC ran: an error inside means part of the transaction applied. */
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements && !rc; i++)
        if (rep->element[i]->type == REDIS_REPLY_ERROR) {
            snprintf(r->err, sizeof r->err, "MULTI/EXEC for job %.200s: command %zu failed inside the transaction: %.200s",
                     job->id, i + 1, rep->element[i]->str);
            rc = HM_WK_FATAL;
        }
    freeReplyObject(rep);
    if (!rc) *written = 1;
    return rc;
}

int hm_wk_queue_commit(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, int kind, const char *text,
                       int dead, int *written) {
    char *key = marker_key(q, job);
    if (!key) return HM_WK_BUSY;
    int rc, aborted, tries = 0;
    /* An aborted EXEC means the marker appeared: the next look sees it
     * (bounded all the same: a marker can vanish again only by expiring). */
    do rc = commit_once(r, q, job, kind, text, dead, key, written, &aborted);
    while (aborted && ++tries < 8);
    free(key);
    return rc;
}

/* HSET <stream>:errors <entry> <msg>: what the dead letter will say. */
int hm_wk_queue_note_error(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, const char *msg) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "HSET");
    hm_wk_arg(&c, q->errors);
    hm_wk_arg(&c, job->entry);
    hm_wk_arg(&c, msg);
    redisReply *rep;
    int rc = hm_wk_call(r, &c, &rep, "HSET");
    if (!rc) freeReplyObject(rep);
    return rc;
}

/* HGET of that note, or a sentence saying none was recorded. */
int hm_wk_queue_last_error(hm_wk_redis *r, const hm_wk_queue *q, const hm_wk_job *job, char *out, size_t n) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "HGET");
    hm_wk_arg(&c, q->errors);
    hm_wk_arg(&c, job->entry);
    redisReply *rep;
    int rc = hm_wk_call(r, &c, &rep, "HGET");
    if (rc) return rc;
    if (rep->type == REDIS_REPLY_STRING) hm_wk_clean(out, n, rep->str);
    else snprintf(out, n, "no error recorded: the workers it was delivered to stopped before answering it "
                  "(crash, kill, or running past --claim-idle-ms)");
    freeReplyObject(rep);
    return HM_WK_OK;
}
