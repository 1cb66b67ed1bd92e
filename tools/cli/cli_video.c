/* cli_video.c - `hamer video`: a video in, its hands tracked, regressed and
 * smoothed frame by frame out as JSON Lines, optionally an overlay video
 * and PNGs. Public API only (include/hamer.h).
 *
 * Output lines: a header ({"video": ..., "options": ..., "render": ...}),
 * one line per processed frame (hamer_tracker_frame_json), flushed as it
 * is written, and a summary ({"summary": ...}).
 *
 * Exit status: 0 done; 1 failed; 2 bad usage; 5 the input is damaged or
 * truncated (every frame before the damage is written, the summary says
 * what failed); 130 interrupted (SIGINT/SIGTERM: the frame in progress
 * is finished, the outputs are closed properly).
 */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/cli_video.h"
#include "hamer.h"
#include "core/fileio.h"

static const char *USAGE_VIDEO =
    "usage: hamer video --video IN --output OUT.jsonl [--model M] [--render OUT.mp4] [--render-dir DIR]\n"
    "                   [--draw LIST] [--glb ANIM.glb] [--bvh ANIM.bvh] [--shape track|first]\n"
    "                   [--focal PX | --fov DEG]\n"
    "                   [--detector DIR] [--lite] [--max-hands N] [--min-score S] [--tiles] [--body auto|on|off]\n"
    "                   [--smooth one-euro|none] [--min-cutoff HZ] [--beta B] [--d-cutoff HZ]\n"
    "                   [--start T] [--duration T] [--stride K] [--threads N] [--precision fp32|fast] [--device D]\n"
    "                   [--vertices] [--mano FILE.npz] [--redetect-every N] [--cut-threshold X]\n"
    "                   [--track-presence P] [--queue N]\n"
    "\n"
    "Tracks the hands of a video (any container and codec FFmpeg reads; rotation\n"
    "metadata applied; every frame keeps its presentation time) as MediaPipe does:\n"
    "the landmarks of one frame give the hand's crop in the next, palm detection\n"
    "runs again when a hand is lost, on a scene cut and every --redetect-every\n"
    "frames while fewer than --max-hands hands are tracked. With --model every\n"
    "frame's hands are regressed as one batch and smoothed over their track.\n"
    "\n"
    "OUT.jsonl, one JSON object per line, each flushed when written:\n"
    "  {\"video\": {...}, \"options\": {...}, \"render\": ...}            the header\n"
    "  {\"frame\", \"time_s\", \"detected\", \"cut\", \"hands\": [{RESULT.json fields,\n"
    "   \"track_id\", \"tracked\", \"frames\", \"detector_score\", \"handedness_vote\",\n"
    "   \"detection\", \"raw\": {the smoothed fields as regressed}}], \"timings_ms\"}\n"
    "  {\"summary\": {\"frames\", \"hands\", \"tracks\", \"timings_ms\", ...}}   the last line\n"
    "\n"
    "  --model M         HaMeR checkpoint or packed model; without it: tracking only\n"
    "  --render OUT      the overlay video (frame rate, size and timestamps of the\n"
    "                    input; H.264 with libx264, else MPEG-4 part 2); needs --model\n"
    "  --render-dir DIR  the overlay of every processed frame as DIR/frame_NNNNNN.png\n"
    "  --draw LIST       what the overlays show: " HM_TOOL_DRAW_HELP "\n"
    "  --glb FILE        one skinned hand per track, animated over the frames it was\n"
    "                    tracked (its joints, its place; the frames' times): binary glTF\n"
    "                    2.0 for Blender, three.js, Unity; needs --model); keys on the\n"
    "                    clip's whole frames, its frame rate in the scene's extras \"fps\"\n"
    "  --bvh FILE        one skeleton per track as BVH motion (16 MANO joints, fingertips\n"
    "                    as end sites, metres, y up), one line per processed frame at\n"
    "                    the clip's frame rate; needs --model\n"
    "  --shape MODE      the animation files' skeleton: track (default: one MANO shape\n"
    "                    per track fitted over the whole clip, each frame's place solved\n"
    "                    again for it) or first (the track's first frame's shape)\n"
    "  --focal PX        the camera's focal length in pixels of the frames, or\n"
    "  --fov DEG         its field of view across the longer side: the hands' metric\n"
    "                    place (cam_t) through it; default the model's own camera\n"
    "  --max-hands N     hands tracked at once, 1..64 (default 2)\n"
    "  --tiles           palm detection also on tiles (small hands; slower)\n"
    "  --body MODE       the body pass on detection frames (auto: with --tiles, when its\n"
    "                    models are installed; on; off): its hands start tracks too\n"
    "  --smooth MODE     one-euro (default) or none\n"
    "  --min-cutoff HZ   One Euro minimum cutoff (default 1.0)\n"
    "  --beta B          One Euro speed coefficient (default 1.0; speeds in metres\n"
    "                    over 0.1 m, pixels over the hand's crop size, quaternions)\n"
    "  --d-cutoff HZ     One Euro cutoff of the speed (default 1.0)\n"
    "  --start T         begin at the first frame at or after T seconds\n"
    "  --duration T      process T seconds (0, the default: to the end)\n"
    "  --stride K        every K-th frame (frame numbers stay the input's)\n"
    "  --vertices        the 778 vertices of every hand in the lines\n"
    "  --redetect-every N  frames between palm detections with hands missing (10)\n"
    "  --cut-threshold X   scene-cut threshold on 16x16 thumbnails, 0..1 (0.15)\n"
    "  --track-presence P  presence below which a track is lost (0.5)\n"
    "  --queue N         frames decoded ahead, 1..64 (4)\n"
    "\n"
    "Exit status: 0 done; 1 failed; 2 bad usage; 5 the input is damaged or\n"
    "truncated (frames before the damage are written); 130 interrupted.\n";

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

