/* cli_regress.c - `hamer regress`: crops (.npy) in, parameters and mesh (.npz) out.
 *
 *   hamer regress --model CKPT --input CROPS.npy --output OUT.npz
 *                 [--threads N] [--mano FILE.npz] [--params-only] [--plain] [--timings]
 *
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * the output file is only created once everything has succeeded.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"
#include "format/npy.h"
#include "core/util.h"

typedef struct {
    hm_model_args m;             /* --model --mano --precision --device --threads */
    const char *input, *output;
    int params_only, plain, timings;
} regress_args;

static const hm_opt regress_opts[] = {
    {.name = "--input", .meta = "CROPS", .kind = HM_OPT_STR, .off = offsetof(regress_args, input),
     .help = ".npy, either float32 [B,3,256,192] crops normalised as\n"
             "(x/255 - mean)/std (RGB, mean 0.485,0.456,0.406, std\n"
             "0.229,0.224,0.225), or uint8 [B,256,192,3] RGB crops"},
    {.name = "--output", .meta = "OUT.npz", .kind = HM_OPT_STR, .off = offsetof(regress_args, output),
     .help = "float32 arrays:\n"
             "  params [B,157]        16 row-major 3x3 rotations\n"
             "                        (global orient first), 10\n"
             "                        betas, 3 pred_cam\n"
             "  pred_cam [B,3]        (s, tx, ty)\n"
             "  pred_cam_t [B,3]      (tx, ty, 2*5000/(256*s))\n"
             "  vertices [B,778,3]    metres, root-relative\n"
             "  keypoints_3d [B,21,3] OpenPose order\n"
             "  keypoints_2d [B,21,2] normalised crop units\n"
             "                        (pixels = 256*k + 128)"},
    {.name = "--params-only", .kind = HM_OPT_FLAG, .off = offsetof(regress_args, params_only),
     .help = "write only params, pred_cam, pred_cam_t (no MANO needed)"},
    {.name = "--plain", .kind = HM_OPT_FLAG, .off = offsetof(regress_args, plain),
     .help = "verification mode: the textbook formulation (slower;\nthe cpu backend only)"},
    {.name = "--timings", .kind = HM_OPT_FLAG, .off = offsetof(regress_args, timings),
     .help = "print load and forward times to stderr"},
    {0},
};

