/* boxes.c - reading the boxes a caller gives: a boxes JSON document
 * (jansson) or one command-line box. See boxes.h. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "core/util.h"
#include "pipeline/boxes.h"

static int num(json_t *v, double *out) {
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

int hm_boxes_parse_json(const char *text, size_t len, hamer_box *boxes, int max) {
    json_error_t e;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!doc) return hm_err(HM_E_ARG, "boxes JSON: %s at line %d column %d", e.text, e.line, e.column);
    int rc = 0;
    /* A bare list, or a document with a "hands" list: `hamer detect`'s
     * output and RESULT.json both carry their boxes that way. */
    json_t *root = json_is_object(doc) ? json_object_get(doc, "hands") : doc;
    if (!json_is_array(root)) {
        rc = hm_err(HM_E_ARG, "boxes JSON: expected an array of {\"bbox\": [x1,y1,x2,y2], \"is_right\": bool} (or an object with one under \"hands\")");
        goto out;
    }
    size_t n = json_array_size(root);
    if ((int)n > max || n > HAMER_MAX_HANDS) {
        rc = hm_err(HM_E_ARG, "boxes JSON: %zu hands, at most %d per image", n, max < HAMER_MAX_HANDS ? max : HAMER_MAX_HANDS);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *h = json_array_get(root, i), *bb, *r;
        if (!json_is_object(h) || !(bb = json_object_get(h, "bbox")) || !json_is_array(bb) || json_array_size(bb) != 4) {
            rc = hm_err(HM_E_ARG, "boxes JSON: entry %zu needs \"bbox\": [x1,y1,x2,y2]", i);
            goto out;
        }
        for (int k = 0; k < 4; k++) {
            double v;
            if (num(json_array_get(bb, k), &v) || !isfinite(v) || fabs(v) > 1e9) {
                rc = hm_err(HM_E_ARG, "boxes JSON: entry %zu bbox[%d] is not a finite number", i, k);
                goto out;
            }
            boxes[i].bbox[k] = (float)v;
        }
        boxes[i].is_right = 1;
        if ((r = json_object_get(h, "is_right"))) {
            if (!json_is_boolean(r)) {
                rc = hm_err(HM_E_ARG, "boxes JSON: entry %zu \"is_right\" must be true or false", i);
                goto out;
            }
            boxes[i].is_right = json_is_true(r);
        }
    }
    rc = (int)n;
out:
    json_decref(doc);
    return rc;
}

int hm_box_parse(const char *s, hamer_box *box) {
    const char *p = s;
    for (int k = 0; k < 4; k++) {
        char *end;
        errno = 0;
        /* Plain decimal only: no spaces, hex floats, "inf" or "nan", which
         * strtod would take. */
        size_t n = strspn(p, "0123456789.eE+-");
        double v = n ? strtod(p, &end) : 0;
        if (!n || end != p + n || errno || !isfinite(v) || fabs(v) > 1e9)
            return hm_err(HM_E_ARG, "bad box '%s': coordinate %d is not a finite number (decimal digits only)", s, k + 1);
        box->bbox[k] = (float)v;
        p = end;
        if (k < 3) {
            if (*p != ',') return hm_err(HM_E_ARG, "bad box '%s': expected x1,y1,x2,y2[:left|:right]", s);
            p++;
        }
    }
    box->is_right = 1;
    if (*p == ':') {
        if (!strcmp(p + 1, "left")) box->is_right = 0;
        else if (strcmp(p + 1, "right")) return hm_err(HM_E_ARG, "bad box '%s': side must be :left or :right", s);
    } else if (*p) {
        return hm_err(HM_E_ARG, "bad box '%s': unexpected '%s' after the coordinates", s, p);
    }
    return HM_OK;
}
