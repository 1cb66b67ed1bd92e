/* patch_embed.c - ViT patch embedding: Conv2d(3, dim, 16, stride 16, pad 2).
 *
 * The convolution is an im2col matmul: token t = (i, j) of the 16 x 12 grid
 * reads input rows 16i-2 .. 16i+13 and columns 16j-2 .. 16j+13; its im2col
 * row is ordered (c, kh, kw) like the flattened conv weight. Out-of-image
 * taps (only the top rows and left columns; the conv never reaches crop rows
 * 254-255 or columns 190-191) are zero.
 *
 * Position: x = pos[t] + conv(t) + bias, where pos[t] = pos_embed[1+t] +
 * pos_embed[0] (the class slot is broadcast; no class token is kept).
 *
 * uint8 crops: normalisation (u/255 - mean)/std is folded into the weights
 * (W / (255 std_c)) and a per-token bias that subtracts W.mean/std over the
 * taps inside the image (padding is zero AFTER normalisation, so padded taps
 * must not contribute the mean term). See load/model_load.c for the folding.
 */
#include <string.h>
#include "backend/cpu/cpu.h"

#define K_PATCH (3 * HM_PATCH * HM_PATCH)

/* im2col of one crop from a float CHW image. The caller's array need not be
 * float-aligned (numpy slices, byte buffers), so rows are copied as bytes. */
static void im2col_f32(const unsigned char *img, float *cols, int gh, int gw) {
    for (int i = 0; i < gh; i++)
        for (int j = 0; j < gw; j++) {
            float *row = cols + (size_t)(i * gw + j) * K_PATCH;
            int x0 = j * HM_PATCH - HM_PATCH_PAD, lo = x0 < 0 ? -x0 : 0;
            int hi = x0 + HM_PATCH > HAMER_CROP_W ? HAMER_CROP_W - x0 : HM_PATCH;
            for (int c = 0; c < 3; c++)
                for (int kh = 0; kh < HM_PATCH; kh++) {
                    int y = i * HM_PATCH - HM_PATCH_PAD + kh;
                    float *dst = row + (c * HM_PATCH + kh) * HM_PATCH;
                    memset(dst, 0, HM_PATCH * sizeof(float));
                    if (y < 0 || y >= HAMER_CROP_H) continue;
                    size_t off = (((size_t)c * HAMER_CROP_H + y) * HAMER_CROP_W + x0 + lo) * sizeof(float);
                    memcpy(dst + lo, img + off, (size_t)(hi - lo) * sizeof(float));
                }
        }
}

/* im2col of one crop from a uint8 HWC RGB image (raw 0..255 values). */
static void im2col_u8(const uint8_t *img, float *cols, int gh, int gw) {
    for (int i = 0; i < gh; i++)
        for (int j = 0; j < gw; j++) {
            float *row = cols + (size_t)(i * gw + j) * K_PATCH;
            for (int c = 0; c < 3; c++)
                for (int kh = 0; kh < HM_PATCH; kh++) {
                    int y = i * HM_PATCH - HM_PATCH_PAD + kh;
                    float *dst = row + (c * HM_PATCH + kh) * HM_PATCH;
                    for (int kw = 0; kw < HM_PATCH; kw++) {
                        int xx = j * HM_PATCH - HM_PATCH_PAD + kw;
                        int in = y >= 0 && y < HAMER_CROP_H && xx >= 0 && xx < HAMER_CROP_W;
                        dst[kw] = in ? (float)img[((size_t)y * HAMER_CROP_W + xx) * 3 + c] : 0.0f;
                    }
                }
        }
}

static int embed(hm_cpu_state *s, int B, const hm_packed *w, const float *tok_bias) {
    const hm_config *c = &s->m->cfg;
    for (int b = 0; b < B; b++)
        memcpy(s->x + (size_t)b * c->ntok * c->dim, tok_bias, (size_t)c->ntok * c->dim * sizeof(float));
    return hm_gemm(s->pool, B * c->ntok, s->cols, K_PATCH, w, s->x, c->dim, HM_EPI_ACCUM);
}

int hm_patch_embed_f32(hm_cpu_state *s, const void *crops, int B) {
    const hm_config *c = &s->m->cfg;
    const size_t bytes = (size_t)3 * HAMER_CROP_H * HAMER_CROP_W * sizeof(float);
    for (int b = 0; b < B; b++)
        im2col_f32((const unsigned char *)crops + (size_t)b * bytes, s->cols + (size_t)b * c->ntok * K_PATCH, c->gh, c->gw);
    return embed(s, B, &s->m->patch, s->m->pos);
}

int hm_patch_embed_u8(hm_cpu_state *s, const uint8_t *crops, int B) {
    const hm_config *c = &s->m->cfg;
    for (int b = 0; b < B; b++)
        im2col_u8(crops + (size_t)b * HAMER_CROP_H * HAMER_CROP_W * 3, s->cols + (size_t)b * c->ntok * K_PATCH, c->gh, c->gw);
    return embed(s, B, &s->m->patch_u8, s->m->u8_tok_bias);
}
