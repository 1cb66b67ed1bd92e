/* args.c - the option tables' parser and --help printer (args.h), and the
 * groups the commands share. */
#include "common/args.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "hamer.h"

static void *field(void *args, size_t base, const hm_opt *o) { return (char *)args + base + o->off; }

/* "an integer in 1..1024", "a number in (0, 16]", "fp32 or fast" */
static const char *want_of(const hm_opt *o, char *buf, size_t n) {
    if (o->want) return o->want;
    switch (o->kind) {
    case HM_OPT_INT:
        snprintf(buf, n, "an integer in %.0f..%.0f", o->lo, o->hi);
        return buf;
    case HM_OPT_REAL:
    case HM_OPT_FLOAT:
        snprintf(buf, n, "a number in %s%g, %g]", o->open_lo ? "(" : "[", o->lo, o->hi);
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

/* A whole number / a finite number written as such (no hex, no inf). */
static int number(const char *s, double *out) {
    char *end;
    if (!*s || strspn(s, "0123456789.eE+-") != strlen(s)) return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v)) return -1;
    *out = v;
    return 0;
}

/* The value v of option o into its field: 0 ok, -1 bad. */
static int store(const hm_command *c, const hm_opt *o, void *dst, const char *v) {
    double x;
    switch (o->kind) {
    case HM_OPT_STR:
        *(const char **)dst = v;
        return 0;
    case HM_OPT_INT:
        if (number(v, &x) || x != floor(x) || x < o->lo || x > o->hi) return -1;
        *(int *)dst = (int)x;
        return 0;
    case HM_OPT_REAL:
    case HM_OPT_FLOAT:
        if (number(v, &x) || x < o->lo || (o->open_lo && x == o->lo) || x > o->hi) return -1;
        if (o->kind == HM_OPT_REAL) *(double *)dst = x;
        else *(float *)dst = (float)x;
        return 0;
    case HM_OPT_CHOICE:
        for (int i = 0; o->choices[i]; i++)
            if (!strcmp(v, o->choices[i])) {
                *(int *)dst = o->values ? o->values[i] : i;
                return 0;
            }
        return -1;
    case HM_OPT_FN:
        return o->fn(v, dst, c->ctx);
    case HM_OPT_FLAG:
        break;
    }
    return -1;
}

static const hm_opt *find(const hm_command *c, const char *name, size_t *base) {
    for (const hm_opt_group *g = c->groups; g->opts; g++)
        for (const hm_opt *o = g->opts; o->name; o++)
            if (!strcmp(o->name, name)) {
                *base = g->base;
                return o;
            }
    return NULL;
}

int hm_args_parse(const hm_command *c, int argc, char **argv, void *args) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            hm_args_help(c, stdout);
            return -1;
        }
        size_t base = 0;
        const hm_opt *o = find(c, a, &base);
        if (!o) {
            fprintf(stderr, "hamer: %s: %s '%s' (see 'hamer %s --help')\n", c->cmd,
                    a[0] == '-' ? "unknown option" : "unexpected argument", a, c->cmd);
            return 2;
        }
        void *dst = field(args, base, o);
        if (o->kind == HM_OPT_FLAG) {
            *(int *)dst = o->set ? o->set : 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "hamer: %s: option '%s' needs a value\n", c->cmd, a);
            return 2;
        }
        const char *v = argv[++i];
        if (store(c, o, dst, v)) {
            char buf[256];
            fprintf(stderr, "hamer: %s: %s must be %s, got '%s'\n", c->cmd, a, want_of(o, buf, sizeof buf), v);
            return 2;
        }
    }
    for (int k = 0; c->required && c->required[k]; k++) {
        size_t base = 0;
        const hm_opt *o = find(c, c->required[k], &base);
        if (o && o->kind == HM_OPT_STR && !*(const char **)field(args, base, o)) {
            fprintf(stderr, "hamer: %s: missing %s\n", c->cmd, o->name);
            return 2;
        }
    }
    return 0;
}

/* "  --name META   help" with the help's later lines under its first. */
static void print_opt(const hm_opt *o, FILE *f) {
    char head[64];
    snprintf(head, sizeof head, "  %s%s%s", o->name, o->meta ? " " : "", o->meta ? o->meta : "");
    const int col = 22;
    int n = (int)strlen(head);
    fputs(head, f);
    const char *h = o->help ? o->help : "";
    if (n >= col) {
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
        for (const hm_opt *o = g->opts; o->name; o++) print_opt(o, f);
    }
    if (c->epilog) fprintf(f, "\n%s", c->epilog);
}

/* ---- shared groups ---------------------------------------------------------- */

static const char *const precisions[] = {"fp32", "fast", NULL};
static const int precision_values[] = {HAMER_PRECISION_FP32, HAMER_PRECISION_FAST};

const hm_opt hm_opts_model[] = {
    {.name = "--model", .meta = "M", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, model),
     .help = "the released hamer.ckpt (a PyTorch Lightning\ncheckpoint), or a packed model file ('hamer convert')"},
    {.name = "--mano", .meta = "FILE.npz", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, mano),
     .help = "MANO buffers (v_template, shapedirs, posedirs,\n"
             "J_regressor, parents, lbs_weights, faces_tensor) when\n"
             "the checkpoint has no mano.* entries"},
    {.name = "--precision", .meta = "P", .kind = HM_OPT_CHOICE, .off = offsetof(hm_model_args, precision),
     .choices = precisions, .values = precision_values,
     .help = "fp32 (default: the PyTorch model to float precision)\n"
             "or fast (the gated low-precision scheme; 'hamer\n"
             "--version' names it)"},
    {.name = "--device", .meta = "D", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, device),
     .help = "where the model runs: cpu (default) or a backend this\n"
             "build has, as NAME or NAME:INDEX ('hamer --version'\n"
             "lists them)"},
    {0},
};

const hm_opt hm_opts_threads[] = {
    {.name = "--threads", .meta = "N", .kind = HM_OPT_INT, .off = offsetof(hm_model_args, threads), .lo = 1,
     .hi = 1024, .help = "worker threads (default: the online CPUs)"},
    {0},
};

void hm_model_args_defaults(hm_model_args *m) {
    memset(m, 0, sizeof *m);
    m->precision = HAMER_PRECISION_FP32;
}
