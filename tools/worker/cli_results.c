/* cli_results.c - `hamer results`: the results stream as JSON lines
 * (--follow: and then the new ones as they come), or --stats: one JSON
 * summary of the queue (jobs stream and group, consumers, results by
 * status, duplicate job ids, dead letters).
 *
 * Exit status: 0; 1 Redis failure; 2 bad usage.
 */
#include <jansson.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/args.h"
#include "common/common.h"
#include "worker/worker.h"

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { g_stop = sig; }

typedef struct {
    const char *url, *url_given, *stream, *group, *results, *from, *dead_given;
    char dead[512];
    int follow, stats;
    long long count;
} results_args;

/* --from: a stream entry ID (digits and '-') or '$'. */
static int from_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    if (strlen(v) >= HM_WK_ENTRY_MAX || (strcmp(v, "$") && strspn(v, "0123456789-") != strlen(v))) return -1;
    *(const char **)field = v;
    return 0;
}

#define R(field) (offsetof(results_args, field))

static const hm_opt results_opts[] = {
    {.name = "--redis", .meta = "URL", .kind = HM_OPT_STR, .off = R(url_given),
     .help = "redis://[[user]:password@]HOST[:PORT][/DB] (default:\n$HAMER_REDIS_URL)"},
    {.name = "--results", .meta = "S", .kind = HM_OPT_STR, .off = R(results),
     .help = "the results stream (default hamer:results)"},
    {.name = "--from", .meta = "ID", .kind = HM_OPT_FN, .off = R(from), .fn = from_option,
     .want = "a stream entry ID or '$'",
     .help = "after that results entry ('$': only new ones)"},
    {.name = "--follow", .kind = HM_OPT_FLAG, .off = R(follow),
     .help = "keep waiting for new ones (until SIGINT/SIGTERM)"},
    {.name = "--count", .meta = "N", .kind = HM_OPT_LLONG, .off = R(count), .lo = 1, .hi = 2000000000,
     .want = "a positive integer", .help = "stop after N"},
    {.name = "--stats", .kind = HM_OPT_FLAG, .off = R(stats),
     .help = "one JSON summary of the queue instead (reads the whole\n"
             "results stream to count duplicate job ids)"},
    {.name = "--stream", .meta = "S", .kind = HM_OPT_STR, .off = R(stream),
     .help = "--stats: the jobs stream (default hamer:jobs)"},
    {.name = "--group", .meta = "G", .kind = HM_OPT_STR, .off = R(group),
     .help = "--stats: the consumer group (default hamer)"},
    {.name = "--dead-letters", .meta = "S", .kind = HM_OPT_STR, .off = R(dead_given),
     .help = "--stats: the dead letters (default <stream>:dead)"},
    {0},
};

static const hm_command results_cmd = {
    .cmd = "results",
    .synopsis =
        "usage: hamer results --redis URL [--results hamer:results] [--from ID]\n"
        "                     [--follow] [--count N]\n"
        "       hamer results --redis URL --stats [--stream hamer:jobs] [--group hamer]\n"
        "                     [--results hamer:results] [--dead-letters STREAM]\n",
    .about =
        "Prints the results stream, one JSON object a line: {\"id\", \"entry\" (the job's\n"
        "entry ID), \"status\" (\"ok\" | \"error\"), \"worker\", \"result_entry\", and \"result\"\n"
        "(RESULT.json of 'hamer run') or \"error\"}. --from ID: after that results entry\n"
        "('$': only new ones); --follow: keep waiting for new ones (until\n"
        "SIGINT/SIGTERM); --count N: stop after N. --stats: one JSON summary instead\n"
        "(reads the whole results stream to count duplicate job ids).\n",
    .epilog = "Exit status: 0; 1 Redis failure; 2 bad usage.\n",
    .groups = (const hm_opt_group[]){{results_opts, 0, NULL}, {NULL, 0, NULL}},
};

/* A field of a flat [name, value, ...] array, or NULL. */
static const redisReply *field(const redisReply *f, const char *name) {
    for (size_t i = 0; f && f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2)
        if (f->element[i]->type == REDIS_REPLY_STRING && !strcmp(f->element[i]->str, name)) return f->element[i + 1];
    return NULL;
}

/* A reply string as a JSON string value (printable ASCII kept). */
static json_t *jstr(const redisReply *v) {
    if (!v || v->type != REDIS_REPLY_STRING) return json_null();
    char clean[1024];
    hm_wk_clean(clean, sizeof clean, v->str);
    return json_string(clean);
}

/* Print one results entry as a JSON line; the RESULT.json goes in verbatim. */
static void print_entry(const redisReply *e) {
    const redisReply *f = e->element[1], *res = field(f, "result");
    json_t *o = json_object();
    json_object_set_new(o, "id", jstr(field(f, "id")));
    json_object_set_new(o, "entry", jstr(field(f, "entry")));
    json_object_set_new(o, "status", jstr(field(f, "status")));
    json_object_set_new(o, "worker", jstr(field(f, "worker")));
    json_object_set_new(o, "result_entry", jstr(e->element[0]));
    if (field(f, "error")) json_object_set_new(o, "error", jstr(field(f, "error")));
    char *head = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!head) return;
    size_t n = strlen(head);
    if (res && res->type == REDIS_REPLY_STRING) printf("%.*s,\"result\":%s}\n", (int)(n - 1), head, res->str);
    else printf("%s\n", head);
    free(head);
}

