/* test_video.c - the video layer's pieces on their own: the One Euro step,
 * quaternions, hand smoothing (pass-through, constants, betas median),
 * quarter turns, the landmarks-to-rectangle rule, hm_det_track on a real
 * photo, writer -> reader round trips (timestamps, stride, colours, odd
 * sizes, abort), the reader's and writer's errors, and the tracker's
 * parameter checks, time order and allocation-free frames. */
#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "detect/detect.h"
#include "detect/stages.h"
#include "format/image.h"
#include "hamer.h"
#include "core/rotation.h"
#include "track/smooth.h"
#include "track/tracker.h"
#include "video/video.h"

static void test_one_euro(void) {
    hm_smooth_opts o = {1.0, 0.0, 1.0, 30, 5};
    double xs = 0, dxs = 0;
    const double dt = 1.0 / 30, a = 1.0 / (1.0 + 1.0 / (2 * M_PI * 1.0 * dt));
    double y = hm_one_euro(1.0, &xs, &dxs, dt, 1.0, &o);
    CHECK(fabs(y - a) < 1e-12 && fabs(dxs - a * 30.0) < 1e-9);
    /* beta raises the cutoff with the speed: a faster response */
    hm_smooth_opts fast = {1.0, 10.0, 1.0, 30, 5};
    double xs2 = 0, dxs2 = 0;
    CHECK(hm_one_euro(1.0, &xs2, &dxs2, dt, 1.0, &fast) > y);
    /* a step is approached monotonically and never overshot */
    double prev = 0;
    xs = 0, dxs = 0;
    int mono = 1;
    for (int i = 0; i < 200; i++) {
        y = hm_one_euro(1.0, &xs, &dxs, dt, 1.0, &fast);
        mono &= y >= prev && y <= 1.0;
        prev = y;
    }
    CHECK(mono && y > 0.999);
}

static void random_quat(unsigned *seed, double q[4]) {
    double n = 0;
    for (int k = 0; k < 4; k++) {
        q[k] = rand_r(seed) / (double)RAND_MAX - 0.5;
        n += q[k] * q[k];
    }
    for (int k = 0; k < 4; k++) q[k] /= sqrt(n);
}

static void test_quaternions(void) {
    unsigned seed = 7;
    double worst = 0, worst_log = 0;
    for (int i = 0; i < 1000; i++) {
        double q[4], p[4], R[9], S[9], v[3], e[4];
        random_quat(&seed, q);
        if (i == 0) q[0] = -1, q[1] = q[2] = q[3] = 0;                 /* 180 degrees about nothing: identity */
        if (i == 1) q[0] = 0, q[1] = 1, q[2] = q[3] = 0;               /* a half turn */
        if (i == 2) q[0] = 1, q[1] = 1e-9, q[2] = q[3] = 0;            /* nearly nothing */
        hm_quat_to_rot(q, R);
        hm_rot_to_quat(R, p);
        hm_quat_to_rot(p, S);
        for (int k = 0; k < 9; k++) worst = fmax(worst, fabs(R[k] - S[k]));
        const double dot = fabs(q[0] * p[0] + q[1] * p[1] + q[2] * p[2] + q[3] * p[3]);
        worst = fmax(worst, 1 - dot);
        /* exp(log(q)) is q or -q; the angle is in [0, pi] */
        hm_quat_log(q, v);
        hm_quat_exp(v, e);
        worst_log = fmax(worst_log, 1 - fabs(e[0] * q[0] + e[1] * q[1] + e[2] * q[2] + e[3] * q[3]));
        CHECK(sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]) <= M_PI + 1e-12);
    }
    CHECKF(worst < 1e-12, "quaternion round trip error %g", worst);
    CHECKF(worst_log < 1e-14, "exp(log(q)) error %g", worst_log);
}

/* The One Euro step on rotations: a constant stays; with beta 0 a step
 * is the slerp by a towards the target, the same for q and -q; the
 * filtered rotation reaches a target along the geodesic (its angle to the
 * target falls every frame) and the result is a unit quaternion. */
