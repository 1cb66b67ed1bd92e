/* cli_batch.c - `hamer batch`: a folder of photos in, a folder of results
 * out, as the official demo's `demo.py --img_folder --out_folder` does, with
 * the model and the detector loaded once and a run that can be stopped at
 * any point and resumed.
 *
 * A subcommand of its own rather than `hamer run --input-dir`: its contract
 * is a folder, not a file (per-image outputs, errors.jsonl, a summary, its
 * own exit codes), and half of each command's options would be meaningless
 * with the other's (--image / --output / --box against --out-dir /
 * --recursive / --glob / --jobs / --force).
 *
 * Per image NAME.EXT (NAME: the file name without its extension, in the
 * output folder's mirror of the image's subfolder):
 *   NAME.json        RESULT.json, byte for byte what `hamer run` writes for
 *                    that image with the same options (timings aside),
 *                    with the image's record first: "input": {"path",
 *                    "size", "mtime_ns"} (the rules, below)
 *   NAME_all.png     --render: every hand over the image
 *   NAME_side.png    --side-view
 *   NAME_N.obj       --save-mesh: hand N of NAME.json (0-based; not for a
 *                    hand that failed)
 * Every file is written to a temporary file, fsync'd and renamed
 * (core/fileio.h), NAME.json last: an image is complete exactly when its
 * NAME.json is there, so an interrupted run leaves no partial file and the
 * next run redoes only what was not finished.
 *
 * Exit status: 0 every image done (now or by an earlier run); 1 nothing or
 * not all could be attempted (model, detector, folders; message on
 * stderr); 2 bad usage; 3 some images failed (one line each in
 * OUT/errors.jsonl), the others done; 130 interrupted (SIGINT / SIGTERM:
 * finished images are kept, a rerun resumes).
 *
 * Uses the public API (include/hamer.h), plus core/fileio.h for the atomic
 * writes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include "cli/cli.h"
#include "core/fileio.h"
#include "hamer.h"

static const char *USAGE_BATCH =
    "usage: hamer batch --model M --input-dir DIR --out-dir OUT\n"
    "                   [--recursive] [--glob PATTERN ...] [--jobs N] [--threads N] [--prefetch N]\n"
    "                   [--force] [--retry-failed] [--save-mesh] [--render] [--side-view] [--vertices]\n"
    "                   [--boxes-dir D] [--detector DIR] [--lite] [--max-hands N] [--min-score S]\n"
    "                   [--single-pass] [--rescale 2.0] [--crop-mode warp|pad] [--mano FILE.npz]\n"
    "                   [--precision fp32|fast] [--json]\n"
    "\n"
    "Every image of DIR through `hamer run` with one model load: per image NAME\n"
    "OUT/NAME.json (RESULT.json), and NAME_all.png (--render), NAME_side.png\n"
    "(--side-view), NAME_N.obj per hand (--save-mesh). Boxes from D/NAME.json\n"
    "(any document `hamer run --boxes` reads) with --boxes-dir, else detected.\n"
    "\n"
    "  --recursive     also the subfolders (mirrored in OUT; links followed, each\n"
    "                  folder once; at most 64 deep and 1000000 names)\n"
    "  --glob P        only files whose name matches P (fnmatch, e.g. '*.jpg';\n"
    "                  repeatable); default every file not starting with '.'\n"
    "  --jobs N        images in flight at once (default 1), --threads split between them\n"
    "  --threads N     worker threads in all (default: online CPUs)\n"
    "  --prefetch N    images decoded ahead of the inference (default 2; 0: none)\n"
    "  --force         redo images whose outputs are already there\n"
    "  --retry-failed  retry images an earlier run recorded as bad\n"
    "  --json          the summary as one JSON object on stdout\n"
    "\n"
    "Resumable: an image whose NAME.json records it (path, size, mtime) and whose\n"
    "outputs are all present and newer than it (and than its boxes file) is\n"
    "skipped; every file is written atomically. Two images with one NAME: the one\n"
    "NAME.json records (else the first by name) keeps it, the other fails. A bad\n"
    "image (not decodable, no boxes file, no hand found, a failed hand) is one\n"
    "line {\"path\", \"reason\", ...} of OUT/errors.jsonl and never stops the run;\n"
    "images that do not decode are not retried while unchanged (--retry-failed).\n"
    "\n"
    "Exit status: 0 all images done; 1 could not run (message on stderr); 2 bad\n"
    "usage; 3 some images failed (OUT/errors.jsonl); 130 interrupted (rerun to\n"
    "resume).\n";

/* ---- arguments ---- */

#define MAX_GLOBS 16

typedef struct {
    const char *model, *input_dir, *out_dir, *boxes_dir, *mano;
    const char *globs[MAX_GLOBS];
    int nglob, recursive, jobs, threads, prefetch, force, retry_failed, json;
    int save_mesh, render, side, with_vertices, precision;
    hm_cli_detect_args det;
    hamer_predict_params pp;
} batch_args;

