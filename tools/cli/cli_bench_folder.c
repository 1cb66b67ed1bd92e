/* cli_bench_folder.c - `hamer bench --folder DIR`: images per second of
 * `hamer batch` on a folder against the same images through one `hamer
 * run` process each (the model and detector load paid every time), and,
 * with --variants, the batch without prefetch and with 2 jobs (what the
 * prefetch thread and --jobs buy).
 *
 * Every figure is a whole process's wall time, load included, measured
 * from the spawn to the exit, so that both sides pay what a user pays.
 * The outputs go to a temporary folder, removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "cli/cli.h"

extern char **environ;

static const char *USAGE_BENCH_FOLDER =
    "usage: hamer bench --folder DIR --model M [--precision fp32|fast] [--threads N]\n"
    "                   [--variants] [--json] [detector options of hamer run]\n"
    "\n"
    "Runs `hamer batch` on every image of DIR (not its subfolders), then `hamer run`\n"
    "once per image, and reports images/s of each (process wall time, model load\n"
    "included) and the speed-up. --variants also times the batch with --prefetch 0\n"
    "and with --jobs 2.\n";

/* Run argv (the hamer binary) with stdout into out (may be NULL) and
 * stderr into the file errpath; wall seconds, or -1 if it did not exit 0
 * (its stderr is printed). */
