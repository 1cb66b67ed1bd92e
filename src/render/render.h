/* render.h - software z-buffer rasterizer for hand-mesh overlays and side views.
 *
 * Frame: vertices are in the OpenCV camera frame (x right, y down, z forward,
 * metres), i.e. MANO output already translated by the camera translation.
 * A point projects to continuous pixel coordinates u = focal*X/Z + cx,
 * v = focal*Y/Z + cy, where pixel (i, j) spans [i, i+1) x [j, j+1) and has its
 * centre at (i+0.5, j+0.5). This is the window convention of the OpenGL
 * renderer the official demo uses (pyrender's IntrinsicsCamera with cx = W/2).
 *
 * Conventions (all calls):
 *  - Sampling: a pixel is covered when its centre lies inside a projected
 *    triangle; centres exactly on an edge follow the top-left rule, so two
 *    triangles sharing an edge never both cover (or both miss) a pixel.
 *  - Clipping: triangles are clipped against the plane z = HM_RENDER_ZNEAR
 *    (pyrender's default near plane), so a triangle partly behind the camera
 *    keeps its visible part. Faces with a non-finite vertex are skipped.
 *  - Visibility: one z-buffer over all meshes of a call (nearest surface wins,
 *    perspective-correct depth); no back-face culling, so winding is irrelevant.
 *  - Shading: smooth (area-weighted vertex normals, interpolated per pixel),
 *    directional headlight along the viewing axis, two-sided:
 *    shade = HM_RENDER_AMBIENT + (1 - HM_RENDER_AMBIENT) * |n.z|,
 *    pixel colour = mesh colour * shade. An approximation of the demo's
 *    pyrender lighting, not a reproduction of it.
 *  - Memory: each call allocates its z-buffer for the bounding box of what it
 *    draws (at most 8 bytes per image pixel) and frees it before returning.
 */
#ifndef HM_RENDER_H
#define HM_RENDER_H

#include <stdint.h>

#define HM_RENDER_ZNEAR 0.05f
#define HM_RENDER_AMBIENT 0.35f
#define HM_RENDER_MAX_MESHES 65535

/* The official demo's mesh colour (LIGHT_BLUE in demo.py; 166/255, 189/255, 219/255). */
extern const float hm_render_light_blue[3];

typedef struct {
    const float *verts;    /* [nv,3] camera frame (see above) */
    int nv;
    const int32_t *faces;  /* [nf,3] 0-based vertex indices */
    int nf;
    float color[3];        /* 0..1 */
} hm_mesh;

/* Draws meshes[0..n) over the packed RGB image rgb[h][w][3] in place:
 * out = img + alpha * (shaded - img), rounded to nearest. Pixels that no
 * triangle covers are left bit-exactly unchanged. alpha in [0,1]; alpha 1 is
 * the demo's opaque overlay. Returns HM_OK, or HM_E_ARG (bad sizes, camera,
 * colour, face index out of range; the image is untouched) or HM_E_NOMEM. */
int hm_render_overlay(uint8_t *rgb, int w, int h, const hm_mesh *meshes, int n, float focal, float cx,
                      float cy, float alpha);

/* Side view: fills rgb[h][w][3] with bg (0..1; NULL = white, as the demo),
 * then draws the meshes opaquely after rotating them all by `degrees` about
 * the y axis through `pivot` (NULL = mean of all vertices of all meshes).
 * The demo's per-hand side view is: 256x256, focal 5000, cx = cy = 128,
 * degrees 90, verts = un-mirrored crop-frame vertices + crop cam_t and
 * pivot = crop cam_t (the demo rotates the MANO-frame mesh about its origin
 * before translating it). Errors as hm_render_overlay (canvas then undefined). */
int hm_render_side_view(uint8_t *rgb, int w, int h, const hm_mesh *meshes, int n, float focal, float cx,
                        float cy, float degrees, const float *pivot, const float *bg);

/* out[i] = R_y(degrees) (verts[i] - c) + c with c the mean of the vertices;
 * R_y is the right-handed rotation trimesh uses (x' = cos x + sin z,
 * z' = -sin x + cos z). out may equal verts. nv <= 0 does nothing. */
void hm_mesh_rotate_y(const float *verts, int nv, float degrees, float *out);

/* As hm_mesh_rotate_y, about the given pivot point c[3] instead of the mean. */
void hm_mesh_rotate_y_about(const float *verts, int nv, float degrees, const float *pivot, float *out);

#endif