/* Is e a well-formed stream entry ([id, [field, value, ...]])? */
static int entry_ok(const redisReply *e) {
    return e->type == REDIS_REPLY_ARRAY && e->elements == 2 && e->element[0]->type == REDIS_REPLY_STRING &&
           e->element[1]->type == REDIS_REPLY_ARRAY;
}

/* Print results after *last (exclusive; "-" for all), following if asked. */
static int list(hm_wk_redis *r, const results_args *a) {
    char last[HM_WK_ENTRY_MAX + 2] = "-";
    long long printed = 0;
    redisReply *rep;
    hm_wk_cmd c;
    if (a->from && !strcmp(a->from, "$")) {
        /* Only what comes from now on: start after the current last entry. */
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XREVRANGE"), hm_wk_arg(&c, a->results), hm_wk_arg(&c, "+"), hm_wk_arg(&c, "-");
        hm_wk_arg(&c, "COUNT"), hm_wk_arg(&c, "1");
        if (hm_wk_call(r, &c, &rep, "XREVRANGE")) return 1;
        snprintf(last, sizeof last, "(%s", rep->elements && entry_ok(rep->element[0]) ? rep->element[0]->element[0]->str : "0-0");
        freeReplyObject(rep);
    } else if (a->from) {
        snprintf(last, sizeof last, "(%s", a->from);
    }
    for (;;) {
        /* What is there: XRANGE pages; then, following, blocking XREADs. */
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XRANGE"), hm_wk_arg(&c, a->results), hm_wk_arg(&c, last), hm_wk_arg(&c, "+");
        hm_wk_arg(&c, "COUNT"), hm_wk_arg(&c, "500");
        if (hm_wk_call(r, &c, &rep, "XRANGE")) return 1;
        size_t n = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
        for (size_t i = 0; i < n && (!a->count || printed < a->count); i++)
            if (entry_ok(rep->element[i])) {
                print_entry(rep->element[i]);
                printed++;
                snprintf(last, sizeof last, "(%s", rep->element[i]->element[0]->str);
            }
        freeReplyObject(rep);
        fflush(stdout);
        if (a->count && printed >= a->count) return 0;
        if (n == 500) continue;
        if (!a->follow || g_stop) return 0;
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XREAD"), hm_wk_arg(&c, "BLOCK"), hm_wk_arg(&c, "1000"), hm_wk_arg(&c, "STREAMS");
        hm_wk_arg(&c, a->results), hm_wk_arg(&c, strcmp(last, "-") ? last + 1 : "0-0");
        if (hm_wk_call(r, &c, &rep, "XREAD")) return 1;
        freeReplyObject(rep);   /* woken: the next XRANGE reads what came */
        if (g_stop) return 0;
    }
}

/* A flat [name, value, ...] reply as a JSON object. */
static json_t *flat_object(const redisReply *f) {
    json_t *o = json_object();
    for (size_t i = 0; f->type == REDIS_REPLY_ARRAY && i + 1 < f->elements; i += 2) {
        const redisReply *k = f->element[i], *v = f->element[i + 1];
        if (k->type != REDIS_REPLY_STRING) continue;
        json_object_set_new(o, k->str, v->type == REDIS_REPLY_INTEGER ? json_integer(v->integer) : jstr(v));
    }
    return o;
}

/* XINFO <what> ... as an array of objects ([] when the key/group is missing). */
static json_t *xinfo(hm_wk_redis *r, const char *what, const char *key, const char *group) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XINFO"), hm_wk_arg(&c, what), hm_wk_arg(&c, key);
    if (group) hm_wk_arg(&c, group);
    json_t *arr = json_array();
    redisReply *rep;
    if (hm_wk_append(r, &c) || hm_wk_read(r, &rep)) return arr;
    for (size_t i = 0; rep->type == REDIS_REPLY_ARRAY && i < rep->elements; i++)
        json_array_append_new(arr, flat_object(rep->element[i]));
    freeReplyObject(rep);
    return arr;
}

/* XLEN of a key (0 when absent); -1 on failure. */
static long long xlen(hm_wk_redis *r, const char *key) {
    hm_wk_cmd c;
    hm_wk_cmd_init(&c);
    hm_wk_arg(&c, "XLEN"), hm_wk_arg(&c, key);
    redisReply *rep;
    if (hm_wk_call(r, &c, &rep, "XLEN")) return -1;
    long long n = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
    freeReplyObject(rep);
    return n;
}

