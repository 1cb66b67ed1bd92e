/* cli_run.c - `hamer run`: a photo and hand boxes in, RESULT.json (and
 * optionally meshes and pictures) out.
 *
 * Exit status: 0 every hand succeeded; 1 the request failed (nothing
 * written); 2 bad usage; 3 RESULT.json written but some hands failed (each
 * failure has an "error" entry in the JSON and a line on stderr); 4 written,
 * but no box was given and the detector found no hand.
 *
 * Like the server, it uses only the public API (include/hamer.h).
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"

typedef struct {
    hm_model_args m;               /* --model --mano --precision --device --threads */
    const char *image, *boxes_file, *output, *render, *side, *obj_dir, *glb, *bvh;
    hm_box_list boxes;             /* --box */
    int with_vertices;
    unsigned hide;                 /* --draw: HAMER_DRAW_* bits not drawn */
    hm_tool_detect_args det;       /* used when no box is given */
    hamer_predict_params pp;       /* --rescale --crop-mode --focal --fov */
} run_args;

static const hm_opt run_io[] = {
    {.name = "--image", .meta = "IMG", .kind = HM_OPT_STR, .off = offsetof(run_args, image),
     .help = "the photo: JPEG, PNG, WebP, AVIF, BMP, TIFF or GIF (the\nbytes decide, not the name)"},
    {.name = "--output", .meta = "RESULT.json", .kind = HM_OPT_STR, .off = offsetof(run_args, output),
     .help = "the hands (above)"},
    {0},
};

static const hm_opt run_opts[] = {
    {.name = "--boxes", .meta = "FILE", .kind = HM_OPT_STR, .off = offsetof(run_args, boxes_file),
     .help = "JSON [{\"bbox\":[x1,y1,x2,y2],\"is_right\":true}, ...], or a\n"
             "document with such a \"hands\" list ('hamer detect',\n"
             "RESULT.json); without --box or --boxes the detector\n"
             "finds the hands"},
    {.name = "--render", .meta = "PNG", .kind = HM_OPT_STR, .off = offsetof(run_args, render),
     .help = "the image with every hand's mesh, box, 21 keypoints and\nlabel over it (--draw chooses)"},
    {.name = "--side-view", .meta = "PNG", .kind = HM_OPT_STR, .off = offsetof(run_args, side),
     .help = "the meshes turned 90 degrees about the vertical axis"},
    {.name = "--obj-dir", .meta = "DIR", .kind = HM_OPT_STR, .off = offsetof(run_args, obj_dir),
     .help = "one .obj per hand, as the official demo writes them"},
    {.name = "--glb", .meta = "FILE", .kind = HM_OPT_STR, .off = offsetof(run_args, glb),
     .help = "every hand as a skinned MANO mesh with its skeleton and\n"
             "keypoints, in the camera frame (binary glTF 2.0:\n"
             "Blender, three.js, Unity import it)"},
    {.name = "--bvh", .meta = "FILE", .kind = HM_OPT_STR, .off = offsetof(run_args, bvh),
     .help = "every hand as a BVH skeleton (MANO's 16 joints,\n"
             "fingertips as end sites; metres, y up) at its place in\n"
             "the camera, one frame"},
    {.name = "--vertices", .kind = HM_OPT_FLAG, .off = offsetof(run_args, with_vertices),
     .help = "include the 778 vertices per hand in RESULT.json"},
    {0},
};

