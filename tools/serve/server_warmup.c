/* server_warmup.c - `hamer serve`: load the model, create the state pool,
 * run every path once and gate the precision before declaring readiness.
 *
 * Runs on its own thread so /healthz and /readyz answer while the
 * checkpoint loads. The self-check regresses one fixed synthetic crop on
 * every worker state and compares it with a reference computed another way:
 *   - precision fp32: the state's plain verification mode (the textbook
 *     formulation: no folding, full attention), which must agree almost
 *     exactly — a larger gap means a broken kernel, not rounding;
 *   - precision fast: the same checkpoint (or --reference, which a packed
 *     fast file needs) loaded a second time in fp32 (for the check only,
 *     freed at once), gated at params PCC >= 0.999, the gate `hamer bench`
 *     reports against.
 * Then every state runs hamer_predict on a synthetic picture (decode-free
 * crop, regress, MANO, camera), and one overlay and one side view are
 * rendered, so the first real request pays no first-touch costs.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "common/common.h"
#include "serve/server.h"

#define GATE_FAST_PCC 0.999
/* fp32 vs the plain path: measured differences are ~1e-6 relative; 1e-4
 * leaves room for other CPUs' kernels while still catching wrong math. */
#define GATE_FP32_PCC 0.999999
#define GATE_FP32_REL 1e-4


/* max |a-b| / max(1, max |b|); NaN anywhere gives +inf. */
static double max_rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 1;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) return INFINITY;
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return d / m;
}

/* A fixed normalised crop [1,3,256,192]: smooth structure plus texture in
 * the range of normalised photographs; no randomness so every run checks
 * the same input. */
static void fixed_crop(float *x) {
    for (int c = 0; c < 3; c++)
        for (int y = 0; y < HAMER_CROP_H; y++)
            for (int u = 0; u < HAMER_CROP_W; u++) {
                double v = 1.2 * sin(0.031 * u * (c + 1) + 0.017 * y) + 0.6 * cos(0.011 * (u + 2 * y) * (3 - c)) +
                           0.25 * (((u * 7 + y * 13 + c * 5) % 17) - 8) / 8.0;
                x[((size_t)c * HAMER_CROP_H + y) * HAMER_CROP_W + u] = (float)v;
            }
}

static void set_reason(hm_srv *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(hm_srv *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&s->mu);
    vsnprintf(s->reason, sizeof s->reason, fmt, ap);
    pthread_mutex_unlock(&s->mu);
    va_end(ap);
}

/* One forward of the fixed crop: params [157] and vertices [778*3]. */
static int forward(hamer_state *st, const float *crop, float *params, float *verts) {
    hamer_output out = {0};
    out.params = params;
    out.vertices = verts;
    return hamer_regress_f32(st, crop, 1, &out);
}

/* The precision gate. 0 passed; -1 failed (reason set). */
static int self_check(hm_srv *s, hamer_state **states, int k) {
    const size_t NP = HAMER_N_PARAMS, NV = (size_t)HAMER_N_VERTS * 3;
    float *crop = malloc(sizeof(float) * 3 * HAMER_CROP_H * HAMER_CROP_W);
    float *ref = malloc(sizeof(float) * (NP + NV)), *got = malloc(sizeof(float) * (NP + NV));
    int rc = -1;
    if (!crop || !ref || !got) {
        set_reason(s, "self-check: out of memory");
        goto out;
    }
    fixed_crop(crop);
    const char *against;
    if (s->cfg.precision == HAMER_PRECISION_FP32) {
        against = "the plain fp32 path";
        hamer_state_set_plain(states[0], 1);
        int r = forward(states[0], crop, ref, ref + NP);
        hamer_state_set_plain(states[0], 0);
        if (r) {
            set_reason(s, "self-check: plain forward failed: %s", hamer_last_error());
            goto out;
        }
    } else {
        against = s->cfg.reference_path ? "an fp32 load of --reference" : "an fp32 load of the same checkpoint";
        hamer_model_params mp = hamer_model_default_params();
        mp.mano_path = s->cfg.mano_path;
        mp.precision = HAMER_PRECISION_FP32;
        mp.device = s->cfg.device; /* the gate compares on the device that serves */
        hamer_model *m32 = hamer_model_load(s->cfg.reference_path ? s->cfg.reference_path : s->cfg.model_path, &mp);
        hamer_state *st32 = m32 ? hamer_state_new(m32, 1, s->cfg.threads) : NULL;
        int r = st32 ? forward(st32, crop, ref, ref + NP) : -1;
        /* A packed fast file holds no fp32 weights: say where they can come from. */
        if (r) set_reason(s, "self-check: fp32 reference forward failed: %s%s", hamer_last_error(),
                          s->cfg.reference_path ? "" : " (give the checkpoint with --reference)");
        hamer_state_free(st32);
        hamer_model_free(m32);
        if (r) goto out;
    }
    double worst_pcc = 1, worst_rel = 0;
    for (int i = 0; i < k; i++) {
        if (forward(states[i], crop, got, got + NP)) {
            set_reason(s, "self-check: forward on worker state %d failed: %s", i, hamer_last_error());
            goto out;
        }
        worst_pcc = fmin(worst_pcc, hm_tool_pcc(got, ref, NP));
        worst_rel = fmax(worst_rel, max_rel(got, ref, NP + NV));
        if (isnan(worst_pcc)) worst_pcc = 0;
    }
    int fp32 = s->cfg.precision == HAMER_PRECISION_FP32;
    double gate = fp32 ? GATE_FP32_PCC : GATE_FAST_PCC;
    int pass = worst_pcc >= gate && (!fp32 || worst_rel <= GATE_FP32_REL);
    pthread_mutex_lock(&s->mu);
    s->selfcheck_metric = fp32 ? "params_pcc_vs_plain_fp32" : "params_pcc_vs_fp32";
    s->selfcheck_value = worst_pcc;
    s->selfcheck_gate = gate;
    pthread_mutex_unlock(&s->mu);
    if (pass) {
        set_reason(s, "self-check passed against %s: params PCC %.7f (gate %g), max relative difference %.2e", against,
                   worst_pcc, gate, worst_rel);
        rc = 0;
    } else if (fp32) {
        set_reason(s,
                   "self-check FAILED against %s: params PCC %.7f (gate %g), max relative difference %.2e (gate %g); "
                   "the kernels disagree with the reference formulation",
                   against, worst_pcc, gate, worst_rel, GATE_FP32_REL);
    } else {
        set_reason(s, "self-check FAILED against %s: params PCC %.7f below the gate %g", against, worst_pcc, gate);
    }
out:
    free(crop);
    free(ref);
    free(got);
    return rc;
}

