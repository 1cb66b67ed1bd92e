/* test_pack - the packed model file (model_pack.c) against hostile edits.
 *
 * The tiny fuzz-seed checkpoints (fuzz/corpus/model) are packed, read back
 * into memory, edited one field at a time and resealed (checksums
 * recomputed, so each edit reaches the check it is aimed at), and every
 * load must fail with a one-line message naming what is wrong. Also: the
 * round trip is exact (packing a model loaded from a packed file gives the
 * same bytes), every byte of the header and of the first table entries
 * flipped loads or fails cleanly, and the ISA / low-precision / precision
 * mismatches are refused rather than repacked.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "check.h"
#include "format/ckpt.h"
#include "kernels/gemm_lowp.h"
#include "backend/cpu/cpu.h"
#include "load/load.h"
#include "model/model.h"

/* Header fields (model_pack.c's pack_header) and table entries. */
#define OFF_VERSION 8
#define OFF_NSECT 32
#define OFF_PRECISION 48
#define OFF_ISA 52
#define OFF_CFG 64        /* depth, dim, heads, mlp, gh, gw, ntok, hdepth, hdim, hheads, hinner, hmlp */
#define OFF_SCHEME 112
#define OFF_BACKEND 224   /* after the 112-byte scheme */
#define HDR 256
#define ENTRY 96
#define E_OFFSET 64
#define E_BYTES 72

typedef struct {
    uint8_t *p;
    size_t n;
} blob;

static void wr32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void wr64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t rd64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}
static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static blob slurp(const char *path) {
    blob b = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return b;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (n > 0 && posix_memalign((void **)&b.p, 64, (size_t)n + 64) == 0 && fread(b.p, 1, (size_t)n, f) == (size_t)n)
        b.n = (size_t)n;
    fclose(f);
    return b;
}

static blob dup_blob(blob b) {
    blob c = {0};
    if (posix_memalign((void **)&c.p, 64, b.n + 64) == 0) {
        memcpy(c.p, b.p, b.n);
        c.n = b.n;
    }
    return c;
}

static hm_model *from_ckpt(const char *name, int prec) {
    char path[4096];
    const char *f = __FILE__, *slash = strrchr(f, '/');
    snprintf(path, sizeof path, "%.*s/../../fuzz/corpus/model/%s", slash ? (int)(slash - f) : 1, slash ? f : ".", name);
    hm_ckpt *ck;
    hm_model *m = NULL;
    if (hm_ckpt_open(path, &ck)) return NULL;
    hm_model_from_ckpt(ck, path, &(hm_load_opts){.precision = prec}, &m);
    hm_ckpt_close(ck);
    return m;
}

/* Table entry i of the file in b. */
static uint8_t *entry(blob b, int i) { return b.p + HDR + (size_t)i * ENTRY; }

static int find_section(blob b, const char *name) {
    int n = (int)rd32(b.p + OFF_NSECT);
    for (int i = 0; i < n; i++)
        if (!strcmp((const char *)entry(b, i), name)) return i;
    return -1;
}

/* Load c (after resealing unless raw); must fail with `want` in a one-line
 * message. */
static int refused(blob c, int raw, int prec, const char *want) {
    if (!raw) hm_pack_reseal(c.p, c.n);
    hm_model *m = NULL;
    int rc = hm_model_from_packed_mem(c.p, c.n, "t.hpk", &(hm_load_opts){.precision = prec}, &m);
    hm_model_free(m);
    int ok = clean_error(rc) && strstr(hm_errmsg(), want);
    if (!ok) fprintf(stderr, "  expected an error with '%s', got rc %d: %s\n", want, rc, hm_errmsg());
    return ok;
}

typedef void (*edit_fn)(blob c, int arg);

/* A fresh copy of b, edited, then refused(). */
static int edited(blob b, edit_fn fn, int arg, int raw, int prec, const char *want) {
    blob c = dup_blob(b);
    fn(c, arg);
    int ok = refused(c, raw, prec, want);
    free(c.p);
    return ok;
}