static void test_one_euro_rot(void) {
    hm_smooth_opts o = {1.0, 0.0, 1.0, 30, 5};
    const double dt = 1.0 / 30, a = 1.0 / (1.0 + 1.0 / (2 * M_PI * 1.0 * dt));
    double qs[4] = {1, 0, 0, 0}, ws[3] = {0, 0, 0};
    const double id[4] = {1, 0, 0, 0};
    hm_one_euro_rot(id, qs, ws, dt, &o);
    CHECK(qs[0] == 1 && qs[1] == 0 && ws[0] == 0);
    /* a 120 degree turn about z, given as -q: the step is a * 120 degrees about z */
    const double th = 2 * M_PI / 3, target[4] = {-cos(th / 2), 0, 0, -sin(th / 2)};
    hm_one_euro_rot(target, qs, ws, dt, &o);
    const double got = 2 * atan2(qs[3], qs[0]);
    CHECKF(fabs(got - a * th) < 1e-12 && fabs(qs[1]) < 1e-15 && fabs(qs[2]) < 1e-15, "step %g, want %g", got,
           a * th);
    double prev = th - got;
    int closer = 1;
    for (int i = 0; i < 100; i++) {
        hm_one_euro_rot(target, qs, ws, dt, &o);
        const double left = th - 2 * atan2(qs[3], qs[0]);
        closer &= left < prev && left > -1e-12;
        prev = left;
        closer &= fabs(qs[0] * qs[0] + qs[1] * qs[1] + qs[2] * qs[2] + qs[3] * qs[3] - 1) < 1e-12;
    }
    CHECK(closer && prev < 1e-3);
}

static void fill_hand(hamer_hand *h, float v) {
    memset(h, 0, sizeof *h);
    h->ok = 1;
    h->box_size = 100;
    for (int i = 0; i < 3; i++) h->cam_t_full[i] = v + i;
    for (int i = 0; i < 63; i++) h->keypoints_3d[i] = v * 0.01f;
    for (int i = 0; i < 42; i++) h->keypoints_2d[i] = v * 10;
    for (int j = 0; j < 16; j++) {
        float *R = j ? h->hand_pose + 9 * (j - 1) : h->global_orient;
        R[0] = R[4] = R[8] = 1;
    }
    for (int b = 0; b < 10; b++) h->betas[b] = v + b;
}

static void test_smooth_hand(void) {
    static hm_smooth_state s;
    hm_smooth_opts o = {1.0, 1.0, 1.0, 30, 3};
    hm_smooth_reset(&s);
    hamer_hand raw, out;
    fill_hand(&raw, 1.0f);
    hm_smooth_hand(&s, &o, 0.0, &raw, &out);
    CHECK(!memcmp(out.cam_t_full, raw.cam_t_full, sizeof raw.cam_t_full) &&
          !memcmp(out.keypoints_2d, raw.keypoints_2d, sizeof raw.keypoints_2d)); /* the first frame passes */
    for (int i = 1; i < 10; i++) hm_smooth_hand(&s, &o, i / 30.0, &raw, &out);
    CHECK(out.cam_t_full[2] == raw.cam_t_full[2] && out.global_orient[0] == 1.0f); /* a constant stays */
    /* betas: the median of the collected frames (3 ones so far: 1..) */
    hm_smooth_reset(&s);
    const float vals[5] = {5, 1, 3, 100, 2};
    for (int i = 0; i < 5; i++) {
        fill_hand(&raw, vals[i]);
        hm_smooth_hand(&s, &o, i / 30.0, &raw, &out);
        if (i < 2) CHECK(out.betas[0] == vals[i]);
    }
    CHECKF(out.betas[0] == 3.0f && out.betas[9] == 12.0f, "median betas %g %g", out.betas[0], out.betas[9]);
    /* in place works too */
    hm_smooth_hand(&s, &o, 1.0, &raw, &raw);
    CHECK(raw.betas[0] == 2.5f || raw.betas[0] == 3.0f);
}

static void test_rotate(void) {
    enum { W = 3, H = 2 };
    uint8_t in[H * W * 3], a[H * W * 3], b[H * W * 3];
    for (int i = 0; i < H * W * 3; i++) in[i] = (uint8_t)i;
    hm_video_rotate(in, W, H, 90, a);
    /* 90 clockwise: the output's top-left is the input's bottom-left */
    CHECK(!memcmp(a, in + (H - 1) * W * 3, 3));
    hm_video_rotate(a, H, W, 270, b);
    CHECK(!memcmp(b, in, sizeof in));
    hm_video_rotate(in, W, H, 180, a);
    CHECK(!memcmp(a, in + (H * W - 1) * 3, 3));
    hm_video_rotate(a, W, H, 180, b);
    CHECK(!memcmp(b, in, sizeof in));
}

