/* model_cache.c - the packed-model cache: loading a checkpoint writes its
 * packed form once, and later loads of the same checkpoint map that
 * instead (0.1-0.3 s against 3-6 s of unpacking).
 *
 * Directory: $HAMER_CACHE_DIR, else $XDG_CACHE_HOME/hamer, else
 * $HOME/.cache/hamer (created 0700). Entries are <32 hex digits>.hpk.
 *
 * Key: XXH3-128 of the packed format version, the library version, the
 * backend and device, precision, the active ISA and low-precision variant, the precision's
 * scheme name, and the checkpoint's identity: device, inode, size, mtime
 * (nanoseconds), its first 64 KiB and its last 1 MiB. A torch.save zip
 * ends with the central directory, which holds the CRC-32 and size of
 * every entry, so the tail stands for the whole content at the price of
 * reading about 1 MiB (hashing all 2.7 GB would cost more than loading the
 * entry); mtime and size catch an edit that did not rewrite the
 * directory. The same identity of the --mano file is included when one is
 * given, since its buffers end up in the entry.
 *
 * Trust: an entry is read by the packed-file reader with every check it
 * applies to any file (header, table, per-section XXH3), and the key is
 * also stored in the entry's header (covered by the header checksum), so
 * a valid file under another entry's name is not taken either. An entry
 * that fails is removed and rebuilt from the checkpoint.
 *
 * Writes: a temporary file beside the entry, fsync, rename, fsync of the
 * directory (hm_model_save_packed_tagged). Two processes that miss at the
 * same time both build and both rename; each rename is atomic, so a
 * reader sees one complete file or none, and one entry remains.
 *
 * Size bound: $HAMER_CACHE_MAX_MB (default 8192). Before a write, and
 * after it, the least recently used entries (mtime, refreshed on each hit)
 * are removed until the entries fit; an entry bigger than the bound alone
 * is not kept. Temporary files untouched for an hour (a writer that died)
 * are removed too. Removing a file another process has mapped is safe:
 * its mapping stays valid.
 *
 * Failures of the cache itself (no home, unwritable directory, full disk)
 * are warnings through hm_log; the model still loads from the checkpoint.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/cpu.h"
#include "core/log.h"
#include "core/fileio.h"
#include "core/util.h"
#include "format/ckpt.h"
#include "hamer_version.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "load/load.h"
#include "load/model_pack.h"
#include "model/model.h"

#define CACHE_HEAD_BYTES ((size_t)64 << 10)
#define CACHE_TAIL_BYTES ((size_t)1 << 20)
#define CACHE_DEFAULT_MAX_MB 8192
#define CACHE_STALE_TMP_S 3600

int hm_model_cache_enabled(void) {
    const char *e = getenv("HAMER_NO_CACHE");
    return !(e && *e && strcmp(e, "0"));
}

/* The directory, or NULL (with the reason in why) when none can be named. */
static char *cache_dir(char *why, size_t whylen) {
    const char *d = getenv("HAMER_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char *out = NULL;
    /* XDG_CACHE_HOME and HOME count only when absolute (the XDG rule). */
    if (d && *d) out = strdup(d);
    else if (x && x[0] == '/') {
        if (asprintf(&out, "%s/hamer", x) < 0) out = NULL;
    } else if (h && h[0] == '/') {
        if (asprintf(&out, "%s/.cache/hamer", h) < 0) out = NULL;
    }
    if (!out) snprintf(why, whylen, "neither HAMER_CACHE_DIR, XDG_CACHE_HOME nor HOME names a directory");
    return out;
}

/* mkdir -p, the last components 0700. */
static int make_dirs(const char *path) {
    char *p = strdup(path);
    if (!p) return ENOMEM;
    int err = 0;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) err = errno;
        *s = c;
        if (!c || err) break;
    }
    free(p);
    struct stat st;
    if (!err && (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))) err = errno ? errno : ENOTDIR;
    return err;
}

static int hash_range(XXH3_state_t *st, int fd, off_t off, size_t n) {
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return -1;
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    int ok = got == n;
    if (ok) XXH3_128bits_update(st, buf, n);
    free(buf);
    return ok ? 0 : -1;
}

/* A file's identity into the key; -1 if it cannot be read. */
static int hash_file(XXH3_state_t *st, const char *path) {
    int fd = hm_open_read(path);
    if (fd < 0) return -1;
    struct stat sb;
    int rc = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) ? 0 : -1;
    if (!rc) {
        int64_t id[5] = {(int64_t)sb.st_dev, (int64_t)sb.st_ino, (int64_t)sb.st_size, (int64_t)sb.st_mtim.tv_sec,
                         (int64_t)sb.st_mtim.tv_nsec};
        XXH3_128bits_update(st, id, sizeof id);
        size_t size = (size_t)sb.st_size;
        size_t head = size < CACHE_HEAD_BYTES ? size : CACHE_HEAD_BYTES;
        size_t tail = size - head < CACHE_TAIL_BYTES ? size - head : CACHE_TAIL_BYTES;
        rc = hash_range(st, fd, 0, head);
        if (!rc) rc = hash_range(st, fd, (off_t)(size - tail), tail);
    }
    close(fd);
    return rc;
}

