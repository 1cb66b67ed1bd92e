/* cli_batch.c - `hamer batch`: a folder of photos in, a folder of results
 * out, as the official demo's `demo.py --img_folder --out_folder` does, with
 * the model and the detector loaded once and a run that can be stopped at
 * any point and resumed.
 *
 * A subcommand of its own rather than `hamer run --input-dir`: its contract
 * is a folder, not a file (per-image outputs, errors.jsonl, a summary, its
 * own exit codes), and half of each command's options would be meaningless
 * with the other's (--image / --output / --box against --out-dir /
 * --recursive / --glob / --jobs / --force).
 *
 * Per image NAME.EXT (NAME: the file name without its extension, in the
 * output folder's mirror of the image's subfolder):
 *   NAME.json        RESULT.json, byte for byte what `hamer run` writes for
 *                    that image with the same options (timings aside),
 *                    with the image's record first: "input": {"path",
 *                    "size", "mtime_ns"} (the rules, below)
 *   NAME_all.png     --render: every hand over the image
 *   NAME_side.png    --side-view
 *   NAME_N.obj       --save-mesh: hand N of NAME.json (0-based; not for a
 *                    hand that failed)
 *   NAME.glb         --glb: its hands as a skinned binary glTF
 *   NAME.bvh         --bvh: its hands as BVH skeletons
 * Every file is written to a temporary file, fsync'd and renamed
 * (core/fileio.h), NAME.json last: an image is complete exactly when its
 * NAME.json is there, so an interrupted run leaves no partial file and the
 * next run redoes only what was not finished.
 *
 * Exit status: 0 every image done (now or by an earlier run); 1 nothing or
 * not all could be attempted (model, detector, folders; message on
 * stderr); 2 bad usage; 3 some images failed (one line each in
 * OUT/errors.jsonl), the others done; 130 interrupted (SIGINT / SIGTERM:
 * finished images are kept, a rerun resumes).
 *
 * The folder rules (scan, names, skip rule, errors.jsonl, the lock) are the
 * library's folder mode (hamer_folder_*, src/hamer_folder.c), which
 * Model.predict_folder also runs; this file adds the options, the model
 * and detector loads, decoding ahead of the inference, the parallel jobs,
 * progress on a terminal and the summary.
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"

/* ---- arguments ---- */

#define MAX_GLOBS 16

typedef struct {
    hm_model_args m;                /* --model --mano --precision --device --threads */
    const char *input_dir, *out_dir, *boxes_dir;
    const char *globs[MAX_GLOBS];
    int nglob, recursive, jobs, prefetch, force, retry_failed, json;
    int save_mesh, render, side, glb, bvh, with_vertices;
    unsigned hide;                  /* --draw: HAMER_DRAW_* bits not drawn */
    hm_tool_detect_args det;
    hamer_predict_params pp;        /* --rescale --crop-mode --focal --fov */
} batch_args;

#define B(field) (offsetof(batch_args, field))

