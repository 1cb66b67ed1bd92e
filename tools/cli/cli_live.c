/* cli_live.c - `hamer live`: a camera, a stream or a file played at its own
 * pace in, the hands out as JSON Lines as they come (hamer_capture_open +
 * hamer_live: the detector and tracker at the source's pace, the regressor
 * on the newest tracked frame whenever it is free). Public API only.
 *
 * Output lines: a header ({"live": {...}}), one line per record
 * (hamer_live_record_json: each regressed frame, with --every-frame each
 * tracked one too), and a summary ({"summary": ...}, also one line on
 * stderr). Streamed: each line is flushed as written, into the file itself
 * (or a pipe), so that another program can follow a session that has no
 * end; a killed session leaves whole lines.
 *
 * The end: the source ends (a file), --duration or --frames is reached,
 * or SIGINT / SIGTERM (the usual way to end a camera session: the summary
 * is written, exit 0). Exit status: 0; 1 failed (the source, the model, the
 * detector; the lines so far are kept); 2 bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"

typedef struct {
    hm_model_args m;            /* --model (none: tracking only) --mano --precision --device --threads */
    const char *input, *format, *output;
    char options[4096];         /* --option values joined by ':' (FFmpeg's dictionary syntax) */
    hamer_pace pace;
    int every_frame, with_vertices;
    long long frames;
    double duration;
    hm_track_args tr;           /* the detector and the tracker */
} live_args;

_Static_assert(sizeof(hamer_pace) == sizeof(int), "hamer_pace is an int");

/* --option K=V, repeatable: appended to the dictionary string. */
static int option_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx;
    char *opts = field;
    const size_t cap = sizeof ((live_args *)0)->options, len = strlen(opts);
    if (!strchr(v, '=') || strchr(v, ':') || v[0] == '=') {
        snprintf(why, n, "--option takes KEY=VALUE (no ':'), got '%s'", v);
        return -1;
    }
    if (len + strlen(v) + 2 > cap) {
        snprintf(why, n, "--option: the options together exceed %zu bytes", cap - 1);
        return -1;
    }
    snprintf(opts + len, cap - len, "%s%s", len ? ":" : "", v);
    return 0;
}

#define L(field) (offsetof(live_args, field))

static const char *const paces[] = {"auto", "on", "off", NULL};
static const int pace_values[] = {HAMER_PACE_AUTO, HAMER_PACE_ON, HAMER_PACE_OFF};

static const hm_opt live_opts[] = {
    {.name = "--input", .meta = "URL", .kind = HM_OPT_STR, .off = L(input),
     .help = "a device (with --format v4l2), a stream URL, a file"},
    {.name = "--format", .meta = "F", .kind = HM_OPT_STR, .off = L(format),
     .help = "FFmpeg's input format (v4l2, lavfi, ...; default: from\nthe URL)"},
    {.name = "--option", .meta = "K=V", .kind = HM_OPT_FN, .off = L(options), .fn = option_option,
     .want = "KEY=VALUE",
     .help = "an option of the input (video_size, framerate,\n"
             "input_format, rtsp_transport, ...); repeatable"},
    {.name = "--pace", .meta = "P", .kind = HM_OPT_CHOICE, .off = L(pace), .choices = paces, .values = pace_values,
     .help = "auto (default: a file at its timestamps, a device or\n"
             "stream as it delivers), on, off (as fast as it decodes)"},
    {.name = "--output", .meta = "FILE", .kind = HM_OPT_STR, .off = L(output),
     .help = "the JSON Lines (default '-': standard output)"},
    {.name = "--every-frame", .kind = HM_OPT_FLAG, .off = L(every_frame),
     .help = "a line for every tracked frame, not only the regressed\nones"},
    {.name = "--vertices", .kind = HM_OPT_FLAG, .off = L(with_vertices),
     .help = "the 778 vertices of every hand in the lines"},
    {.name = "--duration", .meta = "S", .kind = HM_OPT_REAL, .off = L(duration), .lo = 0, .hi = 1e9, .open_lo = 1,
     .help = "stop after S seconds"},
    {.name = "--frames", .meta = "N", .kind = HM_OPT_LLONG, .off = L(frames), .lo = 1, .hi = 1e15,
     .help = "stop after N captured frames"},
    {0},
};

