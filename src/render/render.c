/* render.c - software z-buffer rasterizer (see render.h for the conventions). */
#include "render/render.h"

#include "core/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const float hm_render_light_blue[3] = {0.65098039f, 0.74117647f, 0.85882353f};

/* Clip-space vertex: camera-frame position and vertex normal. Doubles so that
 * near-plane intersections and huge projections keep their precision. */
typedef struct {
    double p[3];
    double n[3];
} rvert;

/* One call's raster state. The buffers cover pixels [x0,x0+rw) x [y0,y0+rh). */
typedef struct {
    double focal, cx, cy;
    int x0, y0, rw, rh;
    float *invz;    /* 1/z of the nearest surface; 0 = nothing drawn */
    uint32_t *tag;  /* (mesh index + 1) << 16 | shade in 1/65535 units */
} raster;

static int finite3(const float *v) { return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]); }

/* Area-weighted vertex normals (unnormalised sums; the raster normalises after
 * interpolation). Faces with non-finite vertices contribute nothing, so one
 * bad vertex does not poison its neighbours' shading. */
static void vertex_normals(const hm_mesh *m, double *vn) {
    memset(vn, 0, sizeof(double) * 3 * (size_t)m->nv);
    for (int f = 0; f < m->nf; f++) {
        const int32_t *t = m->faces + 3 * (size_t)f;
        const float *a = m->verts + 3 * (size_t)t[0], *b = m->verts + 3 * (size_t)t[1],
                    *c = m->verts + 3 * (size_t)t[2];
        if (!finite3(a) || !finite3(b) || !finite3(c)) continue;
        /* in double: float differences of huge coordinates would overflow */
        double e1[3] = {(double)b[0] - a[0], (double)b[1] - a[1], (double)b[2] - a[2]};
        double e2[3] = {(double)c[0] - a[0], (double)c[1] - a[1], (double)c[2] - a[2]};
        double n[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2],
                       e1[0] * e2[1] - e1[1] * e2[0]};
        for (int k = 0; k < 3; k++)
            for (int d = 0; d < 3; d++) vn[3 * (size_t)t[k] + d] += n[d];
    }
}

/* Pixel index range [lo, hi] whose centres i+0.5 lie in [a, b], clamped to
 * [0, lim-1]; returns 0 when empty. Clamps in double before converting so huge
 * projections cannot overflow an int. */
static int pixel_span(double a, double b, int lim, int *lo, int *hi) {
    double l = ceil(a - 0.5), r = floor(b - 0.5);
    if (l < 0) l = 0;
    if (r > lim - 1) r = lim - 1;
    if (!(l <= r)) return 0;
    *lo = (int)l;
    *hi = (int)r;
    return 1;
}

/* Edge function of p against a->b; positive on the interior side once the
 * triangle is oriented so that edge(a,b,c) > 0. */
static double edge(const double *a, const double *b, double px, double py) {
    return (b[0] - a[0]) * (py - a[1]) - (b[1] - a[1]) * (px - a[0]);
}

/* Top-left rule in y-down pixel coordinates for that orientation: a top edge
 * is horizontal going +u, a left edge goes -v. */
static int top_left(const double *a, const double *b) {
    double dx = b[0] - a[0], dy = b[1] - a[1];
    return (dy == 0 && dx > 0) || dy < 0;
}

static int covers(double e, int tl) { return e > 0 || (e == 0 && tl); }

