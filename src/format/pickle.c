/* pickle.c - non-executing pickle VM (see pickle.h for the contract).
 *
 * Memory is bounded by the input: every opcode consumes at least one byte
 * and creates at most one node or one container slot, and the hard limits
 * below stop inputs that would otherwise grow the stack, memo or node count
 * far beyond what any checkpoint needs.
 */
#include "format/pickle.h"
#include "core/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK ((size_t)1 << 20)
#define MAX_MARKS ((size_t)4096)
#define MAX_MEMO ((size_t)1 << 22)
#define MAX_OBJECTS ((size_t)1 << 22)
#define MAX_STR ((uint64_t)1 << 30)
#define MAX_REBUILD_DEPTH 8
#define BLOCK 4096

struct hm_pickle {
    const uint8_t *buf;
    size_t len, pos, op; /* op: offset of the opcode being run, for errors */
    const char *what;
    int rc;              /* last error code, for functions returning NULL */
    hm_pk_obj **blocks;  /* nodes live in blocks of BLOCK, never moved */
    size_t nblocks, blocks_cap, nobj;
    hm_pk_obj **stack;
    size_t sp, stack_cap;
    size_t *marks;       /* stack heights at each MARK */
    size_t nmarks, marks_cap;
    hm_pk_obj **memo;
    size_t memo_cap, memo_count;
    hm_pk_obj *none, *yes, *no;
};

