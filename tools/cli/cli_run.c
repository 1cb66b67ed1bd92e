/* cli_run.c - `hamer run`: a photo and hand boxes in, RESULT.json (and
 * optionally meshes and pictures) out.
 *
 * Exit status: 0 every hand succeeded; 1 the request failed (nothing
 * written); 2 bad usage; 3 RESULT.json written but some hands failed (each
 * failure has an "error" entry in the JSON and a line on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli/cli.h"
#include "hamer.h"
#include "format/image.h"
#include "format/mesh_io.h"
#include "model/model.h"
#include "render/overlay.h"
#include "format/result_json.h"
#include "core/util.h"

static const char *USAGE_RUN =
    "usage: hamer run --model M --image IMG (--box x1,y1,x2,y2[:left|:right] ... | --boxes FILE.json)\n"
    "                 --output RESULT.json [--rescale 2.0] [--crop-mode warp|pad] [--threads N]\n"
    "                 [--render OVERLAY.png] [--side-view SIDE.png] [--obj-dir DIR] [--vertices]\n"
    "                 [--mano FILE.npz] [--precision fp32|fast]\n"
    "\n"
    "Crops every hand box from a JPEG or PNG image (the official HaMeR warp by\n"
    "default), regresses the MANO hand and writes RESULT.json:\n"
    "  {\"image\": {\"width\", \"height\"}, \"hands\": [{bbox, is_right, global_orient\n"
    "   (3x3), hand_pose (15x3x3), *_axis_angle, betas, pred_cam, cam_t_full,\n"
    "   focal_length, crop, keypoints_3d (21x3 m), keypoints_2d (21x2 px),\n"
    "   vertices (778x3, with --vertices)} ...], \"timings_ms\": {...}}\n"
    "Left hands are mirrored back (x negated) as HaMeR's demo does.\n"
    "\n"
    "  --box B         x1,y1,x2,y2 in pixels, ':left' or ':right' (default right); repeatable\n"
    "  --boxes FILE    JSON [{\"bbox\":[x1,y1,x2,y2],\"is_right\":true}, ...]\n"
    "  --rescale S     box scale factor (default 2.0)\n"
    "  --crop-mode M   warp (official affine warp, default) or pad (square crop, grey padding)\n"
    "  --render PNG    the image with every hand's mesh drawn over it\n"
    "  --side-view PNG the meshes turned 90 degrees about the vertical axis\n"
    "  --obj-dir DIR   one .obj per hand, as the official demo writes them\n"
    "  --vertices      include the 778 vertices per hand in RESULT.json\n"
    "\n"
    "Exit status: 0 all hands ok; 1 failed (nothing written); 2 bad usage;\n"
    "3 written, but some hands failed (see their \"error\" entries).\n";

static int read_file(const char *path, char **buf, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return hm_err(HM_E_IO, "cannot open '%s': %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) || (*len = (size_t)ftell(f)) > (64u << 20)) {
        fclose(f);
        return hm_err(HM_E_ARG, "'%s': unreadable or larger than 64 MB", path);
    }
    rewind(f);
    *buf = malloc(*len + 1);
    if (!*buf || fread(*buf, 1, *len, f) != *len) {
        fclose(f);
        free(*buf);
        return hm_err(HM_E_IO, "cannot read '%s'", path);
    }
    fclose(f);
    return HM_OK;
}

static int write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return hm_err(HM_E_IO, "cannot write '%s': %s", path, strerror(errno));
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    if (bad) {
        remove(path);
        return hm_err(HM_E_IO, "cannot write '%s'", path);
    }
    return HM_OK;
}

int hm_cli_run(int argc, char **argv) {
    const char *model = NULL, *image = NULL, *boxes_file = NULL, *output = NULL, *render = NULL, *side = NULL;
    const char *obj_dir = NULL, *mano = NULL;
    static hamer_box boxes[HAMER_MAX_HANDS];
    int nbox = 0, threads = 0, with_vertices = 0, precision = HAMER_PRECISION_FP32;
    hamer_predict_params pp = hamer_predict_default_params();
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE_RUN, stdout);
            return 0;
        }
        if (!strcmp(a, "--vertices")) { with_vertices = 1; continue; }
        if (a[0] != '-' || a[1] != '-') return hm_cli_fail(2, "run: unexpected argument '%s'", a);
        if (i + 1 >= argc) return hm_cli_fail(2, "run: option '%s' needs a value (or is unknown)", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--boxes")) boxes_file = v;
        else if (!strcmp(a, "--output")) output = v;
        else if (!strcmp(a, "--render")) render = v;
        else if (!strcmp(a, "--side-view")) side = v;
        else if (!strcmp(a, "--obj-dir")) obj_dir = v;
        else if (!strcmp(a, "--mano")) mano = v;
        else if (!strcmp(a, "--box")) {
            if (nbox == HAMER_MAX_HANDS) return hm_cli_fail(2, "run: more than 64 --box options%s", "");
            if (hm_box_parse(v, &boxes[nbox])) return hm_cli_fail(2, "run: %s", hm_errmsg());
            nbox++;
        } else if (!strcmp(a, "--rescale")) {
            char *end;
            pp.rescale = strtod(v, &end);
            if (*end || end == v || !(pp.rescale > 0 && pp.rescale <= 100))
                return hm_cli_fail(2, "run: --rescale must be a number in (0, 100], got '%s'", v);
        } else if (!strcmp(a, "--crop-mode")) {
            if (!strcmp(v, "warp")) pp.crop_mode = HAMER_CROP_WARP;
            else if (!strcmp(v, "pad")) pp.crop_mode = HAMER_CROP_PAD;
            else return hm_cli_fail(2, "run: --crop-mode must be warp or pad, got '%s'", v);
        } else if (!strcmp(a, "--threads")) {
            if (hm_cli_parse_threads(v, &threads)) return hm_cli_fail(2, "run: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(a, "--precision")) {
            if (!strcmp(v, "fp32")) precision = HAMER_PRECISION_FP32;
            else if (!strcmp(v, "fast")) precision = HAMER_PRECISION_FAST;
            else return hm_cli_fail(2, "run: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_cli_fail(2, "run: unknown option '%s' (see 'hamer run --help')", a);
        }
    }
    if (!model || !image || !output) return hm_cli_fail(2, "run: --model, --image and --output are required%s", "");
    if (!nbox == !boxes_file) return hm_cli_fail(2, "run: give hand boxes with --box or --boxes (not both)%s", "");
    if (boxes_file) {
        char *text = NULL;
        size_t len = 0;
        if (read_file(boxes_file, &text, &len)) return hm_cli_fail(1, "%s", hm_errmsg());
        nbox = hm_boxes_parse_json(text, len, boxes, HAMER_MAX_HANDS);
        free(text);
        if (nbox < 0) {
            fprintf(stderr, "hamer: %s: %s\n", boxes_file, hm_errmsg());
            return 1;
        }
    }

    double t0 = hm_cli_now();
    hm_image img;
    if (hm_image_load(image, &img)) return hm_cli_fail(1, "%s", hm_errmsg());
    double decode_ms = 1e3 * (hm_cli_now() - t0);

    hamer_model *hm = hm_cli_load_model(model, mano, precision);
    hamer_state *st = hm ? hamer_state_new(hm, nbox > 0 ? (nbox < 16 ? nbox : 16) : 1, threads) : NULL;
    hamer_hand *hands = calloc(nbox > 0 ? nbox : 1, sizeof *hands);
    hamer_timings tm = {0};
    int rc = !hm || !st || !hands ? HM_E_NOMEM : HM_OK;
    if (rc == HM_OK) rc = hamer_predict(st, img.rgb, img.w, img.h, boxes, nbox, &pp, hands, &tm);
    if (rc) {
        fprintf(stderr, "hamer: %s\n", hm ? (hands ? hamer_last_error() : "out of memory") : hamer_last_error());
        goto done;
    }
    tm.decode_ms = decode_ms;

    int nfail = 0;
    for (int i = 0; i < nbox; i++)
        if (!hands[i].ok) {
            fprintf(stderr, "hamer: %s\n", hands[i].error);
            nfail++;
        }
    const int32_t *faces = hamer_model_faces(hm);
    /* The demo closes the wrist with 14 extra faces for its meshes. */
    static int32_t closed[(HAMER_N_FACES + HM_MESH_EXTRA_FACES) * 3];
    const int nclosed = hm_mesh_close_hand(faces, HAMER_N_FACES, HAMER_N_VERTS, closed);
    if (obj_dir) {
        mkdir(obj_dir, 0777);
        for (int i = 0; i < nbox && rc == HM_OK; i++) {
            if (!hands[i].ok) continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/hand_%02d_%s.obj", obj_dir, i, hands[i].box.is_right ? "right" : "left");
            rc = hm_obj_write(path, hands[i].vertices, HAMER_N_VERTS, closed, nclosed, hands[i].cam_t_full,
                              hands[i].box.is_right);
        }
    }
    if (rc == HM_OK && (render || side)) {
        hm_image over, sv;
        rc = hm_overlay_render(&img, hands, nbox, faces, render ? &over : NULL, side ? &sv : NULL);
        if (rc == HM_OK && render) rc = hm_image_save_png(render, &over);
        if (rc == HM_OK && side) rc = hm_image_save_png(side, &sv);
        if (render) hm_image_free(&over);
        if (side) hm_image_free(&sv);
    }
    if (rc) {
        fprintf(stderr, "hamer: %s\n", hm_errmsg());
        goto done;
    }
    char *json = hm_result_json(img.w, img.h, hands, nbox, with_vertices, &tm);
    if (!json || write_text(output, json)) {
        fprintf(stderr, "hamer: %s\n", hm_errmsg());
        free(json);
        rc = HM_E_IO;
        goto done;
    }
    free(json);
    rc = nfail ? 3 : 0;
done:
    free(hands);
    hamer_state_free(st);
    hamer_model_free(hm);
    hm_image_free(&img);
    return rc < 0 ? 1 : rc;
}
