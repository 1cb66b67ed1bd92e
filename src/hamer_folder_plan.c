/* hamer_folder_plan.c - folder mode's plan (src/hamer_folder.c lists the
 * rules): the scan (rule 2), the owners of each NAME and what is already
 * done (rules 3 and 4), the failures that stand and errors.jsonl (rule 5),
 * and the helpers both files use. */
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/names.h"
#include "core/util.h"
#include "hamer_folder.h"

char *hm_folder_printf(const char *fmt, ...) {
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

long long hm_folder_ns(struct timespec t) { return (long long)t.tv_sec * 1000000000LL + t.tv_nsec; }

/* An error whose message quotes a name (escaped, rule 1). */
int hm_folder_fail_named(int code, const char *fmt, const char *name, const char *extra) {
    char *t = hm_name_text(name);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    hm_err(code, fmt, t ? t : "?", extra ? extra : "");
#pragma GCC diagnostic pop
    free(t);
    return code;
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
char *hm_folder_path_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    return hm_folder_printf("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
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
int hm_folder_dir_add(dir_set *s, dev_t dev, ino_t ino) {
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
    it->rel = rel[0] ? hm_folder_printf("%s/%s", rel, name) : strdup(name);
    it->name = it->rel ? hm_name_text(it->rel) : NULL;
    it->shown = hm_name_text(path);
    int ok = it->path && it->rel && it->name && it->shown;
    if (f->out_dir) {
        it->out_dir = rel[0] ? hm_folder_path_join(f->out_dir, rel) : strdup(f->out_dir);
        it->stem = it->out_dir ? hm_folder_printf("%s/%.*s", it->out_dir, stem_len, name) : NULL;
        it->json = it->stem ? hm_folder_printf("%s.json", it->stem) : NULL;
        ok = ok && it->json;
    }
    if (f->boxes_dir) {
        char *d = rel[0] ? hm_folder_path_join(f->boxes_dir, rel) : strdup(f->boxes_dir);
        it->boxes = d ? hm_folder_printf("%s/%.*s.json", d, stem_len, name) : NULL;
        free(d);
        ok = ok && it->boxes;
    }
    return ok ? 0 : -1;
}

/* The files of dir (rel below the input folder, depth folders down).
 * 0, or a negative code with the message set. */
int hm_folder_scan(hamer_folder *f, const char *dir, const char *rel, int depth) {
    if (stopped(f)) return hm_err(HM_E_CANCELLED, "interrupted before any image was computed (run again)");
    DIR *d = opendir(dir);
    if (!d) return hm_folder_fail_named(HM_E_IO, "cannot read the folder '%s': %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        if (++f->entries > HAMER_FOLDER_MAX_ENTRIES) {
            rc = hm_folder_fail_named(HM_E_IO, "more than 1000000 names under the input folder '%s'%s (the scan's limit; split "
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
        char *path = hm_folder_path_join(dir, names[i]);
        char *r = rel[0] ? hm_folder_printf("%s/%s", rel, names[i]) : strdup(names[i]);
        struct stat st;
        if (!path || !r) {
            rc = HM_E_NOMEM;
        } else if (stat(path, &st) != 0) {
            /* A dangling link or a file removed meanwhile: nothing to do. */
        } else if (S_ISDIR(st.st_mode)) {
            int unseen = f->p.recursive ? hm_folder_dir_add(&f->seen, st.st_dev, st.st_ino) : 0;
            if (unseen < 0) rc = HM_E_NOMEM;
            else if (unseen && depth >= HAMER_FOLDER_MAX_DEPTH)
                rc = hm_folder_fail_named(HM_E_IO, "the folder '%s' is more than 64 folders below the input folder (the scan's "
                                "limit)%s", path, NULL);
            else if (unseen) rc = hm_folder_scan(f, path, r, depth + 1);
        } else if (S_ISREG(st.st_mode) && wanted(f, names[i])) {
            if (add_item(f, path, rel, names[i], &st)) rc = HM_E_NOMEM;
        }
        free(path);
        free(r);
    }
    if (rc == HM_E_NOMEM) hm_folder_fail_named(HM_E_NOMEM, "out of memory listing '%s'%s", dir, NULL);
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
    if (ok && f->p.render) ok = (pic = hm_folder_printf("%s_all.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && f->p.side_view)
        ok = (pic = hm_folder_printf("%s_side.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && f->p.glb) ok = (pic = hm_folder_printf("%s.glb", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && f->p.bvh) ok = (pic = hm_folder_printf("%s.bvh", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    json_t *hands = json_object_get(doc, "hands");
    if (ok) ok = json_is_array(hands);
    for (size_t i = 0; ok && i < json_array_size(hands); i++) {
        json_t *hd = json_array_get(hands, i);
        if (json_object_get(hd, "error")) continue;
        if (!!json_object_get(hd, "vertices") != !!f->p.vertices) ok = 0;
        if (ok && f->p.save_mesh) {
            char *obj = hm_folder_printf("%s_%zu.obj", it->stem, i);
            ok = obj && fresh(obj, it->mtime, also);
            free(obj);
        }
    }
    return ok;
}

/* Rule 3 (and 4 with OUT, unless force) for every image: clash, done.
 * NAME.json is read once per NAME. 0 or a negative code. */
int hm_folder_plan_stems(hamer_folder *f) {
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
            char *path = hm_folder_path_join(f->input_dir, rec);
            struct stat st;
            if (!path) rc = HM_E_NOMEM;
            else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) owner = rec;
            free(path);
        }
        for (size_t k = g; k < end && rc == 0; k++) {
            item *it = p[k];
            if (strcmp(it->rel, owner)) {
                if (!(it->clash = strdup(owner))) rc = HM_E_NOMEM;
            } else if (!f->p.force && owner == rec && size == it->size && mtime_ns == hm_folder_ns(it->mtime)) {
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

/* Rule 6: the line an earlier version wrote for a photo without hands. */
static int no_hand_line(const err_rec *r) { return !strcmp(r->stage, "hands") && !strcmp(r->reason, "no hand found"); }

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
void hm_folder_record_error(hamer_folder *f, item *it, const char *stage, const char *reason) {
    free(it->reason);
    it->reason = hm_name_text(reason);
    it->stage = stage;
    it->status = HAMER_FOLDER_FAILED;
    int bad = !it->reason;
    char *line = NULL;
    if (f->errfd >= 0 && it->reason) {
        json_t *o = json_pack("{s:s,s:s,s:s,s:I,s:I}", "path", it->shown, "stage", stage, "reason", it->reason,
                              "size", (json_int_t)it->size, "mtime_ns", (json_int_t)hm_folder_ns(it->mtime));
        char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(o);
        line = s ? hm_folder_printf("%s\n", s) : NULL;
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
        char *more = hm_folder_printf("%s (could not be added to errors.jsonl)", it->reason);
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
        char *p = hm_folder_printf("%s/%s", dir, nm);
        if (p) unlink(p);
        free(p);
    }
    closedir(d);
}

int hm_folder_plan_todo(hamer_folder *f) {
    size_t nerr = 0;
    err_rec *old = f->out_dir ? read_errors(f->errors_path, &nerr) : NULL;
    const char *last_dir = NULL;
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        err_rec *same = NULL, *last = NULL;
        for (size_t k = 0; k < nerr; k++) {
            if (strcmp(old[k].path, it->shown)) continue;
            last = &old[k];
            if (old[k].size == it->size && old[k].mtime_ns == hm_folder_ns(it->mtime)) same = &old[k];
        }
        int failed_before =
            f->out_dir && !f->p.force && !f->p.retry_failed && same && permanent(it, same->stage) && !it->done;
        if (it->done || failed_before) {
            /* Its lines stay (a failed hand: complete and failed), but not
             * "no hand found", which earlier versions wrote (rule 6). */
            for (size_t k = 0; k < nerr; k++)
                if (!strcmp(old[k].path, it->shown) && !(it->done && no_hand_line(&old[k]))) old[k].keep = 1;
            last = NULL;
            for (size_t k = 0; k < nerr; k++)
                if (!strcmp(old[k].path, it->shown) && old[k].keep) last = &old[k];
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
            rc = hm_folder_fail_named(HM_E_IO, "cannot open '%s': %s", f->errors_path, strerror(errno));
        free(buf);
    }
    free_errors(old, nerr);
    if (rc) return rc;
    /* Name clashes fail without decoding. */
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        if (it->status != HAMER_FOLDER_TODO || !it->clash) continue;
        char *t = hm_name_text(it->clash);
        char *why = t ? hm_folder_printf("its outputs would overwrite those of '%s' (same name without extension)", t) : NULL;
        hm_folder_record_error(f, it, "name", why ? why : "name clash");
        free(t), free(why);
    }
    return 0;
}
