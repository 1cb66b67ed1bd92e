/* server_util.c - the small helpers every server file uses: the log line,
 * the JSON error body, the answer bounds. */
#define _POSIX_C_SOURCE 200809L
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "format/image.h"
#include "serve/server.h"

/* One "hamer serve: ..." line on stderr. */
void hm_srv_log(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    hm_tool_vlog("hamer serve", fmt, ap);
    va_end(ap);
}

/* {"error": msg} as a malloc'd string (*len set); NULL only when out of memory. */
char *hm_srv_error_json(const char *msg, size_t *len) {
    /* Messages may quote client input cut at any byte: keep printable ASCII
     * only, so the JSON string is always valid UTF-8 (jansson refuses
     * anything else). */
    char clean[512];
    size_t n = 0;
    for (const char *p = msg ? msg : "unknown error"; *p && n + 1 < sizeof clean; p++)
        clean[n++] = (unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f ? *p : '?';
    clean[n] = 0;
    json_t *o = json_pack("{s:s}", "error", clean);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s) {
        /* Out of memory: a constant body still tells the client. */
        s = strdup("{\"error\":\"out of memory\"}");
    }
    *len = s ? strlen(s) : 0;
    return s;
}

int hm_srv_image_dims(const uint8_t *p, size_t n, int *w, int *h) {
    /* the library's header reader (fuzzed with its decoder: a JPEG, PNG or
     * WebP that decodes has its size there), any size it states (a huge one
     * is the budget's to refuse); the decoder checks the size again */
    long long W = 0, H = 0;
    if (!hm_image_header_size(p, n, NULL, &W, &H) || W < 0 || H < 0 || W > INT_MAX || H > INT_MAX) return -1;
    *w = (int)W, *h = (int)H;
    return 0;
}

/* Bytes of one hand in RESULT.json at most: ~670 numbers (%.9g: at most 16
 * bytes with the comma; the demo's fields, the camera's, the quaternions,
 * up to 45 PCA coefficients and the SMPL-X pose), keys and brackets, or an
 * escaped error message (measured: ~9 KB), and its 2 x 2334 vertex
 * coordinates (vertices, vertices_cam: ~63 KB). */
#define HAND_JSON_MAX (16u << 10)
#define VERTICES_JSON_MAX (96u << 10)
/* A hand of a BVH: 16 joints and 5 end sites of ~90 bytes, 51 values of
 * at most 16 bytes (measured: ~3.3 KB). */
#define HAND_BVH_MAX (8u << 10)

/* A hand of a GLB: its vertex data (60 KB), its nodes and accessors in the JSON chunk (~12 KB). */
#define HAND_GLB_MAX (96u << 10)
/* A hand of an OBJ: 778 "v" lines of six %.8f numbers (at most 100 bytes
 * while the coordinates stay under 1e6 m; measured ~70), 1552 "f" lines of
 * three indices under 64 x 778 (at most 21 bytes), two header lines. */
#define HAND_OBJ_MAX (112u << 10)

size_t hm_srv_answer_bound(int render, double pixels, int nhands, int with_vertices, int format) {
    if (render) {
        /* 8-bit RGB, a filter byte per row (at most 65535 rows); deflate's
         * stored blocks and libpng's 8 KB IDAT chunks add under 0.2%. */
        double raw = 3.0 * (pixels > 0 ? pixels : 0) + 65536.0;
        return (size_t)(raw + raw / 256.0) + (64u << 10);
    }
    if (format == HM_SRV_FMT_ALL) /* the four answers, and the parts' headers */
        return (4u << 10) + hm_srv_answer_bound(1, pixels, nhands, 0, 0) +
               hm_srv_answer_bound(0, pixels, nhands, with_vertices, HM_SRV_FMT_JSON) +
               hm_srv_answer_bound(0, pixels, nhands, 0, HM_SRV_FMT_GLB) +
               hm_srv_answer_bound(0, pixels, nhands, 0, HM_SRV_FMT_OBJ);
    if (format == HM_SRV_FMT_GLB) return (4u << 10) + (size_t)(nhands > 0 ? nhands : 0) * HAND_GLB_MAX;
    if (format == HM_SRV_FMT_OBJ) return (4u << 10) + (size_t)(nhands > 0 ? nhands : 0) * HAND_OBJ_MAX;
    if (format == HM_SRV_FMT_BVH) return (4u << 10) + (size_t)(nhands > 0 ? nhands : 0) * HAND_BVH_MAX;
    return (4u << 10) + (size_t)(nhands > 0 ? nhands : 0) * (HAND_JSON_MAX + (with_vertices ? VERTICES_JSON_MAX : 0));
}