/* Rasterizes one triangle with all z >= near into the z-buffer. */
static void raster_tri(raster *r, const rvert *v0, const rvert *v1, const rvert *v2, uint32_t mesh_tag) {
    const rvert *v[3] = {v0, v1, v2};
    double s[3][2], iz[3];
    for (int k = 0; k < 3; k++) {
        iz[k] = 1.0 / v[k]->p[2];
        s[k][0] = r->focal * v[k]->p[0] * iz[k] + r->cx;
        s[k][1] = r->focal * v[k]->p[1] * iz[k] + r->cy;
        if (!isfinite(s[k][0]) || !isfinite(s[k][1]) || !isfinite(iz[k])) return;
    }
    double area = edge(s[0], s[1], s[2][0], s[2][1]);
    if (!isfinite(area) || area == 0) return;
    if (area < 0) { /* orient so the interior is the positive side of every edge */
        const rvert *tv = v[1];
        v[1] = v[2], v[2] = tv;
        double ts[2] = {s[1][0], s[1][1]}, ti = iz[1];
        s[1][0] = s[2][0], s[1][1] = s[2][1], iz[1] = iz[2];
        s[2][0] = ts[0], s[2][1] = ts[1], iz[2] = ti;
        area = -area;
    }
    double umin = fmin(s[0][0], fmin(s[1][0], s[2][0])), umax = fmax(s[0][0], fmax(s[1][0], s[2][0]));
    double vmin = fmin(s[0][1], fmin(s[1][1], s[2][1])), vmax = fmax(s[0][1], fmax(s[1][1], s[2][1]));
    int i0, i1, j0, j1;
    if (!pixel_span(umin - r->x0, umax - r->x0, r->rw, &i0, &i1)) return;
    if (!pixel_span(vmin - r->y0, vmax - r->y0, r->rh, &j0, &j1)) return;

    /* Fallback normal for pixels where the interpolated one vanishes. */
    double e1[3], e2[3];
    for (int d = 0; d < 3; d++) {
        e1[d] = v[1]->p[d] - v[0]->p[d];
        e2[d] = v[2]->p[d] - v[0]->p[d];
    }
    double fn[3] = {e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]};
    double fl = sqrt(fn[0] * fn[0] + fn[1] * fn[1] + fn[2] * fn[2]);
    double fnz = fl > 0 ? fabs(fn[2]) / fl : 1.0;

    int tl0 = top_left(s[1], s[2]), tl1 = top_left(s[2], s[0]), tl2 = top_left(s[0], s[1]);
    double inv_area = 1.0 / area;
    for (int j = j0; j <= j1; j++) {
        double py = r->y0 + j + 0.5;
        for (int i = i0; i <= i1; i++) {
            double px = r->x0 + i + 0.5;
            double w0 = edge(s[1], s[2], px, py), w1 = edge(s[2], s[0], px, py), w2 = edge(s[0], s[1], px, py);
            if (!covers(w0, tl0) || !covers(w1, tl1) || !covers(w2, tl2)) continue;
            /* Screen-space barycentrics weighted by 1/z give perspective-correct
             * interpolation; 1/z itself is linear in screen space. */
            double b0 = w0 * inv_area * iz[0], b1 = w1 * inv_area * iz[1], b2 = w2 * inv_area * iz[2];
            double z_inv = b0 + b1 + b2;
            size_t idx = (size_t)j * (size_t)r->rw + (size_t)i;
            if (!(z_inv > r->invz[idx])) continue;
            double n[3];
            for (int d = 0; d < 3; d++) n[d] = b0 * v[0]->n[d] + b1 * v[1]->n[d] + b2 * v[2]->n[d];
            double nl = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
            double nz = (nl > 1e-30 && isfinite(nl)) ? fabs(n[2]) / nl : fnz;
            double shade = HM_RENDER_AMBIENT + (1.0 - HM_RENDER_AMBIENT) * nz;
            if (shade > 1.0) shade = 1.0;
            r->invz[idx] = (float)z_inv;
            r->tag[idx] = mesh_tag | (uint32_t)(shade * 65535.0 + 0.5);
        }
    }
}

static void lerp_vert(const rvert *a, const rvert *b, double zn, rvert *o) {
    double t = (zn - a->p[2]) / (b->p[2] - a->p[2]);
    for (int d = 0; d < 3; d++) {
        o->p[d] = a->p[d] + t * (b->p[d] - a->p[d]);
        o->n[d] = a->n[d] + t * (b->n[d] - a->n[d]);
    }
    o->p[2] = zn; /* exact, so the clipped vertex never lands behind the plane */
}

/* Clips a triangle to z >= near (Sutherland-Hodgman against one plane gives at
 * most a quad) and rasterizes the result as a fan. */
static void clip_raster(raster *r, const rvert tri[3], uint32_t mesh_tag) {
    const double zn = HM_RENDER_ZNEAR;
    rvert poly[4];
    int np = 0;
    for (int k = 0; k < 3; k++) {
        const rvert *a = &tri[k], *b = &tri[(k + 1) % 3];
        int ain = a->p[2] >= zn, bin = b->p[2] >= zn;
        if (ain) poly[np++] = *a;
        if (ain != bin) lerp_vert(a, b, zn, &poly[np++]);
    }
    for (int k = 1; k + 1 < np; k++) raster_tri(r, &poly[0], &poly[k], &poly[k + 1], mesh_tag);
}