static const hm_command live_cmd = {
    .cmd = "live",
    .synopsis =
        "usage: hamer live --input URL [--format F] [--option KEY=VALUE ...]\n"
        "                  [--pace auto|on|off] [--model M] [--output OUT.jsonl]\n"
        "                  [--every-frame] [--vertices] [--duration S] [--frames N]\n"
        "                  [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
        "                  [--tiles] [--body auto|on|off] [--proposals auto|on|off]\n"
        "                  [--smooth one-euro|none] [--threads N]\n"
        "                  [--precision fp32|fast] [--device D] [--mano FILE.npz]\n",
    .about =
        "Hands live from a camera, a stream or a file, read through FFmpeg:\n"
        "  hamer live --format v4l2 --input /dev/video0 --option video_size=640x480 \\\n"
        "             --model hamer.ckpt\n"
        "  hamer live --input rtsp://camera.local/stream --model hamer.ckpt \\\n"
        "             --output hands.jsonl\n"
        "  hamer live --input clip.mp4 --model hamer.ckpt      (played at its own pace)\n"
        "The detector and tracker run at the source's pace; the regressor takes the\n"
        "newest tracked frame whenever it is free. A stage slower than the one before\n"
        "it drops frames (counted): nothing queues, the latency stays one frame's\n"
        "work. Each line: {\"frame\", \"time_s\", \"capture_time_ms\" (Unix ms),\n"
        "\"latency_ms\" (capture to line), \"regressed\", \"hands\": [RESULT.json fields,\n"
        "\"track_id\", ...], \"timings_ms\", \"frames\": {captured, tracked, regressed},\n"
        "\"dropped\": {source, track, regress}}.\n",
    .epilog = "Ends with the source, --duration, --frames or SIGINT / SIGTERM (the summary\n"
              "is written). Exit status: 0 done; 1 failed (the lines so far are kept);\n"
              "2 bad usage.\n",
    .groups = (const hm_opt_group[]){{live_opts, 0, NULL},
                                     {hm_opts_detector, L(tr.det), "tracking and detection"},
                                     {hm_opts_track, L(tr), NULL},
                                     {hm_opts_smooth, L(tr), "smoothing"},
                                     {hm_opts_model, L(m), "the model (without it: tracking only)"},
                                     {hm_opts_threads, L(m), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--input", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, live_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    a->output = "-";
    hm_track_args_defaults(&a->tr);
    int rc = hm_args_parse(&live_cmd, argc, argv, a);
    if (rc) return rc;
    hm_track_args_finish(&a->tr);
    return 0;
}

typedef struct {
    const live_args *a;
    FILE *out;
    hamer_live *live;
    double t0;
    int write_failed;
} live_run;

static int emit_line(FILE *out, char *s) {
    int bad = !s || fputs(s, out) < 0 || fputc('\n', out) < 0 || fflush(out) != 0;
    free(s);
    return bad;
}

/* One record: its line; a stop when --frames or --duration is reached. */
static int on_record(void *user, const hamer_live_record *rec) {
    live_run *r = user;
    char *line = hamer_live_record_json(rec, r->a->with_vertices);
    if (!line || emit_line(r->out, line)) {
        r->write_failed = 1;
        return 1;
    }
    if (r->a->frames && rec->captured >= r->a->frames) return 1;
    if (r->a->duration > 0 && hamer_clock() - r->t0 >= r->a->duration) return 1;
    return 0;
}

/* SIGINT / SIGTERM (and --duration's deadline) end the run through a
 * watcher thread: the handler only writes a byte to a pipe (what a handler
 * may do), the watcher reads it and calls hamer_live_stop (which takes
 * locks and ends a blocked read). */
static int g_pipe[2] = {-1, -1};

static void on_signal(int sig) {
    const char c = (char)sig;
    ssize_t k = write(g_pipe[1], &c, 1);
    (void)k;
}

typedef struct {
    hamer_live *live;
    double duration;
} sig_watch;

static void *watch_main(void *arg) {
    sig_watch *w = arg;
    struct pollfd pfd = {g_pipe[0], POLLIN, 0};
    /* a second past --duration, should the records stop coming */
    const int timeout = w->duration > 0 ? (int)fmin(1e3 * (w->duration + 1), 2e9) : -1;
    char c = 0;
    int r;
    while ((r = poll(&pfd, 1, timeout)) < 0 && errno == EINTR) {
    }
    if (r > 0 && read(g_pipe[0], &c, 1) != 1) c = 0;
    if (c != 'q') hamer_live_stop(w->live); /* a signal, or the deadline; 'q': the run ended by itself */
    return NULL;
}

static json_t *header(const live_args *a) {
    static const char *const paces[] = {"auto", "on", "off"};
    return json_pack("{s:{s:s,s:s?,s:s?,s:s,s:s?,s:i,s:b,s:s}}", "live", "input", a->input, "format", a->format,
                     "options", a->options[0] ? a->options : NULL, "pace", paces[a->pace], "model", a->m.model,
                     "max_hands", a->tr.tp.max_hands, "every_frame", a->every_frame, "smooth",
                     a->tr.tp.smooth == HAMER_SMOOTH_NONE ? "none" : "one-euro");
}

static json_t *summary(const hamer_live_stats *s, const char *error) {
    const double sec = s->seconds > 0 ? s->seconds : 1;
    json_t *o = json_pack("{s:{s:I,s:I,s:I,s:I},s:{s:I,s:I,s:I},s:{s:f,s:f,s:f},s:{s:f,s:f,s:f},s:i,s:f}",
                          "frames", "captured", (json_int_t)s->captured, "tracked", (json_int_t)s->tracked,
                          "regressed", (json_int_t)s->regressed_frames, "records", (json_int_t)s->records,
                          "dropped", "source", (json_int_t)s->dropped_source, "track", (json_int_t)s->dropped_track,
                          "regress", (json_int_t)s->dropped_regress, "fps", "captured", s->captured / sec,
                          "tracked", s->tracked / sec, "regressed", s->regressed_frames / sec, "latency_ms", "p50",
                          s->latency_p50_ms, "p90", s->latency_p90_ms, "max", s->latency_max_ms, "waiting_max",
                          s->waiting_max, "seconds", s->seconds);
    if (s->track_latency_max_ms > 0)
        json_object_set_new(o, "tracked_latency_ms", json_pack("{s:f,s:f,s:f}", "p50", s->track_latency_p50_ms, "p90",
                                                               s->track_latency_p90_ms, "max", s->track_latency_max_ms));
    /* the queues are bounded, so a long run ends where a short one does */
    json_object_set_new(o, "peak_rss_mb", json_real(hm_tool_peak_rss_mb()));
    if (error) json_object_set_new(o, "error", json_string(error));
    return json_pack("{s:o}", "summary", o);
}

static int run(const live_args *a) {
    const char *ins[3] = {a->input, a->m.model, a->m.mano}, *outs[1] = {a->output};
    int to_stdout = !strcmp(a->output, "-");
    if (!to_stdout && hm_cli_check_outputs("live", outs, 1, ins, 3)) return 2;
    if (pipe(g_pipe) != 0) return hm_tool_fail(1, "live: cannot make a pipe: %s", strerror(errno));
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    int status = 1;
    hamer_detector *det = NULL;
    hamer_model *model = NULL;
    hamer_state *state = NULL;
    hamer_frame_source src = {0};
    live_run r = {.a = a};
    if (!(det = hm_tool_load_detector(&a->tr.det))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (a->m.model && (!(model = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device)) ||
                     !(state = hamer_state_new(model, a->tr.tp.max_hands, a->m.threads)))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (model && hm_tool_require_mano(model, a->m.model)) goto done;
    hamer_live_params lp = hamer_live_default_params();
    lp.tracker = a->tr.tp;
    lp.every_frame = a->every_frame;
    if (!(r.live = hamer_live_new(det, state, &lp, a->m.threads))) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    hamer_capture_params cp = hamer_capture_default_params();
    cp.format = a->format;
    cp.options = a->options[0] ? a->options : NULL;
    cp.pace = a->pace;
    if (hamer_capture_open(a->input, &cp, &src)) {
        fprintf(stderr, "hamer: %s\n", hamer_last_error());
        goto done;
    }
    if (to_stdout) {
        r.out = stdout;
    } else if (!(r.out = fopen(a->output, "w"))) {
        fprintf(stderr, "hamer: live: cannot create '%s': %s\n", a->output, strerror(errno));
        goto done;
    }
    json_t *head = header(a);
    int head_bad = emit_line(r.out, json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER));
    json_decref(head);
    if (head_bad) {
        fprintf(stderr, "hamer: live: cannot write '%s'\n", a->output);
        goto done;
    }
    sig_watch w = {r.live, a->duration};
    pthread_t watcher;
    int watching = !pthread_create(&watcher, NULL, watch_main, &w);
    r.t0 = hamer_clock();
    int rc = hamer_live_run(r.live, &src, on_record, &r);
    char error[1024] = "";
    if (rc) snprintf(error, sizeof error, "%s", hamer_last_error());
    if (watching) {
        ssize_t k = write(g_pipe[1], "q", 1);
        (void)k;
        pthread_join(watcher, NULL);
    }
    hamer_live_stats s;
    hamer_live_get_stats(r.live, &s);
    json_t *sum = summary(&s, rc ? error : r.write_failed ? "the output could not be written" : NULL);
    int bad = emit_line(r.out, json_dumps(sum, JSON_REAL_PRECISION(6) | JSON_COMPACT | JSON_PRESERVE_ORDER));
    json_decref(sum);
    fprintf(stderr,
            "hamer: live: %lld frames captured, %lld tracked, %lld regressed in %.1f s; dropped: %lld source, %lld "
            "track, %lld regress; latency ms p50 %.0f, p90 %.0f, max %.0f%s%s\n",
            s.captured, s.tracked, s.regressed_frames, s.seconds, s.dropped_source, s.dropped_track, s.dropped_regress,
            s.latency_p50_ms, s.latency_p90_ms, s.latency_max_ms, rc ? "; " : "", rc ? error : "");
    status = rc || r.write_failed || bad ? 1 : 0;
done:
    if (r.out && !to_stdout && fclose(r.out) != 0) {
        fprintf(stderr, "hamer: live: cannot write '%s': %s\n", a->output, strerror(errno));
        status = 1;
    }
    hamer_live_free(r.live);
    if (src.close) src.close(src.ctx);
    hamer_state_free(state);
    hamer_model_free(model);
    hamer_detector_free(det);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    close(g_pipe[0]), close(g_pipe[1]);
    g_pipe[0] = g_pipe[1] = -1;
    return status;
}

int hm_cli_live(int argc, char **argv) {
    static live_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