static void set_magic(blob c, int v) { c.p[0] = (uint8_t)v; }
static void set_version(blob c, int v) { wr32(c.p + OFF_VERSION, (uint32_t)v); }
static void set_precision(blob c, int v) { wr32(c.p + OFF_PRECISION, (uint32_t)v); }
static void set_isa(blob c, int v) { wr32(c.p + OFF_ISA, (uint32_t)v); }
static void set_cfg(blob c, int v) { wr32(c.p + OFF_CFG + 4 * (v >> 24), (uint32_t)(v & 0xffffff)); }
static void big_decoder(blob c, int v) {
    wr32(c.p + OFF_CFG + 4 * 7, 65536);        /* hdepth */
    wr32(c.p + OFF_CFG + 4 * 9, 1024);         /* hheads */
    wr32(c.p + OFF_CFG + 4 * 10, 65536);       /* hinner */
}
static void set_scheme(blob c, int v) { c.p[OFF_SCHEME] ^= 1; }
/* v 0: another backend's name; 1: none; 2: not terminated */
static void set_backend(blob c, int v) {
    if (v == 2) memset(c.p + OFF_BACKEND, 'x', 16);
    else snprintf((char *)c.p + OFF_BACKEND, 16, "%s", v ? "" : "cuda");
}
static void flip_table(blob c, int i) { entry(c, i)[E_BYTES] ^= 0x40; }
static void flip_data(blob c, int i) { c.p[rd64(entry(c, i) + E_OFFSET) + 3] ^= 1; }
static void misalign(blob c, int i) { wr64(entry(c, i) + E_OFFSET, rd64(entry(c, i) + E_OFFSET) + 4); }
static void past_end(blob c, int i) { wr64(entry(c, i) + E_BYTES, UINT64_MAX - 8); }
static void overlap(blob c, int i) { wr64(entry(c, i) + E_OFFSET, rd64(entry(c, i - 1) + E_OFFSET)); }
static void shrink(blob c, int i) { wr64(entry(c, i) + E_BYTES, rd64(entry(c, i) + E_BYTES) - 4); }
static void rename_section(blob c, int i) { entry(c, i)[0] ^= 0x20; }
static void matrix_prec(blob c, int rec) { wr32(c.p + rd64(entry(c, 0) + E_OFFSET) + 80 * rec + 56, 1); }
static void lp_header(blob c, int i) { wr32(c.p + rd64(entry(c, i) + E_OFFSET) + 4, 16); }
static void lp_kind(blob c, int i) { wr32(c.p + rd64(entry(c, i) + E_OFFSET), HM_LOWP_INT8); }
static void int_at(blob c, int i) { wr32(c.p + rd64(entry(c, i & 0xffff) + E_OFFSET) + 4 * (i >> 16), 9999); }

static void test_fp32(void) {
    hm_model *m = from_ckpt("tiny_mano.ckpt", HM_PREC_FP32);
    CHECK(m != NULL);
    if (!m) return;
    char path[] = "/tmp/test_pack_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    close(fd);
    CHECK(hm_model_save_packed(m, path) == HM_OK);
    hm_model_free(m);
    blob b = slurp(path);
    CHECK(b.n > HDR);
    if (!b.n) return;

    /* Round trip: a model loaded from the file packs to the same bytes. */
    hm_model *p = NULL;
    CHECK(hm_model_from_packed_mem(b.p, b.n, "t.hpk", &(hm_load_opts){.precision = HM_PREC_FP32}, &p) == HM_OK);
    CHECK(p && p->has_mano && p->pack_map == b.p);
    if (p) {
        CHECK(hm_model_save_packed(p, path) == HM_OK);
        blob again = slurp(path);
        CHECK(again.n == b.n && !memcmp(again.p, b.p, b.n));
        free(again.p);
        hm_model_free(p);
    }
    unlink(path);

    int fc1 = find_section(b, "blocks.0.fc1.w"), faces = find_section(b, "mano.faces");
    int parents = find_section(b, "mano.parents"), last = (int)rd32(b.p + OFF_NSECT) - 1;
    CHECK(fc1 > 1 && faces > 1 && parents > 1);
    CHECK(edited(b, set_magic, 'X', 0, 0, "bad magic"));
    /* the format before the head's kv_all followed the model's precision,
     * the one before the header named the backend, the one before MANO's PCA
     * space, the one before fast's attention projection was int8, and one
     * from the future */
    CHECK(edited(b, set_version, 1, 0, 0, "version 1 is not supported"));
    CHECK(edited(b, set_version, 2, 0, 0, "version 2 is not supported"));
    CHECK(edited(b, set_version, 3, 0, 0, "version 3 is not supported"));
    CHECK(edited(b, set_version, 4, 0, 0, "version 4 is not supported"));
    CHECK(edited(b, set_version, 6, 0, 0, "version 6 is not supported"));
    CHECK(edited(b, set_precision, 7, 0, 0, "precision 7"));
    CHECK(edited(b, set_isa, 4, 0, 0, "layout ISA 4"));
    CHECK(edited(b, set_scheme, 0, 0, 0, "scheme"));
    CHECK(edited(b, set_backend, 0, 0, 0, "packed for the cuda backend, not cpu"));
    CHECK(edited(b, set_backend, 1, 0, 0, "backend name missing"));
    CHECK(edited(b, set_backend, 2, 0, 0, "backend name missing or not terminated"));
    CHECK(edited(b, set_cfg, (1 << 24) | 81, 0, 0, "backbone width 81"));
    CHECK(edited(b, set_cfg, (0 << 24) | 60000, 0, 0, "cannot hold"));
    CHECK(edited(b, set_cfg, (10 << 24) | 65472, 0, 0, "invalid"));
    CHECK(edited(b, big_decoder, 0, 0, 0, "too many"));
    CHECK(edited(b, flip_table, fc1, 1, 0, "header or section table"));
    CHECK(edited(b, flip_data, fc1, 1, 0, "section 'blocks.0.fc1.w': checksum mismatch"));
    CHECK(edited(b, misalign, fc1, 0, 0, "not 64-byte aligned"));
    CHECK(edited(b, past_end, last, 0, 0, "extends past the end"));
    CHECK(edited(b, overlap, fc1, 0, 0, "overlaps"));
    CHECK(edited(b, shrink, fc1, 0, 0, "'blocks.0.fc1.w' has"));
    CHECK(edited(b, rename_section, fc1, 0, 0, "expected 'blocks.0.fc1.w'"));
    CHECK(edited(b, matrix_prec, 2, 0, 0, "not what a fp32 model packs"));
    CHECK(edited(b, int_at, faces, 0, 0, "face index"));
    CHECK(edited(b, int_at, (3 << 16) | parents, 0, 0, "kinematic tree"));
    CHECK(refused(b, 1, HM_PREC_FAST, "convert the checkpoint again with --precision fast"));

    /* Truncated anywhere, or with bytes appended. */
    size_t cuts[] = {0, 7, 100, HDR + 5, b.n / 2, b.n - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        blob c = dup_blob(b);
        c.n = cuts[i];
        CHECKF(refused(c, 1, 0, cuts[i] < 8 ? "bad magic" : "truncated"), "cut at %zu", cuts[i]);
        free(c.p);
    }
    blob c = dup_blob(b);
    c.n += 64;
    memset(c.p + b.n, 0, 64);
    CHECK(refused(c, 1, 0, "trailing data"));
    free(c.p);

    /* Not 64-byte aligned in memory. */
    blob d = dup_blob(b);
    memmove(d.p + 8, d.p, d.n);
    hm_model *x = NULL;
    CHECK(hm_model_from_packed_mem(d.p + 8, d.n, "t.hpk", &(hm_load_opts){.precision = 0}, &x) == HM_E_ARG && !x);
    free(d.p);

    /* Every bit of the header and of the first table entries: loads or
     * fails with a message, never crashes (ASan build). */
    size_t span = HDR + 20 * ENTRY, loaded = 0;
    CHECK(rd32(b.p + OFF_NSECT) > 20);
    for (size_t i = 0; i < span; i++) {
        blob e = dup_blob(b);
        e.p[i] ^= (uint8_t)(1u << (i % 8));
        hm_pack_reseal(e.p, e.n);
        hm_model *y = NULL;
        int rc = hm_model_from_packed_mem(e.p, e.n, "t.hpk", &(hm_load_opts){.precision = 0}, &y);
        if (rc == HM_OK) loaded++;
        else if (!clean_error(rc)) CHECKF(0, "flip at byte %zu: rc %d, message '%s'", i, rc, hm_errmsg());
        hm_model_free(y);
        free(e.p);
    }
    /* What still loads: name padding, reserved bytes, resealed checksums. */
    printf("test_pack: %zu of %zu single-bit header/table flips still load\n", loaded, span);

    /* Packed for AVX-512, run with AVX2 forced (HAMER_ISA=avx2 does the same). */
    if (hm_cpu_isa() == HM_ISA_AVX512 && rd32(b.p + OFF_ISA) == HM_ISA_AVX512) {
        CHECK(hm_isa_force(HM_ISA_AVX2) == HM_OK);
        CHECK(refused(b, 1, 0, "active ISA is avx2"));
        CHECK(hm_isa_force(HM_ISA_AVX512) == HM_OK);
    }
    free(b.p);
}

