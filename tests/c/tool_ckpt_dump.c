/* tool_ckpt_dump - print the tensors of a checkpoint or .npz, for tests.
 *
 *   tool_ckpt_dump FILE                 checkpoint tensors
 *   tool_ckpt_dump --npz FILE           npz members
 *   tool_ckpt_dump --write-npz-test OUT write a fixed npz for numpy to check
 *
 * One line per tensor, sorted by key:
 *   key dtype ndim shape... | stride... | contiguous | sum
 * where sum is the float64 sum of all elements read through the strides.
 * On failure the library's one-line error goes to stderr and the exit code
 * is 1.
 */
#include "format/ckpt.h"
#include "format/npy.h"
#include "core/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double elem(const uint8_t *p, hm_dtype dt) {
    union { float f; double d; int64_t i64; int32_t i32; int16_t i16; uint16_t u16; uint32_t u32; } u;
    switch (dt) {
    case HM_DT_F32: memcpy(&u.f, p, 4); return u.f;
    case HM_DT_F64: memcpy(&u.d, p, 8); return u.d;
    case HM_DT_F16: memcpy(&u.u16, p, 2); return half_to_double(u.u16);
    case HM_DT_BF16: memcpy(&u.u16, p, 2); u.u32 = (uint32_t)u.u16 << 16; return u.f;
    case HM_DT_I64: memcpy(&u.i64, p, 8); return (double)u.i64;
    case HM_DT_I32: memcpy(&u.i32, p, 4); return u.i32;
    case HM_DT_I16: memcpy(&u.i16, p, 2); return u.i16;
    case HM_DT_I8: return (int8_t)p[0];
    case HM_DT_U8: return p[0];
    case HM_DT_BOOL: return p[0] != 0;
    }
    return NAN;
}

/* Walk every index in row-major order through the strides. */
static double strided_sum(const hm_tensor *t) {
    if (t->numel == 0) return 0.0;
    int64_t idx[HM_MAX_DIMS] = {0};
    size_t es = hm_dtype_size(t->dtype);
    double s = 0.0;
    for (int64_t n = 0; n < t->numel; n++) {
        int64_t off = 0;
        for (int d = 0; d < t->ndim; d++) off += idx[d] * t->stride[d];
        s += elem((const uint8_t *)t->data + off * (int64_t)es, t->dtype);
        for (int d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; d--) idx[d] = 0;
    }
    return s;
}

static void print_tensor(const hm_tensor *t) {
    printf("%s %s %d", t->name, hm_dtype_name(t->dtype), t->ndim);
    for (int d = 0; d < t->ndim; d++) printf(" %lld", (long long)t->shape[d]);
    printf(" |");
    for (int d = 0; d < t->ndim; d++) printf(" %lld", (long long)t->stride[d]);
    printf(" | %d | %.17g\n", t->contiguous, strided_sum(t));
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const hm_tensor *const *)a)->name, (*(const hm_tensor *const *)b)->name);
}

static int fail(void) {
    fprintf(stderr, "%s\n", hm_errmsg());
    return 1;
}

static int dump_ckpt(const char *path) {
    hm_ckpt *c;
    if (hm_ckpt_open(path, &c)) return fail();
    int n = hm_ckpt_count(c);
    const hm_tensor **v = malloc((size_t)(n ? n : 1) * sizeof *v);
    if (!v) {
        hm_ckpt_close(c);
        return 1;
    }
    for (int i = 0; i < n; i++) v[i] = hm_ckpt_at(c, i);
    qsort(v, (size_t)n, sizeof *v, by_name);
    for (int i = 0; i < n; i++) print_tensor(v[i]);
    free(v);
    hm_ckpt_close(c);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int dump_npz(const char *path) {
    hm_npz *z;
    if (hm_npz_open(path, &z)) return fail();
    int n = hm_npz_count(z), rc = 0;
    const char **names = malloc((size_t)(n ? n : 1) * sizeof *names);
    for (int i = 0; names && i < n; i++) names[i] = hm_npz_name(z, i);
    if (names) qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; names && !rc && i < n; i++) {
        hm_array a;
        if (hm_npz_get(z, names[i], &a)) {
            rc = fail();
            break;
        }
        hm_tensor t = {.name = names[i], .dtype = a.dtype, .ndim = a.ndim, .numel = a.numel, .contiguous = 1,
                       .data = a.data};
        int64_t st = 1;
        for (int d = a.ndim - 1; d >= 0; d--) t.shape[d] = a.shape[d], t.stride[d] = st, st *= a.shape[d];
        print_tensor(&t);
        hm_array_free(&a);
    }
    free(names);
    hm_npz_close(z);
    return rc;
}

/* Fixed contents that tests/test_ckpt_reader.py recomputes with numpy. */
static int write_npz_test(const char *path) {
    float f[6];
    double g[4];
    uint8_t u[5];
    int32_t i4[8];
    int64_t i8 = -1234567890123LL;
    for (int k = 0; k < 6; k++) f[k] = (float)k * 0.5f - 1.0f;
    for (int k = 0; k < 4; k++) g[k] = 1.0 / (k + 3);
    for (int k = 0; k < 5; k++) u[k] = (uint8_t)(k * 60);
    for (int k = 0; k < 8; k++) i4[k] = (k - 4) * 100000;
    hm_npz_writer *w;
    if (hm_npz_write_begin(path, &w)) return fail();
    int rc = hm_npz_write_add(w, "f32", HM_DT_F32, 2, (int64_t[]){2, 3}, f);
    if (!rc) rc = hm_npz_write_add(w, "f64", HM_DT_F64, 1, (int64_t[]){4}, g);
    if (!rc) rc = hm_npz_write_add(w, "u8", HM_DT_U8, 1, (int64_t[]){5}, u);
    if (!rc) rc = hm_npz_write_add(w, "i32", HM_DT_I32, 3, (int64_t[]){2, 2, 2}, i4);
    if (!rc) rc = hm_npz_write_add(w, "i64", HM_DT_I64, 0, NULL, &i8);
    if (!rc) rc = hm_npz_write_add(w, "empty", HM_DT_F32, 2, (int64_t[]){0, 3}, NULL);
    if (rc) {
        hm_npz_write_abort(w);
        return fail();
    }
    return hm_npz_write_finish(w) ? fail() : 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && argv[1][0] != '-') return dump_ckpt(argv[1]);
    if (argc == 3 && !strcmp(argv[1], "--npz")) return dump_npz(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "--write-npz-test")) return write_npz_test(argv[2]);
    fprintf(stderr, "usage: %s FILE | --npz FILE | --write-npz-test OUT\n", argv[0]);
    return 2;
}
