/* test_cuda_host.c - the CUDA backend's host side, which needs no GPU: the
 * shared object loads (or the backend says why not), the registry lists
 * it with its state, a model or state on a device that cannot run is
 * refused with the reason before any file is read, the plugin refuses a
 * library of another version, and the weights' layout on a device is
 * complete, aligned, without overlap, and bf16 exactly where fast wants it.
 *
 * Not run (exit 77) in a build without the CUDA backend (HAMER_CUDA=OFF).
 * The plugin is HAMER_CUDA_LIB when set (ctest sets it to the build's). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/plugin.h"
#include "check.h"
#include "hamer.h"

typedef int (*layout_fn)(const int cfg[12], int prec, hm_cu_slot *slots, int max, size_t *total);

static int cuda_index(void) {
    for (int i = 0, n = hamer_backend_count(); i < n; i++) {
        hamer_backend_info bi;
        if (hamer_backend_get(i, &bi) == HAMER_OK && !strcmp(bi.name, "cuda")) return i;
    }
    return -1;
}

/* What the library says of the backend here, and that it stays explicit. */
static int registry_and_refusals(int idx) {
    hamer_backend_info bi;
    CHECK(hamer_backend_get(idx, &bi) == HAMER_OK);
    CHECK((bi.n_devices > 0) == (bi.why == NULL));
    CHECK(strstr(hamer_system_info(), bi.n_devices > 0 ? "backends: cpu cuda" : "backends: cpu cuda (unavailable)"));
    printf("test_cuda_host: cuda backend: %d device(s)%s%s\n", bi.n_devices, bi.why ? "; unavailable: " : "",
           bi.why ? bi.why : "");
    if (bi.n_devices > 0) return 1;
    /* unavailable: a model for it is refused with the reason, before the
     * file is looked at (a missing file would be HAMER_E_IO) */
    hamer_model_params mp = hamer_model_default_params();
    mp.device = "cuda";
    CHECK(hamer_model_load("/nonexistent/hamer.ckpt", &mp) == NULL &&
          hamer_last_error_code() == HAMER_E_UNSUPPORTED && strstr(hamer_last_error(), "device 'cuda' is unavailable: ") &&
          strstr(hamer_last_error(), bi.why));
    mp.device = "cuda:3";
    CHECK(hamer_model_load("/nonexistent/hamer.ckpt", &mp) == NULL && hamer_last_error_code() == HAMER_E_UNSUPPORTED);
    return 0;
}

static int counted_code;
static char counted_msg[512];
static int record(int code, const char *fmt, va_list ap) {
    counted_code = code;
    vsnprintf(counted_msg, sizeof counted_msg, fmt, ap);
    return code;
}

/* The plugin refuses a host of another ABI or struct sizes. */
static void abi_check(void *so) {
    hm_plugin_entry_fn entry;
    void *sym = dlsym(so, HM_PLUGIN_ENTRY);
    memcpy(&entry, &sym, sizeof entry);
    CHECK(entry != NULL);
    if (!entry) return;
    hm_host bad = {.abi = HM_PLUGIN_ABI + 1, .backend_size = sizeof(hm_backend), .weights_size = sizeof(hm_weights),
                   .ctl_size = sizeof(hm_run_ctl), .config_size = sizeof(hm_config), .verr = record};
    CHECK(entry(&bad) == NULL && counted_code == HAMER_E_UNSUPPORTED && strstr(counted_msg, "another version"));
    bad.abi = HM_PLUGIN_ABI, bad.weights_size--;
    counted_code = 0;
    CHECK(entry(&bad) == NULL && counted_code == HAMER_E_UNSUPPORTED);
}

/* The block's layout for one config, both precisions. */
static void layout_check(layout_fn layout, const int cfg[12]) {
    const int depth = cfg[0], dim = cfg[1], mlp = cfg[3], hdepth = cfg[7], inner = cfg[10];
    size_t total[2] = {0, 0}, want_bf16 = (size_t)depth * (4 * (size_t)dim * dim + 2 * (size_t)dim * mlp) +
                                         (size_t)hdepth * 2 * inner * dim;
    for (int prec = 0; prec < 2; prec++) {
        int n = layout(cfg, prec, NULL, 0, &total[prec]);
        hm_cu_slot *s = calloc((size_t)n, sizeof *s);
        size_t again = 0, end = 0, bf16_elems = 0;
        CHECK(s && layout(cfg, prec, s, n, &again) == n && again == total[prec]);
        int aligned = 1, ordered = 1, named = 1;
        for (int i = 0; s && i < n; i++) {
            aligned &= s[i].offset % 256 == 0;
            ordered &= s[i].offset >= end && s[i].bytes > 0;
            named &= s[i].name && s[i].name[0];
            end = s[i].offset + s[i].bytes;
            if (s[i].bf16) bf16_elems += s[i].bytes / 2;
        }
        CHECK(aligned && ordered && named && end <= total[prec] && total[prec] - end < 256);
        /* 12 arrays a block, 16 a decoder layer, 5 + 2 + 2 + 1 + 6 + 1 others */
        CHECK(n == 12 * depth + 16 * hdepth + 17);
        CHECK(bf16_elems == (prec ? want_bf16 : 0));
        free(s);
    }
    /* bf16 halves exactly the wide matmuls (alignment aside) */
    CHECK(total[0] > total[1] && total[0] - total[1] >= want_bf16 * 2 - (size_t)256 * (4 * depth + hdepth));
}

int main(void) {
    int idx = cuda_index();
    if (idx < 0) {
        printf("test_cuda_host: not run: this build has no CUDA backend (HAMER_CUDA=OFF)\n");
        return 77;
    }
    registry_and_refusals(idx);
    const char *path = getenv("HAMER_CUDA_LIB");
    void *so = dlopen(path && *path ? path : "libhamer-cuda.so", RTLD_NOW | RTLD_LOCAL);
    CHECK(so != NULL);
    if (so) {
        abi_check(so);
        layout_fn layout;
        void *sym = dlsym(so, "hm_cu_layout");
        memcpy(&layout, &sym, sizeof layout);
        CHECK(layout != NULL);
        static const int full[12] = {32, 1280, 16, 5120, 16, 12, 192, 6, 1024, 8, 512, 1024};
        static const int small[12] = {2, 1280, 16, 5120, 16, 12, 192, 2, 1024, 8, 512, 1024};
        if (layout) {
            layout_check(layout, full);
            layout_check(layout, small);
            size_t t32, t16;
            layout(full, 0, NULL, 0, &t32);
            layout(full, 1, NULL, 0, &t16);
            printf("test_cuda_host: full-size model on a device: %.0f MB fp32, %.0f MB fast\n", t32 / 1048576.0,
                   t16 / 1048576.0);
        }
    }
    return check_summary();
}
