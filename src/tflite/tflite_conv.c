/* tflite/tflite_conv.c - CONV_2D, FULLY_CONNECTED (packed GEMM) and
 * DEPTHWISE_CONV_2D, NHWC fp32.
 *
 * CONV_2D is a GEMM of the (im2col'd) input [N*OH*OW, KH*KW*C] with the
 * filter packed at load; a 1x1 stride-1 convolution reads the input as it
 * is. Large GEMMs are split here into row chunks, one task each, so the
 * fused activation runs on a chunk while it is still in cache; small ones
 * go to the GEMM's own split over output panels.
 */
#include <stdatomic.h>
#include <string.h>

#include "core/util.h"
#include "tflite/tflite_impl.h"

/* Rows of one chunk task. */
#define CHUNK_ROWS 192

/* The one place hm_gemm is called. C[M, N] = A[M, K] . W^T + bias. */
static int tfl_gemm(hm_pool *pool, int M, const float *A, int lda, const hm_packed *W, float *C, int ldc) {
    return hm_gemm(pool, M, A, lda, W, C, ldc, HM_EPI_STORE);
}

typedef struct {
    const hm_tfl_model *m;
    const hm_tfl_op *op;
    const float *x;               /* the input to im2col, or NULL when col is the input */
    const float *res, *alpha;     /* the fused epilogue's operands or NULL */
    float *y, *col;
    int H, W, C, OH, OW, O, K, rows;
    atomic_int rc;
} conv_job;

/* im2col of GEMM rows [r0, r1) (row = one output pixel (n, oy, ox)): K
 * values each, in (ky, kx, c) order, zeros where the window leaves the
 * input. */
static void im2col_rows(const conv_job *j, int r0, int r1, float *dst) {
    const hm_tfl_op *op = j->op;
    size_t C = (size_t)j->C, seg = (size_t)op->kw * C, K = (size_t)j->K;
    const hm_kernels *k = j->m->k;
    int ox = r0 % j->OW, oy = r0 / j->OW % j->OH, n = r0 / j->OW / j->OH;
    /* the output columns [oxa, oxb) whose windows lie inside along x */
    const int sw = op->stride_w, pl = op->pad_left;
    int oxa, oxb;
    hm_inside_cols(j->W, j->OW, op->kw, sw, pl, &oxa, &oxb);
    for (int r = r0; r < r1;) {
        int ix0 = ox * sw - pl;
        if (ox >= oxa && ox < oxb) {
            /* a run of such pixels along the row: for each ky, their window
             * rows are segments of one input row sw * C floats apart (a
             * stem convolution's are a few floats each: one strided copy
             * instead of a call per segment) */
            int run = oxb - ox;
            if (run > r1 - r) run = r1 - r;
            for (int ky = 0; ky < op->kh; ky++) {
                int iy = oy * op->stride_h - op->pad_top + ky;
                const float *src = iy < 0 || iy >= j->H ? NULL : j->x + (((size_t)n * j->H + iy) * j->W + ix0) * C;
                k->copy_strided(dst + ky * seg, K, src, (size_t)sw * C, seg, run);
            }
            dst += (size_t)run * K;
            r += run;
            ox += run;
        } else {
            int inside_x = ix0 >= 0 && ix0 + op->kw <= j->W;
            for (int ky = 0; ky < op->kh; ky++) {
                int iy = oy * op->stride_h - op->pad_top + ky;
                if (iy < 0 || iy >= j->H) {
                    k->copy(dst, NULL, seg);
                    dst += seg;
                    continue;
                }
                const float *src = j->x + ((size_t)n * j->H + iy) * j->W * C;
                if (inside_x) { /* the window's row is contiguous in NHWC */
                    k->copy(dst, src + (size_t)ix0 * C, seg);
                    dst += seg;
                    continue;
                }
                for (int kx = 0; kx < op->kw; kx++, dst += C) {
                    int ix = ix0 + kx;
                    k->copy(dst, ix < 0 || ix >= j->W ? NULL : src + (size_t)ix * C, C);
                }
            }
            r++;
            ox++;
        }
        if (ox == j->OW) {
            ox = 0;
            if (++oy == j->OH) oy = 0, n++;
        }
    }
}

