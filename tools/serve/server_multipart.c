/* server_multipart.c - strict, bounded multipart/form-data splitting for
 * POST /v1/predict and /v1/render (RFC 7578 over RFC 2046 section 5.1).
 *
 * The whole body is already in memory (bounded by --max-body-mb), so the
 * parser works on one buffer and never copies part contents. It is strict
 * where leniency would hide client bugs: the boundary must be valid, every
 * part needs Content-Disposition: form-data with a name, part headers are
 * limited in size, the closing delimiter must be present (else the body was
 * truncated), and the number of parts is bounded.
 */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include "serve/server.h"

#define MAX_BOUNDARY 70
#define MAX_PART_HEADERS 4096

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    /* Messages quote client bytes (names, header values): keep them one
     * printable line whatever the client sent. */
    for (char *c = err; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    return -1;
}

/* RFC 2046 bchars (space allowed except last). */
static int bchar(int c) { return isalnum(c) || strchr("'()+_,-./:=? ", c) != NULL; }

/* Parameter `name` of a header value like `type; a=b; name="v"` into out
 * (unquoted). 1 found, 0 absent, -1 malformed. */
static int header_param(const char *value, const char *name, char *out, size_t outlen) {
    size_t nlen = strlen(name);
    const char *p = strchr(value, ';');
    while (p) {
        p++;
        while (*p == ' ' || *p == '\t') p++;
        if (!strncasecmp(p, name, nlen) && p[nlen] == '=') {
            p += nlen + 1;
            size_t n = 0;
            if (*p == '"') {
                for (p++; *p && *p != '"'; p++) {
                    if (*p == '\\' && p[1]) p++;
                    if (n + 1 >= outlen) return -1;
                    out[n++] = *p;
                }
                if (*p != '"') return -1;
            } else {
                for (; *p && *p != ';' && *p != ' ' && *p != '\t'; p++) {
                    if (n + 1 >= outlen) return -1;
                    out[n++] = *p;
                }
            }
            out[n] = 0;
            return 1;
        }
        /* skip this parameter, respecting quotes */
        int q = 0;
        for (; *p && (q || *p != ';'); p++) {
            if (*p == '"') q = !q;
            else if (q && *p == '\\' && p[1]) p++;
        }
        p = *p ? p : NULL;
    }
    return 0;
}

/* The part headers [h, h+len) (CRLF separated): sets the part's name. */
static int part_headers(const char *h, size_t len, hm_srv_part *part, int index, char *err, size_t errlen) {
    char line[MAX_PART_HEADERS + 1];
    int have_disposition = 0;
    size_t i = 0;
    while (i < len) {
        const char *eol = memmem(h + i, len - i, "\r\n", 2);
        size_t n = eol ? (size_t)(eol - (h + i)) : len - i;
        memcpy(line, h + i, n);
        line[n] = 0;
        i += n + 2;
        if (memchr(line, 0, n)) return fail(err, errlen, "multipart: part %d: NUL byte in its headers", index);
        char *colon = strchr(line, ':');
        if (!colon || colon == line) return fail(err, errlen, "multipart: part %d: malformed header line", index);
        *colon = 0;
        char *value = colon + 1;
        while (*value == ' ' || *value == '\t') value++;
        if (!strcasecmp(line, "Content-Disposition")) {
            if (have_disposition)
                return fail(err, errlen, "multipart: part %d: more than one Content-Disposition", index);
            have_disposition = 1;
            if (strncasecmp(value, "form-data", 9) || (value[9] && value[9] != ';' && value[9] != ' '))
                return fail(err, errlen, "multipart: part %d: Content-Disposition must be form-data", index);
            int r = header_param(value, "name", part->name, sizeof part->name);
            if (r < 0) return fail(err, errlen, "multipart: part %d: malformed or too long name", index);
            if (r == 0 || !part->name[0])
                return fail(err, errlen, "multipart: part %d: Content-Disposition without a name", index);
        } else if (!strcasecmp(line, "Content-Transfer-Encoding")) {
            if (strcasecmp(value, "binary") && strcasecmp(value, "8bit") && strcasecmp(value, "7bit"))
                return fail(err, errlen, "multipart: part %d: Content-Transfer-Encoding '%.40s' is not supported",
                            index, value);
        }
        /* Content-Type and others: the content is sniffed / parsed as is. */
    }
    if (!have_disposition) return fail(err, errlen, "multipart: part %d has no Content-Disposition header", index);
    return 0;
}

