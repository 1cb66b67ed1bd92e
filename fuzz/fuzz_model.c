/* fuzz_model - checkpoint -> model mapping (hm_model_from_ckpt): the
 * architecture read off tensor shapes, every tensor's presence, dtype, shape
 * and layout checked, weights packed and constants folded.
 *
 * The seeds are tiny but complete models (fuzz/make_corpus.py: ViT width
 * 80, decoder 64), CRCs are fixed up so mutations reach the loader, and
 * odd-sized inputs load in the FAST precision, so both packers run.
 */
#include <stdint.h>
#include <stdlib.h>
#include "format/ckpt.h"
#include "fuzz_util.h"
#include "load/load.h"
#include "model/model.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = fz_copy(data, size);
    if (!buf) return 0;
    fz_fix_crcs(buf, size);
    hm_ckpt *ck;
    if (hm_ckpt_open_mem(buf, size, &ck) == HM_OK) {
        hm_model *m = NULL;
        hm_load_opts o = {.precision = (size & 1) ? HM_PREC_FAST : HM_PREC_FP32};
        if (hm_model_from_ckpt(ck, "fuzz", &o, &m) == HM_OK) {
            if (!m || m->cfg.dim % HM_VIT_HEAD_DIM || m->cfg.hinner % HM_DEC_HEAD_DIM) __builtin_trap();
            hm_model_free(m);
        }
        hm_ckpt_close(ck);
    }
    free(buf);
    return 0;
}
