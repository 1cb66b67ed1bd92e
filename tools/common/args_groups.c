/* args_groups.c - the option groups several commands share (args.h): the
 * model, the detector, the crop, the camera, --draw and --box. Each
 * option's range and help text are here once, for every command that
 * takes it. */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "common/args.h"
#include "common/common.h"
#include "hamer.h"

/* CHOICE stores an int: the enums it fills must be ints. */
_Static_assert(sizeof(hamer_body_mode) == sizeof(int), "hamer_body_mode is an int");
_Static_assert(sizeof(hamer_proposals_mode) == sizeof(int), "hamer_proposals_mode is an int");
_Static_assert(sizeof(hamer_crop_mode) == sizeof(int), "hamer_crop_mode is an int");

/* ---- the model ---- */

static const char *const precisions[] = {"fp32", "fast", NULL};
static const int precision_values[] = {HAMER_PRECISION_FP32, HAMER_PRECISION_FAST};

const hm_opt hm_opts_model[] = {
    {.name = "--model", .meta = "M", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, model),
     .help = "the released hamer.ckpt (a PyTorch Lightning\ncheckpoint), or a packed model file ('hamer convert')"},
    {.name = "--mano", .meta = "FILE.npz", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, mano),
     .help = "MANO buffers (v_template, shapedirs, posedirs,\n"
             "J_regressor, parents, lbs_weights, faces_tensor) when\n"
             "the checkpoint has no mano.* entries"},
    {.name = "--precision", .meta = "P", .kind = HM_OPT_CHOICE, .off = offsetof(hm_model_args, precision),
     .choices = precisions, .values = precision_values,
     .help = "fp32 (default: the PyTorch model to float precision)\n"
             "or fast (the gated low-precision scheme; 'hamer\n"
             "--version' names it)"},
    {.name = "--device", .meta = "D", .kind = HM_OPT_STR, .off = offsetof(hm_model_args, device),
     .help = "where the model runs: cpu (default) or a backend this\n"
             "build has, as NAME or NAME:INDEX ('hamer --version'\n"
             "lists them)"},
    {0},
};

const hm_opt hm_opts_threads[] = {
    {.name = "--threads", .meta = "N", .kind = HM_OPT_INT, .off = offsetof(hm_model_args, threads), .lo = 1,
     .hi = 1024, .help = "worker threads (default: the online CPUs)"},
    {0},
};

void hm_model_args_defaults(hm_model_args *m) {
    memset(m, 0, sizeof *m);
    m->precision = HAMER_PRECISION_FP32;
}

/* ---- the detector ---- */

static const char *const auto_on_off[] = {"auto", "on", "off", NULL};
static const int body_values[] = {HAMER_BODY_AUTO, HAMER_BODY_ON, HAMER_BODY_OFF};
static const int proposals_values[] = {HAMER_PROPOSALS_AUTO, HAMER_PROPOSALS_ON, HAMER_PROPOSALS_OFF};
static const char *const on_off[] = {"on", "off", NULL};
static const int on_off_values[] = {1, 0};

#define DET(field) (offsetof(hm_tool_detect_args, field))

const hm_opt hm_opts_detector[] = {
    {.name = "--detector", .meta = "DIR", .kind = HM_OPT_STR, .off = DET(dir),
     .help = "the detector's models (default: $HAMER_DETECTOR_DIR,\n"
             "then ~/.local/share/hamer/detector, then\n"
             "/usr/local/share/hamer/detector)"},
    {.name = "--lite", .kind = HM_OPT_FLAG, .off = DET(lite), .help = "the lite models (faster, less accurate)"},
    {0},
};

const hm_opt hm_opts_detect[] = {
    {.name = "--max-hands", .meta = "N", .kind = HM_OPT_INT, .off = DET(params.max_hands), .lo = 1,
     .hi = HAMER_MAX_HANDS, .help = "at most N hands, 1..64 (default 8)"},
    {.name = "--min-score", .meta = "S", .kind = HM_OPT_FLOAT, .off = DET(params.min_score), .lo = 0, .hi = 1,
     .open_lo = 1, .open_hi = 1, .help = "palm score threshold in (0, 1) (default 0.5)"},
    {.name = "--single-pass", .kind = HM_OPT_FLAG, .off = DET(params.tiles), .clear = 1, .as_bool = 1,
     .help = "MediaPipe's one full-frame pass only (faster; misses\n"
             "small hands in large photos, which the default tile\n"
             "pass finds)"},
    {.name = "--body", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = DET(params.body), .choices = auto_on_off,
     .values = body_values,
     .help = "the body pass (MediaPipe Holistic: pose -> hand\n"
             "re-crop -> hand landmarks): auto (default) with the\n"
             "tile pass when its models are installed and the palm\n"
             "pass found fewer than 2 hands; on always (an error\n"
             "without its models); off never"},
    {.name = "--body-boxes", .meta = "on|off", .kind = HM_OPT_CHOICE, .off = DET(params.body_boxes),
     .choices = on_off, .values = on_off_values, .as_bool = 1,
     .help = "when the body pass runs, also the box it takes from a\n"
             "wrist, index and pinky where the hand landmark model\n"
             "rejected the hand (default on)"},
    {.name = "--proposals", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = DET(params.proposals),
     .choices = auto_on_off, .values = proposals_values,
     .help = "the proposal pass (the hand-box detector of\n"
             "@vladmandic/human; each box a hand only where the hand\n"
             "landmark model finds one): auto (default) with the\n"
             "tile pass when its models are installed and the other\n"
             "passes found fewer than 2 hands; on always; off never"},
    {0},
};