/* Rows [r0, r0 + n) of y (N channels): the op's activation, then the fused
 * ADD (+ its activation) and PRELU, while the rows are in cache. */
static void epilogue(const conv_job *j, size_t r0, size_t n, int N) {
    const hm_tfl_op *op = j->op;
    float *y = j->y + r0 * N;
    size_t len = n * N;
    const hm_kernels *k = j->m->k;
    k->act(y, len, op->act);
    if (j->res && j->alpha) {
        k->add_prelu(y, j->res + r0 * N, j->alpha, n, (size_t)N, op->post_act);
        return;
    }
    if (j->res) k->add(y, j->res + r0 * N, y, len, op->post_act);
    if (j->alpha) k->prelu(y, j->alpha, y, n, (size_t)N);
}

static void im2col_task(void *ctx, int task, int tid) {
    const conv_job *j = ctx;
    int r0 = task * CHUNK_ROWS, r1 = r0 + CHUNK_ROWS < j->rows ? r0 + CHUNK_ROWS : j->rows;
    im2col_rows(j, r0, r1, j->col + (size_t)r0 * j->K);
}

/* One chunk of rows: (im2col,) GEMM, epilogue, all while the chunk is in
 * cache. */
static void gemm_chunk_task(void *ctx, int task, int tid) {
    conv_job *j = ctx;
    int r0 = task * CHUNK_ROWS, m = j->rows - r0 < CHUNK_ROWS ? j->rows - r0 : CHUNK_ROWS;
    const float *A = j->col + (size_t)r0 * j->K;
    if (j->x) {
        /* Each thread reuses one chunk of the scratch, which stays in its
         * cache: there are at least 4 chunks per thread on this path, so
         * chunk `tid` exists. */
        float *col = j->col + (size_t)tid * CHUNK_ROWS * j->K;
        im2col_rows(j, r0, r0 + m, col);
        A = col;
    }
    int rc = tfl_gemm(NULL, m, A, j->K, &j->op->W, j->y + (size_t)r0 * j->O, j->O);
    if (rc) atomic_store(&j->rc, rc); /* every failing task fails the same way */
    else epilogue(j, (size_t)r0, (size_t)m, j->O);
}

/* j->y[rows, O] = A[rows, K] . W^T + b, then the epilogue. A is j->col:
 * the input itself, or (j->x set) the im2col scratch, filled here. Many
 * rows: one chunk per task (in order on one thread). Few: the GEMM's own
 * split over output panels. */
static int gemm_epilogue(conv_job *j, hm_pool *pool) {
    int nchunks = (j->rows + CHUNK_ROWS - 1) / CHUNK_ROWS;
    /* Under about a million multiply-adds, waking the pool costs more than
     * the second thread saves. */
    if ((int64_t)j->rows * j->K * j->O < (1 << 20)) pool = NULL;
    if (nchunks >= 4 * hm_pool_size(pool)) {
        hm_pool_run(pool, gemm_chunk_task, j, nchunks);
        return atomic_load(&j->rc);
    }
    if (j->x) hm_pool_run(pool, im2col_task, j, nchunks);
    int rc = tfl_gemm(pool, j->rows, j->col, j->K, &j->op->W, j->y, j->O);
    if (!rc) epilogue(j, 0, (size_t)j->rows, j->O);
    return rc;
}

/* in: the op's input pointers (x, -, -, residual or NULL, alpha or NULL);
 * scratch: op->scratch floats. Returns the GEMM's status. */
