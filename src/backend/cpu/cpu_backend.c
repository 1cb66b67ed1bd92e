/* cpu_backend.c - the CPU backend's entry (backend/backend.h): the whole
 * forward on this machine's cores, with the kernels of the active ISA level
 * (kernels/kernels.h) and the fast precision's scheme (kernels/gemm_lowp.c).
 *
 *   patch_embed -> vit (blocks + last_norm) -> mano_head (decoder, readout,
 *   rot6d)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/cpu.h"
#include "core/util.h"
#include "kernels/attn.h"
#include "kernels/gemm.h"

/* One device: the machine (its cores are the state's threads). */
static int cpu_devices(void) { return 1; }

static int cpu_check(int dev, int prec) {
    if (dev != 0) return hm_err(HM_E_UNSUPPORTED, "the cpu backend has one device (cpu), not %d", dev);
    int rc = hm_isa_status();
    if (rc) return rc;
    if (prec == HM_PREC_FP32) return HM_OK;
    if (prec != HM_PREC_FAST) return hm_err(HM_E_ARG, "unknown precision %d", prec);
    /* Packing a 1 x 1 matrix asks the kernels exactly what a model load
     * would (CPU features, the active ISA, HAMER_LOWP). */
    hm_packed p;
    const float one = 1.0f;
    rc = hm_pack_weights_prec(&p, &one, 1, NULL, 1, 1, HM_PREC_FAST);
    hm_packed_free(&p);
    return rc;
}

static const char *cpu_scheme(int prec) { return hm_precision_scheme((hm_precision)prec); }

static char cpu_line[512];
static pthread_once_t cpu_line_once = PTHREAD_ONCE_INIT;

static void cpu_line_init(void) {
    /* the fast precision's attention as a full-size model's state chooses it */
    const int ntok = (HAMER_CROP_H / HM_PATCH) * (HAMER_CROP_W / HM_PATCH);
    int mode = HM_ATTN_FP32;
    const char *attn = hm_attention_fast_choose(ntok, HM_VIT_HEAD_DIM, (size_t)ntok * ntok, &mode)
                           ? "unavailable (HAMER_ATTN)"
                       : mode == HM_ATTN_AMX  ? "bf16 on amx tiles, fp32 softmax"
                       : mode == HM_ATTN_BF16 ? "bf16 dot products, fp32 softmax"
                                              : "fp32";
    snprintf(cpu_line, sizeof cpu_line, "kernels: %s%s; precision fp32: %s; fast: %s; fast attention: %s; cpu: %s",
             hm_isa_name(hm_isa_active()), hm_lowp_amx_in_use() ? " (int8 on amx tiles)" : "",
             hm_precision_scheme(HM_PREC_FP32), hm_precision_scheme(HM_PREC_FAST), attn,
             hm_cpu_feature_names()[0] ? hm_cpu_feature_names() : "baseline");
}

static const char *cpu_describe(void) {
    pthread_once(&cpu_line_once, cpu_line_init);
    return cpu_line;
}

static int cpu_pack(const hm_weights *w, int prec, int dev, void **bm) {
    hm_cpu_model *m;
    int rc = hm_cpu_pack(w, prec, &m);
    *bm = rc ? NULL : m;
    return rc;
}

static int cpu_visit(void *bm, const hm_config *c, hm_visitor *v) { return hm_cpu_visit(bm, c, v); }

static int cpu_blank(const hm_config *c, int prec, void **bm) {
    hm_cpu_model *m = calloc(1, sizeof *m);
    if (!m) return hm_err(HM_E_NOMEM, "out of memory");
    m->cfg = *c;
    m->precision = prec;
    m->blocks = calloc((size_t)c->depth, sizeof *m->blocks);
    m->layers = calloc((size_t)c->hdepth, sizeof *m->layers);
    *bm = m;
    if (!m->blocks || !m->layers) return hm_err(HM_E_NOMEM, "out of memory"); /* the caller frees *bm */
    return HM_OK;
}

/* The arrays went through visit; what remains is the model's own. */
static void cpu_model_free(void *bm) {
    hm_cpu_model *m = bm;
    if (!m) return;
    free(m->blocks);
    free(m->layers);
    free(m);
}

static int cpu_state_new(const void *bm, const hm_config *c, int prec, int dev, int max_batch, int nthreads,
                         hm_run_ctl *ctl, void **bs) {
    hm_cpu_state *s = calloc(1, sizeof *s);
    if (!s) return hm_err(HM_E_NOMEM, "out of memory");
    int rc = hm_cpu_state_init(s, bm, max_batch, nthreads, ctl);
    if (rc) {
        free(s);
        return rc;
    }
    *bs = s;
    return HM_OK;
}

static void cpu_state_free(void *bs) {
    if (!bs) return;
    hm_cpu_state_release(bs);
    free(bs);
}

static int cpu_forward(void *bs, const void *crops, int is_u8, int B, float *params) {
    hm_cpu_state *s = bs;
    int rc;
    /* Profile 2: the pool's runs feed the critical-path model. */
    if (s->ctl->profile == 2) {
        if ((rc = hm_pool_sim_start(s->pool, s->ctl->sim_split))) return rc;
        s->ctl->sim_pool = s->pool;
    } else if (s->ctl->profile != 2 && s->ctl->sim_pool) {
        hm_pool_sim_stop(s->pool);
        s->ctl->sim_pool = NULL;
    }
    if (s->ctl->sim_pool) { /* nothing from before this forward */
        double w, sim[HM_POOL_SIM_N];
        hm_pool_sim_take(s->pool, &w, sim);
        s->ctl->sim_cpu = hm_thread_cpu();
    }
    HM_TIC(s->ctl);
    if (is_u8) {
        if (s->ctl->plain) {
            hm_u8_to_normalised(crops, s->img, B);
            rc = hm_patch_embed_f32(s, s->img, B);
        } else {
            rc = hm_patch_embed_u8(s, crops, B);
        }
    } else {
        rc = hm_patch_embed_f32(s, crops, B);
    }
    if (rc) return rc;
    HM_TOC(s->ctl, HM_ST_PATCH);
    if ((rc = hm_vit_forward(s, B))) return rc;
    hm_tic_ = s->ctl->profile ? hm_now() : 0;
    if ((rc = hm_head_forward(s, B, params))) return rc;
    HM_TOC(s->ctl, HM_ST_HEAD);
    return HM_OK;
}

const hm_backend hm_backend_cpu = {
    .name = "cpu",
    .devices = cpu_devices,
    .check = cpu_check,
    .scheme = cpu_scheme,
    .describe = cpu_describe,
    .pack = cpu_pack,
    .visit = cpu_visit,
    .blank = cpu_blank,
    .model_free = cpu_model_free,
    .state_new = cpu_state_new,
    .state_free = cpu_state_free,
    .forward = cpu_forward,
};
