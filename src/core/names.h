/* names.h - file names in one escaped form that is lossless and printable:
 * well-formed UTF-8 stays as it is except the control characters
 * (U+0000-001F, U+007F, U+0080-009F), written \xNN per byte, as is every
 * byte outside well-formed UTF-8; a backslash is written \\. */
#ifndef HM_NAMES_H
#define HM_NAMES_H

/* s in the escaped form (malloc'd; NULL: out of memory). */
char *hm_name_text(const char *s);
/* The bytes an escaped name stands for (malloc'd), or NULL when t is not in
 * the form (a lone backslash, a bad or NUL \x) or out of memory. */
char *hm_name_bytes(const char *t);

#endif