/* A hand pointing up: wrist at (100, 200), fingers towards smaller y. */
static void upright_hand(float lm[21][3]) {
    memset(lm, 0, sizeof(float) * 63);
    for (int i = 0; i < 21; i++) {
        const int finger = i ? (i - 1) / 4 : 0, joint = i ? (i - 1) % 4 + 1 : 0;
        lm[i][0] = 100 + (finger - 2) * 12.0f;
        lm[i][1] = 200 - joint * 25.0f;
    }
    lm[0][0] = 100;
}

static void test_landmark_roi(void) {
    float lm[21][3], rot[21][3];
    upright_hand(lm);
    hm_det_rect r = hm_lm_hand_roi(lm);
    CHECKF(fabs(r.rot) < 1e-6 && r.w == r.h && r.w > 100 && r.cy < 200, "upright roi rot %g w %g cy %g", r.rot, r.w,
           r.cy);
    /* the same hand turned 90 degrees clockwise on screen about (0, 0) */
    for (int i = 0; i < 21; i++) rot[i][0] = -lm[i][1], rot[i][1] = lm[i][0], rot[i][2] = 0;
    hm_det_rect q = hm_lm_hand_roi(rot);
    CHECKF(fabs(q.rot - M_PI / 2) < 1e-6 && fabs(q.w - r.w) < 1e-3 && fabs(q.cx + r.cy) < 1e-3 &&
               fabs(q.cy - r.cx) < 1e-3,
           "turned roi rot %g w %g c %g %g", q.rot, q.w, q.cx, q.cy);
}

/* The repository's shared photos: <repo>/../shared/images, or $HAMER_SHARED_IMAGES. */
static void photo_path(const char *name, char *out, size_t cap) {
    const char *env = getenv("HAMER_SHARED_IMAGES");
    if (env) {
        snprintf(out, cap, "%s/%s", env, name);
        return;
    }
    char repo[4096];
    snprintf(repo, sizeof repo, "%s", __FILE__);
    char *cut = strstr(repo, "/tests/c/test_video.c");
    if (cut) *cut = 0;
    snprintf(out, cap, "%s/../shared/images/%s", repo, name);
}

static void test_track_photo(hm_det_model *m) {
    char path[4200];
    photo_path("hamer_example_5.jpg", path, sizeof path);
    hm_image img;
    CHECK(hm_image_load(path, &img) == HM_OK);
    if (!img.rgb) return;
    hm_det_state *s = NULL;
    CHECK(hm_det_state_new(m, &s) == HM_OK);
    hm_det_hand hands[8], t;
    int n = 0, found = 0;
    CHECK(hm_det_run(s, img.rgb, img.w, img.h, NULL, NULL, hands, 8, &n, NULL) == HM_OK && n == 2);
    for (int i = 0; i < n; i++) {
        const hm_det_rect roi = hm_lm_hand_roi(hands[i].landmarks);
        CHECK(hm_det_track(s, img.rgb, img.w, img.h, &roi, 0.5f, NULL, &t, &found, NULL) == HM_OK && found);
        const double size = fmax(hands[i].box[2] - hands[i].box[0], hands[i].box[3] - hands[i].box[1]);
        double worst = 0, sum = 0;
        for (int k = 0; k < 21; k++) {
            const double d = hypot(t.landmarks[k][0] - hands[i].landmarks[k][0],
                                   t.landmarks[k][1] - hands[i].landmarks[k][1]);
            worst = fmax(worst, d), sum += d;
        }
        /* another crop of the same hand: the same landmarks up to the model's own spread */
        CHECKF(sum / 21 < 0.03 * size && worst < 0.1 * size && t.is_right == hands[i].is_right,
               "tracked landmarks off by %g (mean %g) of %g", worst, sum / 21, size);
    }
    /* nowhere near a hand: lost, presence reported */
    const hm_det_rect empty = {20, 20, 30, 30, 0};
    CHECK(hm_det_track(s, img.rgb, img.w, img.h, &empty, 0.5f, NULL, &t, &found, NULL) == HM_OK && !found &&
          t.presence < 0.5f);
    CHECK(hm_det_track(s, img.rgb, 0, img.h, &empty, 0.5f, NULL, &t, &found, NULL) == HM_E_ARG);
    hm_det_state_free(s);
    hm_image_free(&img);
}

