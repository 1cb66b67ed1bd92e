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
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>
#include "cli/cli.h"
#include "hamer.h"
#include "load/load.h"
#include "model/model.h"
#include "cli/synthetic.h"
#include "core/cpu.h"
#include "core/util.h"
#include "kernels/peak.h"

static const char *USAGE_BENCH =
    "usage: hamer bench (--model CKPT | --synthetic) [--precision fp32|fast]\n"
    "                   [--batch B] [--iters N] [--warmup W] [--threads N]\n"
    "                   [--mano FILE.npz] [--reference M] [--seed S] [--peak GFLOPS]\n"
    "                   [--critical-path] [--json]\n"
    "       hamer bench (--model CKPT | --synthetic) --image IMG [--precision P] [--iters N]\n"
    "                   [--detector DIR] [--lite] [--max-hands N] [--single-pass] [--json]\n"
    "                   [--body auto|on|off] [--body-boxes on|off] [--proposals auto|on|off]\n"
    "       hamer bench --folder DIR --model M [--precision P] [--variants] (see --folder --help)\n"
    "       hamer bench (--model CKPT | --synthetic) --video IN [--precision P] [--iters FRAMES]\n"
    "                   [--max-hands N] [--detector DIR] [--json]\n"
    "\n"
    "Measures the regressor's speed on random crops and the accuracy of the\n"
    "chosen precision against fp32. With --image: the whole photo-to-hands job\n"
    "(decode, detect, crop, regress, finalise; medians per stage) and the\n"
    "detector's time against one hand's regression. With --video: per frame,\n"
    "decoding, tracking (landmarks only), palm detection, regression and\n"
    "smoothing of `hamer video` on the first FRAMES frames (default 30), fps.\n"
    "\n"
    "  --model CKPT      a HaMeR checkpoint or packed model file (hamer convert)\n"
    "  --synthetic       a full-size model with random weights, built in memory\n"
    "                    (--depth D / --head-depth H: a smaller one, for tests)\n"
    "  --device D        where the model runs: cpu (default) or a backend this build\n"
    "                    has, as NAME or NAME:INDEX ('hamer --version' lists them)\n"
    "  --precision P     fp32 (default) or fast; fast is compared with fp32 on\n"
    "                    the same crops (params PCC, vertices mean abs error)\n"
    "  --batch B         crops per forward (default 1)\n"
    "  --iters N         timed iterations (default 5), after\n"
    "  --warmup W        untimed warm-up iterations (default 1)\n"
    "  --threads N       worker threads (default: online CPUs)\n"
    "  --mano FILE.npz   MANO buffers when the checkpoint has none\n"
    "  --reference M     the model the fp32 comparison loads (default: --model);\n"
    "                    needed when --model is a packed file in precision fast\n"
    "  --seed S          seed of the crops and of --synthetic (default 0)\n"
    "  --peak GFLOPS     machine fp32 peak for '% of peak' (default: measured\n"
    "                    here with a register-only FMA loop, ~0.3 s)\n"
    "  --critical-path   then model each stage on P = 1, 2, 4, 8 and 16 threads:\n"
    "                    the work cut as for P threads, run here (N more\n"
    "                    iterations per P), its tasks' measured durations\n"
    "                    replayed on P threads (each task, in order, to the\n"
    "                    first free one; serial parts stay serial)\n"
    "  --json            one JSON object on stdout instead of the report\n"
    "\n"
    "Per-crop times are the median and the minimum over the timed iterations;\n"
    "stage times are per crop, the median over the timed iterations.\n"
    "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
    "stderr saying what was wrong.\n";

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

