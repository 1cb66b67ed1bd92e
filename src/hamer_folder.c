/* hamer_folder.c - folder mode of include/hamer.h (hamer_folder_*): every
 * photo of a folder through the photo job, resumable, as `hamer batch` and
 * Model.predict_folder run it. Both are front ends over this file, so an
 * output folder written by one is resumed by the other.
 *
 * The rules, in the order they apply:
 *
 * 1. Names (core/names.h). Every file name, and every message that may
 *    hold one, is written in one escaped form that is lossless and
 *    printable.
 * 2. Scan (scan). The regular files of the folder sorted by name (bytes),
 *    names starting with '.' left out, the globs applied to the name; with
 *    recursive the subfolders where they come in that order. Links are
 *    followed, but each folder (device, inode) is scanned once, at its
 *    first path in that order: a link cycle ends, a folder reached by two
 *    paths is done once (under a link's name when the link sorts first);
 *    the output and boxes folders count as seen. At most
 *    HAMER_FOLDER_MAX_DEPTH folders deep and HAMER_FOLDER_MAX_ENTRIES names
 *    read in all, else the open fails before any work.
 * 3. Stems (plan_stems). The images of one folder with one NAME (a.jpg,
 *    a.png) share NAME.json, which records the image it came from first of
 *    all: "input": {"path": its path below the input folder (rule 1),
 *    "size", "mtime_ns"}. The recorded image, while it is a regular file of
 *    the input folder, owns NAME; otherwise (no NAME.json, no record, that
 *    file gone) the first of them by name does. Every other image of that
 *    NAME fails (stage "name") rather than overwrite the owner's outputs.
 * 4. Done (complete). An image is skipped when it owns NAME, NAME.json
 *    records it with its present size and mtime, and every output the
 *    options ask for is there and at least as new as the image (and its
 *    boxes file), with the vertices iff vertices.
 * 5. Failures that stand (permanent): an image of unchanged size and mtime
 *    that did not decode is not retried, nor one whose name still clashes
 *    (retry_failed does); every other failure is retried.
 *
 * Files: per image NAME.json (RESULT.json with the "input" record first),
 * NAME_all.png, NAME_side.png, NAME_N.obj, NAME.glb, each written to a temporary
 * file, fsync'd and renamed (core/fileio.h), NAME.json last: an image is
 * complete exactly when its NAME.json is there. OUT/errors.jsonl: one line
 * {"path","stage","reason","size","mtime_ns"} per failure, appended with
 * one write and fsync'd; at open it is rewritten to the failures that
 * stand. OUT/.hamer-batch.lock: flock'd while a folder is open, so that two
 * runs never remove each other's temporary files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/names.h"
#include "core/util.h"
#include "hamer.h"

/* Boxes files are JSON documents of at most 64 hands: far below this. */
#define FOLDER_BOXES_FILE_MAX (64u << 20)

typedef struct {
    char *path;      /* the image file, as the OS names it */
    char *rel;       /* its path below the input folder */
    char *name;      /* rel, escaped (rule 1): NAME.json's "input" */
    char *shown;     /* path, escaped: errors.jsonl and messages */
    char *out_dir;   /* OUT mirrored (NULL without OUT) */
    char *stem;      /* OUT/.../NAME (NULL without OUT) */
    char *json;      /* OUT/.../NAME.json (NULL without OUT) */
    char *boxes;     /* boxes_dir: D/.../NAME.json */
    struct timespec mtime;
    long long size;
    char *clash;     /* rule 3: rel of the image that owns its NAME, when another one does */
    int done;        /* rule 4: complete (computed unless force) */
    hamer_folder_status status;
    const char *stage;  /* the failure recorded (static strings) */
    char *reason;       /* escaped */
} item;

/* The folders seen by the scan (rule 2): an open-addressing hash set of
 * (device, inode). */
typedef struct {
    dev_t dev;
    ino_t ino;
    int used;
} dir_id;

typedef struct {
    dir_id *v;
    size_t n, cap; /* cap: 0 or a power of 2 */
} dir_set;

/* errors.jsonl of an earlier run: one record per line. */
typedef struct {
    char *path, *stage, *reason, *line;
    long long size, mtime_ns;
    int keep;
} err_rec;

struct hamer_folder {
    char *input_dir, *out_dir, *boxes_dir;
    char **globs;
    int n_globs;
    hamer_folder_params p;      /* the flags; its strings are the copies above */
    item *v;
    size_t n, cap;
    dir_set seen;               /* folders scanned, or not to be (the output and boxes folders) */
    size_t entries;             /* names read so far */
    char *errors_path;
    int errfd, lockfd;          /* -1: none */
    pthread_mutex_t mu;         /* errfd and stats */
    hamer_folder_stats stats;
};

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    return s;
}

static int ts_ge(struct timespec a, struct timespec b) {
    return a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec >= b.tv_nsec);
}

