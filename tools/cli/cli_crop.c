/* cli_crop.c - `hamer crop`: image + hand boxes in, the backbone's crops (.npy) out.
 *
 *   hamer crop --image IMG --box x1,y1,x2,y2[:left|:right] [--box ...]
 *              [--rescale 2.0] [--crop-mode warp|pad] [--u8] --output CROP.npy
 *
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * the output file appears only once every crop has succeeded (written to a
 * temporary name, then renamed).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli/cli.h"
#include "format/image.h"
#include "pipeline/preprocess.h"
#include "core/util.h"

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

/* Strict "x1,y1,x2,y2[:left|:right]": four finite numbers (after rounding
 * to float32, as the official demo holds boxes) and nothing else. Returns
 * NULL or a description of what is wrong. */
static const char *parse_box(const char *s, hm_box *b) {
    float v[4];
    const char *p = s;
    for (int i = 0; i < 4; i++) {
        if (!*p || isspace((unsigned char)*p)) return "expected x1,y1,x2,y2[:left|:right]";
        char *end;
        errno = 0;
        double d = strtod(p, &end);
        if (end == p) return "expected x1,y1,x2,y2[:left|:right]";
        v[i] = (float)d;
        if (!isfinite(d) || !isfinite(v[i])) return "coordinates must be finite numbers";
        p = end;
        if (i < 3) {
            if (*p != ',') return "expected x1,y1,x2,y2[:left|:right]";
            p++;
        }
    }
    int right = 1;
    if (*p == ':') {
        if (!strcmp(p + 1, "left")) right = 0;
        else if (strcmp(p + 1, "right")) return "the hand must be ':left' or ':right'";
    } else if (*p) {
        return "expected x1,y1,x2,y2[:left|:right]";
    }
    b->x1 = v[0];
    b->y1 = v[1];
    b->x2 = v[2];
    b->y2 = v[3];
    b->is_right = right;
    return NULL;
}

/* .npy v1.0: magic, version, little-endian header length, the header dict
 * padded with spaces to a 64-byte boundary and ended by '\n', then data. */
static int write_npy(FILE *f, const char *descr, const int64_t *shape, int ndim, const void *data, size_t bytes) {
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++) n += snprintf(dict + n, sizeof dict - n, "%lld, ", (long long)shape[i]);
    n += snprintf(dict + n, sizeof dict - n, "), }");
    size_t total = (10 + (size_t)n + 1 + 63) / 64 * 64, hl = total - 10;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 255), (unsigned char)(hl >> 8)};
    char hdr[320];
    memcpy(hdr, dict, (size_t)n);
    memset(hdr + n, ' ', hl - (size_t)n - 1);
    hdr[hl - 1] = '\n';
    return fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, hl, f) == hl && fwrite(data, 1, bytes, f) == bytes ? 0 : -1;
}

int hm_cli_crop(int argc, char **argv) {
    const char *image = NULL, *output = NULL, *mode_s = "warp";
    const char *box_text[CROP_MAX_HANDS];
    hm_box boxes[CROP_MAX_HANDS];
    int nbox = 0, u8 = 0;
    double rescale = 2.0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE_CROP, stdout);
            return 0;
        }
        if (!strcmp(a, "--u8")) {
            u8 = 1;
            continue;
        }
        if (strcmp(a, "--image") && strcmp(a, "--output") && strcmp(a, "--box") && strcmp(a, "--rescale") &&
            strcmp(a, "--crop-mode"))
            return hm_cli_fail(2, "crop: unknown option '%s' (see 'hamer crop --help')", a);
        if (i + 1 >= argc) return hm_cli_fail(2, "crop: option '%s' needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--image")) image = v;
        else if (!strcmp(a, "--output")) output = v;
        else if (!strcmp(a, "--crop-mode")) mode_s = v;
        else if (!strcmp(a, "--rescale")) {
            char *end;
            rescale = strtod(v, &end);
            if (end == v || *end || isspace((unsigned char)*v) || !(rescale > 0) || !(rescale <= HM_CROP_RESCALE_MAX))
                return hm_cli_fail(2, "crop: --rescale must be a number in (0, 16], got '%s'", v);
        } else {
            if (nbox == CROP_MAX_HANDS)
                return hm_cli_fail(2, "crop: at most 64 boxes (hands) per request%s", "");
            const char *why = parse_box(v, &boxes[nbox]);
            if (why) {
                fprintf(stderr, "hamer: crop: box %d '%s': %s\n", nbox + 1, v, why);
                return 2;
            }
            box_text[nbox++] = v;
        }
    }
    hm_crop_mode mode;
    if (!strcmp(mode_s, "warp")) mode = HM_CROP_WARP;
    else if (!strcmp(mode_s, "pad")) mode = HM_CROP_PAD;
    else return hm_cli_fail(2, "crop: --crop-mode must be 'warp' or 'pad', got '%s'", mode_s);
    if (!image) return hm_cli_fail(2, "crop: missing --image%s", "");
    if (!output) return hm_cli_fail(2, "crop: missing --output%s", "");
    if (!nbox) return hm_cli_fail(2, "crop: missing --box (one per hand)%s", "");

    hm_image img;
    if (hm_image_load(image, &img)) return hm_cli_fail(1, "%s", hm_errmsg());
    for (int i = 0; i < nbox; i++)
        if (hm_box_check(&boxes[i], img.w, img.h)) {
            fprintf(stderr, "hamer: crop: box %d '%s': %s\n", i + 1, box_text[i], hm_errmsg());
            hm_image_free(&img);
            return 1;
        }
    const size_t per = (size_t)3 * HM_CROP_SIZE * HM_CROP_OUT_W;
    float *crops = malloc(sizeof(float) * per * nbox);
    uint8_t *bytes = u8 ? malloc(per * nbox) : NULL;
    if (!crops || (u8 && !bytes)) {
        free(crops);
        free(bytes);
        hm_image_free(&img);
        return hm_cli_fail(1, "crop: out of memory%s", "");
    }
    for (int i = 0; i < nbox; i++) {
        if (hm_crop(&img, &boxes[i], rescale, mode, crops + per * i, NULL)) {
            fprintf(stderr, "hamer: crop: box %d '%s': %s\n", i + 1, box_text[i], hm_errmsg());
            free(crops);
            free(bytes);
            hm_image_free(&img);
            return 1;
        }
        if (u8) hm_crop_to_u8(crops + per * i, bytes + per * i);
    }
    hm_image_free(&img);

    char *tmp = malloc(strlen(output) + 32);
    if (!tmp) {
        free(crops);
        free(bytes);
        return hm_cli_fail(1, "crop: out of memory%s", "");
    }
    sprintf(tmp, "%s.tmp%ld", output, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = 0;
    if (!f) {
        rc = hm_cli_fail(1, "%s: cannot create the output file", output);
    } else {
        const int64_t shape_f[4] = {nbox, 3, HM_CROP_SIZE, HM_CROP_OUT_W};
        const int64_t shape_u[4] = {nbox, HM_CROP_SIZE, HM_CROP_OUT_W, 3};
        int bad = u8 ? write_npy(f, "|u1", shape_u, 4, bytes, per * nbox)
                     : write_npy(f, "<f4", shape_f, 4, crops, sizeof(float) * per * nbox);
        bad |= fclose(f) != 0;
        if (bad || rename(tmp, output) != 0) {
            remove(tmp);
            rc = hm_cli_fail(1, "%s: cannot write the output file", output);
        }
    }
    free(tmp);
    free(crops);
    free(bytes);
    return rc;
}
