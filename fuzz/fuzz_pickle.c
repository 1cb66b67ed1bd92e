/* fuzz_pickle - the non-executing pickle VM (hm_pickle_load).
 *
 * After a successful load the whole graph is walked (iteratively, with a
 * visit budget: the graph may share nodes and contain cycles) and every
 * string and bytes value is touched end to end, so that ASan sees any
 * pointer that escapes the input.
 */
#include <stdint.h>
#include <stdlib.h>
#include "format/pickle.h"
#include "core/util.h"

#define MAX_VISITS 100000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(hm_pk_obj *root) {
    hm_pk_obj **stack = malloc(MAX_VISITS * sizeof *stack);
    if (!stack) return;
    size_t sp = 0, visits = 0;
    volatile uint8_t sink = 0;
    stack[sp++] = root;
    while (sp && visits++ < MAX_VISITS) {
        hm_pk_obj *o = stack[--sp];
        if (!o) continue;
#define PUSH(x) do { if (sp < MAX_VISITS) stack[sp++] = (x); } while (0)
        switch (o->kind) {
        case HM_PK_STR: case HM_PK_BYTES: case HM_PK_BIGINT:
            if (o->u.str.len) sink ^= (uint8_t)(o->u.str.p[0] ^ o->u.str.p[o->u.str.len - 1]);
            break;
        case HM_PK_TUPLE: case HM_PK_LIST: case HM_PK_DICT: case HM_PK_SET:
            if (o->u.seq.n > o->u.seq.cap) __builtin_trap();
            for (size_t i = 0; i < o->u.seq.n; i++) PUSH(o->u.seq.v[i]);
            break;
        case HM_PK_GLOBAL:
            if (o->u.global.mod_len) sink ^= (uint8_t)o->u.global.mod[o->u.global.mod_len - 1];
            if (o->u.global.name_len) sink ^= (uint8_t)o->u.global.name[o->u.global.name_len - 1];
            break;
        case HM_PK_OBJECT:
            PUSH(o->u.obj.cls);
            PUSH(o->u.obj.args);
            PUSH(o->u.obj.state);
            break;
        case HM_PK_STORAGE:
            if (o->u.storage.key_len) sink ^= (uint8_t)o->u.storage.key[o->u.storage.key_len - 1];
            break;
        case HM_PK_TENSOR:
            if (o->u.tensor->storage->kind != HM_PK_STORAGE) __builtin_trap();
            PUSH(o->u.tensor->storage);
            break;
        default:
            break;
        }
#undef PUSH
    }
    (void)sink;
    free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hm_pickle *pk;
    hm_pk_obj *root;
    if (hm_pickle_load(data, size, "fuzz", &pk, &root)) return 0;
    walk(root);
    hm_pk_obj *sd = hm_pk_dict_get(root, "state_dict");
    if (sd) (void)hm_pk_is_str(sd, "x");
    hm_pickle_free(pk);
    return 0;
}
