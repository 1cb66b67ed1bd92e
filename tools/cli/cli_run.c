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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "hamer.h"

static const char *USAGE_RUN =
    "usage: hamer run --model M --image IMG --output RESULT.json\n"
    "                 [--box x1,y1,x2,y2[:left|:right] ... | --boxes FILE.json]\n"
    "                 [--detector DIR] [--lite] [--max-hands N] [--min-score S] [--single-pass]\n"
    "                 [--body auto|on|off] [--body-boxes on|off] [--proposals auto|on|off]\n"
    "                 [--rescale 2.0] [--crop-mode warp|pad] [--threads N]\n"
    "                 [--render OVERLAY.png [--draw LIST]] [--side-view SIDE.png] [--obj-dir DIR]\n"
    "                 [--glb HANDS.glb] [--bvh HANDS.bvh]\n"
    "                 [--vertices] [--focal PX | --fov DEG]\n"
    "                 [--mano FILE.npz] [--precision fp32|fast] [--device D]\n"
    "\n"
    "Finds the hands of a photo (JPEG, PNG, WebP, AVIF, BMP, TIFF or GIF) with\n"
    "the built-in detector (or takes the boxes given), crops each (the official HaMeR warp by default),\n"
    "regresses the MANO hand and writes RESULT.json:\n"
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
    "(metres; the old cam_t_full and focal_length are kept as they were).\n"
    "\n"
    "  --box B         x1,y1,x2,y2 in pixels, ':left' or ':right' (default right); repeatable\n"
    "  --boxes FILE    JSON [{\"bbox\":[x1,y1,x2,y2],\"is_right\":true}, ...], or a\n"
    "                  document with such a \"hands\" list ('hamer detect', RESULT.json)\n"
    "  (no boxes)      detect: --detector DIR (models; default: $HAMER_DETECTOR_DIR,\n"
    "                  ~/.local/share/hamer/detector), --lite, --max-hands N (default 8),\n"
    "                  --min-score S (0.5), --single-pass (no tile search for small hands),\n"
    "                  --body auto|on|off, --body-boxes on|off, --proposals auto|on|off (the body and\n"
    "                  proposal passes: 'hamer detect --help')\n"
    "  --rescale S     box scale factor in (0, 16] (default 2.0)\n"
    "  --crop-mode M   warp (official affine warp, default) or pad (square crop, grey padding)\n"
    "  --render PNG    the image with every hand's mesh, box, 21 keypoints and label over it\n"
    "  --draw LIST     what --render shows: " HM_TOOL_DRAW_HELP "\n"
    "  --glb FILE      every hand as a skinned MANO mesh with its skeleton and keypoints,\n"
    "                  in the camera frame (binary glTF 2.0: Blender, three.js, Unity import it)\n"
    "  --bvh FILE      every hand as a BVH skeleton (MANO's 16 joints, fingertips as end\n"
    "                  sites; metres, y up) at its place in the camera, one frame\n"
    "  --focal PX      the camera's focal length in pixels of this photo\n"
    "  --fov DEG       or its field of view across the longer side, in degrees\n"
    "  --side-view PNG the meshes turned 90 degrees about the vertical axis\n"
    "  --obj-dir DIR   one .obj per hand, as the official demo writes them\n"
    "  --vertices      include the 778 vertices per hand in RESULT.json\n"
    "\n"
    "Outputs are written to temporary files and renamed into place only when\n"
    "all are complete (RESULT.json last); an output may not be an input or\n"
    "another output. Exit status: 0 all hands ok; 1 failed (nothing written,\n"
    "or the message lists what was); 2 bad usage;\n"
    "3 written, but some hands failed (see their \"error\" entries); 4 written,\n"
    "but the detector found no hand.\n";

typedef struct {
    const char *model, *image, *boxes_file, *output, *render, *side, *obj_dir, *glb, *bvh, *mano, *device;
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox, threads, with_vertices, precision;
    unsigned hide;                 /* --draw: HAMER_DRAW_* bits not drawn */
    hm_tool_detect_args det;       /* used when no box is given */
    hamer_predict_params pp;
} run_args;

