/* worker_url.c - redis:// URLs: parsing, a password-free form for logs,
 * and the $HAMER_REDIS_URL fallback. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "worker/worker.h"

/* 1 + the value of a hex digit, 0 if c is not one. */
static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0' + 1;
    if (c >= 'a' && c <= 'f') return c - 'a' + 11;
    if (c >= 'A' && c <= 'F') return c - 'A' + 11;
    return 0;
}

/* Decode %XX escapes of s[0..n) into out (NUL-terminated); -1 when the
 * result does not fit, an escape is malformed or decodes to NUL. */
static int unescape(const char *s, size_t n, char *out, size_t cap) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '%') {
            if (i + 2 >= n || !hexval(s[i + 1]) || !hexval(s[i + 2])) return -1;
            c = (hexval(s[i + 1]) - 1) * 16 + hexval(s[i + 2]) - 1;
            if (c == 0) return -1;
            i += 2;
        }
        if (k + 1 >= cap) return -1;
        out[k++] = (char)c;
    }
    out[k] = 0;
    return 0;
}

/* Parse a decimal in [lo, hi] from s[0..n); -1 if not one. */
static int parse_num(const char *s, size_t n, long lo, long hi, int *out) {
    if (n == 0 || n > 9) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = (int)v;
    return 0;
}

/* redis://[[user]:password@]HOST[:PORT][/DB]; rediss:// refused (no TLS here). */
int hm_wk_url_parse(const char *url, hm_wk_url *u, char *err, size_t errlen) {
    memset(u, 0, sizeof *u);
    u->port = 6379;
    if (!strncmp(url, "rediss://", 9)) {
        snprintf(err, errlen, "rediss:// (TLS) is not supported: this build's hiredis (%d.%d) has no TLS; "
                 "reach a TLS Redis through a local tunnel (stunnel, spiped) and give redis://127.0.0.1:PORT",
                 HIREDIS_MAJOR, HIREDIS_MINOR);
        return -1;
    }
    if (strncmp(url, "redis://", 8)) {
        snprintf(err, errlen, "Redis URL must start with redis://, got '%.100s'", url);
        return -1;
    }
    const char *p = url + 8;
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    /* The credentials end at the last '@' before the path (a password may hold '@' escaped or not). */
    const char *at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@') at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));
        const char *ue = colon ? colon : at;
        if (unescape(p, (size_t)(ue - p), u->user, sizeof u->user) ||
            (colon && unescape(colon + 1, (size_t)(at - colon - 1), u->password, sizeof u->password))) {
            snprintf(err, errlen, "Redis URL: bad user or password (too long, or a bad %%-escape)");
            return -1;
        }
        if (!colon) {
            /* redis://password@host is what most clients read as a password alone. */
            memcpy(u->password, u->user, sizeof u->password < sizeof u->user ? sizeof u->password : sizeof u->user);
            u->user[0] = 0;
        }
        p = at + 1;
    }
    const char *hend, *portp = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            snprintf(err, errlen, "Redis URL: unclosed '[' in the host%s", "");
            return -1;
        }
        if ((size_t)(rb - p - 1) >= sizeof u->host || rb == p + 1) {
            snprintf(err, errlen, "Redis URL: bad IPv6 host%s", "");
            return -1;
        }
        memcpy(u->host, p + 1, (size_t)(rb - p - 1));
        hend = rb + 1;
        if (hend < end && *hend != ':') {
            snprintf(err, errlen, "Redis URL: unexpected text after the IPv6 host%s", "");
            return -1;
        }
        if (hend < end) portp = hend + 1;
    } else {
        const char *colon = memchr(p, ':', (size_t)(end - p));
        hend = colon ? colon : end;
        if (hend == p || (size_t)(hend - p) >= sizeof u->host) {
            snprintf(err, errlen, "Redis URL: missing or too long host in '%.100s'", url);
            return -1;
        }
        memcpy(u->host, p, (size_t)(hend - p));
        if (colon) portp = colon + 1;
    }
    if (portp && parse_num(portp, (size_t)(end - portp), 1, 65535, &u->port)) {
        snprintf(err, errlen, "Redis URL: the port must be 1..65535, got '%.*s'", (int)(end - portp), portp);
        return -1;
    }
    if (slash && slash[1] && parse_num(slash + 1, strlen(slash + 1), 0, 1000000, &u->db)) {
        snprintf(err, errlen, "Redis URL: the database must be a number, got '%.50s'", slash + 1);
        return -1;
    }
    for (const char *q = u->host; *q; q++)
        if ((unsigned char)*q <= 0x20 || *q == '/' || *q == '@' || (unsigned char)*q >= 0x7f) {
            snprintf(err, errlen, "Redis URL: bad character in the host '%.100s'", u->host);
            return -1;
        }
    return 0;
}

/* redis://[user@]host:port/db: never the password. */
void hm_wk_url_show(const hm_wk_url *u, char *out, size_t n) {
    int v6 = strchr(u->host, ':') != NULL;
    snprintf(out, n, "redis://%s%s%s%s%s:%d/%d", u->user, u->user[0] || u->password[0] ? "@" : "", v6 ? "[" : "",
             u->host, v6 ? "]" : "", u->port, u->db);
}

/* The given URL, else a non-empty $HAMER_REDIS_URL, else NULL. */
const char *hm_wk_url_arg(const char *given) {
    if (given) return given;
    const char *env = getenv("HAMER_REDIS_URL");
    return env && *env ? env : NULL;
}
