/* plugin.h - a backend built as a shared object of its own and loaded by
 * the library on first use (dlopen), so that libhamer.so and every program
 * linking it never need that backend's runtime (the CUDA runtime, cuBLAS):
 * a machine without them reports the backend as unavailable, with the
 * reason, and everything else works.
 *
 * The shared object exports one function, HM_PLUGIN_ENTRY, that takes the
 * host's services (the library's error slot, clock and host maths, which
 * a plugin cannot link against: libhamer.so exports only hamer_*) and
 * returns its hm_backend. Both sides are built from the same tree: the ABI
 * number and the sizes of the structs they share must match, or the plugin
 * is refused with a line saying so.
 */
#ifndef HM_BACKEND_PLUGIN_H
#define HM_BACKEND_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>

#include "backend/backend.h"

/* Bumped with any change to hm_backend, hm_weights, hm_run_ctl or hm_host. */
#define HM_PLUGIN_ABI 1
#define HM_PLUGIN_ENTRY "hm_backend_plugin"

typedef struct hm_host {
    int abi;                     /* HM_PLUGIN_ABI */
    size_t backend_size, weights_size, ctl_size, config_size;  /* sizeof of the shared structs */
    /* Record an error (as hm_err): returns code. */
    int (*verr)(int code, const char *fmt, va_list ap);
    /* The monotonic clock (hm_now), seconds. */
    double (*now)(void);
    /* The readout [B, 109] -> parameters [B, 157] (hm_raw_to_params). */
    void (*raw_to_params)(const float *raw, float *params, int B);
} hm_host;

/* The entry's type: NULL (with the reason recorded through host->verr)
 * when the plugin refuses the host. */
typedef const hm_backend *(*hm_plugin_entry_fn)(const hm_host *host);

#endif
