/* draw.c - lines and dots as capsule / disc coverage tests per pixel. */
#include "render/draw.h"

#include <math.h>
#include <stddef.h>

/* wrist 0; thumb 1-4, index 5-8, middle 9-12, ring 13-16, little 17-20 */
const uint8_t hm_draw_hand_bones[HM_DRAW_HAND_BONES][2] = {
    {0, 1},   {1, 2},   {2, 3},   {3, 4},   {0, 5},   {5, 6},   {6, 7},   {7, 8},   {5, 9},   {9, 10},  {10, 11},
    {11, 12}, {9, 13},  {13, 14}, {14, 15}, {15, 16}, {13, 17}, {0, 17},  {17, 18}, {18, 19}, {19, 20},
};

static int clampi(float v, int lo, int hi) {
    if (!(v > lo)) return lo;
    if (v > hi) return hi;
    return (int)v;
}

/* Every pixel whose centre lies within r of the segment gets the colour. */
static void capsule(uint8_t *rgb, int w, int h, float x0, float y0, float x1, float y1, float r, const uint8_t c[3]) {
    if (!isfinite(x0) || !isfinite(y0) || !isfinite(x1) || !isfinite(y1) || !(r > 0)) return;
    int xa = clampi(fminf(x0, x1) - r - 1, 0, w - 1), xb = clampi(fmaxf(x0, x1) + r + 1, 0, w - 1);
    int ya = clampi(fminf(y0, y1) - r - 1, 0, h - 1), yb = clampi(fmaxf(y0, y1) + r + 1, 0, h - 1);
    float dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
    for (int y = ya; y <= yb; y++)
        for (int x = xa; x <= xb; x++) {
            float px = x + 0.5f - x0, py = y + 0.5f - y0;
            float t = len2 > 0 ? (px * dx + py * dy) / len2 : 0.0f;
            t = t < 0 ? 0 : t > 1 ? 1 : t;
            float ex = px - t * dx, ey = py - t * dy;
            if (ex * ex + ey * ey <= r * r) {
                uint8_t *p = rgb + ((size_t)y * w + x) * 3;
                p[0] = c[0], p[1] = c[1], p[2] = c[2];
            }
        }
}

void hm_draw_line(uint8_t *rgb, int w, int h, float x0, float y0, float x1, float y1, float width,
                  const uint8_t color[3]) {
    capsule(rgb, w, h, x0, y0, x1, y1, width / 2, color);
}

void hm_draw_dot(uint8_t *rgb, int w, int h, float x, float y, float r, const uint8_t color[3]) {
    capsule(rgb, w, h, x, y, x, y, r, color);
}