static long long ns_of(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

/* An error whose message quotes a name (escaped, rule 1). */
static int fail_named(int code, const char *fmt, const char *name, const char *extra) {
    char *t = hm_name_text(name);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    hm_err(code, fmt, t ? t : "?", extra ? extra : "");
#pragma GCC diagnostic pop
    free(t);
    return code;
}

/* mkdir -p; 0 or -1 with errno. */
static int mkdir_p(const char *path) {
    if (!*path) return errno = ENOENT, -1;
    char *p = strdup(path);
    if (!p) return errno = ENOMEM, -1;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = c;
        if (!c) break;
    }
    struct stat st;
    int ok = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return ok ? 0 : (errno = ENOTDIR, -1);
}

/* 1 when path is a regular file modified at or after `after` (and after
 * `also` when given). */
static int fresh(const char *path, struct timespec after, const struct timespec *also) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    return ts_ge(st.st_mtim, after) && (!also || ts_ge(st.st_mtim, *also));
}

/* dir/name as Python's os.path.join makes it (no second '/' after a
 * trailing one), so that both front ends give an image the same path. */
static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    return str_printf("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

static int stopped(const hamer_folder *f) { return f->p.cancel && f->p.cancel(f->p.cancel_user); }

/* ---- rule 2: the scan ---- */

static size_t dir_hash(dev_t dev, ino_t ino) {
    unsigned long long h = ((unsigned long long)dev * 0x9E3779B97F4A7C15ULL) ^ (unsigned long long)ino;
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ULL, h ^= h >> 29;
    return (size_t)h;
}

/* 1 when (dev, ino) was not in the set (now it is), 0 when it was, -1
 * out of memory. */
static int dir_set_add(dir_set *s, dev_t dev, ino_t ino) {
    if (2 * (s->n + 1) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        dir_id *v = calloc(cap, sizeof *v);
        if (!v) return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (!s->v[i].used) continue;
            size_t h = dir_hash(s->v[i].dev, s->v[i].ino) & (cap - 1);
            while (v[h].used) h = (h + 1) & (cap - 1);
            v[h] = s->v[i];
        }
        free(s->v);
        s->v = v, s->cap = cap;
    }
    size_t h = dir_hash(dev, ino) & (s->cap - 1);
    for (; s->v[h].used; h = (h + 1) & (s->cap - 1))
        if (s->v[h].dev == dev && s->v[h].ino == ino) return 0;
    s->v[h] = (dir_id){dev, ino, 1};
    s->n++;
    return 1;
}

static int wanted(const hamer_folder *f, const char *name) {
    if (name[0] == '.') return 0; /* hidden files: editors', the OS's, and our own temporary files */
    if (!f->n_globs) return 1;
    for (int i = 0; i < f->n_globs; i++)
        if (fnmatch(f->globs[i], name, 0) == 0) return 1;
    return 0;
}

static int cmp_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The image `name` of the folder rel (below the input folder) appended;
 * 0 or -1 out of memory. */
static int add_item(hamer_folder *f, const char *path, const char *rel, const char *name, const struct stat *st) {
    if (f->n == f->cap) {
        size_t cap = f->cap ? 2 * f->cap : 64;
        item *v = realloc(f->v, cap * sizeof *v);
        if (!v) return -1;
        f->v = v, f->cap = cap;
    }
    item *it = &f->v[f->n++];
    memset(it, 0, sizeof *it);
    it->mtime = st->st_mtim;
    it->size = (long long)st->st_size;
    const char *dot = strrchr(name, '.');
    int stem_len = (int)(dot && dot != name ? (size_t)(dot - name) : strlen(name));
    it->path = strdup(path);
    it->rel = rel[0] ? str_printf("%s/%s", rel, name) : strdup(name);
    it->name = it->rel ? hm_name_text(it->rel) : NULL;
    it->shown = hm_name_text(path);
    int ok = it->path && it->rel && it->name && it->shown;
    if (f->out_dir) {
        it->out_dir = rel[0] ? path_join(f->out_dir, rel) : strdup(f->out_dir);
        it->stem = it->out_dir ? str_printf("%s/%.*s", it->out_dir, stem_len, name) : NULL;
        it->json = it->stem ? str_printf("%s.json", it->stem) : NULL;
        ok = ok && it->json;
    }
    if (f->boxes_dir) {
        char *d = rel[0] ? path_join(f->boxes_dir, rel) : strdup(f->boxes_dir);
        it->boxes = d ? str_printf("%s/%.*s.json", d, stem_len, name) : NULL;
        free(d);
        ok = ok && it->boxes;
    }
    return ok ? 0 : -1;
}

/* The files of dir (rel below the input folder, depth folders down).
 * 0, or a negative code with the message set. */