static int parse(int argc, char **argv, batch_args *a) {
    memset(a, 0, sizeof *a);
    a->precision = HAMER_PRECISION_FP32;
    a->pp = hamer_predict_default_params();
    a->jobs = 1;
    a->prefetch = 2;
    hm_cli_detect_defaults(&a->det);
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_BATCH, stdout);
            return -1;
        }
        int used = hm_cli_detect_option(argc, argv, &i, &a->det, "batch");
        if (used > 0) return used;
        if (used == 0) continue;
        int *flag = !strcmp(o, "--recursive")      ? &a->recursive
                    : !strcmp(o, "--force")        ? &a->force
                    : !strcmp(o, "--retry-failed") ? &a->retry_failed
                    : !strcmp(o, "--save-mesh")    ? &a->save_mesh
                    : !strcmp(o, "--render")       ? &a->render
                    : !strcmp(o, "--side-view")    ? &a->side
                    : !strcmp(o, "--vertices")     ? &a->with_vertices
                    : !strcmp(o, "--json")         ? &a->json
                                                   : NULL;
        if (flag) {
            *flag = 1;
            continue;
        }
        if (o[0] != '-' || o[1] != '-') return hm_cli_fail(2, "batch: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_cli_fail(2, "batch: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--model")) a->model = v;
        else if (!strcmp(o, "--input-dir")) a->input_dir = v;
        else if (!strcmp(o, "--out-dir")) a->out_dir = v;
        else if (!strcmp(o, "--boxes-dir")) a->boxes_dir = v;
        else if (!strcmp(o, "--mano")) a->mano = v;
        else if (!strcmp(o, "--glob")) {
            if (a->nglob == MAX_GLOBS) return hm_cli_fail(2, "batch: more than 16 --glob options%s", "");
            a->globs[a->nglob++] = v;
        } else if (!strcmp(o, "--jobs")) {
            if (hm_cli_parse_int(v, 1, 64, &a->jobs)) return hm_cli_fail(2, "batch: --jobs must be an integer in 1..64, got '%s'", v);
        } else if (!strcmp(o, "--prefetch")) {
            if (hm_cli_parse_int(v, 0, 64, &a->prefetch))
                return hm_cli_fail(2, "batch: --prefetch must be an integer in 0..64, got '%s'", v);
        } else if (!strcmp(o, "--threads")) {
            if (hm_cli_parse_threads(v, &a->threads)) return hm_cli_fail(2, "batch: --threads must be an integer in 1..1024, got '%s'", v);
        } else if (!strcmp(o, "--rescale")) {
            if (hm_cli_parse_rescale(v, &a->pp.rescale))
                return hm_cli_fail(2, "batch: --rescale must be a number in (0, 16], got '%s'", v);
        } else if (!strcmp(o, "--crop-mode")) {
            if (!strcmp(v, "warp")) a->pp.crop_mode = HAMER_CROP_WARP;
            else if (!strcmp(v, "pad")) a->pp.crop_mode = HAMER_CROP_PAD;
            else return hm_cli_fail(2, "batch: --crop-mode must be warp or pad, got '%s'", v);
        } else if (!strcmp(o, "--precision")) {
            if (hm_cli_parse_precision(v, &a->precision)) return hm_cli_fail(2, "batch: --precision must be fp32 or fast, got '%s'", v);
        } else {
            return hm_cli_fail(2, "batch: unknown option '%s' (see 'hamer batch --help')", o);
        }
    }
    if (!a->model || !a->input_dir || !a->out_dir)
        return hm_cli_fail(2, "batch: --model, --input-dir and --out-dir are required%s", "");
    return 0;
}

/* ---- small helpers ---- */

static char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#include <stdarg.h>
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
 * trailing one), so that both sides give an image the same path. */
static char *path_join(const char *dir, const char *name) {
    size_t n = strlen(dir);
    return str_printf("%s%s%s", dir, n && dir[n - 1] == '/' ? "" : "/", name);
}

/* Set by SIGINT / SIGTERM, from the start of the run (the scan of a big
 * folder and the look at its outputs can take a while too). */
static volatile sig_atomic_t g_stop;
static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

/* ==== The folder-mode rules ====
 *
 * python/hamer/_folder.py holds the same rules, in the same order, under
 * the same names, so that either side can resume the other's output
 * folder: a change here is a change there (tests/test_batch.py checks the
 * two against each other).
 *
 * 1. Names (name_text / name_bytes; _folder.py: _name_text / _name_bytes).
 *    A file name is bytes; errors.jsonl and NAME.json are UTF-8 and stderr
 *    may be a terminal. Every file name, and every message that may hold
 *    one, is written in one escaped form that is lossless and printable:
 *    well-formed UTF-8 stays as it is except the control characters
 *    (U+0000-001F, U+007F, U+0080-009F), written \xNN per byte, as is every
 *    byte outside well-formed UTF-8; a backslash is written \\.
 * 2. Scan (scan; _folder.py: _scan). The regular files of the folder
 *    sorted by name (bytes), names starting with '.' left out, --glob
 *    applied to the name; with --recursive the subfolders where they come
 *    in that order. Links are followed, but each folder (device, inode) is
 *    scanned once, at its first path in that order: a link cycle ends, a
 *    folder reached by two paths is done once (under a link's name when
 *    the link sorts first); the output and boxes folders count as seen.
 *    At most BATCH_MAX_DEPTH folders deep and BATCH_MAX_ENTRIES names read
 *    in all, else the run stops before any work with an error.
 * 3. Stems (plan_stems; _folder.py: _plan_stems). The images of one folder
 *    with one NAME (a.jpg, a.png) share NAME.json, which records the image
 *    it came from first of all: "input": {"path": its path below the input
 *    folder (rule 1), "size", "mtime_ns"}. The recorded image, while it is
 *    a regular file of the input folder, owns NAME; otherwise (no
 *    NAME.json, no record, that file gone) the first of them by name does.
 *    Every other image of that NAME fails (stage "name") rather than
 *    overwrite the owner's outputs.
 * 4. Done (complete; _folder.py: _complete). An image is skipped when it
 *    owns NAME, NAME.json records it with its present size and mtime, and
 *    every output the options ask for is there and at least as new as the
 *    image (and its boxes file), with the vertices iff --vertices.
 * 5. Failures that stand (permanent; _folder.py: _permanent): an image of
 *    unchanged size and mtime that did not decode is not retried, nor one
 *    whose name still clashes (--retry-failed does); every other failure
 *    is retried.
 */

#define BATCH_MAX_DEPTH 64
#define BATCH_MAX_ENTRIES 1000000
#define BATCH_STR_(x) #x
#define BATCH_STR(x) BATCH_STR_(x)

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

