/* fuzz_packed - the packed model file reader (hm_model_from_packed_mem):
 * header, section table, checksums, the section sequence the config
 * implies, low-precision block headers, MANO indices; and, on request, a
 * forward pass on what loaded, so a model the reader accepts is also one
 * the kernels can run.
 *
 * Input: one control byte, then the file. Bit 0: recompute every checksum
 * first (hm_pack_reseal), otherwise nearly every mutation would stop at a
 * checksum; clear, the checksums are fuzzed as given. Bit 1: run one crop
 * through the loaded model (~30 ms under ASan, so not on every input).
 * The precision requested is the one the header names, so a precision
 * mismatch does not stop the fuzzer either.
 *
 * The seeds are the tiny checkpoints of fuzz_model converted with
 * `hamer convert` (fuzz/make_corpus.py; AVX-512 layouts).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "fuzz_util.h"
#include "hamer.h"
#include "api.h"
#include "load/load.h"
#include "model/model.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Offset of the precision field in the header (model_pack.h's pack_header). */
#define FZ_PACK_PRECISION_OFF 48

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int ctl = data[0];
    data++, size--;
    uint8_t *buf = fz_copy(data, size);
    if (!buf) return 0;
    if (ctl & 1) hm_pack_reseal(buf, size);
    int prec = HM_PREC_FP32;
    if (size >= FZ_PACK_PRECISION_OFF + 4 && fz_rd32(buf + FZ_PACK_PRECISION_OFF) == HM_PREC_FAST) prec = HM_PREC_FAST;
    hm_model *m = NULL;
    hm_load_opts o = {.precision = prec};
    if (hm_model_from_packed_mem(buf, size, "fuzz", &o, &m) == HM_OK) {
        if (!m || m->cfg.dim % HM_VIT_HEAD_DIM || m->cfg.hinner % HM_DEC_HEAD_DIM || m->precision != prec)
            __builtin_trap();
        hamer_model *hm = hm_model_handle(m);
        hamer_state *st = hm && (ctl & 2) ? hamer_state_new(hm, 1, 1) : NULL;
        static uint8_t crop[HAMER_CROP_H * HAMER_CROP_W * 3];
        static float params[HAMER_N_PARAMS], verts[HAMER_N_VERTS * 3];
        hamer_model_info info;
        if (st) {
            hamer_model_get_info(hm, &info);
            hamer_output out = {.params = params, .vertices = info.has_mano ? verts : NULL};
            if (hamer_regress_u8(st, crop, 1, &out) != HAMER_OK) __builtin_trap();
        }
        hamer_state_free(st);
        hamer_model_free(hm);
    }
    free(buf);
    return 0;
}