/* A number in [lo, hi] in plain decimal notation; 0 ok, -1 bad. */
static int parse_num(const char *s, double lo, double hi, double *out) {
    char *end;
    if (strspn(s, "0123456789.eE+-") != strlen(s)) return -1;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

/* The video parameters after option o changed them, by the library's
 * check (the others are defaults or were checked when given, so the
 * message is about o); 0 or -1 (printed). */
static int check_video_params(const hm_video_args *a, const char *o) {
    if (!hamer_video_check_params(&a->vp)) return 0;
    fprintf(stderr, "hamer: %s (option %s)\n", hamer_last_error(), o);
    return -1;
}

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, hm_video_args *a) {
    memset(a, 0, sizeof *a);
    a->precision = HAMER_PRECISION_FP32;
    a->vp = hamer_video_default_params();
    a->tp = hamer_tracker_default_params();
    a->pp = hamer_predict_default_params();
    hm_tool_detect_defaults(&a->det);
    a->det.params.max_hands = a->tp.max_hands;
    a->det.params.tiles = 0;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_VIDEO, stdout);
            return -1;
        }
        if (!strcmp(o, "--body-boxes"))
            return hm_tool_fail(2, "video: %s is for photos: a track follows a hand's landmarks, which a box "
                                "from the body keypoints does not have", o);
        int used = hm_tool_detect_option(argc, argv, &i, &a->det, "video");
        if (used > 0) return used;
        if (used == 0) continue;
        if (!strcmp(o, "--vertices")) { a->with_vertices = 1; continue; }
        if (!strcmp(o, "--tiles")) { a->det.params.tiles = 1; continue; }
        if (o[0] != '-' || o[1] != '-') return hm_tool_fail(2, "video: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "video: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        double x;
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--video")) a->video = v;
        else if (!strcmp(o, "--output")) a->output = v;
        else if (!strcmp(o, "--render")) a->render = v;
        else if (!strcmp(o, "--render-dir")) a->render_dir = v;
        else if (!strcmp(o, "--draw")) {
            if (hm_tool_parse_draw(v, &a->hide)) return hm_tool_fail(2, "video: --draw takes " HM_TOOL_DRAW_HELP ", got '%s'", v);
        }
        else if (!strcmp(o, "--glb")) a->glb = v;
        else if (!strcmp(o, "--bvh")) a->bvh = v;
        else if (!strcmp(o, "--mano")) a->mano = v;
        else if (!strcmp(o, "--focal") || !strcmp(o, "--fov")) {
            if (hm_tool_camera_option(o + 2, v, &a->pp, "video")) return 2;
        } else if (!strcmp(o, "--shape")) {
            if (!strcmp(v, "track")) a->shape = HAMER_ANIM_SHAPE_TRACK;
            else if (!strcmp(v, "first")) a->shape = HAMER_ANIM_SHAPE_FIRST;
            else return hm_tool_fail(2, "video: --shape must be track or first, got '%s'", v);
        }
        else if (!strcmp(o, "--smooth")) {
            if (!strcmp(v, "one-euro")) a->tp.smooth = HAMER_SMOOTH_ONE_EURO;
            else if (!strcmp(v, "none")) a->tp.smooth = HAMER_SMOOTH_NONE;
            else return hm_tool_fail(2, "video: --smooth must be one-euro or none, got '%s'", v);
        } else if (!strcmp(o, "--min-cutoff") || !strcmp(o, "--d-cutoff")) {
            if (parse_num(v, 1e-6, 1e6, &x)) return hm_tool_fail(2, "video: cutoffs must be numbers in (0, 1e6] Hz, got '%s'", v);
            *(o[2] == 'm' ? &a->tp.min_cutoff : &a->tp.d_cutoff) = x;
        } else if (!strcmp(o, "--beta")) {
            if (parse_num(v, 0, 1e6, &x)) return hm_tool_fail(2, "video: --beta must be a number in [0, 1e6], got '%s'", v);
            a->tp.beta = x;
        } else if (!strcmp(o, "--start") || !strcmp(o, "--duration")) {
            /* only the syntax here: the ranges are hamer_video_check_params's
             * (below), the one check the library and the Python binding use */
            if (parse_num(v, -HUGE_VAL, HUGE_VAL, &x)) return hm_tool_fail(2, "video: --start / --duration take seconds (a decimal number), got '%s'", v);
            *(o[2] == 's' ? &a->vp.start_s : &a->vp.duration_s) = x;
            if (check_video_params(a, o)) return 2;
        } else if (!strcmp(o, "--stride") || !strcmp(o, "--queue")) {
            if (hm_tool_parse_int(v, INT_MIN, INT_MAX, o[2] == 's' ? &a->vp.stride : &a->vp.queue))
                return hm_tool_fail(2, "video: --stride / --queue take an integer, got '%s'", v);
            if (check_video_params(a, o)) return 2;
        } else if (!strcmp(o, "--redetect-every")) {
            if (hm_tool_parse_int(v, 1, 10000, &a->tp.redetect_every)) return hm_tool_fail(2, "video: --redetect-every must be an integer in 1..10000, got '%s'", v);
        } else if (!strcmp(o, "--cut-threshold")) {
            if (parse_num(v, 0, 1e6, &x)) return hm_tool_fail(2, "video: --cut-threshold must be a number >= 0, got '%s'", v);
            a->tp.cut_threshold = (float)x;
        } else if (!strcmp(o, "--track-presence")) {
            if (parse_num(v, 0, 1, &x)) return hm_tool_fail(2, "video: --track-presence must be a number in [0, 1], got '%s'", v);
            a->tp.track_presence = (float)x;
        } else if (!strcmp(o, "--threads")) {
            if (hm_tool_parse_threads(v, &a->threads)) return hm_tool_fail(2, "video: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(o, "--device")) {
            a->device = v;
        } else if (!strcmp(o, "--precision")) {
            if (hm_tool_parse_precision(v, &a->precision)) return hm_tool_fail(2, "video: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_tool_fail(2, "video: unknown option '%s' (see 'hamer video --help')", o);
        }
    }
    if (!a->video || !a->output) return hm_tool_fail(2, "video: --video and --output are required%s", "");
    if ((a->glb || a->bvh) && !a->model)
        return hm_tool_fail(2, "video: --glb and --bvh animate the hands: they need --model%s", "");
    if ((a->render || a->render_dir) && !a->model)
        return hm_tool_fail(2, "video: --render and --render-dir draw the meshes: they need --model%s", "");
    a->tp.max_hands = a->det.params.max_hands;
    a->tp.min_score = a->det.params.min_score;
    a->tp.tiles = a->det.params.tiles;
    a->tp.body = a->det.params.body;
    a->tp.proposals = a->det.params.proposals;
    return 0;
}

/* Peak resident memory of this process in MB (VmHWM), 0 if unknown. */
static double peak_rss_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atof(line + 6);
    if (f) fclose(f);
    return kb / 1024.0;
}

