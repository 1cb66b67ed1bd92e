/* fuzz_npy - .npy parsing (hm_npy_parse) and, for inputs that look like a
 * zip, .npz reading (hm_npz_open / hm_npz_get: the MANO file path).
 *
 * hm_npz_open only takes a path, so zip inputs go through a scratch file in
 * $TMPDIR (one per fuzzing process).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "format/npy.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void touch(const hm_array *a) {
    volatile uint8_t sink = 0;
    size_t bytes = (size_t)a->numel * hm_dtype_size(a->dtype);
    if (bytes) sink ^= ((const uint8_t *)a->data)[0] ^ ((const uint8_t *)a->data)[bytes - 1];
    (void)sink;
}

static void npz(const uint8_t *data, size_t size) {
    static char path[256];
    if (!path[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/hamer_fuzz_npz.%ld", tmp && *tmp ? tmp : "/tmp", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return;
    int ok = fwrite(data, 1, size, f) == size;
    if (fclose(f) || !ok) return;
    hm_npz *z;
    if (hm_npz_open(path, &z) == HM_OK) {
        for (int i = 0; i < hm_npz_count(z); i++) {
            const char *name = hm_npz_name(z, i);
            hm_array a;
            /* A member name holding a NUL is listed cut at the NUL, which
             * then names no member: has() may be false, get() must fail. */
            int has = hm_npz_has(z, name);
            if (hm_npz_get(z, name, &a) == HM_OK) {
                if (!has) __builtin_trap();
                touch(&a);
                hm_array_free(&a);
            }
        }
        hm_npz_close(z);
    }
    remove(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hm_array a;
    if (hm_npy_parse(data, size, "fuzz", &a) == HM_OK) {
        if (a.ndim < 0 || a.ndim > HM_MAX_DIMS) __builtin_trap();
        touch(&a);
        hm_array_free(&a);
    }
    if (size >= 4 && !memcmp(data, "PK\3\4", 4)) npz(data, size);
    return 0;
}