static int scan(hamer_folder *f, const char *dir, const char *rel, int depth) {
    if (stopped(f)) return hm_err(HM_E_CANCELLED, "interrupted before any image was computed (run again)");
    DIR *d = opendir(dir);
    if (!d) return fail_named(HM_E_IO, "cannot read the folder '%s': %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (++f->entries > HAMER_FOLDER_MAX_ENTRIES) {
            rc = fail_named(HM_E_IO, "more than 1000000 names under the input folder '%s'%s (the scan's limit; split "
                            "the folder)", f->input_dir, NULL);
            break;
        }
        if (n == cap) {
            char **bigger = realloc(names, (cap ? 2 * cap : 64) * sizeof *names);
            if (!bigger) {
                rc = HM_E_NOMEM;
                break;
            }
            names = bigger, cap = cap ? 2 * cap : 64;
        }
        if (!(names[n] = strdup(e->d_name))) rc = HM_E_NOMEM;
        else n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (stopped(f)) {
            rc = hm_err(HM_E_CANCELLED, "interrupted before any image was computed (run again)");
            break;
        }
        char *path = path_join(dir, names[i]);
        char *r = rel[0] ? str_printf("%s/%s", rel, names[i]) : strdup(names[i]);
        struct stat st;
        if (!path || !r) {
            rc = HM_E_NOMEM;
        } else if (stat(path, &st) != 0) {
            /* A dangling link or a file removed meanwhile: nothing to do. */
        } else if (S_ISDIR(st.st_mode)) {
            int unseen = f->p.recursive ? dir_set_add(&f->seen, st.st_dev, st.st_ino) : 0;
            if (unseen < 0) rc = HM_E_NOMEM;
            else if (unseen && depth >= HAMER_FOLDER_MAX_DEPTH)
                rc = fail_named(HM_E_IO, "the folder '%s' is more than 64 folders below the input folder (the scan's "
                                "limit)%s", path, NULL);
            else if (unseen) rc = scan(f, path, r, depth + 1);
        } else if (S_ISREG(st.st_mode) && wanted(f, names[i])) {
            if (add_item(f, path, rel, names[i], &st)) rc = HM_E_NOMEM;
        }
        free(path);
        free(r);
    }
    if (rc == HM_E_NOMEM) fail_named(HM_E_NOMEM, "out of memory listing '%s'%s", dir, NULL);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* ---- rules 3 and 4: what is already done ---- */

/* NAME.json of an earlier run, parsed; NULL when there is none (or it is
 * not a regular file: a FIFO there must not block the run). */