/* This frame into the totals. */
static void sum_add(hm_video_sum *s, const hamer_video_frame *f, const hamer_track_stats *st, const hamer_track *tracks,
                    int n) {
    s->frames++;
    s->hands += n;
    for (int i = 0; i < n; i++)
        if (tracks[i].track_id + 1 > s->tracks) s->tracks = tracks[i].track_id + 1;
    s->detections += st->detected;
    s->cuts += st->cut;
    s->decode_ms += f->decode_ms;
    s->track_ms += st->track_ms;
    s->detect_ms += st->detect_ms;
    s->crop_ms += st->predict.crop_ms;
    s->regress_ms += st->predict.regress_ms;
    s->finalise_ms += st->predict.finalise_ms;
    s->smooth_ms += st->smooth_ms;
}

/* One line of JSON (a jansson object, consumed) to the output, flushed. */
static int emit(FILE *out, json_t *o) {
    char *s = json_dumps(o, JSON_REAL_PRECISION(9) | JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(o);
    if (!s) return -1;
    int bad = fputs(s, out) < 0 || fputc('\n', out) < 0 || fflush(out) != 0;
    free(s);
    return bad ? -1 : 0;
}

static json_t *header(const hm_video_args *a, const hamer_video_info *vi, const char *codec) {
    json_t *v = json_pack("{s:s,s:i,s:i,s:i,s:f,s:f,s:I,s:s,s:s,s:[i,i]}", "path", a->video, "width", vi->width,
                          "height", vi->height, "rotation", vi->rotation, "fps", vi->fps, "duration_s",
                          vi->duration_s, "frames", (json_int_t)vi->frames, "codec", vi->codec, "format", vi->format,
                          "time_base", vi->time_base_num, vi->time_base_den);
    const hamer_tracker_params *t = &a->tp;
    json_t *o = json_pack("{s:f,s:f,s:i,s:i,s:b,s:s,s:f,s:f,s:f,s:i,s:i,s:i,s:f,s:f}", "start_s", a->vp.start_s,
                          "duration_s", a->vp.duration_s, "stride", a->vp.stride, "max_hands", t->max_hands, "tiles",
                          t->tiles, "smooth", t->smooth ? "one-euro" : "none", "min_cutoff", t->min_cutoff, "beta",
                          t->beta, "d_cutoff", t->d_cutoff, "betas_frames", t->betas_frames, "betas_min",
                          t->betas_min, "redetect_every", t->redetect_every, "cut_threshold", (double)t->cut_threshold,
                          "track_presence", (double)t->track_presence);
    json_object_set_new(o, "model", a->model ? json_string(a->model) : json_null());
    json_object_set_new(o, "precision", json_string(a->precision == HAMER_PRECISION_FAST ? "fast" : "fp32"));
    json_t *r = a->render ? json_pack("{s:s,s:s}", "path", a->render, "codec", codec) : json_null();
    return json_pack("{s:o,s:o,s:o,s:o}", "video", v, "options", o, "render", r, "render_dir",
                     a->render_dir ? json_string(a->render_dir) : json_null());
}

/* The overlay of this frame into the video and/or a PNG; 0, or -1 with
 * the reason in err. */
static int render(hm_video_run *r, const hamer_video_frame *f, const hamer_hand *hands, int n, char *err,
                  size_t errlen) {
    const hm_video_args *a = r->a;
    const hamer_render_params rp = {.hide = a->hide};
    double t0 = hm_now();
    if (a->render) {
        if (hamer_render_overlay_rgb(r->model, f->rgb, f->width, f->height, hands, n, &rp, r->overlay) ||
            hamer_video_writer_write(r->writer, r->overlay, f->pts)) {
            snprintf(err, errlen, "%s", hamer_last_error());
            return -1;
        }
    }
    if (a->render_dir) {
        uint8_t *png;
        size_t len;
        char path[4096];
        snprintf(path, sizeof path, "%s/frame_%06lld.png", a->render_dir, f->index);
        if (hamer_render_overlay_png(r->model, f->rgb, f->width, f->height, hands, n, &rp, &png, &len)) {
            snprintf(err, errlen, "%s", hamer_last_error());
            return -1;
        }
        int bad = hm_cli_write_file(path, png, len, err, errlen);
        hamer_free(png);
        if (bad) return -1;
    }
    r->sum.render_ms += 1e3 * (hm_now() - t0);
    return 0;
}

/* Frames done, rate and time left, redrawn in place on a terminal. */
static void progress(const hm_video_run *r, double elapsed, long long total) {
    if (!isatty(2)) return;
    const double fps = elapsed > 0 ? r->sum.frames / elapsed : 0;
    if (total > 0 && fps > 0)
        fprintf(stderr, "\rhamer: frame %lld/%lld, %.2f fps, ETA %.0f s   ", r->sum.frames, total, fps,
                (total - r->sum.frames) / fps);
    else
        fprintf(stderr, "\rhamer: frame %lld, %.2f fps   ", r->sum.frames, fps);
    fflush(stderr);
}

static json_t *summary(const hm_video_run *r, double elapsed, const char *damaged, const char *error) {
    const hm_video_sum *s = &r->sum;
    const double n = s->frames > 0 ? (double)s->frames : 1.0;
    json_t *tm = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "decode", s->decode_ms / n, "wait",
                           s->wait_ms / n, "track", s->track_ms / n, "detect", s->detect_ms / n, "crop",
                           s->crop_ms / n, "regress", s->regress_ms / n, "finalise", s->finalise_ms / n, "smooth",
                           s->smooth_ms / n, "render", s->render_ms / n, "write", s->write_ms / n);
    json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:i,s:f,s:f,s:o,s:b,s:f}", "frames", (json_int_t)s->frames, "hands",
                          (json_int_t)s->hands, "tracks", (json_int_t)s->tracks, "detections",
                          (json_int_t)s->detections, "cuts", (json_int_t)s->cuts, "stride", r->a->vp.stride,
                          "elapsed_s", elapsed, "fps", elapsed > 0 ? s->frames / elapsed : 0.0, "timings_ms", tm,
                          "interrupted", stop_requested != 0, "peak_rss_mb", peak_rss_mb());
    json_object_set_new(o, "timings", json_string("mean ms per processed frame; decode on its own thread"));
    json_object_set_new(o, "damaged", damaged ? json_string(damaged) : json_null());
    json_object_set_new(o, "error", error ? json_string(error) : json_null());
    if (r->writer_codec) json_object_set_new(o, "render_codec", json_string(r->writer_codec));
    return json_pack("{s:o}", "summary", o);
}

