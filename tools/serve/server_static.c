/* server_static.c - `hamer serve`: the web page at / (web/ in the source
 * tree, installed with three.js by scripts/get_web.sh).
 *
 * Only a fixed list of files is served: a request path is compared with
 * the list's paths byte for byte and nothing else (no file-system lookup
 * is made from client text, so no path can reach another file). The files
 * are read once at start from --web DIR (default
 * ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/web) into memory; when one is
 * missing or unreadable, the page answers a 404 text naming
 * scripts/get_web.sh and the API is unaffected. The files and vendor/ must
 * be plain files and a folder inside DIR: a symbolic link is refused (the
 * page has none, and a link could serve any file the server may read), as
 * is a FIFO or device, without waiting on it (DIR itself may be a link: it
 * is the operator's path). Every answer of the page
 * carries a strict Content-Security-Policy (scripts and styles from this
 * origin only, no inline code; images also from blob: and data: URLs, for
 * the overlay PNG and the photo preview).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "common/common.h"
#include "serve/server.h"

#define WEB_MAX_FILE (8u << 20)     /* larger than any file of the page */

static const struct {
    const char *path, *file, *type;
} FILES[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/index.html", "index.html", "text/html; charset=utf-8"},
    {"/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/style.css", "style.css", "text/css; charset=utf-8"},
    {"/vendor/three.module.js", "vendor/three.module.js", "text/javascript; charset=utf-8"},
    {"/vendor/GLTFLoader.js", "vendor/GLTFLoader.js", "text/javascript; charset=utf-8"},
    {"/vendor/OrbitControls.js", "vendor/OrbitControls.js", "text/javascript; charset=utf-8"},
    {"/vendor/BufferGeometryUtils.js", "vendor/BufferGeometryUtils.js", "text/javascript; charset=utf-8"},
    {"/vendor/three-LICENSE.txt", "vendor/three-LICENSE.txt", "text/plain; charset=utf-8"},
    /* the example photos (npm fingerpose@0.1.0, MIT) */
    {"/vendor/nocurl.jpg", "vendor/nocurl.jpg", "image/jpeg"},
    {"/vendor/halfcurl.jpg", "vendor/halfcurl.jpg", "image/jpeg"},
    {"/vendor/fullcurl.jpg", "vendor/fullcurl.jpg", "image/jpeg"},
    {"/vendor/fingerpose-LICENSE.txt", "vendor/fingerpose-LICENSE.txt", "text/plain; charset=utf-8"},
};
enum { NFILES = sizeof FILES / sizeof FILES[0] };

struct hm_srv_web {
    char dir[1024];
    int loaded;
    char reason[1200];
    char *data[NFILES];
    size_t len[NFILES];
    char *missing;                  /* the 404 text */
    size_t missing_len;
};

const char *hm_srv_web_csp =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int hm_srv_web_route(const char *url, size_t n) {
    for (int i = 0; i < NFILES; i++)
        if (strlen(FILES[i].path) == n && !memcmp(url, FILES[i].path, n)) return i;
    return -1;
}

/* Open name (one component) in the folder at, refusing a symbolic link;
 * what: the path for messages. -1 with the reason in err. */
static int open_plain(int at, const char *name, int flags, const char *what, char *err, size_t errlen) {
    int fd = openat(at, name, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd >= 0) return fd;
    int e = errno;
    struct stat st;
    if ((e == ELOOP || e == ENOTDIR) && !fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) && S_ISLNK(st.st_mode))
        snprintf(err, errlen, "'%s' is a symbolic link: the page's files must be plain files inside the folder", what);
    else
        snprintf(err, errlen, "cannot open '%s': %s", what, strerror(e));
    return -1;
}

/* One file of the page, path relative to dirfd ("app.js", "vendor/x.js");
 * vendorfd: vendor/, opened on first use. NULL with the reason in err. */
