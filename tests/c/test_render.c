/* test_render - software rasterizer (coverage, fill rule, clipping, occlusion,
 * blending, robustness, side view) and the OBJ writer round trip. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "format/mesh_io.h"
#include "render/render.h"
#include "core/util.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static uint32_t rng = 12345;
static uint32_t rnd(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}

/* Image with 64 guard bytes after it, so writes past the end are caught even
 * without a sanitizer. */
#define GUARD 64
static uint8_t *new_image(int w, int h, int maxval) {
    size_t n = (size_t)w * h * 3;
    uint8_t *p = malloc(n + GUARD);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(rnd() % (unsigned)(maxval + 1));
    memset(p + n, 0xA5, GUARD);
    return p;
}
static int guard_ok(const uint8_t *p, int w, int h) {
    for (int i = 0; i < GUARD; i++)
        if (p[(size_t)w * h * 3 + i] != 0xA5) return 0;
    return 1;
}
static uint8_t *copy_image(const uint8_t *p, int w, int h) {
    size_t n = (size_t)w * h * 3 + GUARD;
    uint8_t *q = malloc(n);
    memcpy(q, p, n);
    return q;
}
static int px_same(const uint8_t *a, const uint8_t *b, int w, int i, int j) {
    return memcmp(a + 3 * ((size_t)j * w + i), b + 3 * ((size_t)j * w + i), 3) == 0;
}

/* Camera-frame point that projects to pixel coordinates (u, v) at depth z. */
static void unproject(float u, float v, float z, float f, float cx, float cy, float *out) {
    out[0] = (u - cx) * z / f;
    out[1] = (v - cy) * z / f;
    out[2] = z;
}

/* --- 2D helpers for the analytic silhouettes ------------------------------ */
typedef struct { double x, y; } pt;
static double cross(pt o, pt a, pt b) { return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x); }
static int cmp_pt(const void *a, const void *b) {
    const pt *p = a, *q = b;
    return p->x < q->x ? -1 : p->x > q->x ? 1 : p->y < q->y ? -1 : p->y > q->y;
}
/* Convex hull (monotone chain), counter-clockwise in a y-up sense; returns size. */
static int hull(pt *p, int n, pt *h) {
    qsort(p, n, sizeof(pt), cmp_pt);
    int k = 0;
    for (int i = 0; i < n; i++) {
        while (k >= 2 && cross(h[k - 2], h[k - 1], p[i]) <= 0) k--;
        h[k++] = p[i];
    }
    for (int i = n - 2, t = k + 1; i >= 0; i--) {
        while (k >= t && cross(h[k - 2], h[k - 1], p[i]) <= 0) k--;
        h[k++] = p[i];
    }
    return k - 1;
}
static double poly_area(const pt *h, int n) {
    double a = 0;
    for (int i = 0; i < n; i++) a += h[i].x * h[(i + 1) % n].y - h[(i + 1) % n].x * h[i].y;
    return fabs(a) / 2;
}
static double poly_perimeter(const pt *h, int n) {
    double s = 0;
    for (int i = 0; i < n; i++) s += hypot(h[(i + 1) % n].x - h[i].x, h[(i + 1) % n].y - h[i].y);
    return s;
}
/* Signed distance-like margin of q inside convex polygon h (>0 inside). */
static double inside_margin(const pt *h, int n, pt q) {
    double m = INFINITY;
    for (int i = 0; i < n; i++) {
        pt a = h[i], b = h[(i + 1) % n];
        double d = cross(a, b, q) / hypot(b.x - a.x, b.y - a.y);
        m = fmin(m, d);
    }
    return m;
}

/* Renders `m` over a dark random image and checks it against the convex
 * silhouette hull[nh]: centres inside by > 1e-3 px changed, outside by more
 * than that bit-unchanged, covered count near the analytic area. */