/* hamer_predict on a synthetic picture through every state, plus both
 * renderings: the first real request then finds everything touched. */
static int exercise_paths(hm_srv *s, hamer_state **states, int k) {
    const int W = 320, H = 240;
    uint8_t *rgb = malloc((size_t)W * H * 3);
    if (!rgb) {
        set_reason(s, "warm-up: out of memory");
        return -1;
    }
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++) rgb[((size_t)y * W + x) * 3 + c] = (uint8_t)((x * (c + 1) + y * (3 - c)) & 255);
    hamer_box boxes[2] = {{{60, 40, 160, 200}, 1}, {{170, 50, 270, 190}, 0}};
    hamer_hand hands[2];
    hamer_predict_params pp = hamer_predict_default_params();
    int rc = 0;
    for (int i = 0; i < k && !rc; i++) {
        if (hamer_predict(states[i], rgb, W, H, boxes, 2, &pp, hands, NULL) || !hands[0].ok || !hands[1].ok) {
            set_reason(s, "warm-up: predict on worker state %d failed: %s", i,
                       !hands[0].ok ? hands[0].error : !hands[1].ok ? hands[1].error : hamer_last_error());
            rc = -1;
        }
    }
    for (int side = 0; side < 2 && !rc; side++) {
        uint8_t *png = NULL;
        size_t len = 0;
        if (hamer_render_png(s->model, rgb, W, H, hands, 2, side, &png, &len)) {
            set_reason(s, "warm-up: render failed: %s", hamer_last_error());
            rc = -1;
        }
        hamer_free(png);
    }
    char *json = rc ? NULL : hamer_result_json(W, H, hands, 2, 1, NULL);
    if (!rc && !json) {
        set_reason(s, "warm-up: result JSON failed: %s", hamer_last_error());
        rc = -1;
    }
    hamer_free(json);
    free(rgb);
    return rc;
}

/* The files the warm-up loads must be regular files: the loader would
 * wait on a FIFO for a writer (and a device or socket is no model). 0, or
 * -1 with the reason set and logged. */
static int plain_inputs(hm_srv *s) {
    const char *opt[] = {"--model", "--mano", "--reference"};
    const char *path[] = {s->cfg.model_path, s->cfg.mano_path, s->cfg.reference_path};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (!path[i] || stat(path[i], &st) || S_ISREG(st.st_mode)) continue;   /* missing: the loader says so */
        hm_srv_log("cannot load the model: %s '%s' is not a regular file", opt[i], path[i]);
        set_reason(s, "cannot load the model: %s '%s' is not a regular file", opt[i], path[i]);
        return -1;
    }
    return 0;
}

/* Thread body: load, create the state pool, self-check, exercise, start the workers, then
 * mark the server ready (or failed: unready for good; or fatal: the process exits 1). */
