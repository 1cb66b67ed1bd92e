/* cli.h - the `hamer` subcommands of tools/cli and the helpers only they share
 * (what serve and worker share too is in tools/common/common.h). */
#ifndef HM_CLI_H
#define HM_CLI_H
#include <stddef.h>
#include "common/common.h"
#include "core/util.h" /* hm_now */
#include "hamer.h"

/* Each subcommand gets the arguments after its name; returns the exit code. */
int hm_cli_regress(int argc, char **argv);
int hm_cli_crop(int argc, char **argv);
int hm_cli_bench(int argc, char **argv);
int hm_cli_run(int argc, char **argv);
int hm_cli_batch(int argc, char **argv);   /* cli_batch.c: a folder of photos */
int hm_cli_convert(int argc, char **argv);
int hm_cli_detect(int argc, char **argv);
int hm_cli_video(int argc, char **argv);
int hm_cli_live(int argc, char **argv);    /* cli_live.c: a camera or stream, hands at its pace */

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
int hm_cli_bench_photo(hamer_model *model, const char *image, const hm_tool_detect_args *det, int threads, int warmup,
                       int iters, int json);

/* `hamer bench --video IN`: hamer video's job on the first `frames`
 * frames, timed per frame and stage (cli_bench_video.c); the exit status. */
int hm_cli_bench_video(hamer_model *model, const char *video, const hm_tool_detect_args *det, int threads, int frames,
                       int json);

/* `hamer bench --folder DIR`: hamer batch against one hamer run per image
 * (cli_bench_folder.c); takes bench's arguments, returns the exit status. */
int hm_cli_bench_folder(int argc, char **argv);

#endif
