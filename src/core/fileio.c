/* fileio.c - atomic outputs (see fileio.h). POSIX only. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "core/fileio.h"
#include "core/util.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* Directory part of p ("." when none), newly allocated. */
static char *dir_of(const char *p) {
    const char *slash = strrchr(p, '/');
    if (!slash) return dup_str(".");
    if (slash == p) return dup_str("/");
    size_t n = (size_t)(slash - p);
    char *d = malloc(n + 1);
    if (d) memcpy(d, p, n), d[n] = 0;
    return d;
}

/* path with its chain of symlinks followed (newly allocated), or NULL with
 * errno. A dangling link resolves to the file it would create. */
static char *follow_links(const char *path) {
    char *cur = dup_str(path);
    for (int hops = 0; cur; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
        if (hops == 40) {
            free(cur);
            errno = ELOOP;
            return NULL;
        }
        char buf[PATH_MAX];
        ssize_t k = readlink(cur, buf, sizeof buf);
        if (k < 0 || k >= (ssize_t)sizeof buf) {
            /* A filled buffer may be a truncated name: never follow that. */
            if (k >= 0) errno = ENAMETOOLONG;
            free(cur);
            return NULL;
        }
        buf[k] = 0;
        char *next;
        if (buf[0] == '/') {
            next = dup_str(buf);
        } else {
            char *d = dir_of(cur);
            size_t n = (d ? strlen(d) : 0) + strlen(buf) + 2;
            next = d ? malloc(n) : NULL;
            if (next) snprintf(next, n, "%s/%s", d, buf);
            free(d);
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* The process's umask without changing it: umask() can only be read by
 * setting it, which races with other threads creating files. */
static mode_t current_umask(void) {
    FILE *f = fopen("/proc/self/status", "re");
    unsigned m = 022;
    if (f) {
        char line[128];
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "Umask: %o", &m) == 1) break;
        fclose(f);
    }
    return (mode_t)(m & 0777);
}

static int fail(hm_outfile *o, const char *what, int e) {
    int rc = hm_err(e == ENOMEM ? HM_E_NOMEM : HM_E_IO, "cannot %s '%s': %s", what, o->path ? o->path : "?", strerror(e));
    hm_outfile_abort(o);
    return rc;
}

int hm_outfile_open(hm_outfile *o, const char *path) {
    memset(o, 0, sizeof *o);
    if (!path || !*path) return hm_err(HM_E_ARG, "output path is empty");
    if (!(o->path = dup_str(path))) return fail(o, "create", ENOMEM);
    if (!(o->target = follow_links(path))) return fail(o, "create", errno);
    struct stat st;
    /* mkstemp makes the file 0600; a new output gets what open() would
     * have given it, an existing one keeps its permissions. */
    mode_t mode = 0666 & ~current_umask();
    if (stat(o->target, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return fail(o, "create", EISDIR);
        if (!S_ISREG(st.st_mode)) {
            hm_err(HM_E_IO, "cannot create '%s': not a regular file (it is left as it is)", path);
            hm_outfile_abort(o);
            return HM_E_IO;
        }
        /* rename() would replace a file the user made read-only;
         * writing in place would have been refused, so refuse too. */
        if (access(o->target, W_OK) != 0) return fail(o, "create", errno);
        mode = st.st_mode & 07777;
    } else if (errno != ENOENT) {
        return fail(o, "create", errno);
    }
    const char *base = strrchr(o->target, '/');
    base = base ? base + 1 : o->target;
    if (!*base) return fail(o, "create", EISDIR);
    char *dir = dir_of(o->target);
    size_t n = (dir ? strlen(dir) : 0) + strlen(base) + 16;
    if (!dir || !(o->tmp = malloc(n))) {
        free(dir);
        return fail(o, "create", ENOMEM);
    }
    snprintf(o->tmp, n, "%s/.%s.XXXXXX", dir, base);
    free(dir);
    /* O_CLOEXEC: a server forking helpers must not leak the descriptor. */
    int fd = mkostemp(o->tmp, O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(o->tmp), o->tmp = NULL;
        return fail(o, "create", e);
    }
    if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "wb"))) {
        int e = errno;
        close(fd);
        return fail(o, "create", e);
    }
    return HM_OK;
}

int hm_outfile_write(hm_outfile *o, const void *data, size_t n) {
    if (!o->f) return hm_err(HM_E_ARG, "write to '%s' after it was finished", o->path ? o->path : "?");
    if (n && fwrite(data, 1, n, o->f) != n) {
        o->failed = errno ? errno : EIO;
        return hm_err(HM_E_IO, "cannot write '%s': %s", o->path, strerror(o->failed));
    }
    return HM_OK;
}

int hm_outfile_finish(hm_outfile *o) {
    if (!o->f) return o->tmp ? HM_OK : hm_err(HM_E_ARG, "'%s' is not open", o->path ? o->path : "?");
    int e = o->failed;
    errno = 0;
    if (fflush(o->f) != 0 && !e) e = errno ? errno : EIO;
    if (ferror(o->f) && !e) e = EIO;
    if (fsync(fileno(o->f)) != 0 && !e) e = errno;
    if (fclose(o->f) != 0 && !e) e = errno ? errno : EIO;
    o->f = NULL;
    return e ? fail(o, "write", e) : HM_OK;
}

int hm_outfile_commit(hm_outfile *o) {
    int rc = hm_outfile_finish(o);
    if (rc) return rc;
    if (rename(o->tmp, o->target) != 0) return fail(o, "replace", errno);
    free(o->tmp), o->tmp = NULL;
    /* The rename is durable only once the directory is. */
    char *dir = dir_of(o->target);
    int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY) : -1;
    if (dfd >= 0) fsync(dfd), close(dfd);
    free(dir);
    hm_outfile_abort(o);
    return HM_OK;
}

void hm_outfile_abort(hm_outfile *o) {
    if (o->f) fclose(o->f);
    if (o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->target);
    free(o->path);
    memset(o, 0, sizeof *o);
}

int hm_file_write_atomic(const char *path, const void *data, size_t n) {
    hm_outfile o;
    int rc = hm_outfile_open(&o, path);
    if (!rc) rc = hm_outfile_write(&o, data, n);
    if (!rc) rc = hm_outfile_commit(&o);
    hm_outfile_abort(&o);
    return rc;
}

/* Canonical name of p's directory entry: realpath of its directory plus
 * its last component, after following symlinks. NULL when the directory
 * does not exist. */
static char *canonical(const char *p) {
    char *t = follow_links(p);
    if (!t) return NULL;
    char *d = dir_of(t), *rd = d ? realpath(d, NULL) : NULL;
    const char *base = strrchr(t, '/');
    base = base ? base + 1 : t;
    char *out = NULL;
    if (rd) {
        size_t n = strlen(rd) + strlen(base) + 2;
        if ((out = malloc(n))) snprintf(out, n, "%s/%s", rd, base);
    }
    free(rd);
    free(d);
    free(t);
    return out;
}

int hm_path_same(const char *a, const char *b) {
    if (!a || !b) return 0;
    struct stat sa, sb;
    if (stat(a, &sa) == 0 && stat(b, &sb) == 0) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    char *ca = canonical(a), *cb = canonical(b);
    int same = ca && cb && strcmp(ca, cb) == 0;
    free(ca);
    free(cb);
    return same;
}

int hm_open_read(const char *path) { return open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); }

FILE *hm_fopen_regular(const char *path) {
    int fd = hm_open_read(path);
    if (fd < 0) return NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) close(fd);
    return f;
}