static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* Count results by status and duplicate ids over the whole stream. */
static int count_results(hm_wk_redis *r, const char *key, json_t *out) {
    char last[HM_WK_ENTRY_MAX + 2] = "-";
    long long ok = 0, error = 0, n = 0, cap = 0;
    char **ids = NULL;
    int rc = 0;
    for (;;) {
        hm_wk_cmd c;
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XRANGE"), hm_wk_arg(&c, key), hm_wk_arg(&c, last), hm_wk_arg(&c, "+");
        hm_wk_arg(&c, "COUNT"), hm_wk_arg(&c, "1000");
        redisReply *rep;
        if (hm_wk_call(r, &c, &rep, "XRANGE")) {
            rc = 1;
            break;
        }
        size_t k = rep->type == REDIS_REPLY_ARRAY ? rep->elements : 0;
        for (size_t i = 0; i < k && !rc; i++) {
            const redisReply *e = rep->element[i];
            if (!entry_ok(e)) continue;
            snprintf(last, sizeof last, "(%s", e->element[0]->str);
            const redisReply *st = field(e->element[1], "status"), *id = field(e->element[1], "id");
            if (st && st->type == REDIS_REPLY_STRING) ok += !strcmp(st->str, "ok"), error += !strcmp(st->str, "error");
            if (n == cap) {
                char **m = realloc(ids, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof *ids);
                if (!m) rc = 1;
                else ids = m;
            }
            if (!rc && !(ids[n++] = strdup(id && id->type == REDIS_REPLY_STRING ? id->str : ""))) rc = 1;
        }
        freeReplyObject(rep);
        if (rc || k < 1000) break;
    }
    long long dup = 0, distinct = 0;
    if (!rc && n) qsort(ids, (size_t)n, sizeof *ids, cmp_str);
    for (long long i = 0; !rc && i < n; i++) {
        if (i && !strcmp(ids[i], ids[i - 1])) dup++;
        else distinct++;
    }
    for (long long i = 0; i < n; i++) free(ids[i]);
    free(ids);
    json_object_set_new(out, "ok", json_integer(ok));
    json_object_set_new(out, "error", json_integer(error));
    json_object_set_new(out, "jobs", json_integer(distinct));
    json_object_set_new(out, "duplicates", json_integer(dup));
    return rc;
}

/* The --stats document on stdout. */
static int stats(hm_wk_redis *r, const results_args *a) {
    json_t *doc = json_object(), *jobs = json_object(), *res = json_object(), *dead = json_object();
    long long lj = xlen(r, a->stream), lr = xlen(r, a->results), ld = xlen(r, a->dead);
    if (lj < 0 || lr < 0 || ld < 0) {
        json_decref(doc), json_decref(jobs), json_decref(res), json_decref(dead);
        return 1;
    }
    json_object_set_new(jobs, "stream", json_string(a->stream));
    json_object_set_new(jobs, "length", json_integer(lj));
    json_object_set_new(jobs, "groups", xinfo(r, "GROUPS", a->stream, NULL));
    json_object_set_new(jobs, "consumers", xinfo(r, "CONSUMERS", a->stream, a->group));
    json_object_set_new(res, "stream", json_string(a->results));
    json_object_set_new(res, "length", json_integer(lr));
    int rc = count_results(r, a->results, res);
    json_object_set_new(dead, "stream", json_string(a->dead));
    json_object_set_new(dead, "length", json_integer(ld));
    json_object_set_new(doc, "jobs", jobs);
    json_object_set_new(doc, "results", res);
    json_object_set_new(doc, "dead_letters", dead);
    char *s = rc ? NULL : json_dumps(doc, JSON_INDENT(2));
    json_decref(doc);
    if (s) printf("%s\n", s);
    free(s);
    return rc || !s;
}

/* Arguments -> a; 0, -1 (help printed) or 2 (usage error reported). */
static int parse(int argc, char **argv, results_args *a) {
    memset(a, 0, sizeof *a);
    a->stream = "hamer:jobs", a->group = "hamer", a->results = "hamer:results";
    int rc = hm_args_parse(&results_cmd, argc, argv, a);
    if (rc) return rc;
    const char *dead = a->dead_given;
    if (!(a->url = hm_wk_url_arg(a->url_given))) return hm_tool_fail(2, "results: --redis URL (or $HAMER_REDIS_URL) is required%s", "");
    if (strlen(a->stream) > 400) return hm_tool_fail(2, "results: --stream is too long%s", "");
    snprintf(a->dead, sizeof a->dead, "%s", dead ? dead : "");
    if (!dead) snprintf(a->dead, sizeof a->dead, "%s:dead", a->stream);
    return 0;
}

/* `hamer results ARGS`: the exit status. */
int hm_results_main(int argc, char **argv) {
    results_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    hm_wk_redis r;
    memset(&r, 0, sizeof r);
    r.timeout_s = 30;
    char err[700];
    if (hm_wk_url_parse(a.url, &r.url, err, sizeof err)) return hm_tool_fail(2, "results: %s", err);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    rc = hm_wk_redis_connect(&r) ? 1 : a.stats ? stats(&r, &a) : list(&r, &a);
    if (rc) fprintf(stderr, "hamer: %s\n", r.err);
    hm_wk_redis_close(&r);
    return rc;
}
