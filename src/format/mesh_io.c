/* mesh_io.c - OBJ export of hand meshes in the official demo's geometry. */
#include "format/mesh_io.h"
#include "core/fileio.h"

#include "core/util.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* hamer/utils/renderer.py (Renderer.__init__, faces_new): fills the wrist hole. */
const int32_t hm_mesh_extra_faces[HM_MESH_EXTRA_FACES][3] = {
    {92, 38, 234},   {234, 38, 239},  {38, 122, 239},  {239, 122, 279}, {122, 118, 279},
    {279, 118, 215}, {118, 117, 215}, {215, 117, 214}, {117, 119, 214}, {214, 119, 121},
    {119, 120, 121}, {121, 120, 78},  {120, 108, 78},  {78, 108, 79},
};

int hm_mesh_close_hand(const int32_t *faces, int nf, int nv, int32_t *out) {
    if (nf < 0 || (nf > 0 && !faces) || !out || nv <= 279 || nf > INT32_MAX - HM_MESH_EXTRA_FACES)
        return hm_err(HM_E_ARG, "mesh: cannot close a hand mesh with %d faces over %d vertices", nf, nv);
    if (nf) memcpy(out, faces, sizeof(int32_t) * 3 * (size_t)nf);
    memcpy(out + 3 * (size_t)nf, hm_mesh_extra_faces, sizeof hm_mesh_extra_faces);
    return nf + HM_MESH_EXTRA_FACES;
}

/* Writes the OBJ text; returns 0 or -1 with errno from the failing stdio
 * call. base: vertices already in the file (face indices follow them);
 * name: an "o NAME" line after the comment, or NULL. */
static int write_body(FILE *f, const float *verts, int nv, const int32_t *faces, int nf, const float *t,
                      int is_right, long base, const char *name) {
    /* trimesh stores the LIGHT_BLUE colour as uint8 (166, 189, 219) and writes it back /255. */
    const double r = 166 / 255.0, g = 189 / 255.0, b = 219 / 255.0;
    /* The demo's 180-degree rotation about x, as trimesh's float64 matrix has it:
     * cos(pi) = -1 exactly, sin(pi) = 1.22e-16, not 0. */
    const double s = sin(M_PI);
    if (fprintf(f, "# hamer.c hand mesh (%s): demo frame, x right, y up, z towards the viewer\n",
                is_right ? "right" : "left") < 0)
        return -1;
    if (name && fprintf(f, "o %s\n", name) < 0) return -1;
    for (int i = 0; i < nv; i++) {
        const float *v = verts + 3 * (size_t)i;
        /* float32 sum first: numpy adds the float32 cam_t to the float32 vertices. */
        double x = (float)(v[0] + t[0]), y = (float)(v[1] + t[1]), z = (float)(v[2] + t[2]);
        if (fprintf(f, "v %.8f %.8f %.8f %.8f %.8f %.8f\n", x, -y - s * z, s * y - z, r, g, b) < 0) return -1;
    }
    for (int i = 0; i < nf; i++) {
        const int32_t *c = faces + 3 * (size_t)i;
        long a = base + c[0] + 1, bb = base + c[1] + 1, cc = base + c[2] + 1;
        if (fprintf(f, "f %ld %ld %ld\n", a, is_right ? bb : cc, is_right ? cc : bb) < 0) return -1;
    }
    return 0;
}

/* Argument checks shared by both entry points. */
static int obj_args(const char *what, const float *verts, int nv, const int32_t *faces, int nf) {
    if (nv <= 0 || !verts || nf < 0 || (nf > 0 && !faces))
        return hm_err(HM_E_ARG, "obj: bad mesh (%d vertices, %d faces) for %s", nv, nf, what);
    for (size_t i = 0; i < 3 * (size_t)nf; i++)
        if (faces[i] < 0 || faces[i] >= nv)
            return hm_err(HM_E_ARG, "obj: face %zu references vertex %d of %d", i / 3, (int)faces[i], nv);
    return HM_OK;
}

int hm_obj_text_multi(int n, const float *const *verts, int nv, const int32_t *faces, int nf,
                      const float *const *cam_t, const int *is_right, const char *const *names, char **text,
                      size_t *len) {
    static const float zero[3] = {0, 0, 0};
    *text = NULL, *len = 0;
    if (n < 0 || (n > 0 && (!verts || !is_right))) return hm_err(HM_E_ARG, "obj: bad list of %d meshes", n);
    for (int k = 0; k < n; k++) {
        int rc = obj_args("the OBJ text", verts[k], nv, faces, nf);
        if (rc) return rc;
    }
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    if (!f) return hm_err(HM_E_NOMEM, "obj: out of memory");
    int bad = 0;
    for (int k = 0; k < n && !bad; k++)
        bad = write_body(f, verts[k], nv, faces, nf, cam_t && cam_t[k] ? cam_t[k] : zero, is_right[k],
                         (long)k * nv, names ? names[k] : NULL) != 0;
    bad |= fclose(f) != 0;
    if (bad) {
        free(buf);
        return hm_err(HM_E_NOMEM, "obj: out of memory");
    }
    *text = buf, *len = sz;
    return HM_OK;
}

int hm_obj_text(const float *verts, int nv, const int32_t *faces, int nf, const float *cam_t, int is_right,
                char **text, size_t *len) {
    *text = NULL, *len = 0;
    int rc = obj_args("the OBJ text", verts, nv, faces, nf);
    if (rc) return rc;
    return hm_obj_text_multi(1, &verts, nv, faces, nf, &cam_t, &is_right, NULL, text, len);
}

int hm_obj_write(const char *path, const float *verts, int nv, const int32_t *faces, int nf, const float *cam_t,
                 int is_right) {
    if (!path || !path[0]) return hm_err(HM_E_ARG, "obj: empty output path");
    char *text;
    size_t len;
    int rc = obj_args(path, verts, nv, faces, nf);
    if (!rc) rc = hm_obj_text(verts, nv, faces, nf, cam_t, is_right, &text, &len);
    if (rc) return rc;
    /* Through core/fileio: a link to the mesh stays a link, a device node
     * or directory at the path is refused, a failure leaves the old mesh. */
    rc = hm_file_write_atomic(path, text, len);
    free(text);
    return rc;
}
