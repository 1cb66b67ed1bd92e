/* backend_dl.c - the backends that live in shared objects of their own
 * (backend/plugin.h): their registry entries, which load the shared object
 * on first use and forward every call to it.
 *
 * Where the shared object is looked for, first found wins:
 *   1. $HAMER_<NAME>_LIB (e.g. HAMER_CUDA_LIB), a path: only there;
 *   2. beside the library, or the program linked with the static library
 *      (the folder of the file that holds this code: dladdr);
 *   3. the install's library folder (HM_PLUGIN_DIR, set by CMake);
 *   4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
 * The registry lists such a backend only when the build made its shared
 * object (HAMER_HAVE_CUDA: CMake's HAMER_CUDA).
 * A plugin that cannot be found or loaded, or that refuses this library,
 * makes its backend unavailable with the reason; nothing else changes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/plugin.h"
#include "core/util.h"

#ifndef HM_PLUGIN_DIR
#define HM_PLUGIN_DIR ""
#endif

typedef struct {
    const char *name;            /* the backend's name */
    const char *env;             /* the environment variable naming its file */
    const char *file;            /* its file name (with the ABI generation) */
    pthread_once_t once;
    const hm_backend *be;        /* the plugin's backend, once loaded */
    char why[1536];              /* why it is not, otherwise */
} plugin;

static int host_verr(int code, const char *fmt, va_list ap) {
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return hm_err(code, "%s", msg);
}

static const hm_host host = {
    .abi = HM_PLUGIN_ABI,
    .backend_size = sizeof(hm_backend),
    .weights_size = sizeof(hm_weights),
    .ctl_size = sizeof(hm_run_ctl),
    .config_size = sizeof(hm_config),
    .verr = host_verr,
    .now = hm_now,
    .raw_to_params = hm_raw_to_params,
};

/* The folder of the file that holds this code, with a trailing '/', or "". */
static void own_dir(char *buf, size_t n) {
    Dl_info info;
    buf[0] = 0;
    if (!dladdr((void *)own_dir, &info) || !info.dli_fname) return;
    const char *slash = strrchr(info.dli_fname, '/');
    if (slash) snprintf(buf, n, "%.*s/", (int)(slash - info.dli_fname), info.dli_fname);
}

/* dlopen the first candidate that loads. When none does: the error of the
 * first that exists but failed to load (a missing dependency, say), or
 * where it was looked for, in p->why. */
static void *open_plugin(plugin *p) {
    char dir[1024], path[1200], where[900];
    const char *env = getenv(p->env);
    size_t used = 0;
    p->why[0] = where[0] = 0;
#define TRY(candidate)                                                                                  \
    do {                                                                                                \
        void *h_ = dlopen(candidate, RTLD_NOW | RTLD_LOCAL);                                            \
        if (h_) return h_;                                                                              \
        const char *e_ = dlerror();                                                                     \
        if (!p->why[0] && e_ && !strstr(e_, "No such file"))                                            \
            snprintf(p->why, sizeof p->why, "%s", e_);                                                  \
        if (used < sizeof where)                                                                        \
            used += (size_t)snprintf(where + used, sizeof where - used, "%s%s", used ? ", " : "", candidate); \
    } while (0)
    if (env && *env) {
        TRY(env);
    } else {
        own_dir(dir, sizeof dir);
        if (dir[0]) {
            snprintf(path, sizeof path, "%s%s", dir, p->file);
            TRY(path);
        }
        if (HM_PLUGIN_DIR[0]) {
            snprintf(path, sizeof path, "%s/%s", HM_PLUGIN_DIR, p->file);
            TRY(path);
        }
        TRY(p->file);
    }
#undef TRY
    if (!p->why[0])
        snprintf(p->why, sizeof p->why, "not found (looked for %.700s%s)", where,
                 env && *env ? "" : " through the loader's path; $HAMER_CUDA_LIB names the file");
    return NULL;
}

static void load(plugin *p) {
    char errs[1536];
    void *h = open_plugin(p);
    if (!h) {
        snprintf(errs, sizeof errs, "%s", p->why);
        snprintf(p->why, sizeof p->why, "the %s backend's library %s did not load: %.1400s", p->name, p->file, errs);
        return;
    }
    hm_plugin_entry_fn entry;
    void *sym = dlsym(h, HM_PLUGIN_ENTRY);
    memcpy(&entry, &sym, sizeof entry);
    if (!entry) {
        snprintf(p->why, sizeof p->why, "%s has no entry %s", p->file, HM_PLUGIN_ENTRY);
        dlclose(h);
        return;
    }
    const hm_backend *be = entry(&host);
    if (!be) {
        snprintf(p->why, sizeof p->why, "%s", hm_errmsg());
        hm_errclear();
        dlclose(h);
        return;
    }
    p->be = be; /* the shared object stays loaded for the process */
}

static plugin cuda = {.name = "cuda", .env = "HAMER_CUDA_LIB", .file = "libhamer-cuda.so", .once = PTHREAD_ONCE_INIT};

static void load_cuda(void) { load(&cuda); }

/* The plugin's backend, or NULL with the reason recorded. */
static const hm_backend *cuda_be(void) {
    pthread_once(&cuda.once, load_cuda);
    if (!cuda.be) hm_err(HM_E_UNSUPPORTED, "%s", cuda.why);
    return cuda.be;
}

/* The registry entry: every call goes to the plugin. Only devices() and
 * check() can be reached without a loaded plugin (a model is made only
 * on a device devices() counted). */
static int dl_devices(void) {
    const hm_backend *be = cuda_be();
    return be ? be->devices() : HM_E_UNSUPPORTED;
}
static int dl_check(int dev, int prec) {
    const hm_backend *be = cuda_be();
    return be ? be->check(dev, prec) : HM_E_UNSUPPORTED;
}
static const char *dl_scheme(int prec) {
    const hm_backend *be = cuda_be();
    return be ? be->scheme(prec) : "unavailable";
}
static const char *dl_describe(void) {
    const hm_backend *be = cuda_be();
    return be ? be->describe() : "unavailable";
}
static int dl_pack(const hm_weights *w, int prec, int dev, void **bm) { return cuda_be()->pack(w, prec, dev, bm); }
static void dl_model_free(void *bm) { cuda_be()->model_free(bm); }
static int dl_state_new(const void *bm, const hm_config *c, int prec, int dev, int max_batch, int nthreads,
                        hm_run_ctl *ctl, void **bs) {
    return cuda_be()->state_new(bm, c, prec, dev, max_batch, nthreads, ctl, bs);
}
static void dl_state_free(void *bs) { cuda_be()->state_free(bs); }
static int dl_forward(void *bs, const void *crops, int is_u8, int B, float *params) {
    return cuda_be()->forward(bs, crops, is_u8, B, params);
}

const hm_backend hm_backend_cuda = {
    .name = "cuda",
    .devices = dl_devices,
    .check = dl_check,
    .scheme = dl_scheme,
    .describe = dl_describe,
    .pack = dl_pack,
    .visit = NULL, /* no packed model files: it loads checkpoints */
    .blank = NULL,
    .model_free = dl_model_free,
    .state_new = dl_state_new,
    .state_free = dl_state_free,
    .forward = dl_forward,
};
