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
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "cli/cli_video.h"
#include "common/args.h"
#include "hamer.h"
#include "core/fileio.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { stop_requested = sig; }

/* CHOICE stores an int: the enums it fills must be ints. */
_Static_assert(sizeof(hamer_anim_shape) == sizeof(int), "hamer_anim_shape is an int");

/* The video parameters after option opt set one of them, by the library's
 * check (the others are defaults or were checked when given, so the
 * message is about opt); 0, or -1 with the library's message in why. */
static int check_video_params(const hamer_video_params *vp, const char *opt, char *why, size_t n) {
    if (!hamer_video_check_params(vp)) return 0;
    const char *m = hamer_last_error();
    if (!strncmp(m, "video: ", 7)) m += 7; /* the line says "hamer: video: " already */
    snprintf(why, n, "%s (option %s)", m, opt);
    return -1;
}

/* --start, --duration: only the syntax here (seconds, a decimal number);
 * the ranges are hamer_video_check_params's, the one check the library and
 * the Python binding use. field is the member at off of a hamer_video_params. */
static int seconds_option(const char *v, void *field, size_t off, const char *opt, char *why, size_t n) {
    char *end;
    if (!*v || strspn(v, "0123456789.eE+-") != strlen(v)) return -1;
    double x = strtod(v, &end);
    if (*end || !isfinite(x)) return -1;
    *(double *)field = x;
    return check_video_params((const hamer_video_params *)((char *)field - off), opt, why, n);
}
static int start_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    return seconds_option(v, field, offsetof(hamer_video_params, start_s), "--start", why, n);
}
static int duration_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    return seconds_option(v, field, offsetof(hamer_video_params, duration_s), "--duration", why, n);
}

/* --stride, --queue: any integer here, the range by the library's check. */
static int count_option(const char *v, void *field, size_t off, const char *opt, char *why, size_t n) {
    if (hm_tool_parse_int(v, INT_MIN, INT_MAX, (int *)field)) return -1;
    return check_video_params((const hamer_video_params *)((char *)field - off), opt, why, n);
}
static int stride_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    return count_option(v, field, offsetof(hamer_video_params, stride), "--stride", why, n);
}
static int queue_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    return count_option(v, field, offsetof(hamer_video_params, queue), "--queue", why, n);
}

#define V(field) (offsetof(hm_video_args, field))

static const char *const shapes[] = {"track", "first", NULL};
static const int shape_values[] = {HAMER_ANIM_SHAPE_TRACK, HAMER_ANIM_SHAPE_FIRST};

static const hm_opt video_opts[] = {
    {.name = "--video", .meta = "IN", .kind = HM_OPT_STR, .off = V(video),
     .help = "the video (any container and codec FFmpeg reads)"},
    {.name = "--output", .meta = "OUT.jsonl", .kind = HM_OPT_STR, .off = V(output), .help = "the lines (above)"},
    {.name = "--render", .meta = "OUT", .kind = HM_OPT_STR, .off = V(render),
     .help = "the overlay video (frame rate, size and timestamps of\n"
             "the input; H.264 with libx264, else MPEG-4 part 2);\n"
             "needs --model"},
    {.name = "--render-dir", .meta = "DIR", .kind = HM_OPT_STR, .off = V(render_dir),
     .help = "the overlay of every processed frame as\nDIR/frame_NNNNNN.png; needs --model"},
    {.name = "--glb", .meta = "FILE", .kind = HM_OPT_STR, .off = V(glb),
     .help = "one skinned hand per track, animated over the frames\n"
             "it was tracked (its joints, its place; the frames'\n"
             "times): binary glTF 2.0 for Blender, three.js, Unity;\n"
             "keys on the clip's whole frames, its frame rate in the\n"
             "scene's extras \"fps\"; needs --model"},
    {.name = "--bvh", .meta = "FILE", .kind = HM_OPT_STR, .off = V(bvh),
     .help = "one skeleton per track as BVH motion (16 MANO joints,\n"
             "fingertips as end sites, metres, y up), one line per\n"
             "processed frame at the clip's frame rate; needs --model"},
    {.name = "--shape", .meta = "MODE", .kind = HM_OPT_CHOICE, .off = V(shape), .choices = shapes,
     .values = shape_values,
     .help = "the animation files' skeleton: track (default: one MANO\n"
             "shape per track fitted over the whole clip, each\n"
             "frame's place solved again for it) or first (the\n"
             "track's first frame's shape)"},
    {.name = "--vertices", .kind = HM_OPT_FLAG, .off = V(with_vertices),
     .help = "the 778 vertices of every hand in the lines"},
    {0},
};

static const hm_opt video_frames[] = {
    {.name = "--start", .meta = "T", .kind = HM_OPT_FN, .off = V(vp.start_s), .fn = start_option,
     .want = "seconds (a decimal number)", .help = "begin at the first frame at or after T seconds"},
    {.name = "--duration", .meta = "T", .kind = HM_OPT_FN, .off = V(vp.duration_s), .fn = duration_option,
     .want = "seconds (a decimal number)", .help = "process T seconds (0, the default: to the end)"},
    {.name = "--stride", .meta = "K", .kind = HM_OPT_FN, .off = V(vp.stride), .fn = stride_option,
     .want = "an integer", .help = "every K-th frame (frame numbers stay the input's)"},
    {.name = "--queue", .meta = "N", .kind = HM_OPT_FN, .off = V(vp.queue), .fn = queue_option,
     .want = "an integer", .help = "frames decoded ahead, 1..64 (4)"},
    {0},
};