static void test_tracker(hm_det_model *m) {
    hamer_tracker_params p = hm_tracker_default_params();
    p.max_hands = 0;
    CHECK(hm_tracker_new(m, &p, 1) == NULL && strstr(hm_errmsg(), "max_hands"));
    p = hm_tracker_default_params();
    p.betas_min = 40;
    CHECK(hm_tracker_new(m, &p, 1) == NULL && strstr(hm_errmsg(), "betas_min"));
    p = hm_tracker_default_params();
    p.redetect_every = 1; /* detection on every frame: the costliest steady state */
    hamer_tracker *t = hm_tracker_new(m, &p, 1);
    CHECK(t != NULL);
    if (!t) return;
    enum { W = 96, H = 64 };
    static uint8_t grey[W * H * 3];
    memset(grey, 128, sizeof grey);
    hamer_track out[2];
    hamer_track_stats st;
    CHECK(hm_tracker_push(t, grey, W, H, 0.0, out, 2, &st) == 0 && st.detected);
    CHECK(hm_tracker_push(t, grey, W, H, 0.0, out, 2, &st) == HM_E_ARG && strstr(hm_errmsg(), "does not increase"));
    hm_alloc_test_fail(0); /* any hm_alloc from here on fails */
    int ok = 1;
    for (int i = 1; i <= 5; i++) ok &= hm_tracker_push(t, grey, W, H, i / 30.0, out, 2, &st) == 0 && st.detected;
    hm_alloc_test_fail(-1);
    CHECK(ok);
    CHECK(hm_tracker_smooth(t, out, 0, NULL, NULL) == HM_OK);
    hamer_track ghost = {.track_id = 99};
    hamer_hand h;
    memset(&h, 0, sizeof h);
    CHECK(hm_tracker_smooth(t, &ghost, 1, &h, &h) == HM_E_ARG && strstr(hm_errmsg(), "not live"));
    hm_tracker_free(t);
}

static void test_round_trip(void) {
    char dir[] = "/tmp/hm_videoXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    const char *exts[] = {"mkv", "mp4", "avi"}, *encoders[] = {NULL, NULL, "mpeg4"};
    for (int e = 0; e < 3; e++) {
        char path[256];
        snprintf(path, sizeof path, "%s/rt.%s", dir, exts[e]);
        const int W = e == 1 ? 63 : 64, H = e == 1 ? 47 : 48; /* odd sizes: 4:4:4 with libx264 */
        hamer_video_writer *wr = hm_video_writer_open_with(path, W, H, 1, 30000, 30.0, encoders[e]);
        const char *codec = wr ? hm_video_writer_codec(wr) : "";
        CHECKF(wr != NULL || strstr(hm_errmsg(), "mpeg4 needs an even"), "writer: %s", hm_errmsg());
        if (!wr) continue;
        uint8_t *rgb = malloc((size_t)W * H * 3);
        for (int k = 0; k < 12; k++) {
            for (int i = 0; i < W * H; i++) rgb[3 * i] = (uint8_t)(20 * k), rgb[3 * i + 1] = 100, rgb[3 * i + 2] = 200;
            CHECK(hm_video_writer_write(wr, rgb, 1000LL * k) == HM_OK);
        }
        CHECK(hm_video_writer_write(wr, rgb, 5000) == HM_E_ARG); /* pts going back */
        CHECK(access(path, F_OK) != 0); /* written beside it until closed */
        CHECK(hm_video_writer_close(wr, 0) == HM_OK && access(path, F_OK) == 0);
        free(rgb);
        for (int stride = 1; stride <= 3; stride += 2) {
            hamer_video_params vp = hm_video_default_params();
            vp.stride = stride;
            vp.queue = 1;
            hamer_video *v = hm_video_open(path, &vp);
            CHECK(v != NULL);
            if (!v) continue;
            hamer_video_info vi;
            CHECK(hm_video_info(v, &vi) == HM_OK && vi.width == W && vi.height == H && vi.rotation == 0);
            hamer_video_frame f;
            int n = 0, rc, good = 1;
            while ((rc = hm_video_next(v, &f)) == 1) {
                const long long k = f.index;
                good &= k == (long long)n * stride && fabs(f.time_s - k / 30.0) < 1e-3;
                good &= abs(f.rgb[0] - 20 * (int)k) <= 8 && abs(f.rgb[1] - 100) <= 8 && abs(f.rgb[2] - 200) <= 8;
                n++;
            }
            CHECKF(rc == 0 && good && n == (12 + stride - 1) / stride, "%s (%s) stride %d: %d frames, rc %d", path,
                   codec, stride, n, rc);
            CHECK(hm_video_next(v, &f) == 0);
            hm_video_close(v);
        }
        unlink(path);
    }
    /* the fallback encoder: its name, and the odd sizes it cannot take */
    char mp[256];
    snprintf(mp, sizeof mp, "%s/odd.mp4", dir);
    hamer_video_writer *m4 = hm_video_writer_open_with(mp, 64, 48, 1, 90000, 30.0, "mpeg4");
    CHECK(m4 && !strcmp(hm_video_writer_codec(m4), "mpeg4") && hm_video_writer_close(m4, 1) == HM_OK);
    CHECK(hm_video_writer_open_with(mp, 63, 48, 1, 30, 30.0, "mpeg4") == NULL && strstr(hm_errmsg(), "even"));
    CHECK(hm_video_writer_open_with(mp, 64, 48, 1, 30, 30.0, "vp9") == NULL && strstr(hm_errmsg(), "unknown encoder"));
    /* abort: nothing left behind */
    char path[256];
    snprintf(path, sizeof path, "%s/abort.mkv", dir);
    hamer_video_writer *wr = hm_video_writer_open(path, 32, 32, 1, 30, 30.0);
    CHECK(wr && hm_video_writer_close(wr, 1) == HM_OK && access(path, F_OK) != 0);
    CHECK(hm_video_writer_open(path, 32, 32, 0, 30, 30.0) == NULL && clean_error(HM_E_ARG));
    snprintf(path, sizeof path, "%s/x.nosuchcontainer", dir);
    CHECK(hm_video_writer_open(path, 32, 32, 1, 30, 30.0) == NULL && strstr(hm_errmsg(), "extension"));
    /* reader errors */
    snprintf(path, sizeof path, "%s/missing.mp4", dir);
    CHECK(hm_video_open(path, NULL) == NULL && hm_errcode() == HM_E_IO && strstr(hm_errmsg(), path));
    snprintf(path, sizeof path, "%s/junk.mp4", dir);
    FILE *f = fopen(path, "wb");
    for (int i = 0; f && i < 100; i++) fputs("no video here\n", f);
    if (f) fclose(f);
    CHECK(hm_video_open(path, NULL) == NULL && hm_errcode() == HM_E_FORMAT && clean_error(HM_E_FORMAT));
    unlink(path);
    hamer_video_params bad = hm_video_default_params();
    bad.queue = 0;
    CHECK(hm_video_open(path, &bad) == NULL && strstr(hm_errmsg(), "queue"));
    rmdir(dir);
}

