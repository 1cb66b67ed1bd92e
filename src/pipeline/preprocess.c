/* preprocess.c - hand crops: the official blur + affine warp, and the
 * grey-padded square + Pillow bilinear resize. See preprocess.h for the
 * definitions; the comments here say which library behaviour each step
 * replays and why the arithmetic is written the way it is.
 *
 * Floating-point expressions are written in the reference's evaluation
 * order; contraction into fused multiply-adds would change roundings, so it
 * is switched off for this file.
 */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "pipeline/preprocess.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "model/model.h"

#define N HAMER_CROP_H  /* side of the square patch */
#define OW HAMER_CROP_W /* its centre columns, the crop */
#define X_OFF ((N - OW) / 2) /* first kept column of the square patch */

/* The demo's per-channel float32 constants: 255*mean and 255*std computed
 * in float64 (DEFAULT_MEAN = 255. * np.array(...)), then used by float32
 * array arithmetic, which rounds them to float32. */
static void norm_consts(float m[3], float s[3]) {
    for (int c = 0; c < 3; c++) {
        m[c] = (float)(255.0 * hm_norm_mean[c]);
        s[c] = (float)(255.0 * hm_norm_std[c]);
    }
}

int hm_box_check(const hm_box *b, int w, int h) {
    if (!b) return hm_err(HM_E_ARG, "NULL box");
    if (w <= 0 || h <= 0) return hm_err(HM_E_ARG, "empty image (%dx%d)", w, h);
    const double x1 = b->x1, y1 = b->y1, x2 = b->x2, y2 = b->y2;
    if (!isfinite(x1) || !isfinite(y1) || !isfinite(x2) || !isfinite(y2))
        return hm_err(HM_E_ARG, "box (%g,%g,%g,%g) has a coordinate that is not a finite number", x1, y1, x2, y2);
    if (!(x2 > x1) || !(y2 > y1))
        return hm_err(HM_E_ARG, "box (%g,%g,%g,%g) has zero or negative %s", x1, y1, x2, y2,
                      !(x2 > x1) ? "width (x2 <= x1)" : "height (y2 <= y1)");
    if (x2 <= 0 || y2 <= 0 || x1 >= w || y1 >= h)
        return hm_err(HM_E_ARG, "box (%g,%g,%g,%g) lies entirely outside the %dx%d image", x1, y1, x2, y2, w, h);
    const double lim = 16.0 * (w > h ? w : h);
    if (x2 - x1 > lim || y2 - y1 > lim)
        return hm_err(HM_E_ARG, "box (%g,%g,%g,%g) is more than 16 times the size of the %dx%d image", x1, y1, x2,
                      y2, w, h);
    return HM_OK;
}

/* ------------------------------------------------------------------------ */
/* Box geometry, as ViTDetDataset computes it                               */
/* ------------------------------------------------------------------------ */

/* bbox_size: scale = rescale*(p2-p1)/200 in float32 (NumPy keeps the
 * float32 array type against Python scalars), then expand_to_aspect_ratio
 * (scale*200, [192, 256]).max(): the comparison h/w < 256/192 in float32 vs
 * float64, and w*256/192 in float64 (a float32 scalar times a Python int
 * promotes). */
static double official_box_size(const hm_box *b, double rescale) {
    const float r = (float)rescale;
    float w = r * (b->x2 - b->x1), h = r * (b->y2 - b->y1);
    w = w / 200.0f;
    h = h / 200.0f;
    w = w * 200.0f;
    h = h * 200.0f;
    if ((double)(h / w) < (double)N / OW) {
        double hn = (double)w * N / OW;
        if (h > hn) hn = h;
        return hn > w ? hn : w;
    }
    double wn = (double)h * OW / N;
    if (w > wn) wn = w;
    return h > wn ? h : wn;
}

/* ------------------------------------------------------------------------ */
/* OpenCV getAffineTransform + warpAffine's inverse                          */
/* ------------------------------------------------------------------------ */

