/* common.h - what the `hamer` command's three families share (tools/cli,
 * tools/serve, tools/worker): messages and logging, argument parsing, the
 * model and detector loaders with the common options, file reading. It
 * sits below all three (scripts/depgraph.py) and knows none of them. */
#ifndef HM_TOOL_COMMON_H
#define HM_TOOL_COMMON_H
#include <stdarg.h>
#include <stddef.h>
#include "hamer.h"

/* ---- messages ---- */

/* Print "hamer: " + fmt (one %s for arg) + newline to stderr; returns code. */
int hm_tool_fail(int code, const char *fmt, const char *arg);
/* One "<who>: ..." line on stderr (one fprintf: stdio's lock keeps lines
 * whole across threads; longer than 1 KB is cut). */
void hm_tool_vlog(const char *who, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* The library's log callback (hamer_log_set): "hamer: msg" lines, progress
 * redrawn in place and only on a terminal. */
void hm_tool_library_log(void *user, hamer_log_level level, const char *msg);

/* ---- arguments ---- */

/* Parse a decimal integer in [lo, hi] (lo, hi within int); 0 ok, -1 bad. */
int hm_tool_parse_int(const char *s, long lo, long hi, int *out);
/* Parse a thread count 1..1024; 0 ok, -1 bad. */
int hm_tool_parse_threads(const char *s, int *out);
/* A thread count option's value: 0 (the default) means the online CPUs. */
int hm_tool_threads(int requested);
/* Parse a box scale factor in (0, HAMER_MAX_RESCALE]; 0 ok, -1 bad. */
int hm_tool_parse_rescale(const char *s, double *out);
/* "fp32" | "fast" -> HAMER_PRECISION_*; 0 ok, -1 bad. */
int hm_tool_parse_precision(const char *s, int *out);
/* --draw LIST (the server's draw=): what a picture shows, a comma-separated
 * list of mesh, boxes, keypoints, labels, or "all" or "none" -> the
 * HAMER_DRAW_* bits not to draw; 0 ok, -1 bad (an unknown or empty name). */
int hm_tool_parse_draw(const char *s, unsigned *hide);
/* The worker's job fields focal, fov (the commands' --focal, --fov are
 * the table hm_opts_camera, args_groups.c): "focal" PX in (0,
 * HAMER_MAX_FOCAL] or "fov" DEG in (0, 180) into pp; 0 ok, -1 a bad value
 * or name. */
int hm_tool_camera_value(const char *name, const char *value, hamer_predict_params *pp);

/* ---- the model and the detector ---- */

/* hamer_model_load with the commands' common parameters (a progress bar on
 * a terminal); NULL with hamer_last_error() set on failure. */
/* device: --device (NULL: the CPU). */
hamer_model *hm_tool_load_model(const char *path, const char *mano, int precision, const char *device);
/* The commands that compute meshes need MANO's buffers: 0 when model has
 * them, else 1 after printing the one line that says what is missing and
 * where to get it (path: the model file named in it). */
int hm_tool_require_mano(const hamer_model *model, const char *path);
/* The same advice without the "hamer: " prefix and path (the server's and
 * the worker's log lines). */
extern const char hm_tool_mano_advice[];
/* "auto" | "on" | "off" -> HAMER_BODY_* (--body, the server's body=, the
 * worker's "body"); 0 ok, -1 bad. */
int hm_tool_parse_body(const char *s, hamer_body_mode *out);
const char *hm_tool_body_name(hamer_body_mode m);
/* A field of /proc/self/status in kB ("VmHWM", "VmRSS") as MB, or -1
 * where it cannot be read; hm_tool_peak_rss_mb: VmHWM, 0 if unknown (the
 * summaries' peak_rss_mb). */
double hm_tool_proc_status_mb(const char *field);
double hm_tool_peak_rss_mb(void);
/* "auto" | "on" | "off" -> HAMER_PROPOSALS_* (the server's proposals=);
 * 0 ok, -1 bad. */
int hm_tool_parse_proposals(const char *s, hamer_proposals_mode *out);
/* The detector options `detect`, `run`, `bench` and `worker` share. */
typedef struct {
    const char *dir;            /* --detector DIR */
    int lite;                   /* --lite */
    hamer_detect_params params; /* --max-hands, --min-score, --single-pass, --body auto|on|off,
                                   --body-boxes on|off, --proposals auto|on|off */
} hm_tool_detect_args;
void hm_tool_detect_defaults(hm_tool_detect_args *d);
/* For a command that parses by hand: if argv[*i] is one of the detector
 * options (the table hm_opts_detect, args_groups.c), take it (and its
 * value) into d: returns 0; a usage error is printed and returned as 2
 * (cmd names the subcommand); -1 when argv[*i] is not a detector option. */
int hm_tool_detect_option(int argc, char **argv, int *i, hm_tool_detect_args *d, const char *cmd);
/* hamer_detector_load with those options; NULL with hamer_last_error(). */
hamer_detector *hm_tool_load_detector(const hm_tool_detect_args *d);
/* Pearson correlation of two vectors (1 for two equal constants): the
 * fast-precision gate's measure, in bench and the server's self-check. */
double hm_tool_pcc(const float *a, const float *b, size_t n);

/* ---- files ---- */

/* The largest boxes file a command reads (docs/limits.md: threat model and limits). */
#define HM_TOOL_BOXES_FILE_MAX ((size_t)64 << 20)
/* The whole file at path (at most max bytes) as a NUL-terminated buffer,
 * malloc'd, its length in *len; NULL with a message in err. Only a regular
 * file is read: anything else (a FIFO, a device) is refused at once,
 * without waiting for a writer. */
char *hm_tool_read_file(const char *path, size_t max, size_t *len, char *err, size_t errlen);
/* The same for a file already open (fd, closed here; opened with
 * O_NONBLOCK so that a FIFO could not block the open); path names it in
 * messages. */
char *hm_tool_read_fd(int fd, const char *path, size_t max, size_t *len, char *err, size_t errlen);

#endif
