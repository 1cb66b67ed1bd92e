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
    "                 [--rescale 2.0] [--crop-mode warp|pad] [--threads N]\n"
    "                 [--render OVERLAY.png] [--side-view SIDE.png] [--obj-dir DIR] [--vertices]\n"
    "                 [--mano FILE.npz] [--precision fp32|fast]\n"
    "\n"
    "Finds the hands of a JPEG or PNG photo with the built-in detector (or takes\n"
    "the boxes given), crops each (the official HaMeR warp by default),\n"
    "regresses the MANO hand and writes RESULT.json:\n"
    "  {\"image\": {\"width\", \"height\"}, \"hands\": [{bbox, is_right, global_orient\n"
    "   (3x3), hand_pose (15x3x3), *_axis_angle, betas, pred_cam, cam_t_full,\n"
    "   focal_length, crop, keypoints_3d (21x3 m), keypoints_2d (21x2 px),\n"
    "   vertices (778x3, with --vertices)} ...], \"timings_ms\": {...}}\n"
    "Left hands are mirrored back (x negated) as HaMeR's demo does.\n"
    "\n"
    "  --box B         x1,y1,x2,y2 in pixels, ':left' or ':right' (default right); repeatable\n"
    "  --boxes FILE    JSON [{\"bbox\":[x1,y1,x2,y2],\"is_right\":true}, ...], or a\n"
    "                  document with such a \"hands\" list ('hamer detect', RESULT.json)\n"
    "  (no boxes)      detect: --detector DIR (models; default: $HAMER_DETECTOR_DIR,\n"
    "                  ~/.local/share/hamer/detector), --lite, --max-hands N (default 8),\n"
    "                  --min-score S (0.5), --single-pass (no tile search for small hands)\n"
    "  --rescale S     box scale factor in (0, 16] (default 2.0)\n"
    "  --crop-mode M   warp (official affine warp, default) or pad (square crop, grey padding)\n"
    "  --render PNG    the image with every hand's mesh drawn over it\n"
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
    const char *model, *image, *boxes_file, *output, *render, *side, *obj_dir, *mano;
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox, threads, with_vertices, precision;
    hm_cli_detect_args det;       /* used when no box is given */
    hamer_detection dets[HAMER_MAX_HANDS];
    hamer_predict_params pp;
} run_args;

