/* cli_common.c - helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"
#include "core/fileio.h"
#include "core/util.h"

int hm_cli_fail(int code, const char *fmt, const char *arg) {
    fprintf(stderr, "hamer: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return code;
}

int hm_cli_parse_int(const char *s, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

int hm_cli_parse_threads(const char *s, int *out) { return hm_cli_parse_int(s, 1, 1024, out); }

int hm_cli_parse_rescale(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    /* Decimal only: strtod would also take hex floats, "inf" and "nan". */
    for (const char *p = s; p < end; p++)
        if (!strchr("0123456789.eE+-", *p)) return -1;
    if (end == s || *end || !(v > 0 && v <= HAMER_MAX_RESCALE)) return -1;
    *out = v;
    return 0;
}

int hm_cli_parse_precision(const char *s, int *out) {
    if (!strcmp(s, "fp32")) *out = HAMER_PRECISION_FP32;
    else if (!strcmp(s, "fast")) *out = HAMER_PRECISION_FAST;
    else return -1;
    return 0;
}

double hm_cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

hamer_model *hm_cli_load_model(const char *path, const char *mano, int precision) {
    hamer_model_params mp = hamer_model_default_params();
    mp.mano_path = mano;
    mp.progress = 1;
    mp.precision = precision;
    return hamer_model_load(path, &mp);
}

double hm_cli_pcc(const float *a, const float *b, size_t n) {
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) ma += a[i], mb += b[i];
    ma /= (double)n, mb /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double x = a[i] - ma, y = b[i] - mb;
        sab += x * y, saa += x * x, sbb += y * y;
    }
    return saa > 0 && sbb > 0 ? sab / sqrt(saa * sbb) : (saa == sbb ? 1.0 : 0.0);
}

void hm_cli_detect_defaults(hm_cli_detect_args *d) {
    d->dir = NULL;
    d->lite = 0;
    d->params = hamer_detect_default_params();
}

int hm_cli_detect_option(int argc, char **argv, int *i, hm_cli_detect_args *d, const char *cmd) {
    const char *o = argv[*i];
    if (!strcmp(o, "--lite")) return d->lite = 1, 0;
    if (!strcmp(o, "--single-pass")) return d->params.tiles = 0, 0;
    if (strcmp(o, "--detector") && strcmp(o, "--max-hands") && strcmp(o, "--min-score")) return -1;
    if (*i + 1 >= argc) {
        fprintf(stderr, "hamer: %s: option '%s' needs a value\n", cmd, o);
        return 2;
    }
    const char *v = argv[++*i];
    if (!strcmp(o, "--detector")) {
        d->dir = v;
    } else if (!strcmp(o, "--max-hands")) {
        if (hm_cli_parse_int(v, 1, HAMER_MAX_HANDS, &d->params.max_hands)) {
            fprintf(stderr, "hamer: %s: --max-hands must be an integer in 1..%d, got '%s'\n", cmd, HAMER_MAX_HANDS, v);
            return 2;
        }
    } else {
        char *end;
        double s = strtod(v, &end);
        if (end == v || *end || strspn(v, "0123456789.eE+-") != strlen(v) || !(s > 0 && s < 1)) {
            fprintf(stderr, "hamer: %s: --min-score must be a number in (0, 1), got '%s'\n", cmd, v);
            return 2;
        }
        d->params.min_score = (float)s;
    }
    return 0;
}

hamer_detector *hm_cli_load_detector(const hm_cli_detect_args *d) {
    hamer_detector_params p = hamer_detector_default_params();
    p.dir = d->dir;
    p.lite = d->lite;
    return hamer_detector_load(&p);
}

/* The whole file at path (at most max bytes) as a NUL-terminated buffer;
 * NULL with a message in err. */
char *hm_cli_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || (size_t)n > max) {
        snprintf(err, errlen, "'%s': unreadable or larger than %zu MB", path, max >> 20);
    } else if (rewind(f), !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read '%s'", path);
        free(buf);
        buf = NULL;
    } else {
        buf[n] = 0;
        *len = (size_t)n;
    }
    fclose(f);
    return buf;
}

int hm_cli_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (hm_file_write_atomic(path, data, len) == HM_OK) return 0;
    snprintf(err, errlen, "%s", hm_errmsg());
    return -1;
}

int hm_cli_check_outputs(const char *cmd, const char *const *outs, int nout, const char *const *ins, int nin) {
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        for (int j = 0; j < nin; j++)
            if (ins[j] && hm_path_same(outs[i], ins[j])) {
                fprintf(stderr, "hamer: %s: output '%s' is the input '%s': refusing to overwrite an input\n", cmd,
                        outs[i], ins[j]);
                return 2;
            }
        for (int j = 0; j < i; j++)
            if (outs[j] && hm_path_same(outs[i], outs[j])) {
                fprintf(stderr, "hamer: %s: outputs '%s' and '%s' are the same file: one would be lost\n", cmd,
                        outs[j], outs[i]);
                return 2;
            }
    }
    /* Opening the temp file and dropping it at once finds an output that
     * cannot be written (missing directory, a directory or device at the
     * path) before the model is loaded, and leaves nothing behind. */
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        hm_outfile o;
        if (hm_outfile_open(&o, outs[i])) {
            fprintf(stderr, "hamer: %s: %s (nothing written)\n", cmd, hm_errmsg());
            return 1;
        }
        hm_outfile_abort(&o);
    }
    return 0;
}

int hm_cli_write_outputs(const char *cmd, const hm_cli_output *outs, int n) {
    hm_outfile *o = calloc(n > 0 ? (size_t)n : 1, sizeof *o);
    if (!o) {
        fprintf(stderr, "hamer: %s: out of memory (nothing written)\n", cmd);
        return 1;
    }
    int i, rc = 0;
    for (i = 0; i < n && !rc; i++) {
        rc = hm_outfile_open(&o[i], outs[i].path);
        if (!rc) rc = hm_outfile_write(&o[i], outs[i].data, outs[i].len);
        if (!rc) rc = hm_outfile_finish(&o[i]);
    }
    if (rc) {
        fprintf(stderr, "hamer: %s: %s (nothing written)\n", cmd, hm_errmsg());
        for (i = 0; i < n; i++) hm_outfile_abort(&o[i]);
        free(o);
        return 1;
    }
    /* Everything is complete on disk; only renames are left, which fail
     * only if the directory changed under us. Then say what is in place. */
    for (i = 0; i < n && !rc; i++) rc = hm_outfile_commit(&o[i]);
    if (rc) {
        fprintf(stderr, "hamer: %s: %s; ", cmd, hm_errmsg());
        int failed = i - 1;
        if (failed == 0) fputs("nothing written", stderr);
        else {
            fputs("written:", stderr);
            for (int k = 0; k < failed; k++) fprintf(stderr, " %s", outs[k].path);
        }
        fputs("; not written:", stderr);
        for (int k = failed; k < n; k++) fprintf(stderr, " %s", outs[k].path);
        fputc('\n', stderr);
        for (int k = failed + 1; k < n; k++) hm_outfile_abort(&o[k]);
    }
    free(o);
    return rc ? 1 : 0;
}