static const hm_command run_cmd = {
    .cmd = "run",
    .synopsis =
        "usage: hamer run --model M --image IMG --output RESULT.json\n"
        "                 [--box x1,y1,x2,y2[:left|:right] ... | --boxes FILE.json]\n"
        "                 [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
        "                 [--single-pass] [--body auto|on|off] [--body-boxes on|off]\n"
        "                 [--proposals auto|on|off]\n"
        "                 [--rescale 2.0] [--crop-mode warp|pad] [--threads N]\n"
        "                 [--render OVERLAY.png [--draw LIST]] [--side-view SIDE.png]\n"
        "                 [--obj-dir DIR] [--glb HANDS.glb] [--bvh HANDS.bvh]\n"
        "                 [--vertices] [--focal PX | --fov DEG]\n"
        "                 [--mano FILE.npz] [--precision fp32|fast] [--device D]\n",
    .about =
        "Finds the hands of a photo (JPEG, PNG, WebP, AVIF, BMP, TIFF or GIF) with\n"
        "the built-in detector (or takes the boxes given), crops each (the official\n"
        "HaMeR warp by default), regresses the MANO hand and writes RESULT.json:\n"
        "  {\"image\": {\"width\", \"height\"}, \"hands\": [{bbox, is_right, global_orient\n"
        "   (3x3), hand_pose (15x3x3), *_axis_angle, betas, pred_cam, cam_t_full,\n"
        "   focal_length, crop, keypoints_3d (21x3 m), keypoints_2d (21x2 px),\n"
        "   vertices (778x3, with --vertices), camera {focal_length, source,\n"
        "   principal_point}, cam_t, keypoints_3d_cam (and vertices_cam), the\n"
        "   reprojection_error, *_quaternion, hand_pose_pca, smplx} ...],\n"
        "   \"timings_ms\": {...}}\n"
        "Left hands are mirrored back (x negated) as HaMeR's demo does.\n"
        "The camera: --focal, else --fov, else the photo's EXIF focal length, else\n"
        "the model's own (5000/256 x the longer side); cam_t places each hand in it\n"
        "(metres; the old cam_t_full and focal_length are kept as they were).\n",
    .epilog =
        "Outputs are written to temporary files and renamed into place only when\n"
        "all are complete (RESULT.json last); an output may not be an input or\n"
        "another output. Exit status: 0 all hands ok; 1 failed (nothing written,\n"
        "or the message lists what was); 2 bad usage;\n"
        "3 written, but some hands failed (see their \"error\" entries); 4 written,\n"
        "but the detector found no hand.\n",
    .groups = (const hm_opt_group[]){{run_io, 0, NULL},
                                     {hm_opts_box, offsetof(run_args, boxes), NULL},
                                     {run_opts, 0, NULL},
                                     {hm_opts_draw, offsetof(run_args, hide), NULL},
                                     {hm_opts_detector, offsetof(run_args, det),
                                      "the detector (when no --box or --boxes is given)"},
                                     {hm_opts_detect, offsetof(run_args, det), NULL},
                                     {hm_opts_crop, offsetof(run_args, pp), "the crop and the camera"},
                                     {hm_opts_camera, offsetof(run_args, pp), NULL},
                                     {hm_opts_model, offsetof(run_args, m), "the model"},
                                     {hm_opts_threads, offsetof(run_args, m), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", "--image", "--output", NULL},
    .exclusive = (const char *const[]){"--box", "--boxes", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    a->pp = hamer_predict_default_params();
    hm_tool_detect_defaults(&a->det);
    return hm_args_parse(&run_cmd, argc, argv, a);
}

/* RESULT.json, the meshes and the pictures the options ask for, all
 * finished before any is renamed into place (RESULT.json last); the exit
 * status of a failure (message printed), else 0. */
static int write_outputs(const run_args *a, const hamer_job *job, const hamer_job_result *r, const char *json) {
    enum { MAXOUT = HAMER_MAX_HANDS + 5 };
    hm_cli_output outs[MAXOUT];
    static char obj_paths[HAMER_MAX_HANDS][4096];
    void *owned[MAXOUT];
    int n = 0, nowned = 0, status = 1, made_dir = 0;
    for (int i = 0; a->obj_dir && i < r->n_hands; i++) {
        if (!r->hands[i].ok) continue;
        char *obj;
        size_t len;
        int k = snprintf(obj_paths[i], sizeof obj_paths[i], "%s/hand_%02d_%s.obj", a->obj_dir, i,
                         r->hands[i].box.is_right ? "right" : "left");
        if (k < 0 || (size_t)k >= sizeof obj_paths[i]) {
            fprintf(stderr, "hamer: run: --obj-dir path too long (nothing written)\n");
            goto done;
        }
        if (hamer_job_hand_obj(job, i, &obj, &len)) {
            fprintf(stderr, "hamer: %s (nothing written)\n", hamer_last_error());
            goto done;
        }
        owned[nowned++] = obj;
        outs[n++] = (hm_cli_output){obj_paths[i], obj, len};
    }
    const char *pics[2] = {a->render, a->side};
    for (int k = 0; k < 2; k++) {
        if (!pics[k]) continue;
        uint8_t *png;
        size_t len;
        const hamer_render_params rp = {.hide = a->hide};
        if (k ? hamer_job_render_png(job, 1, &png, &len) : hamer_job_render_overlay_png(job, &rp, &png, &len)) {
            fprintf(stderr, "hamer: %s (nothing written)\n", hamer_last_error());
            goto done;
        }
        owned[nowned++] = png;
        outs[n++] = (hm_cli_output){pics[k], png, len};
    }
    if (a->glb) {
        uint8_t *glb;
        size_t len;
        if (hamer_job_glb(job, &glb, &len)) {
            fprintf(stderr, "hamer: %s (nothing written)\n", hamer_last_error());
            goto done;
        }
        owned[nowned++] = glb;
        outs[n++] = (hm_cli_output){a->glb, glb, len};
    }
    if (a->bvh) {
        char *bvh;
        size_t len;
        if (hamer_job_bvh(job, &bvh, &len)) {
            fprintf(stderr, "hamer: %s (nothing written)\n", hamer_last_error());
            goto done;
        }
        owned[nowned++] = bvh;
        outs[n++] = (hm_cli_output){a->bvh, bvh, len};
    }
    outs[n++] = (hm_cli_output){a->output, json, strlen(json)};

    /* The mesh names are known only now: check them against the inputs
     * and the other outputs before anything is written. */
    const char *paths[MAXOUT], *ins[4] = {a->image, a->boxes_file, a->m.model, a->m.mano};
    for (int i = 0; i < n; i++) paths[i] = outs[i].path;
    if (a->obj_dir) {
        struct stat st;
        if (stat(a->obj_dir, &st) != 0) {
            if (mkdir(a->obj_dir, 0777) != 0) {
                fprintf(stderr, "hamer: run: cannot create '%s': %s (nothing written)\n", a->obj_dir, strerror(errno));
                goto done;
            }
            made_dir = 1;
        } else if (!S_ISDIR(st.st_mode)) {
            fprintf(stderr, "hamer: run: --obj-dir '%s' is not a directory (nothing written)\n", a->obj_dir);
            goto done;
        }
    }
    if ((status = hm_cli_check_outputs("run", paths, n, ins, 4)) == 0) status = hm_cli_write_outputs("run", outs, n);
    if (status && made_dir) rmdir(a->obj_dir); /* only if still empty */
done:
    for (int i = 0; i < nowned; i++) hamer_free(owned[i]);
    return status;
}

static int run(run_args *a) {
    char err[1024];
    /* Before any work: no output may overwrite an input or another output,
     * and each must be creatable. */
    const char *outs[5] = {a->output, a->render, a->side, a->glb, a->bvh};
    const char *ins[4] = {a->image, a->boxes_file, a->m.model, a->m.mano};
    int bad = hm_cli_check_outputs("run", outs, 5, ins, 4);
    if (bad) return bad;
    if (a->boxes_file) {
        size_t len = 0;
        char *text = hm_tool_read_file(a->boxes_file, HM_TOOL_BOXES_FILE_MAX, &len, err, sizeof err);
        if (!text) return hm_tool_fail(1, "%s", err);
        a->boxes.n = hamer_boxes_parse(text, len, a->boxes.box, HAMER_MAX_HANDS);
        free(text);
        if (a->boxes.n < 0) {
            fprintf(stderr, "hamer: %s: %s\n", a->boxes_file, hamer_last_error());
            return 1;
        }
    }

    /* The photo is decoded before the model loads, so a bad image is
     * reported at once, not after seconds of loading. */
    uint8_t *rgb = NULL;
    int w = 0, h = 0;
    double t0 = hm_now();
    if (hamer_image_load(a->image, &rgb, &w, &h)) return hm_tool_fail(1, "%s", hamer_last_error());
    double decode_ms = 1e3 * (hm_now() - t0);

    /* No boxes given: the built-in detector finds the hands. */
    int detected = !a->boxes.n && !a->boxes_file;
    hamer_detector *det = NULL;
    hamer_detect_state *ds = NULL;
    hamer_model *hm = NULL;
    hamer_state *st = NULL;
    hamer_job *job = NULL;
    char *json = NULL;
    int status = 1;
    if (detected && (!(det = hm_tool_load_detector(&a->det)) || !(ds = hamer_detect_state_new(det, a->m.threads)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    hamer_job_params jp = hamer_job_default_params();
    jp.predict = a->pp;
    jp.detect = a->det.params;
    /* Detected hands are regressed in passes of up to 16, as the server does. */
    int batch = detected ? 16 : a->boxes.n > 0 ? (a->boxes.n < 16 ? a->boxes.n : 16) : 1;
    if (!(hm = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device)) || !(st = hamer_state_new(hm, batch, a->m.threads)) ||
        !(job = hamer_job_new(st, ds, &jp))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (hm_tool_require_mano(hm, a->m.model)) goto done;
    hamer_job_input in = {.path = a->image, .rgb = rgb, .width = w, .height = h, .decode_ms = decode_ms,
                          .boxes = a->boxes.box, .n_boxes = a->boxes.n,
                          .source = detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN};
    hamer_job_result r;
    if (hamer_job_run(job, &in) || hamer_job_get_result(job, &r)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    for (int i = 0; i < r.n_hands; i++)
        if (!r.hands[i].ok) fprintf(stderr, "hamer: %s\n", r.hands[i].error);
    if (!(json = hamer_job_result_json(job, a->with_vertices))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (write_outputs(a, job, &r, json)) goto done;
    status = r.n_failed ? 3 : 0;
    if (detected && r.n_hands == 0) {
        fprintf(stderr, "hamer: no hand found in %s (RESULT.json lists none)\n", a->image);
        status = 4;
    }
done:
    hamer_free(json);
    hamer_free(rgb);
    hamer_job_free(job);
    hamer_state_free(st);
    hamer_model_free(hm);
    hamer_detect_state_free(ds);
    hamer_detector_free(det);
    return status;
}

int hm_cli_run(int argc, char **argv) {
    static run_args a; /* 64 boxes: off the stack */
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
