/* marks.h - what a picture of the hands shows besides the meshes: each
 * hand's box, its 21 keypoints joined as the hand's skeleton, and a label
 * naming it ("#0 right 0.98": index, side, detector score), drawn over an
 * RGB image. */
#ifndef HM_MARKS_H
#define HM_MARKS_H

#include <stdint.h>

#include "hamer.h"

/* What to draw (bits; hamer_render_params.hide takes the same bits). */
enum { HM_MARK_MESH = 1, HM_MARK_BOXES = 2, HM_MARK_KEYPOINTS = 4, HM_MARK_LABELS = 8 };

/* Colours: right hands green, left hands orange (as the detector's
 * picture), keypoints red, label text dark on the hand's colour. */
extern const uint8_t hm_mark_right[3], hm_mark_left[3];

/* The marks `what` (HM_MARK_BOXES | _KEYPOINTS | _LABELS) of hands[0..n)
 * over rgb (w x h x 3), scaled to the picture (lines of about
 * max(w, h) / 400 px, at least 1.5). A hand without a result (ok = 0) gets
 * its box and a label "#i error", no keypoints. Marks outside the picture
 * are clipped. Draws nothing for n = 0. */
void hm_marks_draw(uint8_t *rgb, int w, int h, const hamer_hand *hands, int n, unsigned what);

/* Text in a 5 x 7 pixel font scaled by `scale` (>= 1), its top-left at
 * (x, y); characters without a glyph are drawn as a space. Its width in
 * pixels is hm_marks_text_width. */
void hm_marks_text(uint8_t *rgb, int w, int h, int x, int y, int scale, const char *text, const uint8_t color[3]);
int hm_marks_text_width(const char *text, int scale);

#endif