static void check_silhouette(const char *what, const hm_mesh *m, int w, int h, float f, float cx, float cy,
                             const pt *hl, int nh) {
    uint8_t *img = new_image(w, h, 80), *ref = copy_image(img, w, h);
    CHECK(hm_render_overlay(img, w, h, m, 1, f, cx, cy, 1.0f) == HM_OK);
    long count = 0, bad_in = 0, bad_out = 0;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            int changed = !px_same(img, ref, w, i, j);
            count += changed;
            double d = inside_margin(hl, nh, (pt){i + 0.5, j + 0.5});
            if (d > 1e-3 && !changed) bad_in++;
            if (d < -1e-3 && changed) bad_out++;
        }
    double area = poly_area(hl, nh), per = poly_perimeter(hl, nh);
    /* Pixel-centre sampling: the error is bounded by the pixels the outline
     * crosses; in practice it is a few pixels, so 5% of the perimeter is ample. */
    int ok = fabs(count - area) <= 0.05 * per + 2;
    if (!ok || bad_in || bad_out)
        fprintf(stderr, "%s: count %ld area %.1f perimeter %.1f bad_in %ld bad_out %ld\n", what, count, area, per,
                bad_in, bad_out);
    CHECK(ok);
    CHECK(bad_in == 0);
    CHECK(bad_out == 0);
    CHECK(guard_ok(img, w, h));
    free(img);
    free(ref);
}

static void test_triangle(void) {
    const int w = 200, h = 150;
    const float f = 100, cx = 100, cy = 75;
    pt p[3] = {{30.3, 20.7}, {170.2, 40.1}, {80.9, 130.4}};
    float v[9];
    for (int k = 0; k < 3; k++) unproject((float)p[k].x, (float)p[k].y, 2.0f, f, cx, cy, v + 3 * k);
    int32_t fc[3] = {0, 1, 2};
    hm_mesh m = {v, 3, fc, 1, {1, 1, 1}};
    pt hl[4];
    int nh = hull(p, 3, hl);
    check_silhouette("triangle", &m, w, h, f, cx, cy, hl, nh);
    /* Same triangle with the other winding: no culling. */
    int32_t fr[3] = {0, 2, 1};
    m.faces = fr;
    check_silhouette("triangle reversed", &m, w, h, f, cx, cy, hl, nh);
}

/* Cube of side s at centre c, rotated by ay then ax (radians). */
static void make_cube(const float *c, float s, double ay, double ax, float *v, int32_t *fc) {
    for (int k = 0; k < 8; k++) {
        double x = (k & 1 ? 0.5 : -0.5) * s, y = (k & 2 ? 0.5 : -0.5) * s, z = (k & 4 ? 0.5 : -0.5) * s;
        double x1 = cos(ay) * x + sin(ay) * z, z1 = -sin(ay) * x + cos(ay) * z;
        double y2 = cos(ax) * y - sin(ax) * z1, z2 = sin(ax) * y + cos(ax) * z1;
        v[3 * k] = (float)(x1 + c[0]);
        v[3 * k + 1] = (float)(y2 + c[1]);
        v[3 * k + 2] = (float)(z2 + c[2]);
    }
    static const int32_t q[6][4] = {{0, 1, 3, 2}, {4, 6, 7, 5}, {0, 4, 5, 1}, {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 5, 7, 3}};
    for (int i = 0; i < 6; i++) {
        int32_t t[6] = {q[i][0], q[i][1], q[i][2], q[i][0], q[i][2], q[i][3]};
        memcpy(fc + 6 * i, t, sizeof t);
    }
}

static void test_cube(void) {
    const int w = 320, h = 240;
    const float f = 300, cx = 160, cy = 120, c[3] = {0.1f, -0.05f, 3.0f};
    float v[24];
    int32_t fc[36];
    make_cube(c, 0.8f, 0.5236, 0.3491, v, fc);
    hm_mesh m = {v, 8, fc, 12, {0.9f, 0.8f, 0.7f}};
    pt p[8], hl[9];
    for (int k = 0; k < 8; k++) p[k] = (pt){f * v[3 * k] / v[3 * k + 2] + cx, f * v[3 * k + 1] / v[3 * k + 2] + cy};
    int nh = hull(p, 8, hl);
    check_silhouette("cube", &m, w, h, f, cx, cy, hl, nh);
}

