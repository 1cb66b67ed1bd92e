/* server_query.c - the query string of POST /v1/predict and /v1/render:
 * which keys an endpoint takes, and their values (boxes, rescale,
 * crop_mode, vertices, side_view, timeout_s, format, body, body_boxes,
 * proposals, focal, fov, min_score, max_hands, draw), and that of POST /v1/live
 * (session, end, max_hands, min_score, smooth).
 *
 * Separate from server_http.c so that it takes plain strings and can be
 * fuzzed without a connection (fuzz/fuzz_query.c). Keys and values arrive
 * %-decoded by libmicrohttpd, so they may hold any byte but NUL.
 *
 * The boxes are only parsed here (finite coordinates); whether a box has a
 * positive size and touches the image is decided per hand once the image is
 * decoded (hm_box_check), as `hamer run` does, so that one bad box fails its
 * hand rather than the request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "common/common.h"
#include "serve/server.h"
#include "core/util.h"

enum { QUERY_BOXES, QUERY_VERTICES, QUERY_RESCALE, QUERY_CROP_MODE, QUERY_SIDE_VIEW, QUERY_TIMEOUT, QUERY_FORMAT, QUERY_BODY,
       QUERY_BODY_BOXES, QUERY_FOCAL, QUERY_FOV, QUERY_MIN_SCORE, QUERY_MAX_HANDS, QUERY_DRAW, QUERY_PROPOSALS };
const char *const hm_srv_query_keys[HM_SRV_QUERY_NKEYS] = {"boxes",      "vertices",  "rescale", "crop_mode",
                                                           "side_view",  "timeout_s", "format",  "body",
                                                           "body_boxes", "focal",     "fov",     "min_score",
                                                           "max_hands",  "draw",      "proposals"};

void hm_srv_query_init(hm_srv_query_args *a, int endpoint) {
    memset(a, 0, sizeof *a);
    a->endpoint = endpoint;
}

int hm_srv_query_add(hm_srv_query_args *a, const char *key, const char *value) {
    int k = -1;
    for (int i = 0; i < HM_SRV_QUERY_NKEYS; i++)
        if (!strcmp(key, hm_srv_query_keys[i])) k = i;
    /* vertices and format only make sense for /v1/predict, side_view only for pictures */
    /* the camera places the hands of the answer's 3D data: not a picture's */
    if ((k == QUERY_VERTICES || k == QUERY_FORMAT || k == QUERY_FOCAL || k == QUERY_FOV) &&
        a->endpoint != HM_SRV_EP_PREDICT)
        k = -1;
    if (k == QUERY_SIDE_VIEW && a->endpoint != HM_SRV_EP_RENDER) k = -1;
    if (k < 0 || a->value[k] || !value) {
        if (!a->bad) a->bad = key;
        return -1;
    }
    a->value[k] = value;
    return 0;
}

/* Messages quote client bytes (keys, values, boxes; %0A and the like
 * decoded): keep them one line of printable ASCII, the same bytes
 * hm_srv_error_json would replace, so answers are unchanged. */
