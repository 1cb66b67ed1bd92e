/* cli_crop.c - `hamer crop`: image + hand boxes in, the backbone's crops (.npy) out.
 *
 *   hamer crop --image IMG --box x1,y1,x2,y2[:left|:right] [--box ...]
 *              [--rescale 2.0] [--crop-mode warp|pad] [--u8] --output CROP.npy
 *
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * the output file appears only once every crop has succeeded (written to a
 * temporary name, then renamed).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "common/args.h"
#include "format/image.h"
#include "format/npy.h"
#include "pipeline/preprocess.h"
#include "core/util.h"
#include "core/fileio.h"

typedef struct {
    const char *image, *output;
    hm_box_list boxes;          /* --box */
    int u8;
    hamer_predict_params pp;    /* --rescale --crop-mode */
} crop_args;

static const hm_opt crop_opts[] = {
    {.name = "--image", .meta = "IMG", .kind = HM_OPT_STR, .off = offsetof(crop_args, image),
     .help = "JPEG (EXIF orientation applied) or PNG, at most 100\nmegapixels"},
    {.name = "--output", .meta = "CROP.npy", .kind = HM_OPT_STR, .off = offsetof(crop_args, output),
     .help = "float32 [B,3,256,192] crops normalised as\n"
             "(x/255 - mean)/std, RGB, mean 0.485,0.456,0.406,\n"
             "std 0.229,0.224,0.225"},
    {.name = "--u8", .kind = HM_OPT_FLAG, .off = offsetof(crop_args, u8),
     .help = "write uint8 [B,256,192,3] RGB crops instead"},
    {0},
};

static const hm_command crop_cmd = {
    .cmd = "crop",
    .synopsis = "usage: hamer crop --image IMG --box x1,y1,x2,y2[:left|:right] [--box ...]\n"
                "                  [--rescale 2.0] [--crop-mode warp|pad] [--u8]\n"
                "                  --output CROP.npy\n",
    .about = "Cuts the hand crops the regressor sees (input of 'hamer regress').\n",
    .epilog = "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
              "stderr saying what was wrong.\n",
    .groups = (const hm_opt_group[]){{crop_opts, 0, NULL},
                                     {hm_opts_box, offsetof(crop_args, boxes), NULL},
                                     {hm_opts_crop, offsetof(crop_args, pp), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--image", "--output", "--box", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, crop_args *a) {
    memset(a, 0, sizeof *a);
    a->pp = hamer_predict_default_params();
    return hm_args_parse(&crop_cmd, argc, argv, a);
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

/* A box as the crop's code takes it. */
static hm_box crop_box(const hamer_box *b) { return (hm_box){b->bbox[0], b->bbox[1], b->bbox[2], b->bbox[3], b->is_right}; }

static int run(const crop_args *a) {
    int nbox = a->boxes.n;
    hm_crop_mode mode = a->pp.crop_mode == HAMER_CROP_PAD ? HM_CROP_PAD : HM_CROP_WARP;
    hm_box boxes[HAMER_MAX_HANDS];
    for (int i = 0; i < nbox; i++) boxes[i] = crop_box(&a->boxes.box[i]);
    const char *outs[1] = {a->output}, *ins[1] = {a->image};
    int bad = hm_cli_check_outputs("crop", outs, 1, ins, 1);
    if (bad) return bad;
    hm_image img;
    if (hm_image_load(a->image, &img)) return hm_tool_fail(1, "%s", hm_errmsg());
    for (int i = 0; i < nbox; i++)
        if (hm_box_check(&boxes[i], img.w, img.h)) {
            fprintf(stderr, "hamer: crop: box %d: %s\n", i + 1, hm_errmsg());
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
        if (hm_crop(&img, &boxes[i], a->pp.rescale, mode, crops + per * i, NULL)) {
            fprintf(stderr, "hamer: crop: box %d: %s\n", i + 1, hm_errmsg());
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