static const hm_command regress_cmd = {
    .cmd = "regress",
    .synopsis = "usage: hamer regress --model CKPT --input CROPS.npy --output OUT.npz\n"
                "                     [--threads N] [--mano FILE.npz] [--params-only] [--plain]\n"
                "                     [--precision fp32|fast] [--device D] [--timings]\n",
    .about = "Runs the HaMeR regressor (ViT-H backbone, MANO transformer head, MANO layer)\n"
             "on hand crops.\n",
    .epilog = "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
              "stderr saying what was wrong.\n",
    .groups = (const hm_opt_group[]){{hm_opts_model, offsetof(regress_args, m), NULL},
                                     {hm_opts_threads, offsetof(regress_args, m), NULL},
                                     {regress_opts, 0, NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", "--input", "--output", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, regress_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    return hm_args_parse(&regress_cmd, argc, argv, a);
}

static int run(const regress_args *a) {
    const char *model = a->m.model, *input = a->input, *output = a->output, *mano = a->m.mano;
    int threads = a->m.threads, params_only = a->params_only, plain = a->plain, timings = a->timings;
    int precision = a->m.precision;
    const char *outs[1] = {output}, *ins[3] = {input, model, mano};
    int bad = hm_cli_check_outputs("regress", outs, 1, ins, 3);
    if (bad) return bad;
    hm_array crops;
    if (hm_npy_load(input, &crops)) return hm_tool_fail(1, "%s", hm_errmsg());
    int u8 = crops.dtype == HM_DT_U8;
    int ok_shape = crops.ndim == 4 && crops.shape[0] >= 1 && crops.shape[0] <= 1000000 &&
                   (u8 ? (crops.shape[1] == HAMER_CROP_H && crops.shape[2] == HAMER_CROP_W && crops.shape[3] == 3)
                       : (crops.shape[1] == 3 && crops.shape[2] == HAMER_CROP_H && crops.shape[3] == HAMER_CROP_W));
    if (crops.dtype != HM_DT_F32 && !u8) {
        hm_dtype dt = crops.dtype;
        hm_array_free(&crops);
        fprintf(stderr, "hamer: %s: crops must be float32 [B,3,256,192] or uint8 [B,256,192,3], got %s\n", input,
                hm_dtype_name(dt));
        return 1;
    }
    if (!ok_shape) {
        char sh[128] = "";
        for (int i = 0, n = 0; i < crops.ndim && n < 100; i++) n += snprintf(sh + n, sizeof sh - n, i ? ",%lld" : "%lld", (long long)crops.shape[i]);
        hm_array_free(&crops);
        fprintf(stderr, "hamer: %s: %s crops must have shape %s, got [%s]\n", input, u8 ? "uint8" : "float32",
                u8 ? "[B,256,192,3]" : "[B,3,256,192]", sh);
        return 1;
    }
    int B = (int)crops.shape[0];

    double t0 = hm_now();
    hamer_model *hm = hm_tool_load_model(model, mano, precision, a->m.device);
    double t_load = hm_now() - t0;
    if (!hm) {
        hm_array_free(&crops);
        return hm_tool_fail(1, "%s", hamer_last_error());
    }
    hamer_model_info info;
    hamer_model_get_info(hm, &info);
    if (!info.has_mano && !params_only) {
        hm_array_free(&crops);
        hamer_model_free(hm);
        return hm_tool_fail(1, "%s: checkpoint has no MANO buffers (mano.*): pass --mano FILE.npz, or --params-only", model);
    }
    hamer_state *st = hamer_state_new(hm, B < 16 ? B : 16, threads);
    float *buf = st ? malloc((size_t)B * (HAMER_N_PARAMS + 3 + 3 + HAMER_N_VERTS * 3 + HAMER_N_KP * 3 + HAMER_N_KP * 2) * sizeof(float)) : NULL;
    if (!st || !buf) {
        free(buf);
        hamer_state_free(st);
        hamer_model_free(hm);
        hm_array_free(&crops);
        return hm_tool_fail(1, "%s", st ? "out of memory" : hamer_last_error());
    }
    hamer_output out = {0};
    out.params = buf;
    out.pred_cam = out.params + (size_t)B * HAMER_N_PARAMS;
    out.pred_cam_t = out.pred_cam + (size_t)B * 3;
    if (!params_only) {
        out.vertices = out.pred_cam_t + (size_t)B * 3;
        out.keypoints_3d = out.vertices + (size_t)B * HAMER_N_VERTS * 3;
        out.keypoints_2d = out.keypoints_3d + (size_t)B * HAMER_N_KP * 3;
    }
    hamer_state_set_plain(st, plain);
    t0 = hm_now();
    int rc = u8 ? hamer_regress_u8(st, crops.data, B, &out) : hamer_regress_f32(st, crops.data, B, &out);
    double t_fwd = hm_now() - t0;
    if (timings && rc == 0)
        fprintf(stderr, "hamer: load %.3f s, forward %.3f s for %d crop(s) = %.1f ms/crop\n", t_load, t_fwd, B, 1e3 * t_fwd / B);
    hm_array_free(&crops);
    hamer_state_free(st);
    hamer_model_free(hm);
    if (rc) {
        free(buf);
        return hm_tool_fail(1, "%s", hamer_last_error());
    }

    hm_npz_writer *w;
    struct {
        const char *name;
        int ndim;
        int64_t shape[3];
        const float *data;
    } arrays[] = {
        {"params", 2, {B, HAMER_N_PARAMS}, out.params},
        {"pred_cam", 2, {B, 3}, out.pred_cam},
        {"pred_cam_t", 2, {B, 3}, out.pred_cam_t},
        {"vertices", 3, {B, HAMER_N_VERTS, 3}, out.vertices},
        {"keypoints_3d", 3, {B, 21, 3}, out.keypoints_3d},
        {"keypoints_2d", 3, {B, 21, 2}, out.keypoints_2d},
    };
    if (hm_npz_write_begin(output, &w)) {
        free(buf);
        return hm_tool_fail(1, "%s", hm_errmsg());
    }
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) {
        if (!arrays[i].data) continue;
        if (hm_npz_write_add(w, arrays[i].name, HM_DT_F32, arrays[i].ndim, arrays[i].shape, arrays[i].data)) {
            hm_npz_write_abort(w);
            free(buf);
            return hm_tool_fail(1, "%s", hm_errmsg());
        }
    }
    free(buf);
    if (hm_npz_write_finish(w)) return hm_tool_fail(1, "%s", hm_errmsg());
    return 0;
}

int hm_cli_regress(int argc, char **argv) {
    regress_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}