void *hm_srv_warmup_main(void *arg) {
    hm_srv *s = arg;
    set_reason(s, "loading the model from %s", s->cfg.model_path);
    double t0 = hm_now();
    if (plain_inputs(s)) {
        atomic_store(&s->fatal, 1);
        return NULL;
    }
    hamer_model_params mp = hamer_model_default_params();
    mp.mano_path = s->cfg.mano_path;
    mp.precision = s->cfg.precision;
    mp.device = s->cfg.device;
    hamer_model *m = hamer_model_load(s->cfg.model_path, &mp);
    if (!m) {
        hm_srv_log("cannot load the model: %s", hamer_last_error());
        set_reason(s, "cannot load the model: %s", hamer_last_error());
        atomic_store(&s->fatal, 1);
        return NULL;
    }
    hamer_model_info info;
    hamer_model_get_info(m, &info);
    if (!info.has_mano) {
        hm_srv_log("the model has no MANO buffers (mano.*), so no mesh can be computed: %s", hm_tool_mano_advice);
        hamer_model_free(m);
        atomic_store(&s->fatal, 1);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    s->model = m;
    s->info = info;
    s->load_s = hm_now() - t0;
    pthread_mutex_unlock(&s->mu);
    hm_srv_log("model loaded in %.2f s: ViT %d x %d, head %d x %d, precision %s (%s), kernels %s", s->load_s,
               info.vit_depth, info.vit_dim, info.head_depth, info.head_dim,
               info.precision == HAMER_PRECISION_FAST ? "fast" : "fp32", info.scheme, info.isa);
    atomic_store(&s->phase, HM_SRV_WARMING);
    set_reason(s, "warming up");

    /* The detector: once, shared read-only; a state per worker below. A
     * directory given must load (an operator asked for it); the default
     * search may find nothing, and then only requests with boxes work. */
    if (s->cfg.no_detector) {
        snprintf(s->detector_reason, sizeof s->detector_reason, "started with --no-detector");
    } else {
        hamer_detector_params dp = hamer_detector_default_params();
        dp.dir = s->cfg.detector_dir;
        dp.lite = s->cfg.detector_lite;
        hamer_detector *det = hamer_detector_load(&dp);
        if (!det && s->cfg.detector_dir) {
            hm_srv_log("cannot load the hand detector: %s", hamer_last_error());
            set_reason(s, "cannot load the hand detector: %s", hamer_last_error());
            atomic_store(&s->fatal, 1);
            return NULL;
        }
        pthread_mutex_lock(&s->mu);
        if (det) s->detector = det;
        else snprintf(s->detector_reason, sizeof s->detector_reason, "%s", hamer_last_error());
        pthread_mutex_unlock(&s->mu);
        if (det)
            hm_srv_log("hand detector loaded from %s%s; body pass %s", hamer_detector_get_dir(det),
                       s->cfg.detector_lite ? " (lite)" : "",
                       hamer_detector_get_body(det) == 1
                           ? "models loaded (?body=auto|on|off)"
                           : "models not installed: palm pass only (bash scripts/get_detector.sh)");
        else hm_srv_log("no hand detector (requests without boxes get 400): %s", s->detector_reason);
    }
    for (int i = 0; s->detector && i < s->cfg.workers; i++) {
        if (!(s->dstates[i] = hamer_detect_state_new(s->detector, s->cfg.threads))) {
            hm_srv_log("cannot create detection state %d: %s", i, hamer_last_error());
            set_reason(s, "cannot create detection state %d: %s", i, hamer_last_error());
            atomic_store(&s->fatal, 1);
            return NULL;
        }
    }

    double t1 = hm_now();
    /* Batch 16 per pass, as `hamer run` uses: the same passes give the same bytes. */
    for (int i = 0; i < s->cfg.workers; i++) {
        if (!(s->states[i] = hamer_state_new(m, 16, s->cfg.threads))) {
            hm_srv_log("cannot create worker state %d: %s", i, hamer_last_error());
            set_reason(s, "cannot create worker state %d: %s", i, hamer_last_error());
            atomic_store(&s->fatal, 1);
            return NULL;
        }
        if (atomic_load(&s->draining)) return NULL;
    }
    int bad = self_check(s, s->states, s->cfg.workers);
    if (!bad && atomic_load(&s->draining)) return NULL;     /* SIGTERM meanwhile */
    if (bad || exercise_paths(s, s->states, s->cfg.workers)) {
        pthread_mutex_lock(&s->mu);
        hm_srv_log("NOT READY: %s", s->reason);
        pthread_mutex_unlock(&s->mu);
        atomic_store(&s->phase, HM_SRV_FAILED);
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    hm_srv_log("%s", s->reason);
    pthread_mutex_unlock(&s->mu);
    if (hm_srv_work_start(s, s->states, s->cfg.workers)) {
        hm_srv_log("cannot start the worker threads");
        set_reason(s, "cannot start the worker threads");
        atomic_store(&s->fatal, 1);
        return NULL;
    }
    atomic_store(&s->phase, HM_SRV_READY);
    hm_srv_log("ready in %.2f s (warm-up %.2f s)", hm_now() - t0, hm_now() - t1);
    return NULL;
}
