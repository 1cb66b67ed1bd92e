/* test_regression - every fuzz finding (tests/regression/<target>-*) and
 * every fuzz seed (each file of fuzz/corpus/<target>) through the fuzz targets' own
 * entry points, in the ordinary build, so a fixed bug stays fixed without
 * clang or libFuzzer.
 *
 * The harnesses are linked in as objects, each with its
 * LLVMFuzzerTestOneInput renamed; their invariant checks trap, and in the
 * sanitizer build ASan/UBSan report as they would while fuzzing. On top of
 * that, an input must not grow the process's virtual size by more than
 * 1 GiB (libFuzzer's malloc limit catches such an allocation; a plain build
 * would not notice it, as untouched pages cost nothing until they do).
 *
 * The target is the file name's prefix before the first '-' (findings) or
 * the corpus directory (seeds); every corpus directory must name a target.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The fuzz targets' entry points, compiled from fuzz/fuzz_<name>.c with
 * LLVMFuzzerTestOneInput renamed (tests/CMakeLists.txt). */
#define FUZZ_TARGETS(X) \
    X(zip) X(pickle) X(ckpt) X(model) X(packed) X(npy) X(boxes) X(image) X(exif) X(tflite) X(tfjs) X(folder) \
    X(server) X(query) X(worker)
#define DECLARE(name) int fuzz_##name##_one(const uint8_t *data, size_t size);
FUZZ_TARGETS(DECLARE)
#undef DECLARE

static const struct {
    const char *name;
    int (*one)(const uint8_t *, size_t);
} targets[] = {
#define ENTRY(name) {#name, fuzz_##name##_one},
    FUZZ_TARGETS(ENTRY)
#undef ENTRY
};
#define NTARGETS (int)(sizeof targets / sizeof *targets)

static int nrun, nfail;

/* Peak virtual size in KiB (VmPeak), or -1. */
static long vm_peak_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmPeak:", 7)) kib = strtol(line + 7, NULL, 10);
    if (f) fclose(f);
    return kib;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    uint8_t *p = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? 2 * cap : 65536;
            uint8_t *q = realloc(p, cap);
            if (!q) break;
            p = q;
        }
        got = fread(p + n, 1, cap - n, f);
        n += got;
    } while (got);
    fclose(f);
    *len = n;
    return p;
}

/* Each input runs in a child process: a crash or sanitizer abort is
 * reported with the file's name and the others still run; the child starts
 * with its own peak virtual size (the kernel resets it at fork); and leak
 * checkers (LSan, valgrind) look at every input's exit. */
static void run_one(int t, const char *path) {
    size_t len = 0;
    uint8_t *data = slurp(path, &len);
    if (!data) {
        fprintf(stderr, "test_regression: cannot read %s\n", path);
        nfail++;
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        /* Exactly sized, so an overread past the input is caught by ASan. */
        uint8_t *exact = malloc(len ? len : 1);
        if (len) memcpy(exact, data, len);
        free(data);
        long before = vm_peak_kib();
        targets[t].one(exact, len);
        long after = vm_peak_kib();
        free(exact);
        if (before >= 0 && after - before > (1L << 20)) {
            fprintf(stderr, "test_regression: %s (%s): virtual size grew by %ld MiB (limit 1024)\n", path,
                    targets[t].name, (after - before) >> 10);
            exit(3);
        }
        exit(0);
    }
    free(data);
    int st = 0;
    nrun++;
    if (pid < 0 || waitpid(pid, &st, 0) != pid) {
        fprintf(stderr, "test_regression: %s: cannot run a child process\n", path);
        nfail++;
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "test_regression: %s (%s): killed by signal %d\n", path, targets[t].name, WTERMSIG(st));
        else if (WEXITSTATUS(st) != 3)
            fprintf(stderr, "test_regression: %s (%s): exit status %d\n", path, targets[t].name, WEXITSTATUS(st));
        nfail++;
    }
}

/* Every regular file in dir; target t, or by name prefix when t < 0. */
static void run_dir(const char *dir, int t) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int k = t;
        for (int i = 0; k < 0 && i < NTARGETS; i++) {
            size_t n = strlen(targets[i].name);
            if (!strncmp(e->d_name, targets[i].name, n) && e->d_name[n] == '-') k = i;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (k < 0) {
            fprintf(stderr, "test_regression: %s: name names no target (<target>-<what>)\n", path);
            nfail++;
            continue;
        }
        run_one(k, path);
    }
    closedir(d);
}

/* Every folder of fuzz/corpus must be a target replayed here: a target
 * added to fuzz/ but not to FUZZ_TARGETS fails instead of going unreplayed. */
static void check_corpus_dirs(const char *here) {
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/../../fuzz/corpus", here);
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "test_regression: cannot open %s\n", dir);
        nfail++;
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int known = 0;
        for (int i = 0; i < NTARGETS; i++) known |= !strcmp(e->d_name, targets[i].name);
        if (!known) {
            fprintf(stderr, "test_regression: fuzz/corpus/%s: no such target in FUZZ_TARGETS\n", e->d_name);
            nfail++;
        }
    }
    closedir(d);
}

int main(void) {
    const char *f = __FILE__, *slash = strrchr(f, '/');
    char here[4096], dir[4200];
    snprintf(here, sizeof here, "%.*s", slash ? (int)(slash - f) : 1, slash ? f : ".");
    check_corpus_dirs(here);
    for (int t = 0; t < NTARGETS; t++) {
        snprintf(dir, sizeof dir, "%s/../../fuzz/corpus/%s", here, targets[t].name);
        run_dir(dir, t);
    }
    int seeds = nrun;
    snprintf(dir, sizeof dir, "%s/../regression", here);
    run_dir(dir, -1);
    printf("test_regression: %d seeds, %d findings run, %d failed\n", seeds, nrun - seeds, nfail);
    return nfail != 0 || seeds == 0;
}