static int check_args(int w, int h, const hm_mesh *meshes, int n, float focal, float cx, float cy) {
    if (w <= 0 || h <= 0) return hm_err(HM_E_ARG, "render: bad image size %dx%d", w, h);
    if (n < 0 || n > HM_RENDER_MAX_MESHES || (n > 0 && !meshes))
        return hm_err(HM_E_ARG, "render: bad mesh count %d", n);
    if (!isfinite(focal) || !(focal > 0) || !isfinite(cx) || !isfinite(cy))
        return hm_err(HM_E_ARG, "render: bad camera (focal %g, centre %g,%g)", focal, cx, cy);
    for (int k = 0; k < n; k++) {
        const hm_mesh *m = &meshes[k];
        if (m->nv < 0 || m->nf < 0 || (m->nv > 0 && !m->verts) || (m->nf > 0 && !m->faces))
            return hm_err(HM_E_ARG, "render: mesh %d has bad sizes or NULL arrays", k);
        for (int d = 0; d < 3; d++)
            if (!(m->color[d] >= 0.0f && m->color[d] <= 1.0f))
                return hm_err(HM_E_ARG, "render: mesh %d colour outside [0,1]", k);
        for (size_t i = 0; i < 3 * (size_t)m->nf; i++)
            if (m->faces[i] < 0 || m->faces[i] >= m->nv)
                return hm_err(HM_E_ARG, "render: mesh %d face %zu references vertex %d of %d", k, i / 3,
                              (int)m->faces[i], m->nv);
    }
    return HM_OK;
}

/* Pixel box that the call can touch: the projections of every face lying
 * wholly in front of the near plane, or the whole image as soon as one face
 * straddles it (its clipped part may project anywhere). Returns 0 if empty. */
static int draw_bounds(const hm_mesh *meshes, int n, double f, double cx, double cy, int w, int h, int *x0,
                       int *y0, int *x1, int *y1) {
    double umin = INFINITY, umax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
    for (int k = 0; k < n; k++) {
        const hm_mesh *m = &meshes[k];
        for (int fi = 0; fi < m->nf; fi++) {
            const int32_t *t = m->faces + 3 * (size_t)fi;
            int front = 0, finite = 1;
            for (int c = 0; c < 3; c++) {
                const float *p = m->verts + 3 * (size_t)t[c];
                finite &= finite3(p);
                front += p[2] >= HM_RENDER_ZNEAR;
            }
            if (!finite || front == 0) continue;
            if (front < 3) {
                umin = vmin = -INFINITY;
                umax = vmax = INFINITY;
                continue;
            }
            for (int c = 0; c < 3; c++) {
                const float *p = m->verts + 3 * (size_t)t[c];
                double u = f * p[0] / p[2] + cx, v = f * p[1] / p[2] + cy;
                umin = fmin(umin, u), umax = fmax(umax, u);
                vmin = fmin(vmin, v), vmax = fmax(vmax, v);
            }
        }
    }
    return pixel_span(umin, umax, w, x0, x1) && pixel_span(vmin, vmax, h, y0, y1);
}

int hm_render_overlay(uint8_t *rgb, int w, int h, const hm_mesh *meshes, int n, float focal, float cx,
                      float cy, float alpha) {
    int rc = check_args(w, h, meshes, n, focal, cx, cy);
    if (rc) return rc;
    if (!rgb) return hm_err(HM_E_ARG, "render: NULL image");
    if (!(alpha >= 0.0f && alpha <= 1.0f)) return hm_err(HM_E_ARG, "render: alpha %g outside [0,1]", alpha);

    int x0, y0, x1, y1;
    if (!draw_bounds(meshes, n, focal, cx, cy, w, h, &x0, &y0, &x1, &y1)) return HM_OK;
    raster r = {focal, cx, cy, x0, y0, x1 - x0 + 1, y1 - y0 + 1, NULL, NULL};
    size_t npix = (size_t)r.rw * (size_t)r.rh;
    int maxnv = 0;
    for (int k = 0; k < n; k++) maxnv = meshes[k].nv > maxnv ? meshes[k].nv : maxnv;
    r.invz = hm_alloc(npix * sizeof(float));
    r.tag = hm_alloc(npix * sizeof(uint32_t));
    double *vn = hm_alloc(sizeof(double) * 3 * (size_t)(maxnv > 0 ? maxnv : 1));
    if (!r.invz || !r.tag || !vn) {
        rc = hm_err(HM_E_NOMEM, "render: out of memory for a %dx%d z-buffer", r.rw, r.rh);
        goto done;
    }
    memset(r.invz, 0, npix * sizeof(float));
    memset(r.tag, 0, npix * sizeof(uint32_t));

    for (int k = 0; k < n; k++) {
        const hm_mesh *m = &meshes[k];
        vertex_normals(m, vn);
        uint32_t mesh_tag = (uint32_t)(k + 1) << 16;
        for (int fi = 0; fi < m->nf; fi++) {
            const int32_t *t = m->faces + 3 * (size_t)fi;
            rvert tri[3];
            int ok = 1;
            for (int c = 0; c < 3; c++) {
                const float *p = m->verts + 3 * (size_t)t[c];
                ok &= finite3(p);
                for (int d = 0; d < 3; d++) {
                    tri[c].p[d] = p[d];
                    tri[c].n[d] = vn[3 * (size_t)t[c] + d];
                }
            }
            if (ok) clip_raster(&r, tri, mesh_tag);
        }
    }

    /* Resolve: blend each covered pixel once, with its nearest surface. */
    for (int j = 0; j < r.rh; j++) {
        for (int i = 0; i < r.rw; i++) {
            uint32_t tg = r.tag[(size_t)j * r.rw + i];
            if (!tg) continue;
            const float *col = meshes[(tg >> 16) - 1].color;
            float shade = (float)(tg & 0xffffu) / 65535.0f;
            uint8_t *px = rgb + 3 * ((size_t)(y0 + j) * (size_t)w + (size_t)(x0 + i));
            for (int d = 0; d < 3; d++) {
                float c = col[d] * shade * 255.0f;
                float o = px[d] + alpha * (c - px[d]) + 0.5f;
                px[d] = (uint8_t)(o < 0 ? 0 : o > 255 ? 255 : o);
            }
        }
    }
done:
    hm_free(r.invz);
    hm_free(r.tag);
    hm_free(vn);
    return rc;
}