/* Arguments -> a; 0, or the exit status of a usage error (message printed). */
static int parse(int argc, char **argv, run_args *a) {
    memset(a, 0, sizeof *a);
    a->precision = HAMER_PRECISION_FP32;
    a->pp = hamer_predict_default_params();
    hm_cli_detect_defaults(&a->det);
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_RUN, stdout);
            return -1;
        }
        int used = hm_cli_detect_option(argc, argv, &i, &a->det, "run");
        if (used > 0) return used; /* a usage error, already printed */
        if (used == 0) continue;
        if (!strcmp(o, "--vertices")) { a->with_vertices = 1; continue; }
        if (o[0] != '-' || o[1] != '-') return hm_cli_fail(2, "run: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_cli_fail(2, "run: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--boxes")) a->boxes_file = v;
        else if (!strcmp(o, "--output")) a->output = v;
        else if (!strcmp(o, "--render")) a->render = v;
        else if (!strcmp(o, "--side-view")) a->side = v;
        else if (!strcmp(o, "--obj-dir")) a->obj_dir = v;
        else if (!strcmp(o, "--mano")) a->mano = v;
        else if (!strcmp(o, "--box")) {
            if (a->nbox == HAMER_MAX_HANDS) return hm_cli_fail(2, "run: more than 64 --box options%s", "");
            if (hamer_box_parse(v, &a->boxes[a->nbox])) return hm_cli_fail(2, "run: %s", hamer_last_error());
            a->nbox++;
        } else if (!strcmp(o, "--rescale")) {
            if (hm_cli_parse_rescale(v, &a->pp.rescale))
                return hm_cli_fail(2, "run: --rescale must be a number in (0, 16], got '%s'", v);
        } else if (!strcmp(o, "--crop-mode")) {
            if (!strcmp(v, "warp")) a->pp.crop_mode = HAMER_CROP_WARP;
            else if (!strcmp(v, "pad")) a->pp.crop_mode = HAMER_CROP_PAD;
            else return hm_cli_fail(2, "run: --crop-mode must be warp or pad, got '%s'", v);
        } else if (!strcmp(o, "--threads")) {
            if (hm_cli_parse_threads(v, &a->threads)) return hm_cli_fail(2, "run: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(o, "--precision")) {
            if (hm_cli_parse_precision(v, &a->precision)) return hm_cli_fail(2, "run: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_cli_fail(2, "run: unknown option '%s' (see 'hamer run --help')", o);
        }
    }
    if (!a->model || !a->image || !a->output) return hm_cli_fail(2, "run: --model, --image and --output are required%s", "");
    if (a->nbox && a->boxes_file) return hm_cli_fail(2, "run: give hand boxes with --box or --boxes, not both%s", "");
    return 0;
}

/* RESULT.json, the meshes and the pictures the options ask for, all
 * finished before any is renamed into place (RESULT.json last); the exit
 * status of a failure (message printed), else 0. */
static int write_outputs(const run_args *a, const hamer_model *hm, const uint8_t *rgb, int w, int h,
                         const hamer_hand *hands, const char *json) {
    enum { MAXOUT = HAMER_MAX_HANDS + 3 };
    hm_cli_output outs[MAXOUT];
    static char obj_paths[HAMER_MAX_HANDS][4096];
    void *owned[MAXOUT];
    int n = 0, nowned = 0, status = 1, made_dir = 0;
    for (int i = 0; a->obj_dir && i < a->nbox; i++) {
        if (!hands[i].ok) continue;
        char *obj;
        size_t len;
        int k = snprintf(obj_paths[i], sizeof obj_paths[i], "%s/hand_%02d_%s.obj", a->obj_dir, i,
                         hands[i].box.is_right ? "right" : "left");
        if (k < 0 || (size_t)k >= sizeof obj_paths[i]) {
            fprintf(stderr, "hamer: run: --obj-dir path too long (nothing written)\n");
            goto done;
        }
        if (hamer_hand_obj(hm, &hands[i], &obj, &len)) {
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
        if (hamer_render_png(hm, rgb, w, h, hands, a->nbox, k, &png, &len)) {
            fprintf(stderr, "hamer: %s (nothing written)\n", hamer_last_error());
            goto done;
        }
        owned[nowned++] = png;
        outs[n++] = (hm_cli_output){pics[k], png, len};
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

/* The detector's hands of the image into a->dets; their count, or -1
 * (message printed). */
static int detect(run_args *a, const uint8_t *rgb, int w, int h, double *ms) {
    hamer_detector *det = hm_cli_load_detector(&a->det);
    hamer_detect_state *ds = det ? hamer_detect_state_new(det, a->threads) : NULL;
    int n = ds ? hamer_detect(ds, rgb, w, h, &a->det.params, a->dets, HAMER_MAX_HANDS, ms) : -1;
    if (n < 0) fprintf(stderr, "hamer: %s\n", hamer_last_error());
    hamer_detect_state_free(ds);
    hamer_detector_free(det);
    return n;
}

static int run(run_args *a) {
    char err[1024];
    /* Before any work: no output may overwrite an input or another output,
     * and each must be creatable. */
    const char *outs[3] = {a->output, a->render, a->side}, *ins[4] = {a->image, a->boxes_file, a->model, a->mano};
    int bad = hm_cli_check_outputs("run", outs, 3, ins, 4);
    if (bad) return bad;
    if (a->boxes_file) {
        size_t len = 0;
        char *text = hm_cli_read_file(a->boxes_file, 64u << 20, &len, err, sizeof err);
        if (!text) return hm_cli_fail(1, "%s", err);
        a->nbox = hamer_boxes_parse(text, len, a->boxes, HAMER_MAX_HANDS);
        free(text);
        if (a->nbox < 0) {
            fprintf(stderr, "hamer: %s: %s\n", a->boxes_file, hamer_last_error());
            return 1;
        }
    }

    double t0 = hm_cli_now();
    uint8_t *rgb = NULL;
    int w, h;
    if (hamer_image_load(a->image, &rgb, &w, &h)) return hm_cli_fail(1, "%s", hamer_last_error());
    double decode_ms = 1e3 * (hm_cli_now() - t0);

    /* No boxes given: the built-in detector finds the hands. */
    int detected = !a->nbox && !a->boxes_file;
    double detect_ms = 0;
    if (detected) {
        a->nbox = detect(a, rgb, w, h, &detect_ms);
        if (a->nbox < 0) {
            hamer_free(rgb);
            return 1;
        }
    }

    hamer_model *hm = hm_cli_load_model(a->model, a->mano, a->precision);
    hamer_state *st = hm ? hamer_state_new(hm, a->nbox > 0 ? (a->nbox < 16 ? a->nbox : 16) : 1, a->threads) : NULL;
    hamer_hand *hands = calloc(a->nbox > 0 ? a->nbox : 1, sizeof *hands);
    hamer_timings tm = {0};
    char *json = NULL;
    int status = 1;
    if (!hm || !st || !hands) {
        fprintf(stderr, "hamer: %s\n", hm && st ? "out of memory" : hamer_last_error());
        goto done;
    }
    if (detected ? hamer_predict_detections(st, rgb, w, h, a->dets, a->nbox, &a->pp, hands, &tm)
                 : hamer_predict(st, rgb, w, h, a->boxes, a->nbox, &a->pp, hands, &tm)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    tm.detect_ms = detect_ms;
    tm.decode_ms = decode_ms;
    int nfail = 0;
    for (int i = 0; i < a->nbox; i++)
        if (!hands[i].ok) {
            fprintf(stderr, "hamer: %s\n", hands[i].error);
            nfail++;
        }
    if (!(json = hamer_result_json_source(w, h, hands, a->nbox, a->with_vertices, &tm,
                                          detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (write_outputs(a, hm, rgb, w, h, hands, json)) goto done;
    status = nfail ? 3 : 0;
    if (detected && a->nbox == 0) {
        fprintf(stderr, "hamer: no hand found in %s (RESULT.json lists none)\n", a->image);
        status = 4;
    }
done:
    hamer_free(json);
    free(hands);
    hamer_state_free(st);
    hamer_model_free(hm);
    hamer_free(rgb);
    return status;
}

int hm_cli_run(int argc, char **argv) {
    static run_args a; /* 64 boxes: off the stack */
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