static json_t *load_result(const char *path) {
    struct stat st;
    if (!path || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    return json_load_file(path, 0, NULL);
}

/* The image NAME.json records; 0, or -1 when it records none (or not in
 * the form). *rel (the bytes) is malloc'd. */
static int input_record(json_t *doc, char **rel, long long *size, long long *mtime_ns) {
    json_t *in = json_object_get(doc, "input");
    json_t *p = json_object_get(in, "path"), *sz = json_object_get(in, "size"), *mt = json_object_get(in, "mtime_ns");
    if (!json_is_string(p) || !json_is_integer(sz) || !json_is_integer(mt)) return -1;
    *size = json_integer_value(sz), *mtime_ns = json_integer_value(mt);
    return (*rel = hm_name_bytes(json_string_value(p))) ? 0 : -1;
}

/* rel's folder and NAME (the file name up to its last '.'): the key of
 * rule 3, as a length of rel. */
static size_t stem_key_len(const char *rel) {
    const char *base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? (size_t)(dot - rel) : strlen(rel);
}

static int same_stem(const char *x, const char *y) {
    size_t n = stem_key_len(x);
    return n == stem_key_len(y) && !strncmp(x, y, n);
}

static int cmp_stem(const void *x, const void *y) {
    const item *p = *(item *const *)x, *q = *(item *const *)y;
    size_t np = stem_key_len(p->rel), nq = stem_key_len(q->rel);
    int c = strncmp(p->rel, q->rel, np < nq ? np : nq);
    if (!c && np != nq) c = np < nq ? -1 : 1;
    return c ? c : strcmp(p->rel, q->rel);
}

/* Rule 4: every output asked for is there, at least as new as the image
 * (and its boxes file); doc (its NAME.json, whose record the caller has
 * matched) holds the vertices iff vertices. */
static int complete(const hamer_folder *f, const item *it, json_t *doc) {
    struct timespec bt, *also = NULL;
    struct stat st;
    if (it->boxes) {
        if (stat(it->boxes, &st) != 0) return 0;
        bt = st.st_mtim, also = &bt;
    }
    int ok = fresh(it->json, it->mtime, also);
    char *pic;
    if (ok && f->p.render) ok = (pic = str_printf("%s_all.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && f->p.side_view)
        ok = (pic = str_printf("%s_side.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && f->p.glb) ok = (pic = str_printf("%s.glb", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    json_t *hands = json_object_get(doc, "hands");
    if (ok) ok = json_is_array(hands);
    for (size_t i = 0; ok && i < json_array_size(hands); i++) {
        json_t *hd = json_array_get(hands, i);
        if (json_object_get(hd, "error")) continue;
        if (!!json_object_get(hd, "vertices") != !!f->p.vertices) ok = 0;
        if (ok && f->p.save_mesh) {
            char *obj = str_printf("%s_%zu.obj", it->stem, i);
            ok = obj && fresh(obj, it->mtime, also);
            free(obj);
        }
    }
    return ok;
}

/* Rule 3 (and 4 with OUT, unless force) for every image: clash, done.
 * NAME.json is read once per NAME. 0 or a negative code. */
static int plan_stems(hamer_folder *f) {
    item **p = malloc((f->n ? f->n : 1) * sizeof *p);
    if (!p) return hm_err(HM_E_NOMEM, "out of memory planning the folder");
    for (size_t i = 0; i < f->n; i++) p[i] = &f->v[i];
    qsort(p, f->n, sizeof *p, cmp_stem);
    int rc = 0;
    for (size_t g = 0, end; g < f->n && rc == 0; g = end) {
        if (stopped(f)) {
            rc = hm_err(HM_E_CANCELLED, "interrupted before any image was computed (run again)");
            break;
        }
        for (end = g + 1; end < f->n && same_stem(p[end]->rel, p[g]->rel);) end++;
        json_t *doc = load_result(p[g]->json);
        char *rec = NULL;
        long long size = 0, mtime_ns = 0;
        const char *owner = p[g]->rel;
        if (doc && input_record(doc, &rec, &size, &mtime_ns) == 0 && same_stem(rec, p[g]->rel)) {
            char *path = path_join(f->input_dir, rec);
            struct stat st;
            if (!path) rc = HM_E_NOMEM;
            else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) owner = rec;
            free(path);
        }
        for (size_t k = g; k < end && rc == 0; k++) {
            item *it = p[k];
            if (strcmp(it->rel, owner)) {
                if (!(it->clash = strdup(owner))) rc = HM_E_NOMEM;
            } else if (!f->p.force && owner == rec && size == it->size && mtime_ns == ns_of(it->mtime)) {
                it->done = complete(f, it, doc);
            }
        }
        free(rec);
        json_decref(doc);
    }
    free(p);
    if (rc == HM_E_NOMEM) hm_err(HM_E_NOMEM, "out of memory planning the folder");
    return rc;
}

/* ---- rule 5 and errors.jsonl ---- */

/* errors.jsonl of an earlier run; lines that do not parse (none should:
 * each is one write) are dropped. */
static err_rec *read_errors(const char *file, size_t *n) {
    *n = 0;
    FILE *fp = fopen(file, "rb");
    if (!fp) return NULL;
    err_rec *v = NULL;
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, fp)) > 0) {
        json_t *o = json_loadb(line, (size_t)len, 0, NULL);
        const char *p = o ? json_string_value(json_object_get(o, "path")) : NULL;
        const char *s = o ? json_string_value(json_object_get(o, "stage")) : NULL;
        const char *why = o ? json_string_value(json_object_get(o, "reason")) : NULL;
        if (p && s && *n == cap) {
            err_rec *bigger = realloc(v, (cap ? 2 * cap : 16) * sizeof *v);
            if (bigger) v = bigger, cap = cap ? 2 * cap : 16;
        }
        if (p && s && *n < cap) {
            err_rec *r = &v[(*n)++];
            r->path = strdup(p), r->stage = strdup(s), r->line = strndup(line, (size_t)len);
            r->reason = strdup(why ? why : "");
            r->size = json_integer_value(json_object_get(o, "size"));
            r->mtime_ns = json_integer_value(json_object_get(o, "mtime_ns"));
            r->keep = 0;
            if (!r->path || !r->stage || !r->line || !r->reason) {
                free(r->path), free(r->stage), free(r->line), free(r->reason);
                (*n)--;
            }
        }
        json_decref(o);
    }
    free(line);
    fclose(fp);
    return v;
}

static void free_errors(err_rec *v, size_t n) {
    for (size_t k = 0; k < n; k++) free(v[k].path), free(v[k].stage), free(v[k].reason), free(v[k].line);
    free(v);
}

/* Rule 5: a failure recorded for the image as it is now that stands. */
static int permanent(const item *it, const char *stage) {
    return !strcmp(stage, "decode") || (!strcmp(stage, "name") && it->clash);
}

/* The stage names, as static strings the image points to. */
static const char *stage_name(const char *s) {
    static const char *const known[] = {"decode", "boxes", "detect", "predict", "render", "write", "name", "hands"};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (!strcmp(s, known[i])) return known[i];
    return "other";
}

/* The image failed at stage: its status, its reason (escaped) and, with
 * OUT, one line of errors.jsonl, appended with one write and fsync'd so
 * that a killed run loses no record and leaves no half line. */
static void record_error(hamer_folder *f, item *it, const char *stage, const char *reason) {
    free(it->reason);
    it->reason = hm_name_text(reason);
    it->stage = stage;
    it->status = HAMER_FOLDER_FAILED;
    int bad = !it->reason;
    char *line = NULL;
    if (f->errfd >= 0 && it->reason) {
        json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I}", "path", it->shown, "stage", stage, "reason", it->reason,
                              "size", (json_int_t)it->size, "mtime_ns", (json_int_t)ns_of(it->mtime));
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        line = s ? str_printf("%s\n", s) : NULL;
        free(s);
        bad = !line;
    }
    pthread_mutex_lock(&f->mu);
    f->stats.failed++;
    if (line) {
        size_t n = strlen(line);
        ssize_t k = write(f->errfd, line, n);
        bad = k != (ssize_t)n || fsync(f->errfd) != 0;
    }
    pthread_mutex_unlock(&f->mu);
    free(line);
    if (bad && it->reason) {
        char *more = str_printf("%s (could not be added to errors.jsonl)", it->reason);
        if (more) free(it->reason), it->reason = more;
    }
}

