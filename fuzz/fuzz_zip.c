/* fuzz_zip - the zip index (hm_zip_open) and member reads (hm_zip_read).
 *
 * Every member is looked up by name and read, stored and deflated, with the
 * CRC checked, and its first and last bytes touched so that ASan sees any
 * pointer that escapes the input. CRCs are not fixed up here: the check is
 * part of what is fuzzed.
 */
#include <stdint.h>
#include <string.h>
#include "core/util.h"
#include "format/zip.h"

/* Deflated members are inflated into an allocation of their declared size,
 * up to the caller's cap (2 GiB for a checkpoint's data.pkl, 64 GiB for an
 * .npz member). 256 MiB keeps each run well inside libFuzzer's 2 GB malloc
 * limit while still letting declared sizes far above the input through. */
#define FUZZ_ZIP_CAP ((uint64_t)1 << 28)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hm_zip z;
    if (hm_zip_open(data, size, "fuzz", &z)) return 0;
    volatile uint8_t sink = 0;
    for (int i = 0; i < z.n; i++) {
        const hm_zip_entry *e = &z.ent[i];
        char shown[64];
        hm_zip_printable(shown, sizeof shown, e->name, e->name_len);
        int j = hm_zip_find(&z, e->name);
        if (j >= 0 && strcmp(z.ent[j].name, e->name)) __builtin_trap(); /* lookup returned another name */
        const void *p;
        size_t len;
        void *owned;
        if (hm_zip_read(&z, i, FUZZ_ZIP_CAP, 1, &p, &len, &owned) == HM_OK) {
            if (len) sink ^= ((const uint8_t *)p)[0] ^ ((const uint8_t *)p)[len - 1];
            hm_free(owned);
        }
    }
    (void)sink;
    hm_zip_close(&z);
    return 0;
}
