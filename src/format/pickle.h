/* pickle.h - a non-executing pickle interpreter for torch.save's data.pkl.
 *
 * Builds a graph of plain values from a pickle (protocols 0-5 opcodes as
 * torch and the standard pickler emit them, minus the text-escaped string
 * forms of protocol 0). Nothing is ever called: a GLOBAL is just a
 * (module, name) pair, REDUCE/NEWOBJ/BUILD on it produce an opaque object
 * that keeps its arguments. The only callables understood are torch's tensor
 * rebuild functions, which produce HM_PK_TENSOR nodes, and
 * collections.OrderedDict, which produces a dict. Persistent ids of the form
 * ('storage', torch.<T>Storage, key, location, numel) produce HM_PK_STORAGE.
 *
 * Strings and bytes point into the caller's buffer (not NUL-terminated), so
 * the buffer must outlive the result. All nodes are owned by the hm_pickle
 * handle; the graph may share nodes and may contain cycles (via the memo),
 * so walk it without recursion or with a depth limit.
 *
 * Limits (each failing with a one-line HM_E_FORMAT error naming the byte):
 * stack depth, mark nesting, memo size, object count, string length, and the
 * nesting of tensor rebuild calls. Input is never read out of bounds and
 * every opcode consumes input, so interpretation always terminates.
 */
#ifndef HM_PICKLE_H
#define HM_PICKLE_H

#include <stddef.h>
#include <stdint.h>
#include "format/ckpt.h"

typedef enum {
    HM_PK_NONE, HM_PK_BOOL, HM_PK_INT, HM_PK_BIGINT, HM_PK_FLOAT, HM_PK_STR, HM_PK_BYTES,
    HM_PK_TUPLE, HM_PK_LIST, HM_PK_DICT, HM_PK_SET,
    HM_PK_GLOBAL, HM_PK_OBJECT, HM_PK_STORAGE, HM_PK_TENSOR,
} hm_pk_kind;

typedef struct hm_pk_obj hm_pk_obj;

typedef struct {
    hm_pk_obj *storage;             /* an HM_PK_STORAGE node (checked) */
    int64_t offset;                 /* in elements */
    int ndim;                       /* as pickled; may exceed HM_MAX_DIMS */
    int64_t shape[HM_MAX_DIMS];     /* first HM_MAX_DIMS dims only */
    int64_t stride[HM_MAX_DIMS];
} hm_pk_tensor;

struct hm_pk_obj {
    hm_pk_kind kind;
    union {
        int64_t i;                                            /* BOOL, INT */
        double f;                                             /* FLOAT */
        struct { const char *p; size_t len; } str;            /* STR (UTF-8), BYTES, BIGINT (LE two's complement) */
        struct { hm_pk_obj **v; size_t n, cap; } seq;         /* TUPLE, LIST, SET; DICT as k0,v0,k1,v1,... */
        struct { const char *mod, *name; size_t mod_len, name_len; } global;
        struct { hm_pk_obj *cls, *args, *state; } obj;        /* OBJECT: any may be NULL */
        struct { int dtype; const char *key; size_t key_len; int64_t numel; } storage; /* dtype -1: unknown class */
        hm_pk_tensor *tensor;                                 /* TENSOR */
    } u;
};

typedef struct hm_pickle hm_pickle;

/* Interpret buf[0..len) up to STOP. `what` prefixes error messages (e.g.
 * "checkpoint: archive/data.pkl"); it is not copied. On success *out owns
 * every node and *root is the unpickled value. */
int hm_pickle_load(const void *buf, size_t len, const char *what, hm_pickle **out, hm_pk_obj **root);
void hm_pickle_free(hm_pickle *p);

/* Dict lookup by string key (the last matching entry, as Python's later
 * SETITEM wins); NULL if d is not a dict or the key is absent. */
hm_pk_obj *hm_pk_dict_get(const hm_pk_obj *d, const char *key);

/* True if o is a STR equal to s. */
int hm_pk_is_str(const hm_pk_obj *o, const char *s);

#endif