/* Names in dir, "." and ".." left out. */
static int count_entries(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    if (d) closedir(d);
    return n;
}

/* What the file holds, as text (up to 63 bytes). */
static const char *file_text(const char *path) {
    static char buf[64];
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    return buf;
}

/* The writer gives FFmpeg only its temporary file: names whose muxer
 * would open files itself (image2, HLS), frame-number patterns, raw
 * streams and formats without video are refused before anything is
 * created, and an existing file there stays as it was; a name that reads
 * as an FFmpeg protocol ("pipe:1.mkv") is a plain local file. */
static void test_writer_targets(void) {
    char dir[] = "/tmp/hm_vtargetXXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[256];
    const struct { const char *name, *why; int code; } bad[] = {
        {"ov.png", "image file name", HM_E_ARG},   {"ov.jpg", "image file name", HM_E_ARG},
        {"shot%03d.png", "pattern", HM_E_ARG},     {"clip%d.mp4", "pattern", HM_E_ARG},
        {"o.m3u8", "files of its own", HM_E_ARG},  {"o.h264", "no timestamps", HM_E_ARG},
        {"o.yuv", "no timestamps", HM_E_ARG},      {"o.wav", "no video", HM_E_ARG},
        {"o.webm", "cannot hold", HM_E_ARG},       {"o.gif", "does not take", HM_E_ARG},
        {"sub.mp4", "not a regular file", HM_E_IO},
    };
    snprintf(path, sizeof path, "%s/sub.mp4", dir);
    CHECK(mkdir(path, 0755) == 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, bad[i].name);
        if (strcmp(bad[i].name, "sub.mp4")) {
            FILE *f = fopen(path, "wb");
            if (f) fputs("PRECIOUS", f), fclose(f);
        }
        if (!strcmp(bad[i].name, "shot%03d.png")) { /* what the pattern would have written first */
            snprintf(path, sizeof path, "%s/shot001.png", dir);
            FILE *f = fopen(path, "wb");
            if (f) fputs("PRECIOUS", f), fclose(f);
            snprintf(path, sizeof path, "%s/%s", dir, bad[i].name);
        }
        const int before = count_entries(dir);
        hamer_video_writer *wr = hm_video_writer_open(path, 32, 32, 1, 30, 30.0);
        CHECKF(wr == NULL && hm_errcode() == bad[i].code && strstr(hm_errmsg(), bad[i].why) &&
                   strstr(hm_errmsg(), bad[i].name),
               "%s: %s\n", bad[i].name, wr ? "opened" : hm_errmsg());
        if (wr) hm_video_writer_close(wr, 1);
        CHECKF(count_entries(dir) == before, "%s: files created\n", bad[i].name);
        if (strcmp(bad[i].name, "sub.mp4")) CHECKF(!strcmp(file_text(path), "PRECIOUS"), "%s changed\n", bad[i].name);
    }
    snprintf(path, sizeof path, "%s/shot001.png", dir);
    CHECK(!strcmp(file_text(path), "PRECIOUS"));
    /* "pipe:1.mkv" relative to the working directory: a file there */
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL && chdir(dir) == 0);
    hamer_video_writer *wr = hm_video_writer_open("pipe:1.mkv", 32, 32, 1, 30, 30.0);
    uint8_t rgb[32 * 32 * 3 + HM_VIDEO_SLACK];
    memset(rgb, 90, sizeof rgb);
    CHECK(wr && hm_video_writer_write(wr, rgb, 0) == HM_OK && hm_video_writer_write(wr, rgb, 1) == HM_OK &&
          hm_video_writer_close(wr, 0) == HM_OK);
    struct stat sb;
    CHECKF(stat("pipe:1.mkv", &sb) == 0 && sb.st_size > 100, "pipe:1.mkv: %lld bytes\n",
           (long long)(stat("pipe:1.mkv", &sb) == 0 ? sb.st_size : -1));
    CHECK(!memcmp(file_text("pipe:1.mkv"), "\x1a\x45\xdf\xa3", 4)); /* Matroska's EBML magic */
    unlink("pipe:1.mkv");
    CHECK(chdir(cwd) == 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, bad[i].name);
        strcmp(bad[i].name, "sub.mp4") ? unlink(path) : rmdir(path);
    }
    snprintf(path, sizeof path, "%s/shot001.png", dir);
    unlink(path);
    CHECKF(count_entries(dir) == 0, "%d files left in %s\n", count_entries(dir), dir);
    rmdir(dir);
}