static int cache_key(const char *path, const hm_load_opts *o, uint8_t key[HM_PACK_TAG_BYTES]) {
    const char *mano_npz = o->mano_npz;
    const hm_backend *be = o->be ? o->be : &hm_backend_cpu;
    int precision = o->precision;
    XXH3_state_t *st = XXH3_createState();
    if (!st) return -1;
    XXH3_128bits_reset(st);
    char what[256];
    int n = snprintf(what, sizeof what, "hamer-cache|pack %u|hamer %s|backend %s:%d|prec %d|isa %s|lowp %d|scheme %s|mano %d",
                     PACK_VERSION, HAMER_VERSION_STRING, be->name, o->dev, precision, hm_isa_name(hm_isa_active()),
                     (int)hm_lowp_kind_active(), be->scheme(precision), mano_npz != NULL);
    XXH3_128bits_update(st, what, (size_t)n);
    int rc = hash_file(st, path);
    if (!rc && mano_npz) rc = hash_file(st, mano_npz);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, XXH3_128bits_digest(st));
    memcpy(key, c.digest, HM_PACK_TAG_BYTES);
    XXH3_freeState(st);
    return rc;
}

static int is_entry_name(const char *name) {
    if (strlen(name) != 2 * HM_PACK_TAG_BYTES + 4 || strcmp(name + 2 * HM_PACK_TAG_BYTES, ".hpk")) return 0;
    return strspn(name, "0123456789abcdef") == 2 * HM_PACK_TAG_BYTES;
}

/* "<entry>.hpk.tmp.<pid>.<n>": hm_model_save_packed's temporary names. */
static int is_tmp_name(const char *name) {
    return strlen(name) > 2 * HM_PACK_TAG_BYTES + 9 && !strncmp(name + 2 * HM_PACK_TAG_BYTES, ".hpk.tmp.", 9);
}

typedef struct {
    char name[2 * HM_PACK_TAG_BYTES + 5];
    uint64_t bytes;
    struct timespec mtime;
} entry_info;