static const hm_opt batch_opts[] = {
    {.name = "--input-dir", .meta = "DIR", .kind = HM_OPT_STR, .off = B(input_dir), .help = "the photos"},
    {.name = "--out-dir", .meta = "OUT", .kind = HM_OPT_STR, .off = B(out_dir),
     .help = "the results: NAME.json (and the files asked for) per\nimage"},
    {.name = "--recursive", .kind = HM_OPT_FLAG, .off = B(recursive),
     .help = "also the subfolders (mirrored in OUT; links followed,\n"
             "each folder once; at most 64 deep and 1000000 names)"},
    {.name = "--glob", .meta = "P", .kind = HM_OPT_STR, .off = B(globs), .repeat = MAX_GLOBS,
     .elem = sizeof(const char *), .count_off = B(nglob),
     .help = "only files whose name matches P (fnmatch, e.g. '*.jpg';\n"
             "repeatable, up to 16); default every file not\n"
             "starting with '.'"},
    {.name = "--boxes-dir", .meta = "D", .kind = HM_OPT_STR, .off = B(boxes_dir),
     .help = "the boxes of image NAME from D/NAME.json (any document\n"
             "'hamer run --boxes' reads), else detected"},
    {.name = "--jobs", .meta = "N", .kind = HM_OPT_INT, .off = B(jobs), .lo = 1, .hi = 64,
     .help = "images in flight at once (default 1), --threads split\nbetween them"},
    {.name = "--prefetch", .meta = "N", .kind = HM_OPT_INT, .off = B(prefetch), .lo = 0, .hi = 64,
     .help = "images decoded ahead of the inference (default 2; 0:\nnone)"},
    {.name = "--force", .kind = HM_OPT_FLAG, .off = B(force), .help = "redo images whose outputs are already there"},
    {.name = "--retry-failed", .kind = HM_OPT_FLAG, .off = B(retry_failed),
     .help = "retry images an earlier run recorded as bad"},
    {.name = "--save-mesh", .kind = HM_OPT_FLAG, .off = B(save_mesh), .help = "NAME_N.obj per hand"},
    {.name = "--render", .kind = HM_OPT_FLAG, .off = B(render),
     .help = "NAME_all.png: every hand over the image (--draw\nchooses what)"},
    {.name = "--side-view", .kind = HM_OPT_FLAG, .off = B(side),
     .help = "NAME_side.png: the meshes turned 90 degrees"},
    {.name = "--glb", .kind = HM_OPT_FLAG, .off = B(glb), .help = "NAME.glb: the hands as a skinned binary glTF"},
    {.name = "--bvh", .kind = HM_OPT_FLAG, .off = B(bvh), .help = "NAME.bvh: the hands as BVH skeletons"},
    {.name = "--vertices", .kind = HM_OPT_FLAG, .off = B(with_vertices),
     .help = "the 778 vertices per hand in NAME.json"},
    {.name = "--json", .kind = HM_OPT_FLAG, .off = B(json), .help = "the summary as one JSON object on stdout"},
    {0},
};

