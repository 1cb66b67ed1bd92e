/* cli_common.c - helpers shared by the subcommands. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "cli/cli.h"

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