/* The frame loop: returns the exit status. */
static int loop(hm_video_run *r, FILE *out, long long total) {
    const hm_video_args *a = r->a;
    char damaged[1024] = "", error[1100] = "";
    const double t_start = hm_now();
    int status = 0;
    for (;;) {
        hamer_video_frame f;
        double t0 = hm_now();
        int got = hamer_video_next(r->video, &f);
        r->sum.wait_ms += 1e3 * (hm_now() - t0);
        if (got == 0) break;
        if (got < 0) {
            snprintf(hamer_last_error_code() == HAMER_E_FORMAT ? damaged : error, sizeof damaged, "%s",
                     hamer_last_error());
            status = hamer_last_error_code() == HAMER_E_FORMAT ? 5 : 1;
            break;
        }
        int n = hamer_tracker_frame(r->tracker, r->state, f.rgb, f.width, f.height, f.time_s, &a->pp);
        if (n < 0) {
            snprintf(error, sizeof error, "frame %lld: %s", f.index, hamer_last_error());
            status = 1;
            break;
        }
        const hamer_hand *raw, *smoothed;
        hamer_track_stats st;
        const hamer_track *tracks;
        hamer_tracker_get_results(r->tracker, &tracks, &raw, &smoothed, &st);
        t0 = hm_now();
        char *line = hamer_tracker_frame_json(r->tracker, f.index, a->with_vertices, f.decode_ms);
        int bad = !line || fputs(line, out) < 0 || fputc('\n', out) < 0 || fflush(out) != 0;
        hamer_free(line);
        if (bad) {
            snprintf(error, sizeof error, "cannot write '%s': %s", a->output, line ? strerror(errno) : hamer_last_error());
            status = 1;
            break;
        }
        if (r->anim && hamer_anim_add(r->anim, f.time_s, tracks, smoothed ? smoothed : raw, smoothed || raw ? n : 0)) {
            snprintf(error, sizeof error, "frame %lld: %s", f.index, hamer_last_error());
            status = 1;
            break;
        }
        r->sum.write_ms += 1e3 * (hm_now() - t0);
        sum_add(&r->sum, &f, &st, tracks, n);
        char why[1024];
        if ((a->render || a->render_dir) && render(r, &f, smoothed ? smoothed : raw, smoothed || raw ? n : 0, why,
                                                   sizeof why)) {
            snprintf(error, sizeof error, "rendering frame %lld failed: %s", f.index, why);
            r->render_failed = 1;
            status = 1;
            break;
        }
        progress(r, hm_now() - t_start, total);
        if (stop_requested) {
            status = 130;
            break;
        }
    }
    /* The overlay video is finished before the summary is written, so the
     * summary can say when it could not be. */
    if (r->writer && status != 1) {
        const int rc = hamer_video_writer_close(r->writer, 0);
        r->writer = NULL;
        if (rc) {
            snprintf(error, sizeof error, "finishing the overlay video failed: %s", hamer_last_error());
            r->render_failed = 1;
            status = 1;
        }
    }
    if (isatty(2) && r->sum.frames) fputc('\n', stderr);
    if (damaged[0]) fprintf(stderr, "hamer: input damaged: %s (%lld frames before it were processed)\n", damaged,
                            r->sum.frames);
    if (error[0]) fprintf(stderr, "hamer: %s\n", error);
    if (emit(out, summary(r, hm_now() - t_start, damaged[0] ? damaged : NULL, error[0] ? error : NULL)) &&
        !status) {
        fprintf(stderr, "hamer: cannot write '%s'\n", a->output);
        status = 1;
    }
    return status;
}

