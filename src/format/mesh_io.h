/* mesh_io.h - Wavefront OBJ export of hand meshes, as the official demo writes them.
 *
 * The demo (demo.py --save_mesh) builds a trimesh from (vertices + cam_t) with
 * its renderer's face set and a LIGHT_BLUE vertex colour, rotates it 180
 * degrees about the x axis (OpenCV camera frame -> OpenGL: y and z negated)
 * and exports it with trimesh: a comment line, "v x y z r g b" lines with
 * 8 decimals, then "f a b c" lines with 1-based indices. hm_obj_write
 * produces that text (our own header comment) for one hand.
 */
#ifndef HM_MESH_IO_H
#define HM_MESH_IO_H

#include <stddef.h>
#include <stdint.h>

/* The demo's renderer closes the MANO wrist opening with 14 extra faces; its
 * overlays and OBJ files use the 1538 MANO faces followed by these. */
#define HM_MESH_EXTRA_FACES 14
extern const int32_t hm_mesh_extra_faces[HM_MESH_EXTRA_FACES][3];

/* out[nf + 14][3] = faces[nf][3] followed by hm_mesh_extra_faces (right-hand
 * winding, as MANO's faces). The extra faces index vertices up to 279, so nv
 * must exceed that. Returns nf + 14, or HM_E_ARG. out must not alias faces. */
int hm_mesh_close_hand(const int32_t *faces, int nf, int nv, int32_t *out);

/* Writes one hand as an OBJ file at path.
 * verts: [nv,3] MANO output in the full-image camera frame (OpenCV axes,
 *   metres, root-relative), with x ALREADY negated for left hands - the
 *   demo's `verts` after `verts[:,0] = (2*is_right-1)*verts[:,0]`.
 * faces: [nf,3] 0-based, right-hand winding (MANO's faces, normally after
 *   hm_mesh_close_hand); for is_right == 0 each face is written reversed
 *   (a, c, b), as the demo's faces_left.
 * cam_t: the full-image camera translation (3 floats; NULL = zero).
 * Each vertex is written as (x+tx, -(y+ty), -(z+tz)), the sum taken in float32
 * as numpy does, then the demo's rotation in double, printed "%.8f", followed
 * by the LIGHT_BLUE colour. The file appears complete or not at all
 * (core/fileio: a temp file beside the symlink-followed target, renamed).
 * Returns HM_OK, HM_E_ARG (bad sizes, face index out of range) or HM_E_IO. */
int hm_obj_write(const char *path, const float *verts, int nv, const int32_t *faces, int nf, const float *cam_t,
                 int is_right);
/* The same text in memory: *text (malloc'd, *len bytes, not terminated by
 * anything but its last newline) or HM_E_ARG / HM_E_NOMEM. */
int hm_obj_text(const float *verts, int nv, const int32_t *faces, int nf, const float *cam_t, int is_right,
                char **text, size_t *len);
/* n meshes of nv vertices sharing one face list, in one OBJ text: mesh k
 * is its hm_obj_text lines (cam_t[k], is_right[k]; cam_t or cam_t[k] NULL =
 * zero) with an "o names[k]" line after its comment (names NULL: none) and
 * face indices offset by the k * nv vertices before it, so its v lines are
 * those of its own file. n 0 gives an empty text. Errors as hm_obj_text. */
int hm_obj_text_multi(int n, const float *const *verts, int nv, const int32_t *faces, int nf,
                      const float *const *cam_t, const int *is_right, const char *const *names, char **text,
                      size_t *len);

#endif
