/* cli_crop.c - `hamer crop`: image + hand boxes in, the backbone's crops (.npy) out.
 *
 *   hamer crop --image IMG --box x1,y1,x2,y2[:left|:right] [--box ...]
 *              [--rescale 2.0] [--crop-mode warp|pad] [--u8] --output CROP.npy
 *
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * the output file appears only once every crop has succeeded (written to a
 * temporary name, then renamed).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "format/image.h"
#include "format/npy.h"
#include "pipeline/preprocess.h"
#include "core/util.h"
#include "core/fileio.h"

#define CROP_MAX_HANDS 64

static const char *USAGE_CROP =
    "usage: hamer crop --image IMG --box x1,y1,x2,y2[:left|:right] [--box ...]\n"
    "                  [--rescale 2.0] [--crop-mode warp|pad] [--u8] --output CROP.npy\n"
    "\n"
    "Cuts the hand crops the regressor sees (input of 'hamer regress').\n"
    "\n"
    "  --image IMG        JPEG (EXIF orientation applied) or PNG, at most 100\n"
    "                     megapixels\n"
    "  --box BOX          a hand box in pixels, corners x1,y1,x2,y2, optionally\n"
    "                     ':left' or ':right' (default right; left hands are\n"
    "                     mirrored); repeat for up to 64 hands, kept in order\n"
    "  --rescale F        box enlargement (default 2.0, as the official demo),\n"
    "                     in (0, 16]\n"
    "  --crop-mode MODE   warp: the official demo (anti-alias blur when the box\n"
    "                     is large, OpenCV bilinear warp, black border; default)\n"
    "                     pad: square crop with grey padding, Pillow bilinear\n"
    "                     resize\n"
    "  --u8               write uint8 [B,256,192,3] RGB crops instead\n"
    "  --output CROP.npy  float32 [B,3,256,192] crops normalised as\n"
    "                     (x/255 - mean)/std, RGB, mean 0.485,0.456,0.406,\n"
    "                     std 0.229,0.224,0.225\n"
    "\n"
    "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
    "stderr saying what was wrong.\n";

typedef struct {
    const char *image, *output, *box_text[CROP_MAX_HANDS];
    hm_box boxes[CROP_MAX_HANDS];
    int nbox, u8;
    double rescale;
    hm_crop_mode mode;
} crop_args;

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, crop_args *a) {
    memset(a, 0, sizeof *a);
    a->rescale = 2.0;
    const char *mode_s = "warp";
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_CROP, stdout);
            return -1;
        }
        if (!strcmp(o, "--u8")) {
            a->u8 = 1;
            continue;
        }
        if (strcmp(o, "--image") && strcmp(o, "--output") && strcmp(o, "--box") && strcmp(o, "--rescale") &&
            strcmp(o, "--crop-mode"))
            return hm_tool_fail(2, "crop: unknown option '%s' (see 'hamer crop --help')", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "crop: option '%s' needs a value", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--output")) a->output = v;
        else if (!strcmp(o, "--crop-mode")) mode_s = v;
        else if (!strcmp(o, "--rescale")) {
            if (hm_tool_parse_rescale(v, &a->rescale))
                return hm_tool_fail(2, "crop: --rescale must be a number in (0, 16], got '%s'", v);
        } else {
            if (a->nbox == CROP_MAX_HANDS) return hm_tool_fail(2, "crop: at most 64 boxes (hands) per request%s", "");
            hamer_box hb;
            if (hamer_box_parse(v, &hb)) {
                fprintf(stderr, "hamer: crop: box %d: %s\n", a->nbox + 1, hamer_last_error());
                return 2;
            }
            a->boxes[a->nbox] = (hm_box){hb.bbox[0], hb.bbox[1], hb.bbox[2], hb.bbox[3], hb.is_right};
            a->box_text[a->nbox++] = v;
        }
    }
    if (!strcmp(mode_s, "warp")) a->mode = HM_CROP_WARP;
    else if (!strcmp(mode_s, "pad")) a->mode = HM_CROP_PAD;
    else return hm_tool_fail(2, "crop: --crop-mode must be 'warp' or 'pad', got '%s'", mode_s);
    if (!a->image) return hm_tool_fail(2, "crop: missing --image%s", "");
    if (!a->output) return hm_tool_fail(2, "crop: missing --output%s", "");
    if (!a->nbox) return hm_tool_fail(2, "crop: missing --box (one per hand)%s", "");
    return 0;
}

/* The crops as one .npy at output (core/fileio: temp file, renamed). */
static int write_crops(const char *output, int u8, int nbox, const float *crops, const uint8_t *bytes, size_t per) {
    const int64_t shape_f[4] = {nbox, 3, HAMER_CROP_H, HAMER_CROP_W};
    const int64_t shape_u[4] = {nbox, HAMER_CROP_H, HAMER_CROP_W, 3};
    char hdr[HM_NPY_HEADER_MAX];
    size_t hlen, dlen = u8 ? per * nbox : sizeof(float) * per * nbox;
    hm_npy_header(u8 ? HM_DT_U8 : HM_DT_F32, 4, u8 ? shape_u : shape_f, hdr, &hlen);
    hm_outfile o;
    int rc = hm_outfile_open(&o, output);
    if (!rc) rc = hm_outfile_write(&o, hdr, hlen);
    if (!rc) rc = hm_outfile_write(&o, u8 ? (const void *)bytes : crops, dlen);
    if (!rc) rc = hm_outfile_commit(&o);
    hm_outfile_abort(&o);
    return rc ? hm_tool_fail(1, "crop: %s", hm_errmsg()) : 0;
}

static int run(const crop_args *a) {
    int nbox = a->nbox;
    const char *outs[1] = {a->output}, *ins[1] = {a->image};
    int bad = hm_cli_check_outputs("crop", outs, 1, ins, 1);
    if (bad) return bad;
    hm_image img;
    if (hm_image_load(a->image, &img)) return hm_tool_fail(1, "%s", hm_errmsg());
    for (int i = 0; i < nbox; i++)
        if (hm_box_check(&a->boxes[i], img.w, img.h)) {
            fprintf(stderr, "hamer: crop: box %d '%s': %s\n", i + 1, a->box_text[i], hm_errmsg());
            hm_image_free(&img);
            return 1;
        }
    const size_t per = (size_t)3 * HAMER_CROP_H * HAMER_CROP_W;
    float *crops = malloc(sizeof(float) * per * nbox);
    uint8_t *bytes = a->u8 ? malloc(per * nbox) : NULL;
    int rc = 0;
    if (!crops || (a->u8 && !bytes)) {
        rc = hm_tool_fail(1, "crop: out of memory%s", "");
        goto done;
    }
    for (int i = 0; i < nbox; i++) {
        if (hm_crop(&img, &a->boxes[i], a->rescale, a->mode, crops + per * i, NULL)) {
            fprintf(stderr, "hamer: crop: box %d '%s': %s\n", i + 1, a->box_text[i], hm_errmsg());
            rc = 1;
            goto done;
        }
        if (a->u8) hm_crop_to_u8(crops + per * i, bytes + per * i);
    }
    rc = write_crops(a->output, a->u8, nbox, crops, bytes, per);
done:
    free(crops);
    free(bytes);
    hm_image_free(&img);
    return rc;
}

int hm_cli_crop(int argc, char **argv) {
    static crop_args a; /* 64 boxes: off the stack */
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