/* The overlay writer for --render, opened before the detector and model
 * are loaded so that a name it refuses (an image, an image-sequence
 * pattern, a raw stream: hamer_video_writer_open) costs nothing and
 * creates nothing; 0, or the exit status (printed). */
static int open_writer(hm_video_run *r, const hamer_video_info *vi) {
    const hm_video_args *a = r->a;
    const double fps = vi->fps > 0 ? vi->fps / a->vp.stride : 25.0;
    /* The writer renames its temp file over the path it gets: give it
     * the symlink-followed target so a link to the video stays. */
    hm_outfile probe;
    if (hm_outfile_open(&probe, a->render)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        return 1;
    }
    r->writer = hamer_video_writer_open(probe.target, vi->width, vi->height, vi->time_base_num, vi->time_base_den, fps);
    hm_outfile_abort(&probe);
    if (!r->writer) {
        /* HAMER_E_ARG: the name asks for something it does not write */
        const int usage = hamer_last_error_code() == HAMER_E_ARG;
        fprintf(stderr, "hamer: video: --render: %s%s (nothing written)\n", hamer_last_error(),
                usage ? "; --render-dir DIR writes the frames as PNGs" : "");
        return usage ? 2 : 1;
    }
    if (!(r->overlay = malloc((size_t)vi->width * vi->height * 3))) {
        fprintf(stderr, "hamer: out of memory\n");
        return 1;
    }
    r->writer_codec = hamer_video_writer_get_codec(r->writer);
    return 0;
}