/* Temporary files of core/fileio.h (".NAME.EXT.XXXXXX") that a killed run
 * left in an output folder: no run is using them (the lock), and nothing
 * else makes such names beside our outputs. */
static void remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        size_t n = strlen(nm);
        if (nm[0] != '.' || n < 9 || nm[n - 7] != '.') continue;
        int rnd = 1;
        for (size_t i = n - 6; i < n; i++) rnd &= (nm[i] >= '0' && nm[i] <= '9') || (nm[i] >= 'a' && nm[i] <= 'z') ||
                                                (nm[i] >= 'A' && nm[i] <= 'Z');
        const char *exts[] = {".json.", ".png.", ".obj.", ".jsonl."};
        int ours = 0;
        for (int k = 0; k < 4; k++) {
            size_t el = strlen(exts[k]);
            ours |= n - 6 >= el + 2 && !strncmp(nm + n - 6 - el, exts[k], el);
        }
        if (!rnd || !ours) continue;
        char *p = str_printf("%s/%s", dir, nm);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
}

/* ---- open ---- */

hamer_folder_params hamer_folder_default_params(void) {
    hamer_folder_params p;
    memset(&p, 0, sizeof p);
    return p;
}

/* The folders, before any work: OUT created, writable, not the input, and
 * locked. 0 or a negative code. */