/* A square whose corners sit on pixel centres covers exactly side^2 pixels
 * under the top-left rule, and its diagonal (through pixel centres) neither
 * drops nor doubles a pixel. */
static void test_fill_rule(void) {
    const int w = 40, h = 40;
    const float f = 64, cx = 20, cy = 20; /* powers of two keep the corners exact */
    float v[12];
    unproject(10.5f, 10.5f, 1, f, cx, cy, v);
    unproject(20.5f, 10.5f, 1, f, cx, cy, v + 3);
    unproject(20.5f, 20.5f, 1, f, cx, cy, v + 6);
    unproject(10.5f, 20.5f, 1, f, cx, cy, v + 9);
    int32_t fc[6] = {0, 1, 2, 0, 2, 3};
    hm_mesh m = {v, 4, fc, 2, {1, 1, 1}};
    uint8_t *img = new_image(w, h, 0), *ref = copy_image(img, w, h);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, cx, cy, 1.0f) == HM_OK);
    int count = 0, in_box = 1;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++)
            if (!px_same(img, ref, w, i, j)) {
                count++;
                in_box &= i >= 10 && i < 20 && j >= 10 && j < 20;
            }
    if (count != 100) fprintf(stderr, "fill rule: %d pixels\n", count);
    CHECK(count == 100);
    CHECK(in_box);
    free(img);
    free(ref);
}

/* Fronto-parallel square: pixel span [u0,u1) x [v0,v1) at depth z. */
static void square(float u0, float v0, float u1, float v1, float z, float f, float c, float *v, int32_t *fc,
                   int base) {
    unproject(u0, v0, z, f, c, c, v);
    unproject(u1, v0, z, f, c, c, v + 3);
    unproject(u1, v1, z, f, c, c, v + 6);
    unproject(u0, v1, z, f, c, c, v + 9);
    int32_t t[6] = {base, base + 1, base + 2, base, base + 2, base + 3};
    memcpy(fc, t, sizeof t);
}

static void test_occlusion(void) {
    const int w = 64, h = 64;
    const float f = 64, c = 32;
    float vn[12], vf[12];
    int32_t fn[6], ff[6];
    square(10, 10, 40, 40, 2.0f, f, c, vn, fn, 0);  /* near, red */
    square(20, 20, 60, 60, 3.0f, f, c, vf, ff, 0);  /* far, green */
    for (int order = 0; order < 2; order++) {
        hm_mesh near = {vn, 4, fn, 2, {1, 0, 0}}, far = {vf, 4, ff, 2, {0, 1, 0}};
        hm_mesh ms[2];
        ms[order] = near;
        ms[1 - order] = far;
        uint8_t *img = new_image(w, h, 0);
        CHECK(hm_render_overlay(img, w, h, ms, 2, f, c, c, 1.0f) == HM_OK);
        const uint8_t *overlap = img + 3 * (30 * w + 30), *far_only = img + 3 * (50 * w + 50),
                      *near_only = img + 3 * (15 * w + 15);
        CHECK(overlap[0] == 255 && overlap[1] == 0 && overlap[2] == 0);
        CHECK(far_only[0] == 0 && far_only[1] == 255 && far_only[2] == 0);
        CHECK(near_only[0] == 255 && near_only[1] == 0);
        free(img);
    }
    /* Interpenetrating: a slanted square crosses a flat one; each wins where it is nearer. */
    float vs[12] = {-1, -1, 1.5f, 1, -1, 2.5f, 1, 1, 2.5f, -1, 1, 1.5f}; /* z = 2 + x/2 */
    float vp[12] = {-1, -1, 2, 1, -1, 2, 1, 1, 2, -1, 1, 2};
    int32_t q[6] = {0, 1, 2, 0, 2, 3};
    hm_mesh ms[2] = {{vs, 4, q, 2, {1, 0, 0}}, {vp, 4, q, 2, {0, 0, 1}}};
    uint8_t *img = new_image(w, h, 0);
    CHECK(hm_render_overlay(img, w, h, ms, 2, f, c, c, 1.0f) == HM_OK);
    CHECK(img[3 * (32 * w + 22)] > 0 && img[3 * (32 * w + 22) + 2] == 0);  /* x < 0: slanted nearer */
    CHECK(img[3 * (32 * w + 42)] == 0 && img[3 * (32 * w + 42) + 2] > 0);  /* x > 0: flat nearer */
    free(img);
}