int hm_tool_detect_option(int argc, char **argv, int *i, hm_tool_detect_args *d, const char *cmd) {
    const hm_opt_group groups[] = {{hm_opts_detector, 0, NULL}, {hm_opts_detect, 0, NULL}, {NULL, 0, NULL}};
    const hm_command c = {.cmd = cmd, .groups = groups};
    return hm_args_parse_one(&c, argc, argv, i, d);
}

/* ---- the crop and the camera ---- */

static const char *const crop_modes[] = {"warp", "pad", NULL};
static const int crop_mode_values[] = {HAMER_CROP_WARP, HAMER_CROP_PAD};

const hm_opt hm_opts_crop[] = {
    {.name = "--rescale", .meta = "S", .kind = HM_OPT_REAL, .off = offsetof(hamer_predict_params, rescale),
     .lo = 0, .hi = HAMER_MAX_RESCALE, .open_lo = 1,
     .help = "box enlargement in (0, 16] (default 2.0, as the\nofficial demo)"},
    {.name = "--crop-mode", .meta = "M", .kind = HM_OPT_CHOICE, .off = offsetof(hamer_predict_params, crop_mode),
     .choices = crop_modes, .values = crop_mode_values,
     .help = "warp (default: the official demo's: anti-alias blur\n"
             "when the box is large, OpenCV bilinear warp, black\n"
             "border) or pad (square crop, grey padding, Pillow\n"
             "bilinear resize)"},
    {0},
};

const hm_opt hm_opts_camera[] = {
    {.name = "--focal", .meta = "PX", .kind = HM_OPT_FLOAT, .off = offsetof(hamer_predict_params, focal_px),
     .lo = 0, .hi = HAMER_MAX_FOCAL, .open_lo = 1, .want = "a focal length in pixels, in (0, 1e7]",
     .help = "the camera's focal length in pixels of the image, or\n"
             "--fov its field of view across the longer side\n"
             "(default: a photo's EXIF, else the model's own\n"
             "camera): the hands' metric place (cam_t) through it"},
    {.name = "--fov", .meta = "DEG", .kind = HM_OPT_FLOAT, .off = offsetof(hamer_predict_params, fov_deg), .lo = 0,
     .hi = 180, .open_lo = 1, .open_hi = 1, .want = "a field of view in degrees, in (0, 180)",
     .help = "the field of view in degrees, in (0, 180); --focal\nwins over it"},
    {0},
};

/* ---- --draw, --box ---- */

static int parse_draw(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    return hm_tool_parse_draw(v, (unsigned *)field);
}

const hm_opt hm_opts_draw[] = {
    {.name = "--draw", .meta = "LIST", .kind = HM_OPT_FN, .off = 0, .fn = parse_draw,
     .want = "a comma-separated list of mesh, boxes, keypoints and labels, or all or none",
     .help = "what the overlay pictures show: any of mesh, boxes,\n"
             "keypoints, labels (comma-separated), all (default) or\n"
             "none; 'mesh' for the meshes alone"},
    {0},
};

static int parse_box(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    if (!hamer_box_parse(v, (hamer_box *)field)) return 0;
    snprintf(why, n, "%s", hamer_last_error());
    return -1;
}

const hm_opt hm_opts_box[] = {
    {.name = "--box", .meta = "BOX", .kind = HM_OPT_FN, .off = offsetof(hm_box_list, box), .fn = parse_box,
     .repeat = HAMER_MAX_HANDS, .elem = sizeof(hamer_box), .count_off = offsetof(hm_box_list, n),
     .want = "x1,y1,x2,y2[:left|:right]",
     .help = "a hand box in pixels, x1,y1,x2,y2, then optionally\n"
             "':left' or ':right' (default right; left hands are\n"
             "mirrored); repeat for up to 64 hands, kept in order"},
    {0},
};

