/* cli_detect.c - `hamer detect`: a photo in, the hands the built-in
 * detector finds out, as the boxes document `hamer run --boxes` reads
 * (plus scores and landmarks), and optionally a picture of them.
 *
 * Exit status: 0 hands found; 4 no hand found (the document is still
 * written, with an empty list); 1 failed (nothing written); 2 bad usage.
 * Uses only the public API (include/hamer.h).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"

typedef struct {
    const char *image, *output, *render;
    hm_tool_detect_args det;
    int threads;
} detect_args;

static const hm_opt detect_opts[] = {
    {.name = "--image", .meta = "IMG", .kind = HM_OPT_STR, .off = offsetof(detect_args, image),
     .help = "the photo"},
    {.name = "--output", .meta = "BOXES.json", .kind = HM_OPT_STR, .off = offsetof(detect_args, output),
     .help = "the hands found (above)"},
    {.name = "--render", .meta = "PNG", .kind = HM_OPT_STR, .off = offsetof(detect_args, render),
     .help = "the photo with the boxes and landmark skeletons drawn\nover it"},
    {.name = "--threads", .meta = "N", .kind = HM_OPT_INT, .off = offsetof(detect_args, threads), .lo = 1,
     .hi = 1024, .help = "worker threads (default: the online CPUs)"},
    {0},
};

static const hm_command detect_cmd = {
    .cmd = "detect",
    .synopsis =
        "usage: hamer detect --image IMG --output BOXES.json [--render PNG]\n"
        "                    [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
        "                    [--single-pass] [--body auto|on|off] [--body-boxes on|off]\n"
        "                    [--proposals auto|on|off] [--threads N]\n",
    .about =
        "Finds the hands in a photo (JPEG, PNG, WebP, AVIF, BMP, TIFF or GIF: the\n"
        "bytes decide, not the name) with the built-in detector (MediaPipe\n"
        "Hands' palm detector and hand landmark model, installed by\n"
        "scripts/get_detector.sh) and writes\n"
        "  {\"image\": {\"width\", \"height\"}, \"detector\": {...}, \"hands\": [{\"bbox\":\n"
        "   [x1,y1,x2,y2], \"is_right\", \"score\", \"presence\", \"handedness\", \"pass\",\n"
        "   \"landmarks\" (21 x [x, y, z] pixels)}, ...], \"timings_ms\": {\"detect\"}}\n"
        "which `hamer run --boxes` reads. The box is the tight box of the 21 landmarks.\n",
    .epilog =
        "The body pass (MediaPipe Holistic: pose -> hand re-crop -> hand landmarks;\n"
        "its models come with scripts/get_detector.sh): auto (default) runs it with\n"
        "the tile pass when its models are installed (else the palm pass only:\n"
        "\"detector\": {\"body\"} says which) and the palm pass found fewer than 2\n"
        "hands (a person's two), on always (an error without its models), off never.\n"
        "Hands it found carry \"source\" (\"palm\" / \"body\") and \"person\"; is_right is\n"
        "then the person's side (person -1: the landmark model confidently said the\n"
        "other side). --body-boxes: when the body pass runs, also the box it takes\n"
        "from a wrist, index and pinky where the hand landmark model rejected the\n"
        "hand but the pose sees the wrist (visibility >= 0.5; HaMeR's own demo boxes\n"
        "hands from body keypoints): \"source\": \"body-keypoints\", \"landmarks\":\n"
        "null, \"score\" the wrist's visibility (default on).\n"
        "\n"
        "The proposal pass (the hand-box detector of @vladmandic/human, installed by\n"
        "scripts/get_detector.sh, proposes boxes; each becomes a hand only when the\n"
        "hand landmark model, on the body pass's re-crop of it, finds one there; for\n"
        "hands holding things or seen from the owner's eyes, which the palm model\n"
        "misses): auto (default) runs it with the tile pass when its model (and the\n"
        "body models) are installed and the other passes found fewer than 2 hands,\n"
        "on always, off never. Its hands carry \"source\": \"proposal\"; is_right from\n"
        "the landmark model.\n"
        "\n"
        "Exit status: 0 hands found; 4 none found (BOXES.json lists none); 1 failed\n"
        "(nothing written); 2 bad usage.\n",
    .groups = (const hm_opt_group[]){{detect_opts, 0, NULL},
                                     {hm_opts_detector, offsetof(detect_args, det), "the detector"},
                                     {hm_opts_detect, offsetof(detect_args, det), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--image", "--output", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, detect_args *a) {
    memset(a, 0, sizeof *a);
    hm_tool_detect_defaults(&a->det);
    return hm_args_parse(&detect_cmd, argc, argv, a);
}

static int run(const detect_args *a) {
    uint8_t *rgb = NULL, *png = NULL;
    int w, h, status = 1;
    char *json = NULL;
    size_t png_len = 0;
    hamer_detection dets[HAMER_MAX_HANDS];
    const char *outs[2] = {a->output, a->render}, *ins[1] = {a->image};
    int bad = hm_cli_check_outputs("detect", outs, 2, ins, 1);
    if (bad) return bad;
    if (hamer_image_load(a->image, &rgb, &w, &h)) return hm_tool_fail(1, "%s", hamer_last_error());
    hamer_detector *det = hm_tool_load_detector(&a->det);
    hamer_detect_state *ds = det ? hamer_detect_state_new(det, a->threads) : NULL;
    if (!ds) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->det.params.body == HAMER_BODY_AUTO && hamer_detector_get_body(det) == 0)
        fprintf(stderr, "hamer: detect: the body pass's models are not installed: palm pass only "
                        "(bash scripts/get_detector.sh installs them)\n");
    else if (a->det.params.proposals == HAMER_PROPOSALS_AUTO && hamer_detector_get_proposals(det) == 0)
        fprintf(stderr, "hamer: detect: the proposal pass's model is not installed: it does not run "
                        "(bash scripts/get_detector.sh installs it)\n");
    double ms = 0;
    int n = hamer_detect(ds, rgb, w, h, &a->det.params, dets, HAMER_MAX_HANDS, &ms);
    if (n < 0 || !(json = hamer_detections_json(w, h, dets, n, det, &a->det.params, ms)) ||
        (a->render && hamer_render_detections_png(rgb, w, h, dets, n, &png, &png_len))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    hm_cli_output files[2] = {{a->render, png, png_len}, {a->output, json, strlen(json)}};
    if (hm_cli_write_outputs("detect", a->render ? files : files + 1, a->render ? 2 : 1)) goto done;
    status = n > 0 ? 0 : 4;
    if (n == 0) fprintf(stderr, "hamer: no hand found in %s\n", a->image);
done:
    hamer_free(json);
    hamer_free(png);
    hamer_detect_state_free(ds);
    hamer_detector_free(det);
    hamer_free(rgb);
    return status;
}

int hm_cli_detect(int argc, char **argv) {
    detect_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