static int query_fail(int status, char *msg) {
    for (char *c = msg; *c; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    return status;
}

int hm_srv_query_check_keys(const hm_srv_query_args *a, char *msg, size_t msglen) {
    if (!a->bad) return 0;
    snprintf(msg, msglen, "unknown, repeated or valueless query parameter '%.40s' for %s", a->bad,
             a->endpoint == HM_SRV_EP_PREDICT ? "/v1/predict" : "/v1/render");
    return query_fail(400, msg);
}

/* Parse a 0/1 flag; -1 if malformed. */
static int query_flag(const char *v) {
    if (!strcmp(v, "1") || !strcasecmp(v, "true")) return 1;
    if (!strcmp(v, "0") || !strcasecmp(v, "false")) return 0;
    return -1;
}

/* `x1,y1,x2,y2[:left];...` into boxes; count or -1 with msg. */
static int query_boxes(const char *v, hamer_box *boxes, char *msg, size_t msglen) {
    int n = 0;
    const char *p = v;
    while (*p) {
        size_t len = strcspn(p, ";");
        if (len == 0) {
            snprintf(msg, msglen, "boxes: empty box in '%.80s'", v);
            return -1;
        }
        if (n == HAMER_MAX_HANDS) {
            snprintf(msg, msglen, "boxes: more than %d boxes (at most %d hands per image)", HAMER_MAX_HANDS,
                     HAMER_MAX_HANDS);
            return -1;
        }
        char one[128];
        if (len >= sizeof one) {
            snprintf(msg, msglen, "boxes: box %d is too long", n);
            return -1;
        }
        memcpy(one, p, len);
        one[len] = 0;
        if (hamer_box_parse(one, &boxes[n])) {
            snprintf(msg, msglen, "boxes: box %d: %s", n, hamer_last_error());
            return -1;
        }
        n++;
        p += len;
        if (*p == ';') p++;
    }
    if (n == 0) snprintf(msg, msglen, "boxes: no box given (?boxes=x1,y1,x2,y2[:left];...)");
    return n ? n : -1;
}

/* A plain decimal in (0, max]: strtod alone would also take hex floats,
 * "inf" and "nan". 0 taken, -1 not. */
static int query_real(const char *v, double max, double *out) {
    char *end;
    int plain = v[strspn(v, "0123456789.eE+-")] == 0;
    *out = strtod(v, &end);
    return plain && !*end && end != v && *out > 0 && *out <= max ? 0 : -1;
}

/* The checks in the order the server has always made them, so that a
 * request with several faults keeps getting the same answer. */
static int query_values(const hm_srv_query_args *a, int image_body, hm_srv_query *q, char *msg, size_t msglen) {
    const char *v;
    double d = 0;
    if ((v = a->value[QUERY_RESCALE])) {
        double r;
        if (query_real(v, HAMER_MAX_RESCALE, &r)) {
            snprintf(msg, msglen, "rescale must be a number in (0, %g], got '%.40s'", HAMER_MAX_RESCALE, v);
            return 400;
        }
        q->pp.rescale = r;
    }
    if ((v = a->value[QUERY_CROP_MODE])) {
        if (!strcmp(v, "warp")) q->pp.crop_mode = HAMER_CROP_WARP;
        else if (!strcmp(v, "pad")) q->pp.crop_mode = HAMER_CROP_PAD;
        else {
            snprintf(msg, msglen, "crop_mode must be warp or pad, got '%.40s'", v);
            return 400;
        }
    }
    if ((v = a->value[QUERY_VERTICES]) && (q->with_vertices = query_flag(v)) < 0) {
        snprintf(msg, msglen, "vertices must be 0 or 1, got '%.40s'", v);
        return 400;
    }
    if ((v = a->value[QUERY_SIDE_VIEW]) && (q->side_view = query_flag(v)) < 0) {
        snprintf(msg, msglen, "side_view must be 0 or 1, got '%.40s'", v);
        return 400;
    }
    if ((v = a->value[QUERY_FORMAT])) {
        if (!strcmp(v, "glb")) q->format = HM_SRV_FMT_GLB;
        else if (!strcmp(v, "obj")) q->format = HM_SRV_FMT_OBJ;
        else if (!strcmp(v, "bvh")) q->format = HM_SRV_FMT_BVH;
        else if (!strcmp(v, "all")) q->format = HM_SRV_FMT_ALL;
        else if (strcmp(v, "json")) {
            snprintf(msg, msglen, "format must be json, glb, obj, bvh or all, got '%.40s'", v);
            return 400;
        }
        if (q->format != HM_SRV_FMT_JSON && q->format != HM_SRV_FMT_ALL && q->with_vertices) {
            snprintf(msg, msglen, "vertices=1 is for format=json or all (a %s holds the %s)",
                     q->format == HM_SRV_FMT_GLB ? "GLB" : q->format == HM_SRV_FMT_OBJ ? "OBJ" : "BVH",
                     q->format == HM_SRV_FMT_BVH ? "skeletons" : "meshes");
            return 400;
        }
    }
    /* focal=PX / fov=DEG: the photo's camera (else its EXIF, else the model's) */
    if ((v = a->value[QUERY_FOCAL]) && query_real(v, HAMER_MAX_FOCAL, &d)) {
        snprintf(msg, msglen, "focal must be a focal length in pixels in (0, %g], got '%.40s'", HAMER_MAX_FOCAL, v);
        return 400;
    }
    if (v) q->pp.focal_px = (float)d;
    if ((v = a->value[QUERY_FOV]) && (query_real(v, 180, &d) || d >= 180)) {
        snprintf(msg, msglen, "fov must be a field of view in degrees in (0, 180), got '%.40s'", v);
        return 400;
    }
    if (v) q->pp.fov_deg = (float)d;
    /* The server's --timeout-s still bounds it (hm_srv_work_submit): a
     * client may shorten its deadline, not lengthen it. */
    if ((v = a->value[QUERY_TIMEOUT]) && query_real(v, 86400, &q->timeout_s)) {
        snprintf(msg, msglen, "timeout_s must be a number of seconds in (0, 86400], got '%.40s'", v);
        return 400;
    }
    const char *boxes = a->value[QUERY_BOXES];
    /* body=auto|on|off: the detector's body pass, so only without boxes */
    if ((v = a->value[QUERY_BODY])) {
        if (hm_tool_parse_body(v, &q->body)) {
            snprintf(msg, msglen, "body must be auto, on or off, got '%.40s'", v);
            return 400;
        }
        if (boxes) {
            snprintf(msg, msglen, "body= chooses the detector's passes: it is for requests without boxes");
            return 400;
        }
    }
    /* proposals=auto|on|off: the detector's proposal pass, likewise */
    if ((v = a->value[QUERY_PROPOSALS])) {
        if (hm_tool_parse_proposals(v, &q->proposals)) {
            snprintf(msg, msglen, "proposals must be auto, on or off, got '%.40s'", v);
            return 400;
        }
        if (boxes) {
            snprintf(msg, msglen, "proposals= chooses the detector's passes: it is for requests without boxes");
            return 400;
        }
    }
    /* body_boxes=0|1: the body pass's keypoint-only boxes, likewise */
    if ((v = a->value[QUERY_BODY_BOXES])) {
        if (strcmp(v, "0") && strcmp(v, "1")) {
            snprintf(msg, msglen, "body_boxes must be 0 or 1, got '%.40s'", v);
            return 400;
        }
        if (boxes) {
            snprintf(msg, msglen, "body_boxes= chooses the detector's output: it is for requests without boxes");
            return 400;
        }
        q->body_boxes = v[0] == '1';
    }
    /* min_score / max_hands: the detector's threshold and count, likewise */
    if ((v = a->value[QUERY_MIN_SCORE])) {
        double x;
        if (query_real(v, 1, &x) || !(x < 1)) {
            snprintf(msg, msglen, "min_score must be a number in (0, 1), got '%.40s'", v);
            return 400;
        }
        if (boxes) {
            snprintf(msg, msglen, "min_score= is the detector's threshold: it is for requests without boxes");
            return 400;
        }
        q->min_score = (float)x;
    }
    if ((v = a->value[QUERY_MAX_HANDS])) {
        int n;
        if (hm_tool_parse_int(v, 1, HAMER_MAX_HANDS, &n)) {
            snprintf(msg, msglen, "max_hands must be an integer in 1..%d, got '%.40s'", HAMER_MAX_HANDS, v);
            return 400;
        }
        if (boxes) {
            snprintf(msg, msglen, "max_hands= bounds the detector's hands: it is for requests without boxes");
            return 400;
        }
        q->max_hands = n;
    }
    /* draw=mesh,boxes,keypoints,labels|all|none: what the overlay shows */
    if ((v = a->value[QUERY_DRAW])) {
        if (hm_tool_parse_draw(v, &q->draw_hide)) {
            snprintf(msg, msglen, "draw takes mesh, boxes, keypoints, labels, all or none (comma-separated), "
                     "got '%.40s'", v);
            return 400;
        }
        if (q->side_view || (a->endpoint == HM_SRV_EP_PREDICT && q->format != HM_SRV_FMT_ALL)) {
            snprintf(msg, msglen, "draw= is for the overlay: /v1/render (not side_view=1) or /v1/predict?format=all");
            return 400;
        }
    }
    if (image_body) {
        if (!boxes) {
            snprintf(msg, msglen, "an image body needs ?boxes=x1,y1,x2,y2[:left];...");
            return 400;
        }
        if ((q->nbox = query_boxes(boxes, q->boxes, msg, msglen)) < 0) return 400;
    } else if (boxes) {
        snprintf(msg, msglen, "multipart: give the boxes in the 'hands' part, not in ?boxes=");
        return 400;
    }
    return 0;
}

int hm_srv_query_parse(const hm_srv_query_args *a, int image_body, hm_srv_query *q, char *msg, size_t msglen) {
    memset(q, 0, sizeof *q);
    q->pp = hamer_predict_default_params();
    int status = hm_srv_query_check_keys(a, msg, msglen);
    if (!status) status = query_values(a, image_body, q, msg, msglen);
    return status ? query_fail(status, msg) : 0;
}

/* ---- POST /v1/live's query (its sessions: server_live.c) ---- */

void hm_srv_live_query_init(hm_srv_live_query *q) {
    memset(q, 0, sizeof *q);
    q->max_hands = 2;
    q->smooth = HAMER_SMOOTH_ONE_EURO;
}

int hm_srv_live_query_add(hm_srv_live_query *q, const char *key, const char *value, char *msg, size_t msglen) {
    static const char *const keys[] = {"session", "end", "max_hands", "min_score", "smooth"};
    int k = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(key, keys[i])) k = i;
    if (k < 0 || (q->seen >> k & 1) || !value) {
        snprintf(msg, msglen, "unknown, repeated or valueless query parameter '%.40s' for /v1/live", key);
        goto bad;
    }
    q->seen |= 1u << k;
    if (k == 0) {
        size_t n = strlen(value);
        if (n != 32 || value[strspn(value, "0123456789abcdef")]) {
            snprintf(msg, msglen, "session must be the 32 hex digits a new session's answer gave, got '%.40s'", value);
            goto bad;
        }
        memcpy(q->session, value, 33);
    } else if (k == 1) {
        if (strcmp(value, "0") && strcmp(value, "1")) {
            snprintf(msg, msglen, "end must be 0 or 1, got '%.40s'", value);
            goto bad;
        }
        q->end = value[0] == '1';
    } else if (k == 2) {
        if (hm_tool_parse_int(value, 1, HM_SRV_LIVE_MAX_HANDS, &q->max_hands)) {
            snprintf(msg, msglen, "max_hands must be an integer in 1..%d, got '%.40s'", HM_SRV_LIVE_MAX_HANDS, value);
            goto bad;
        }
    } else if (k == 3) {
        char *end;
        double x = strtod(value, &end);
        if (value[strspn(value, "0123456789.")] || end == value || *end || !(x > 0 && x < 1)) {
            snprintf(msg, msglen, "min_score must be a number in (0, 1), got '%.40s'", value);
            goto bad;
        }
        q->min_score = (float)x;
    } else {
        if (!strcmp(value, "one-euro")) q->smooth = HAMER_SMOOTH_ONE_EURO;
        else if (!strcmp(value, "none")) q->smooth = HAMER_SMOOTH_NONE;
        else {
            snprintf(msg, msglen, "smooth must be one-euro or none, got '%.40s'", value);
            goto bad;
        }
    }
    return 0;
bad:
    for (char *c = msg; *c; c++) /* client bytes: one printable line */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    return 400;
}

int hm_srv_live_query_check(const hm_srv_live_query *q, char *msg, size_t msglen) {
    const unsigned start_only = 1u << 2 | 1u << 3 | 1u << 4; /* max_hands, min_score, smooth */
    if (q->session[0] && (q->seen & start_only)) {
        snprintf(msg, msglen, "max_hands, min_score and smooth are a new session's (leave out session=)");
        return 400;
    }
    if (q->end && !q->session[0]) {
        snprintf(msg, msglen, "end=1 needs session=");
        return 400;
    }
    return 0;
}
