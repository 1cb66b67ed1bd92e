/* server_static.c - `hamer serve`: the web page at / (web/ in the source
 * tree, installed with three.js by scripts/get_web.sh).
 *
 * Only a fixed list of files is served: a request path is compared with
 * the list's paths byte for byte and nothing else (no file-system lookup
 * is made from client text, so no path can reach another file). The files
 * are read once at start from --web DIR (default
 * ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/web) into memory; when one is
 * missing or unreadable, the page answers a 404 text naming
 * scripts/get_web.sh and the API is unaffected. Every answer of the page
 * carries a strict Content-Security-Policy (scripts and styles from this
 * origin only, no inline code; images also from blob: and data: URLs, for
 * the overlay PNG and the photo preview).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
    "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

int hm_srv_web_route(const char *url, size_t n) {
    for (int i = 0; i < NFILES; i++)
        if (strlen(FILES[i].path) == n && !memcmp(url, FILES[i].path, n)) return i;
    return -1;
}

void hm_srv_web_load(hm_srv *s) {
    struct hm_srv_web *w = calloc(1, sizeof *w);
    if (!w) return;
    s->web = w;
    const char *xdg = getenv("XDG_DATA_HOME"), *home = getenv("HOME");
    if (s->cfg.web_dir) snprintf(w->dir, sizeof w->dir, "%s", s->cfg.web_dir);
    else if (xdg && *xdg) snprintf(w->dir, sizeof w->dir, "%s/hamer/web", xdg);
    else snprintf(w->dir, sizeof w->dir, "%s/.local/share/hamer/web", home && *home ? home : ".");
    w->loaded = 1;
    for (int i = 0; i < NFILES && w->loaded; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%.1000s/%s", w->dir, FILES[i].file);
        for (int j = 0; j < i; j++)     /* "/" and "/index.html" share one file */
            if (!strcmp(FILES[j].file, FILES[i].file)) {
                w->data[i] = w->data[j], w->len[i] = w->len[j];
                break;
            }
        if (!w->data[i] && !(w->data[i] = hm_tool_read_file(path, WEB_MAX_FILE, &w->len[i], w->reason, sizeof w->reason)))
            w->loaded = 0;
    }
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