/* "VmHWM" / "VmRSS" of this process in MB, or -1. */
static double proc_status_mb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    double mb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            mb = strtod(line + n + 1, NULL) / 1024.0;
            break;
        }
    fclose(f);
    return mb;
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

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, bench_args *args) {
    model_src src = {.depth = 32, .head_depth = 6};
    int precision = HAMER_PRECISION_FP32, B = 1, iters = 5, warmup = 1, threads = 0, json = 0, crit = 0;
    double peak = 0;
    const char *image = NULL, *video = NULL;
    int iters_given = 0;
    hm_tool_detect_args det;
    hm_tool_detect_defaults(&det);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE_BENCH, stdout);
            return -1;
        }
        if (!strcmp(a, "--synthetic")) { src.synthetic = 1; continue; }
        if (!strcmp(a, "--json")) { json = 1; continue; }
        if (!strcmp(a, "--critical-path")) { crit = 1; continue; }
        int used = hm_tool_detect_option(argc, argv, &i, &det, "bench");
        if (used > 0) return used; /* a usage error, already printed */
        if (used == 0) continue;
        static const char *const valued[] = {"--model", "--precision", "--batch", "--iters", "--warmup", "--threads",
                                             "--mano", "--seed", "--peak", "--depth", "--head-depth", "--reference",
                                             "--image", "--video", "--device"};
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++) known |= !strcmp(a, valued[k]);
        if (!known) return hm_tool_fail(2, "bench: unknown option '%s' (see 'hamer bench --help')", a);
        if (i + 1 >= argc) return hm_tool_fail(2, "bench: option '%s' needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) src.model_path = v;
        else if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--video")) video = v;
        else if (!strcmp(a, "--mano")) src.mano = v;
        else if (!strcmp(a, "--reference")) src.reference_path = v;
        else if (!strcmp(a, "--device")) src.device = v;
        else if (!strcmp(a, "--precision")) {
            if (hm_tool_parse_precision(v, &precision))
                return hm_tool_fail(2, "bench: --precision must be fp32 or fast, got '%s'", v);
        } else if (!strcmp(a, "--batch")) {
            if (hm_tool_parse_int(v, 1, 4096, &B)) return hm_tool_fail(2, "bench: --batch must be an integer in 1..4096, got '%s'", v);
        } else if (!strcmp(a, "--iters")) {
            if (hm_tool_parse_int(v, 1, 1000000, &iters)) return hm_tool_fail(2, "bench: --iters must be a positive integer, got '%s'", v);
            iters_given = 1;
        } else if (!strcmp(a, "--warmup")) {
            if (hm_tool_parse_int(v, 0, 1000000, &warmup)) return hm_tool_fail(2, "bench: --warmup must be a non-negative integer, got '%s'", v);
        } else if (!strcmp(a, "--threads")) {
            if (hm_tool_parse_threads(v, &threads)) return hm_tool_fail(2, "bench: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(a, "--depth")) {
            if (hm_tool_parse_int(v, 1, 256, &src.depth)) return hm_tool_fail(2, "bench: --depth must be an integer in 1..256, got '%s'", v);
        } else if (!strcmp(a, "--head-depth")) {
            if (hm_tool_parse_int(v, 1, 64, &src.head_depth)) return hm_tool_fail(2, "bench: --head-depth must be an integer in 1..64, got '%s'", v);
        } else if (!strcmp(a, "--seed")) {
            char *end;
            src.seed = strtoull(v, &end, 10);
            if (*v == 0 || *end || *v == '-') return hm_tool_fail(2, "bench: --seed must be a non-negative integer, got '%s'", v);
        } else { /* --peak */
            char *end;
            peak = strtod(v, &end);
            if (*v == 0 || *end || !(peak > 0) || !isfinite(peak)) return hm_tool_fail(2, "bench: --peak must be a positive number (GFLOP/s), got '%s'", v);
        }
    }
    if (!!src.model_path == src.synthetic)
        return hm_tool_fail(2, "bench: give exactly one of --model CKPT and --synthetic%s", "");
    if (threads == 0) {
        int n = hm_cpu_online();
        threads = n <= 1024 ? n : 1;
    }
    src.nthreads = threads;

    if (video && !iters_given) iters = 30;
    *args = (bench_args){src, precision, B, iters, warmup, threads, json, crit, peak, image, video, det};
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
    double peak_rss = proc_status_mb("VmHWM"), rss = proc_status_mb("VmRSS");
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
    for (int i = 0; i < argc; i++) /* --folder: whole processes timed (cli_bench_folder.c) */
        if (!strcmp(argv[i], "--folder")) return hm_cli_bench_folder(argc, argv);
    bench_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
