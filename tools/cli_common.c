/* cli_common.c - helpers shared by the subcommands. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "cli.h"

int hm_cli_fail(int code, const char *fmt, const char *arg) {
    fprintf(stderr, "hamer: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return code;
}

int hm_cli_parse_threads(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *s == 0 || *end || v < 1 || v > 1024) return -1;
    *out = (int)v;
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
