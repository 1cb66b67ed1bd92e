/* test_marks - the overlay's marks (render/marks.c, hamer_render_overlay_*):
 * argument checks, what each bit draws where, and hands whose boxes or
 * keypoints lie outside the picture, are huge or not finite (nothing
 * written outside the image: guard bytes after it, and ASan). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hamer.h"
#include "render/marks.h"

#include "check.h"

#define W 160
#define H 120
#define GUARD 64

static uint8_t *image(uint8_t v) {
    uint8_t *p = malloc((size_t)W * H * 3 + GUARD);
    memset(p, v, (size_t)W * H * 3 + GUARD);
    return p;
}

static int guard_ok(const uint8_t *p, uint8_t v) {
    for (size_t i = 0; i < GUARD; i++)
        if (p[(size_t)W * H * 3 + i] != v) return 0;
    return 1;
}

static const uint8_t *px(const uint8_t *p, int x, int y) { return p + ((size_t)y * W + x) * 3; }

static int is(const uint8_t *q, const uint8_t c[3]) { return q[0] == c[0] && q[1] == c[1] && q[2] == c[2]; }

static hamer_hand hand(float x0, float y0, float x1, float y1, int right) {
    hamer_hand h;
    memset(&h, 0, sizeof h);
    h.ok = 1;
    h.box = (hamer_box){{x0, y0, x1, y1}, right};
    for (int k = 0; k < HAMER_N_KP; k++) { /* a fan from the wrist at the box's bottom middle */
        h.keypoints_2d[2 * k] = x0 + (x1 - x0) * (float)(k % 5 + 1) / 6;
        h.keypoints_2d[2 * k + 1] = y1 - (y1 - y0) * (float)(k / 5 + 1) / 6;
    }
    return h;
}

static void arguments(void) {
    uint8_t *in = image(50), *out = image(0);
    hamer_hand h = hand(20, 30, 80, 100, 1);
    hamer_render_params p = hamer_render_default_params();
    CHECK(p.hide == 0);
    p.hide = HAMER_DRAW_MESH;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, &h, 1, &p, out) == HAMER_OK); /* marks need no model */
    p.hide = 0;
    CHECK(clean_error(hamer_render_overlay_rgb(NULL, in, W, H, &h, 1, &p, out)) &&
          hamer_last_error_code() == HAMER_E_ARG && strstr(hamer_last_error(), "meshes need the model"));
    p.hide = 16;
    CHECK(clean_error(hamer_render_overlay_rgb(NULL, in, W, H, &h, 1, &p, out)) &&
          strstr(hamer_last_error(), "outside HAMER_DRAW_ALL"));
    p.hide = HAMER_DRAW_MESH;
    p.reserved[HAMER_PARAMS_RESERVED - 1] = 1;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, &h, 1, &p, out) == HAMER_E_ARG &&
          strstr(hamer_last_error(), "hamer_render_params: reserved bytes must be zero"));
    p.reserved[HAMER_PARAMS_RESERVED - 1] = 0;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, &h, HAMER_MAX_HANDS + 1, &p, out) == HAMER_E_ARG);
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, NULL, 1, &p, out) == HAMER_E_ARG);
    CHECK(hamer_render_overlay_rgb(NULL, in, 0, H, &h, 1, &p, out) == HAMER_E_ARG);
    CHECK(hamer_render_overlay_rgb(NULL, NULL, W, H, &h, 1, &p, out) == HAMER_E_ARG);
    uint8_t *png = NULL;
    size_t len = 0;
    CHECK(hamer_render_overlay_png(NULL, in, W, H, &h, 1, &p, NULL, &len) == HAMER_E_ARG);
    CHECK(hamer_render_overlay_png(NULL, in, W, H, &h, 1, &p, &png, &len) == HAMER_OK && len > 8 &&
          !memcmp(png, "\x89PNG", 4));
    hamer_free(png);
    free(in), free(out);
}

/* Each bit alone: boxes on the outline (right green, left orange), the
 * keypoints red at each point, labels filled above the box; nothing with
 * every bit hidden; the image itself untouched when out is another buffer. */