static void test_blend_and_shade(void) {
    const int w = 16, h = 16;
    const float f = 16, c = 8;
    float v[12];
    int32_t fc[6];
    square(2, 2, 14, 14, 1.0f, f, c, v, fc, 0);
    hm_mesh m = {v, 4, fc, 2, {1.0f, 0.5f, 0.0f}};
    uint8_t *img = new_image(w, h, 0);
    for (int i = 0; i < w * h; i++) img[3 * i] = 100, img[3 * i + 1] = 51, img[3 * i + 2] = 200;
    uint8_t *ref = copy_image(img, w, h);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, 1.0f) == HM_OK);
    const uint8_t *p = img + 3 * (8 * w + 8);
    CHECK(p[0] == 255 && p[1] == 128 && p[2] == 0); /* facing the light: shade 1, 127.5 rounds up */
    CHECK(px_same(img, ref, w, 0, 0) && px_same(img, ref, w, 15, 15));
    memcpy(img, ref, (size_t)w * h * 3);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, 0.5f) == HM_OK);
    CHECK(p[0] == 178 && p[1] == 89 && p[2] == 100); /* 177.5, 89.25, 100 */
    memcpy(img, ref, (size_t)w * h * 3);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, 0.0f) == HM_OK);
    CHECK(memcmp(img, ref, (size_t)w * h * 3) == 0);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, 1.5f) == HM_E_ARG);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, NAN) == HM_E_ARG);

    /* Plane tilted 60 degrees about y: |n.z| = 0.5. */
    float t[12] = {-0.5f, -0.5f, 2 - 0.866f, 0.5f, -0.5f, 2 + 0.866f, 0.5f, 0.5f, 2 + 0.866f, -0.5f, 0.5f, 2 - 0.866f};
    int32_t q[6] = {0, 1, 2, 0, 2, 3};
    hm_mesh mt = {t, 4, q, 2, {1, 1, 1}};
    memcpy(img, ref, (size_t)w * h * 3);
    CHECK(hm_render_overlay(img, w, h, &mt, 1, f, c, c, 1.0f) == HM_OK);
    double want = 255.0 * (HM_RENDER_AMBIENT + (1 - HM_RENDER_AMBIENT) * 0.5);
    CHECK(fabs(img[3 * (8 * w + 8)] - want) <= 1.0);
    free(img);
    free(ref);
}

/* Degenerate, NaN, infinite, behind-camera and huge triangles: no crash, no
 * write outside the image, no change for what cannot be seen. */
