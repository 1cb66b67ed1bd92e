/* names.c - file names in a printable, lossless form (folder mode's rule 1,
 * src/hamer_folder.c). A file name is bytes; errors.jsonl and NAME.json
 * are UTF-8 and stderr may be a terminal. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "core/names.h"

/* The length of the well-formed UTF-8 sequence at p (Unicode table 3-7),
 * 0 when none starts there. p is NUL-terminated: a NUL is never a
 * continuation byte, so nothing past it is read. */
static int utf8_len(const unsigned char *p) {
#define CONT(x) ((x) >= 0x80 && (x) <= 0xBF)
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return CONT(p[1]) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        return p[1] >= lo && p[1] <= hi && CONT(p[2]) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        return p[1] >= lo && p[1] <= hi && CONT(p[2]) && CONT(p[3]) ? 4 : 0;
    }
    return 0;
#undef CONT
}

char *hm_name_text(const char *s) {
    char *out = malloc(4 * strlen(s) + 1), *o = out; /* at worst \xNN for every byte */
    if (!out) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int k = utf8_len(p);
        int ctl = k == 1 ? *p < 0x20 || *p == 0x7F : k == 2 && p[0] == 0xC2 && p[1] <= 0x9F;
        if (k == 1 && *p == '\\') {
            *o++ = '\\', *o++ = '\\', p++;
        } else if (k == 0 || ctl) {
            for (int i = 0; i < (k ? k : 1); i++) o += sprintf(o, "\\x%02x", p[i]);
            p += k ? k : 1;
        } else {
            memcpy(o, p, (size_t)k), o += k, p += k;
        }
    }
    *o = 0;
    return out;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

char *hm_name_bytes(const char *t) {
    char *out = malloc(strlen(t) + 1), *o = out;
    if (!out) return NULL;
    for (const char *p = t; *p;) {
        if (*p != '\\') {
            *o++ = *p++;
        } else if (p[1] == '\\') {
            *o++ = '\\', p += 2;
        } else {
            int hi = p[1] == 'x' ? hex_digit(p[2]) : -1, lo = hi >= 0 ? hex_digit(p[3]) : -1;
            if (lo < 0 || (hi | lo) == 0) {
                free(out);
                return NULL;
            }
            *o++ = (char)(hi << 4 | lo), p += 4;
        }
    }
    *o = 0;
    return out;
}