static void each_mark(void) {
    uint8_t *in = image(50), *out = image(7);
    hamer_hand hs[2] = {hand(20, 40, 70, 110, 1), hand(90, 45, 150, 115, 0)};
    hamer_render_params p = hamer_render_default_params();
    p.hide = HAMER_DRAW_ALL;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, hs, 2, &p, out) == HAMER_OK && !memcmp(in, out, (size_t)W * H * 3));
    p.hide = HAMER_DRAW_ALL & ~HAMER_DRAW_BOXES;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, hs, 2, &p, out) == HAMER_OK);
    CHECK(is(px(out, 45, 40), hm_mark_right) && is(px(out, 20, 75), hm_mark_right) && is(px(out, 120, 115), hm_mark_left));
    CHECK(px(out, 45, 75)[0] == 50 && px(out, 5, 5)[0] == 50); /* inside and outside the boxes: untouched */
    CHECK(px(in, 45, 40)[0] == 50 && guard_ok(out, 7) && guard_ok(in, 50));
    p.hide = HAMER_DRAW_ALL & ~HAMER_DRAW_KEYPOINTS;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, hs, 2, &p, out) == HAMER_OK);
    static const uint8_t red[3] = {240, 30, 30};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < HAMER_N_KP; k++)
            CHECKF(is(px(out, (int)hs[i].keypoints_2d[2 * k], (int)hs[i].keypoints_2d[2 * k + 1]), red), "hand %d kp %d", i, k);
    p.hide = HAMER_DRAW_ALL & ~HAMER_DRAW_LABELS;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, hs, 2, &p, out) == HAMER_OK);
    /* "#0 right" above (20, 40): the tag's corner has the side's colour */
    CHECK(is(px(out, 20, 40 - 1), hm_mark_right) && is(px(out, 90, 45 - 1), hm_mark_left));
    CHECK(px(out, 45, 75)[0] == 50);
    /* in place: out == rgb */
    memcpy(out, in, (size_t)W * H * 3);
    p.hide = HAMER_DRAW_MESH;
    CHECK(hamer_render_overlay_rgb(NULL, out, W, H, hs, 2, &p, out) == HAMER_OK && is(px(out, 45, 110), hm_mark_right));
    free(in), free(out);
}

/* Hands the picture cannot hold: boxes and keypoints far outside, huge,
 * NaN or infinite, a failed hand ("#0 error", no keypoints): drawn where
 * they fall inside, nothing written outside the image. */
static void hostile(void) {
    uint8_t *in = image(50), *out = image(9);
    const float inf = INFINITY, nan = NAN;
    hamer_hand hs[8] = {hand(-500, -500, -400, -400, 1), hand(1e30f, 1e30f, 3e30f, 3e30f, 0),
                        hand(-1e30f, -1e30f, 1e30f, 1e30f, 1), hand(nan, 10, 50, nan, 0),
                        hand(-inf, -inf, inf, inf, 1), hand(150, 110, 400, 300, 0),
                        hand(10, 10, 40, 40, 1), hand(100, 2, 159, 20, 0)};
    for (int k = 0; k < HAMER_N_KP; k++) hs[3].keypoints_2d[2 * k] = nan, hs[4].keypoints_2d[2 * k + 1] = inf;
    hs[6].ok = 0;
    hamer_render_params p = hamer_render_default_params();
    p.hide = HAMER_DRAW_MESH;
    CHECK(hamer_render_overlay_rgb(NULL, in, W, H, hs, 8, &p, out) == HAMER_OK && guard_ok(out, 9));
    CHECK(is(px(out, 10, 25), hm_mark_right));  /* the failed hand's box */
    CHECK(hm_marks_text_width("#0", 2) == 22 && hm_marks_text_width("", 3) == 0);
    /* a label wider than the picture: clipped, nothing outside */
    uint8_t *tiny = malloc(4 * 3 + GUARD);
    memset(tiny, 1, 4 * 3 + GUARD);
    hm_marks_text(tiny, 2, 2, -3, -3, 5, "#63 right 0.99", hm_mark_left);
    int ok = 1;
    for (int i = 0; i < GUARD; i++) ok &= tiny[12 + i] == 1;
    CHECK(ok);
    free(tiny);
    free(in), free(out);
}

int main(void) {
    arguments();
    each_mark();
    hostile();
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail ? 1 : 0;
}
