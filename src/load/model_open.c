/* model_open.c - hm_model_load: tell a packed model file from a checkpoint
 * by its first bytes and hand it to the right loader. */
#include <stdio.h>

#include "core/util.h"
#include "format/ckpt.h"
#include "load/load.h"
#include "model/model.h"

int hm_model_load(const char *path, const hm_load_opts *o, hm_model **out) {
    hm_ckpt *ck;
    *out = NULL;
    const hm_backend *be = o->be ? o->be : &hm_backend_cpu;
    int kind = hm_pack_sniff(path);
    if (kind == 1) return hm_model_load_packed(path, o, out);
    /* Only a file that starts like a zip is worth a cache key; anything
     * else gets the checkpoint reader's error below. A backend without
     * packed files has no cache entries. */
    if (kind == 0 && !o->no_cache && be->visit && hm_model_cache_enabled()) return hm_model_load_cached(path, o, out);
    int rc = hm_ckpt_open(path, &ck);
    if (rc == HM_E_FORMAT && kind < 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", hm_errmsg());
        return hm_err(rc, "%s: neither a checkpoint (zip) nor a packed model file: unknown magic (%s)", path, why);
    }
    if (rc) return rc;
    rc = hm_model_from_ckpt(ck, path, o, out);
    hm_ckpt_close(ck);
    return rc;
}
