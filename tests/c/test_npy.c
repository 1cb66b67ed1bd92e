/* test_npy - .npy parsing (good and bad headers), .npz read of stored and
 * deflated members, and the npz writer round trip. */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "format/npy.h"
#include "core/util.h"
#include "format/zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"

static char dir[64];

static const char *tmp(const char *name) {
    static char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

/* .npy bytes: magic, version, header length field, header text padded to a
 * 16-byte boundary with a final '\n', then the data. */
static size_t make_npy(uint8_t *out, int major, const char *hdr, const void *data, size_t n) {
    size_t pre = major == 1 ? 10 : 12, h = strlen(hdr);
    size_t total = (pre + h + 1 + 15) / 16 * 16, hl = total - pre;
    memcpy(out, "\x93NUMPY", 6);
    out[6] = (uint8_t)major;
    out[7] = 0;
    for (size_t i = 0; i < pre - 8; i++) out[8 + i] = (uint8_t)(hl >> (8 * i));
    memcpy(out + pre, hdr, h);
    memset(out + pre + h, ' ', hl - h - 1);
    out[total - 1] = '\n';
    if (n) memcpy(out + total, data, n);
    return total + n;
}

static int parse_copy(const uint8_t *b, size_t n, hm_array *a) {
    uint8_t *p = malloc(n ? n : 1); /* exact size, so ASan sees overreads */
    if (n) memcpy(p, b, n);
    int rc = hm_npy_parse(p, n, "test.npy", a);
    free(p);
    return rc;
}

static void test_parse_good(void) {
    uint8_t b[1024];
    float f[6] = {1, 2, 3, 4, 5, 6};
    hm_array a;
    for (int v = 1; v <= 3; v++) {
        size_t n = make_npy(b, v, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f, sizeof f);
        CHECK(parse_copy(b, n, &a) == HM_OK && a.dtype == HM_DT_F32 && a.ndim == 2 && a.shape[0] == 2 &&
              a.shape[1] == 3 && a.numel == 6 && ((float *)a.data)[5] == 6.0f);
        CHECK(((uintptr_t)a.data & 63) == 0);
        hm_array_free(&a);
        CHECK(a.data == NULL);
    }
    struct { const char *hdr; hm_dtype dt; int ndim; int64_t numel; size_t bytes; } ok[] = {
        {"{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (3,)}", HM_DT_F64, 1, 3, 24},
        {"{'descr':'|u1','fortran_order':False,'shape':(4,1),}", HM_DT_U8, 2, 4, 4},
        {"{'shape': (), 'descr': '<i8', 'fortran_order': False}", HM_DT_I64, 0, 1, 8},
        {"{'descr': '<i4', 'fortran_order': False, 'shape': (0, 5), }", HM_DT_I32, 2, 0, 0},
        {"{'descr': '|b1', 'fortran_order': False, 'shape': (2L, 1L), }", HM_DT_BOOL, 2, 2, 2},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (3), }", HM_DT_F16, 1, 3, 6},
        {"  { 'descr' : '<i2' ,\n 'fortran_order' : False , 'shape' : ( 1 , 2 , ) , }  ", HM_DT_I16, 2, 2, 4},
        {"{'descr': '|i1', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1), }", HM_DT_I8, 8, 1, 1},
    };
    uint8_t zeros[64] = {0};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        size_t n = make_npy(b, 1, ok[i].hdr, zeros, ok[i].bytes);
        int rc = parse_copy(b, n, &a);
        if (rc) fprintf(stderr, "good header %zu rejected\n", i);
        CHECK(rc == HM_OK && a.dtype == ok[i].dt && a.ndim == ok[i].ndim && a.numel == ok[i].numel);
        hm_array_free(&a);
    }
}