/* ---- tracking (video, live) ---- */

_Static_assert(sizeof(hamer_smooth_mode) == sizeof(int), "hamer_smooth_mode is an int");
static const char *const smooths[] = {"one-euro", "none", NULL};
static const int smooth_values[] = {HAMER_SMOOTH_ONE_EURO, HAMER_SMOOTH_NONE};
#define TR(field) (offsetof(hm_track_args, field))

const hm_opt hm_opts_track[] = {
    {.name = "--max-hands", .meta = "N", .kind = HM_OPT_INT, .off = TR(det.params.max_hands), .lo = 1,
     .hi = HAMER_MAX_HANDS, .help = "hands tracked at once, 1..64 (default 2)"},
    {.name = "--min-score", .meta = "S", .kind = HM_OPT_FLOAT, .off = TR(det.params.min_score), .lo = 0, .hi = 1,
     .open_lo = 1, .open_hi = 1, .help = "palm score threshold in (0, 1) (default 0.5)"},
    {.name = "--tiles", .kind = HM_OPT_FLAG, .off = TR(det.params.tiles), .as_bool = 1,
     .help = "palm detection also on tiles (small hands; slower)"},
    {.name = "--single-pass", .kind = HM_OPT_FLAG, .off = TR(det.params.tiles), .clear = 1, .as_bool = 1,
     .help = "palm detection on the whole frame only (the default;\nundoes --tiles)"},
    {.name = "--body", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = TR(det.params.body), .choices = auto_on_off,
     .values = body_values,
     .help = "the body pass on detection frames (auto: with --tiles,\n"
             "when its models are installed; on; off): its hands\n"
             "start tracks too"},
    {.name = "--proposals", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = TR(det.params.proposals),
     .choices = auto_on_off, .values = proposals_values,
     .help = "the proposal pass on detection frames (auto: with\n"
             "--tiles, when its models are installed; on; off): its\n"
             "hands start tracks too"},
    {.name = "--body-boxes", .kind = HM_OPT_REFUSED,
     .want = "is for photos: a track follows a hand's landmarks, which a box from the body keypoints does not "
             "have"},
    {.name = "--redetect-every", .meta = "N", .kind = HM_OPT_INT, .off = TR(tp.redetect_every), .lo = 1,
     .hi = 10000, .help = "frames between palm detections with hands missing\n(10)"},
    {.name = "--cut-threshold", .meta = "X", .kind = HM_OPT_FLOAT, .off = TR(tp.cut_threshold), .lo = 0,
     .hi = 1e6, .want = "a number in [0, 1e6]",
     .help = "scene-cut threshold on 16x16 thumbnails, 0..1 (0.15)"},
    {.name = "--track-presence", .meta = "P", .kind = HM_OPT_FLOAT, .off = TR(tp.track_presence), .lo = 0,
     .hi = 1, .help = "presence below which a track is lost (0.5)"},
    {0},
};

const hm_opt hm_opts_smooth[] = {
    {.name = "--smooth", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = TR(tp.smooth), .choices = smooths,
     .values = smooth_values, .help = "one-euro (default) or none"},
    {.name = "--min-cutoff", .meta = "HZ", .kind = HM_OPT_REAL, .off = TR(tp.min_cutoff), .lo = 1e-6, .hi = 1e6,
     .want = "a frequency in Hz, in [1e-6, 1e6]", .help = "One Euro minimum cutoff (default 1.0)"},
    {.name = "--beta", .meta = "B", .kind = HM_OPT_REAL, .off = TR(tp.beta), .lo = 0, .hi = 1e6,
     .want = "a number in [0, 1e6]",
     .help = "One Euro speed coefficient (default 1.0; speeds in\n"
             "metres over 0.1 m, pixels over the hand's crop size,\n"
             "quaternions)"},
    {.name = "--d-cutoff", .meta = "HZ", .kind = HM_OPT_REAL, .off = TR(tp.d_cutoff), .lo = 1e-6, .hi = 1e6,
     .want = "a frequency in Hz, in [1e-6, 1e6]", .help = "One Euro cutoff of the speed (default 1.0)"},
    {0},
};

void hm_track_args_defaults(hm_track_args *t) {
    t->tp = hamer_tracker_default_params();
    hm_tool_detect_defaults(&t->det);
    t->det.params.max_hands = t->tp.max_hands;
    t->det.params.tiles = 0;
}

void hm_track_args_finish(hm_track_args *t) {
    t->tp.max_hands = t->det.params.max_hands;
    t->tp.min_score = t->det.params.min_score;
    t->tp.tiles = t->det.params.tiles;
    t->tp.body = t->det.params.body;
    t->tp.proposals = t->det.params.proposals;
}
