/* test_backend.c - the backend seam's contract: device names (parsed,
 * refused with one line naming why, never replaced by another device), the
 * registry as the public API lists it, a model and its states on the
 * device it was loaded for, and the forward through the interface equal
 * to the CPU backend called directly. */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "backend/backend.h"
#include "backend/cpu/cpu.h"
#include "check.h"
#include "hamer.h"

/* device parses to the CPU backend's device 0. */
static int is_cpu(const char *device) {
    const hm_backend *be;
    int dev;
    return hm_device_parse(device, &be, &dev) == HM_OK && be == &hm_backend_cpu && dev == 0;
}

/* device is refused with code and a one-line message containing want. */
static int refused(const char *device, int code, const char *want) {
    const hm_backend *be = (const hm_backend *)1;
    int dev = 7;
    int rc = hm_device_parse(device, &be, &dev);
    int ok = rc == code && clean_error(rc) && strstr(hm_errmsg(), want) && !be && dev == 0;
    if (!ok) fprintf(stderr, "  '%s': rc %d, '%s'\n", device ? device : "(null)", rc, hm_errmsg());
    return ok;
}

static void device_names(void) {
    CHECK(is_cpu(NULL) && is_cpu("") && is_cpu("cpu") && is_cpu("cpu:0"));
    CHECK(refused("cpu:1", HM_E_UNSUPPORTED, "the cpu backend has 1 device here"));
    CHECK(refused("gpu", HM_E_ARG, "unknown backend 'gpu' (this build has: cpu"));
    CHECK(refused("CPU", HM_E_ARG, "unknown backend 'CPU'"));
    CHECK(refused("cpu:", HM_E_ARG, "the index after ':' must be a number"));
    CHECK(refused("cpu:x", HM_E_ARG, "the index after ':' must be a number"));
    CHECK(refused("cpu:-1", HM_E_ARG, "the index after ':' must be a number"));
    CHECK(refused("cpu:1x", HM_E_ARG, "the index after ':' must be a number"));
    CHECK(refused("cpu:99999999999999999999", HM_E_ARG, "the index after ':' must be a number"));
    CHECK(refused(":0", HM_E_ARG, "expected NAME or NAME:INDEX"));
    char longname[200];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK(refused(longname, HM_E_ARG, "expected NAME or NAME:INDEX"));
    char name[32];
    CHECK(!strcmp(hm_device_name(&hm_backend_cpu, 0, name, sizeof name), "cpu"));
}

static void registry(void) {
    int n = hamer_backend_count();
    CHECK(n >= 1);
    hamer_backend_info info;
    memset(&info, 0x5a, sizeof info);
    CHECK(hamer_backend_get(0, &info) == HAMER_OK && !strcmp(info.name, "cpu") && info.n_devices == 1 && !info.why &&
          strstr(info.info, "kernels: "));
    int zero = 1;
    for (size_t i = 0; i < sizeof info.reserved; i++) zero &= info.reserved[i] == 0;
    CHECK(zero);
    for (int i = 1; i < n; i++) {
        /* another backend: available, or unavailable with the reason */
        CHECK(hamer_backend_get(i, &info) == HAMER_OK && info.name && info.name[0] &&
              (info.n_devices > 0) == (info.why == NULL) && (!info.why || info.why[0]));
    }
    CHECK(hamer_backend_get(n, &info) == HAMER_E_ARG && clean_error(HAMER_E_ARG));
    CHECK(hamer_backend_get(-1, &info) == HAMER_E_ARG && hamer_backend_get(0, NULL) == HAMER_E_ARG);
    CHECK(strstr(hamer_system_info(), "; backends: cpu") != NULL);
}

/* A model on an unknown or missing device is refused before the file is
 * read (a missing file would be HAMER_E_IO); states live on the model's
 * device. */
static void model_and_states(void) {
    hamer_model_params mp = hamer_model_default_params();
    CHECK(mp.device == NULL);
    mp.device = "nope:0";
    CHECK(hamer_model_load("/nonexistent/hamer.ckpt", &mp) == NULL && hamer_last_error_code() == HAMER_E_ARG &&
          strstr(hamer_last_error(), "unknown backend 'nope'"));
    mp.device = "cpu:3";
    CHECK(hamer_model_load(check_tiny_model(), &mp) == NULL && hamer_last_error_code() == HAMER_E_UNSUPPORTED &&
          strstr(hamer_last_error(), "device 'cpu:3' is unavailable"));
    mp.device = "cpu";
    hamer_model *m = hamer_model_load(check_tiny_model(), &mp);
    CHECK(m != NULL);
    if (!m) return;
    hamer_model_info mi;
    memset(&mi, 0x5a, sizeof mi);
    CHECK(hamer_model_get_info(m, &mi) == HAMER_OK && !strcmp(mi.device, "cpu") && !strcmp(mi.scheme, "fp32"));
    hamer_state_params sp = hamer_state_default_params();
    CHECK(sp.max_batch == 16 && sp.n_threads == 0 && !sp.device);
    sp.max_batch = 2, sp.n_threads = 1, sp.device = "cpu:0";
    hamer_state *st = hamer_state_new_with_params(m, &sp);
    CHECK(st != NULL);
    hamer_state_free(st);
    sp.device = "nope";
    CHECK(!hamer_state_new_with_params(m, &sp) && hamer_last_error_code() == HAMER_E_ARG);
    sp.device = NULL, sp.max_batch = 0;
    CHECK(!hamer_state_new_with_params(m, &sp) && hamer_last_error_code() == HAMER_E_ARG);
    hamer_model_free(m);
}

/* The generic forward through the interface gives what the CPU backend
 * computes when called directly, bit for bit (it is the same code: the
 * seam adds no arithmetic). */
static void forward_through_the_seam(void) {
    hamer_model *hm = hamer_model_load(check_tiny_model(), NULL);
    CHECK(hm != NULL);
    if (!hm) return;
    hamer_state *st = hamer_state_new(hm, 2, 1);
    enum { B = 2 };
    static uint8_t crops[B * HAMER_CROP_H * HAMER_CROP_W * 3];
    for (size_t i = 0; i < sizeof crops; i++) crops[i] = (uint8_t)(i * 131 + i / 7);
    float a[B * HAMER_N_PARAMS], b[B * HAMER_N_PARAMS];
    hamer_output out = {.params = a};
    CHECK(st && hamer_regress_u8(st, crops, B, &out) == HAMER_OK);
    /* the CPU backend on its own, through the same model's packing */
    hm_run_ctl ctl = {0};
    void *bs = NULL;
    const hm_model *m = hm_model_of(hm);
    CHECK(m->be == &hm_backend_cpu &&
          m->be->state_new(m->bm, &m->cfg, m->precision, 0, B, 1, &ctl, &bs) == HM_OK);
    CHECK(bs && m->be->forward(bs, crops, 1, B, b) == HM_OK && !memcmp(a, b, sizeof a));
    if (bs) m->be->state_free(bs);
    hamer_state_free(st);
    hamer_model_free(hm);
}

int main(void) {
    device_names();
    registry();
    model_and_states();
    forward_through_the_seam();
    return check_summary();
}