static void test_robustness(void) {
    const int w = 50, h = 40;
    const float f = 60, cx = 25, cy = 20;
    float v[] = {
        0, 0, 1, 0, 0, 1, 0, 0, 1,                    /* all one point */
        -0.1f, 0, 1, 0, 0, 1, 0.1f, 0, 1,             /* collinear */
        NAN, 0, 1, 0.1f, 0, 1, 0, 0.1f, 1,            /* NaN vertex */
        INFINITY, 0, 1, 0.1f, 0, 1, 0, 0.1f, 1,       /* inf vertex */
        0, 0, -1, 0.1f, 0, -1, 0, 0.1f, -2,           /* wholly behind */
        0, 0, 0, 0.1f, 0, 0, 0, 0.1f, 0,              /* on the camera centre */
        -1e30f, -1e30f, 1, 1e30f, 0, 1, 0, 1e30f, 1,  /* astronomically large */
        0.2f, 0.1f, 0.04f, 0.3f, 0.1f, 0.06f, 0.2f, 0.3f, 0.06f, /* straddles near */
    };
    int nv = (int)(sizeof v / sizeof v[0] / 3), nt = nv / 3;
    int32_t fc[64];
    for (int i = 0; i < nv; i++) fc[i] = i;
    for (int t = 0; t < nt; t++) {
        hm_mesh m = {v + 9 * t, 3, fc, 1, {1, 1, 1}};
        uint8_t *img = new_image(w, h, 255), *ref = copy_image(img, w, h);
        CHECK(hm_render_overlay(img, w, h, &m, 1, f, cx, cy, 1.0f) == HM_OK);
        CHECK(guard_ok(img, w, h));
        if (t <= 5) CHECK(memcmp(img, ref, (size_t)w * h * 3) == 0);
        free(img);
        free(ref);
    }
    /* Random soup with occasional NaNs, everything in one call. */
    enum { N = 300 };
    float *sv = malloc(sizeof(float) * 9 * N);
    int32_t *sf = malloc(sizeof(int32_t) * 3 * N);
    for (int i = 0; i < 9 * N; i++) {
        float x = ((float)(rnd() % 20001) - 10000.0f) / 2000.0f;
        sv[i] = (rnd() % 97 == 0) ? NAN : x;
    }
    for (int i = 0; i < 3 * N; i++) sf[i] = (int32_t)(rnd() % (3 * N));
    hm_mesh m = {sv, 3 * N, sf, N, {0.3f, 0.6f, 0.9f}};
    uint8_t *img = new_image(w, h, 255);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, cx, cy, 0.7f) == HM_OK);
    CHECK(guard_ok(img, w, h));
    /* Bad index: rejected before anything is drawn. */
    uint8_t *ref = copy_image(img, w, h);
    sf[5] = 3 * N;
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, cx, cy, 1.0f) == HM_E_ARG);
    CHECK(strchr(hm_errmsg(), '\n') == NULL && hm_errmsg()[0]);
    sf[5] = -1;
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, cx, cy, 1.0f) == HM_E_ARG);
    CHECK(memcmp(img, ref, (size_t)w * h * 3 + GUARD) == 0);
    CHECK(hm_render_overlay(img, 0, h, &m, 1, f, cx, cy, 1.0f) == HM_E_ARG);
    CHECK(hm_render_overlay(img, w, h, &m, 1, 0.0f, cx, cy, 1.0f) == HM_E_ARG);
    CHECK(hm_render_overlay(img, w, h, NULL, 0, f, cx, cy, 1.0f) == HM_OK);
    free(img);
    free(ref);
    free(sv);
    free(sf);
}

/* A floor plane from behind the camera to far ahead: clipping keeps the part
 * in front, which covers every row well below the horizon. */
static void test_near_clip(void) {
    const int w = 100, h = 100;
    const float f = 50, c = 50;
    float v[12] = {-5, 0.5f, -1, 5, 0.5f, -1, 5, 0.5f, 20, -5, 0.5f, 20};
    int32_t q[6] = {0, 1, 2, 0, 2, 3};
    hm_mesh m = {v, 4, q, 2, {1, 1, 1}};
    uint8_t *img = new_image(w, h, 80), *ref = copy_image(img, w, h);
    CHECK(hm_render_overlay(img, w, h, &m, 1, f, c, c, 1.0f) == HM_OK);
    int above_same = 1, below_changed = 1;
    for (int j = 0; j < h; j++)
        for (int i = 0; i < w; i++) {
            int same = px_same(img, ref, w, i, j);
            if (j <= 50) above_same &= same;  /* horizon + the far edge at v = 51.25 */
            if (j >= 56) below_changed &= !same;
        }
    CHECK(above_same);
    CHECK(below_changed);
    CHECK(guard_ok(img, w, h));
    free(img);
    free(ref);
}

