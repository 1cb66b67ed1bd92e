/* cli_detect.c - `hamer detect`: a photo in, the hands the built-in
 * detector finds out, as the boxes document `hamer run --boxes` reads
 * (plus scores and landmarks), and optionally a picture of them.
 *
 * Exit status: 0 hands found; 4 no hand found (the document is still
 * written, with an empty list); 1 failed (nothing written); 2 bad usage.
 * Uses only the public API (include/hamer.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "hamer.h"

static const char *USAGE_DETECT =
    "usage: hamer detect --image IMG --output BOXES.json [--render PNG] [--detector DIR] [--lite]\n"
    "                    [--max-hands N] [--min-score S] [--single-pass] [--body auto|on|off] [--body-boxes on|off]\n"
    "                    [--proposals auto|on|off] [--threads N]\n"
    "\n"
    "Finds the hands in a photo (JPEG, PNG, WebP, AVIF, BMP, TIFF or GIF: the\n"
    "bytes decide, not the name) with the built-in detector (MediaPipe\n"
    "Hands' palm detector and hand landmark model, installed by\n"
    "scripts/get_detector.sh) and writes\n"
    "  {\"image\": {\"width\", \"height\"}, \"detector\": {...}, \"hands\": [{\"bbox\":\n"
    "   [x1,y1,x2,y2], \"is_right\", \"score\", \"presence\", \"handedness\", \"pass\",\n"
    "   \"landmarks\" (21 x [x, y, z] pixels)}, ...], \"timings_ms\": {\"detect\"}}\n"
    "which `hamer run --boxes` reads. The box is the tight box of the 21 landmarks.\n"
    "\n"
    "  --render PNG    the photo with the boxes and landmark skeletons drawn over it\n"
    "  --detector DIR  the models' directory (default: $HAMER_DETECTOR_DIR, then\n"
    "                  ~/.local/share/hamer/detector, then /usr/local/share/hamer/detector)\n"
    "  --lite          the lite models (faster, less accurate)\n"
    "  --max-hands N   at most N hands (1..64, default 8)\n"
    "  --min-score S   palm score threshold in (0, 1) (default 0.5)\n"
    "  --single-pass   MediaPipe's one full-frame pass only (faster; misses small\n"
    "                  hands in large photos, which the default tile pass finds)\n"
    "  --body MODE     the body pass (MediaPipe Holistic: pose -> hand re-crop ->\n"
    "                  hand landmarks; its models come with scripts/get_detector.sh):\n"
    "                  auto (default) runs it with the tile pass when its models are\n"
    "                  installed (else the palm pass only: \"detector\": {\"body\"} says\n"
    "                  which) and the palm pass found fewer than 2 hands (a person's\n"
    "                  two), on always (an error without its models), off never.\n"
    "                  Hands it found carry \"source\" (\"palm\" / \"body\") and \"person\";\n"
    "                  is_right is then the person's side (person -1: the landmark\n"
    "                  model confidently said the other side)\n"
    "  --body-boxes on|off  when the body pass runs, also the box it takes from a\n"
    "                  wrist, index and pinky where the hand landmark model rejected\n"
    "                  the hand but the pose sees the wrist (visibility >= 0.5; HaMeR's\n"
    "                  own demo boxes hands from body keypoints): \"source\":\n"
    "                  \"body-keypoints\", \"landmarks\": null, \"score\" the wrist's\n"
    "                  visibility (default on)\n"
    "  --proposals MODE  the proposal pass (the hand-box detector of @vladmandic/human,\n"
    "                  installed by scripts/get_detector.sh, proposes boxes; each\n"
    "                  becomes a hand only when the hand landmark model, on the body\n"
    "                  pass's re-crop of it, finds one there; for hands holding things\n"
    "                  or seen from the owner's eyes, which the palm model misses):\n"
    "                  auto (default) runs it with the tile pass when its model (and\n"
    "                  the body models) are installed and the other passes found fewer\n"
    "                  than 2 hands, on always, off never. Its hands carry \"source\":\n"
    "                  \"proposal\"; is_right from the landmark model\n"
    "\n"
    "Exit status: 0 hands found; 4 none found (BOXES.json lists none); 1 failed\n"
    "(nothing written); 2 bad usage.\n";

typedef struct {
    const char *image, *output, *render;
    hm_tool_detect_args det;
    int threads;
} detect_args;

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, detect_args *a) {
    memset(a, 0, sizeof *a);
    hm_tool_detect_defaults(&a->det);
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_DETECT, stdout);
            return -1;
        }
        int used = hm_tool_detect_option(argc, argv, &i, &a->det, "detect");
        if (used > 0) return used; /* a usage error, already printed */
        if (used == 0) continue;
        if (o[0] != '-' || o[1] != '-') return hm_tool_fail(2, "detect: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "detect: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--output")) a->output = v;
        else if (!strcmp(o, "--render")) a->render = v;
        else if (!strcmp(o, "--threads")) {
            if (hm_tool_parse_threads(v, &a->threads))
                return hm_tool_fail(2, "detect: --threads must be an integer in 1..1024, got '%s'", v);
        } else {
            return hm_tool_fail(2, "detect: unknown option '%s' (see 'hamer detect --help')", o);
        }
    }
    if (!a->image || !a->output) return hm_tool_fail(2, "detect: --image and --output are required%s", "");
    return 0;
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
