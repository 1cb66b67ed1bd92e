/* args.c - the option tables' parser and --help printer (args.h); the
 * groups the commands share are in args_groups.c. */
#include "common/args.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OPTS 256

static void *field(void *args, size_t base, const hm_opt *o) { return (char *)args + base + o->off; }

/* "an integer in 1..1024", "a number in (0, 16]", "fp32 or fast" */
static const char *want_of(const hm_opt *o, char *buf, size_t n) {
    if (o->want) return o->want;
    switch (o->kind) {
    case HM_OPT_INT:
    case HM_OPT_LLONG:
        snprintf(buf, n, "an integer in %.0f..%.0f", o->lo, o->hi);
        return buf;
    case HM_OPT_REAL:
    case HM_OPT_FLOAT:
        snprintf(buf, n, "a number in %s%g, %g%s", o->open_lo ? "(" : "[", o->lo, o->hi, o->open_hi ? ")" : "]");
        return buf;
    case HM_OPT_CHOICE: {
        size_t used = 0;
        buf[0] = 0;
        int count = 0;
        while (o->choices[count]) count++;
        for (int i = 0; i < count && used < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s%s", i == 0 ? "" : i == count - 1 ? " or " : ", ",
                                     o->choices[i]);
        return buf;
    }
    default:
        return "valid";
    }
}

/* A finite number written as such (no hex, no inf, no nan). */
static int number(const char *s, double *out) {
    char *end;
    if (!*s || strspn(s, "0123456789.eE+-") != strlen(s)) return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* A whole number written as decimal digits with an optional sign (no
 * "1e3", no "2.0", no spaces), within long long. */
static int whole(const char *s, long long *out) {
    const char *d = s + (*s == '+' || *s == '-');
    if (!*d || strspn(d, "0123456789") != strlen(d)) return -1;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || errno) return -1;
    *out = v;
    return 0;
}

static int store(const hm_command *c, const hm_opt *o, void *dst, const char *v, char *why, size_t n);

/* STR with like: v checked by the option of o's name in o->like (into a
 * scratch field); 0 ok, -1 with the line's text in why. */
static int check_like(const hm_command *c, const hm_opt *o, const char *v, char *why, size_t n) {
    const hm_opt *l = o->like;
    while (l->name && strcmp(l->name, o->name)) l++;
    if (!l->name || l->kind == HM_OPT_STR || l->kind == HM_OPT_FLAG || l->kind == HM_OPT_REFUSED) {
        snprintf(why, n, "%s: no option of that name to check it by", o->name);  /* a table's mistake */
        return -1;
    }
    union {
        long long k;
        double x;
        void *p;
        char bytes[256];
    } scratch;
    if (!store(c, l, &scratch, v, why, n)) return 0;
    if (!why[0]) {
        char buf[256];
        snprintf(why, n, "%s must be %s, got '%s'", o->name, want_of(l, buf, sizeof buf), v);
    }
    return -1;
}

/* The value v of option o into its field: 0 ok, -1 bad (why may say why). */
static int store(const hm_command *c, const hm_opt *o, void *dst, const char *v, char *why, size_t n) {
    double x;
    long long k;
    switch (o->kind) {
    case HM_OPT_STR:
        if (o->like && check_like(c, o, v, why, n)) return -1;
        *(const char **)dst = v;
        return 0;
    case HM_OPT_INT:
    case HM_OPT_LLONG:
        if (whole(v, &k) || (double)k < o->lo || (double)k > o->hi) return -1;
        if (o->kind == HM_OPT_INT) *(int *)dst = (int)k;
        else *(long long *)dst = k;
        return 0;
    case HM_OPT_REAL:
    case HM_OPT_FLOAT:
        if (number(v, &x) || x < o->lo || (o->open_lo && x == o->lo) || x > o->hi || (o->open_hi && x == o->hi))
            return -1;
        if (o->kind == HM_OPT_REAL) *(double *)dst = x;
        else *(float *)dst = (float)x;
        return 0;
    case HM_OPT_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(v, o->choices[i])) {
                int val = o->values ? o->values[i] : i;
                if (o->as_bool) *(bool *)dst = val != 0;
                else *(int *)dst = val;
                return 0;
            }
        return -1;
    case HM_OPT_FN:
        return o->fn(v, dst, c->ctx, why, n);
    case HM_OPT_FLAG:
    case HM_OPT_REFUSED:
        break;
    }
    return -1;
}

/* The option called name among c's groups, its group's base and its index
 * over all groups (for the given-set); NULL if none. */
static const hm_opt *find(const hm_command *c, const char *name, size_t *base, int *index) {
    int k = 0;
    for (const hm_opt_group *g = c->groups; g->opts; g++)
        for (const hm_opt *o = g->opts; o->name; o++, k++)
            if (!strcmp(o->name, name)) {
                *base = g->base;
                *index = k;
                return o;
            }
    return NULL;
}

/* argv[*i], known to be option o: its value (if any) into args. 0, or 2
 * after printing the usage line. */
