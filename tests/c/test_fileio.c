/* test_fileio - core/fileio: outputs written to a temp file beside the
 * (symlink-followed) target and renamed; failures leave the old file and no
 * temp file; non-regular targets refused untouched. Runs as root too, where
 * permissions do not stop writes, so the write failure midway is made with
 * RLIMIT_FSIZE instead of a read-only directory. */
#include "core/fileio.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char dir[64];

static const char *at(const char *name) {
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (f) fputs(text, f), fclose(f);
}

/* The file's content (at most 255 bytes), "" when it cannot be read. */
static const char *get(const char *path) {
    static char buf[256];
    buf[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Entries of d whose name starts with '.' other than . and ..: temp files. */
static int temp_files(const char *d) {
    DIR *dd = opendir(d);
    int n = 0;
    for (struct dirent *e; dd && (e = readdir(dd));)
        if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (dd) closedir(dd);
    return n;
}

static int msg_has(const char *a, const char *b) {
    const char *m = hm_errmsg();
    return strstr(m, a) && (!b || strstr(m, b));
}

static void test_plain(void) {
    const char *p = at("new.txt");
    CHECK(hm_file_write_atomic(p, "hello", 5) == HM_OK && !strcmp(get(p), "hello"));
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644); /* 0666 & ~022 */
    /* An existing file keeps its permissions. */
    chmod(p, 0640);
    CHECK(hm_file_write_atomic(p, "again", 5) == HM_OK && !strcmp(get(p), "again"));
    CHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0640);
    CHECK(temp_files(dir) == 0);
    CHECK(hm_file_write_atomic("", "x", 1) == HM_E_ARG);
    CHECK(hm_file_write_atomic("/nonexistent-hm-dir/x.json", "x", 1) == HM_E_IO &&
          msg_has("cannot create '/nonexistent-hm-dir/x.json'", "No such file or directory"));
}