static int older_first(const void *a, const void *b) {
    const entry_info *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Remove least recently used entries (never `keep`) until the entries and
 * `reserve` more bytes fit under max; dead temporary files go as well. */
static void evict(const char *dir, const char *keep, uint64_t reserve, uint64_t max) {
    DIR *d = opendir(dir);
    if (!d) return;
    int fd = dirfd(d), n = 0, cap = 0;
    entry_info *v = NULL;
    uint64_t total = 0;
    time_t now = time(NULL);
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat sb;
        int entry = is_entry_name(de->d_name), tmp = !entry && is_tmp_name(de->d_name);
        if ((!entry && !tmp) || fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        if (tmp) {
            if (now - sb.st_mtim.tv_sec > CACHE_STALE_TMP_S) unlinkat(fd, de->d_name, 0);
            continue;
        }
        total += (uint64_t)sb.st_size;
        if (keep && !strcmp(de->d_name, keep)) continue;
        if (n == cap) {
            entry_info *w = realloc(v, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *v);
            if (!w) break;
            v = w;
        }
        snprintf(v[n].name, sizeof v[n].name, "%s", de->d_name);
        v[n].bytes = (uint64_t)sb.st_size;
        v[n].mtime = sb.st_mtim;
        n++;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, older_first); /* v is NULL when n == 0 */
    for (int i = 0; i < n && total + reserve > max; i++)
        if (unlinkat(fd, v[i].name, 0) == 0 || errno == ENOENT) {
            total -= v[i].bytes;
            hm_log(HM_LOG_INFO, "model cache: removed %s/%s (over the %llu MB bound)", dir, v[i].name,
                   (unsigned long long)(max >> 20));
        }
    free(v);
    closedir(d);
}

static uint64_t cache_max_bytes(void) {
    const char *e = getenv("HAMER_CACHE_MAX_MB");
    char *end;
    if (e && *e) {
        unsigned long long mb = strtoull(e, &end, 10);
        if (!*end && mb < ((uint64_t)1 << 40)) return (uint64_t)mb << 20;
        hm_log(HM_LOG_WARN, "model cache: HAMER_CACHE_MAX_MB='%s' is not a number of MB; using %d", e, CACHE_DEFAULT_MAX_MB);
    }
    return (uint64_t)CACHE_DEFAULT_MAX_MB << 20;
}

static int load_from_ckpt(const char *path, const hm_load_opts *o, hm_model **out) {
    hm_ckpt *ck;
    int rc = hm_ckpt_open(path, &ck);
    if (rc) return rc;
    rc = hm_model_from_ckpt(ck, path, o, out);
    hm_ckpt_close(ck);
    return rc;
}

/* Write m as the entry; every failure is a warning. */
static void store(const hm_model *m, const char *dir, const char *name, const char *entry, const uint8_t key[HM_PACK_TAG_BYTES],
                  uint64_t ckpt_bytes) {
    uint64_t max = cache_max_bytes();
    /* The entry's size is not known before it is written: the checkpoint's
     * size bounds it (fp32 packing adds under 2 %, fast is a third). */
    uint64_t estimate = m->precision == HM_PREC_FAST ? ckpt_bytes / 2 : ckpt_bytes + ckpt_bytes / 20;
    if (estimate > max) {
        hm_log(HM_LOG_WARN, "model cache: an entry of about %llu MB would not fit the %llu MB bound (HAMER_CACHE_MAX_MB); not cached",
               (unsigned long long)(estimate >> 20), (unsigned long long)(max >> 20));
        return;
    }
    evict(dir, name, estimate, max);
    struct statvfs vs;
    if (statvfs(dir, &vs) == 0 && (uint64_t)vs.f_bavail * vs.f_frsize < estimate + ((uint64_t)256 << 20)) {
        hm_log(HM_LOG_WARN, "model cache: %s has too little free space for a %llu MB entry; not cached", dir,
               (unsigned long long)(estimate >> 20));
        return;
    }
    if (hm_model_save_packed_tagged(m, entry, key)) {
        hm_log(HM_LOG_WARN, "model cache: %s; the model loads from the checkpoint each time", hm_errmsg());
        hm_errclear();
        return;
    }
    hm_log(HM_LOG_INFO, "model cache: wrote %s (HAMER_NO_CACHE=1 or --no-cache turns the cache off)", entry);
    evict(dir, name, 0, max);
    struct stat sb;
    if (stat(entry, &sb) == 0 && (uint64_t)sb.st_size > max) unlink(entry);
}

int hm_model_load_cached(const char *path, const hm_load_opts *o, hm_model **out) {
    *out = NULL;
    uint8_t key[HM_PACK_TAG_BYTES];
    char why[160] = "";
    char *dir = NULL, *entry = NULL, name[2 * HM_PACK_TAG_BYTES + 5];
    struct stat ck_st;
    /* A checkpoint that cannot be read gets the checkpoint reader's error. */
    if (stat(path, &ck_st) != 0 || cache_key(path, o, key) != 0)
        return load_from_ckpt(path, o, out);
    for (int i = 0; i < HM_PACK_TAG_BYTES; i++) snprintf(name + 2 * i, 3, "%02x", key[i]);
    snprintf(name + 2 * HM_PACK_TAG_BYTES, 5, ".hpk");
    int err;
    if (!(dir = cache_dir(why, sizeof why)) || (err = make_dirs(dir)) != 0) {
        if (dir) snprintf(why, sizeof why, "cannot create %s: %s", dir, strerror(err));
        hm_log(HM_LOG_WARN, "model cache: %s; loading from the checkpoint", why);
        free(dir);
        return load_from_ckpt(path, o, out);
    }
    if (asprintf(&entry, "%s/%s", dir, name) < 0) {
        free(dir);
        return load_from_ckpt(path, o, out);
    }

    hm_model *m = NULL;
    if (access(entry, F_OK) == 0) {
        uint8_t tag[HM_PACK_TAG_BYTES];
        int rc = hm_model_load_packed(entry, o, &m);
        if (!rc && (hm_pack_tag(m, tag) || memcmp(tag, key, sizeof tag))) {
            rc = hm_err(HM_E_FORMAT, "%s: its header carries another key", entry);
            hm_model_free(m);
            m = NULL;
        }
        if (!rc) {
            utimensat(AT_FDCWD, entry, NULL, 0); /* least recently used goes first */
            free(entry);
            free(dir);
            *out = m;
            return HM_OK;
        }
        hm_log(HM_LOG_WARN, "model cache: entry rejected (%s); rebuilding it from the checkpoint", hm_errmsg());
        hm_errclear();
        m = NULL;
        unlink(entry);
    }
    int rc = load_from_ckpt(path, o, &m);
    if (!rc) store(m, dir, name, entry, key, (uint64_t)ck_st.st_size);
    free(entry);
    free(dir);
    *out = m;
    return rc;
}
