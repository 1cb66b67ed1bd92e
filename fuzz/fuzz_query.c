/* fuzz_query - the query string of POST /v1/predict and /v1/render
 * (hm_srv_query_add / _check_keys / _parse, tools/serve/server_query.c): which
 * keys an endpoint takes, then boxes, rescale, crop_mode, vertices and
 * side_view.
 *
 * Input: one byte of request shape (bit 0: /v1/render, else /v1/predict;
 * bit 1: a multipart body, else an image body; bit 2: POST /v1/live's
 * query instead, hm_srv_live_query_add / _check), then the query string as it
 * follows '?' in the URL. The harness splits and decodes it the way
 * libmicrohttpd does before the server sees it: parameters at '&', key and
 * value at the first '=' (none: a key without a value), '+' a space, %XX
 * one byte. A decoded %00 ends the C string the server gets, so every other
 * byte can reach the parser, '&', '=' and ';' included.
 *
 * Invariants (trap): the key check and the full parse agree; an error is
 * 400 with one non-empty line of printable ASCII (it is echoed to clients
 * and logs); a success has rescale in (0, 100], a known crop mode, flags
 * 0/1 and only on the endpoint that takes them, 1..HAMER_MAX_HANDS boxes for
 * an image body (one per ';'-separated item) and none for multipart, every
 * box finite within 1e9 with is_right 0/1, and a box of zero or negative
 * size never passing hm_box_check (the per-hand check before cropping; the
 * query parser leaves geometry to it, see server_query.c). /v1/live: an
 * error is a 400 line as above; a success has a session of 32 lower-case
 * hex digits or none, end only with a session, a new session's keys only
 * without one, max_hands in 1..HM_SRV_LIVE_MAX_HANDS, min_score 0 or in
 * (0, 1), a known smoothing.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "pipeline/preprocess.h"
#include "serve/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int query_hex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* [s, s+n) '+'- and %-decoded into its own exactly-sized allocation (so an
 * overread is ASan's to see), cut at a decoded NUL as a C string is. */
static char *query_decode(const uint8_t *s, size_t n) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = query_hex(s[i + 1])) >= 0 && (lo = query_hex(s[i + 2])) >= 0) {
            out[k++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[k++] = s[i] == '+' ? ' ' : (char)s[i];
        }
    }
    out[k] = 0;
    size_t len = strlen(out);
    char *exact = malloc(len + 1);
    if (exact) memcpy(exact, out, len + 1);
    free(out);
    return exact;
}

static void query_check_msg(int status, const char *msg, size_t msglen) {
    if (status != 400) __builtin_trap();
    size_t n = strnlen(msg, msglen);
    if (n == 0 || n == msglen) __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)msg[i] < 0x20 || (unsigned char)msg[i] > 0x7e) __builtin_trap();
}

static void query_check_ok(const hm_srv_query_args *a, int image_body, const hm_srv_query *q) {
    if (!(q->pp.rescale > 0 && q->pp.rescale <= 100)) __builtin_trap();
    if (q->pp.crop_mode != HAMER_CROP_WARP && q->pp.crop_mode != HAMER_CROP_PAD) __builtin_trap();
    if ((q->with_vertices != 0 && q->with_vertices != 1) || (q->side_view != 0 && q->side_view != 1))
        __builtin_trap();
    if (q->with_vertices && a->endpoint != HM_SRV_EP_PREDICT) __builtin_trap();
    if (q->side_view && a->endpoint != HM_SRV_EP_RENDER) __builtin_trap();
    /* the detector's threshold and count, the overlay's marks */
    if (q->min_score != 0 && !(q->min_score > 0 && q->min_score < 1)) __builtin_trap();
    if (q->max_hands < 0 || q->max_hands > HAMER_MAX_HANDS) __builtin_trap();
    if ((q->min_score || q->max_hands) && a->value[0]) __builtin_trap();
    /* the detector's passes: a known mode, and the default with boxes */
    if (q->proposals != HAMER_PROPOSALS_AUTO && q->proposals != HAMER_PROPOSALS_ON &&
        q->proposals != HAMER_PROPOSALS_OFF)
        __builtin_trap();
    if (q->proposals != HAMER_PROPOSALS_AUTO && a->value[0]) __builtin_trap();
    if (q->draw_hide & ~(unsigned)HAMER_DRAW_ALL) __builtin_trap();
    if (q->format != HM_SRV_FMT_JSON && a->endpoint != HM_SRV_EP_PREDICT) __builtin_trap();
    if (!image_body) {
        if (q->nbox != 0) __builtin_trap();
        return;
    }
    if (q->nbox < 1 || q->nbox > HAMER_MAX_HANDS) __builtin_trap();
    /* One box per ';'-separated item; one trailing ';' is allowed. */
    const char *v = a->value[0];
    size_t vlen = strlen(v);
    int items = 1;
    for (const char *p = v; *p; p++) items += *p == ';';
    if (vlen && v[vlen - 1] == ';') items--;
    if (q->nbox != items) __builtin_trap();
    for (int i = 0; i < q->nbox; i++) {
        const hamer_box *b = &q->boxes[i];
        for (int k = 0; k < 4; k++)
            if (!isfinite(b->bbox[k]) || fabsf(b->bbox[k]) > 1e9f) __builtin_trap();
        if (b->is_right != 0 && b->is_right != 1) __builtin_trap();
        hm_box hb = {b->bbox[0], b->bbox[1], b->bbox[2], b->bbox[3], b->is_right};
        if (hm_box_check(&hb, 640, 480) == 0 && !(hb.x2 > hb.x1 && hb.y2 > hb.y1)) __builtin_trap();
    }
}