static int take(const hm_command *c, const hm_opt *o, size_t base, int argc, char **argv, int *i, void *args) {
    const char *a = argv[*i];
    void *dst = field(args, base, o);
    if (o->kind == HM_OPT_REFUSED) {
        fprintf(stderr, "hamer: %s: %s %s\n", c->cmd, a, o->want ? o->want : "is not taken here");
        return 2;
    }
    if (o->kind == HM_OPT_FLAG) {
        int val = o->clear ? 0 : o->set ? o->set : 1;
        if (o->as_bool) *(bool *)dst = val != 0;
        else *(int *)dst = val;
        return 0;
    }
    if (*i + 1 >= argc) {
        fprintf(stderr, "hamer: %s: option '%s' needs a value\n", c->cmd, a);
        return 2;
    }
    const char *v = argv[++*i];
    int nth = 0;
    if (o->repeat) {
        int *count = (int *)((char *)args + base + o->count_off);
        if (*count >= o->repeat) {
            fprintf(stderr, "hamer: %s: more than %d %s options\n", c->cmd, o->repeat, a);
            return 2;
        }
        nth = ++*count;
        dst = (char *)dst + (size_t)(nth - 1) * o->elem;
    }
    char why[512] = "";
    if (store(c, o, dst, v, why, sizeof why)) {
        char buf[256];
        if (why[0] && nth) fprintf(stderr, "hamer: %s: %s %d: %s\n", c->cmd, a, nth, why);
        else if (why[0]) fprintf(stderr, "hamer: %s: %s\n", c->cmd, why);
        else fprintf(stderr, "hamer: %s: %s must be %s, got '%s'\n", c->cmd, a, want_of(o, buf, sizeof buf), v);
        return 2;
    }
    return 0;
}

int hm_args_parse_one(const hm_command *c, int argc, char **argv, int *i, void *args) {
    size_t base = 0;
    int index;
    const hm_opt *o = find(c, argv[*i], &base, &index);
    return o ? take(c, o, base, argc, argv, i, args) : -1;
}

/* Whether the option called name was given (its index marked in given). */
static int was_given(const hm_command *c, const unsigned char *given, const char *name) {
    size_t base;
    int index;
    return find(c, name, &base, &index) && index < MAX_OPTS && given[index];
}

int hm_args_parse(const hm_command *c, int argc, char **argv, void *args) {
    unsigned char given[MAX_OPTS] = {0};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hm_args_help(c, stdout);
            return -1;
        }
        size_t base = 0;
        int index = 0;
        const hm_opt *o = find(c, a, &base, &index);
        if (!o) {
            fprintf(stderr, "hamer: %s: %s '%s' (see 'hamer %s --help')\n", c->cmd,
                    a[0] == '-' ? "unknown option" : "unexpected argument", a, c->cmd);
            return 2;
        }
        int rc = take(c, o, base, argc, argv, &i, args);
        if (rc) return rc;
        if (index < MAX_OPTS) given[index] = 1;
    }
    for (int k = 0; c->required && c->required[k]; k++)
        if (!was_given(c, given, c->required[k])) {
            fprintf(stderr, "hamer: %s: missing %s\n", c->cmd, c->required[k]);
            return 2;
        }
    for (int k = 0; c->exclusive && c->exclusive[k] && c->exclusive[k + 1]; k += 2)
        if (was_given(c, given, c->exclusive[k]) && was_given(c, given, c->exclusive[k + 1])) {
            fprintf(stderr, "hamer: %s: give %s or %s, not both\n", c->cmd, c->exclusive[k], c->exclusive[k + 1]);
            return 2;
        }
    return 0;
}

/* "  --name META   help" with the help's later lines under its first. */
static void print_opt(const hm_opt *o, FILE *f) {
    char head[96];
    snprintf(head, sizeof head, "  %s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
    const int col = 22;
    int n = (int)strlen(head);
    fputs(head, f);
    const char *h = o->help ? o->help : "";
    /* at least two spaces before the text, so that the name and its
     * value's name can be told from it */
    if (n + 2 > col) {
        fputc('\n', f);
        n = 0;
    }
    for (;;) {
        const char *nl = strchr(h, '\n');
        int len = nl ? (int)(nl - h) : (int)strlen(h);
        fprintf(f, "%*s%.*s\n", col - n, "", len, h);
        if (!nl) break;
        h = nl + 1;
        n = 0;
    }
}

void hm_args_help(const hm_command *c, FILE *f) {
    fputs(c->synopsis, f);
    if (c->about) fprintf(f, "\n%s", c->about);
    for (const hm_opt_group *g = c->groups; g->opts; g++) {
        /* untitled groups run on as one list */
        if (g == c->groups || g->title) fputc('\n', f);
        if (g->title) fprintf(f, "%s:\n", g->title);
        for (const hm_opt *o = g->opts; o->name; o++)
            if (o->kind != HM_OPT_REFUSED) print_opt(o, f);
    }
    if (c->epilog) fprintf(f, "\n%s", c->epilog);
}