/* cv::hal::LU64f (LUImpl): Gaussian elimination with partial pivoting on a
 * row-major m x m system with one right-hand side; 0 if singular. */
static int cv_lu(double *A, int m, double *b) {
    const double eps = DBL_EPSILON * 100;
    for (int i = 0; i < m; i++) {
        int k = i;
        for (int j = i + 1; j < m; j++)
            if (fabs(A[j * m + i]) > fabs(A[k * m + i])) k = j;
        if (fabs(A[k * m + i]) < eps) return 0;
        if (k != i) {
            for (int j = i; j < m; j++) {
                double t = A[i * m + j];
                A[i * m + j] = A[k * m + j];
                A[k * m + j] = t;
            }
            double t = b[i];
            b[i] = b[k];
            b[k] = t;
        }
        double d = -1 / A[i * m + i];
        for (int j = i + 1; j < m; j++) {
            double alpha = A[j * m + i] * d;
            for (k = i + 1; k < m; k++) A[j * m + k] += alpha * A[i * m + k];
            b[j] += alpha * b[i];
        }
    }
    for (int i = m - 1; i >= 0; i--) {
        double s = b[i];
        for (int k = i + 1; k < m; k++) s -= A[i * m + k] * b[k];
        b[i] = s / A[i * m + i];
    }
    return 1;
}

/* gen_trans_from_patch_cv(c, bb, bb, 256, 256, scale 1, rot 0) followed by
 * the inversion at the top of cv::warpAffine: M maps patch pixels to source
 * pixels. The three source points are float32 (np.float32 arrays); their
 * offsets are float32(bb/2) added in float64. */
static int official_inverse_map(double cx, float cy, double bb, double M[6]) {
    const float half = (float)(bb * 0.5);
    const float src[3][2] = {{(float)cx, cy}, {(float)cx, (float)((double)cy + half)}, {(float)(cx + half), cy}};
    const float dst[3][2] = {{N / 2, N / 2}, {N / 2, N}, {N, N / 2}};
    double A[36] = {0};
    for (int i = 0; i < 3; i++) {
        double *r0 = A + 12 * i, *r1 = r0 + 6;
        r0[0] = r1[3] = src[i][0];
        r0[1] = r1[4] = src[i][1];
        r0[2] = r1[5] = 1;
        M[2 * i] = dst[i][0];
        M[2 * i + 1] = dst[i][1];
    }
    if (!cv_lu(A, 6, M)) return 0;
    double D = M[0] * M[4] - M[1] * M[3];
    D = D != 0 ? 1. / D : 0;
    double A11 = M[4] * D, A22 = M[0] * D;
    M[0] = A11;
    M[1] *= -D;
    M[3] *= -D;
    M[4] = A22;
    double b1 = -M[0] * M[2] - M[1] * M[5];
    double b2 = -M[3] * M[2] - M[4] * M[5];
    M[2] = b1;
    M[5] = b2;
    return 1;
}

/* cvRound in 64 bits (OpenCV's int conversion, without its 32-bit
 * saturation: the box limits keep these far below 2^53). */
static int64_t round64(double v) {
    if (!(v > -1e15)) v = -1e15;
    if (!(v < 1e15)) v = 1e15;
    return (int64_t)llrint(v);
}

/* Floor division by 2^s (an arithmetic right shift, spelled portably). */
static int64_t shr_floor(int64_t v, int s) { return v >= 0 ? v >> s : -((-v - 1) >> s) - 1; }

/* Source sample positions for patch rows 0..255 and kept columns
 * X_OFF..X_OFF+191, in 1/32 pixel: warpAffine's
 *   X = (rint((M1*y + M2)*1024) + 16 + rint(M0*x*1024)) >> 5
 * (likewise Y), then integer part X >> 5 and table index X & 31. */
typedef struct {
    int64_t x0[N], y0[N];  /* per patch row */
    int64_t ax[OW], ay[OW]; /* per kept column */
} warp_coords;