static void test_sizes(void) {
    /* 1x1: a triangle over the only pixel centre, and one that misses it. */
    float v[9] = {-1, -1, 1, 3, -1, 1, -1, 3, 1}, vm[9] = {0.1f, 0.1f, 1, 0.4f, 0.1f, 1, 0.1f, 0.4f, 1};
    int32_t fc[3] = {0, 1, 2};
    hm_mesh m = {v, 3, fc, 1, {1, 1, 1}}, mm = {vm, 3, fc, 1, {1, 1, 1}};
    uint8_t *img = new_image(1, 1, 0);
    CHECK(hm_render_overlay(img, 1, 1, &mm, 1, 1, 0.5f, 0.5f, 1.0f) == HM_OK);
    CHECK(img[0] == 0 && img[1] == 0 && img[2] == 0);
    CHECK(hm_render_overlay(img, 1, 1, &m, 1, 1, 0.5f, 0.5f, 1.0f) == HM_OK);
    CHECK(img[0] == 255 && img[1] == 255 && img[2] == 255);
    CHECK(guard_ok(img, 1, 1));
    free(img);

    /* 4000x3000: a triangle covering the whole frame, then a small one. */
    const int W = 4000, H = 3000;
    const float f = 4000, cx = 2000, cy = 1500;
    uint8_t *big = new_image(W, H, 0);
    float vb[9];
    unproject(-10, -10, 2, f, cx, cy, vb);
    unproject(2 * W + 10, -10, 2, f, cx, cy, vb + 3);
    unproject(-10, 2 * H + 10, 2, f, cx, cy, vb + 6);
    hm_mesh mb = {vb, 3, fc, 1, {1, 1, 1}};
    CHECK(hm_render_overlay(big, W, H, &mb, 1, f, cx, cy, 1.0f) == HM_OK);
    long white = 0;
    for (size_t i = 0; i < (size_t)W * H * 3; i++) white += big[i] == 255;
    CHECK(white == (long)W * H * 3);
    CHECK(guard_ok(big, W, H));
    memset(big, 0, (size_t)W * H * 3);
    float vs[9];
    unproject(3990.2f, 2990.2f, 2, f, cx, cy, vs);
    unproject(4100, 2990.2f, 2, f, cx, cy, vs + 3);
    unproject(3990.2f, 3100, 2, f, cx, cy, vs + 6);
    hm_mesh ms = {vs, 3, fc, 1, {1, 1, 1}};
    CHECK(hm_render_overlay(big, W, H, &ms, 1, f, cx, cy, 1.0f) == HM_OK);
    CHECK(big[3 * ((size_t)(H - 1) * W + (W - 1))] == 255);
    CHECK(big[3 * ((size_t)(H - 11) * W + (W - 11))] == 0);
    CHECK(guard_ok(big, W, H));
    free(big);
}

static void test_rotation(void) {
    float v[12] = {1, 0, 5, -1, 0, 5, 0, 2, 6, 0, -2, 4};  /* mean (0, 0, 5) */
    float o[12];
    hm_mesh_rotate_y(v, 4, 90.0f, o);
    /* x' = z - c_z, z' = -x + c_z about the centre: (1,0,5) -> (0,0,4). */
    const float want[12] = {0, 0, 4, 0, 0, 6, 1, 2, 5, -1, -2, 5};
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= fabsf(o[i] - want[i]) < 1e-6f;
    CHECK(ok);
    float piv[3] = {0, 0, 0}, o2[12];
    hm_mesh_rotate_y_about(v, 4, 90.0f, piv, o2);
    const float want2[12] = {5, 0, -1, 5, 0, 1, 6, 2, 0, 4, -2, 0};
    ok = 1;
    for (int i = 0; i < 12; i++) ok &= fabsf(o2[i] - want2[i]) < 1e-6f;
    CHECK(ok);
    hm_mesh_rotate_y(v, 4, 360.0f, o);
    ok = 1;
    for (int i = 0; i < 12; i++) ok &= fabsf(o[i] - v[i]) < 1e-5f;
    CHECK(ok);
    memcpy(o, v, sizeof v); /* in place */
    hm_mesh_rotate_y(o, 4, 90.0f, o);
    ok = 1;
    for (int i = 0; i < 12; i++) ok &= fabsf(o[i] - want[i]) < 1e-6f;
    CHECK(ok);
}

