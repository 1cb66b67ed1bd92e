/* util.h - error reporting and small helpers shared by every module.
 *
 * Errors: a failing internal function calls hm_err() (which records a one-line
 * message in thread-local storage and returns the code) and returns that code
 * or NULL. The public API exposes the message through hamer_last_error().
 */
#ifndef HM_UTIL_H
#define HM_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Error codes; the same values are public in include/hamer.h. */
enum {
    HM_OK = 0,
    HM_E_ARG = -1,         /* bad argument from the caller */
    HM_E_IO = -2,          /* file missing / unreadable */
    HM_E_FORMAT = -3,      /* malformed file (zip, pickle, npy, ...) */
    HM_E_SHAPE = -4,       /* tensor of wrong shape / dtype / layout */
    HM_E_NOMEM = -5,       /* allocation failed */
    HM_E_UNSUPPORTED = -6, /* valid request this build cannot do */
    HM_E_NOMANO = -7,      /* mesh output requested, no MANO buffers */
    HM_E_CANCELLED = -8,   /* the state's cancel callback said stop */
};

/* Record "fmt..." as this thread's last error; returns code. */
int hm_err(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* This thread's last error message ("" if none). */
const char *hm_errmsg(void);
/* This thread's last error code (HM_OK if none). */
int hm_errcode(void);
/* Clear this thread's last error. */
void hm_errclear(void);

/* The reserved bytes at the end of a public *_params struct (n of them at
 * reserved): HM_OK when all are zero, else HM_E_ARG with the message
 * "TYPE: reserved bytes must be zero (use <TYPE's default function>; ...)",
 * type being the struct's name ("hamer_detect_params"). A caller built
 * against a newer header that set a field this library lacks fails here
 * instead of being silently ignored. */
int hm_check_reserved(const void *reserved, size_t n, const char *type);
#define HM_CHECK_RESERVED(params, type) hm_check_reserved((params)->reserved, sizeof (params)->reserved, type)

/* 64-byte aligned allocation (NULL + hm_err on failure); free with hm_free. */
void *hm_alloc(size_t bytes);
void hm_free(void *p);
/* Tests: the hm_alloc call after `after` more successful ones fails (as
 * out of memory); after < 0 disarms. */
void hm_alloc_test_fail(int after);

/* Seconds on CLOCK_MONOTONIC: the one clock for timings, timeouts and
 * latencies (they must not follow wall-clock jumps). */
double hm_now(void);
/* The calling thread's CPU time in seconds (what preemption by other
 * processes does not inflate). */
double hm_thread_cpu(void);

#endif