void hm_mesh_rotate_y_about(const float *verts, int nv, float degrees, const float *pivot, float *out) {
    double a = degrees * (M_PI / 180.0), c = cos(a), s = sin(a);
    double px = pivot[0], py = pivot[1], pz = pivot[2];
    for (int i = 0; i < nv; i++) {
        double x = verts[3 * i] - px, y = verts[3 * i + 1] - py, z = verts[3 * i + 2] - pz;
        out[3 * i] = (float)(c * x + s * z + px);
        out[3 * i + 1] = (float)(y + py);
        out[3 * i + 2] = (float)(-s * x + c * z + pz);
    }
}

void hm_mesh_rotate_y(const float *verts, int nv, float degrees, float *out) {
    if (nv <= 0) return;
    double m[3] = {0, 0, 0};
    for (int i = 0; i < nv; i++)
        for (int d = 0; d < 3; d++) m[d] += verts[3 * i + d];
    float c[3] = {(float)(m[0] / nv), (float)(m[1] / nv), (float)(m[2] / nv)};
    hm_mesh_rotate_y_about(verts, nv, degrees, c, out);
}

int hm_render_side_view(uint8_t *rgb, int w, int h, const hm_mesh *meshes, int n, float focal, float cx,
                        float cy, float degrees, const float *pivot, const float *bg) {
    int rc = check_args(w, h, meshes, n, focal, cx, cy);
    if (rc) return rc;
    if (!rgb) return hm_err(HM_E_ARG, "render: NULL image");
    if (!isfinite(degrees)) return hm_err(HM_E_ARG, "render: bad side-view angle");
    static const float white[3] = {1, 1, 1};
    if (!bg) bg = white;
    uint8_t fill[3];
    for (int d = 0; d < 3; d++) {
        if (!(bg[d] >= 0.0f && bg[d] <= 1.0f)) return hm_err(HM_E_ARG, "render: background outside [0,1]");
        fill[d] = (uint8_t)(bg[d] * 255.0f + 0.5f);
    }
    for (size_t i = 0; i < (size_t)w * (size_t)h; i++) memcpy(rgb + 3 * i, fill, 3);

    size_t total = 0;
    double m[3] = {0, 0, 0};
    for (int k = 0; k < n; k++) {
        total += (size_t)meshes[k].nv;
        for (int i = 0; i < meshes[k].nv; i++)
            for (int d = 0; d < 3; d++) m[d] += meshes[k].verts[3 * (size_t)i + d];
    }
    if (total == 0) return HM_OK;
    float c[3];
    for (int d = 0; d < 3; d++) c[d] = pivot ? pivot[d] : (float)(m[d] / (double)total);

    float *rot = hm_alloc(sizeof(float) * 3 * total);
    hm_mesh *rm = hm_alloc(sizeof(hm_mesh) * (size_t)n);
    if (!rot || !rm) {
        hm_free(rot);
        hm_free(rm);
        return hm_err(HM_E_NOMEM, "render: out of memory for the side view");
    }
    size_t off = 0;
    for (int k = 0; k < n; k++) {
        rm[k] = meshes[k];
        rm[k].verts = rot + 3 * off;
        hm_mesh_rotate_y_about(meshes[k].verts, meshes[k].nv, degrees, c, rot + 3 * off);
        off += (size_t)meshes[k].nv;
    }
    rc = hm_render_overlay(rgb, w, h, rm, n, focal, cx, cy, 1.0f);
    hm_free(rot);
    hm_free(rm);
    return rc;
}