static int fail(hm_pickle *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(hm_pickle *vm, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return vm->rc = hm_err(HM_E_FORMAT, "%s: %s at byte %zu", vm->what, msg, vm->op);
}

/* arr (elements of `elem` bytes) grown to hold `need`, at most `max`;
 * NULL with vm->rc set on failure. Returns the possibly moved array. */
static void *grow(hm_pickle *vm, void *arr, size_t *cap, size_t need, size_t elem, size_t max, const char *what) {
    if (need <= *cap) return arr;
    if (need > max) {
        fail(vm, "pickle %s exceeds the limit of %zu", what, max);
        return NULL;
    }
    size_t nc = *cap ? *cap : 16;
    while (nc < need) nc *= 2;
    if (nc > max) nc = max;
    void *p = realloc(arr, nc * elem);
    if (!p) {
        vm->rc = hm_err(HM_E_NOMEM, "%s: out of memory growing the pickle %s", vm->what, what);
        return NULL;
    }
    *cap = nc;
    return p;
}

static hm_pk_obj *new_obj(hm_pickle *vm, hm_pk_kind kind) {
    if (vm->nobj >= MAX_OBJECTS) {
        fail(vm, "pickle has more than %zu objects", MAX_OBJECTS);
        return NULL;
    }
    if (vm->nobj % BLOCK == 0) {
        hm_pk_obj **b = grow(vm, vm->blocks, &vm->blocks_cap, vm->nblocks + 1, sizeof *vm->blocks,
                             MAX_OBJECTS / BLOCK + 1, "node blocks");
        if (!b) return NULL;
        vm->blocks = b;
        vm->blocks[vm->nblocks] = calloc(BLOCK, sizeof(hm_pk_obj));
        if (!vm->blocks[vm->nblocks]) {
            vm->rc = hm_err(HM_E_NOMEM, "%s: out of memory for pickle objects", vm->what);
            return NULL;
        }
        vm->nblocks++;
    }
    hm_pk_obj *o = &vm->blocks[vm->nobj / BLOCK][vm->nobj % BLOCK];
    vm->nobj++;
    o->kind = kind;
    return o;
}

static int seq_add(hm_pickle *vm, hm_pk_obj *o, hm_pk_obj *item) {
    size_t cap = o->u.seq.cap;
    hm_pk_obj **v = grow(vm, o->u.seq.v, &cap, o->u.seq.n + 1, sizeof item, MAX_STACK * 4, "container size");
    if (!v) return vm->rc;
    o->u.seq.v = v;
    o->u.seq.cap = cap;
    o->u.seq.v[o->u.seq.n++] = item;
    return HM_OK;
}

static int push(hm_pickle *vm, hm_pk_obj *o) {
    if (!o) return vm->rc;
    hm_pk_obj **st = grow(vm, vm->stack, &vm->stack_cap, vm->sp + 1, sizeof *vm->stack, MAX_STACK, "stack depth");
    if (!st) return vm->rc;
    vm->stack = st;
    vm->stack[vm->sp++] = o;
    return HM_OK;
}

/* Items above the innermost mark (the only ones an opcode may touch). */
static size_t avail(const hm_pickle *vm) { return vm->sp - (vm->nmarks ? vm->marks[vm->nmarks - 1] : 0); }

static int need(hm_pickle *vm, size_t n, const char *opname) {
    if (avail(vm) < n) return fail(vm, "pickle stack underflow in %s", opname);
    return HM_OK;
}

static hm_pk_obj *pop(hm_pickle *vm) { return vm->stack[--vm->sp]; }

/* Pops the innermost mark; items[0..n) are the values that were above it
 * (valid until the next push). */
static int pop_mark(hm_pickle *vm, hm_pk_obj ***items, size_t *n, const char *opname) {
    if (!vm->nmarks) return fail(vm, "pickle %s without MARK", opname);
    size_t m = vm->marks[--vm->nmarks];
    /* The stack is still unallocated when nothing was ever pushed. */
    *items = vm->stack ? vm->stack + m : NULL;
    *n = vm->sp - m;
    vm->sp = m;
    return HM_OK;
}

static const uint8_t *take(hm_pickle *vm, uint64_t n) {
    if (n > vm->len - vm->pos) {
        fail(vm, "truncated pickle (%llu bytes needed, %zu left)", (unsigned long long)n, vm->len - vm->pos);
        return NULL;
    }
    const uint8_t *p = vm->buf + vm->pos;
    vm->pos += (size_t)n;
    return p;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A newline-terminated argument of the text opcodes; *n excludes the '\n'. */
static const char *line(hm_pickle *vm, size_t *n) {
    const uint8_t *s = vm->buf + vm->pos, *nl = memchr(s, '\n', vm->len - vm->pos);
    if (!nl) {
        fail(vm, "truncated pickle (unterminated text argument)");
        return NULL;
    }
    *n = (size_t)(nl - s);
    vm->pos += *n + 1;
    return (const char *)s;
}

static int parse_dec(hm_pickle *vm, const char *s, size_t n, int64_t *out) {
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (n && (s[0] == '-' || s[0] == '+')) neg = s[i++] == '-';
    if (i == n) return fail(vm, "bad decimal integer in pickle");
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return fail(vm, "bad decimal integer in pickle");
        if (v > (UINT64_C(1) << 63) / 10) return fail(vm, "pickle integer too large");
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (uint64_t)neg) return fail(vm, "pickle integer too large");
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return HM_OK;
}

static int push_int(hm_pickle *vm, int64_t v) {
    hm_pk_obj *o = new_obj(vm, HM_PK_INT);
    if (o) o->u.i = v;
    return push(vm, o);
}

static int push_str(hm_pickle *vm, hm_pk_kind kind, uint64_t n) {
    if (n > MAX_STR) return fail(vm, "pickle string of %llu bytes exceeds the limit", (unsigned long long)n);
    const uint8_t *p = take(vm, n);
    if (!p) return vm->rc;
    hm_pk_obj *o = new_obj(vm, kind);
    if (o) {
        o->u.str.p = (const char *)p;
        o->u.str.len = (size_t)n;
    }
    return push(vm, o);
}

/* LONG1/LONG4: little-endian two's complement; wider than 64 bits stays raw. */
static int push_long(hm_pickle *vm, uint64_t n) {
    if (n > MAX_STR) return fail(vm, "pickle integer of %llu bytes exceeds the limit", (unsigned long long)n);
    const uint8_t *p = take(vm, n);
    if (!p) return vm->rc;
    if (n > 8) {
        hm_pk_obj *o = new_obj(vm, HM_PK_BIGINT);
        if (o) {
            o->u.str.p = (const char *)p;
            o->u.str.len = (size_t)n;
        }
        return push(vm, o);
    }
    uint64_t v = le(p, (int)n);
    if (n && n < 8 && (p[n - 1] & 0x80)) v |= ~UINT64_C(0) << (8 * n);
    return push_int(vm, (int64_t)v);
}

static int make_seq(hm_pickle *vm, hm_pk_kind kind, hm_pk_obj **items, size_t n, hm_pk_obj **out) {
    hm_pk_obj *o = new_obj(vm, kind);
    if (!o) return vm->rc;
    if (n) {
        o->u.seq.v = malloc(n * sizeof *items);
        if (!o->u.seq.v) return vm->rc = hm_err(HM_E_NOMEM, "%s: out of memory for a pickle container", vm->what);
        memcpy(o->u.seq.v, items, n * sizeof *items);
        o->u.seq.n = o->u.seq.cap = n;
    }
    *out = o;
    return HM_OK;
}

static int push_seq(hm_pickle *vm, hm_pk_kind kind, size_t n) {
    hm_pk_obj *o = NULL;
    /* Copy before popping: make_seq may not reuse the stack slots. */
    int rc = make_seq(vm, kind, n ? vm->stack + vm->sp - n : NULL, n, &o);
    if (rc) return rc;
    vm->sp -= n;
    return push(vm, o);
}

static int is_global(const hm_pk_obj *g, const char *mod, const char *name) {
    return g && g->kind == HM_PK_GLOBAL && g->u.global.mod_len == strlen(mod) &&
           !memcmp(g->u.global.mod, mod, g->u.global.mod_len) && g->u.global.name_len == strlen(name) &&
           !memcmp(g->u.global.name, name, g->u.global.name_len);
}

int hm_pk_is_str(const hm_pk_obj *o, const char *s) {
    return o && o->kind == HM_PK_STR && o->u.str.len == strlen(s) && !memcmp(o->u.str.p, s, o->u.str.len);
}

static hm_pk_obj *opaque(hm_pickle *vm, hm_pk_obj *cls, hm_pk_obj *args) {
    hm_pk_obj *o = new_obj(vm, HM_PK_OBJECT);
    if (o) {
        o->u.obj.cls = cls;
        o->u.obj.args = args;
    }
    return o;
}

static int dict_set(hm_pickle *vm, hm_pk_obj *d, hm_pk_obj *k, hm_pk_obj *v) {
    int rc = seq_add(vm, d, k);
    return rc ? rc : seq_add(vm, d, v);
}

/* _rebuild_tensor_v2(storage, offset, size, stride, ...) */
static int rebuild_tensor(hm_pickle *vm, hm_pk_obj *args, hm_pk_obj **out) {
    hm_pk_obj **a = args->u.seq.v;
    if (args->u.seq.n < 4 || a[0]->kind != HM_PK_STORAGE || a[1]->kind != HM_PK_INT || a[1]->u.i < 0 ||
        a[2]->kind != HM_PK_TUPLE || a[3]->kind != HM_PK_TUPLE || a[2]->u.seq.n != a[3]->u.seq.n)
        return fail(vm, "bad arguments to torch._utils._rebuild_tensor_v2");
    size_t nd = a[2]->u.seq.n;
    if (nd > 64) return fail(vm, "tensor with %zu dimensions", nd);
    hm_pk_tensor *t = calloc(1, sizeof *t);
    hm_pk_obj *o = t ? new_obj(vm, HM_PK_TENSOR) : NULL;
    if (!o) {
        free(t);
        return t ? vm->rc : (vm->rc = hm_err(HM_E_NOMEM, "%s: out of memory", vm->what));
    }
    o->u.tensor = t; /* owned by the node from here on */
    t->storage = a[0];
    t->offset = a[1]->u.i;
    t->ndim = (int)nd;
    for (size_t d = 0; d < nd; d++) {
        const hm_pk_obj *s = a[2]->u.seq.v[d], *st = a[3]->u.seq.v[d];
        if (s->kind != HM_PK_INT || st->kind != HM_PK_INT || s->u.i < 0 || st->u.i < 0)
            return fail(vm, "bad size or stride in torch._utils._rebuild_tensor_v2");
        if (d < HM_MAX_DIMS) {
            t->shape[d] = s->u.i;
            t->stride[d] = st->u.i;
        }
    }
    *out = o;
    return HM_OK;
}

/* REDUCE: calls are simulated only for the few callables we understand. */
static int apply(hm_pickle *vm, hm_pk_obj *fn, hm_pk_obj *args, int depth, hm_pk_obj **out) {
    if (args->kind != HM_PK_TUPLE) return fail(vm, "pickle REDUCE arguments are not a tuple");
    if (depth > MAX_REBUILD_DEPTH) return fail(vm, "tensor rebuild calls nested too deeply");
    hm_pk_obj **a = args->u.seq.v;
    size_t n = args->u.seq.n;
    if (is_global(fn, "torch._utils", "_rebuild_tensor_v2") || is_global(fn, "torch._utils", "_rebuild_tensor"))
        return rebuild_tensor(vm, args, out);
    if ((is_global(fn, "torch._utils", "_rebuild_parameter") ||
         is_global(fn, "torch._utils", "_rebuild_parameter_with_state")) && n >= 1 && a[0]->kind == HM_PK_TENSOR) {
        *out = a[0];
        return HM_OK;
    }
    if (is_global(fn, "torch._tensor", "_rebuild_from_type_v2") && n >= 3)
        return apply(vm, a[0], a[2], depth + 1, out);
    if (is_global(fn, "collections", "OrderedDict") &&
        (n == 0 || (n == 1 && (a[0]->kind == HM_PK_LIST || a[0]->kind == HM_PK_TUPLE)))) {
        hm_pk_obj *d = new_obj(vm, HM_PK_DICT);
        if (!d) return vm->rc;
        for (size_t i = 0; n == 1 && i < a[0]->u.seq.n; i++) {
            hm_pk_obj *kv = a[0]->u.seq.v[i];
            if ((kv->kind != HM_PK_TUPLE && kv->kind != HM_PK_LIST) || kv->u.seq.n != 2)
                return fail(vm, "bad OrderedDict item");
            int rc = dict_set(vm, d, kv->u.seq.v[0], kv->u.seq.v[1]);
            if (rc) return rc;
        }
        *out = d;
        return HM_OK;
    }
    *out = opaque(vm, fn, args);
    return *out ? HM_OK : vm->rc;
}

static const struct { const char *name; hm_dtype dt; } storage_types[] = {
    {"FloatStorage", HM_DT_F32}, {"DoubleStorage", HM_DT_F64}, {"HalfStorage", HM_DT_F16},
    {"BFloat16Storage", HM_DT_BF16}, {"LongStorage", HM_DT_I64}, {"IntStorage", HM_DT_I32},
    {"ShortStorage", HM_DT_I16}, {"CharStorage", HM_DT_I8}, {"ByteStorage", HM_DT_U8},
    {"BoolStorage", HM_DT_BOOL},
};

/* ('storage', torch.<T>Storage, key, location, numel); the location is
 * ignored, anything else is opaque. */
static int persistent(hm_pickle *vm, hm_pk_obj *pid, hm_pk_obj **out) {
    hm_pk_obj **a = pid->kind == HM_PK_TUPLE ? pid->u.seq.v : NULL;
    if (!a || pid->u.seq.n < 5 || !hm_pk_is_str(a[0], "storage") || a[1]->kind != HM_PK_GLOBAL ||
        a[2]->kind != HM_PK_STR || a[4]->kind != HM_PK_INT) {
        *out = opaque(vm, NULL, pid);
        return *out ? HM_OK : vm->rc;
    }
    hm_pk_obj *s = new_obj(vm, HM_PK_STORAGE);
    if (!s) return vm->rc;
    s->u.storage.dtype = -1;
    for (size_t i = 0; i < sizeof storage_types / sizeof *storage_types; i++)
        if (is_global(a[1], "torch", storage_types[i].name)) s->u.storage.dtype = (int)storage_types[i].dt;
    s->u.storage.key = a[2]->u.str.p;
    s->u.storage.key_len = a[2]->u.str.len;
    s->u.storage.numel = a[4]->u.i;
    *out = s;
    return HM_OK;
}

static int memo_put(hm_pickle *vm, uint64_t idx) {
    if (!avail(vm)) return fail(vm, "pickle PUT with an empty stack");
    if (idx >= MAX_MEMO) return fail(vm, "pickle memo index %llu exceeds the limit of %zu", (unsigned long long)idx, MAX_MEMO);
    size_t old = vm->memo_cap;
    hm_pk_obj **m = grow(vm, vm->memo, &vm->memo_cap, (size_t)idx + 1, sizeof *vm->memo, MAX_MEMO, "memo");
    if (!m) return vm->rc;
    vm->memo = m;
    if (vm->memo_cap > old) memset(vm->memo + old, 0, (vm->memo_cap - old) * sizeof *vm->memo);
    if (!vm->memo[idx]) vm->memo_count++;
    vm->memo[idx] = vm->stack[vm->sp - 1];
    return HM_OK;
}

static int memo_get(hm_pickle *vm, uint64_t idx) {
    if (idx >= vm->memo_cap || !vm->memo[idx]) return fail(vm, "pickle memo index %llu not set", (unsigned long long)idx);
    return push(vm, vm->memo[idx]);
}

static int global_from(hm_pickle *vm, const char *mod, size_t ml, const char *name, size_t nl) {
    hm_pk_obj *g = new_obj(vm, HM_PK_GLOBAL);
    if (g) {
        g->u.global.mod = mod;
        g->u.global.mod_len = ml;
        g->u.global.name = name;
        g->u.global.name_len = nl;
    }
    return push(vm, g);
}

/* Add stack items above the mark to a list/set/dict; opaque targets (a
 * custom container class) swallow them, as nothing is executed. */
static int add_items(hm_pickle *vm, int is_dict, size_t nitems, const char *opname) {
    int rc = need(vm, nitems + 1, opname);
    if (rc) return rc;
    hm_pk_obj **items = vm->stack + vm->sp - nitems, *target = vm->stack[vm->sp - nitems - 1];
    hm_pk_kind want = is_dict ? HM_PK_DICT : strcmp(opname, "ADDITEMS") ? HM_PK_LIST : HM_PK_SET;
    if (is_dict && nitems % 2) return fail(vm, "pickle %s with an odd number of items", opname);
    if (target->kind != want && target->kind != HM_PK_OBJECT)
        return fail(vm, "pickle %s on a non-container", opname);
    for (size_t i = 0; target->kind == want && i < nitems; i++)
        if ((rc = seq_add(vm, target, items[i]))) return rc;
    vm->sp -= nitems;
    return HM_OK;
}

static int mark_count(hm_pickle *vm, const char *opname, size_t *n) {
    if (!vm->nmarks) return fail(vm, "pickle %s without MARK", opname);
    *n = avail(vm);
    return HM_OK;
}

/* TUPLE, LIST, DICT, FROZENSET: a container of the items above the mark. */
static int seq_from_mark(hm_pickle *vm, hm_pk_kind kind, const char *opname) {
    size_t n = 0;
    int rc = mark_count(vm, opname, &n);
    if (rc) return rc;
    if (kind == HM_PK_DICT && n % 2) return fail(vm, "pickle DICT with an odd number of items");
    if ((rc = push_seq(vm, kind, n))) return rc;
    /* push_seq left the container where the mark was; drop the mark. */
    vm->nmarks--;
    return HM_OK;
}

/* One opcode. *done is set by STOP. */
static int step(hm_pickle *vm, hm_pk_obj **root, int *done) {
    vm->op = vm->pos;
    const uint8_t *p = take(vm, 1);
    if (!p) return vm->rc;
    uint8_t op = *p;
    int rc = HM_OK;
    size_t n = 0;
    hm_pk_obj *a = NULL, *b = NULL, *c = NULL, **items = NULL;
    const char *s1, *s2;
    int64_t iv;
    switch (op) {
    case 0x80: /* PROTO */
        if (!(p = take(vm, 1))) return vm->rc;
        return *p > 5 ? fail(vm, "unsupported pickle protocol %d", *p) : HM_OK;
    case 0x95: /* FRAME: framing is irrelevant for an in-memory buffer */
        return take(vm, 8) ? HM_OK : vm->rc;
    case '.': /* STOP */
        if ((rc = need(vm, 1, "STOP"))) return rc;
        *root = pop(vm);
        *done = 1;
        return HM_OK;
    case '(': { /* MARK */
        size_t *mk = grow(vm, vm->marks, &vm->marks_cap, vm->nmarks + 1, sizeof *vm->marks, MAX_MARKS,
                          "MARK nesting");
        if (!mk) return vm->rc;
        vm->marks = mk;
        vm->marks[vm->nmarks++] = vm->sp;
        return HM_OK;
    }
    case '0': /* POP: an empty frame pops its mark instead */
        if (avail(vm)) vm->sp--;
        else if (vm->nmarks) vm->nmarks--;
        else return fail(vm, "pickle stack underflow in POP");
        return HM_OK;
    case '1': return pop_mark(vm, &items, &n, "POP_MARK");
    case '2': return (rc = need(vm, 1, "DUP")) ? rc : push(vm, vm->stack[vm->sp - 1]);
    case 'N': return push(vm, vm->none);
    case 0x88: return push(vm, vm->yes);
    case 0x89: return push(vm, vm->no);
    case 'I': /* INT: text; protocol 0 spells booleans 00/01 */
        if (!(s1 = line(vm, &n))) return vm->rc;
        if (n == 2 && s1[0] == '0' && (s1[1] == '0' || s1[1] == '1')) return push(vm, s1[1] == '1' ? vm->yes : vm->no);
        return (rc = parse_dec(vm, s1, n, &iv)) ? rc : push_int(vm, iv);
    case 'L': /* LONG: text with a trailing L */
        if (!(s1 = line(vm, &n))) return vm->rc;
        if (n && s1[n - 1] == 'L') n--;
        return (rc = parse_dec(vm, s1, n, &iv)) ? rc : push_int(vm, iv);
    case 'J': return (p = take(vm, 4)) ? push_int(vm, (int32_t)(uint32_t)le(p, 4)) : vm->rc;
    case 'K': return (p = take(vm, 1)) ? push_int(vm, p[0]) : vm->rc;
    case 'M': return (p = take(vm, 2)) ? push_int(vm, (int64_t)le(p, 2)) : vm->rc;
    case 0x8a: return (p = take(vm, 1)) ? push_long(vm, p[0]) : vm->rc;
    case 0x8b:
        if (!(p = take(vm, 4))) return vm->rc;
        if ((int32_t)(uint32_t)le(p, 4) < 0) return fail(vm, "negative LONG4 length");
        return push_long(vm, le(p, 4));
    case 'G': { /* BINFLOAT: big-endian IEEE double */
        if (!(p = take(vm, 8))) return vm->rc;
        uint64_t bits = 0;
        for (int i = 0; i < 8; i++) bits = bits << 8 | p[i];
        if (!(a = new_obj(vm, HM_PK_FLOAT))) return vm->rc;
        memcpy(&a->u.f, &bits, 8);
        return push(vm, a);
    }
    case 'F': { /* FLOAT: text */
        char tmp[64];
        if (!(s1 = line(vm, &n))) return vm->rc;
        if (n == 0 || n >= sizeof tmp) return fail(vm, "bad FLOAT text");
        memcpy(tmp, s1, n);
        tmp[n] = 0;
        char *end;
        double d = strtod(tmp, &end);
        if (*end) return fail(vm, "bad FLOAT text");
        if (!(a = new_obj(vm, HM_PK_FLOAT))) return vm->rc;
        a->u.f = d;
        return push(vm, a);
    }
    case 'X': return (p = take(vm, 4)) ? push_str(vm, HM_PK_STR, le(p, 4)) : vm->rc;
    case 0x8c: return (p = take(vm, 1)) ? push_str(vm, HM_PK_STR, p[0]) : vm->rc;
    case 0x8d: return (p = take(vm, 8)) ? push_str(vm, HM_PK_STR, le(p, 8)) : vm->rc;
    case 'T':
        if (!(p = take(vm, 4))) return vm->rc;
        if ((int32_t)(uint32_t)le(p, 4) < 0) return fail(vm, "negative BINSTRING length");
        return push_str(vm, HM_PK_STR, le(p, 4));
    case 'U': return (p = take(vm, 1)) ? push_str(vm, HM_PK_STR, p[0]) : vm->rc;
    case 'B': return (p = take(vm, 4)) ? push_str(vm, HM_PK_BYTES, le(p, 4)) : vm->rc;
    case 'C': return (p = take(vm, 1)) ? push_str(vm, HM_PK_BYTES, p[0]) : vm->rc;
    case 0x8e: case 0x96: /* BINBYTES8, BYTEARRAY8 */
        return (p = take(vm, 8)) ? push_str(vm, HM_PK_BYTES, le(p, 8)) : vm->rc;
    case ')': return push_seq(vm, HM_PK_TUPLE, 0);
    case 0x85: case 0x86: case 0x87: /* TUPLE1..3 */
        return (rc = need(vm, op - 0x84u, "TUPLEn")) ? rc : push_seq(vm, HM_PK_TUPLE, op - 0x84u);
    case 't': return seq_from_mark(vm, HM_PK_TUPLE, "TUPLE");
    case ']': return push_seq(vm, HM_PK_LIST, 0);
    case 'l': return seq_from_mark(vm, HM_PK_LIST, "LIST");
    case '}': return push_seq(vm, HM_PK_DICT, 0);
    case 'd': return seq_from_mark(vm, HM_PK_DICT, "DICT");
    case 0x8f: return push_seq(vm, HM_PK_SET, 0);
    case 0x91: return seq_from_mark(vm, HM_PK_SET, "FROZENSET");
    case 'a': return add_items(vm, 0, 1, "APPEND");
    case 's': return add_items(vm, 1, 2, "SETITEM");
    case 'e': case 'u': case 0x90: { /* APPENDS, SETITEMS, ADDITEMS */
        const char *nm = op == 'e' ? "APPENDS" : op == 'u' ? "SETITEMS" : "ADDITEMS";
        if ((rc = mark_count(vm, nm, &n))) return rc;
        vm->nmarks--; /* the target sits just below the mark */
        return add_items(vm, op == 'u', n, nm);
    }
    case 'c': { /* GLOBAL module\nname\n */
        size_t n2 = 0;
        if (!(s1 = line(vm, &n)) || !(s2 = line(vm, &n2))) return vm->rc;
        return global_from(vm, s1, n, s2, n2);
    }
    case 0x93: /* STACK_GLOBAL */
        if ((rc = need(vm, 2, "STACK_GLOBAL"))) return rc;
        b = pop(vm), a = pop(vm);
        if (a->kind != HM_PK_STR || b->kind != HM_PK_STR) return fail(vm, "pickle STACK_GLOBAL needs two strings");
        return global_from(vm, a->u.str.p, a->u.str.len, b->u.str.p, b->u.str.len);
    case 'R': /* REDUCE */
        if ((rc = need(vm, 2, "REDUCE"))) return rc;
        b = pop(vm), a = pop(vm);
        return (rc = apply(vm, a, b, 0, &c)) ? rc : push(vm, c);
    case 0x81: /* NEWOBJ cls args */
        if ((rc = need(vm, 2, "NEWOBJ"))) return rc;
        b = pop(vm), a = pop(vm);
        return push(vm, opaque(vm, a, b));
    case 0x92: /* NEWOBJ_EX cls args kwargs */
        if ((rc = need(vm, 3, "NEWOBJ_EX"))) return rc;
        c = pop(vm), b = pop(vm), a = pop(vm);
        if (!(a = opaque(vm, a, b))) return vm->rc;
        a->u.obj.state = c;
        return push(vm, a);
    case 'o': /* OBJ: MARK cls args... */
        if ((rc = pop_mark(vm, &items, &n, "OBJ"))) return rc;
        if (n < 1) return fail(vm, "pickle OBJ without a class");
        a = items[0];
        if ((rc = make_seq(vm, HM_PK_TUPLE, items + 1, n - 1, &b))) return rc;
        return push(vm, opaque(vm, a, b));
    case 'i': { /* INST module\nname\n with MARK args */
        size_t n2 = 0, nargs = 0;
        if (!(s1 = line(vm, &n)) || !(s2 = line(vm, &n2))) return vm->rc;
        if ((rc = pop_mark(vm, &items, &nargs, "INST"))) return rc;
        if ((rc = make_seq(vm, HM_PK_TUPLE, items, nargs, &b))) return rc;
        if ((rc = global_from(vm, s1, n, s2, n2))) return rc;
        a = pop(vm);
        return push(vm, opaque(vm, a, b));
    }
    case 'b': /* BUILD: only opaque objects keep their state */
        if ((rc = need(vm, 2, "BUILD"))) return rc;
        b = pop(vm);
        a = vm->stack[vm->sp - 1];
        if (a->kind == HM_PK_OBJECT) a->u.obj.state = b;
        return HM_OK;
    case 'Q': /* BINPERSID */
        if ((rc = need(vm, 1, "BINPERSID"))) return rc;
        a = pop(vm);
        return (rc = persistent(vm, a, &b)) ? rc : push(vm, b);
    case 'P': /* PERSID: text ids are never torch storages */
        if (!(s1 = line(vm, &n))) return vm->rc;
        return push(vm, opaque(vm, NULL, NULL));
    case 'h': return (p = take(vm, 1)) ? memo_get(vm, p[0]) : vm->rc;
    case 'j': return (p = take(vm, 4)) ? memo_get(vm, le(p, 4)) : vm->rc;
    case 'g':
        if (!(s1 = line(vm, &n))) return vm->rc;
        if ((rc = parse_dec(vm, s1, n, &iv))) return rc;
        return iv < 0 ? fail(vm, "negative memo index") : memo_get(vm, (uint64_t)iv);
    case 'q': return (p = take(vm, 1)) ? memo_put(vm, p[0]) : vm->rc;
    case 'r': return (p = take(vm, 4)) ? memo_put(vm, le(p, 4)) : vm->rc;
    case 'p':
        if (!(s1 = line(vm, &n))) return vm->rc;
        if ((rc = parse_dec(vm, s1, n, &iv))) return rc;
        return iv < 0 ? fail(vm, "negative memo index") : memo_put(vm, (uint64_t)iv);
    case 0x94: return memo_put(vm, vm->memo_count); /* MEMOIZE: next index is len(memo) */
    default:
        if (op >= 0x20 && op < 0x7f) return fail(vm, "unsupported pickle opcode '%c' (0x%02x)", op, op);
        return fail(vm, "unknown pickle opcode 0x%02x", op);
    }
}

int hm_pickle_load(const void *buf, size_t len, const char *what, hm_pickle **out, hm_pk_obj **root) {
    *out = NULL;
    *root = NULL;
    hm_pickle *vm = calloc(1, sizeof *vm);
    if (!vm) return hm_err(HM_E_NOMEM, "out of memory");
    vm->buf = buf;
    vm->len = buf ? len : 0;
    vm->what = what ? what : "pickle";
    int rc = HM_OK, done = 0;
    if (!(vm->none = new_obj(vm, HM_PK_NONE)) || !(vm->yes = new_obj(vm, HM_PK_BOOL)) ||
        !(vm->no = new_obj(vm, HM_PK_BOOL)))
        rc = vm->rc;
    if (!rc) vm->yes->u.i = 1;
    while (!rc && !done) rc = step(vm, root, &done);
    /* The interpreter state is no longer needed; the nodes are. */
    free(vm->stack);
    free(vm->marks);
    free(vm->memo);
    vm->stack = NULL;
    vm->marks = NULL;
    vm->memo = NULL;
    if (rc) {
        *root = NULL;
        hm_pickle_free(vm);
        return rc;
    }
    *out = vm;
    return HM_OK;
}

void hm_pickle_free(hm_pickle *vm) {
    if (!vm) return;
    for (size_t i = 0; i < vm->nobj; i++) {
        hm_pk_obj *o = &vm->blocks[i / BLOCK][i % BLOCK];
        if (o->kind == HM_PK_TUPLE || o->kind == HM_PK_LIST || o->kind == HM_PK_DICT || o->kind == HM_PK_SET)
            free(o->u.seq.v);
        else if (o->kind == HM_PK_TENSOR)
            free(o->u.tensor);
    }
    for (size_t i = 0; i < vm->nblocks; i++) free(vm->blocks[i]);
    free(vm->blocks);
    free(vm->stack);
    free(vm->marks);
    free(vm->memo);
    free(vm);
}

hm_pk_obj *hm_pk_dict_get(const hm_pk_obj *d, const char *key) {
    if (!d || d->kind != HM_PK_DICT) return NULL;
    for (size_t i = d->u.seq.n; i >= 2; i -= 2)
        if (hm_pk_is_str(d->u.seq.v[i - 2], key)) return d->u.seq.v[i - 1];
    return NULL;
}