/* hm_video_check_params: the one range check of the reader's parameters
 * (hamer_video_open, `hamer video`, the Python binding). */
static void test_video_params(void) {
    hamer_video_params p = hm_video_default_params();
    CHECK(hm_video_check_params(&p) == HM_OK);
    p.duration_s = 0.3;
    CHECK(hm_video_check_params(&p) == HM_OK);
    const struct { double start, duration; int stride, queue, threads; const char *why; } bad[] = {
        {0, -5, 1, 4, 1, "duration_s"},   {0, NAN, 1, 4, 1, "duration_s"}, {0, INFINITY, 1, 4, 1, "duration_s"},
        {0, 2e9, 1, 4, 1, "duration_s"},  {-1, 0, 1, 4, 1, "start_s"},     {1e300, 0, 1, 4, 1, "start_s"},
        {0, 0, 0, 4, 1, "stride"},        {0, 0, 1000001, 4, 1, "stride"}, {0, 0, 1, 65, 1, "queue"},
        {0, 0, 1, 4, -1, "threads"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hamer_video_params q = {.start_s = bad[i].start, .duration_s = bad[i].duration, .stride = bad[i].stride,
                                .queue = bad[i].queue, .threads = bad[i].threads};
        CHECKF(hm_video_check_params(&q) == HM_E_ARG && strstr(hm_errmsg(), bad[i].why), "case %zu: %s\n", i,
               hm_errmsg());
        CHECKF(hm_video_open("/nonexistent.mp4", &q) == NULL && hm_errcode() == HM_E_ARG, "case %zu open\n", i);
    }
    CHECK(hm_video_check_params(NULL) == HM_E_ARG);
}

int main(void) {
    test_one_euro();
    test_quaternions();
    test_one_euro_rot();
    test_smooth_hand();
    test_rotate();
    test_landmark_roi();
    test_round_trip();
    test_writer_targets();
    test_video_params();
    hm_det_model *m = NULL;
    if (hm_det_model_load(NULL, 0, &m) != HM_OK) {
        fprintf(stderr, "test_video: the hand detector's models are needed (scripts/get_detector.sh): %s\n",
                hm_errmsg());
        CHECK(0);
    } else {
        test_track_photo(m);
        test_tracker(m);
        hm_det_model_free(m);
    }
    return check_summary();
}