static int check_folders(hamer_folder *f, struct stat *in_st) {
    struct stat st;
    if (stat(f->input_dir, in_st) != 0)
        return fail_named(HM_E_IO, "cannot read the input folder '%s': %s", f->input_dir, strerror(errno));
    if (!S_ISDIR(in_st->st_mode)) return fail_named(HM_E_IO, "the input folder '%s' is not a folder%s", f->input_dir, NULL);
    if (f->boxes_dir && (stat(f->boxes_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return fail_named(HM_E_IO, "the boxes folder '%s' is not a folder%s", f->boxes_dir, NULL);
    if (!f->out_dir) return 0;
    if (mkdir_p(f->out_dir) != 0)
        return fail_named(HM_E_IO, "cannot create the output folder '%s': %s", f->out_dir, strerror(errno));
    if (stat(f->out_dir, &st) != 0)
        return fail_named(HM_E_IO, "cannot read the output folder '%s': %s", f->out_dir, strerror(errno));
    if (st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino)
        return hm_err(HM_E_ARG, "the output folder must not be the input folder (its outputs would become inputs)");
    if (access(f->out_dir, W_OK) != 0)
        return fail_named(HM_E_IO, "cannot write in the output folder '%s': %s", f->out_dir, strerror(errno));
    char *lockp = str_printf("%s/.hamer-batch.lock", f->out_dir);
    if (!lockp) return hm_err(HM_E_NOMEM, "out of memory");
    f->lockfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc = 0;
    if (f->lockfd < 0) rc = fail_named(HM_E_IO, "cannot create '%s': %s", lockp, strerror(errno));
    else if (flock(f->lockfd, LOCK_EX | LOCK_NB) != 0)
        rc = fail_named(HM_E_IO, "another hamer batch is using '%s': %s", f->out_dir, strerror(errno));
    free(lockp);
    if (rc || dir_set_add(&f->seen, st.st_dev, st.st_ino) >= 0) return rc;
    return hm_err(HM_E_NOMEM, "out of memory");
}

/* What is left to do, the earlier failures that stand, errors.jsonl
 * rewritten to them and opened for this run's lines. */
static int plan_todo(hamer_folder *f) {
    size_t nerr = 0;
    err_rec *old = f->out_dir ? read_errors(f->errors_path, &nerr) : NULL;
    const char *last_dir = NULL;
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        err_rec *same = NULL, *last = NULL;
        for (size_t k = 0; k < nerr; k++) {
            if (strcmp(old[k].path, it->shown)) continue;
            last = &old[k];
            if (old[k].size == it->size && old[k].mtime_ns == ns_of(it->mtime)) same = &old[k];
        }
        int failed_before =
            f->out_dir && !f->p.force && !f->p.retry_failed && same && permanent(it, same->stage) && !it->done;
        if (it->done || failed_before) {
            /* Its lines stay (a photo without hands is complete and failed). */
            for (size_t k = 0; k < nerr; k++)
                if (!strcmp(old[k].path, it->shown)) old[k].keep = 1;
            it->status = HAMER_FOLDER_SKIPPED;
            f->stats.skipped++;
            if (last) {
                f->stats.failed_earlier++;
                it->stage = stage_name(last->stage);
                if (!(it->reason = strdup(last->reason))) return free_errors(old, nerr), hm_err(HM_E_NOMEM, "out of memory");
            }
        }
        if (it->out_dir && (!last_dir || strcmp(last_dir, it->out_dir))) remove_stale_temps(it->out_dir);
        last_dir = it->out_dir;
    }
    int rc = 0;
    if (f->out_dir) {
        size_t len = 0;
        for (size_t k = 0; k < nerr; k++) len += old[k].keep ? strlen(old[k].line) : 0;
        char *buf = malloc(len + 1), *p = buf;
        for (size_t k = 0; buf && k < nerr; k++)
            if (old[k].keep) p = stpcpy(p, old[k].line);
        if (!buf) rc = hm_err(HM_E_NOMEM, "out of memory");
        else if ((rc = hm_file_write_atomic(f->errors_path, buf, len)) == 0 &&
                 (f->errfd = open(f->errors_path, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0)
            rc = fail_named(HM_E_IO, "cannot open '%s': %s", f->errors_path, strerror(errno));
        free(buf);
    }
    free_errors(old, nerr);
    if (rc) return rc;
    /* Name clashes fail without decoding. */
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        if (it->status != HAMER_FOLDER_TODO || !it->clash) continue;
        char *t = hm_name_text(it->clash);
        char *why = t ? str_printf("its outputs would overwrite those of '%s' (same name without extension)", t) : NULL;
        record_error(f, it, "name", why ? why : "name clash");
        free(t), free(why);
    }
    return 0;
}

static char *dup_or_null(const char *s, int *oom) {
    char *d = s ? strdup(s) : NULL;
    if (s && !d) *oom = 1;
    return d;
}

int hamer_folder_open(const hamer_folder_params *params, hamer_folder **out) {
    if (out) *out = NULL;
    if (!params || !out || !params->input_dir || params->n_globs < 0 || (params->n_globs && !params->globs))
        return hm_err(HM_E_ARG, "%s: NULL argument, no input folder or bad globs", __func__);
    if (HM_CHECK_RESERVED(params, "hamer_folder_params")) return HM_E_ARG;
    hamer_folder *f = calloc(1, sizeof *f);
    if (!f) return hm_err(HM_E_NOMEM, "out of memory");
    f->p = *params;
    f->errfd = f->lockfd = -1;
    pthread_mutex_init(&f->mu, NULL);
    int oom = 0;
    f->input_dir = dup_or_null(params->input_dir, &oom);
    f->out_dir = dup_or_null(params->out_dir, &oom);
    f->boxes_dir = dup_or_null(params->boxes_dir, &oom);
    f->globs = calloc((size_t)params->n_globs + 1, sizeof *f->globs);
    if (!f->globs) oom = 1;
    for (int i = 0; f->globs && i < params->n_globs; i++) f->globs[i] = dup_or_null(params->globs[i], &oom);
    f->n_globs = params->n_globs;
    f->p.input_dir = f->input_dir, f->p.out_dir = f->out_dir, f->p.boxes_dir = f->boxes_dir;
    f->p.globs = (const char *const *)f->globs;
    if (f->out_dir && !(f->errors_path = str_printf("%s/errors.jsonl", f->out_dir))) oom = 1;
    int rc = oom ? hm_err(HM_E_NOMEM, "out of memory") : 0;
    struct stat in_st, st;
    if (!rc) rc = check_folders(f, &in_st);
    /* Rule 2: the input folder is seen; the output and boxes folders may
     * lie inside it and are not inputs. */
    if (!rc && (dir_set_add(&f->seen, in_st.st_dev, in_st.st_ino) < 0 ||
                (f->boxes_dir && stat(f->boxes_dir, &st) == 0 && dir_set_add(&f->seen, st.st_dev, st.st_ino) < 0)))
        rc = hm_err(HM_E_NOMEM, "out of memory");
    if (!rc) rc = scan(f, f->input_dir, "", 0);
    if (!rc) rc = plan_stems(f);
    if (!rc) rc = plan_todo(f);
    if (rc) {
        /* The message stays the one set where it failed. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hm_errmsg());
        hamer_folder_close(f);
        return hm_err(rc, "%s", msg);
    }
    f->stats.images = (int)f->n;
    for (size_t i = 0; i < f->n; i++) f->stats.todo += f->v[i].status == HAMER_FOLDER_TODO;
    *out = f;
    return 0;
}

int hamer_folder_get_count(const hamer_folder *f) { return f ? (int)f->n : 0; }

int hamer_folder_get_image(const hamer_folder *f, int i, hamer_folder_image *out) {
    if (!f || !out || i < 0 || (size_t)i >= f->n) return hm_err(HM_E_ARG, "%s: no image %d", __func__, i);
    const item *it = &f->v[i];
    out->path = it->path, out->rel = it->rel, out->shown = it->shown;
    out->result_path = it->clash ? NULL : it->json;   /* a clashing image's NAME.json is its owner's */
    out->status = it->status;
    out->error_stage = it->stage, out->error_reason = it->stage ? it->reason : NULL;
    return 0;
}

int hamer_folder_get_stats(const hamer_folder *f, hamer_folder_stats *out) {
    if (!f || !out) return hm_err(HM_E_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock((pthread_mutex_t *)&f->mu);
    *out = f->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
    return 0;
}

void hamer_folder_close(hamer_folder *f) {
    if (!f) return;
    if (f->errfd >= 0) close(f->errfd);
    if (f->lockfd >= 0) close(f->lockfd);
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        free(it->path), free(it->rel), free(it->name), free(it->shown), free(it->out_dir), free(it->stem);
        free(it->json), free(it->boxes), free(it->clash), free(it->reason);
    }
    free(f->v);
    free(f->seen.v);
    for (int i = 0; f->globs && i < f->n_globs; i++) free(f->globs[i]);
    free(f->globs);
    free(f->input_dir), free(f->out_dir), free(f->boxes_dir), free(f->errors_path);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

char *hamer_name_escape(const char *s) {
    if (!s) {
        hm_err(HM_E_ARG, "%s: NULL name", __func__);
        return NULL;
    }
    char *t = hm_name_text(s);
    if (!t) hm_err(HM_E_NOMEM, "out of memory");
    return t;
}

/* ---- one image ---- */

/* RESULT.json with the image's record first,
 * {"input":{"path","size","mtime_ns"},<the rest as hamer run writes it>}
 * (malloc'd; NULL: out of memory). */
static char *with_input(const item *it, const char *result) {
    json_t *o = json_pack("{s:s,s:I,s:I}", "path", it->name, "size", (json_int_t)it->size, "mtime_ns",
                          (json_int_t)ns_of(it->mtime));
    char *rec = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    char *s = rec && result[0] == '{' ? str_printf("{\"input\":%s,%s", rec, result + 1) : NULL;
    free(rec);
    return s;
}

/* The boxes of D/NAME.json; their count or -1 with the reason in err. */
static int read_boxes(const char *path, hamer_box *boxes, char *err, size_t errlen) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, errlen, "no boxes file '%s': %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (n < 0 || (unsigned long)n > FOLDER_BOXES_FILE_MAX) {
        snprintf(err, errlen, "'%s': unreadable or larger than 64 MB", path);
    } else if (rewind(fp), !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        snprintf(err, errlen, "cannot read '%s'", path);
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (!buf) return -1;
    buf[n] = 0;
    int k = hamer_boxes_parse(buf, (size_t)n, boxes, HAMER_MAX_HANDS);
    free(buf);
    if (k < 0) snprintf(err, errlen, "%s: %s", path, hamer_last_error());
    return k;
}

static int write_out(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (!path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (hm_file_write_atomic(path, data, len) == 0) return 0;
    snprintf(err, errlen, "%s", hamer_last_error());
    return -1;
}

/* The pictures and meshes the options ask for, then NAME.json (doc) last:
 * NAME.json present means every output of the image is. 0, or -1 after
 * recording the failure. */
static int write_outputs(hamer_folder *f, item *it, hamer_job *job, const hamer_job_result *r, const char *doc,
                         double *t_render, double *t_write) {
    char err[1024];
    if (mkdir_p(it->out_dir) != 0) {
        char *t = hm_name_text(it->out_dir);
        snprintf(err, sizeof err, "cannot create the folder '%s': %s", t ? t : "?", strerror(errno));
        free(t);
        record_error(f, it, "write", err);
        return -1;
    }
    double t0 = hm_now();
    for (int k = 0; k < 2; k++) {
        if (!(k ? f->p.side_view : f->p.render)) continue;
        uint8_t *png;
        size_t len;
        if (hamer_job_render_png(job, k, &png, &len)) {
            record_error(f, it, "render", hamer_last_error());
            return -1;
        }
        double t1 = hm_now();
        *t_render += t1 - t0;
        char *path = str_printf("%s_%s.png", it->stem, k ? "side" : "all");
        int bad = write_out(path, png, len, err, sizeof err);
        hamer_free(png);
        free(path);
        t0 = hm_now();
        *t_write += t0 - t1;
        if (bad) {
            record_error(f, it, "write", err);
            return -1;
        }
    }
    for (int i = 0; f->p.save_mesh && i < r->n_hands; i++) {
        if (!r->hands[i].ok) continue;
        char *obj, *path = str_printf("%s_%d.obj", it->stem, i);
        size_t len;
        if (!path || hamer_job_hand_obj(job, i, &obj, &len)) {
            record_error(f, it, "write", path ? hamer_last_error() : "out of memory");
            free(path);
            return -1;
        }
        int bad = write_out(path, obj, len, err, sizeof err);
        hamer_free(obj);
        free(path);
        if (bad) {
            record_error(f, it, "write", err);
            return -1;
        }
    }
    if (f->p.glb) {
        uint8_t *glb;
        size_t len;
        if (hamer_job_glb(job, &glb, &len)) {
            record_error(f, it, "write", hamer_last_error());
            return -1;
        }
        char *path = str_printf("%s.glb", it->stem);
        int bad = write_out(path, glb, len, err, sizeof err);
        hamer_free(glb);
        free(path);
        if (bad) {
            record_error(f, it, "write", err);
            return -1;
        }
    }
    if (write_out(it->json, doc, strlen(doc), err, sizeof err)) {
        record_error(f, it, "write", err);
        return -1;
    }
    *t_write += hm_now() - t0;
    return 0;
}

int hamer_folder_process(hamer_folder *f, int i, hamer_job *job, const hamer_folder_decoded *pre, char **result) {
    if (result) *result = NULL;
    /* No job is needed to record an image the caller could not decode. */
    if (!f || (!job && !(pre && !pre->rgb)) || i < 0 || (size_t)i >= f->n)
        return hm_err(HM_E_ARG, "%s: NULL argument or no image %d", __func__, i);
    item *it = &f->v[i];
    if (it->status != HAMER_FOLDER_TODO) return hm_err(HM_E_ARG, "%s: image %d is not to be computed", __func__, i);
    hamer_box boxes[HAMER_MAX_HANDS];
    char err[1024];
    hamer_job_result r;
    memset(&r, 0, sizeof r);
    double t_render = 0, t_write = 0, decode_ms = 0;
    char *json = NULL, *doc = NULL;
    uint8_t *rgb = NULL;
    int w = 0, h = 0, n = 0, rc = 0;
    if (pre) {
        decode_ms = pre->decode_ms;
        if (!pre->rgb) {
            record_error(f, it, "decode", pre->decode_error ? pre->decode_error : "not decoded");
            goto account;
        }
    } else {
        double t0 = hm_now();
        int bad = hamer_image_load(it->path, &rgb, &w, &h);
        decode_ms = 1e3 * (hm_now() - t0);
        if (bad) {
            record_error(f, it, "decode", hamer_last_error());
            goto account;
        }
    }
    int detected = !f->boxes_dir;
    if (!detected && (n = read_boxes(it->boxes, boxes, err, sizeof err)) < 0) {
        record_error(f, it, "boxes", err);
        goto account;
    }
    hamer_job_input in = {.rgb = pre ? pre->rgb : rgb, .width = pre ? pre->width : w, .height = pre ? pre->height : h,
                          .decode_ms = decode_ms, .boxes = boxes, .n_boxes = n,
                          .source = detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN};
    int jrc = hamer_job_run(job, &in);
    hamer_job_get_result(job, &r);
    if (jrc == HAMER_E_CANCELLED) {
        rc = HAMER_E_CANCELLED;
        goto account;
    }
    if (jrc) {
        record_error(f, it, r.failed_stage == HAMER_JOB_STAGE_DETECT ? "detect" : "predict", hamer_last_error());
        goto account;
    }
    n = r.n_hands;
    json = hamer_job_result_json(job, f->p.vertices);
    doc = json ? with_input(it, json) : NULL;
    if (!doc) {
        record_error(f, it, "predict", json ? "out of memory" : hamer_last_error());
        goto account;
    }
    if (f->out_dir && write_outputs(f, it, job, &r, doc, &t_render, &t_write)) goto account;
    it->status = HAMER_FOLDER_COMPUTED;
    /* Written, as `hamer run` writes it (its exits 3 and 4), and recorded. */
    if (detected && n == 0) record_error(f, it, "hands", "no hand found");
    for (int k = 0; k < n; k++)
        if (!r.hands[k].ok) {
            snprintf(err, sizeof err, "%d of %d hands failed; %s", r.n_failed, n, r.hands[k].error);
            record_error(f, it, "hands", err);
            break;
        }
    pthread_mutex_lock(&f->mu);
    f->stats.computed++;
    f->stats.hands += n;
    pthread_mutex_unlock(&f->mu);
    if (result) *result = doc, doc = NULL;  /* also for a failed hand or no hand: it was written */
account:
    pthread_mutex_lock(&f->mu);
    f->stats.decode_s += decode_ms * 1e-3, f->stats.detect_s += r.timings.detect_ms * 1e-3;
    f->stats.crop_s += r.timings.crop_ms * 1e-3, f->stats.regress_s += r.timings.regress_ms * 1e-3;
    f->stats.finalise_s += r.timings.finalise_ms * 1e-3;
    f->stats.render_s += t_render, f->stats.write_s += t_write;
    pthread_mutex_unlock(&f->mu);
    hamer_free(json);
    free(doc);
    hamer_free(rgb);
    return rc;
}

/* The messages spell the limits out. */
_Static_assert(HAMER_FOLDER_MAX_ENTRIES == 1000000 && HAMER_FOLDER_MAX_DEPTH == 64, "update the scan's messages");
