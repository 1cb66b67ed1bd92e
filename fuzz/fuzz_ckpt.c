/* fuzz_ckpt - torch.save checkpoints: zip + pickle -> tensor table
 * (hm_ckpt_open_mem).
 *
 * Stored-member CRCs are fixed up first (fuzz_util.h) so mutations reach the
 * pickle and the tensor resolution. For every tensor in the table the first
 * and the last element of its strided extent are read, so ASan checks the
 * reader's claim that the whole extent lies inside the buffer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "format/ckpt.h"
#include "fuzz_util.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t *buf = fz_copy(data, size);
    if (!buf) return 0;
    fz_fix_crcs(buf, size);
    hm_ckpt *ck;
    if (hm_ckpt_open_mem(buf, size, &ck) == HM_OK) {
        volatile uint8_t sink = 0;
        int n = hm_ckpt_count(ck);
        for (int i = 0; i < n; i++) {
            const hm_tensor *t = hm_ckpt_at(ck, i);
            if (!t || t->ndim < 0 || t->ndim > HM_MAX_DIMS || hm_ckpt_find(ck, t->name) != t) __builtin_trap();
            size_t es = hm_dtype_size(t->dtype);
            if (!es) __builtin_trap();
            if (t->numel == 0) continue;
            uint64_t last = 0;
            for (int d = 0; d < t->ndim; d++) last += (uint64_t)(t->shape[d] - 1) * (uint64_t)t->stride[d];
            const uint8_t *p = t->data;
            sink ^= p[0] ^ p[es - 1] ^ p[last * es] ^ p[last * es + es - 1];
        }
        (void)sink;
        hm_ckpt_close(ck);
    }
    free(buf);
    return 0;
}