int hm_srv_multipart_parse(const char *content_type, const uint8_t *body, size_t len, hm_srv_part *parts,
                           int max_parts, char *err, size_t errlen) {
    char boundary[MAX_BOUNDARY + 2];
    int r = content_type ? header_param(content_type, "boundary", boundary, sizeof boundary) : 0;
    if (r == 0) return fail(err, errlen, "multipart: Content-Type has no boundary parameter");
    size_t blen = r > 0 ? strlen(boundary) : 0;
    if (r < 0 || blen < 1 || blen > MAX_BOUNDARY || boundary[blen - 1] == ' ')
        return fail(err, errlen, "multipart: the boundary must be 1 to 70 characters");
    for (size_t i = 0; i < blen; i++)
        if (!bchar((unsigned char)boundary[i]))
            return fail(err, errlen, "multipart: the boundary has a character RFC 2046 does not allow");

    /* delim = CRLF "--" boundary; the first one may start the body directly. */
    char delim[MAX_BOUNDARY + 5];
    size_t dlen = (size_t)snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    const char *b = (const char *)body;
    size_t pos;
    if (len >= dlen - 2 && !memcmp(b, delim + 2, dlen - 2)) {
        pos = dlen - 2;
    } else {
        const char *d = memmem(b, len, delim, dlen);  /* after a preamble */
        if (!d) return fail(err, errlen, "multipart: the body does not contain the boundary");
        pos = (size_t)(d - b) + dlen;
    }
    int n = 0;
    for (;;) {
        /* just after a delimiter: "--" closes, else padding + CRLF opens a part */
        if (len - pos >= 2 && b[pos] == '-' && b[pos + 1] == '-') {
            if (n == 0) return fail(err, errlen, "multipart: no parts");
            return n;   /* the epilogue, if any, is ignored */
        }
        while (pos < len && (b[pos] == ' ' || b[pos] == '\t')) pos++;
        if (len - pos < 2 || b[pos] != '\r' || b[pos + 1] != '\n')
            return fail(err, errlen, len - pos < 2 ? "multipart: truncated body (no closing boundary)"
                                                   : "multipart: expected CRLF after the boundary");
        pos += 2;
        if (n == max_parts) return fail(err, errlen, "multipart: more than %d parts", max_parts);
        hm_srv_part *part = &parts[n];
        memset(part, 0, sizeof *part);
        /* headers end at an empty line (which may come at once: no headers) */
        size_t hlen;
        if (len - pos >= 2 && b[pos] == '\r' && b[pos + 1] == '\n') {
            hlen = 0;
        } else {
            size_t window = len - pos < MAX_PART_HEADERS + 4 ? len - pos : MAX_PART_HEADERS + 4;
            const char *e = memmem(b + pos, window, "\r\n\r\n", 4);
            if (!e)
                return fail(err, errlen, window == len - pos ? "multipart: truncated body (in part %d's headers)"
                                                             : "multipart: part %d's headers are over 4 KB",
                            n);
            hlen = (size_t)(e - (b + pos)) + 2;    /* keep the last header's CRLF */
        }
        if (part_headers(b + pos, hlen ? hlen - 2 : 0, part, n, err, errlen)) return -1;
        pos += hlen + 2;
        const char *d = memmem(b + pos, len - pos, delim, dlen);
        if (!d) return fail(err, errlen, "multipart: truncated body (part '%s' has no closing boundary)", part->name);
        part->data = body + pos;
        part->len = (size_t)(d - (b + pos));
        pos = (size_t)(d - b) + dlen;
        n++;
    }
}