static void warp_coords_init(const double M[6], warp_coords *wc) {
    for (int y = 0; y < N; y++) {
        wc->x0[y] = round64((M[1] * y + M[2]) * 1024) + 16;
        wc->y0[y] = round64((M[4] * y + M[5]) * 1024) + 16;
    }
    for (int j = 0; j < OW; j++) {
        int x = j + X_OFF;
        wc->ax[j] = round64(M[0] * x * 1024);
        wc->ay[j] = round64(M[3] * x * 1024);
    }
}

/* ------------------------------------------------------------------------ */
/* scikit-image gaussian (scipy.ndimage.gaussian_filter), at chosen pixels   */
/* ------------------------------------------------------------------------ */

/* NumPy's float64 add.reduce over a contiguous array: pairwise summation
 * with 8 accumulators below 128 elements. */
static double np_pairwise_sum(const double *a, int64_t n) {
    if (n < 8) {
        double r = 0.;
        for (int64_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        int64_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int64_t n2 = n / 2;
    n2 -= n2 % 8;
    return np_pairwise_sum(a, n2) + np_pairwise_sum(a + n2, n - n2);
}

/* Half of scipy's symmetric kernel: w[k] for offsets 0..r, and tail[k] =
 * w[k] + ... + w[r] (summed from the outside in). */
typedef struct {
    int r;
    double *w, *tail;
} gauss_kernel;

/* _gaussian_kernel1d(sigma, 0, r) with r = int(4*sigma + 0.5):
 * phi = exp(-0.5/sigma^2 * x^2) over x = -r..r, divided by its NumPy sum. */
static int gauss_kernel_init(double sigma, gauss_kernel *k) {
    int r = (int)(4.0 * sigma + 0.5);
    double *phi = hm_alloc(sizeof(double) * (2 * (size_t)r + 1));
    k->w = hm_alloc(sizeof(double) * ((size_t)r + 2) * 2);
    if (!phi || !k->w) {
        hm_free(phi);
        hm_free(k->w);
        return HM_E_NOMEM;
    }
    k->tail = k->w + r + 2;
    k->r = r;
    const double c = -0.5 / (sigma * sigma);
    for (int i = 0; i <= 2 * r; i++) {
        int64_t x = i - r;
        phi[i] = exp(c * (double)(x * x));
    }
    const double sum = np_pairwise_sum(phi, 2 * (int64_t)r + 1);
    for (int i = 0; i <= r; i++) k->w[i] = phi[r + i] / sum;
    k->tail[r + 1] = 0;
    for (int i = r; i >= 1; i--) k->tail[i] = k->tail[i + 1] + k->w[i];
    hm_free(phi);
    return HM_OK;
}

/* When the kernel reaches this many offsets past both ends of a line, the
 * offsets where both neighbours are the clamped end values are summed as
 * (first + last) * tail instead of one by one. Below it the sum is scipy's,
 * term by term; above, it differs from scipy by rounding only (relative
 * 1e-15), and a huge blur on a small image stays cheap. */
#define GAUSS_COLLAPSE 256

/* One output of scipy's correlate1d (symmetric branch, mode 'nearest') at
 * position p of a line of n samples, 3 interleaved channels: out = v[p]*w0,
 * then for k = r down to 1: out += (v[p-k] + v[p+k]) * w[k], indices
 * clamped to [0, n). The caller holds samples lo..hi at v[3*(i-lo)], which
 * must cover every index reached (with the collapse: 0 and n-1). */
static void gauss_point(const double *v, int64_t lo, int64_t n, int64_t p, const gauss_kernel *g, double out[3]) {
    const int64_t far = (p > n - 1 - p ? p : n - 1 - p) + 1; /* first offset clamped on both sides */
    int64_t k = g->r;
    for (int c = 0; c < 3; c++) out[c] = v[3 * (p - lo) + c] * g->w[0];
    if (k - far + 1 > GAUSS_COLLAPSE) {
        for (int c = 0; c < 3; c++) out[c] += (v[3 * (0 - lo) + c] + v[3 * (n - 1 - lo) + c]) * g->tail[far];
        k = far - 1;
    }
    for (; k >= 1; k--) {
        const int64_t a = p - k < 0 ? 0 : p - k, b = p + k > n - 1 ? n - 1 : p + k;
        const double wk = g->w[k];
        for (int c = 0; c < 3; c++) out[c] += (v[3 * (a - lo) + c] + v[3 * (b - lo) + c]) * wk;
    }
}

/* The blurred image (float64, 3 channels) at the rows rows[0..nr) and the
 * columns cols[0..nc) (original, unmirrored coordinates, each ascending),
 * into out[(i*nc + j)*3 + c]. gaussian_filter filters axis 0 (down the
 * columns) first and axis 1 second, storing float64 in between; both
 * passes are evaluated only where the second needs them. */
static int blur_points(const hm_image *img, const gauss_kernel *g, const int *rows, int nr, const int *cols, int nc,
                       double *out) {
    const int64_t W = img->w, H = img->h, r = g->r;
    if (nr == 0 || nc == 0) return HM_OK;
    /* the second pass reads the first at cols +- r, clamped; when it
     * collapses a tail it needs both row ends, and then r reaches past
     * both anyway, so [lo, hi] covers them */
    const int64_t lo = cols[0] - r < 0 ? 0 : cols[0] - r;
    const int64_t hi = cols[nc - 1] + r > W - 1 ? W - 1 : cols[nc - 1] + r;
    double *line = hm_alloc(sizeof(double) * 3 * (size_t)(hi - lo + 1));
    if (!line) return HM_E_NOMEM;
    const size_t stride = (size_t)W * 3;
    for (int i = 0; i < nr; i++) {
        const int64_t y = rows[i];
        const int64_t far = (y > H - 1 - y ? y : H - 1 - y) + 1;
        /* axis 0 at (y, x), x in [lo, hi]: the uint8 image read as float64,
         * whole row segments at a time (each element still gets its terms
         * in scipy's order) */
        const size_t n3 = (size_t)(hi - lo + 1) * 3;
        const uint8_t *base = img->rgb + (size_t)lo * 3;
        const uint8_t *row = base + (size_t)y * stride;
        for (size_t e = 0; e < n3; e++) line[e] = (double)row[e] * g->w[0];
        int64_t k = r;
        if (k - far + 1 > GAUSS_COLLAPSE) {
            const uint8_t *ra = base, *rb = base + (size_t)(H - 1) * stride;
            const double t = g->tail[far];
            for (size_t e = 0; e < n3; e++) line[e] += ((double)ra[e] + (double)rb[e]) * t;
            k = far - 1;
        }
        for (; k >= 1; k--) {
            const int64_t a = y - k < 0 ? 0 : y - k, b = y + k > H - 1 ? H - 1 : y + k;
            const uint8_t *ra = base + (size_t)a * stride, *rb = base + (size_t)b * stride;
            const double wk = g->w[k];
            for (size_t e = 0; e < n3; e++) line[e] += ((double)ra[e] + (double)rb[e]) * wk;
        }
        /* axis 1 at the wanted columns */
        for (int j = 0; j < nc; j++) gauss_point(line, lo, W, cols[j], g, out + ((size_t)i * nc + j) * 3);
    }
    hm_free(line);
    return HM_OK;
}

/* ------------------------------------------------------------------------ */
/* Warp mode                                                                 */
/* ------------------------------------------------------------------------ */

/* Bilinear weights of table entry (fy, fx), 1/32 steps, corners in the
 * order (x,y), (x+1,y), (x,y+1), (x+1,y+1): OpenCV's BilinearTab_f entries
 * are (1 - fy/32 or fy/32) * (1 - fx/32 or fx/32), exact in float, and its
 * uint8 table holds the same times 32768. */
static void bilinear_weights(int fx, int fy, int wi[4], double wf[4]) {
    const int ax[2] = {32 - fx, fx}, ay[2] = {32 - fy, fy};
    for (int k1 = 0; k1 < 2; k1++)
        for (int k2 = 0; k2 < 2; k2++) {
            wi[k1 * 2 + k2] = ay[k1] * ax[k2] * 32;
            wf[k1 * 2 + k2] = (double)(ay[k1] * ax[k2]) / 1024.0;
        }
}

static int crop_warp(const hm_image *img, const hm_box *box, double rescale, float *out, hm_crop_info *info) {
    const int W = img->w, H = img->h, left = !box->is_right;
    const float cx = (box->x2 + box->x1) / 2.0f, cy = (box->y2 + box->y1) / 2.0f;
    const double bb = official_box_size(box, rescale);
    const double df = bb / N / 2.0;
    /* the mirrored image's centre: img_width - c_x - 1 in float64 */
    const double cxm = left ? (double)W - (double)cx - 1.0 : (double)cx;
    double M[6];
    if (!official_inverse_map(cxm, cy, bb, M))
        return hm_err(HM_E_ARG, "box (%g,%g,%g,%g) is too small to crop (degenerate transform)", box->x1, box->y1,
                      box->x2, box->y2);
    warp_coords *wc = hm_alloc(sizeof *wc);
    if (!wc) return HM_E_NOMEM;
    warp_coords_init(M, wc);

    float m[3], s[3];
    norm_consts(m, s);
    const size_t plane = (size_t)N * OW;
    int rc = HM_OK;

    if (!(df > 1.1)) {
        /* uint8 source: integer weights, (sum + 2^14) >> 15 */
        for (int y = 0; y < N; y++) {
            for (int j = 0; j < OW; j++) {
                const int64_t X = shr_floor(wc->x0[y] + wc->ax[j], 5), Y = shr_floor(wc->y0[y] + wc->ay[j], 5);
                const int64_t sx = shr_floor(X, 5), sy = shr_floor(Y, 5);
                int wi[4];
                double wf[4];
                bilinear_weights((int)(X & 31), (int)(Y & 31), wi, wf);
                const uint8_t *p[4] = {NULL, NULL, NULL, NULL};
                for (int k = 0; k < 4; k++) {
                    const int64_t xx = sx + (k & 1), yy = sy + (k >> 1);
                    if (xx >= 0 && xx < W && yy >= 0 && yy < H)
                        p[k] = img->rgb + ((size_t)yy * W + (size_t)(left ? W - 1 - xx : xx)) * 3;
                }
                for (int c = 0; c < 3; c++) {
                    int sum = 1 << 14;
                    for (int k = 0; k < 4; k++)
                        if (p[k]) sum += p[k][c] * wi[k];
                    const float v = (float)(sum >> 15);
                    out[c * plane + (size_t)y * OW + j] = (v - m[c]) / s[c];
                }
            }
        }
    } else {
        /* blurred float64 source: the rows and columns the warp reads */
        gauss_kernel g = {0, NULL, NULL};
        uint8_t *mark_r = calloc((size_t)H, 1), *mark_c = calloc((size_t)W, 1);
        int *ridx = malloc(sizeof(int) * (size_t)H), *cidx = malloc(sizeof(int) * (size_t)W);
        int *rows = malloc(sizeof(int) * (size_t)H), *cols = malloc(sizeof(int) * (size_t)W);
        double *vals = NULL;
        int nr = 0, nc = 0;
        rc = gauss_kernel_init((df - 1) / 2, &g);
        if (rc || !mark_r || !mark_c || !ridx || !cidx || !rows || !cols) {
            rc = HM_E_NOMEM;
            goto blur_done;
        }
        for (int y = 0; y < N; y++)
            for (int j = 0; j < OW; j++) {
                const int64_t X = shr_floor(wc->x0[y] + wc->ax[j], 5), Y = shr_floor(wc->y0[y] + wc->ay[j], 5);
                const int64_t sx = shr_floor(X, 5), sy = shr_floor(Y, 5);
                for (int k = 0; k < 2; k++) {
                    const int64_t yy = sy + k, xx = sx + k;
                    if (yy >= 0 && yy < H) mark_r[yy] = 1;
                    if (xx >= 0 && xx < W) mark_c[left ? W - 1 - xx : xx] = 1;
                }
            }
        for (int y = 0; y < H; y++)
            if (mark_r[y]) ridx[y] = nr, rows[nr++] = y;
        for (int x = 0; x < W; x++)
            if (mark_c[x]) cidx[x] = nc, cols[nc++] = x;
        vals = hm_alloc(sizeof(double) * 3 * ((size_t)nr * nc + 1));
        if (!vals) {
            rc = HM_E_NOMEM;
            goto blur_done;
        }
        rc = blur_points(img, &g, rows, nr, cols, nc, vals);
        if (rc) goto blur_done;
        for (int y = 0; y < N; y++) {
            for (int j = 0; j < OW; j++) {
                const int64_t X = shr_floor(wc->x0[y] + wc->ax[j], 5), Y = shr_floor(wc->y0[y] + wc->ay[j], 5);
                const int64_t sx = shr_floor(X, 5), sy = shr_floor(Y, 5);
                int wi[4];
                double wf[4];
                bilinear_weights((int)(X & 31), (int)(Y & 31), wi, wf);
                const double *p[4] = {NULL, NULL, NULL, NULL};
                for (int k = 0; k < 4; k++) {
                    const int64_t xx = sx + (k & 1), yy = sy + (k >> 1);
                    if (xx >= 0 && xx < W && yy >= 0 && yy < H)
                        p[k] = vals + ((size_t)ridx[yy] * nc + cidx[left ? W - 1 - xx : xx]) * 3;
                }
                for (int c = 0; c < 3; c++) {
                    /* remapBilinear<double>: v0*w0 + v1*w1 + v2*w2 + v3*w3,
                     * outside pixels the zero border */
                    double t = (p[0] ? p[0][c] : 0.0) * wf[0];
                    t += (p[1] ? p[1][c] : 0.0) * wf[1];
                    t += (p[2] ? p[2][c] : 0.0) * wf[2];
                    t += (p[3] ? p[3][c] : 0.0) * wf[3];
                    const float v = (float)t;
                    out[c * plane + (size_t)y * OW + j] = (v - m[c]) / s[c];
                }
            }
        }
    blur_done:
        hm_free(g.w);
        hm_free(vals);
        free(mark_r);
        free(mark_c);
        free(ridx);
        free(cidx);
        free(rows);
        free(cols);
    }
    hm_free(wc);
    if (rc == HM_E_NOMEM) return hm_err(HM_E_NOMEM, "out of memory blurring the %dx%d image", W, H);
    if (rc) return rc;
    if (info) {
        info->cx = cx;
        info->cy = cy;
        info->size = bb;
    }
    return HM_OK;
}

/* ------------------------------------------------------------------------ */
/* Pad mode: Pillow 9.4 ImagingResample, BILINEAR, 8 bits per channel        */
/* ------------------------------------------------------------------------ */

#define PIL_BITS 22 /* PRECISION_BITS = 32 - 8 - 2 */

static inline uint8_t pil_clip8(int64_t v) {
    if (v >= ((int64_t)1 << PIL_BITS << 8)) return 255;
    if (v <= 0) return 0;
    return (uint8_t)(v >> PIL_BITS);
}

/* One output index's taps after Pillow's precompute_coeffs and
 * normalize_coeffs_8bpc, split by the image: taps lo..hi-1 (crop
 * coordinates) fall inside the image and keep their coefficients; the
 * others only contribute grey, so only their sum is kept. Integer sums do
 * not depend on order, so this is exact. */
typedef struct {
    int64_t lo, hi; /* inside taps, crop coordinates */
    int32_t *k;     /* hi - lo coefficients */
    int64_t kout;   /* sum of the outside taps' coefficients */
} pil_taps;

/* inSize n -> 256 outputs; `off` = the crop's position in the image along
 * this axis, `lim` = the image size along it. */
static int pil_taps_init(int64_t n, int64_t off, int64_t lim, int xx, pil_taps *t) {
    const float in0 = 0.0f, in1 = (float)n;
    double scale = (double)(in1 - in0) / N, filterscale = scale;
    if (filterscale < 1.0) filterscale = 1.0;
    const double support = 1.0 * filterscale;
    const double center = in0 + (xx + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = (int64_t)(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = (int64_t)(center + support + 0.5);
    if (xmax > n) xmax = n;
    xmax -= xmin;
    /* first pass: the normalising sum, in Pillow's order */
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; x++) {
        double a = ((double)(x + xmin) - center + 0.5) * ss;
        if (a < 0.0) a = -a;
        ww += a < 1.0 ? 1.0 - a : 0.0;
    }
    int64_t lo = xmin, hi = xmin + xmax;
    if (lo < -off) lo = -off;
    if (hi > lim - off) hi = lim - off;
    if (hi < lo) hi = lo;
    t->lo = lo;
    t->hi = hi;
    t->kout = 0;
    t->k = malloc(sizeof(int32_t) * (size_t)(hi - lo + 1));
    if (!t->k) return HM_E_NOMEM;
    for (int64_t x = 0; x < xmax; x++) {
        double a = ((double)(x + xmin) - center + 0.5) * ss;
        if (a < 0.0) a = -a;
        double w = a < 1.0 ? 1.0 - a : 0.0;
        if (ww != 0.0) w /= ww;
        const int32_t kv = w < 0 ? (int32_t)(-0.5 + w * (1 << PIL_BITS)) : (int32_t)(0.5 + w * (1 << PIL_BITS));
        const int64_t pos = x + xmin;
        if (pos >= lo && pos < hi) t->k[pos - lo] = kv;
        else t->kout += kv;
    }
    return HM_OK;
}

static int crop_pad(const hm_image *img, const hm_box *box, double rescale, float *out, hm_crop_info *info) {
    const int W = img->w, H = img->h, left = !box->is_right;
    const float cx = (box->x2 + box->x1) / 2.0f, cy = (box->y2 + box->y1) / 2.0f;
    const double bb = official_box_size(box, rescale);
    int64_t n = (int64_t)floor(bb + 0.5);
    if (n < 1) n = 1;
    const int64_t x0 = (int64_t)floor((double)cx - 0.5 * (double)n + 0.5);
    const int64_t y0 = (int64_t)floor((double)cy - 0.5 * (double)n + 0.5);
    const uint8_t grey[3] = {HM_CROP_PAD_GREY_R, HM_CROP_PAD_GREY_G, HM_CROP_PAD_GREY_B};

    pil_taps hx[OW], vy[N];
    memset(hx, 0, sizeof hx);
    memset(vy, 0, sizeof vy);
    uint8_t *tmp = NULL;
    int rc = HM_OK;
    /* kept output column j is column xx = 32 + j of the 256-wide resize;
     * mirrored, it is column 255 - (32 + j) */
    for (int j = 0; j < OW && !rc; j++) rc = pil_taps_init(n, x0, W, left ? N - 1 - (X_OFF + j) : X_OFF + j, &hx[j]);
    for (int y = 0; y < N && !rc; y++) rc = pil_taps_init(n, y0, H, y, &vy[y]);
    if (rc) goto done;

    /* horizontal pass on the crop rows inside the image that the vertical
     * pass reads (grey rows are all alike: one row, `grow`) */
    int64_t rlo = INT64_MAX, rhi = INT64_MIN;
    for (int y = 0; y < N; y++)
        if (vy[y].hi > vy[y].lo) {
            if (vy[y].lo < rlo) rlo = vy[y].lo;
            if (vy[y].hi > rhi) rhi = vy[y].hi;
        }
    const int64_t nrows = rhi > rlo ? rhi - rlo : 0;
    tmp = malloc((size_t)(nrows + 1) * OW * 3);
    if (!tmp) {
        rc = HM_E_NOMEM;
        goto done;
    }
    uint8_t *grow = tmp + (size_t)nrows * OW * 3;
    for (int j = 0; j < OW; j++) {
        const pil_taps *t = &hx[j];
        int64_t kall = t->kout;
        for (int64_t x = t->lo; x < t->hi; x++) kall += t->k[x - t->lo];
        for (int c = 0; c < 3; c++) grow[j * 3 + c] = pil_clip8(((int64_t)1 << (PIL_BITS - 1)) + grey[c] * kall);
    }
    for (int64_t i = 0; i < nrows; i++) {
        const uint8_t *src = img->rgb + (size_t)(y0 + rlo + i) * W * 3;
        uint8_t *dst = tmp + (size_t)i * OW * 3;
        for (int j = 0; j < OW; j++) {
            const pil_taps *t = &hx[j];
            for (int c = 0; c < 3; c++) {
                int64_t acc = ((int64_t)1 << (PIL_BITS - 1)) + (int64_t)grey[c] * t->kout;
                const uint8_t *p = src + (size_t)(x0 + t->lo) * 3 + c;
                for (int64_t x = 0; x < t->hi - t->lo; x++) acc += (int64_t)p[x * 3] * t->k[x];
                dst[j * 3 + c] = pil_clip8(acc);
            }
        }
    }
    /* vertical pass */
    float m[3], s[3];
    norm_consts(m, s);
    const size_t plane = (size_t)N * OW;
    for (int y = 0; y < N; y++) {
        const pil_taps *t = &vy[y];
        for (int j = 0; j < OW; j++)
            for (int c = 0; c < 3; c++) {
                int64_t acc = ((int64_t)1 << (PIL_BITS - 1)) + (int64_t)grow[j * 3 + c] * t->kout;
                for (int64_t i = t->lo; i < t->hi; i++)
                    acc += (int64_t)tmp[(size_t)(i - rlo) * OW * 3 + j * 3 + c] * t->k[i - t->lo];
                const float v = (float)pil_clip8(acc);
                out[c * plane + (size_t)y * OW + j] = (v - m[c]) / s[c];
            }
    }
    if (info) {
        info->cx = (double)x0 - 0.5 + (left ? 127.5 : 128.5) * (double)n / N;
        info->cy = (double)y0 - 0.5 + 128.5 * (double)n / N;
        info->size = (double)n;
    }
done:
    for (int j = 0; j < OW; j++) free(hx[j].k);
    for (int y = 0; y < N; y++) free(vy[y].k);
    free(tmp);
    if (rc == HM_E_NOMEM) return hm_err(HM_E_NOMEM, "out of memory resizing a %lld-pixel square crop", (long long)n);
    return rc;
}

/* ------------------------------------------------------------------------ */

int hm_crop(const hm_image *img, const hm_box *box, double rescale, hm_crop_mode mode, float *out,
            hm_crop_info *info) {
    if (!img || !img->rgb || !box || !out) return hm_err(HM_E_ARG, "hm_crop: NULL argument");
    if (!(rescale > 0) || !(rescale <= HM_CROP_RESCALE_MAX))
        return hm_err(HM_E_ARG, "rescale factor %g is outside (0, %g]", rescale, HM_CROP_RESCALE_MAX);
    int rc = hm_box_check(box, img->w, img->h);
    if (rc) return rc;
    if (mode == HM_CROP_WARP) return crop_warp(img, box, rescale, out, info);
    if (mode == HM_CROP_PAD) return crop_pad(img, box, rescale, out, info);
    return hm_err(HM_E_ARG, "unknown crop mode %d", (int)mode);
}

int hm_crop_to_u8(const float *crop, uint8_t *out) {
    if (!crop || !out) return hm_err(HM_E_ARG, "hm_crop_to_u8: NULL argument");
    float m[3], s[3];
    norm_consts(m, s);
    const size_t plane = (size_t)N * OW;
    for (int y = 0; y < N; y++)
        for (int j = 0; j < OW; j++)
            for (int c = 0; c < 3; c++) {
                double v = (double)crop[c * plane + (size_t)y * OW + j] * s[c] + m[c];
                v = floor(v + 0.5);
                out[((size_t)y * OW + j) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return HM_OK;
}