static const hm_command batch_cmd = {
    .cmd = "batch",
    .synopsis =
        "usage: hamer batch --model M --input-dir DIR --out-dir OUT\n"
        "                   [--recursive] [--glob PATTERN ...] [--jobs N] [--threads N]\n"
        "                   [--prefetch N] [--force] [--retry-failed] [--save-mesh]\n"
        "                   [--render [--draw LIST]] [--side-view] [--glb] [--bvh]\n"
        "                   [--vertices] [--focal PX | --fov DEG] [--boxes-dir D]\n"
        "                   [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
        "                   [--single-pass] [--body auto|on|off] [--body-boxes on|off]\n"
        "                   [--proposals auto|on|off] [--rescale 2.0]\n"
        "                   [--crop-mode warp|pad] [--mano FILE.npz]\n"
        "                   [--precision fp32|fast] [--device D] [--json]\n",
    .about =
        "Every image of DIR through `hamer run` with one model load: per image NAME\n"
        "OUT/NAME.json (RESULT.json), and NAME_all.png (--render), NAME_side.png\n"
        "(--side-view), NAME_N.obj per hand (--save-mesh), NAME.glb (--glb: the hands\n"
        "as a skinned binary glTF), NAME.bvh (--bvh: BVH skeletons). Boxes from\n"
        "D/NAME.json (any document `hamer run --boxes` reads) with --boxes-dir, else\n"
        "detected. --focal / --fov give every photo that camera (default: each\n"
        "photo's EXIF, else the model's own camera).\n",
    .epilog =
        "Resumable: an image whose NAME.json records it (path, size, mtime) and whose\n"
        "outputs are all present and newer than it (and than its boxes file) is\n"
        "skipped; every file is written atomically. Two images with one NAME: the one\n"
        "NAME.json records (else the first by name) keeps it, the other fails. A bad\n"
        "image (not decodable, no boxes file, a failed hand) is one line {\"path\",\n"
        "\"reason\", ...} of OUT/errors.jsonl and never stops the run; images that do\n"
        "not decode are not retried while unchanged (--retry-failed). A photo\n"
        "without hands is a result: NAME.json lists none.\n"
        "\n"
        "Exit status: 0 all images done; 1 could not run (message on stderr); 2 bad\n"
        "usage; 3 some images failed (OUT/errors.jsonl); 130 interrupted (rerun to\n"
        "resume).\n",
    .groups = (const hm_opt_group[]){{batch_opts, 0, NULL},
                                     {hm_opts_draw, B(hide), NULL},
                                     {hm_opts_detector, B(det), "the detector (images without a boxes file)"},
                                     {hm_opts_detect, B(det), NULL},
                                     {hm_opts_crop, B(pp), "the crop and the camera"},
                                     {hm_opts_camera, B(pp), NULL},
                                     {hm_opts_model, B(m), "the model"},
                                     {hm_opts_threads, B(m), NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", "--input-dir", "--out-dir", NULL},
};

static int parse(int argc, char **argv, batch_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    a->pp = hamer_predict_default_params();
    a->jobs = 1;
    a->prefetch = 2;
    hm_tool_detect_defaults(&a->det);
    int rc = hm_args_parse(&batch_cmd, argc, argv, a);
    if (rc) return rc;
    if (a->hide == HAMER_DRAW_ALL) return hm_tool_fail(2, "batch: --draw %s draws nothing (leave --render out)", "none");
    return 0;
}

/* Set by SIGINT / SIGTERM, from the start of the run (the scan of a big
 * folder and the look at its outputs can take a while too). */
static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static int cancel_cb(void *user) {
    (void)user;
    return g_stop != 0;
}

/* One stderr line "hamer: batch: " + msg (names in it already escaped by
 * the library). */
static void say(const char *msg) { fprintf(stderr, "hamer: batch: %s\n", msg); }

/* ---- the run ---- */

typedef struct {
    int idx;          /* image index; -1: the end */
    uint8_t *rgb;
    int w, h;
    double decode_ms;
    char err[512];    /* decoding failed: why */
} slot;

typedef struct {
    const batch_args *a;
    hamer_folder *folder;
    int *todo;        /* indices of the images to compute, in order */
    int ntodo;
    hamer_model *model;
    hamer_detector *det;
    int threads_per_job;
    pthread_mutex_t mu;
    pthread_cond_t cv_put, cv_get, cv_done;
    slot *q;          /* the prefetch ring */
    int qcap, qhead, qlen, next_decode, next_claim;
    int workers_left;
    int started;      /* images taken and not cancelled (under mu) */
    char fatal[1024];
} batch;

/* Decode image idx into s. */
static void decode_into(batch *b, int idx, slot *s) {
    memset(s, 0, sizeof *s);
    s->idx = idx;
    hamer_folder_image im;
    hamer_folder_get_image(b->folder, idx, &im);
    double t0 = hm_now();
    if (hamer_image_load(im.path, &s->rgb, &s->w, &s->h)) snprintf(s->err, sizeof s->err, "%s", hamer_last_error());
    s->decode_ms = 1e3 * (hm_now() - t0);
}

/* The prefetch thread: decodes the images in order, at most qcap ahead of
 * the workers, so that decoding overlaps inference. */
static void *prefetcher(void *arg) {
    batch *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (b->qlen == b->qcap && !g_stop) pthread_cond_wait(&b->cv_put, &b->mu);
        int idx = !g_stop && b->next_decode < b->ntodo ? b->todo[b->next_decode++] : -1;
        pthread_mutex_unlock(&b->mu);
        slot s = {.idx = -1};
        if (idx >= 0) decode_into(b, idx, &s);
        pthread_mutex_lock(&b->mu);
        if (idx >= 0 || b->qlen < b->qcap) {
            b->q[(b->qhead + b->qlen) % b->qcap] = s;
            b->qlen++;
        }
        pthread_cond_broadcast(&b->cv_get);
        pthread_mutex_unlock(&b->mu);
        if (idx < 0) return NULL;
    }
}

/* The next decoded image for a worker; 0 at the end (or when stopping). */
static int next_image(batch *b, slot *s) {
    if (b->qcap == 0) {
        pthread_mutex_lock(&b->mu);
        int idx = !g_stop && b->next_claim < b->ntodo ? b->todo[b->next_claim++] : -1;
        pthread_mutex_unlock(&b->mu);
        if (idx < 0) return 0;
        decode_into(b, idx, s);
        return 1;
    }
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if (!g_stop && b->qlen > 0 && b->q[b->qhead].idx >= 0) {
            *s = b->q[b->qhead];
            b->qhead = (b->qhead + 1) % b->qcap;
            b->qlen--;
            pthread_cond_broadcast(&b->cv_put);
            pthread_mutex_unlock(&b->mu);
            return 1;
        }
        /* The end marker stays at the head for the other workers. */
        if (b->qlen > 0 || g_stop) break;
        pthread_cond_wait(&b->cv_get, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* An image that failed: its reason on stderr too, so that nothing is
 * silent even when errors.jsonl cannot be written. */
static void tell_failure(const hamer_folder *f, int idx) {
    hamer_folder_image im;
    if (hamer_folder_get_image(f, idx, &im) || im.status != HAMER_FOLDER_FAILED || !im.error_reason) return;
    int named = strstr(im.error_reason, im.shown) != NULL; /* most library messages name the file already */
    fprintf(stderr, "%shamer: %s%s%s\n", isatty(2) ? "\r\033[K" : "", named ? "" : im.shown, named ? "" : ": ",
            im.error_reason);
}

static void *worker(void *arg) {
    batch *b = arg;
    hamer_state *st = hamer_state_new(b->model, 16, b->threads_per_job);
    hamer_detect_state *ds = st && b->det ? hamer_detect_state_new(b->det, b->threads_per_job) : NULL;
    hamer_job *job = NULL;
    if (st && (!b->det || ds)) {
        hamer_job_params jp = hamer_job_default_params();
        jp.predict = b->a->pp;
        jp.detect = b->a->det.params;
        job = hamer_job_new(st, ds, &jp);
    }
    if (!job) {
        pthread_mutex_lock(&b->mu);
        snprintf(b->fatal, sizeof b->fatal, "%s", hamer_last_error());
        g_stop = 1;
        pthread_cond_broadcast(&b->cv_put);
        pthread_cond_broadcast(&b->cv_get);
        pthread_mutex_unlock(&b->mu);
    } else {
        hamer_state_set_cancel(st, cancel_cb, NULL);
        slot s;
        while (next_image(b, &s)) {
            hamer_folder_decoded pre = {.rgb = s.rgb, .width = s.w, .height = s.h, .decode_ms = s.decode_ms,
                                        .decode_error = s.err};
            int rc = hamer_folder_process(b->folder, s.idx, job, &pre, NULL);
            hamer_free(s.rgb);
            if (rc != HAMER_E_CANCELLED) tell_failure(b->folder, s.idx);
            pthread_mutex_lock(&b->mu);
            b->started += rc != HAMER_E_CANCELLED;
            pthread_cond_broadcast(&b->cv_done);
            pthread_mutex_unlock(&b->mu);
        }
    }
    hamer_job_free(job);
    hamer_detect_state_free(ds);
    hamer_state_free(st);
    pthread_mutex_lock(&b->mu);
    b->workers_left--;
    pthread_cond_broadcast(&b->cv_done);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static void progress(batch *b, double t_start, int final) {
    if (!isatty(2)) return;
    if (final) {
        fprintf(stderr, "\r\033[K");
        return;
    }
    hamer_folder_stats fs;
    hamer_folder_get_stats(b->folder, &fs);
    double el = hm_now() - t_start, rate = el > 0 ? b->started / el : 0;
    int left = b->ntodo - b->started;
    fprintf(stderr, "\rhamer: batch: %d/%d images, %d hands, %.2f images/s", b->started, b->ntodo, fs.hands, rate);
    if (rate > 0 && left > 0) fprintf(stderr, ", ETA %.0f s", left / rate);
    fprintf(stderr, "\033[K");
    fflush(stderr);
}

/* The images to compute: the model and detector loaded, the prefetcher
 * and the workers started and joined. 0, or -1 with b->fatal set. */
static int compute(batch *b, double *t_load) {
    const batch_args *a = b->a;
    double t0 = hm_now();
    b->model = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device);
    if (!b->model || (!a->boxes_dir && !(b->det = hm_tool_load_detector(&a->det)))) {
        snprintf(b->fatal, sizeof b->fatal, "%s", hamer_last_error());
        return -1;
    }
    hamer_model_info info;
    if (hamer_model_get_info(b->model, &info) == HAMER_OK && !info.has_mano) {
        snprintf(b->fatal, sizeof b->fatal, "%s has no MANO buffers (mano.*), so no mesh can be computed: %s",
                 a->m.model, hm_tool_mano_advice);
        return -1;
    }
    *t_load = hm_now() - t0;
    int total = hm_tool_threads(a->m.threads);
    int jobs = a->jobs < b->ntodo ? a->jobs : b->ntodo;
    b->threads_per_job = total / jobs > 0 ? total / jobs : 1;
    b->qcap = a->prefetch;
    pthread_t *th = calloc((size_t)jobs, sizeof *th), pre;
    if ((b->qcap && !(b->q = calloc((size_t)b->qcap, sizeof *b->q))) || !th) {
        free(th);
        snprintf(b->fatal, sizeof b->fatal, "out of memory");
        return -1;
    }
    double t_run = hm_now();
    int npre = b->qcap && pthread_create(&pre, NULL, prefetcher, b) == 0, nth = 0;
    if (b->qcap && !npre) {
        snprintf(b->fatal, sizeof b->fatal, "cannot start the decoding thread");
        g_stop = 1;
    }
    b->workers_left = jobs;
    for (; nth < jobs; nth++)
        if (pthread_create(&th[nth], NULL, worker, b)) break;
    pthread_mutex_lock(&b->mu);
    b->workers_left -= jobs - nth;   /* those started may already be counting down */
    while (b->workers_left > 0) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 500000000L;
        if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
        pthread_cond_timedwait(&b->cv_done, &b->mu, &until);
        /* A signal handler cannot wake the threads that wait: done here. */
        if (g_stop) pthread_cond_broadcast(&b->cv_put), pthread_cond_broadcast(&b->cv_get);
        progress(b, t_run, 0);
    }
    /* The workers are done: the prefetcher may still wait for room. */
    if (b->fatal[0]) g_stop = 1;
    pthread_cond_broadcast(&b->cv_put);
    pthread_cond_broadcast(&b->cv_get);
    pthread_mutex_unlock(&b->mu);
    progress(b, t_run, 1);
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
    if (npre) pthread_join(pre, NULL);
    for (int i = 0; b->qcap && i < b->qlen; i++) hamer_free(b->q[(b->qhead + i) % b->qcap].rgb);
    free(th);
    return b->fatal[0] ? -1 : 0;
}

static void summary(const batch_args *a, const batch *b, double wall, double t_load, int interrupted) {
    hamer_folder_stats s;
    hamer_folder_get_stats(b->folder, &s);
    int not_done = b->ntodo - b->started;
    double proc_s = wall - t_load;
    if (a->json) {
        json_t *o = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:f,s:f,s:f}", "images", s.images, "computed",
                              s.computed, "skipped", s.skipped, "failed", s.failed, "failed_earlier", s.failed_earlier,
                              "hands", s.hands, "interrupted", interrupted, "seconds", wall, "load_seconds", t_load,
                              "images_per_s", proc_s > 0 ? b->started / proc_s : 0.0);
        json_t *stg = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "decode", s.decode_s, "detect", s.detect_s, "crop",
                                s.crop_s, "regress", s.regress_s, "finalise", s.finalise_s, "render", s.render_s,
                                "write", s.write_s);
        json_object_set_new(o, "stage_seconds", stg);
        json_object_set_new(o, "not_done", json_integer(not_done));
        char *t = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (t) puts(t);
        free(t);
        fflush(stdout);
    }
    int failed = s.failed + s.failed_earlier;
    fprintf(stderr,
            "hamer: batch: %d images: %d computed, %d skipped (done earlier), %d failed%s; %d hands; %.1f s "
            "(load %.1f; decode %.1f, detect %.1f, crop %.1f, regress %.1f, finalise %.1f, render %.1f, write %.1f "
            "summed over jobs)\n",
            s.images, s.computed, s.skipped, failed, failed ? " (see errors.jsonl)" : "", s.hands, wall, t_load,
            s.decode_s, s.detect_s, s.crop_s, s.regress_s, s.finalise_s, s.render_s, s.write_s);
    if (interrupted) fprintf(stderr, "hamer: batch: interrupted; %d images not done (run again to resume)\n", not_done);
}