/* An edge-on square (plane x = 0) becomes a front-facing one in the side view. */
static void test_side_view(void) {
    const int w = 64, h = 64;
    const float f = 160, c = 32;
    float v[12] = {0, -0.5f, 4.5f, 0, -0.5f, 5.5f, 0, 0.5f, 5.5f, 0, 0.5f, 4.5f};
    int32_t q[6] = {0, 1, 2, 0, 2, 3};
    hm_mesh m = {v, 4, q, 2, {1, 0, 0}};
    uint8_t *img = new_image(w, h, 255);
    float bg[3] = {0.2f, 0.4f, 0.6f}, piv[3] = {0, 0, 5};
    CHECK(hm_render_side_view(img, w, h, &m, 1, f, c, c, 90.0f, piv, bg) == HM_OK);
    int count = 0, bg_ok = 1;
    for (int i = 0; i < w * h; i++) {
        const uint8_t *p = img + 3 * i;
        if (p[0] == 51 && p[1] == 102 && p[2] == 153) continue;
        count++;
        bg_ok &= p[1] == 0 && p[2] == 0;  /* anything else is the red mesh */
    }
    CHECK(bg_ok);
    CHECK(count == 32 * 32);  /* side 1 m at 5 m, focal 160: 32 px, corners on pixel edges */
    CHECK(img[3 * (32 * w + 32)] == 255);
    uint8_t *img2 = new_image(w, h, 255);
    CHECK(hm_render_side_view(img2, w, h, &m, 1, f, c, c, 90.0f, NULL, NULL) == HM_OK);  /* mean = pivot */
    int same_cover = 1;
    for (int i = 0; i < w * h; i++) {
        int a = img[3 * i + 1] == 102, b = img2[3 * i] == 255 && img2[3 * i + 1] == 255;
        same_cover &= a == b;
    }
    CHECK(same_cover);
    CHECK(img2[0] == 255 && img2[1] == 255 && img2[2] == 255);
    CHECK(guard_ok(img, w, h) && guard_ok(img2, w, h));
    free(img);
    free(img2);
}

/* --- OBJ ------------------------------------------------------------------ */
static char dir[64];

typedef struct {
    int nv, nf, ok;
    double v[64][6];
    long f[64][3];
} objfile;

static void parse_obj(const char *path, objfile *o) {
    memset(o, 0, sizeof *o);
    FILE *fp = fopen(path, "r");
    if (!fp) return;
    char line[512];
    o->ok = 1;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == 'v' && line[1] == ' ') {
            double *d = o->v[o->nv < 64 ? o->nv : 63];
            o->ok &= sscanf(line + 2, "%lf %lf %lf %lf %lf %lf", d, d + 1, d + 2, d + 3, d + 4, d + 5) == 6;
            o->nv++;
        } else if (line[0] == 'f' && line[1] == ' ') {
            long *d = o->f[o->nf < 64 ? o->nf : 63];
            o->ok &= sscanf(line + 2, "%ld %ld %ld", d, d + 1, d + 2) == 3;
            o->nf++;
        } else if (line[0] != '#' && line[0] != '\n') {
            o->ok = 0;
        }
    }
    fclose(fp);
}

static int no_leftovers(const char *d, const char *prefix) {
    DIR *dp = opendir(d);
    if (!dp) return 0;
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(dp)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && strchr(e->d_name, '.') &&
            strcmp(strchr(e->d_name, '.'), ".obj") != 0)
            ok = 0;
    closedir(dp);
    return ok;
}

