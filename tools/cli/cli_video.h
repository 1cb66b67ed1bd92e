/* cli_video.h - `hamer video`'s options and per-run state (cli_video.c). */
#ifndef HM_CLI_VIDEO_H
#define HM_CLI_VIDEO_H

#include "hamer.h"
#include "cli/cli.h"
#include "common/args.h"

typedef struct {
    hm_model_args m;            /* --model (none: tracking only) --mano --precision --device --threads */
    const char *video, *output, *render, *render_dir, *glb, *bvh;
    int with_vertices;
    unsigned hide;              /* --draw: HAMER_DRAW_* bits not drawn */
    hamer_anim_shape shape;     /* --shape track|first: the animation files' skeleton */
    hm_track_args tr;           /* --detector, --lite, --max-hands, ..., --smooth and its parameters */
    hamer_video_params vp;      /* --start, --duration, --stride, --queue */
    hamer_predict_params pp;
} hm_video_args;

/* Totals over the processed frames (ms summed; the summary divides). */
typedef struct {
    long long frames, hands, tracks, detections, cuts;
    double decode_ms, wait_ms, track_ms, detect_ms, crop_ms, regress_ms, finalise_ms, smooth_ms, render_ms, write_ms;
} hm_video_sum;

typedef struct {
    const hm_video_args *a;
    hamer_video *video;
    hamer_detector *detector;
    hamer_tracker *tracker;
    hamer_model *model;
    hamer_state *state;
    hamer_video_writer *writer;
    hamer_anim *anim;           /* --glb, --bvh: the tracks' animation, written at the end */
    const char *writer_codec;
    uint8_t *overlay;           /* the overlay frame for --render */
    int render_failed;          /* a frame could not be rendered, or the overlay video finished */
    hm_video_sum sum;
} hm_video_run;

#endif
