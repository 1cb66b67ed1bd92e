/* cli_bench.c - `hamer bench`: throughput, per-stage times and accuracy of a precision.
 *
 *   hamer bench (--model CKPT | --synthetic) [--precision fp32|fast] [--batch B]
 *               [--iters N] [--warmup W] [--threads N] [--peak GFLOPS] [--json]
 *
 * Times hamer_regress_f32 on B deterministic random crops, W warm-up then N
 * timed iterations; reports median and min per crop, crops/s, achieved
 * GFLOP/s against an fp32 FMA peak measured here (kernels/peak.h, same
 * thread count), peak RSS and the per-stage profile. A non-fp32 precision is
 * compared with fp32 on the same crops (the model is loaded a second time in
 * fp32 after timing, so the timed run's memory figures do not include it).
 *
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors).
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"
#include "load/load.h"
#include "model/model.h"
#include "cli/synthetic.h"
#include "core/cpu.h"
#include "core/util.h"
#include "kernels/peak.h"

/* ---- helpers ---- */

/* The describe line of the backend of device ("cuda:0" -> the cuda one). */
static const char *device_line(const char *device) {
    for (int i = 0, n = hamer_backend_count(); i < n; i++) {
        hamer_backend_info bi;
        size_t len = 0;
        if (hamer_backend_get(i, &bi)) continue;
        len = strlen(bi.name);
        if (!strncmp(device, bi.name, len) && (device[len] == 0 || device[len] == ':')) return bi.info;
    }
    return "";
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n) {
    double *c = malloc((size_t)n * sizeof *c);
    if (!c) return v[0];
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

/* Model FLOPs of one crop (multiply-add = 2), as PyTorch computes it:
 * the four block matmuls, attention, patch embedding and the decoder. */
static double flops_per_crop(const hamer_model_info *in) {
    double T = in->n_tokens, D = in->vit_dim, M = in->vit_mlp;
    double inner = (double)in->head_heads * in->head_dim_head, hd = in->head_dim, hm = in->head_mlp;
    double f = 2 * T * 768 * D;
    f += in->vit_depth * (2 * T * D * (3 * D + D + 2 * M) + 4 * T * T * D);
    f += in->head_depth * (2 * T * D * 2 * inner                       /* to_kv */
                           + 2 * hd * 3 * inner + 2 * inner * hd       /* self-attention */
                           + 2 * hd * inner + 4 * T * inner + 2 * inner * hd /* cross-attention */
                           + 4 * hd * hm);                             /* feed-forward */
    f += 2 * hd * (16 * 6 + 10 + 3);
    return f;
}

/* Deterministic float crops [B,3,256,192], roughly N(0,1) like normalised images. */
static void make_crops(float *x, size_t n, unsigned long long seed) {
    unsigned long long s = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
    if (!s) s = 1; /* xorshift's one fixed point */
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        unsigned long long r = s;
        unsigned t = (unsigned)(r & 0xffff) + (unsigned)((r >> 16) & 0xffff) + (unsigned)((r >> 32) & 0xffff) + (unsigned)(r >> 48);
        x[i] = ((float)t - 131070.0f) * (float)(1.7320508075688772 / 65536.0);
    }
}

typedef struct {
    const char *model_path, *mano;
    const char *reference_path;  /* fp32 comparison model, if not model_path */
    const char *device;          /* --device (NULL: the CPU) */
    int synthetic, depth, head_depth;
    unsigned long long seed;
    int nthreads;
} model_src;

/* Load the model once, in `precision`, on --device; the fp32 reference of
 * a comparison from --reference when given (a packed file loads only in
 * its own precision), always on the CPU: the exact path every device is
 * held to. */