static void test_obj(void) {
    float v[15] = {0.01f, 0.02f,  0.03f, -0.04f,  0.05f,  -0.06f, 0.07f, -0.08f,
                   0.09f, 0.1f,   0.11f, 0.12f,   -0.013f, 0.014f, 0.015f};
    int32_t fc[9] = {0, 1, 2, 2, 3, 4, 0, 4, 1};
    float t[3] = {0.25f, -0.125f, 12.5f};
    char path[128];
    for (int right = 0; right < 2; right++) {
        snprintf(path, sizeof path, "%s/hand%d.obj", dir, right);
        CHECK(hm_obj_write(path, v, 5, fc, 3, t, right) == HM_OK);
        objfile o;
        parse_obj(path, &o);
        CHECK(o.ok && o.nv == 5 && o.nf == 3);
        int ok = 1;
        for (int i = 0; i < 5; i++) {
            ok &= fabs(o.v[i][0] - (v[3 * i] + t[0])) < 1e-6;
            ok &= fabs(o.v[i][1] + (v[3 * i + 1] + t[1])) < 1e-6;
            ok &= fabs(o.v[i][2] + (v[3 * i + 2] + t[2])) < 1e-6;
            ok &= fabs(o.v[i][3] - 166 / 255.0) < 1e-8 && fabs(o.v[i][5] - 219 / 255.0) < 1e-8;
        }
        CHECK(ok);
        ok = 1;
        for (int i = 0; i < 3; i++) {
            ok &= o.f[i][0] == fc[3 * i] + 1;
            ok &= o.f[i][1] == fc[3 * i + (right ? 1 : 2)] + 1;
            ok &= o.f[i][2] == fc[3 * i + (right ? 2 : 1)] + 1;
        }
        CHECK(ok);
    }
    /* NULL cam_t = zero translation; overwriting an existing file. */
    snprintf(path, sizeof path, "%s/hand1.obj", dir);
    CHECK(hm_obj_write(path, v, 5, fc, 3, NULL, 1) == HM_OK);
    objfile o;
    parse_obj(path, &o);
    CHECK(o.ok && o.nv == 5 && fabs(o.v[1][1] - -0.05) < 1e-6 && fabs(o.v[1][2] - 0.06) < 1e-6);

    /* Errors: one line, nothing left behind. */
    CHECK(hm_obj_write("/nonexistent-dir-hm/x.obj", v, 5, fc, 3, t, 1) == HM_E_IO);
    CHECK(hm_errmsg()[0] && strchr(hm_errmsg(), '\n') == NULL);
    snprintf(path, sizeof path, "%s/sub", dir);
    CHECK(mkdir(path, 0755) == 0);
    CHECK(hm_obj_write(path, v, 5, fc, 3, t, 1) == HM_E_IO);  /* target is a directory */
    CHECK(no_leftovers(dir, "sub"));
    rmdir(path);
    fc[4] = 5;
    snprintf(path, sizeof path, "%s/bad.obj", dir);
    CHECK(hm_obj_write(path, v, 5, fc, 3, t, 1) == HM_E_ARG);
    CHECK(access(path, F_OK) != 0);
    fc[4] = 3;

    /* The demo's closed hand: 1538 + 14 faces. */
    int32_t *mf = calloc(3 * 1538, sizeof(int32_t)), *cf = malloc(sizeof(int32_t) * 3 * 1552);
    for (int i = 0; i < 3 * 1538; i++) mf[i] = i % 778;
    CHECK(hm_mesh_close_hand(mf, 1538, 778, cf) == 1552);
    CHECK(cf[3 * 1538] == 92 && cf[3 * 1538 + 2] == 234 && cf[3 * 1551] == 78 && cf[3 * 1551 + 2] == 79);
    CHECK(memcmp(cf, mf, sizeof(int32_t) * 3 * 1538) == 0);
    CHECK(hm_mesh_close_hand(mf, 1538, 200, cf) == HM_E_ARG);
    free(mf);
    free(cf);
    for (int right = 0; right < 2; right++) {
        snprintf(path, sizeof path, "%s/hand%d.obj", dir, right);
        unlink(path);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_render_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_triangle();
    test_cube();
    test_fill_rule();
    test_occlusion();
    test_blend_and_shade();
    test_robustness();
    test_near_clip();
    test_sizes();
    test_rotation();
    test_side_view();
    test_obj();
    rmdir(dir);
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