static void test_symlinks(void) {
    const char *real = at("real.json"), *link = at("link.json");
    put(real, "old");
    CHECK(symlink("real.json", link) == 0); /* relative, resolved against the link's directory */
    CHECK(hm_file_write_atomic(link, "new", 3) == HM_OK);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(!strcmp(get(real), "new"));
    /* A chain of links, the last one absolute. */
    const char *l2 = at("link2.json");
    char abs[300];
    snprintf(abs, sizeof abs, "%s", link);
    CHECK(symlink(abs, l2) == 0 && hm_file_write_atomic(l2, "chain", 5) == HM_OK);
    CHECK(lstat(l2, &st) == 0 && S_ISLNK(st.st_mode) && lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(!strcmp(get(real), "chain"));
    /* Dangling: the file the link points to is created, the link stays. */
    const char *dang = at("dangling.json");
    CHECK(symlink("made-by-link.json", dang) == 0 && hm_file_write_atomic(dang, "made", 4) == HM_OK);
    CHECK(lstat(dang, &st) == 0 && S_ISLNK(st.st_mode) && !strcmp(get(at("made-by-link.json")), "made"));
    /* A loop is an error naming the path, not a hang. */
    const char *la = at("loop-a"), *lb = at("loop-b");
    CHECK(symlink("loop-b", la) == 0 && symlink("loop-a", lb) == 0);
    CHECK(hm_file_write_atomic(la, "x", 1) == HM_E_IO && msg_has("loop-a", "symbolic links"));
    CHECK(temp_files(dir) == 0);
}

static void test_non_regular(void) {
    const char *d = at("adir");
    mkdir(d, 0755);
    CHECK(hm_file_write_atomic(d, "x", 1) == HM_E_IO && msg_has("cannot create '", "adir': Is a directory"));
    struct stat st;
    CHECK(stat(d, &st) == 0 && S_ISDIR(st.st_mode));
    char slash[300];
    snprintf(slash, sizeof slash, "%s/", at("nodir"));
    CHECK(hm_file_write_atomic(slash, "x", 1) == HM_E_IO);
    /* A link to a directory: refused, both left. */
    const char *ld = at("link-to-dir");
    CHECK(symlink("adir", ld) == 0 && hm_file_write_atomic(ld, "x", 1) == HM_E_IO && msg_has("Is a directory", NULL));
    CHECK(lstat(ld, &st) == 0 && S_ISLNK(st.st_mode));

    /* Device nodes: refused before anything is created, and still there. */
    const char *devs[] = {"/dev/null", "/dev/full"};
    for (int i = 0; i < 2; i++) {
        struct stat before;
        if (stat(devs[i], &before) != 0) {
            printf("skipped %s: not present\n", devs[i]);
            continue;
        }
        CHECKF(hm_file_write_atomic(devs[i], "x", 1) == HM_E_IO && msg_has(devs[i], "not a regular file"), "%s: %s",
               devs[i], hm_errmsg());
        CHECK(stat(devs[i], &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == before.st_rdev);
        /* And through a link, which also stays. */
        const char *ln = at(i ? "to-full" : "to-null");
        CHECK(symlink(devs[i], ln) == 0 && hm_file_write_atomic(ln, "x", 1) == HM_E_IO);
        CHECK(lstat(ln, &st) == 0 && S_ISLNK(st.st_mode));
    }

    /* A FIFO: refused without blocking on it. */
    const char *fifo = at("fifo");
    CHECK(mkfifo(fifo, 0644) == 0 && hm_file_write_atomic(fifo, "x", 1) == HM_E_IO);
    CHECK(stat(fifo, &st) == 0 && S_ISFIFO(st.st_mode));
    CHECK(temp_files(dir) == 0);
}

/* A write failing midway (here: the file size limit, which holds for root
 * too) leaves the old content and no temp file. */
static void test_write_failure(void) {
    const char *p = at("keep.json");
    put(p, "previous good file");
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 4096;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    static char big[1 << 16];
    memset(big, 'x', sizeof big);
    int rc = hm_file_write_atomic(p, big, sizeof big);
    setrlimit(RLIMIT_FSIZE, &old);
    CHECKF(rc == HM_E_IO && msg_has("cannot write '", "keep.json': File too large"), "rc %d: %s", rc, hm_errmsg());
    CHECK(!strcmp(get(p), "previous good file"));
    CHECK(temp_files(dir) == 0);

    /* Read-only directory: only meaningful when permissions apply. */
    if (geteuid() != 0) {
        const char *ro = at("ro");
        mkdir(ro, 0755);
        char f[300];
        snprintf(f, sizeof f, "%s/x.json", ro);
        put(f, "old");
        chmod(ro, 0555);
        CHECK(hm_file_write_atomic(f, "new", 3) == HM_E_IO && msg_has("x.json'", "Permission denied"));
        CHECK(!strcmp(get(f), "old") && temp_files(ro) == 0);
        chmod(ro, 0755);
        /* A read-only file is not replaced behind the user's back. */
        chmod(f, 0444);
        CHECK(hm_file_write_atomic(f, "new", 3) == HM_E_IO && !strcmp(get(f), "old"));
        chmod(f, 0644);
    } else {
        printf("skipped read-only directory / file cases: running as root\n");
    }

    /* A full file system: a small tmpfs when this process may mount one. */
    const char *mnt = at("small");
    mkdir(mnt, 0755);
    if (mount("tmpfs", mnt, "tmpfs", 0, "size=64k") == 0) {
        char f[300];
        snprintf(f, sizeof f, "%s/out.json", mnt);
        put(f, "old");
        static char huge[1 << 18];
        CHECK(hm_file_write_atomic(f, huge, sizeof huge) == HM_E_IO && msg_has("out.json'", "No space left"));
        CHECK(!strcmp(get(f), "old") && temp_files(mnt) == 0);
        umount(mnt);
    } else {
        printf("skipped full-disk case: cannot mount a small tmpfs (%s); the file size limit above fails a write "
               "midway instead\n", strerror(errno));
    }
    rmdir(mnt);
}

/* Several outputs: all finished first, committed last; an abort leaves
 * the target as it was. */
static void test_two_phase(void) {
    const char *a = at("a.out"), *b = at("b.out");
    put(a, "A0");
    put(b, "B0");
    hm_outfile oa, ob;
    CHECK(hm_outfile_open(&oa, a) == HM_OK && hm_outfile_open(&ob, b) == HM_OK);
    CHECK(hm_outfile_write(&oa, "A1", 2) == HM_OK && hm_outfile_write(&ob, "B1", 2) == HM_OK);
    CHECK(hm_outfile_finish(&oa) == HM_OK && hm_outfile_finish(&ob) == HM_OK);
    CHECK(!strcmp(get(a), "A0") && !strcmp(get(b), "B0") && temp_files(dir) == 2);
    CHECK(hm_outfile_commit(&oa) == HM_OK && hm_outfile_commit(&ob) == HM_OK);
    CHECK(!strcmp(get(a), "A1") && !strcmp(get(b), "B1") && temp_files(dir) == 0);
    hm_outfile_abort(&oa); /* after commit: a no-op */

    CHECK(hm_outfile_open(&oa, a) == HM_OK && hm_outfile_write(&oa, "A2", 2) == HM_OK);
    hm_outfile_abort(&oa);
    hm_outfile_abort(&oa);
    CHECK(!strcmp(get(a), "A1") && temp_files(dir) == 0);
    CHECK(hm_outfile_write(&oa, "x", 1) == HM_E_ARG);
}

static void test_path_same(void) {
    const char *a = at("same.txt");
    put(a, "s");
    char dotted[300], viadir[300];
    snprintf(dotted, sizeof dotted, "%s/./same.txt", dir);
    snprintf(viadir, sizeof viadir, "%s/adir/../same.txt", dir);
    CHECK(hm_path_same(a, dotted) && hm_path_same(a, viadir));
    CHECK(symlink("same.txt", at("same-link")) == 0 && hm_path_same(a, at("same-link")));
    CHECK(link(a, at("same-hard")) == 0 && hm_path_same(a, at("same-hard")));
    CHECK(!hm_path_same(a, at("new.txt")));
    /* Not yet existing: the same directory entry. */
    char d2[300];
    snprintf(d2, sizeof d2, "%s/./future.txt", dir);
    CHECK(hm_path_same(at("future.txt"), d2) && !hm_path_same(at("future.txt"), at("future2.txt")));
    CHECK(symlink("future.txt", at("future-link")) == 0 && hm_path_same(at("future.txt"), at("future-link")));
    CHECK(!hm_path_same(NULL, a));
}

int main(void) {
    umask(022);
    snprintf(dir, sizeof dir, "/tmp/hm_fileio_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_plain();
    test_symlinks();
    test_non_regular();
    test_write_failure();
    test_two_phase();
    test_path_same();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