static void test_fast(void) {
    hm_model *m = from_ckpt("tiny.ckpt", HM_PREC_FAST);
    if (!m) {
        printf("test_pack: fast precision unavailable here (%s); skipped\n", hm_errmsg());
        return;
    }
    char path[] = "/tmp/test_pack_XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    CHECK(hm_model_save_packed(m, path) == HM_OK);
    hm_model_free(m);
    blob b = slurp(path);
    unlink(path);
    hm_model *p = NULL;
    CHECK(hm_model_from_packed_mem(b.p, b.n, "t.hpk", &(hm_load_opts){.precision = HM_PREC_FAST}, &p) == HM_OK);
    CHECK(p && !p->has_mano && ((hm_cpu_model *)p->bm)->blocks[0].qkv.prec == HM_PREC_FAST);
    /* the attention projection: int8 with fine weights */
    CHECK(p && hm_lowp_packed_kind(&((hm_cpu_model *)p->bm)->blocks[0].proj) == HM_LOWP_INT8F);
    hm_model_free(p);
    int proj = find_section(b, "blocks.0.proj.lp");
    CHECK(proj > 0);
    CHECK(edited(b, lp_kind, proj, 0, HM_PREC_FAST, "low-precision block header"));
    CHECK(refused(b, 1, HM_PREC_FP32, "packed in precision fast but fp32 was requested"));
    int qkv = find_section(b, "blocks.0.qkv.lp");
    CHECK(qkv > 0);
    CHECK(edited(b, lp_header, qkv, 0, HM_PREC_FAST, "low-precision block header"));
    /* Another low-precision variant active than the file's. */
    CHECK(hm_lowp_force_kind(HM_LOWP_BF16) == HM_OK);
    CHECK(refused(b, 1, HM_PREC_FAST, "low-precision kind int8"));
    CHECK(hm_lowp_force_kind(HM_LOWP_INT8) == HM_OK);
    free(b.p);
}

int main(void) {
    test_fp32();
    test_fast();
    printf("test_pack: %d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