/* Arguments -> a; 0, or the exit status of a usage error (message printed). */
static int parse(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    a->precision = HAMER_PRECISION_FP32;
    a->pp = hamer_predict_default_params();
    hm_tool_detect_defaults(&a->det);
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_RUN, stdout);
            return -1;
        }
        int used = hm_tool_detect_option(argc, argv, &i, &a->det, "run");
        if (used > 0) return used; /* a usage error, already printed */
        if (used == 0) continue;
        if (!strcmp(o, "--vertices")) { a->with_vertices = 1; continue; }
        if (o[0] != '-' || o[1] != '-') return hm_tool_fail(2, "run: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "run: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--boxes")) a->boxes_file = v;
        else if (!strcmp(o, "--output")) a->output = v;
        else if (!strcmp(o, "--render")) a->render = v;
        else if (!strcmp(o, "--side-view")) a->side = v;
        else if (!strcmp(o, "--obj-dir")) a->obj_dir = v;
        else if (!strcmp(o, "--glb")) a->glb = v;
        else if (!strcmp(o, "--mano")) a->mano = v;
        else if (!strcmp(o, "--bvh")) a->bvh = v;
        else if (!strcmp(o, "--device")) a->device = v;
        else if (!strcmp(o, "--draw")) {
            if (hm_tool_parse_draw(v, &a->hide)) return hm_tool_fail(2, "run: --draw takes " HM_TOOL_DRAW_HELP ", got '%s'", v);
        } else if (!strcmp(o, "--focal") || !strcmp(o, "--fov")) {
            if (hm_tool_camera_option(o + 2, v, &a->pp, "run")) return 2;
        } else if (!strcmp(o, "--box")) {
            if (a->nbox == HAMER_MAX_HANDS) return hm_tool_fail(2, "run: more than 64 --box options%s", "");
            if (hamer_box_parse(v, &a->boxes[a->nbox])) return hm_tool_fail(2, "run: %s", hamer_last_error());
            a->nbox++;
        } else if (!strcmp(o, "--rescale")) {
            if (hm_tool_parse_rescale(v, &a->pp.rescale))
                return hm_tool_fail(2, "run: --rescale must be a number in (0, 16], got '%s'", v);
        } else if (!strcmp(o, "--crop-mode")) {
            if (!strcmp(v, "warp")) a->pp.crop_mode = HAMER_CROP_WARP;
            else if (!strcmp(v, "pad")) a->pp.crop_mode = HAMER_CROP_PAD;
            else return hm_tool_fail(2, "run: --crop-mode must be warp or pad, got '%s'", v);
        } else if (!strcmp(o, "--threads")) {
            if (hm_tool_parse_threads(v, &a->threads)) return hm_tool_fail(2, "run: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(o, "--precision")) {
            if (hm_tool_parse_precision(v, &a->precision)) return hm_tool_fail(2, "run: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_tool_fail(2, "run: unknown option '%s' (see 'hamer run --help')", o);
        }
    }
    if (!a->model || !a->image || !a->output) return hm_tool_fail(2, "run: --model, --image and --output are required%s", "");
    if (a->nbox && a->boxes_file) return hm_tool_fail(2, "run: give hand boxes with --box or --boxes, not both%s", "");
    return 0;
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
    const char *paths[MAXOUT], *ins[4] = {a->image, a->boxes_file, a->model, a->mano};
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
    const char *ins[4] = {a->image, a->boxes_file, a->model, a->mano};
    int bad = hm_cli_check_outputs("run", outs, 5, ins, 4);
    if (bad) return bad;
    if (a->boxes_file) {
        size_t len = 0;
        char *text = hm_tool_read_file(a->boxes_file, HM_TOOL_BOXES_FILE_MAX, &len, err, sizeof err);
        if (!text) return hm_tool_fail(1, "%s", err);
        a->nbox = hamer_boxes_parse(text, len, a->boxes, HAMER_MAX_HANDS);
        free(text);
        if (a->nbox < 0) {
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
    int detected = !a->nbox && !a->boxes_file;
    hamer_detector *det = NULL;
    hamer_detect_state *ds = NULL;
    hamer_model *hm = NULL;
    hamer_state *st = NULL;
    hamer_job *job = NULL;
    char *json = NULL;
    int status = 1;
    if (detected && (!(det = hm_tool_load_detector(&a->det)) || !(ds = hamer_detect_state_new(det, a->threads)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    hamer_job_params jp = hamer_job_default_params();
    jp.predict = a->pp;
    jp.detect = a->det.params;
    /* Detected hands are regressed in passes of up to 16, as the server does. */
    int batch = detected ? 16 : a->nbox > 0 ? (a->nbox < 16 ? a->nbox : 16) : 1;
    if (!(hm = hm_tool_load_model(a->model, a->mano, a->precision, a->device)) || !(st = hamer_state_new(hm, batch, a->threads)) ||
        !(job = hamer_job_new(st, ds, &jp))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (hm_tool_require_mano(hm, a->model)) goto done;
    hamer_job_input in = {.path = a->image, .rgb = rgb, .width = w, .height = h, .decode_ms = decode_ms,
                          .boxes = a->boxes, .n_boxes = a->nbox,
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
