/* fuzz_util.h - helpers shared by the fuzz targets (header only).
 *
 * fz_copy: the input in its own exactly-sized, 64-byte aligned allocation.
 *   Checkpoints are mmapped (page aligned) in real use and tensor alignment
 *   is checked against the absolute address, so the targets parse a copy
 *   aligned like a mapping; the allocation is exactly `size` bytes, so ASan
 *   reports a read one byte past the end.
 * fz_fix_crcs: rewrites the central-directory CRC of every stored zip member
 *   to match its bytes. The checkpoint reader checks data.pkl's CRC; without
 *   the fix-up almost every mutation of the pickle would stop there and the
 *   fuzzer would never get past the CRC into the pickle and tensor code.
 *   (The zip target keeps the CRCs as given, to fuzz that check itself.)
 */
#ifndef HM_FUZZ_UTIL_H
#define HM_FUZZ_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static inline uint8_t *fz_copy(const uint8_t *data, size_t size) {
    void *p = NULL;
    if (posix_memalign(&p, 64, size ? size : 1)) return NULL;
    if (size) memcpy(p, data, size);
    return p;
}

static inline uint32_t fz_rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t fz_rd64(const uint8_t *p) { return fz_rd32(p) | (uint64_t)fz_rd32(p + 4) << 32; }
static inline unsigned fz_rd16(const uint8_t *p) { return p[0] | p[1] << 8; }

/* Best effort: any inconsistency just leaves the rest untouched (the reader
 * then reports it). Mirrors zip.c's EOCD / zip64 / central-directory walk. */
static inline void fz_fix_crcs(uint8_t *b, size_t n) {
    if (n < 22) return;
    size_t lo = n - 22 > 65535 ? n - 22 - 65535 : 0, eocd = (size_t)-1;
    for (size_t p = n - 22 + 1; p-- > lo;)
        if (fz_rd32(b + p) == 0x06054b50 && p + 22 + fz_rd16(b + p + 20) == n) {
            eocd = p;
            break;
        }
    if (eocd == (size_t)-1) return;
    uint64_t count = fz_rd16(b + eocd + 10), cd = fz_rd32(b + eocd + 16);
    if (eocd >= 20 && fz_rd32(b + eocd - 20) == 0x07064b50) {
        uint64_t r = fz_rd64(b + eocd - 20 + 8);
        if (r > n || n - r < 56 || fz_rd32(b + r) != 0x06064b50) return;
        count = fz_rd64(b + r + 32);
        cd = fz_rd64(b + r + 48);
    }
    for (uint64_t i = 0, p = cd; i < count && p <= n && n - p >= 46 && fz_rd32(b + p) == 0x02014b50; i++) {
        uint8_t *c = b + p;
        unsigned method = fz_rd16(c + 10), nlen = fz_rd16(c + 28), xlen = fz_rd16(c + 30), clen = fz_rd16(c + 32);
        uint64_t size = fz_rd32(c + 20), hdr = fz_rd32(c + 42);
        /* zip64 extra: usize then csize then offset, only the saturated ones */
        if (n - p - 46 >= (uint64_t)nlen + xlen) {
            const uint8_t *x = c + 46 + nlen;
            for (unsigned q = 0; q + 4 <= xlen;) {
                unsigned id = fz_rd16(x + q), sz = fz_rd16(x + q + 2);
                if (sz > xlen - q - 4) break;
                if (id == 1) {
                    const uint8_t *f = x + q + 4;
                    unsigned left = sz;
                    if (fz_rd32(c + 24) == 0xFFFFFFFFu && left >= 8) size = fz_rd64(f), f += 8, left -= 8;
                    if (fz_rd32(c + 20) == 0xFFFFFFFFu && left >= 8) f += 8, left -= 8;
                    if (fz_rd32(c + 42) == 0xFFFFFFFFu && left >= 8) hdr = fz_rd64(f);
                    break;
                }
                q += 4 + sz;
            }
        }
        if (method == 0 && hdr <= n && n - hdr >= 30 && fz_rd32(b + hdr) == 0x04034b50) {
            uint64_t off = hdr + 30 + fz_rd16(b + hdr + 26) + fz_rd16(b + hdr + 28);
            if (off <= n && size <= n - off) {
                uint32_t crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), b + off, (uInt)size);
                c[16] = (uint8_t)crc, c[17] = (uint8_t)(crc >> 8), c[18] = (uint8_t)(crc >> 16), c[19] = (uint8_t)(crc >> 24);
            }
        }
        p += 46 + (uint64_t)nlen + xlen + clen;
    }
}

#endif
