/* check.h - the tiny harness the C unit tests share.
 *
 * CHECK(c) counts a pass or prints the failing expression with the file,
 * line and the library's last error message; check_summary() prints the
 * closing "N passed, M failed" line and gives main's exit status. */
#ifndef HM_TEST_CHECK_H
#define HM_TEST_CHECK_H

#include <stdio.h>
#include <string.h>
#include "core/util.h"

static int npass, nfail;

#define CHECK(c)                                                                                          \
    do {                                                                                                  \
        if (c) npass++;                                                                                   \
        else {                                                                                            \
            nfail++;                                                                                      \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__, __LINE__, #c,         \
                    hm_errmsg());                                                                         \
        }                                                                                                 \
    } while (0)

/* CHECKF(c, fmt, ...): CHECK with a printf-style description of the case. */
#define CHECKF(c, ...)                                                                                    \
    do {                                                                                                  \
        if (c) npass++;                                                                                   \
        else {                                                                                            \
            nfail++;                                                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                          \
            fprintf(stderr, __VA_ARGS__);                                                                 \
            fputc('\n', stderr);                                                                          \
        }                                                                                                 \
    } while (0)

/* A failure must come with a one-line, non-empty message. */
static inline int clean_error(int rc) {
    const char *m = hm_errmsg();
    return rc != HM_OK && m[0] && !strchr(m, '\n');
}

/* The tiny checkpoint with MANO among the fuzzers' seeds
 * (fuzz/corpus/model/tiny_mano.ckpt), found from this file's location. */
static inline const char *check_tiny_model(void) {
    static char path[4096];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(path, sizeof path, "%.*s/../../fuzz/corpus/model/tiny_mano.ckpt", slash ? (int)(slash - f) : 1,
             slash ? f : ".");
    return path;
}

static inline int check_summary(void) {
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}

#endif
