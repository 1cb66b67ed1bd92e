/* fuzz_server - the server's request parsing:
 *   - the head's framing rules (hm_srv_framing_*, hm_srv_target_check,
 *     tools/serve/server_framing.c): the input read as a request head and
 *     split into fields as libmicrohttpd 0.9.75 splits them; besides the
 *     sanitizers it traps on a status other than 0/400/501, a reason that
 *     is not one printable line, and a head let through that breaks a rule
 *     (checked again here, field by field);
 *   - the body: multipart/form-data splitting (hm_srv_multipart_parse,
 *     tools/serve/server_multipart.c) and, as `hamer serve` does with a
 *     'hands' part, the boxes JSON inside it (hamer_boxes_parse). Input:
 *     the Content-Type header value up to the first '\n', then the body.
 * The query string (?boxes=, rescale, ...) is fuzz_query's.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "serve/server.h"
#include "core/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_FIELDS 512

static int one_line(const char *m) {
    if (!m[0]) return 0;
    for (const char *p = m; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) return 0;
    return 1;
}

static int tchars(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              (s[i] && strchr("!#$%&'*+-.^_`|~", s[i]))))
            return 0;
    return n > 0;
}

static int named(const hm_srv_field *f, const char *name) {
    return f->name_len == strlen(name) && !strncasecmp(f->name, name, f->name_len);
}

/* The input as a request head: lines up to the first empty one, each ended
 * by CRLF or a bare LF; the first is the request line (target, version),
 * every other one a field split at its first colon with the value's leading
 * spaces and tabs skipped, and a line starting with a space or tab folds
 * into the field before it. A line libmicrohttpd answers 400 itself (no
 * colon, a fold with no field before it) ends the head there. */
static void head(const uint8_t *data, size_t size) {
    char *buf = malloc(size + 1);
    hm_srv_field *f = malloc(MAX_FIELDS * sizeof *f);
    if (!buf || !f) goto out;
    memcpy(buf, data, size);
    buf[size] = 0;
    int n = 0, http10 = 0, lineno = 0;
    char msg[200];
    for (size_t pos = 0; pos < size && n < MAX_FIELDS;) {
        char *line = buf + pos, *nl = memchr(line, '\n', size - pos);
        if (!nl) break;
        size_t len = (size_t)(nl - line);
        pos += len + 1;
        if (len && line[len - 1] == '\r') len--;
        line[len] = 0;
        if (!len) break;
        if (lineno++ == 0) {
            char *sp = memchr(line, ' ', len), *target = sp ? sp + 1 : line;
            char *sp2 = strchr(target, ' ');
            http10 = sp2 && !strcmp(sp2 + 1, "HTTP/1.0");
            if (sp2) *sp2 = 0;
            msg[0] = 0;
            int st = hm_srv_target_check(target, msg, sizeof msg);
            if ((st != 0 && st != 400) || (st && !one_line(msg))) __builtin_trap();
            if (!st && strstr(target, "%00") && strstr(target, "%00") < target + strcspn(target, "?")) __builtin_trap();
            continue;
        }
        if (line[0] == ' ' || line[0] == '\t') {
            if (!n) break;
            f[n - 1].folded = 1;
            continue;
        }
        char *colon = memchr(line, ':', len);
        if (!colon) break;
        *colon = 0;
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t') v++;
        f[n++] = (hm_srv_field){line, v, (size_t)(colon - line), strlen(v), 0};
    }
    hm_srv_framing fr;
    hm_srv_framing_init(&fr);
    for (int i = 0; i < n; i++) hm_srv_framing_field(&fr, &f[i]);
    int st = hm_srv_framing_end(&fr, http10);
    if (st && st != 400 && st != 501) __builtin_trap();
    if (st && !one_line(fr.msg)) __builtin_trap();
    if (!st) {
        /* let through: every rule holds */
        int nte = 0;
        const hm_srv_field *cl = NULL, *te = NULL;
        for (int i = 0; i < n; i++) {
            if (f[i].folded || !tchars(f[i].name, f[i].name_len)) __builtin_trap();
            if (named(&f[i], "Transfer-Encoding")) nte++, te = &f[i];
            if (named(&f[i], "Content-Length")) {
                if (cl && (cl->value_len != f[i].value_len || memcmp(cl->value, f[i].value, f[i].value_len)))
                    __builtin_trap();
                cl = &f[i];
            }
        }
        if (nte > 1 || (te && (cl || http10 || strcasecmp(te->value, "chunked")))) __builtin_trap();
    }
out:
    free(f);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    head(data, size);
    const uint8_t *nl = memchr(data, '\n', size);
    size_t ctlen = nl ? (size_t)(nl - data) : size;
    char *ct = malloc(ctlen + 1);
    if (!ct) return 0;
    memcpy(ct, data, ctlen);
    ct[ctlen] = 0;
    /* The body in its own exactly-sized allocation, as the server holds it. */
    size_t blen = nl ? size - ctlen - 1 : 0;
    uint8_t *body = malloc(blen ? blen : 1);
    if (!body) {
        free(ct);
        return 0;
    }
    if (blen) memcpy(body, nl + 1, blen);
    hm_srv_part parts[HM_SRV_MAX_PARTS];
    char err[256];
    err[0] = 0;
    int n = hm_srv_multipart_parse(ct, body, blen, parts, HM_SRV_MAX_PARTS, err, sizeof err);
    if (n < 0 && (!err[0] || strchr(err, '\n'))) __builtin_trap(); /* a one-line reason */
    if (n > HM_SRV_MAX_PARTS) __builtin_trap();
    volatile uint8_t sink = 0;
    for (int i = 0; i < n; i++) {
        const hm_srv_part *p = &parts[i];
        if (!memchr(p->name, 0, sizeof p->name) || !p->name[0]) __builtin_trap();
        if (p->data < body || p->len > blen || (size_t)(p->data - body) > blen - p->len) __builtin_trap();
        if (p->len) sink ^= p->data[0] ^ p->data[p->len - 1];
        if (!strcmp(p->name, "hands")) {
            hamer_box boxes[HAMER_MAX_HANDS];
            int nb = hamer_boxes_parse((const char *)p->data, p->len, boxes, HAMER_MAX_HANDS);
            if (nb > HAMER_MAX_HANDS) __builtin_trap();
        }
    }
    (void)sink;
    free(body);
    free(ct);
    return 0;
}
