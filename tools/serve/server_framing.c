/* server_framing.c - `hamer serve`: the rules a request head must meet
 * before the server reads its body (server.h, docs/server.md "Framing").
 *
 * Where the body ends must be read the same way by this server and by any
 * proxy in front of it, else the bytes after one request can be read as
 * another (request smuggling). RFC 9112 names the cases; libmicrohttpd
 * 0.9.75 handles them its own way (see server.h), so the handler refuses
 * every head whose framing is not plain: one Content-Length, or one
 * Transfer-Encoding that is exactly "chunked" in an HTTP/1.1 request.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "serve/server.h"

/* RFC 9110 tchar: the characters of a header name. */
static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* s[0..n) as one printable line of at most 40 characters, into out. */
static const char *printable(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < cap && k < 40; i++) {
        unsigned char c = (unsigned char)s[i];
        out[k++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (k < n && k + 3 < cap) out[k++] = '.', out[k++] = '.', out[k++] = '.';
    out[k] = 0;
    return out;
}

static int is_named(const hm_srv_field *f, const char *name) {
    return f->name_len == strlen(name) && !strncasecmp(f->name, name, f->name_len);
}

void hm_srv_framing_init(hm_srv_framing *fr) { memset(fr, 0, sizeof *fr); }

void hm_srv_framing_field(hm_srv_framing *fr, const hm_srv_field *f) {
    char p[48];
    if (fr->status) return;
    /* Whitespace before the colon (RFC 9112 5.1: 400) stays in the name,
     * as does a folded line's text in libmicrohttpd 0.9.75 */
    size_t j = 0;
    while (j < f->name_len && is_tchar((unsigned char)f->name[j])) j++;
    if (!f->name_len || j < f->name_len) {
        fr->status = 400;
        snprintf(fr->msg, sizeof fr->msg, "header name '%s' is not a token (whitespace before the colon?)",
                 printable(f->name, f->name_len, p, sizeof p));
    } else if (f->folded) {
        fr->status = 400;
        snprintf(fr->msg, sizeof fr->msg, "header '%s' is folded onto another line (obsolete line folding, RFC 9112 5.2)",
                 printable(f->name, f->name_len, p, sizeof p));
    } else if (is_named(f, "Transfer-Encoding")) {
        if (!fr->nte++) fr->te = *f;
    } else if (is_named(f, "Content-Length")) {
        /* equal repeats are one length; different ones leave the body's end
         * to whichever one a proxy picks */
        if (fr->ncl++ && (fr->cl.value_len != f->value_len || memcmp(fr->cl.value, f->value, f->value_len))) {
            fr->status = 400;
            snprintf(fr->msg, sizeof fr->msg, "conflicting Content-Length headers");
        } else {
            fr->cl = *f;
        }
    }
}

int hm_srv_framing_end(hm_srv_framing *fr, int http10) {
    char p[48];
    if (fr->status || !fr->nte) return fr->status;
    if (fr->nte > 1) {
        fr->status = 400;
        snprintf(fr->msg, sizeof fr->msg, "Transfer-Encoding given %d times (one 'chunked' is taken)", fr->nte);
    } else if (fr->te.value_len != 7 || strncasecmp(fr->te.value, "chunked", 7)) {
        /* libmicrohttpd takes exactly "chunked" (any case) and reads any
         * other value as a body without end: 501 (RFC 9112 6.1) */
        fr->status = 501;
        snprintf(fr->msg, sizeof fr->msg, "Transfer-Encoding '%s' is not supported (only 'chunked')",
                 printable(fr->te.value, fr->te.value_len, p, sizeof p));
    } else if (fr->ncl) {
        fr->status = 400;
        snprintf(fr->msg, sizeof fr->msg, "both Content-Length and Transfer-Encoding: the body's end is ambiguous "
                 "(RFC 9112 6.1)");
    } else if (http10) {
        fr->status = 400;
        snprintf(fr->msg, sizeof fr->msg, "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 6.1: faulty framing)");
    }
    return fr->status;
}

int hm_srv_target_check(const char *target, char *msg, size_t msglen) {
    size_t n = strcspn(target, "?");
    for (size_t i = 0; i + 2 < n; i++)
        if (target[i] == '%' && target[i + 1] == '0' && target[i + 2] == '0') {
            snprintf(msg, msglen, "the path holds a NUL byte (%%00), which would end it early");
            return 400;
        }
    return 0;
}