static const hm_command video_cmd = {
    .cmd = "video",
    .synopsis =
        "usage: hamer video --video IN --output OUT.jsonl [--model M] [--render OUT.mp4]\n"
        "                   [--render-dir DIR] [--draw LIST] [--glb ANIM.glb]\n"
        "                   [--bvh ANIM.bvh] [--shape track|first]\n"
        "                   [--focal PX | --fov DEG]\n"
        "                   [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
        "                   [--tiles] [--body auto|on|off] [--proposals auto|on|off]\n"
        "                   [--smooth one-euro|none] [--min-cutoff HZ] [--beta B]\n"
        "                   [--d-cutoff HZ] [--start T] [--duration T] [--stride K]\n"
        "                   [--threads N] [--precision fp32|fast] [--device D]\n"
        "                   [--vertices] [--mano FILE.npz] [--redetect-every N]\n"
        "                   [--cut-threshold X] [--track-presence P] [--queue N]\n",
    .about =
        "Tracks the hands of a video (any container and codec FFmpeg reads; rotation\n"
        "metadata applied; every frame keeps its presentation time) as MediaPipe does:\n"
        "the landmarks of one frame give the hand's crop in the next, palm detection\n"
        "runs again when a hand is lost, on a scene cut and every --redetect-every\n"
        "frames while fewer than --max-hands hands are tracked. With --model every\n"
        "frame's hands are regressed as one batch and smoothed over their track;\n"
        "without it: tracking only.\n"
        "\n"
        "OUT.jsonl, one JSON object per line, each flushed when written:\n"
        "  {\"video\": {...}, \"options\": {...}, \"render\": ...}            the header\n"
        "  {\"frame\", \"time_s\", \"detected\", \"cut\", \"hands\": [{RESULT.json fields,\n"
        "   \"track_id\", \"tracked\", \"frames\", \"detector_score\", \"handedness_vote\",\n"
        "   \"detection\", \"raw\": {the smoothed fields as regressed}}], \"timings_ms\"}\n"
        "  {\"summary\": {\"frames\", \"hands\", \"tracks\", \"timings_ms\", ...}}   the last line\n",
    .epilog = "Exit status: 0 done; 1 failed; 2 bad usage; 5 the input is damaged or\n"
              "truncated (frames before the damage are written); 130 interrupted.\n",
    .groups = (const hm_opt_group[]){{video_opts, 0, NULL},
                                     {hm_opts_draw, V(hide), NULL},
                                     {video_frames, 0, "the frames"},
                                     {hm_opts_detector, V(tr.det), "tracking and detection"},
                                     {hm_opts_track, V(tr), NULL},
                                     {hm_opts_smooth, V(tr), "smoothing"},
                                     {hm_opts_camera, V(pp), "the camera"},
                                     {hm_opts_model, V(m), "the model"},
                                     {hm_opts_threads, V(m), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--video", "--output", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, hm_video_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    a->vp = hamer_video_default_params();
    hm_track_args_defaults(&a->tr);
    a->pp = hamer_predict_default_params();
    int rc = hm_args_parse(&video_cmd, argc, argv, a);
    if (rc) return rc;
    if ((a->glb || a->bvh) && !a->m.model)
        return hm_tool_fail(2, "video: --glb and --bvh animate the hands: they need --model%s", "");
    if ((a->render || a->render_dir) && !a->m.model)
        return hm_tool_fail(2, "video: --render and --render-dir draw the meshes: they need --model%s", "");
    hm_track_args_finish(&a->tr);
    return 0;
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
    const hamer_tracker_params *t = &a->tr.tp;
    json_t *o = json_pack("{s:f,s:f,s:i,s:i,s:b,s:s,s:f,s:f,s:f,s:i,s:i,s:i,s:f,s:f}", "start_s", a->vp.start_s,
                          "duration_s", a->vp.duration_s, "stride", a->vp.stride, "max_hands", t->max_hands, "tiles",
                          t->tiles, "smooth", t->smooth ? "one-euro" : "none", "min_cutoff", t->min_cutoff, "beta",
                          t->beta, "d_cutoff", t->d_cutoff, "betas_frames", t->betas_frames, "betas_min",
                          t->betas_min, "redetect_every", t->redetect_every, "cut_threshold", (double)t->cut_threshold,
                          "track_presence", (double)t->track_presence);
    json_object_set_new(o, "model", a->m.model ? json_string(a->m.model) : json_null());
    json_object_set_new(o, "precision", json_string(a->m.precision == HAMER_PRECISION_FAST ? "fast" : "fp32"));
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
                          "interrupted", stop_requested != 0, "peak_rss_mb", hm_tool_peak_rss_mb());
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
    const char *outs[4] = {a->output, a->render, a->glb, a->bvh}, *ins[3] = {a->video, a->m.model, a->m.mano};
    if ((status = hm_cli_check_outputs("video", outs, 4, ins, 3))) return status;
    status = 1;
    if (!(r.video = hamer_video_open(a->video, &a->vp)) || hamer_video_get_info(r.video, &vi)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->render && (status = open_writer(&r, &vi))) goto done;
    status = 1;
    if (!(r.detector = hm_tool_load_detector(&a->tr.det)) ||
        !(r.tracker = hamer_tracker_new(r.detector, &a->tr.tp, a->m.threads))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->m.model && (!(r.model = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device)) ||
                     !(r.state = hamer_state_new(r.model, a->tr.tp.max_hands, a->m.threads)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (r.model && hm_tool_require_mano(r.model, a->m.model)) goto done;
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