static int batch_main(batch_args *a) {
    double t_start = hm_now();
    /* From here on Ctrl-C / SIGTERM stop the run cleanly: the scan and
     * the look at earlier outputs end at the next name, the images in
     * flight are cancelled (temporary files removed, the summary printed). */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* The folders, the scan and the plan before any work: an output folder
     * that cannot be created or written is an error now, not after the
     * model's load. */
    hamer_folder_params fp = hamer_folder_default_params();
    fp.input_dir = a->input_dir, fp.out_dir = a->out_dir, fp.boxes_dir = a->boxes_dir;
    fp.globs = a->globs, fp.n_globs = a->nglob;
    fp.recursive = a->recursive, fp.force = a->force, fp.retry_failed = a->retry_failed;
    fp.render = a->render, fp.side_view = a->side, fp.save_mesh = a->save_mesh, fp.vertices = a->with_vertices;
    fp.glb = a->glb;
    fp.render_draw = HAMER_DRAW_ALL & ~a->hide;
    fp.bvh = a->bvh;
    fp.cancel = cancel_cb;
    batch b = {.a = a};
    int rc = hamer_folder_open(&fp, &b.folder);
    if (rc) {
        say(hamer_last_error());
        return rc == HAMER_E_CANCELLED ? 130 : 1;
    }
    int n = hamer_folder_get_count(b.folder), status = 1;
    if (!(b.todo = malloc((size_t)(n ? n : 1) * sizeof *b.todo))) {
        say("out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++) {
        hamer_folder_image im;
        hamer_folder_get_image(b.folder, i, &im);
        if (im.status == HAMER_FOLDER_TODO) b.todo[b.ntodo++] = i;
        else if (im.status == HAMER_FOLDER_FAILED) tell_failure(b.folder, i); /* name clashes */
    }
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv_put, NULL);
    pthread_cond_init(&b.cv_get, NULL);
    pthread_cond_init(&b.cv_done, NULL);
    double t_load = 0;
    if (b.ntodo > 0 && compute(&b, &t_load)) {
        say(b.fatal);
        goto done;
    }
    int interrupted = g_stop != 0;
    summary(a, &b, hm_now() - t_start, t_load, interrupted);
    hamer_folder_stats s;
    hamer_folder_get_stats(b.folder, &s);
    status = interrupted ? 130 : s.failed + s.failed_earlier ? 3 : 0;
done:
    free(b.q);
    hamer_detector_free(b.det);
    hamer_model_free(b.model);
    free(b.todo);
    hamer_folder_close(b.folder);
    return status;
}

int hm_cli_batch(int argc, char **argv) {
    batch_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return batch_main(&a);
}