int hm_tfl_conv(const hm_tfl_model *m, const hm_tfl_op *op, const float *const *in, float *y, float *scratch,
                hm_pool *pool) {
    const hm_tfl_shape *xs = &m->t[op->in[0]].shape, *ys = &m->t[op->out[0]].shape;
    conv_job j = {.m = m, .op = op, .x = in[0], .y = y, .col = scratch, .H = xs->dims[1], .W = xs->dims[2],
                  .C = xs->dims[3], .OH = ys->dims[1], .OW = ys->dims[2], .O = ys->dims[3]};
    if (op->nin > 3) j.res = in[3];
    if (op->nin > 4) j.alpha = in[4];
    j.K = op->kh * op->kw * j.C;
    j.rows = ys->dims[0] * j.OH * j.OW;
    if (op->direct) {
        j.col = (float *)in[0];
        j.x = NULL;
    }
    return gemm_epilogue(&j, pool);
}

/* x viewed as [numel / K, K]; returns the GEMM's status. */
int hm_tfl_fc(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool) {
    conv_job j = {.m = m, .op = op, .y = y, .col = (float *)x, .K = op->W.K, .O = op->W.N};
    j.rows = (int)(m->t[op->in[0]].numel / j.K);
    return gemm_epilogue(&j, pool);
}

/* ---- depthwise ---------------------------------------------------------- */

typedef struct {
    const hm_tfl_model *m;
    const hm_tfl_op *op;
    const float *x;
    float *y;
    int rows, per_task;   /* output rows (n, oy), rows per task */
    int C, cchunk, nc;    /* channels, channels per task, channel chunks */
    hm_dw_geom g;         /* the op as the kernels see it */
} dw_job;

static void dw_task(void *ctx, int task, int tid) {
    const dw_job *j = ctx;
    int rt = task / j->nc, ct = task % j->nc;
    int r0 = rt * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    int c0 = ct * j->cchunk, c1 = c0 + j->cchunk < j->C ? c0 + j->cchunk : j->C;
    j->m->k->dw_rows(&j->g, j->x, j->y, r0, r1, c0, c1);
}

/* Tasks of about 64 K multiply-adds over the output rows (and channels). */
void hm_tfl_depthwise(const hm_tfl_model *m, const hm_tfl_op *op, const float *x, float *y, hm_pool *pool) {
    const hm_tfl_shape *ys = &m->t[op->out[0]].shape;
    const hm_tfl_shape *xs = &m->t[op->in[0]].shape;
    dw_job j = {.m = m, .op = op, .x = x, .y = y, .rows = ys->dims[0] * ys->dims[1], .C = ys->dims[3]};
    j.g = (hm_dw_geom){.H = xs->dims[1], .W = xs->dims[2], .C = xs->dims[3], .OH = ys->dims[1], .OW = ys->dims[2],
                       .kh = op->kh, .kw = op->kw, .sh = op->stride_h, .sw = op->stride_w,
                       .pad_top = op->pad_top, .pad_left = op->pad_left, .act = op->act, .w = op->dw,
                       .bias = op->bias};
    /* About 64 K multiply-adds per task: enough to hide the hand-out cost. */
    int64_t per_row = (int64_t)ys->dims[2] * ys->dims[3] * op->kh * op->kw;
    j.per_task = (int)(65536 / (per_row ? per_row : 1));
    if (j.per_task < 1) j.per_task = 1;
    /* Few rows of many channels (the landmark model's 7x7 and 14x14 maps):
     * split the channels too, in multiples of 64, so the threads balance. */
    int nrt = (j.rows + j.per_task - 1) / j.per_task;
    j.cchunk = j.C;
    if (nrt < 16 && j.C >= 128) {
        int want = (16 + nrt - 1) / nrt;
        j.cchunk = (j.C / want + 63) / 64 * 64;
        if (j.cchunk < 64) j.cchunk = 64;
    }
    j.nc = (j.C + j.cchunk - 1) / j.cchunk;
    hm_pool_run(pool, dw_task, &j, nrt * j.nc);
}
