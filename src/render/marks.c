/* marks.c - boxes, keypoint skeletons and labels over a picture (marks.h).
 *
 * The labels use a small bitmap font of the characters they need (digits,
 * '#', '.', the letters of "right", "left" and "error"): a font library
 * for a dozen glyphs would be a dependency for nothing. */
#include "render/marks.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "render/draw.h"

const uint8_t hm_mark_right[3] = {40, 220, 60}, hm_mark_left[3] = {255, 150, 20};
static const uint8_t joint_color[3] = {240, 30, 30}, text_color[3] = {16, 16, 16};

#define GLYPH_W 5
#define GLYPH_H 7

/* Rows top to bottom, bit 4 the leftmost column. */
static const struct {
    char c;
    uint8_t rows[GLYPH_H];
} glyphs[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0x00, 0x00, 0x00, 0x00, 0x00, 0x0C, 0x0C}}, {'#', {0x0A, 0x0A, 0x1F, 0x0A, 0x1F, 0x0A, 0x0A}},
    {'e', {0x00, 0x00, 0x0E, 0x11, 0x1F, 0x10, 0x0E}}, {'f', {0x06, 0x09, 0x08, 0x1C, 0x08, 0x08, 0x08}},
    {'g', {0x00, 0x0F, 0x11, 0x11, 0x0F, 0x01, 0x0E}}, {'h', {0x10, 0x10, 0x16, 0x19, 0x11, 0x11, 0x11}},
    {'i', {0x04, 0x00, 0x0C, 0x04, 0x04, 0x04, 0x0E}}, {'l', {0x0C, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'o', {0x00, 0x00, 0x0E, 0x11, 0x11, 0x11, 0x0E}}, {'r', {0x00, 0x00, 0x16, 0x19, 0x10, 0x10, 0x10}},
    {'t', {0x08, 0x08, 0x1C, 0x08, 0x08, 0x09, 0x06}},
};

static const uint8_t *glyph(char c) {
    for (size_t i = 0; i < sizeof glyphs / sizeof *glyphs; i++)
        if (glyphs[i].c == c) return glyphs[i].rows;
    return NULL;
}

/* One glyph cell and a column of space after it. */
int hm_marks_text_width(const char *text, int scale) {
    int n = (int)strlen(text);
    return n ? (n * (GLYPH_W + 1) - 1) * scale : 0;
}

static void fill(uint8_t *rgb, int w, int h, int x0, int y0, int x1, int y1, const uint8_t c[3]) {
    if (x0 < 0) x0 = 0;
    if (y0 < 0) y0 = 0;
    if (x1 > w) x1 = w;
    if (y1 > h) y1 = h;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) memcpy(rgb + ((size_t)y * w + x) * 3, c, 3);
}

void hm_marks_text(uint8_t *rgb, int w, int h, int x, int y, int scale, const char *text, const uint8_t color[3]) {
    for (; *text; text++, x += (GLYPH_W + 1) * scale) {
        const uint8_t *g = glyph(*text);
        for (int r = 0; g && r < GLYPH_H; r++)
            for (int c = 0; c < GLYPH_W; c++)
                if (g[r] >> (GLYPH_W - 1 - c) & 1)
                    fill(rgb, w, h, x + c * scale, y + r * scale, x + (c + 1) * scale, y + (r + 1) * scale, color);
    }
}

/* The label on a filled tag of the hand's colour, above the box's top-left
 * corner, or inside the box when there is no room above. */
static void label(uint8_t *rgb, int w, int h, const float *b, const char *text, int scale, const uint8_t c[3]) {
    if (!isfinite(b[0]) || !isfinite(b[1]) || b[2] < 0 || b[3] < 0 || b[0] > w || b[1] > h) return; /* not in view */
    const int pad = scale, tw = hm_marks_text_width(text, scale) + 2 * pad, th = GLYPH_H * scale + 2 * pad;
    /* clamped to the picture before the conversion (a box may be anywhere) */
    const float bx = fminf(fmaxf(b[0], 0.0f), (float)w), by = fminf(fmaxf(b[1], 0.0f), (float)h);
    int x = (int)bx, y = (int)by - th;
    if (y < 0) y = (int)by;
    if (x + tw > w) x = w - tw;
    if (x < 0) x = 0;
    fill(rgb, w, h, x, y, x + tw, y + th, c);
    hm_marks_text(rgb, w, h, x + pad, y + pad, scale, text, text_color);
}

void hm_marks_draw(uint8_t *rgb, int w, int h, const hamer_hand *hands, int n, unsigned what) {
    float lw = (w > h ? w : h) / 400.0f;
    lw = lw < 1.5f ? 1.5f : lw;
    int scale = (int)lrintf(lw);
    scale = scale < 2 ? 2 : scale;
    for (int i = 0; i < n; i++) {
        const hamer_hand *H = &hands[i];
        const uint8_t *c = H->box.is_right ? hm_mark_right : hm_mark_left;
        const float *b = H->box.bbox;
        if (what & HM_MARK_BOXES) {
            const float corner[5][2] = {{b[0], b[1]}, {b[2], b[1]}, {b[2], b[3]}, {b[0], b[3]}, {b[0], b[1]}};
            for (int k = 0; k < 4; k++)
                hm_draw_line(rgb, w, h, corner[k][0], corner[k][1], corner[k + 1][0], corner[k + 1][1], lw, c);
        }
        if ((what & HM_MARK_KEYPOINTS) && H->ok) {
            const float *K = H->keypoints_2d;
            for (int k = 0; k < HM_DRAW_HAND_BONES; k++) {
                const float *p = K + 2 * hm_draw_hand_bones[k][0], *q = K + 2 * hm_draw_hand_bones[k][1];
                hm_draw_line(rgb, w, h, p[0], p[1], q[0], q[1], lw, c);
            }
            for (int k = 0; k < HAMER_N_KP; k++) hm_draw_dot(rgb, w, h, K[2 * k], K[2 * k + 1], 1.2f * lw, joint_color);
        }
        if (what & HM_MARK_LABELS) {
            char text[48];
            if (!H->ok) snprintf(text, sizeof text, "#%d error", i);
            else if (H->detection.detected)
                snprintf(text, sizeof text, "#%d %s %.2f", i, H->box.is_right ? "right" : "left",
                         (double)H->detection.score);
            else snprintf(text, sizeof text, "#%d %s", i, H->box.is_right ? "right" : "left");
            label(rgb, w, h, b, text, scale, c);
        }
    }
}
