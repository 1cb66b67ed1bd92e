/* test_ckpt - zip reader, pickle VM and checkpoint index on hand-built
 * archives, including malformed ones (truncated at every byte, flipped
 * bytes, hostile lengths and nesting): every failure must be a clean error,
 * never a crash (run under ASan/UBSan to make that meaningful). */
#define _DEFAULT_SOURCE /* mkstemp */
#include "format/ckpt.h"
#include "format/pickle.h"
#include "core/util.h"
#include "format/zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

/* ---- byte buffer ---- */

typedef struct { uint8_t *p; size_t n, cap; } buf;

static void put(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void u8(buf *b, unsigned v) { uint8_t c = (uint8_t)v; put(b, &c, 1); }
static void u16(buf *b, unsigned v) { u8(b, v & 255), u8(b, (v >> 8) & 255); }
static void u32(buf *b, uint32_t v) { u16(b, v & 0xFFFF), u16(b, v >> 16); }
static void u64(buf *b, uint64_t v) { u32(b, (uint32_t)v), u32(b, (uint32_t)(v >> 32)); }

/* Exact-size heap copy so ASan sees any read past the end. */
static uint8_t *dup_prefix(const buf *b, size_t n) {
    uint8_t *p = malloc(n ? n : 1);
    if (!p) abort();
    if (n) memcpy(p, b->p, n);
    return p;
}

/* ---- zip builder ---- */

typedef struct { const char *name; const void *data; size_t len; int deflate; } member;

static buf deflate_raw(const void *d, size_t n) {
    buf o = {0};
    z_stream s;
    memset(&s, 0, sizeof s);
    deflateInit2(&s, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
    o.cap = deflateBound(&s, (uLong)n) + 16;
    o.p = malloc(o.cap);
    s.next_in = (Bytef *)d;
    s.avail_in = (uInt)n;
    s.next_out = o.p;
    s.avail_out = (uInt)o.cap;
    deflate(&s, Z_FINISH);
    o.n = s.total_out;
    deflateEnd(&s);
    return o;
}

/* Members with 64-byte aligned data (like torch); zip64 puts every size and
 * offset in zip64 extra fields and adds the zip64 end record + locator. */
static buf build_zip(const member *m, int nm, int zip64) {
    buf z = {0}, cd = {0};
    for (int i = 0; i < nm; i++) {
        buf comp = {0};
        const void *data = m[i].data;
        size_t clen = m[i].len;
        if (m[i].deflate) {
            comp = deflate_raw(m[i].data, m[i].len);
            data = comp.p;
            clen = comp.n;
        }
        uint32_t crc = (uint32_t)crc32(0, m[i].data, (uInt)m[i].len);
        size_t nlen = strlen(m[i].name), off = z.n;
        size_t pad = (64 - (off + 30 + nlen + 4) % 64) % 64;
        u32(&z, 0x04034b50), u16(&z, 45), u16(&z, 0), u16(&z, m[i].deflate ? 8 : 0), u16(&z, 0), u16(&z, 0x21);
        u32(&z, crc), u32(&z, (uint32_t)clen), u32(&z, (uint32_t)m[i].len), u16(&z, (unsigned)nlen);
        u16(&z, (unsigned)(4 + pad));
        put(&z, m[i].name, nlen);
        u16(&z, 0x4246), u16(&z, (unsigned)pad);
        for (size_t k = 0; k < pad; k++) u8(&z, 'Z');
        put(&z, data, clen);
        u32(&cd, 0x02014b50), u16(&cd, 45), u16(&cd, 45), u16(&cd, 0), u16(&cd, m[i].deflate ? 8 : 0);
        u16(&cd, 0), u16(&cd, 0x21), u32(&cd, crc);
        u32(&cd, zip64 ? 0xFFFFFFFFu : (uint32_t)clen), u32(&cd, zip64 ? 0xFFFFFFFFu : (uint32_t)m[i].len);
        u16(&cd, (unsigned)nlen), u16(&cd, zip64 ? 28 : 0), u16(&cd, 0), u16(&cd, 0), u16(&cd, 0), u32(&cd, 0);
        u32(&cd, zip64 ? 0xFFFFFFFFu : (uint32_t)off);
        put(&cd, m[i].name, nlen);
        if (zip64) u16(&cd, 1), u16(&cd, 24), u64(&cd, m[i].len), u64(&cd, clen), u64(&cd, off);
        free(comp.p);
    }
    size_t cd_off = z.n;
    put(&z, cd.p, cd.n);
    if (zip64) {
        size_t r = z.n;
        u32(&z, 0x06064b50), u64(&z, 44), u16(&z, 45), u16(&z, 45), u32(&z, 0), u32(&z, 0);
        u64(&z, (uint64_t)nm), u64(&z, (uint64_t)nm), u64(&z, cd.n), u64(&z, cd_off);
        u32(&z, 0x07064b50), u32(&z, 0), u64(&z, r), u32(&z, 1);
    }
    u32(&z, 0x06054b50), u16(&z, 0), u16(&z, 0);
    u16(&z, zip64 ? 0xFFFF : (unsigned)nm), u16(&z, zip64 ? 0xFFFF : (unsigned)nm);
    u32(&z, zip64 ? 0xFFFFFFFFu : (uint32_t)cd.n), u32(&z, zip64 ? 0xFFFFFFFFu : (uint32_t)cd_off), u16(&z, 0);
    free(cd.p);
    return z;
}

/* ---- pickle builder (the opcodes torch.save emits) ---- */

static void pk_str(buf *b, const char *s) {
    size_t n = strlen(s);
    if (n < 256) u8(b, 0x8c), u8(b, (unsigned)n);
    else u8(b, 'X'), u32(b, (uint32_t)n);
    put(b, s, n);
}
static void pk_global(buf *b, const char *mod, const char *name) {
    u8(b, 'c'), put(b, mod, strlen(mod)), u8(b, '\n'), put(b, name, strlen(name)), u8(b, '\n');
}
static void pk_int(buf *b, int64_t v) {
    if (v >= 0 && v < 256) u8(b, 'K'), u8(b, (unsigned)v);
    else if (v >= 0 && v < 65536) u8(b, 'M'), u16(b, (unsigned)v);
    else if (v >= INT32_MIN && v <= INT32_MAX) u8(b, 'J'), u32(b, (uint32_t)(int32_t)v);
    else u8(b, 0x8a), u8(b, 8), u64(b, (uint64_t)v);
}
static void pk_ints(buf *b, int n, const int64_t *v) {
    u8(b, '(');
    for (int i = 0; i < n; i++) pk_int(b, v[i]);
    u8(b, 't');
}

static int memo_next;
static void pk_put(buf *b) { u8(b, 'q'), u8(b, (unsigned)(memo_next++ & 255)); }

/* _rebuild_tensor_v2((storage pid), offset, size, stride, False, OrderedDict()) */
static void pk_tensor(buf *b, const char *cls, const char *key, int64_t numel, int64_t off, int nd,
                      const int64_t *shape, const int64_t *stride, const char *loc) {
    pk_global(b, "torch._utils", "_rebuild_tensor_v2");
    pk_put(b);
    u8(b, '(');
    u8(b, '(');
    pk_str(b, "storage");
    pk_global(b, "torch", cls);
    pk_str(b, key);
    pk_str(b, loc);
    pk_int(b, numel);
    u8(b, 't');
    u8(b, 'Q');
    pk_int(b, off);
    pk_ints(b, nd, shape);
    pk_ints(b, nd, stride);
    u8(b, 0x89);
    pk_global(b, "collections", "OrderedDict");
    u8(b, ')'), u8(b, 'R');
    u8(b, 't');
    u8(b, 'R');
    pk_put(b);
}

/* A Lightning-like pickle: {'epoch', 'state_dict': OrderedDict(...),
 * 'hyper_parameters': <opaque>, 'loops': {...}}. */
static buf ckpt_pickle(int with_state_dict, const char *w_storage) {
    buf b = {0};
    memo_next = 0;
    u8(&b, 0x80), u8(&b, 2);
    u8(&b, '}'), pk_put(&b);
    u8(&b, '(');
    pk_str(&b, "epoch"), pk_int(&b, 5);
    if (with_state_dict) {
        pk_str(&b, "state_dict");
        pk_global(&b, "collections", "OrderedDict"), u8(&b, ')'), u8(&b, 'R'), pk_put(&b);
        u8(&b, '(');
    }
    pk_str(&b, "w"), pk_tensor(&b, "FloatStorage", w_storage, 12, 0, 2, (int64_t[]){3, 4}, (int64_t[]){4, 1}, "cpu");
    pk_str(&b, "wt"), pk_tensor(&b, "FloatStorage", "0", 12, 0, 2, (int64_t[]){4, 3}, (int64_t[]){1, 4}, "cuda:0");
    pk_str(&b, "b"), pk_tensor(&b, "LongStorage", "1", 6, 1, 1, (int64_t[]){5}, (int64_t[]){1}, "cpu");
    pk_str(&b, "h"), pk_tensor(&b, "HalfStorage", "2", 4, 0, 2, (int64_t[]){2, 2}, (int64_t[]){2, 1}, "cpu");
    pk_str(&b, "s"), pk_tensor(&b, "FloatStorage", "0", 12, 5, 0, NULL, NULL, "cpu");
    pk_str(&b, "col"), pk_tensor(&b, "FloatStorage", "0", 12, 1, 2, (int64_t[]){3, 1}, (int64_t[]){1, 7}, "cpu");
    pk_str(&b, "step"), pk_int(&b, 7);
    if (with_state_dict) {
        u8(&b, 'u');
        /* An opaque config object: NEWOBJ + BUILD with a state dict. */
        pk_str(&b, "hyper_parameters");
        pk_global(&b, "omegaconf.dictconfig", "DictConfig"), pk_put(&b);
        u8(&b, ')'), u8(&b, 0x81), u8(&b, '}');
        pk_str(&b, "lr"), u8(&b, 'G'), put(&b, "\x3f\xf8\0\0\0\0\0\0", 8), u8(&b, 's');
        u8(&b, 'b');
        pk_str(&b, "loops");
        u8(&b, '('), pk_str(&b, "list"), u8(&b, ']'), u8(&b, '('), pk_int(&b, -3), u8(&b, 'N'), u8(&b, 0x88);
        u8(&b, 'e'), pk_str(&b, "big"), u8(&b, 0x8a), u8(&b, 9), put(&b, "\1\2\3\4\5\6\7\x8\x9", 9);
        pk_str(&b, "bytes"), u8(&b, 'C'), u8(&b, 2), put(&b, "ab", 2);
        pk_str(&b, "path"), pk_global(&b, "pathlib", "PosixPath"), pk_str(&b, "/x"), u8(&b, 0x85), u8(&b, 'R');
        pk_str(&b, "again"), u8(&b, 'h'), u8(&b, 1);
        u8(&b, 'd');
    }
    u8(&b, 'u');
    u8(&b, '.');
    return b;
}

typedef struct { buf zip, pkl; } ckpt_buf;

static float f32_data[12];
static int64_t i64_data[6];
static uint16_t f16_data[4] = {0x3C00, 0x4000, 0xB800, 0};

static ckpt_buf make_ckpt(const char *prefix, int with_state_dict, int zip64, size_t f32_bytes, int deflate0) {
    ckpt_buf c;
    char n[5][64];
    for (int i = 0; i < 12; i++) f32_data[i] = (float)i;
    for (int i = 0; i < 6; i++) i64_data[i] = i;
    c.pkl = ckpt_pickle(with_state_dict, "0");
    snprintf(n[0], 64, "%s/data.pkl", prefix);
    snprintf(n[1], 64, "%s/data/0", prefix);
    snprintf(n[2], 64, "%s/data/1", prefix);
    snprintf(n[3], 64, "%s/data/2", prefix);
    snprintf(n[4], 64, "%s/version", prefix);
    member m[5] = {{n[0], c.pkl.p, c.pkl.n, 0}, {n[1], f32_data, f32_bytes, deflate0},
                   {n[2], i64_data, sizeof i64_data, 0}, {n[3], f16_data, sizeof f16_data, 0}, {n[4], "3\n", 2, 0}};
    c.zip = build_zip(m, 5, zip64);
    return c;
}

/* ---- tests ---- */

static void test_zip(void) {
    char big[5000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)('a' + i % 7);
    member m[3] = {{"x/a", "hello", 5, 0}, {"x/b", big, sizeof big, 1}, {"x/empty", "", 0, 1}};
    for (int z64 = 0; z64 < 2; z64++) {
        buf b = build_zip(m, 3, z64);
        hm_zip z;
        CHECK(hm_zip_open(b.p, b.n, "zip", &z) == HM_OK);
        CHECK(z.n == 3 && hm_zip_find(&z, "x/b") == 1 && hm_zip_find(&z, "x/c") < 0 && hm_zip_find(&z, "x") < 0);
        const void *d;
        size_t n;
        void *own;
        CHECK(hm_zip_read(&z, 0, 100, 1, &d, &n, &own) == HM_OK && n == 5 && !own && !memcmp(d, "hello", 5));
        CHECK((uintptr_t)((const uint8_t *)d - b.p) % 64 == 0);
        CHECK(hm_zip_read(&z, 1, 1 << 20, 0, &d, &n, &own) == HM_OK && own == d && n == sizeof big &&
              !memcmp(d, big, n));
        hm_free(own);
        CHECK(hm_zip_read(&z, 2, 10, 0, &d, &n, &own) == HM_OK && n == 0);
        hm_free(own);
        CHECK(clean_error(hm_zip_read(&z, 1, 100, 0, &d, &n, &own))); /* over the cap */
        CHECK(clean_error(hm_zip_read(&z, 7, 100, 0, &d, &n, &own)));
        hm_zip_close(&z);

        /* Corrupt deflate data or CRC: error, not garbage. */
        int bi = -1;
        CHECK(hm_zip_open(b.p, b.n, "zip", &z) == HM_OK && (bi = hm_zip_find(&z, "x/b")) >= 0);
        size_t at = z.ent[bi].data_off + 10;
        hm_zip_close(&z);
        b.p[at] ^= 0x55;
        CHECK(hm_zip_open(b.p, b.n, "zip", &z) == HM_OK);
        CHECK(clean_error(hm_zip_read(&z, bi, 1 << 20, 0, &d, &n, &own)) && !own);
        hm_zip_close(&z);
        b.p[at] ^= 0x55;

        /* Every truncation fails cleanly; every single-byte flip is safe. */
        int ok = 1;
        for (size_t len = 0; len < b.n; len++) {
            uint8_t *p = dup_prefix(&b, len);
            int rc = hm_zip_open(p, len, "zip", &z);
            ok &= clean_error(rc);
            free(p);
        }
        CHECK(ok);
        /* A flip fails cleanly, or leaves what it did not hit: with the CRCs
         * checked, every member read back is the one written (a single-byte
         * change in data, sizes, offsets or the CRC itself never passes). */
        int safe = 1, opened = 0, reads = 0;
        for (size_t i = 0; i < b.n; i++) {
            uint8_t *p = dup_prefix(&b, b.n);
            p[i] ^= 0xA5;
            int rc = hm_zip_open(p, b.n, "zip", &z);
            if (rc != HM_OK) {
                safe &= clean_error(rc);
            } else {
                opened++;
                safe &= z.n <= 3;
                for (int k = 0; k < z.n && k < 3; k++) {
                    own = NULL;
                    rc = hm_zip_read(&z, k, 1 << 20, 1, &d, &n, &own);
                    if (rc == HM_OK) {
                        reads++;
                        safe &= n == m[k].len && (n == 0 || !memcmp(d, m[k].data, n));
                    } else {
                        safe &= clean_error(rc);
                    }
                    hm_free(own);
                }
                hm_zip_close(&z);
            }
            free(p);
        }
        /* and the flips did reach past the open: names and headers that
         * only the central directory repeats, read back intact */
        CHECKF(safe && opened > 0 && reads > 0, "safe %d, opened %d of %zu flips, %d members read", safe, opened, b.n,
               reads);
        free(b.p);
    }
    /* An archive comment is skipped; a short zip64 extra field is an error. */
    hm_zip z;
    buf c = build_zip(m, 3, 0);
    c.p[c.n - 2] = 5;
    put(&c, "hello", 5);
    CHECK(hm_zip_open(c.p, c.n, "zip", &z) == HM_OK && z.n == 3);
    hm_zip_close(&z);
    free(c.p);
    c = build_zip(m, 1, 1);
    size_t cd = 0;
    for (size_t i = 0; i + 4 <= c.n; i++)
        if (!memcmp(c.p + i, "PK\1\2", 4)) cd = i;
    CHECK(cd && c.p[cd + 46 + 3 + 2] == 24);
    c.p[cd + 46 + 3 + 2] = 8; /* the zip64 extra now holds one of three values */
    CHECK(clean_error(hm_zip_open(c.p, c.n, "zip", &z)) && strstr(hm_errmsg(), "extra"));
    free(c.p);

    /* Not a zip at all; and an EOCD claiming a huge directory. */
    CHECK(clean_error(hm_zip_open("hello", 5, "zip", &z)));
    buf e = {0};
    u32(&e, 0x06054b50), u16(&e, 0), u16(&e, 0), u16(&e, 5000), u16(&e, 5000), u32(&e, 0xFFFFFF), u32(&e, 0), u16(&e, 0);
    CHECK(clean_error(hm_zip_open(e.p, e.n, "zip", &z)));
    CHECK(strstr(hm_errmsg(), "central directory") != NULL);
    free(e.p);
}

static hm_pk_obj *load(const buf *b, hm_pickle **pk, int *rc) {
    hm_pk_obj *root = NULL;
    uint8_t *p = dup_prefix(b, b->n);
    *rc = hm_pickle_load(p, b->n, "pickle", pk, &root);
    free(p); /* strings point into p: only kinds and numbers are inspected */
    return root;
}

static void test_pickle_values(void) {
    buf b = ckpt_pickle(1, "0");
    hm_pickle *pk;
    hm_pk_obj *root;
    CHECK(hm_pickle_load(b.p, b.n, "pickle", &pk, &root) == HM_OK);
    CHECK(root && root->kind == HM_PK_DICT);
    hm_pk_obj *e = hm_pk_dict_get(root, "epoch"), *sd = hm_pk_dict_get(root, "state_dict");
    CHECK(e && e->kind == HM_PK_INT && e->u.i == 5);
    CHECK(sd && sd->kind == HM_PK_DICT && sd->u.seq.n == 14);
    hm_pk_obj *w = hm_pk_dict_get(sd, "wt");
    CHECK(w && w->kind == HM_PK_TENSOR && w->u.tensor->ndim == 2 && w->u.tensor->stride[1] == 4);
    CHECK(w && w->u.tensor->storage->u.storage.dtype == HM_DT_F32 && w->u.tensor->storage->u.storage.numel == 12);
    hm_pk_obj *hp = hm_pk_dict_get(root, "hyper_parameters");
    CHECK(hp && hp->kind == HM_PK_OBJECT && hp->u.obj.state && hp->u.obj.state->kind == HM_PK_DICT);
    hm_pk_obj *lr = hm_pk_dict_get(hp->u.obj.state, "lr");
    CHECK(lr && lr->kind == HM_PK_FLOAT && lr->u.f == 1.5);
    hm_pk_obj *loops = hm_pk_dict_get(root, "loops");
    hm_pk_obj *l = hm_pk_dict_get(loops, "list");
    CHECK(l && l->kind == HM_PK_LIST && l->u.seq.n == 3 && l->u.seq.v[0]->u.i == -3);
    CHECK(hm_pk_dict_get(loops, "big") && hm_pk_dict_get(loops, "big")->kind == HM_PK_BIGINT);
    CHECK(hm_pk_dict_get(loops, "path") && hm_pk_dict_get(loops, "path")->kind == HM_PK_OBJECT);
    CHECK(hm_pk_dict_get(loops, "again") == sd); /* memo shares the node */
    hm_pickle_free(pk);
    free(b.p);

    /* Other opcodes: text INT/GET/PUT, STACK_GLOBAL, sets, MEMOIZE, DUP, POP. */
    const char text[] = "\x80\x04\x95\x10\0\0\0\0\0\0\0(I42\nN0I01\nL-7L\nF2.5\np3\ng3\n"
                        "\x8c\x0b" "collections\x94\x8c\x0bOrderedDict\x94\x93)R\x8f(K\x01K\x02\x90"
                        "(K\x03\x91\x32\x30\x8b\x02\0\0\0\xff\xff" "C\x01z\x8e\x01\0\0\0\0\0\0\0y" "l.";
    buf t = {0};
    put(&t, text, sizeof text - 1);
    CHECK(hm_pickle_load(t.p, t.n, "pickle", &pk, &root) == HM_OK);
    CHECK(root && root->kind == HM_PK_LIST && root->u.seq.n == 11);
    if (root && root->u.seq.n == 11) {
        hm_pk_obj **v = root->u.seq.v;
        CHECK(v[0]->kind == HM_PK_INT && v[0]->u.i == 42 && v[1]->kind == HM_PK_BOOL && v[1]->u.i == 1);
        CHECK(v[2]->u.i == -7 && v[3]->kind == HM_PK_FLOAT && v[3]->u.f == 2.5 && v[4] == v[3]);
        CHECK(v[5]->kind == HM_PK_DICT && v[6]->kind == HM_PK_SET && v[6]->u.seq.n == 2);
        CHECK(v[7]->kind == HM_PK_SET && v[7]->u.seq.n == 1 && v[8]->kind == HM_PK_INT && v[8]->u.i == -1);
        CHECK(v[9]->kind == HM_PK_BYTES && v[9]->u.str.len == 1 && v[9]->u.str.p[0] == 'z');
        CHECK(v[10]->kind == HM_PK_BYTES && v[10]->u.str.len == 1 && v[10]->u.str.p[0] == 'y');
    }
    hm_pickle_free(pk);
    free(t.p);

    /* A list that contains itself must not hang anything. */
    buf cyc = {0};
    put(&cyc, "\x80\x02]q\x00h\x00\x61.", 9);
    CHECK(hm_pickle_load(cyc.p, cyc.n, "pickle", &pk, &root) == HM_OK && root->u.seq.v[0] == root);
    hm_pickle_free(pk);
    free(cyc.p);
}

static void expect_bad(const char *bytes, size_t n, const char *why) {
    buf b = {0};
    put(&b, bytes, n);
    hm_pickle *pk = NULL;
    int rc;
    hm_pk_obj *root = load(&b, &pk, &rc);
    if (!clean_error(rc) || root || pk) fprintf(stderr, "pickle case '%s' not rejected\n", why);
    CHECK(clean_error(rc) && !root && !pk);
    hm_pickle_free(pk);
    free(b.p);
}
#define BAD(lit, why) expect_bad(lit, sizeof lit - 1, why)

static void test_pickle_malformed(void) {
    BAD("", "empty");
    BAD("\x80\x02N", "no STOP");
    BAD("\x80\x02\xff.", "unknown opcode");
    BAD("\x80\x09N.", "protocol 9");
    BAD(".", "STOP on empty stack");
    BAD("h\x05.", "memo get unset");
    BAD("Nj\xff\xff\xff\x7f.", "memo get huge");
    BAD("Nr\xff\xff\xff\xff.", "memo put huge");
    BAD("X\xff\xff\xff\xff" "abc.", "huge BINUNICODE");
    BAD("\x8d\xff\xff\xff\xff\xff\xff\xff\xff.", "huge BINUNICODE8");
    BAD("\x8b\xff\xff\xff\xff.", "negative LONG4");
    BAD("T\xff\xff\xff\xff.", "negative BINSTRING");
    BAD("Na.", "APPEND without list");
    BAD("K\x01]a.", "APPEND onto int");
    BAD("}(K\x01u.", "odd SETITEMS");
    BAD("(K\x01" "d.", "odd DICT");
    BAD("t.", "TUPLE without MARK");
    BAD("0.", "POP on empty");
    BAD("1.", "POP_MARK without MARK");
    BAD("(.", "STOP with only a mark");
    BAD("ctorch._utils\n_rebuild_tensor_v2\nK\x01R.", "REDUCE non-tuple");
    BAD("ctorch._utils\n_rebuild_tensor_v2\n)R.", "rebuild no args");
    BAD("ctorch._utils\n_rebuild_tensor_v2\n(K\x01K\x00))tR.", "rebuild bad storage");
    BAD("I12x\n.", "bad INT text");
    BAD("I99999999999999999999\n.", "INT overflow");
    BAD("F\n.", "empty FLOAT");
    BAD("cmodule_without_newline", "unterminated GLOBAL");
    BAD("\x8c\x01\x61\x93.", "STACK_GLOBAL one arg");
    BAD("K\x01K\x02\x93.", "STACK_GLOBAL ints");
    BAD("](N\x90.", "ADDITEMS on list");
    BAD("]N\x90.", "ADDITEMS without MARK");
    BAD("\x97.", "NEXT_BUFFER");
    BAD("S'abc'\n.", "protocol 0 STRING");

    /* Deep nesting, a huge stack and a huge memo hit the limits. */
    buf b = {0};
    for (int i = 0; i < 100000; i++) u8(&b, '(');
    u8(&b, '.');
    hm_pickle *pk;
    int rc;
    CHECK(!load(&b, &pk, &rc) && clean_error(rc) && strstr(hm_errmsg(), "MARK"));
    b.n = 0;
    for (int i = 0; i < 3000000; i++) u8(&b, 'N');
    u8(&b, '.');
    CHECK(!load(&b, &pk, &rc) && clean_error(rc) && strstr(hm_errmsg(), "stack"));
    b.n = 0;
    u8(&b, 'N'), u8(&b, 'r'), u32(&b, 50000000), u8(&b, '.');
    CHECK(!load(&b, &pk, &rc) && clean_error(rc) && strstr(hm_errmsg(), "memo"));
    /* _rebuild_from_type_v2 chains are bounded: A_k = (F, None, A_k-1). */
    b.n = 0;
    pk_global(&b, "torch._tensor", "_rebuild_from_type_v2"), put(&b, "q\0" "0", 3);
    pk_global(&b, "torch._utils", "_rebuild_tensor_v2"), put(&b, "N)\x87", 3);
    for (int i = 0; i < 20; i++) put(&b, "q\x01" "0h\0Nh\x01\x87", 9);
    put(&b, "q\x01" "0h\0h\x01R.", 9);
    CHECK(!load(&b, &pk, &rc) && clean_error(rc) && strstr(hm_errmsg(), "nested"));
    free(b.p);
}

static void test_pickle_fuzz(void) {
    buf b = ckpt_pickle(1, "0");
    int ok = 1;
    for (size_t len = 0; len < b.n; len++) {
        uint8_t *p = dup_prefix(&b, len);
        hm_pickle *pk;
        hm_pk_obj *root;
        int rc = hm_pickle_load(p, len, "pickle", &pk, &root);
        ok &= clean_error(rc);
        free(p);
    }
    CHECK(ok);
    uint32_t seed = 12345;
    for (int it = 0; it < 20000; it++) {
        uint8_t *p = dup_prefix(&b, b.n);
        for (int k = 0; k < 1 + it % 4; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % b.n;
            seed = seed * 1103515245u + 12345u;
            p[at] = (it & 1) ? (uint8_t)(seed >> 16) : p[at] ^ (uint8_t)(1u << ((seed >> 16) & 7));
        }
        hm_pickle *pk;
        hm_pk_obj *root;
        if (hm_pickle_load(p, b.n, "pickle", &pk, &root) == HM_OK) hm_pickle_free(pk);
        else ok &= clean_error(HM_E_FORMAT);
        free(p);
    }
    CHECK(ok);
    free(b.p);
}

static void check_good_ckpt(const hm_ckpt *c) {
    CHECK(hm_ckpt_count(c) == 6);
    const hm_tensor *w = hm_ckpt_find(c, "w"), *wt = hm_ckpt_find(c, "wt"), *b = hm_ckpt_find(c, "b");
    const hm_tensor *h = hm_ckpt_find(c, "h"), *s = hm_ckpt_find(c, "s"), *col = hm_ckpt_find(c, "col");
    CHECK(w && wt && b && h && s && col && !hm_ckpt_find(c, "step") && !hm_ckpt_find(c, "epoch"));
    if (!(w && wt && b && h && s && col)) return;
    CHECK(w->dtype == HM_DT_F32 && w->ndim == 2 && w->shape[0] == 3 && w->shape[1] == 4 && w->numel == 12);
    CHECK(w->contiguous && ((const float *)w->data)[11] == 11.0f);
    CHECK(!wt->contiguous && wt->data == w->data && wt->stride[0] == 1 && wt->stride[1] == 4);
    CHECK(b->dtype == HM_DT_I64 && ((const int64_t *)b->data)[0] == 1 && b->numel == 5 && b->contiguous);
    CHECK(h->dtype == HM_DT_F16 && ((const uint16_t *)h->data)[2] == 0xB800);
    CHECK(s->ndim == 0 && s->numel == 1 && s->contiguous && *(const float *)s->data == 5.0f);
    CHECK(col->contiguous); /* size-1 dims may have any stride */
    CHECK(!strcmp(hm_ckpt_at(c, 0)->name, "b") && !hm_ckpt_at(c, 6) && !hm_ckpt_at(c, -1));
}

static int open_ckpt(const ckpt_buf *cb, size_t len, hm_ckpt **c) {
    uint8_t *p = dup_prefix(&cb->zip, len);
    int rc = hm_ckpt_open_mem(p, len, c);
    if (rc == HM_OK) hm_ckpt_close(*c);
    free(p);
    return rc;
}

static void test_ckpt(void) {
    for (int z64 = 0; z64 < 2; z64++) {
        ckpt_buf cb = make_ckpt(z64 ? "hamer" : "archive", 1, z64, sizeof f32_data, 0);
        hm_ckpt *c;
        CHECK(hm_ckpt_open_mem(cb.zip.p, cb.zip.n, &c) == HM_OK);
        check_good_ckpt(c);
        hm_ckpt_release_pages(c);
        hm_ckpt_close(c);

        /* Truncated at every byte: always an error. */
        int ok = 1;
        for (size_t len = 0; len < cb.zip.n; len++) ok &= clean_error(open_ckpt(&cb, len, &c));
        CHECK(ok);
        /* Every byte flipped: an error or a valid index, never a crash. */
        for (size_t i = 0; i < cb.zip.n; i++) {
            uint8_t *p = dup_prefix(&cb.zip, cb.zip.n);
            p[i] ^= 0xFF;
            int rc = hm_ckpt_open_mem(p, cb.zip.n, &c);
            if (rc == HM_OK) {
                for (int k = 0; k < hm_ckpt_count(c); k++) {
                    const hm_tensor *t = hm_ckpt_at(c, k);
                    ok &= t->ndim <= HM_MAX_DIMS && t->numel >= 0;
                }
                hm_ckpt_close(c);
            } else {
                ok &= clean_error(rc);
            }
            free(p);
        }
        CHECK(ok);
        /* Several random byte changes at once. */
        uint32_t seed = 99;
        for (int it = 0; it < 3000; it++) {
            uint8_t *p = dup_prefix(&cb.zip, cb.zip.n);
            for (int k = 0; k < 1 + it % 5; k++) {
                seed = seed * 1103515245u + 12345u;
                p[(seed >> 4) % cb.zip.n] = (uint8_t)(seed >> 24);
            }
            int rc = hm_ckpt_open_mem(p, cb.zip.n, &c);
            if (rc == HM_OK) hm_ckpt_close(c);
            else ok &= clean_error(rc);
            free(p);
        }
        CHECK(ok);
        free(cb.zip.p);
        free(cb.pkl.p);
    }

    /* Plain state dict at the top level; non-tensors skipped. */
    ckpt_buf cb = make_ckpt("model", 0, 0, sizeof f32_data, 0);
    hm_ckpt *c;
    CHECK(hm_ckpt_open_mem(cb.zip.p, cb.zip.n, &c) == HM_OK);
    check_good_ckpt(c);
    hm_ckpt_close(c);
    free(cb.zip.p), free(cb.pkl.p);

    /* Storage too small for the view: the error names the key. */
    cb = make_ckpt("archive", 1, 1, 40, 0);
    CHECK(clean_error(hm_ckpt_open_mem(cb.zip.p, cb.zip.n, &c)) && strstr(hm_errmsg(), "too small") &&
          strstr(hm_errmsg(), "archive/data/0"));
    free(cb.zip.p), free(cb.pkl.p);

    /* Compressed storages are refused (tensors must be mappable). */
    cb = make_ckpt("archive", 1, 0, sizeof f32_data, 1);
    CHECK(clean_error(hm_ckpt_open_mem(cb.zip.p, cb.zip.n, &c)) && strstr(hm_errmsg(), "compressed"));
    free(cb.zip.p), free(cb.pkl.p);

    /* Missing storage member. */
    buf pkl = ckpt_pickle(1, "9");
    member m[3] = {{"archive/data.pkl", pkl.p, pkl.n, 0}, {"archive/data/0", f32_data, 48, 0},
                   {"archive/data/1", i64_data, 48, 0}};
    buf z = build_zip(m, 3, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "'w'") &&
          strstr(hm_errmsg(), "archive/data/9"));
    free(z.p);

    /* No data.pkl; no prefix; top level not a dict; deflated data.pkl is fine. */
    member m2[2] = {{"archive/other", "x", 1, 0}, {"archive/data/0", f32_data, 48, 0}};
    z = build_zip(m2, 2, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "data.pkl"));
    free(z.p);
    member m3[1] = {{"noprefix", "x", 1, 0}};
    z = build_zip(m3, 1, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "prefix"));
    free(z.p);
    member m4[1] = {{"a/data.pkl", "\x80\x02]q\x00.", 6, 0}};
    z = build_zip(m4, 1, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "not a dict"));
    free(z.p);
    member m5[4] = {{"archive/data.pkl", pkl.p, pkl.n, 1}, {"archive/data/9", f32_data, 48, 0},
                    {"archive/data/1", i64_data, 48, 0}, {"archive/data/2", f16_data, 8, 0}};
    z = build_zip(m5, 4, 1);
    /* 'wt' and 's' use storage "0", which is absent here. */
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "archive/data/0"));
    free(z.p);
    free(pkl.p);

    /* Hostile names (newlines) still give a one-line message. */
    buf nl = {0};
    u8(&nl, 0x80), u8(&nl, 2), u8(&nl, '}'), u8(&nl, '(');
    pk_str(&nl, "bad\nkey"), pk_tensor(&nl, "FloatStorage", "x\ny", 12, 0, 1, (int64_t[]){2}, (int64_t[]){1}, "cpu");
    u8(&nl, 'u'), u8(&nl, '.');
    member m7[1] = {{"archive/data.pkl", nl.p, nl.n, 0}};
    z = build_zip(m7, 1, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "bad?key"));
    free(z.p);
    free(nl.p);

    /* Unknown storage classes and too many dims are refused by key. */
    buf uk = {0};
    u8(&uk, 0x80), u8(&uk, 2), u8(&uk, '}'), u8(&uk, '(');
    pk_str(&uk, "cplx"), pk_tensor(&uk, "ComplexFloatStorage", "0", 6, 0, 1, (int64_t[]){2}, (int64_t[]){1}, "cpu");
    u8(&uk, 'u'), u8(&uk, '.');
    member m8[2] = {{"archive/data.pkl", uk.p, uk.n, 0}, {"archive/data/0", f32_data, 48, 0}};
    z = build_zip(m8, 2, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "'cplx'"));
    free(z.p);
    uk.n = 0;
    u8(&uk, 0x80), u8(&uk, 2), u8(&uk, '}'), u8(&uk, '(');
    pk_str(&uk, "nine"),
        pk_tensor(&uk, "FloatStorage", "0", 12, 0, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 2},
                  (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, "cpu");
    u8(&uk, 'u'), u8(&uk, '.');
    m8[0].data = uk.p, m8[0].len = uk.n;
    z = build_zip(m8, 2, 0);
    CHECK(clean_error(hm_ckpt_open_mem(z.p, z.n, &c)) && strstr(hm_errmsg(), "'nine'") && strstr(hm_errmsg(), "dimensions"));
    free(z.p);
    free(uk.p);

    /* Duplicate keys: the later value wins. */
    buf d = {0};
    u8(&d, 0x80), u8(&d, 2), u8(&d, '}'), u8(&d, '(');
    pk_str(&d, "k"), pk_tensor(&d, "FloatStorage", "0", 12, 0, 1, (int64_t[]){2}, (int64_t[]){1}, "cpu");
    pk_str(&d, "k"), pk_tensor(&d, "FloatStorage", "0", 12, 3, 1, (int64_t[]){2}, (int64_t[]){1}, "cpu");
    u8(&d, 'u'), u8(&d, '.');
    member m6[2] = {{"archive/data.pkl", d.p, d.n, 0}, {"archive/data/0", f32_data, 48, 0}};
    z = build_zip(m6, 2, 0);
    CHECK(hm_ckpt_open_mem(z.p, z.n, &c) == HM_OK && hm_ckpt_count(c) == 1 &&
          *(const float *)hm_ckpt_find(c, "k")->data == 3.0f);
    hm_ckpt_close(c);

    /* Misaligned storage (odd offset inside a caller buffer) is refused. */
    uint8_t *odd = malloc(z.n + 1);
    memcpy(odd + 1, z.p, z.n);
    CHECK(clean_error(hm_ckpt_open_mem(odd + 1, z.n, &c)) && strstr(hm_errmsg(), "aligned"));
    free(odd);

    /* From a file, with page release; and a missing file. */
    char path[] = "/tmp/test_ckpt_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0 && write(fd, z.p, z.n) == (ssize_t)z.n);
    close(fd);
    CHECK(hm_ckpt_open(path, &c) == HM_OK && hm_ckpt_count(c) == 1);
    hm_ckpt_release_pages(c);
    CHECK(*(const float *)hm_ckpt_find(c, "k")->data == 3.0f);
    hm_ckpt_close(c);
    unlink(path);
    free(z.p);
    free(d.p);
    CHECK(hm_ckpt_open("/nonexistent/x.ckpt", &c) == HM_E_IO && clean_error(HM_E_IO) && !c);

    CHECK(hm_dtype_size(HM_DT_BF16) == 2 && hm_dtype_size(HM_DT_I64) == 8 && !strcmp(hm_dtype_name(HM_DT_BOOL), "bool"));
}

int main(void) {
    test_zip();
    test_pickle_values();
    test_pickle_malformed();
    test_pickle_fuzz();
    test_ckpt();
    printf("test_ckpt: %d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
