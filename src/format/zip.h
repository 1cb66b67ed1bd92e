/* zip.h - read-only zip archive index over an in-memory buffer.
 *
 * Used for torch.save checkpoints (zip64, stored members aligned to 64 bytes)
 * and for .npz files (stored or deflated members). Every offset and size read
 * from the archive is checked against the buffer length before use; errors
 * name the byte offset that was wrong and start with the caller's `what`
 * prefix (e.g. "checkpoint"). Encrypted members and methods other than
 * stored (0) and deflate (8) are indexed but refused when read.
 */
#ifndef HM_ZIP_H
#define HM_ZIP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;    /* NUL-terminated copy owned by the index */
    size_t name_len;     /* may exceed strlen(name) if the name holds a NUL */
    int method;          /* 0 stored, 8 deflate, others unreadable */
    int flags;           /* general purpose bits; bit 0 = encrypted */
    uint32_t crc;
    uint64_t csize;      /* bytes in the archive */
    uint64_t usize;      /* bytes once extracted */
    uint64_t data_off;   /* offset of the member's bytes in the buffer */
} hm_zip_entry;

typedef struct {
    const uint8_t *buf;
    size_t len;
    const char *what;    /* error prefix; not copied, must outlive the index */
    int n;
    hm_zip_entry *ent;   /* in central-directory order */
    int *by_name;        /* entry indices sorted by name, for lookup */
    char *names;
} hm_zip;

/* Index the archive in buf[0..len). On success *z owns allocations released
 * by hm_zip_close; on failure *z is left empty. Returns HM_OK or HM_E_*. */
int hm_zip_open(const void *buf, size_t len, const char *what, hm_zip *z);
void hm_zip_close(hm_zip *z);

/* Index of the member called `name`, or -1. */
int hm_zip_find(const hm_zip *z, const char *name);

/* The bytes of member i. Stored members are returned as a pointer into the
 * buffer (*owned = NULL); deflated ones are inflated into an hm_alloc'd
 * buffer that the caller frees (*owned == *data). Members whose extracted
 * size exceeds `cap` are refused. Deflated data is always CRC-checked;
 * stored data only when check_crc is set (a multi-GB checkpoint would pay a
 * full read for it). */
int hm_zip_read(const hm_zip *z, int i, uint64_t cap, int check_crc,
                const void **data, size_t *len, void **owned);

/* Copy at most out_size-1 bytes of s[0..n) into out for an error message,
 * replacing control and non-ASCII bytes with '?' so messages stay one line;
 * a long name is cut and ends in "...". Returns out. */
const char *hm_zip_printable(char *out, size_t out_size, const char *s, size_t n);

#endif
