/* cli.h - the `hamer` command's subcommands and shared helpers. */
#ifndef HM_CLI_H
#define HM_CLI_H
#include <stddef.h>
#include "hamer.h"

/* Each subcommand gets the arguments after its name; returns the exit code. */
int hm_cli_regress(int argc, char **argv);
int hm_cli_crop(int argc, char **argv);
int hm_cli_bench(int argc, char **argv);
int hm_cli_run(int argc, char **argv);
int hm_cli_batch(int argc, char **argv);   /* cli_batch.c: a folder of photos */
int hm_cli_serve(int argc, char **argv);
int hm_cli_convert(int argc, char **argv);
int hm_cli_detect(int argc, char **argv);
/* Redis Streams: tools/worker/ */
int hm_cli_worker(int argc, char **argv);
int hm_cli_submit(int argc, char **argv);
int hm_cli_results(int argc, char **argv);
int hm_cli_video(int argc, char **argv);

/* Print "hamer: " + fmt (one %s for arg) + newline to stderr; returns code. */
int hm_cli_fail(int code, const char *fmt, const char *arg);
/* Parse a decimal integer in [lo, hi] (lo, hi within int); 0 ok, -1 bad. */
int hm_cli_parse_int(const char *s, long lo, long hi, int *out);
/* Parse a thread count 1..1024; 0 ok, -1 bad. */
int hm_cli_parse_threads(const char *s, int *out);
/* Parse a box scale factor in (0, HAMER_MAX_RESCALE]; 0 ok, -1 bad. */
int hm_cli_parse_rescale(const char *s, double *out);
/* "fp32" | "fast" -> HAMER_PRECISION_*; 0 ok, -1 bad. */
int hm_cli_parse_precision(const char *s, int *out);
/* Monotonic seconds. */
double hm_cli_now(void);
/* hamer_model_load with the commands' common parameters (a progress bar on
 * a terminal); NULL with hamer_last_error() set on failure. */
hamer_model *hm_cli_load_model(const char *path, const char *mano, int precision);
/* The detector options `detect` and `run` share. */
typedef struct {
    const char *dir;          /* --detector DIR */
    int lite;                 /* --lite */
    hamer_detect_params params; /* --max-hands, --min-score, --single-pass */
} hm_cli_detect_args;
void hm_cli_detect_defaults(hm_cli_detect_args *d);
/* If argv[*i] is a detector option, consume it (and its value) into d:
 * returns 0; a usage error is printed and returned as 2 (cmd names the
 * subcommand); -1 when argv[*i] is not a detector option. */
int hm_cli_detect_option(int argc, char **argv, int *i, hm_cli_detect_args *d, const char *cmd);
/* hamer_detector_load with those options; NULL with hamer_last_error(). */
hamer_detector *hm_cli_load_detector(const hm_cli_detect_args *d);
/* The largest boxes file a command reads (docs/limits.md: threat model and limits). */
#define HM_CLI_BOXES_FILE_MAX ((size_t)64 << 20)

/* The whole file at path (at most max bytes) as a NUL-terminated buffer,
 * malloc'd, its length in *len; NULL with a message in err. */
char *hm_cli_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);
/* Write data to path through core/fileio (a temp file beside the
 * symlink-followed target, fsync'd, renamed): the path holds the old
 * content or the complete new one; a directory or device at the path is
 * refused, never removed. 0, or -1 with a message naming the path and the
 * reason in err. */
int hm_cli_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* Before any work: refuse (exit status 2, message printed) an output that
 * is one of the inputs or another output (after symlinks; NULL entries
 * skipped), and (exit status 1) one that cannot be created at all (missing
 * directory, a directory or device node at the path). 0 when all are fine;
 * nothing is left on disk either way. */
int hm_cli_check_outputs(const char *cmd, const char *const *outs, int nout, const char *const *ins, int nin);

/* One output of a command, complete in memory. */
typedef struct {
    const char *path;
    const void *data;
    size_t len;
} hm_cli_output;
/* All of a command's outputs: every one written to its temp file and
 * finished first, then all renamed into place in order. 0, or 1 with a
 * message saying which paths were written and which were not (nothing is
 * written unless every temp file was complete). */
int hm_cli_write_outputs(const char *cmd, const hm_cli_output *outs, int n);

/* `hamer bench --image`: the photo-to-hands job on model, timed per stage
 * (cli_bench_photo.c); the exit status. */
int hm_cli_bench_photo(hamer_model *model, const char *image, const hm_cli_detect_args *det, int threads, int warmup,
                       int iters, int json);

/* `hamer bench --video IN`: hamer video's job on the first `frames`
 * frames, timed per frame and stage (cli_bench_video.c); the exit status. */
int hm_cli_bench_video(hamer_model *model, const char *video, const hm_cli_detect_args *det, int threads, int frames,
                       int json);

/* `hamer bench --folder DIR`: hamer batch against one hamer run per image
 * (cli_bench_folder.c); takes bench's arguments, returns the exit status. */
int hm_cli_bench_folder(int argc, char **argv);

/* Pearson correlation of two vectors (1 for two equal constants): the
 * fast-precision gate's measure, in bench and the server's self-check. */
double hm_cli_pcc(const float *a, const float *b, size_t n);

#endif