static double run_child(char **argv, char **out, const char *errpath) {
    int pfd[2] = {-1, -1};
    if (out && pipe(pfd) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (out) {
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pfd[0]);
    } else {
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    }
    posix_spawn_file_actions_addopen(&fa, 2, errpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double t0 = hm_now();
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out) close(pfd[1]);
    if (rc != 0) {
        if (out) close(pfd[0]);
        fprintf(stderr, "hamer: bench: cannot start hamer: %s\n", strerror(rc));
        return -1;
    }
    if (out) {
        size_t n = 0, cap = 4096;
        char *buf = malloc(cap);
        ssize_t k;
        while (buf && (k = read(pfd[0], buf + n, cap - n - 1)) > 0)
            if ((n += (size_t)k) + 1 == cap) buf = realloc(buf, cap *= 2);
        close(pfd[0]);
        if (buf) buf[n] = 0;
        *out = buf;
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    double wall = hm_now() - t0;
    /* batch exits 3 when an image failed: still a timed run of the folder. */
    int ok = WIFEXITED(st) && (WEXITSTATUS(st) == 0 || WEXITSTATUS(st) == 3 || WEXITSTATUS(st) == 4);
    if (!ok) {
        fprintf(stderr, "hamer: bench: '%s %s' failed (status %d):\n", argv[0], argv[1], st);
        FILE *f = fopen(errpath, "r");
        char line[1024];
        while (f && fgets(line, sizeof line, f)) fputs(line, stderr);
        if (f) fclose(f);
        return -1;
    }
    return wall;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int hm_cli_bench_folder(int argc, char **argv) {
    const char *folder = NULL, *model = NULL, *precision = "fp32", *threads = NULL;
    int variants = 0, json = 0;
    /* Detector options are passed through to both commands unchanged. */
    char *pass[16];
    int npass = 0;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) return fputs(USAGE_BENCH_FOLDER, stdout), 0;
        if (!strcmp(o, "--variants")) { variants = 1; continue; }
        if (!strcmp(o, "--json")) { json = 1; continue; }
        if (!strcmp(o, "--lite") || !strcmp(o, "--single-pass")) {
            if (npass < 16) pass[npass++] = argv[i];
            continue;
        }
        if (i + 1 >= argc) return hm_tool_fail(2, "bench: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        if (!strcmp(o, "--folder")) folder = v;
        else if (!strcmp(o, "--model")) model = v;
        else if (!strcmp(o, "--precision")) precision = v;
        else if (!strcmp(o, "--threads")) threads = v;
        else if (!strcmp(o, "--detector") || !strcmp(o, "--max-hands") || !strcmp(o, "--min-score")) {
            if (npass < 15) pass[npass++] = argv[i - 1], pass[npass++] = argv[i];
        } else return hm_tool_fail(2, "bench: --folder: unknown option '%s'", o);
    }
    int prec;
    if (!folder || !model) return hm_tool_fail(2, "bench: --folder needs --model (a file `hamer run` can load)%s", "");
    if (hm_tool_parse_precision(precision, &prec)) return hm_tool_fail(2, "bench: --precision must be fp32 or fast, got '%s'", precision);

    /* The images: the folder's regular files, as `hamer batch` takes them. */
    DIR *d = opendir(folder);
    if (!d) {
        fprintf(stderr, "hamer: bench: cannot read '%s': %s\n", folder, strerror(errno));
        return 1;
    }
    char **imgs = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = NULL;
        struct stat st;
        if (asprintf(&p, "%s/%s", folder, e->d_name) < 0) break;
        if (stat(p, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(p);
            continue;
        }
        if (n == cap) imgs = realloc(imgs, (size_t)(cap = cap ? 2 * cap : 32) * sizeof *imgs);
        if (!imgs) break;
        imgs[n++] = p;
    }
    closedir(d);
    if (n == 0) {
        free(imgs);
        return hm_tool_fail(1, "bench: no image in '%s'", folder);
    }
    qsort(imgs, (size_t)n, sizeof *imgs, cmp_str);

    const char *tmpdir = getenv("TMPDIR");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/hamer-bench-folder-XXXXXX", tmpdir && *tmpdir ? tmpdir : "/tmp");
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "hamer: bench: cannot create a temporary folder: %s\n", strerror(errno));
        return 1;
    }
    char errpath[4200], outdir[4200], single[4200];
    snprintf(errpath, sizeof errpath, "%s/stderr.txt", tmpl);

    int rc = 1;
    double t_batch = -1, t_noprefetch = -1, t_jobs2 = -1, t_single = 0;
    int hands = 0;
    /* 1. the folder at once */
    const char *modes[3][2] = {{NULL, NULL}, {"--prefetch", "0"}, {"--jobs", "2"}};
    double *times[3] = {&t_batch, &t_noprefetch, &t_jobs2};
    for (int m = 0; m < (variants ? 3 : 1); m++) {
        snprintf(outdir, sizeof outdir, "%s/batch%d", tmpl, m);
        char *av[40];
        int k = 0;
        av[k++] = "hamer", av[k++] = "batch", av[k++] = "--model", av[k++] = (char *)model;
        av[k++] = "--input-dir", av[k++] = (char *)folder, av[k++] = "--out-dir", av[k++] = outdir;
        av[k++] = "--precision", av[k++] = (char *)precision, av[k++] = "--json";
        if (threads) av[k++] = "--threads", av[k++] = (char *)threads;
        if (modes[m][0]) av[k++] = (char *)modes[m][0], av[k++] = (char *)modes[m][1];
        for (int j = 0; j < npass; j++) av[k++] = pass[j];
        av[k] = NULL;
        char *out = NULL;
        *times[m] = run_child(av, &out, errpath);
        json_t *s = out ? json_loads(out, 0, NULL) : NULL;
        if (m == 0 && s) hands = (int)json_integer_value(json_object_get(s, "hands"));
        json_decref(s);
        free(out);
        if (*times[m] < 0) goto done;
    }
    /* 2. one process per image */
    snprintf(single, sizeof single, "%s/single.json", tmpl);
    for (int i = 0; i < n; i++) {
        char *av[40];
        int k = 0;
        av[k++] = "hamer", av[k++] = "run", av[k++] = "--model", av[k++] = (char *)model;
        av[k++] = "--image", av[k++] = imgs[i], av[k++] = "--output", av[k++] = single;
        av[k++] = "--precision", av[k++] = (char *)precision;
        if (threads) av[k++] = "--threads", av[k++] = (char *)threads;
        for (int j = 0; j < npass; j++) av[k++] = pass[j];
        av[k] = NULL;
        double t = run_child(av, NULL, errpath);
        /* A bad image fails `hamer run` (exit 1) but not the bench: it
         * costs the same load either way. */
        if (t < 0) {
            fprintf(stderr, "hamer: bench: (counted, as batch counts its failures)\n");
            t = 0;
        }
        t_single += t;
    }
    if (json) {
        json_t *o = json_pack("{s:s,s:s,s:s,s:i,s:i,s:f,s:f,s:f,s:f,s:f}", "folder", folder, "model", model,
                              "precision", precision, "images", n, "hands", hands, "batch_seconds", t_batch,
                              "batch_images_per_s", n / t_batch, "single_runs_seconds", t_single,
                              "single_runs_images_per_s", n / t_single, "speedup", t_single / t_batch);
        if (variants) {
            json_object_set_new(o, "batch_no_prefetch_images_per_s", json_real(n / t_noprefetch));
            json_object_set_new(o, "batch_jobs2_images_per_s", json_real(n / t_jobs2));
        }
        char *s = json_dumps(o, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
        json_decref(o);
        if (s) puts(s);
        free(s);
    } else {
        printf("hamer bench --folder %s: %d images, %d hands, model %s, precision %s\n", folder, n, hands, model,
               precision);
        printf("  hamer batch                %8.1f s  %6.3f images/s\n", t_batch, n / t_batch);
        if (variants) {
            printf("  hamer batch --prefetch 0   %8.1f s  %6.3f images/s\n", t_noprefetch, n / t_noprefetch);
            printf("  hamer batch --jobs 2       %8.1f s  %6.3f images/s\n", t_jobs2, n / t_jobs2);
        }
        printf("  %3d x hamer run            %8.1f s  %6.3f images/s\n", n, t_single, n / t_single);
        printf("  speed-up of batch          %8.2fx\n", t_single / t_batch);
    }
    rc = 0;
done:
    nftw(tmpl, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (int i = 0; i < n; i++) free(imgs[i]);
    free(imgs);
    return rc;
}
