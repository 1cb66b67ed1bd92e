/* draw.h - 2D marks over an image: lines and dots, for pictures of the
 * hand detector's results (boxes and the 21-landmark skeleton). */
#ifndef HM_DRAW_H
#define HM_DRAW_H

#include <stdint.h>

/* Draw the segment (x0,y0)-(x1,y1) (pixel coordinates, centres at +0.5)
 * with the given width in pixels and colour into rgb[h][w][3]; parts
 * outside the image are clipped. Non-finite endpoints draw nothing. */
void hm_draw_line(uint8_t *rgb, int w, int h, float x0, float y0, float x1, float y1, float width,
                  const uint8_t color[3]);
/* A filled disc of radius r centred at (x, y). */
void hm_draw_dot(uint8_t *rgb, int w, int h, float x, float y, float r, const uint8_t color[3]);

/* The MediaPipe hand skeleton: 21 landmarks joined by these 21 bones. */
#define HM_DRAW_HAND_BONES 21
extern const uint8_t hm_draw_hand_bones[HM_DRAW_HAND_BONES][2];

#endif