static void test_parse_bad(void) {
    uint8_t b[1024];
    hm_array a;
    const char *hdrs[] = {
        "{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }",
        "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (2,), }",
        "['descr', '<f4']",
        "",
    };
    float f[2] = {0};
    for (size_t i = 0; i < sizeof hdrs / sizeof *hdrs; i++) {
        size_t n = make_npy(b, 1, hdrs[i], f, sizeof f);
        int rc = parse_copy(b, n, &a);
        if (!clean_error(rc)) fprintf(stderr, "bad header %zu accepted\n", i);
        CHECK(clean_error(rc) && a.data == NULL);
    }
    /* Bad magic, version, header length; data too short or too long. */
    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
    size_t n = make_npy(b, 1, good, f, sizeof f);
    b[1] = 'X';
    CHECK(clean_error(parse_copy(b, n, &a)) && strstr(hm_errmsg(), "magic"));
    n = make_npy(b, 1, good, f, sizeof f);
    b[6] = 4;
    CHECK(clean_error(parse_copy(b, n, &a)) && strstr(hm_errmsg(), "version"));
    n = make_npy(b, 2, good, f, sizeof f);
    b[11] = 0x80;
    CHECK(clean_error(parse_copy(b, n, &a)));
    n = make_npy(b, 1, good, f, sizeof f);
    CHECK(clean_error(parse_copy(b, n - 1, &a)) && strstr(hm_errmsg(), "truncated") && strstr(hm_errmsg(), "test.npy"));
    CHECK(clean_error(parse_copy(b, n + 4, &a)));
    for (size_t len = 0; len < n; len++) CHECK(clean_error(parse_copy(b, len, &a)));
    CHECK(clean_error(hm_npy_parse(NULL, 0, NULL, &a)));
}

static void test_load_file(void) {
    uint8_t b[256];
    double d[3] = {1.5, -2, 3};
    size_t n = make_npy(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", d, sizeof d);
    FILE *f = fopen(tmp("a.npy"), "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    fclose(f);
    hm_array a;
    CHECK(hm_npy_load(tmp("a.npy"), &a) == HM_OK && a.numel == 3 && ((double *)a.data)[1] == -2.0);
    hm_array_free(&a);
    CHECK(hm_npy_load(tmp("missing.npy"), &a) == HM_E_IO && clean_error(HM_E_IO));
    unlink(tmp("a.npy"));
}

static void test_npz_roundtrip(void) {
    float f[6] = {0.5f, -1, 2, 3, 4, 1e30f};
    double g[2] = {1.0 / 3, -0.0};
    uint8_t u[3] = {0, 128, 255};
    int32_t i4[4] = {-7, 0, 7, 2147483647};
    int64_t i8 = -5;
    hm_npz_writer *w;
    CHECK(hm_npz_write_begin(tmp("r.npz"), &w) == HM_OK);
    CHECK(hm_npz_write_add(w, "f", HM_DT_F32, 2, (int64_t[]){2, 3}, f) == HM_OK);
    CHECK(hm_npz_write_add(w, "g", HM_DT_F64, 1, (int64_t[]){2}, g) == HM_OK);
    CHECK(hm_npz_write_add(w, "mano.u", HM_DT_U8, 1, (int64_t[]){3}, u) == HM_OK);
    CHECK(hm_npz_write_add(w, "i4", HM_DT_I32, 2, (int64_t[]){2, 2}, i4) == HM_OK);
    CHECK(hm_npz_write_add(w, "scalar", HM_DT_I64, 0, NULL, &i8) == HM_OK);
    CHECK(hm_npz_write_add(w, "none", HM_DT_F32, 3, (int64_t[]){2, 0, 4}, NULL) == HM_OK);
    CHECK(hm_npz_write_finish(w) == HM_OK);

    hm_npz *z;
    hm_array a;
    CHECK(hm_npz_open(tmp("r.npz"), &z) == HM_OK && hm_npz_count(z) == 6);
    CHECK(!strcmp(hm_npz_name(z, 2), "mano.u") && !hm_npz_name(z, 6));
    CHECK(hm_npz_has(z, "g") && hm_npz_has(z, "g.npy") && !hm_npz_has(z, "h"));
    CHECK(hm_npz_get(z, "f", &a) == HM_OK && a.dtype == HM_DT_F32 && a.ndim == 2 && !memcmp(a.data, f, sizeof f));
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "g", &a) == HM_OK && a.dtype == HM_DT_F64 && !memcmp(a.data, g, sizeof g));
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "mano.u", &a) == HM_OK && a.dtype == HM_DT_U8 && !memcmp(a.data, u, sizeof u));
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "i4", &a) == HM_OK && a.dtype == HM_DT_I32 && !memcmp(a.data, i4, sizeof i4));
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "scalar", &a) == HM_OK && a.ndim == 0 && a.numel == 1 && *(int64_t *)a.data == -5);
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "none", &a) == HM_OK && a.ndim == 3 && a.numel == 0 && a.shape[2] == 4);
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "nothere", &a) == HM_E_ARG && clean_error(HM_E_ARG) && strstr(hm_errmsg(), "nothere"));
    hm_npz_close(z);

    /* The writer's zip has valid CRCs; .npy headers pad data to 64 bytes. */
    FILE *fp = fopen(tmp("r.npz"), "rb");
    uint8_t *buf = malloc(1 << 16);
    size_t len = fp ? fread(buf, 1, 1 << 16, fp) : 0;
    if (fp) fclose(fp);
    hm_zip zip;
    CHECK(hm_zip_open(buf, len, "npz", &zip) == HM_OK && zip.n == 6);
    for (int i = 0; i < zip.n; i++) {
        const void *d;
        size_t n;
        void *own;
        CHECK(hm_zip_read(&zip, i, 1 << 20, 1, &d, &n, &own) == HM_OK && zip.ent[i].method == 0);
        const uint8_t *h = d;
        CHECK(n >= 10 && (10 + (h[8] | h[9] << 8)) % 64 == 0 && h[6] == 1);
    }
    hm_zip_close(&zip);
    /* Truncations of the written file: open or get fails cleanly. */
    int ok = 1;
    for (size_t cut = 0; cut < len; cut += 7) {
        fp = fopen(tmp("cut.npz"), "wb");
        fwrite(buf, 1, cut, fp);
        fclose(fp);
        int rc = hm_npz_open(tmp("cut.npz"), &z);
        if (rc == HM_OK) {
            for (int i = 0; i < hm_npz_count(z); i++) {
                int r2 = hm_npz_get(z, hm_npz_name(z, i), &a);
                if (r2 == HM_OK) hm_array_free(&a);
                else ok &= clean_error(r2);
            }
            hm_npz_close(z);
        } else {
            ok &= clean_error(rc);
        }
    }
    CHECK(ok);
    free(buf);
    unlink(tmp("cut.npz"));
    unlink(tmp("r.npz"));
}