static void live_check_ok(const hm_srv_live_query *q) {
    const size_t n = strlen(q->session);
    if (n != 0 && (n != 32 || q->session[strspn(q->session, "0123456789abcdef")])) __builtin_trap();
    if (q->end != 0 && q->end != 1) __builtin_trap();
    if (q->end && !n) __builtin_trap();
    if (n && (q->seen & (1u << 2 | 1u << 3 | 1u << 4))) __builtin_trap();
    if (q->max_hands < 1 || q->max_hands > HM_SRV_LIVE_MAX_HANDS) __builtin_trap();
    if (q->min_score != 0 && !(q->min_score > 0 && q->min_score < 1)) __builtin_trap();
    if (q->smooth != HAMER_SMOOTH_ONE_EURO && q->smooth != HAMER_SMOOTH_NONE) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int live = data[0] & 4;
    hm_srv_live_query lq;
    hm_srv_live_query_init(&lq);
    int live_status = 0;
    char live_msg[300];
    int endpoint = data[0] & 1 ? HM_SRV_EP_RENDER : HM_SRV_EP_PREDICT;
    int image_body = !(data[0] & 2);
    const uint8_t *s = data + 1, *end = data + size;
    size_t cap = 1;
    for (const uint8_t *p = s; p < end; p++) cap += *p == '&';
    char **strs = calloc(2 * cap, sizeof *strs);
    if (!strs) return 0;
    hm_srv_query_args a;
    hm_srv_query_init(&a, endpoint);
    size_t nstr = 0;
    /* libmicrohttpd drops an empty last parameter ("a=1&"), keeps other empty ones */
    while (s < end) {
        const uint8_t *amp = memchr(s, '&', (size_t)(end - s));
        const uint8_t *stop = amp ? amp : end;
        const uint8_t *eq = memchr(s, '=', (size_t)(stop - s));
        char *key = query_decode(s, (size_t)((eq ? eq : stop) - s));
        char *value = eq ? query_decode(eq + 1, (size_t)(stop - eq - 1)) : NULL;
        if (!key || (eq && !value)) {
            free(key);
            free(value);
            goto out;
        }
        strs[nstr++] = key;
        if (value) strs[nstr++] = value;
        if (live) {     /* the server stops at the first refusal */
            if (!live_status) {
                memset(live_msg, 0x55, sizeof live_msg);
                live_status = hm_srv_live_query_add(&lq, key, value, live_msg, sizeof live_msg);
                if (live_status) query_check_msg(live_status, live_msg, sizeof live_msg);
            }
            if (!amp) break;
            s = amp + 1;
            continue;
        }
        int taken = hm_srv_query_add(&a, key, value) == 0;
        if (!taken && !a.bad) __builtin_trap();
        if (!amp) break;
        s = amp + 1;
    }
    if (live) {
        if (!live_status) {
            memset(live_msg, 0x55, sizeof live_msg);
            live_status = hm_srv_live_query_check(&lq, live_msg, sizeof live_msg);
            if (live_status) query_check_msg(live_status, live_msg, sizeof live_msg);
            else live_check_ok(&lq);
        }
        goto out;
    }
    char msg[400], msg2[400];
    memset(msg, 0x55, sizeof msg);
    int keys = hm_srv_query_check_keys(&a, msg, sizeof msg);
    if (keys) query_check_msg(keys, msg, sizeof msg);
    else if (a.bad) __builtin_trap();
    hm_srv_query q;
    memset(msg2, 0x55, sizeof msg2);
    int status = hm_srv_query_parse(&a, image_body, &q, msg2, sizeof msg2);
    if (keys && (status != keys || strcmp(msg, msg2))) __builtin_trap();
    if (status) query_check_msg(status, msg2, sizeof msg2);
    else query_check_ok(&a, image_body, &q);
out:
    for (size_t i = 0; i < nstr; i++) free(strs[i]);
    free(strs);
    return 0;
}