static hamer_model *load_model(const model_src *src, int precision, int reference) {
    const char *device = reference ? NULL : src->device;
    if (!src->synthetic) {
        hamer_model_params mp = hamer_model_default_params();
        mp.mano_path = src->mano;
        mp.precision = precision;
        mp.device = device;
        return hamer_model_load(reference && src->reference_path ? src->reference_path : src->model_path, &mp);
    }
    hm_synthetic *y;
    if (hm_synthetic_new(src->depth, src->head_depth, src->seed, src->nthreads, &y)) return NULL;
    hamer_model *m = hm_synthetic_model_on(y, precision, device);
    hm_synthetic_free(y);   /* the model holds packed copies; 2.7 GB less during timing */
    return m;
}

/* One forward of B crops into params [B,157] and verts [B,778,3] (NULL without MANO). */
static int run_once(hamer_state *st, const float *crops, int B, float *params, float *verts) {
    hamer_output out = {0};
    out.params = params;
    out.vertices = verts;
    return hamer_regress_f32(st, crops, B, &out);
}

typedef struct {
    model_src src;
    int precision, B, iters, warmup, threads, json, crit;
    double peak;
    const char *image;        /* --image: the photo-to-hands job instead */
    const char *video;        /* --video: hamer video's per-frame job instead */
    hm_tool_detect_args det;
} bench_args;

/* What the option table fills: the model group's fields go to src after
 * the parse; iters 0 means not given (30 for --video, else 5). */
typedef struct {
    bench_args b;
    hm_model_args m;
    const char *folder;
} bench_opts_args;

/* --seed: an unsigned 64-bit integer, decimal digits. */
static int seed_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 20) return -1;
    errno = 0;
    unsigned long long x = strtoull(v, NULL, 10);
    if (errno) return -1;
    *(unsigned long long *)field = x;
    return 0;
}

#define B(field) (offsetof(bench_opts_args, b.field))

static const hm_opt bench_opts[] = {
    {.name = "--synthetic", .kind = HM_OPT_FLAG, .off = B(src.synthetic),
     .help = "a full-size model with random weights, built in memory\n"
             "(--depth D / --head-depth H: a smaller one, for tests)"},
    {.name = "--depth", .meta = "D", .kind = HM_OPT_INT, .off = B(src.depth), .lo = 1, .hi = 256,
     .help = "--synthetic's ViT blocks (default 32)"},
    {.name = "--head-depth", .meta = "H", .kind = HM_OPT_INT, .off = B(src.head_depth), .lo = 1, .hi = 64,
     .help = "--synthetic's decoder layers (default 6)"},
    {.name = "--seed", .meta = "S", .kind = HM_OPT_FN, .off = B(src.seed), .fn = seed_option,
     .want = "a non-negative integer", .help = "seed of the crops and of --synthetic (default 0)"},
    {.name = "--reference", .meta = "M", .kind = HM_OPT_STR, .off = B(src.reference_path),
     .help = "the model the fp32 comparison loads (default: --model);\n"
             "needed when --model is a packed file in precision fast"},
    {.name = "--batch", .meta = "B", .kind = HM_OPT_INT, .off = B(B), .lo = 1, .hi = 4096,
     .help = "crops per forward (default 1)"},
    {.name = "--iters", .meta = "N", .kind = HM_OPT_INT, .off = B(iters), .lo = 1, .hi = 1000000,
     .help = "timed iterations (default 5; --video: frames, 30)"},
    {.name = "--warmup", .meta = "W", .kind = HM_OPT_INT, .off = B(warmup), .lo = 0, .hi = 1000000,
     .help = "untimed warm-up iterations (default 1)"},
    {.name = "--peak", .meta = "GFLOPS", .kind = HM_OPT_REAL, .off = B(peak), .lo = 0, .hi = 1e12, .open_lo = 1,
     .help = "machine fp32 peak for '% of peak' (default: measured\n"
             "here with a register-only FMA loop, ~0.3 s)"},
    {.name = "--critical-path", .kind = HM_OPT_FLAG, .off = B(crit),
     .help = "then model each stage on P = 1, 2, 4, 8 and 16 threads:\n"
             "the work cut as for P threads, run here (N more\n"
             "iterations per P), its tasks' measured durations\n"
             "replayed on P threads (each task, in order, to the\n"
             "first free one; serial parts stay serial)"},
    {.name = "--image", .meta = "IMG", .kind = HM_OPT_STR, .off = B(image),
     .help = "the whole photo-to-hands job on this photo instead"},
    {.name = "--video", .meta = "IN", .kind = HM_OPT_STR, .off = B(video),
     .help = "hamer video's per-frame job on its first --iters frames\ninstead"},
    {.name = "--folder", .meta = "DIR", .kind = HM_OPT_STR, .off = offsetof(bench_opts_args, folder),
     .help = "hamer batch against hamer run over a folder, whole\n"
             "processes timed ('hamer bench --folder DIR -h')"},
    {.name = "--json", .kind = HM_OPT_FLAG, .off = B(json),
     .help = "one JSON object on stdout instead of the report"},
    {0},
};