static int exists(const char *p) { return access(p, F_OK) == 0; }

static void test_npz_writer_errors(void) {
    hm_npz_writer *w;
    float f[2] = {0};
    /* The archive is written beside the target and renamed by finish: the
     * target does not appear before, and an old one survives a failure. */
    CHECK(hm_npz_write_begin(tmp("e1.npz"), &w) == HM_OK && !exists(tmp("e1.npz")));
    CHECK(hm_npz_write_add(w, "a", HM_DT_F32, 1, (int64_t[]){2}, f) == HM_OK);
    CHECK(clean_error(hm_npz_write_add(w, "a", HM_DT_F32, 1, (int64_t[]){2}, f)) && !exists(tmp("e1.npz")));
    CHECK(clean_error(hm_npz_write_add(w, "b", HM_DT_F32, 1, (int64_t[]){2}, f)));
    CHECK(clean_error(hm_npz_write_finish(w)) && !exists(tmp("e1.npz")));

    CHECK(hm_npz_write_begin(tmp("e2.npz"), &w) == HM_OK);
    CHECK(clean_error(hm_npz_write_add(w, "h", HM_DT_F16, 1, (int64_t[]){2}, f)) && !exists(tmp("e2.npz")));
    hm_npz_write_abort(w);

    CHECK(hm_npz_write_begin(tmp("e3.npz"), &w) == HM_OK);
    CHECK(clean_error(hm_npz_write_add(w, "neg", HM_DT_F32, 1, (int64_t[]){-1}, f)) && !exists(tmp("e3.npz")));
    hm_npz_write_abort(w);

    CHECK(hm_npz_write_begin(tmp("e4.npz"), &w) == HM_OK);
    CHECK(hm_npz_write_add(w, "a", HM_DT_F32, 1, (int64_t[]){2}, f) == HM_OK);
    hm_npz_write_abort(w);
    CHECK(!exists(tmp("e4.npz")));

    CHECK(hm_npz_write_begin("/nonexistent/dir/x.npz", &w) == HM_E_IO && !w && clean_error(HM_E_IO));
    CHECK(strstr(hm_errmsg(), "cannot create '/nonexistent/dir/x.npz': No such file or directory") != NULL);

    /* An old archive is left as it was by a failed or aborted writer. */
    FILE *fp = fopen(tmp("old.npz"), "wb");
    if (fp) fputs("previous", fp), fclose(fp);
    CHECK(hm_npz_write_begin(tmp("old.npz"), &w) == HM_OK);
    CHECK(hm_npz_write_add(w, "a", HM_DT_F32, 1, (int64_t[]){2}, f) == HM_OK);
    CHECK(clean_error(hm_npz_write_add(w, "a", HM_DT_F32, 1, (int64_t[]){2}, f)));
    CHECK(clean_error(hm_npz_write_finish(w)));
    char buf[16] = {0};
    fp = fopen(tmp("old.npz"), "rb");
    CHECK(fp && fread(buf, 1, sizeof buf - 1, fp) == 8 && !strcmp(buf, "previous"));
    if (fp) fclose(fp);
    CHECK(hm_npz_write_begin(tmp("old.npz"), &w) == HM_OK);
    hm_npz_write_abort(w);
    /* A directory or device at the path is refused, not removed. */
    CHECK(hm_npz_write_begin(dir, &w) == HM_E_IO && strstr(hm_errmsg(), "Is a directory"));
    if (access("/dev/null", F_OK) == 0)
        CHECK(hm_npz_write_begin("/dev/null", &w) == HM_E_IO && access("/dev/null", F_OK) == 0);
    unlink(tmp("old.npz"));
}