static char *read_page_file(const struct hm_srv_web *w, int dirfd, int *vendorfd, const char *rel, size_t *len,
                            char *err, size_t errlen) {
    char what[1200];
    snprintf(what, sizeof what, "%.1000s/%s", w->dir, rel);
    const char *slash = strchr(rel, '/');
    int at = dirfd;
    if (slash) {   /* the one subfolder of the list: vendor/ */
        if (*vendorfd < 0) {
            char sub[1200];
            snprintf(sub, sizeof sub, "%.1000s/vendor", w->dir);
            *vendorfd = open_plain(dirfd, "vendor", O_RDONLY | O_DIRECTORY, sub, err, errlen);
            if (*vendorfd < 0) return NULL;
        }
        at = *vendorfd;
    }
    int fd = open_plain(at, slash ? slash + 1 : rel, O_RDONLY, what, err, errlen);
    return fd < 0 ? NULL : hm_tool_read_fd(fd, what, WEB_MAX_FILE, len, err, errlen);
}

void hm_srv_web_load(hm_srv *s) {
    struct hm_srv_web *w = calloc(1, sizeof *w);
    if (!w) return;
    s->web = w;
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (s->cfg.web_dir) snprintf(w->dir, sizeof w->dir, "%s", s->cfg.web_dir);
    else if (xdg && *xdg) snprintf(w->dir, sizeof w->dir, "%s/hamer/web", xdg);
    else snprintf(w->dir, sizeof w->dir, "%s/.local/share/hamer/web", home && *home ? home : ".");
    int dirfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC), vendorfd = -1;
    w->loaded = dirfd >= 0;
    if (dirfd < 0) snprintf(w->reason, sizeof w->reason, "cannot open '%s': %s", w->dir, strerror(errno));
    for (int i = 0; i < NFILES && w->loaded; i++) {
        for (int j = 0; j < i; j++)     /* "/" and "/index.html" share one file */
            if (!strcmp(FILES[j].file, FILES[i].file)) {
                w->data[i] = w->data[j], w->len[i] = w->len[j];
                break;
            }
        if (!w->data[i] &&
            !(w->data[i] = read_page_file(w, dirfd, &vendorfd, FILES[i].file, &w->len[i], w->reason, sizeof w->reason)))
            w->loaded = 0;
    }
    if (vendorfd >= 0) close(vendorfd);
    if (dirfd >= 0) close(dirfd);
    if (w->loaded) {
        hm_srv_log("web page: %s", w->dir);
        return;
    }
    hm_srv_log("web page: not installed (%s); / answers 404 (scripts/get_web.sh installs it)", w->reason);
    char text[1600];
    int n = snprintf(text, sizeof text,
                     "The web page of hamer serve is not installed (%s).\n"
                     "Install it with scripts/get_web.sh (into %s), or start the server with --web DIR.\n"
                     "The API works without it: see /openapi.json.\n",
                     w->reason, w->dir);
    w->missing = strdup(text);
    w->missing_len = w->missing && n > 0 ? strlen(w->missing) : 0;
}

int hm_srv_web_get(hm_srv *s, int file, const void **data, size_t *len, const char **type) {
    struct hm_srv_web *w = s->web;
    if (w && w->loaded && file >= 0 && file < NFILES) {
        *data = w->data[file], *len = w->len[file], *type = FILES[file].type;
        return 200;
    }
    static const char fallback[] = "The web page of hamer serve is not installed: run scripts/get_web.sh.\n";
    *data = w && w->missing ? w->missing : fallback;
    *len = w && w->missing ? w->missing_len : sizeof fallback - 1;
    *type = "text/plain; charset=utf-8";
    return 404;
}

void hm_srv_web_free(hm_srv *s) {
    struct hm_srv_web *w = s->web;
    if (!w) return;
    for (int i = 0; i < NFILES; i++) {
        int shared = 0;
        for (int j = 0; j < i; j++) shared |= w->data[j] == w->data[i];
        if (!shared) free(w->data[i]);
    }
    free(w->missing);
    free(w);
    s->web = NULL;
}