/* Rule 1: s in the escaped form (malloc'd; NULL: out of memory). */
static char *name_text(const char *s) {
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

/* Rule 1 backwards: the bytes an escaped name stands for (malloc'd), or
 * NULL when t is not in the form (a lone backslash, a bad or NUL \x) or
 * out of memory. */
static char *name_bytes(const char *t) {
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

/* One stderr line "hamer: batch: " + fmt, whose %s arguments (s1, and s2
 * unless NULL) are names or messages that may hold names: escaped on the
 * way out. */
static void say(const char *fmt, const char *s1, const char *s2) {
    char *t1 = name_text(s1), *t2 = s2 ? name_text(s2) : NULL;
    fputs("hamer: batch: ", stderr);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    fprintf(stderr, fmt, t1 ? t1 : "?", t2 ? t2 : "?");
#pragma GCC diagnostic pop
    fputc('\n', stderr);
    free(t1), free(t2);
}

/* ---- the images ---- */

typedef struct {
    char *path;      /* the image file, as the OS names it */
    char *rel;       /* its path below the input folder */
    char *name;      /* rel, escaped (rule 1): NAME.json's "input" */
    char *shown;     /* path, escaped: errors.jsonl and stderr */
    char *out_dir;   /* OUT mirrored */
    char *stem;      /* OUT/.../NAME */
    char *boxes;     /* --boxes-dir: D/.../NAME.json */
    struct timespec mtime;
    long long size;
    char *clash;     /* rule 3: rel of the image that owns its NAME, when another one does */
    int done;        /* rule 4: complete (computed with !--force only) */
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

typedef struct {
    item *v;
    size_t n, cap;
    dir_set seen;    /* folders scanned, or not to be (the output and boxes folders) */
    size_t entries;  /* names read so far */
} item_list;

static int wanted(const batch_args *a, const char *name) {
    if (name[0] == '.') return 0; /* hidden files: editors', the OS's, and our own temporary files */
    if (!a->nglob) return 1;
    for (int i = 0; i < a->nglob; i++)
        if (fnmatch(a->globs[i], name, 0) == 0) return 1;
    return 0;
}

static int cmp_name(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

/* The image `name` of dir (rel below the input folder) appended to list;
 * 0 or -1 out of memory. */
static int add_item(const batch_args *a, item_list *list, const char *path, const char *rel, const char *name,
                    const struct stat *st) {
    if (list->n == list->cap) {
        size_t cap = list->cap ? 2 * list->cap : 64;
        item *v = realloc(list->v, cap * sizeof *v);
        if (!v) return -1;
        list->v = v, list->cap = cap;
    }
    item *it = &list->v[list->n++];
    memset(it, 0, sizeof *it);
    it->mtime = st->st_mtim;
    it->size = (long long)st->st_size;
    const char *dot = strrchr(name, '.');
    int stem_len = (int)(dot && dot != name ? (size_t)(dot - name) : strlen(name));
    it->path = strdup(path);
    it->rel = rel[0] ? str_printf("%s/%s", rel, name) : strdup(name);
    it->name = it->rel ? name_text(it->rel) : NULL;
    it->shown = name_text(path);
    it->out_dir = rel[0] ? path_join(a->out_dir, rel) : strdup(a->out_dir);
    it->stem = it->out_dir ? str_printf("%s/%.*s", it->out_dir, stem_len, name) : NULL;
    if (a->boxes_dir) {
        char *d = rel[0] ? path_join(a->boxes_dir, rel) : strdup(a->boxes_dir);
        it->boxes = d ? str_printf("%s/%.*s.json", d, stem_len, name) : NULL;
        free(d);
    }
    return it->path && it->rel && it->name && it->shown && it->out_dir && it->stem && (!a->boxes_dir || it->boxes)
               ? 0
               : -1;
}

/* Rule 2: the files of dir (rel below the input folder, depth folders
 * down) into list. 0; -1 with a message printed; -2 interrupted. */
static int scan(const batch_args *a, const char *dir, const char *rel, int depth, item_list *list) {
    if (g_stop) return -2;
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        say("cannot read the folder '%s': %s", dir, strerror(e));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0, oom = 0;
    while (rc == 0 && (e = readdir(d))) {
        if (g_stop) rc = -2;
        else if (e->d_name[0] == '.') continue;
        else if (++list->entries > BATCH_MAX_ENTRIES) {
            say("more than " BATCH_STR(BATCH_MAX_ENTRIES) " names under --input-dir '%s' (the scan's limit; split "
                "the folder)",
                a->input_dir, NULL);
            rc = -1;
        } else {
            if (n == cap) {
                char **bigger = realloc(names, (cap ? 2 * cap : 64) * sizeof *names);
                if (!bigger) {
                    oom = 1, rc = -1;
                    break;
                }
                names = bigger, cap = cap ? 2 * cap : 64;
            }
            if (!(names[n] = strdup(e->d_name))) oom = 1, rc = -1;
            else n++;
        }
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_name);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (g_stop) {
            rc = -2;
            break;
        }
        char *path = path_join(dir, names[i]);
        char *r = rel[0] ? str_printf("%s/%s", rel, names[i]) : strdup(names[i]);
        struct stat st;
        if (!path || !r) {
            oom = 1, rc = -1;
        } else if (stat(path, &st) != 0) {
            /* A dangling link or a file removed meanwhile: nothing to do. */
        } else if (S_ISDIR(st.st_mode)) {
            int unseen = a->recursive ? dir_set_add(&list->seen, st.st_dev, st.st_ino) : 0;
            if (unseen < 0) {
                oom = 1, rc = -1;
            } else if (unseen && depth >= BATCH_MAX_DEPTH) {
                say("the folder '%s' is more than " BATCH_STR(BATCH_MAX_DEPTH) " folders below --input-dir (the "
                    "scan's limit)",
                    path, NULL);
                rc = -1;
            } else if (unseen) {
                rc = scan(a, path, r, depth + 1, list);
            }
        } else if (S_ISREG(st.st_mode) && wanted(a, names[i])) {
            if (add_item(a, list, path, rel, names[i], &st)) oom = 1, rc = -1;
        }
        free(path);
        free(r);
    }
    if (oom) say("out of memory listing '%s'", dir, NULL);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* ---- what is already done ---- */

/* NAME.json of an earlier run, parsed; NULL when there is none (or it is
 * not a regular file: a FIFO there must not block the run). */
static json_t *load_result(const char *path) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return NULL;
    return json_load_file(path, 0, NULL);
}

/* Rule 3: the image NAME.json records; 0, or -1 when it records none (or
 * not in the form). *rel (the bytes) is malloc'd. */
static int input_record(json_t *doc, char **rel, long long *size, long long *mtime_ns) {
    json_t *in = json_object_get(doc, "input");
    json_t *p = json_object_get(in, "path"), *sz = json_object_get(in, "size"), *mt = json_object_get(in, "mtime_ns");
    if (!json_is_string(p) || !json_is_integer(sz) || !json_is_integer(mt)) return -1;
    *size = json_integer_value(sz), *mtime_ns = json_integer_value(mt);
    return (*rel = name_bytes(json_string_value(p))) ? 0 : -1;
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

/* Rule 4: every output the options ask for is there, at least as new as
 * the image (and its boxes file); doc (its NAME.json, whose record the
 * caller has matched) holds the vertices iff --vertices. */
static int complete(const batch_args *a, const item *it, json_t *doc) {
    struct timespec bt, *also = NULL;
    struct stat st;
    if (it->boxes) {
        if (stat(it->boxes, &st) != 0) return 0;
        bt = st.st_mtim, also = &bt;
    }
    char *json = str_printf("%s.json", it->stem);
    int ok = json && fresh(json, it->mtime, also);
    free(json);
    char *pic;
    if (ok && a->render) ok = (pic = str_printf("%s_all.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    if (ok && a->side) ok = (pic = str_printf("%s_side.png", it->stem)) && fresh(pic, it->mtime, also), free(pic);
    json_t *hands = json_object_get(doc, "hands");
    if (ok) ok = json_is_array(hands);
    for (size_t i = 0; ok && i < json_array_size(hands); i++) {
        json_t *hd = json_array_get(hands, i);
        if (json_object_get(hd, "error")) continue;
        if (!!json_object_get(hd, "vertices") != !!a->with_vertices) ok = 0;
        if (ok && a->save_mesh) {
            char *obj = str_printf("%s_%zu.obj", it->stem, i);
            ok = obj && fresh(obj, it->mtime, also);
            free(obj);
        }
    }
    return ok;
}

static int cmp_stem(const void *x, const void *y) {
    const item *p = *(item *const *)x, *q = *(item *const *)y;
    int c = strcmp(p->stem, q->stem);
    return c ? c : strcmp(p->rel, q->rel);
}

/* Rule 3 (and 4 unless --force) for every image: it->clash, it->done.
 * NAME.json is read once per NAME. 0; -1 out of memory; -2 interrupted. */
static int plan_stems(const batch_args *a, item_list *list) {
    item **p = malloc((list->n ? list->n : 1) * sizeof *p);
    if (!p) return -1;
    for (size_t i = 0; i < list->n; i++) p[i] = &list->v[i];
    qsort(p, list->n, sizeof *p, cmp_stem);
    int rc = 0;
    for (size_t g = 0, end; g < list->n && rc == 0; g = end) {
        if (g_stop) {
            rc = -2;
            break;
        }
        for (end = g + 1; end < list->n && !strcmp(p[end]->stem, p[g]->stem);) end++;
        char *json = str_printf("%s.json", p[g]->stem);
        json_t *doc = json ? load_result(json) : NULL;
        free(json);
        char *rec = NULL;
        long long size = 0, mtime_ns = 0;
        const char *owner = p[g]->rel;
        if (doc && input_record(doc, &rec, &size, &mtime_ns) == 0 && same_stem(rec, p[g]->rel)) {
            char *path = path_join(a->input_dir, rec);
            struct stat st;
            if (!path) rc = -1;
            else if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) owner = rec;
            free(path);
        }
        for (size_t k = g; k < end && rc == 0; k++) {
            item *it = p[k];
            if (strcmp(it->rel, owner)) {
                if (!(it->clash = strdup(owner))) rc = -1;
            } else if (!a->force && owner == rec && size == it->size && mtime_ns == ns_of(it->mtime)) {
                it->done = complete(a, it, doc);
            }
        }
        free(rec);
        json_decref(doc);
    }
    free(p);
    return rc;
}

/* errors.jsonl of an earlier run: one record per line; lines that do not
 * parse (none should: each is one write) are dropped. */
typedef struct {
    char *path, *stage, *line;
    long long size, mtime_ns;
    int keep;
} err_rec;

static err_rec *read_errors(const char *file, size_t *n) {
    *n = 0;
    FILE *f = fopen(file, "rb");
    if (!f) return NULL;
    err_rec *v = NULL;
    size_t cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    ssize_t len;
    while ((len = getline(&line, &lcap, f)) > 0) {
        json_t *o = json_loadb(line, (size_t)len, 0, NULL);
        const char *p = o ? json_string_value(json_object_get(o, "path")) : NULL;
        const char *s = o ? json_string_value(json_object_get(o, "stage")) : NULL;
        if (p && s && *n == cap) {
            err_rec *bigger = realloc(v, (cap ? 2 * cap : 16) * sizeof *v);
            if (bigger) v = bigger, cap = cap ? 2 * cap : 16;
        }
        if (p && s && *n < cap) {
            err_rec *r = &v[(*n)++];
            r->path = strdup(p), r->stage = strdup(s), r->line = strndup(line, (size_t)len);
            r->size = json_integer_value(json_object_get(o, "size"));
            r->mtime_ns = json_integer_value(json_object_get(o, "mtime_ns"));
            r->keep = 0;
            if (!r->path || !r->stage || !r->line) free(r->path), free(r->stage), free(r->line), (*n)--;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return v;
}

/* Rule 5: a failure recorded for the image as it is now that stands. */
static int permanent(const item *it, const char *stage) {
    return !strcmp(stage, "decode") || (!strcmp(stage, "name") && it->clash);
}

/* ---- the run ---- */

typedef struct {
    int idx;          /* item index; -1: the end */
    uint8_t *rgb;
    int w, h;
    double decode_ms;
    char err[512];    /* decoding failed: why */
} slot;

typedef struct {
    const batch_args *a;
    item_list *list;
    int *todo;        /* indices of the items to compute, in order */
    int ntodo;
    hamer_model *model;
    hamer_detector *det;
    int threads_per_job;
    int errfd;
    pthread_mutex_t mu;
    pthread_cond_t cv_put, cv_get, cv_done;
    slot *q;          /* the prefetch ring */
    int qcap, qhead, qlen, next_decode, next_claim;
    int workers_left;
    /* counters (under mu) */
    int computed, failed, hands, started;
    double t_decode, t_detect, t_crop, t_regress, t_finalise, t_render, t_write;
    char fatal[512];
} batch;

static int cancel_cb(void *user) {
    (void)user;
    return g_stop != 0;
}

/* Decode item idx into s. */
static void decode_into(batch *b, int idx, slot *s) {
    memset(s, 0, sizeof *s);
    s->idx = idx;
    double t0 = hm_cli_now();
    if (hamer_image_load(b->list->v[idx].path, &s->rgb, &s->w, &s->h))
        snprintf(s->err, sizeof s->err, "%s", hamer_last_error());
    s->decode_ms = 1e3 * (hm_cli_now() - t0);
}

/* The prefetch thread: decodes the images in order, at most qcap ahead of
 * the workers, so that decoding overlaps inference. */
static void *prefetcher(void *arg) {
    batch *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (b->qlen == b->qcap && !g_stop) pthread_cond_wait(&b->cv_put, &b->mu);
        int idx = !g_stop && b->next_decode < b->ntodo ? b->todo[b->next_decode++] : -1;
        pthread_mutex_unlock(&b->mu);
        slot s = {.idx = -1};
        if (idx >= 0) decode_into(b, idx, &s);
        pthread_mutex_lock(&b->mu);
        if (idx >= 0 || b->qlen < b->qcap) {
            b->q[(b->qhead + b->qlen) % b->qcap] = s;
            b->qlen++;
        }
        pthread_cond_broadcast(&b->cv_get);
        pthread_mutex_unlock(&b->mu);
        if (idx < 0) return NULL;
    }
}

/* The next decoded image for a worker; 0 at the end (or when stopping). */
static int next_image(batch *b, slot *s) {
    if (b->qcap == 0) {
        pthread_mutex_lock(&b->mu);
        int idx = !g_stop && b->next_claim < b->ntodo ? b->todo[b->next_claim++] : -1;
        pthread_mutex_unlock(&b->mu);
        if (idx < 0) return 0;
        decode_into(b, idx, s);
        return 1;
    }
    pthread_mutex_lock(&b->mu);
    for (;;) {
        if (!g_stop && b->qlen > 0 && b->q[b->qhead].idx >= 0) {
            *s = b->q[b->qhead];
            b->qhead = (b->qhead + 1) % b->qcap;
            b->qlen--;
            pthread_cond_broadcast(&b->cv_put);
            pthread_mutex_unlock(&b->mu);
            return 1;
        }
        /* The end marker stays at the head for the other workers. */
        if (b->qlen > 0 || g_stop) break;
        pthread_cond_wait(&b->cv_get, &b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return 0;
}

/* One line of errors.jsonl, appended with one write and fsync'd, so that
 * a killed run loses no record and leaves no half line. The path and the
 * reason (library messages name the file) in rule 1's form. */
static void record_error(batch *b, const item *it, const char *stage, const char *reason) {
    char *why = name_text(reason);
    json_t *o = why ? json_pack("{s:s,s:s,s:s,s:I,s:I}", "path", it->shown, "stage", stage, "reason", why, "size",
                                (json_int_t)it->size, "mtime_ns", (json_int_t)ns_of(it->mtime))
                    : NULL;
    char *s = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    char *line = s ? str_printf("%s\n", s) : NULL;
    free(s);
    pthread_mutex_lock(&b->mu);
    b->failed++;
    int bad = !line;
    if (line) {
        size_t n = strlen(line);
        ssize_t k = write(b->errfd, line, n);
        bad = k != (ssize_t)n || fsync(b->errfd) != 0;
    }
    pthread_mutex_unlock(&b->mu);
    /* The reason also goes to stderr, so that nothing is silent even when
     * errors.jsonl cannot be written. */
    int named = strstr(reason, it->path) != NULL; /* most library messages name the file already */
    fprintf(stderr, "%shamer: %s%s%s%s\n", isatty(2) ? "\r\033[K" : "", named ? "" : it->shown, named ? "" : ": ",
            why ? why : "out of memory", bad ? " (could not be added to errors.jsonl)" : "");
    free(why);
    free(line);
}

/* Rule 3: RESULT.json with the image's record first,
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

typedef struct {
    hamer_state *st;
    hamer_detect_state *ds;
    hamer_job *job;               /* the photo job on st and ds */
    hamer_box boxes[HAMER_MAX_HANDS];
} worker_bufs;

static int write_out(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (hm_file_write_atomic(path, data, len) == 0) return 0;
    snprintf(err, errlen, "%s", hamer_last_error());
    return -1;
}

/* The boxes of D/NAME.json; their count or -1 with the reason in err. */
static int read_boxes(const char *path, hamer_box *boxes, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "no boxes file '%s': %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n < 0 || (unsigned long)n > HM_CLI_BOXES_FILE_MAX) {
        snprintf(err, errlen, "'%s': unreadable or larger than 64 MB", path);
    } else if (rewind(f), !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        snprintf(err, errlen, "cannot read '%s'", path);
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (!buf) return -1;
    buf[n] = 0;
    int k = hamer_boxes_parse(buf, (size_t)n, boxes, HAMER_MAX_HANDS);
    free(buf);
    if (k < 0) snprintf(err, errlen, "%s: %s", path, hamer_last_error());
    return k;
}

/* One image: hands, outputs, its errors. The library's photo job with the
 * same parameters as `hamer run`, so that NAME.json equals its RESULT.json
 * (the image decoded ahead by the prefetcher, its decode time kept). */
static void process(batch *b, worker_bufs *wb, slot *s) {
    const batch_args *a = b->a;
    item *it = &b->list->v[s->idx];
    char err[1024];
    double t_render = 0, t_write = 0;
    hamer_job_result r = {0};
    char *json = NULL, *doc = NULL;
    int n = 0, cancelled = 0;
    if (s->err[0]) {
        record_error(b, it, "decode", s->err);
        goto account;
    }
    int detected = !a->boxes_dir;
    if (!detected && (n = read_boxes(it->boxes, wb->boxes, err, sizeof err)) < 0) {
        record_error(b, it, "boxes", err);
        goto account;
    }
    hamer_job_input in = {.rgb = s->rgb, .width = s->w, .height = s->h, .decode_ms = s->decode_ms,
                          .boxes = wb->boxes, .n_boxes = n,
                          .source = detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN};
    int rc = hamer_job_run(wb->job, &in);
    hamer_job_get_result(wb->job, &r);
    if (rc) {
        if (rc == HAMER_E_CANCELLED) cancelled = 1;
        else record_error(b, it, r.failed_stage == HAMER_JOB_STAGE_DETECT ? "detect" : "predict", hamer_last_error());
        goto account;
    }
    n = r.n_hands;
    if (mkdir_p(it->out_dir) != 0) {
        snprintf(err, sizeof err, "cannot create the folder '%s': %s", it->out_dir, strerror(errno));
        record_error(b, it, "write", err);
        goto account;
    }
    /* The pictures and meshes first, NAME.json last: NAME.json present
     * means every output of the image is. */
    double t0 = hm_cli_now();
    for (int k = 0; k < 2; k++) {
        if (!(k ? a->side : a->render)) continue;
        uint8_t *png;
        size_t len;
        if (hamer_job_render_png(wb->job, k, &png, &len)) {
            record_error(b, it, "render", hamer_last_error());
            goto account;
        }
        double t1 = hm_cli_now();
        t_render += t1 - t0;
        char *path = str_printf("%s_%s.png", it->stem, k ? "side" : "all");
        int bad = !path || write_out(path, png, len, err, sizeof err);
        if (!path) snprintf(err, sizeof err, "out of memory");
        hamer_free(png);
        free(path);
        t0 = hm_cli_now();
        t_write += t0 - t1;
        if (bad) {
            record_error(b, it, "write", err);
            goto account;
        }
    }
    for (int i = 0; a->save_mesh && i < n; i++) {
        if (!r.hands[i].ok) continue;
        char *obj, *path = str_printf("%s_%d.obj", it->stem, i);
        size_t len;
        if (!path || hamer_job_hand_obj(wb->job, i, &obj, &len)) {
            record_error(b, it, "write", path ? hamer_last_error() : "out of memory");
            free(path);
            goto account;
        }
        int bad = write_out(path, obj, len, err, sizeof err);
        hamer_free(obj);
        free(path);
        if (bad) {
            record_error(b, it, "write", err);
            goto account;
        }
    }
    char *path = str_printf("%s.json", it->stem);
    json = hamer_job_result_json(wb->job, a->with_vertices);
    doc = json ? with_input(it, json) : NULL;
    if (!path || !doc || write_out(path, doc, strlen(doc), err, sizeof err)) {
        if (!path || !doc) snprintf(err, sizeof err, "%s", path && !json ? hamer_last_error() : "out of memory");
        free(path);
        record_error(b, it, "write", err);
        goto account;
    }
    free(path);
    t_write += hm_cli_now() - t0;
    /* Written, as `hamer run` writes it (its exits 3 and 4), and recorded. */
    if (detected && n == 0) record_error(b, it, "hands", "no hand found");
    for (int i = 0, first = 1; i < n; i++)
        if (!r.hands[i].ok && first) {
            snprintf(err, sizeof err, "%d of %d hands failed; %s", r.n_failed, n, r.hands[i].error);
            record_error(b, it, "hands", err);
            first = 0;
        }
    pthread_mutex_lock(&b->mu);
    b->computed++;
    b->hands += n;
    pthread_mutex_unlock(&b->mu);
account:
    pthread_mutex_lock(&b->mu);
    b->t_decode += s->decode_ms * 1e-3, b->t_detect += r.timings.detect_ms * 1e-3, b->t_crop += r.timings.crop_ms * 1e-3;
    b->t_regress += r.timings.regress_ms * 1e-3, b->t_finalise += r.timings.finalise_ms * 1e-3;
    b->t_render += t_render, b->t_write += t_write;
    b->started += !cancelled;
    pthread_cond_broadcast(&b->cv_done);
    pthread_mutex_unlock(&b->mu);
    hamer_free(json);
    free(doc);
    hamer_free(s->rgb);
    s->rgb = NULL;
}

static void *worker(void *arg) {
    batch *b = arg;
    worker_bufs *wb = calloc(1, sizeof *wb);
    if (wb) wb->st = hamer_state_new(b->model, 16, b->threads_per_job);
    if (wb && wb->st && b->det) wb->ds = hamer_detect_state_new(b->det, b->threads_per_job);
    if (wb && wb->st && (!b->det || wb->ds)) {
        hamer_job_params jp = hamer_job_default_params();
        jp.predict = b->a->pp;
        jp.detect = b->a->det.params;
        wb->job = hamer_job_new(wb->st, wb->ds, &jp);
    }
    if (!wb || !wb->job) {
        pthread_mutex_lock(&b->mu);
        snprintf(b->fatal, sizeof b->fatal, "%s", wb ? hamer_last_error() : "out of memory");
        g_stop = 1;
        pthread_cond_broadcast(&b->cv_put);
        pthread_cond_broadcast(&b->cv_get);
        pthread_mutex_unlock(&b->mu);
    } else {
        hamer_state_set_cancel(wb->st, cancel_cb, NULL);
        slot s;
        while (next_image(b, &s)) process(b, wb, &s);
    }
    if (wb) {
        hamer_job_free(wb->job);
        hamer_detect_state_free(wb->ds);
        hamer_state_free(wb->st);
        free(wb);
    }
    pthread_mutex_lock(&b->mu);
    b->workers_left--;
    pthread_cond_broadcast(&b->cv_done);
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

/* Temporary files of core/fileio.h (".NAME.EXT.XXXXXX") that a killed run
 * left in an output folder: no run of ours is using them (the lock), and
 * nothing else makes such names beside our outputs. */
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

static void progress(batch *b, double t_start, int final) {
    if (!isatty(2)) return;
    double el = hm_cli_now() - t_start, rate = el > 0 ? b->started / el : 0;
    int left = b->ntodo - b->started;
    if (final) {
        fprintf(stderr, "\r\033[K");
        return;
    }
    fprintf(stderr, "\rhamer: batch: %d/%d images, %d hands, %.2f images/s", b->started, b->ntodo, b->hands, rate);
    if (rate > 0 && left > 0) fprintf(stderr, ", ETA %.0f s", left / rate);
    fprintf(stderr, "\033[K");
    fflush(stderr);
}

static int batch_main(batch_args *a) {
    double t_start = hm_cli_now();
    /* From here on Ctrl-C / SIGTERM stop the run cleanly: the scan and
     * the look at earlier outputs end at the next name, the images in
     * flight are cancelled (temporary files removed, the summary printed). */
    struct sigaction sa = {0};
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* The folders first, before any work: an output folder that cannot be
     * created or written is an error now, not after the model's load. */
    struct stat in_st, out_st, st;
    if (stat(a->input_dir, &in_st) != 0 || !S_ISDIR(in_st.st_mode)) {
        say("--input-dir '%s' is not a readable folder: %s", a->input_dir,
            stat(a->input_dir, &in_st) != 0 ? strerror(errno) : "not a folder");
        return 1;
    }
    if (a->boxes_dir && (stat(a->boxes_dir, &st) != 0 || !S_ISDIR(st.st_mode))) {
        say("--boxes-dir '%s' is not a folder", a->boxes_dir, NULL);
        return 1;
    }
    if (mkdir_p(a->out_dir) != 0) {
        int e = errno;
        say("cannot create the output folder '%s': %s", a->out_dir, strerror(e));
        return 1;
    }
    stat(a->out_dir, &out_st);
    if (out_st.st_dev == in_st.st_dev && out_st.st_ino == in_st.st_ino) {
        fprintf(stderr, "hamer: batch: --out-dir must not be the input folder (its outputs would become inputs)\n");
        return 1;
    }
    char *probe = str_printf("%s/errors.jsonl", a->out_dir);
    char *lockp = str_printf("%s/.hamer-batch.lock", a->out_dir);
    if (!probe || !lockp) return free(probe), free(lockp), hm_cli_fail(1, "batch: out of memory%s", "");
    if (access(a->out_dir, W_OK) != 0) {
        int e = errno;
        say("cannot write in the output folder '%s': %s", a->out_dir, strerror(e));
        free(probe), free(lockp);
        return 1;
    }
    /* Two runs on one folder would remove each other's temporary files. */
    int lockfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (lockfd < 0 || flock(lockfd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (lockfd < 0) say("cannot create '%s': %s", lockp, strerror(e));
        else say("another hamer batch is using '%s': %s", a->out_dir, strerror(e));
        if (lockfd >= 0) close(lockfd);
        free(probe), free(lockp);
        return 1;
    }
    free(lockp);

    item_list list = {0};
    int status = 1;
    batch b = {0};
    pthread_t *th = NULL, pre;
    int npre = 0, nth = 0;
    size_t nerr = 0;
    err_rec *old = NULL;
    /* Rule 2: the input folder is seen; the output and boxes folders may
     * lie inside it and are not inputs. */
    if (dir_set_add(&list.seen, in_st.st_dev, in_st.st_ino) < 0 ||
        dir_set_add(&list.seen, out_st.st_dev, out_st.st_ino) < 0 ||
        (a->boxes_dir && stat(a->boxes_dir, &st) == 0 && dir_set_add(&list.seen, st.st_dev, st.st_ino) < 0)) {
        say("out of memory", "", NULL);
        goto done;
    }
    int rc = scan(a, a->input_dir, "", 0, &list); /* its errors printed */
    if (rc == 0 && (rc = plan_stems(a, &list)) == -1) say("out of memory looking at '%s'", a->out_dir, NULL);
    if (rc == -2 || g_stop) {
        say("interrupted before any image was computed (run again)", "", NULL);
        status = 130;
        goto done;
    }
    if (rc) goto done;

    /* What is left to do; the earlier failures that still stand. */
    old = read_errors(probe, &nerr);
    int skipped = 0, failed_earlier = 0;
    const char *last_dir = NULL;
    b.todo = malloc((list.n ? list.n : 1) * sizeof *b.todo);
    if (!b.todo) goto done;
    for (size_t i = 0; i < list.n; i++) {
        item *it = &list.v[i];
        err_rec *r = NULL;
        for (size_t k = 0; k < nerr; k++)
            if (!strcmp(old[k].path, it->shown) && old[k].size == it->size && old[k].mtime_ns == ns_of(it->mtime))
                r = &old[k];
        int failed_before = !a->force && !a->retry_failed && r && permanent(it, r->stage) && !it->done;
        if (it->done || failed_before) {
            /* Its lines stay (a photo without hands is complete and failed). */
            int kept = 0;
            for (size_t k = 0; k < nerr; k++)
                if (!strcmp(old[k].path, it->shown)) old[k].keep = 1, kept = 1;
            failed_earlier += kept;
            skipped++;
        } else {
            b.todo[b.ntodo++] = (int)i;
        }
        if (!last_dir || strcmp(last_dir, it->out_dir)) remove_stale_temps(it->out_dir);
        last_dir = it->out_dir;
    }
    /* errors.jsonl now lists the failures that stand; this run appends. */
    {
        size_t len = 0;
        for (size_t k = 0; k < nerr; k++) len += old[k].keep ? strlen(old[k].line) : 0;
        char *buf = malloc(len + 1), *p = buf;
        for (size_t k = 0; buf && k < nerr; k++)
            if (old[k].keep) p = stpcpy(p, old[k].line);
        if (!buf || hm_file_write_atomic(probe, buf, len) != 0) {
            say("%s", buf ? hamer_last_error() : "out of memory", NULL);
            free(buf);
            goto done;
        }
        free(buf);
    }
    b.errfd = open(probe, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (b.errfd < 0) {
        int e = errno;
        say("cannot open '%s': %s", probe, strerror(e));
        goto done;
    }

    b.a = a;
    b.list = &list;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cv_put, NULL);
    pthread_cond_init(&b.cv_get, NULL);
    pthread_cond_init(&b.cv_done, NULL);
    double t_load = 0;
    /* Name clashes fail without decoding; the rest is computed. */
    for (int k = 0, j = 0; k < b.ntodo; k++) {
        item *it = &list.v[b.todo[k]];
        if (it->clash) {
            char *why = str_printf("its outputs would overwrite those of '%s' (same name without extension)", it->clash);
            record_error(&b, it, "name", why ? why : "name clash");
            free(why);
        } else {
            b.todo[j++] = b.todo[k];
        }
        if (k == b.ntodo - 1) b.ntodo = j;
    }
    if (b.ntodo > 0) {
        double t0 = hm_cli_now();
        b.model = hm_cli_load_model(a->model, a->mano, a->precision);
        if (!b.model) {
            say("%s", hamer_last_error(), NULL);
            goto done;
        }
        if (!a->boxes_dir && !(b.det = hm_cli_load_detector(&a->det))) {
            say("%s", hamer_last_error(), NULL);
            goto done;
        }
        t_load = hm_cli_now() - t0;
        int total = a->threads ? a->threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        if (total < 1) total = 1;
        int jobs = a->jobs < b.ntodo ? a->jobs : b.ntodo;
        b.threads_per_job = total / jobs > 0 ? total / jobs : 1;
        b.qcap = a->prefetch;
        if (b.qcap && !(b.q = calloc((size_t)b.qcap, sizeof *b.q))) goto done;
        if (!(th = calloc((size_t)jobs, sizeof *th))) goto done;
        double t_run = hm_cli_now();
        if (b.qcap) {
            if (pthread_create(&pre, NULL, prefetcher, &b)) goto done;
            npre = 1;
        }
        b.workers_left = jobs;
        for (; nth < jobs; nth++)
            if (pthread_create(&th[nth], NULL, worker, &b)) {
                /* Those started may already be counting down. */
                pthread_mutex_lock(&b.mu);
                b.workers_left -= jobs - nth;
                pthread_mutex_unlock(&b.mu);
                break;
            }
        pthread_mutex_lock(&b.mu);
        while (b.workers_left > 0) {
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 500000000L;
            if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
            pthread_cond_timedwait(&b.cv_done, &b.mu, &until);
            /* A signal handler cannot wake the threads that wait: done here. */
            if (g_stop) pthread_cond_broadcast(&b.cv_put), pthread_cond_broadcast(&b.cv_get);
            progress(&b, t_run, 0);
        }
        pthread_mutex_unlock(&b.mu);
        progress(&b, t_run, 1);
        t_run = hm_cli_now() - t_run;
        (void)t_run;
    }
    if (b.fatal[0]) {
        say("%s", b.fatal, NULL);
        goto done;
    }
    double wall = hm_cli_now() - t_start;
    int interrupted = g_stop != 0;
    int not_done = b.ntodo - b.started;
    int failed = b.failed;
    double proc_s = wall - t_load;
    if (a->json) {
        json_t *o = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:b,s:f,s:f,s:f}", "images", (int)list.n, "computed",
                              b.computed, "skipped", skipped, "failed", failed, "failed_earlier", failed_earlier,
                              "hands", b.hands, "interrupted", interrupted, "seconds", wall, "load_seconds", t_load,
                              "images_per_s", proc_s > 0 ? b.started / proc_s : 0.0);
        json_t *stg = json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "decode", b.t_decode, "detect", b.t_detect, "crop",
                                b.t_crop, "regress", b.t_regress, "finalise", b.t_finalise, "render", b.t_render,
                                "write", b.t_write);
        json_object_set_new(o, "stage_seconds", stg);
        json_object_set_new(o, "not_done", json_integer(not_done));
        char *s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (s) puts(s);
        free(s);
        fflush(stdout);
    }
    fprintf(stderr,
            "hamer: batch: %zu images: %d computed, %d skipped (done earlier), %d failed%s; %d hands; %.1f s "
            "(load %.1f; decode %.1f, detect %.1f, crop %.1f, regress %.1f, finalise %.1f, render %.1f, write %.1f "
            "summed over jobs)\n",
            list.n, b.computed, skipped, failed + failed_earlier,
            failed + failed_earlier ? " (see errors.jsonl)" : "", b.hands, wall, t_load, b.t_decode, b.t_detect,
            b.t_crop, b.t_regress, b.t_finalise, b.t_render, b.t_write);
    if (interrupted) {
        fprintf(stderr, "hamer: batch: interrupted; %d images not done (run again to resume)\n", not_done);
        status = 130;
    } else {
        status = failed + failed_earlier ? 3 : 0;
    }
done:
    if (npre || nth) {
        /* Stopping: wake everything that waits. */
        if (b.fatal[0] || status == 1) g_stop = 1;
        pthread_mutex_lock(&b.mu);
        pthread_cond_broadcast(&b.cv_put);
        pthread_cond_broadcast(&b.cv_get);
        pthread_mutex_unlock(&b.mu);
    }
    for (int i = 0; i < nth; i++) pthread_join(th[i], NULL);
    if (npre) pthread_join(pre, NULL);
    for (int i = 0; b.q && b.qcap && i < b.qlen; i++) hamer_free(b.q[(b.qhead + i) % b.qcap].rgb);
    free(b.q);
    free(th);
    if (b.errfd > 0) close(b.errfd);
    hamer_detector_free(b.det);
    hamer_model_free(b.model);
    for (size_t k = 0; k < nerr; k++) free(old[k].path), free(old[k].stage), free(old[k].line);
    free(old);
    for (size_t i = 0; i < list.n; i++) {
        item *it = &list.v[i];
        free(it->path), free(it->rel), free(it->name), free(it->shown), free(it->out_dir), free(it->stem);
        free(it->boxes), free(it->clash);
    }
    free(list.v);
    free(list.seen.v);
    free(b.todo);
    free(probe);
    close(lockfd);
    return status;
}

int hm_cli_batch(int argc, char **argv) {
    batch_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return batch_main(&a);
}