/* An npz of deflated members, as np.savez_compressed writes it. */
static void test_npz_deflated(void) {
    uint8_t npy[2][256];
    float f[4] = {1, 2, 3, 4};
    int64_t l[2] = {-1, 1};
    size_t n0 = make_npy(npy[0], 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", f, sizeof f);
    size_t n1 = make_npy(npy[1], 2, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", l, sizeof l);
    const char *names[2] = {"x.npy", "y.npy"};
    size_t lens[2] = {n0, n1};
    uint8_t zip[2048], cd[512];
    size_t zn = 0, cn = 0, offs[2];
    for (int i = 0; i < 2; i++) {
        uint8_t comp[512];
        uLongf cl = sizeof comp;
        z_stream s;
        memset(&s, 0, sizeof s);
        deflateInit2(&s, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
        s.next_in = npy[i], s.avail_in = (uInt)lens[i], s.next_out = comp, s.avail_out = (uInt)cl;
        deflate(&s, Z_FINISH);
        cl = s.total_out;
        deflateEnd(&s);
        uint32_t crc = (uint32_t)crc32(0, npy[i], (uInt)lens[i]);
        uint8_t h[30] = {0x50, 0x4b, 3, 4, 20, 0, 0, 0, 8, 0};
        memcpy(h + 14, &crc, 4), memcpy(h + 18, &cl, 4), memcpy(h + 22, &lens[i], 4), h[26] = 5;
        offs[i] = zn;
        memcpy(zip + zn, h, 30), memcpy(zip + zn + 30, names[i], 5), memcpy(zip + zn + 35, comp, cl);
        zn += 35 + cl;
        uint8_t c[46] = {0x50, 0x4b, 1, 2, 20, 0, 20, 0, 0, 0, 8, 0};
        memcpy(c + 16, &crc, 4), memcpy(c + 20, &cl, 4), memcpy(c + 24, &lens[i], 4), c[28] = 5;
        memcpy(c + 42, &offs[i], 4);
        memcpy(cd + cn, c, 46), memcpy(cd + cn + 46, names[i], 5);
        cn += 51;
    }
    uint8_t e[22] = {0x50, 0x4b, 5, 6, 0, 0, 0, 0, 2, 0, 2, 0};
    memcpy(e + 12, &cn, 4), memcpy(e + 16, &zn, 4);
    memcpy(zip + zn, cd, cn), memcpy(zip + zn + cn, e, 22);
    size_t total = zn + cn + 22;
    FILE *fp = fopen(tmp("c.npz"), "wb");
    fwrite(zip, 1, total, fp);
    fclose(fp);
    hm_npz *z;
    hm_array a;
    CHECK(hm_npz_open(tmp("c.npz"), &z) == HM_OK && hm_npz_count(z) == 2);
    CHECK(hm_npz_get(z, "x", &a) == HM_OK && a.numel == 4 && ((float *)a.data)[3] == 4.0f);
    hm_array_free(&a);
    CHECK(hm_npz_get(z, "y", &a) == HM_OK && a.dtype == HM_DT_I64 && ((int64_t *)a.data)[0] == -1);
    hm_array_free(&a);
    hm_npz_close(z);
    /* A corrupted deflate stream is an error naming the member. */
    zip[offs[1] + 40] ^= 0x33;
    fp = fopen(tmp("c.npz"), "wb");
    fwrite(zip, 1, total, fp);
    fclose(fp);
    CHECK(hm_npz_open(tmp("c.npz"), &z) == HM_OK);
    CHECK(clean_error(hm_npz_get(z, "y", &a)) && strstr(hm_errmsg(), "y.npy"));
    hm_npz_close(z);
    unlink(tmp("c.npz"));
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/test_npy_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_parse_good();
    test_parse_bad();
    test_load_file();
    test_npz_roundtrip();
    test_npz_writer_errors();
    test_npz_deflated();
    rmdir(dir);
    printf("test_npy: %d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}