static int run(hm_video_args *a) {
    hm_video_run r;
    memset(&r, 0, sizeof r);
    r.a = a;
    int status = 1;
    FILE *out = NULL;
    hm_outfile of = {0};
    hamer_video_info vi;
    const char *outs[4] = {a->output, a->render, a->glb, a->bvh}, *ins[3] = {a->video, a->model, a->mano};
    if ((status = hm_cli_check_outputs("video", outs, 4, ins, 3))) return status;
    status = 1;
    if (!(r.video = hamer_video_open(a->video, &a->vp)) || hamer_video_get_info(r.video, &vi)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->render && (status = open_writer(&r, &vi))) goto done;
    status = 1;
    if (!(r.detector = hm_tool_load_detector(&a->det)) ||
        !(r.tracker = hamer_tracker_new(r.detector, &a->tp, a->threads))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->model && (!(r.model = hm_tool_load_model(a->model, a->mano, a->precision, a->device)) ||
                     !(r.state = hamer_state_new(r.model, a->tp.max_hands, a->threads)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (r.model && hm_tool_require_mano(r.model, a->model)) goto done;
    hamer_anim_params ap = hamer_anim_default_params();
    ap.fps = vi.fps > 0 && vi.fps <= 1e4 ? vi.fps : 0;  /* keys on the clip's frames */
    ap.shape = a->shape;
    if ((a->glb || a->bvh) && !(r.anim = hamer_anim_new(r.model, &ap))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->render_dir && mkdir(a->render_dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "hamer: cannot create '%s': %s\n", a->render_dir, strerror(errno));
        goto done;
    }
    /* The JSON Lines go to a temp file renamed at the end (also after an
     * interrupt, with the frames done), so a failed run leaves the
     * previous file as it was. */
    if (hm_outfile_open(&of, a->output)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    out = of.f;
    if (emit(out, header(a, &vi, r.writer_codec))) {
        fprintf(stderr, "hamer: cannot write '%s'\n", a->output);
        goto done;
    }
    long long total = vi.frames > 0 ? vi.frames : (long long)(vi.duration_s * vi.fps);
    if (a->vp.duration_s > 0 && vi.fps > 0) total = (long long)(a->vp.duration_s * vi.fps);
    else if (a->vp.start_s > 0 && vi.fps > 0) total -= (long long)(a->vp.start_s * vi.fps);
    total = total > 0 ? (total + a->vp.stride - 1) / a->vp.stride : 0;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    status = loop(&r, out, total);
done:
    /* still open: the run failed (a failed render included), and an
     * existing overlay video stays as it was */
    if (r.writer) hamer_video_writer_close(r.writer, 1);
    /* The lines of a run whose rendering failed are kept: every frame in
     * them was tracked (and regressed) in full, and the summary says what
     * failed. Any other failure leaves the previous file. */
    if (out && (status != 1 || r.render_failed)) {
        if (hm_outfile_commit(&of)) {
            fprintf(stderr, "hamer: %s\n", hamer_last_error());
            status = 1;
        } else if (r.render_failed) {
            fprintf(stderr, "hamer: '%s' written with the %lld frames processed; %s\n", a->output, r.sum.frames,
                    a->render ? "the overlay video was not (an existing file is left as it was)"
                              : "the PNGs of the frames before the failure are in place");
        }
    }
    /* The animation of the frames done (also after an interrupt), as the lines. */
    if (r.anim && (status == 0 || status == 130) &&
        ((a->glb && hamer_anim_write_glb(r.anim, a->glb)) || (a->bvh && hamer_anim_write_bvh(r.anim, a->bvh)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        status = 1;
    }
    hamer_anim_free(r.anim);
    hm_outfile_abort(&of);
    free(r.overlay);
    hamer_state_free(r.state);
    hamer_model_free(r.model);
    hamer_tracker_free(r.tracker);
    hamer_detector_free(r.detector);
    hamer_video_close(r.video);
    return status;
}

int hm_cli_video(int argc, char **argv) {
    static hm_video_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