static const hm_command bench_cmd = {
    .cmd = "bench",
    .synopsis =
        "usage: hamer bench (--model CKPT | --synthetic) [--precision fp32|fast]\n"
        "                   [--device D] [--batch B] [--iters N] [--warmup W]\n"
        "                   [--threads N] [--mano FILE.npz] [--reference M]\n"
        "                   [--seed S] [--peak GFLOPS] [--critical-path] [--json]\n"
        "       hamer bench (--model CKPT | --synthetic) --image IMG [--precision P]\n"
        "                   [--iters N] [--detector DIR] [--lite] [--max-hands N]\n"
        "                   [--single-pass] [--body auto|on|off]\n"
        "                   [--body-boxes on|off] [--proposals auto|on|off] [--json]\n"
        "       hamer bench --folder DIR --model M ... (hamer bench --folder DIR -h)\n"
        "       hamer bench (--model CKPT | --synthetic) --video IN [--precision P]\n"
        "                   [--iters FRAMES] [--max-hands N] [--detector DIR] [--json]\n",
    .about =
        "Measures the regressor's speed on random crops and the accuracy of the\n"
        "chosen precision against fp32 (params PCC, vertices mean abs error, on the\n"
        "same crops). With --image: the whole photo-to-hands job (decode, detect,\n"
        "crop, regress, finalise; medians per stage) and the detector's time against\n"
        "one hand's regression. With --video: per frame, decoding, tracking\n"
        "(landmarks only), palm detection, regression and smoothing of `hamer video`\n"
        "on the first FRAMES frames (default 30), fps.\n",
    .epilog = "Per-crop times are the median and the minimum over the timed iterations;\n"
              "stage times are per crop, the median over the timed iterations.\n"
              "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
              "stderr saying what was wrong.\n",
    .groups = (const hm_opt_group[]){{hm_opts_model, offsetof(bench_opts_args, m), NULL},
                                     {hm_opts_threads, offsetof(bench_opts_args, m), NULL},
                                     {bench_opts, 0, NULL},
                                     {hm_opts_detector, B(det), "the detector (--image, --video)"},
                                     {hm_opts_detect, B(det), NULL},
                                     {NULL, 0, NULL}},
    .exclusive = (const char *const[]){"--model", "--synthetic", "--image", "--video", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, bench_args *args) {
    static bench_opts_args o;
    memset(&o, 0, sizeof o);
    hm_model_args_defaults(&o.m);
    o.b.src.depth = 32, o.b.src.head_depth = 6;
    o.b.B = 1, o.b.warmup = 1;
    hm_tool_detect_defaults(&o.b.det);
    int rc = hm_args_parse(&bench_cmd, argc, argv, &o);
    if (rc) return rc;
    if (!o.m.model && !o.b.src.synthetic)
        return hm_tool_fail(2, "bench: give exactly one of --model CKPT and --synthetic%s", "");
    o.b.src.model_path = o.m.model;
    o.b.src.mano = o.m.mano;
    o.b.src.device = o.m.device;
    o.b.precision = o.m.precision;
    o.b.threads = o.m.threads;
    if (o.b.threads == 0) {
        int n = hm_cpu_online();
        o.b.threads = n <= 1024 ? n : 1;
    }
    o.b.src.nthreads = o.b.threads;
    if (!o.b.iters) o.b.iters = o.b.video ? 30 : 5;
    *args = o.b;
    return 0;
}

static int run(bench_args *args) {
    model_src src = args->src;
    int precision = args->precision, B = args->B, iters = args->iters, warmup = args->warmup;
    int threads = args->threads, json = args->json;
    double peak = args->peak;
    /* The requested precision first: an unavailable one fails here, at once. */
    double t0 = hm_now();
    hamer_model *model = load_model(&src, precision, 0);
    double load_s = hm_now() - t0;
    if (!model) return hm_tool_fail(1, "%s", hamer_last_error());
    if (args->video) {
        int r = hm_cli_bench_video(model, args->video, &args->det, threads, iters, json);
        hamer_model_free(model);
        return r;
    }
    if (args->image) {
        int r = hm_cli_bench_photo(model, args->image, &args->det, threads, warmup, iters, json);
        hamer_model_free(model);
        return r;
    }
    hamer_model_info info;
    hamer_model_get_info(model, &info);
    /* The device name is the model's: a fast run frees its model before the
     * fp32 reference, and the report comes after. */
    char device[64];
    snprintf(device, sizeof device, "%s", info.device ? info.device : "cpu");
    info.device = device;
    hamer_state *st = hamer_state_new(model, B, threads);
    size_t ncrop = (size_t)B * 3 * HAMER_CROP_H * HAMER_CROP_W;
    float *crops = malloc(ncrop * sizeof *crops);
    float *params = malloc((size_t)B * HAMER_N_PARAMS * sizeof *params);
    float *verts = info.has_mano ? malloc((size_t)B * HAMER_N_VERTS * 3 * sizeof *verts) : NULL;
    double *iter_s = malloc((size_t)iters * sizeof *iter_s);
    double *stage_s = malloc((size_t)iters * HAMER_N_STAGES * sizeof *stage_s);
    double *sim_s = malloc((size_t)iters * HAMER_N_STAGES * HAMER_SIM_THREADS * sizeof *sim_s);
    int rc = 0;
    if (!st || !crops || !params || (info.has_mano && !verts) || !iter_s || !stage_s || !sim_s) {
        rc = hm_tool_fail(1, "%s", st ? "out of memory" : hamer_last_error());
        goto done;
    }
    make_crops(crops, ncrop, src.seed);

    if (peak <= 0) peak = hm_peak_fp32_gflops(threads);

    for (int it = 0; it < warmup; it++)
        if (run_once(st, crops, B, params, verts)) {
            rc = hm_tool_fail(1, "%s", hamer_last_error());
            goto done;
        }
    const char *stage_names[HAMER_N_STAGES] = {0};
    int nst = 0;
    for (int it = 0; it < iters; it++) {
        double st_s[HAMER_N_STAGES] = {0};
        hamer_state_set_profile(st, 1); /* zeroes the counters */
        double a = hm_now();
        int r = run_once(st, crops, B, params, verts);
        iter_s[it] = hm_now() - a;
        if (r) {
            rc = hm_tool_fail(1, "%s", hamer_last_error());
            goto done;
        }
        nst = hamer_state_get_profile(st, st_s, stage_names, HAMER_N_STAGES);
        for (int k = 0; k < HAMER_N_STAGES; k++) stage_s[(size_t)k * iters + it] = st_s[k];
    }
    /* The critical-path model: for each simulated thread count P, the
     * work cut as for P threads, timed on this run's threads, its tasks
     * replayed on P (hamer_state_set_profile_sim). */
    for (int t = 0; args->crit && t < HAMER_SIM_THREADS; t++)
        for (int it = 0; it < iters; it++) {
            double sm[HAMER_N_STAGES * HAMER_SIM_THREADS];
            hamer_state_set_profile_sim(st, 1 << t);
            if (run_once(st, crops, B, params, verts)) {
                rc = hm_tool_fail(1, "%s", hamer_last_error());
                goto done;
            }
            hamer_state_get_profile_sim(st, sm, HAMER_N_STAGES);
            for (int k = 0; k < HAMER_N_STAGES; k++)
                sim_s[(size_t)(k * HAMER_SIM_THREADS + t) * iters + it] = sm[k * HAMER_SIM_THREADS + t];
        }
    hamer_state_set_profile(st, 0);
    /* Memory of the timed configuration, before any fp32 reference is loaded. */
    double peak_rss = hm_tool_proc_status_mb("VmHWM"), rss = hm_tool_proc_status_mb("VmRSS");
    if (rss > peak_rss) peak_rss = rss; /* the kernel updates VmHWM lazily */

    /* Accuracy against fp32 on the same crops: the outputs of the last timed
     * iteration against a fresh fp32 model's. */
    double params_pcc = 1.0, params_max = 0.0, verts_mae = info.has_mano ? 0.0 : NAN;
    double verts_max = info.has_mano ? 0.0 : NAN;
    const int on_cpu = !strcmp(info.device, "cpu");
    if (precision != HAMER_PRECISION_FP32 || !on_cpu) {
        hamer_state_free(st);
        st = NULL;
        hamer_model_free(model);
        model = NULL;
        hamer_model *ref = load_model(&src, HAMER_PRECISION_FP32, 1);
        hamer_state *rst = ref ? hamer_state_new(ref, B, threads) : NULL;
        float *rp = malloc((size_t)B * HAMER_N_PARAMS * sizeof *rp);
        float *rv = info.has_mano ? malloc((size_t)B * HAMER_N_VERTS * 3 * sizeof *rv) : NULL;
        int ok = rst && rp && (!info.has_mano || rv) && run_once(rst, crops, B, rp, rv) == 0;
        if (!ok && !ref && src.model_path && !src.reference_path && hm_pack_sniff(src.model_path) == 1)
            rc = hm_tool_fail(1, "fp32 reference: %s (a packed model file loads only in its precision: give the checkpoint with --reference)",
                             hamer_last_error());
        else if (!ok) rc = hm_tool_fail(1, "fp32 reference: %s", hamer_last_error());
        if (ok) {
            params_pcc = hm_tool_pcc(params, rp, (size_t)B * HAMER_N_PARAMS);
            for (size_t i = 0; i < (size_t)B * HAMER_N_PARAMS; i++) {
                double d = fabs((double)params[i] - rp[i]);
                params_max = d > params_max ? d : params_max;
            }
            if (info.has_mano) {
                double s = 0, mx = 0;
                size_t n = (size_t)B * HAMER_N_VERTS * 3;
                for (size_t i = 0; i < n; i++) {
                    double d = fabs((double)verts[i] - rv[i]);
                    s += d;
                    if (d > mx) mx = d;
                }
                verts_mae = 1000.0 * s / (double)n, verts_max = 1000.0 * mx;
            }
        }
        free(rp);
        free(rv);
        hamer_state_free(rst);
        hamer_model_free(ref);
        if (rc) goto done;
    }

    double med = median(iter_s, iters), mn = iter_s[0];
    for (int it = 1; it < iters; it++) mn = iter_s[it] < mn ? iter_s[it] : mn;
    double fl = flops_per_crop(&info), gflops = fl * B / med / 1e9;
    double stage_ms[HAMER_N_STAGES], stage_sum = 0;
    for (int k = 0; k < nst; k++) stage_sum += stage_ms[k] = 1000.0 * median(stage_s + (size_t)k * iters, iters) / B;
    /* The model: per stage and thread count, the median over the timed
     * iterations, ms per crop; the totals add the stages. */
    double sim_ms[HAMER_N_STAGES][HAMER_SIM_THREADS], sim_tot[HAMER_SIM_THREADS] = {0};
    for (int k = 0; k < nst; k++)
        for (int t = 0; t < HAMER_SIM_THREADS; t++)
            sim_tot[t] += sim_ms[k][t] =
                1000.0 * median(sim_s + (size_t)(k * HAMER_SIM_THREADS + t) * iters, iters) / B;
    const char *prec_name = precision == HAMER_PRECISION_FP32 ? "fp32" : "fast";

    if (json) {
        json_t *o = json_object(), *stages = json_object();
        json_object_set_new(o, "model", json_string(src.synthetic ? "synthetic" : src.model_path));
        json_object_set_new(o, "precision", json_string(prec_name));
        json_object_set_new(o, "scheme", json_string(info.scheme ? info.scheme : ""));
        json_object_set_new(o, "isa", json_string(info.isa ? info.isa : ""));
        json_object_set_new(o, "device", json_string(info.device));
        json_object_set_new(o, "device_info", json_string(device_line(info.device)));
        json_object_set_new(o, "vit_depth", json_integer(info.vit_depth));
        json_object_set_new(o, "head_depth", json_integer(info.head_depth));
        json_object_set_new(o, "batch", json_integer(B));
        json_object_set_new(o, "threads", json_integer(threads));
        json_object_set_new(o, "warmup", json_integer(warmup));
        json_object_set_new(o, "iters", json_integer(iters));
        json_object_set_new(o, "load_s", json_real(load_s));
        json_object_set_new(o, "ms_per_crop_median", json_real(1000.0 * med / B));
        json_object_set_new(o, "ms_per_crop_min", json_real(1000.0 * mn / B));
        json_t *all = json_array();
        for (int it = 0; it < iters; it++) json_array_append_new(all, json_real(1000.0 * iter_s[it] / B));
        json_object_set_new(o, "ms_per_crop_all", all);
        json_object_set_new(o, "crops_per_s", json_real(B / med));
        json_object_set_new(o, "gflop_per_crop", json_real(fl / 1e9));
        json_object_set_new(o, "gflops", json_real(gflops));
        json_object_set_new(o, "peak_gflops_fp32", peak > 0 ? json_real(peak) : json_null());
        json_object_set_new(o, "pct_of_peak", peak > 0 ? json_real(100.0 * gflops / peak) : json_null());
        json_object_set_new(o, "peak_rss_mb", json_real(peak_rss));
        json_object_set_new(o, "rss_mb", json_real(rss));
        json_object_set_new(o, "params_pcc_vs_fp32", json_real(params_pcc));
        json_object_set_new(o, "params_max_abs_vs_fp32", json_real(params_max));
        json_object_set_new(o, "reference", json_string(on_cpu && precision == HAMER_PRECISION_FP32 ? "none (this is it)"
                                                                                             : "cpu fp32"));
        json_object_set_new(o, "vertices_mae_mm_vs_fp32", isnan(verts_mae) ? json_null() : json_real(verts_mae));
        json_object_set_new(o, "vertices_max_mm_vs_fp32", isnan(verts_max) ? json_null() : json_real(verts_max));
        for (int k = 0; k < nst; k++) json_object_set_new(stages, stage_names[k], json_real(stage_ms[k]));
        json_object_set_new(o, "stages", stages);
        json_object_set_new(o, "stages_stat", json_string("median over timed iterations, ms per crop"));
        if (args->crit) {
            json_t *cp = json_object(), *th = json_array(), *cs = json_object(), *tot = json_array();
            for (int t = 0; t < HAMER_SIM_THREADS; t++) {
                json_array_append_new(th, json_integer(1 << t));
                json_array_append_new(tot, json_real(sim_tot[t]));
            }
            for (int k = 0; k < nst; k++) {
                json_t *a = json_array();
                for (int t = 0; t < HAMER_SIM_THREADS; t++) json_array_append_new(a, json_real(sim_ms[k][t]));
                json_object_set_new(cs, stage_names[k], a);
            }
            json_object_set_new(cp, "threads", th);
            json_object_set_new(cp, "stages", cs);
            json_object_set_new(cp, "total", tot);
            json_object_set_new(o, "critical_path_ms", cp);
        }
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (!s) {
            rc = hm_tool_fail(1, "bench: cannot format the JSON output%s", "");
            goto done;
        }
        puts(s);
        free(s);
    } else {
        printf("hamer bench: %s model (%d blocks, %d decoder layers), precision %s (scheme %s, kernels %s), device %s\n",
               src.synthetic ? "synthetic" : src.model_path, info.vit_depth, info.head_depth, prec_name, info.scheme,
               info.isa, info.device);
        if (!on_cpu) printf("  %s\n", device_line(info.device));
        printf("  batch %d, %d threads; load %.1f s; %d warm-up + %d timed iterations\n", B, threads, load_s, warmup,
               iters);
        printf("  per crop: median %.1f ms, min %.1f ms; %.3f crops/s\n", 1000.0 * med / B, 1000.0 * mn / B, B / med);
        if (peak > 0)
            printf("  compute: %.1f GFLOP/crop, %.1f GFLOP/s = %.1f%% of the fp32 FMA peak %.1f GFLOP/s (%d threads)%s\n",
                   fl / 1e9, gflops, 100.0 * gflops / peak, peak, threads,
                   precision == HAMER_PRECISION_FP32 ? "" : "\n           (model FLOPs at fp32 against the fp32 peak; the scheme's own peak differs)");
        else
            printf("  compute: %.1f GFLOP/crop, %.1f GFLOP/s (no FMA peak measured on this CPU)\n", fl / 1e9, gflops);
        printf("  memory: peak RSS %.0f MB (loading included), RSS after timing %.0f MB\n", peak_rss, rss);
        const char *vs = on_cpu ? "vs fp32" : "vs cpu fp32";
        if (info.has_mano)
            printf("  %s: params PCC %.7f (max abs %.3g), vertices mean abs error %.4f mm (max %.4f mm)\n", vs,
                   params_pcc, params_max, verts_mae, verts_max);
        else
            printf("  %s: params PCC %.7f (max abs %.3g; no MANO: no vertices)\n", vs, params_pcc, params_max);
        printf("  %-12s %10s %7s\n", "stage", "ms/crop", "share");
        for (int k = 0; k < nst; k++)
            printf("  %-12s %10.2f %6.1f%%\n", stage_names[k], stage_ms[k], 100.0 * stage_ms[k] / (1000.0 * med / B));
        printf("  %-12s %10.2f %6.1f%%\n", "other", 1000.0 * med / B - stage_sum,
               100.0 * (1000.0 * med / B - stage_sum) / (1000.0 * med / B));
        printf("  (stage times: median over the timed iterations, per crop)\n");
        if (args->crit) {
            printf("  critical path, ms per crop, on simulated threads (this run's task durations):\n  %-12s", "stage");
            for (int t = 0; t < HAMER_SIM_THREADS; t++) printf(" %8d", 1 << t);
            printf("\n");
            for (int k = 0; k < nst; k++) {
                printf("  %-12s", stage_names[k]);
                for (int t = 0; t < HAMER_SIM_THREADS; t++) printf(" %8.2f", sim_ms[k][t]);
                printf("\n");
            }
            printf("  %-12s", "total");
            for (int t = 0; t < HAMER_SIM_THREADS; t++) printf(" %8.2f", sim_tot[t]);
            printf("\n");
        }
    }
done:
    free(crops);
    free(params);
    free(verts);
    free(iter_s);
    free(stage_s);
    free(sim_s);
    hamer_state_free(st);
    hamer_model_free(model);
    return rc;
}

int hm_cli_bench(int argc, char **argv) {
    for (int i = 0; i < argc; i++) /* --folder: whole processes timed (cli_bench_folder.c, its own options) */
        if (!strcmp(argv[i], "--folder")) return hm_cli_bench_folder(argc, argv);
    bench_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
