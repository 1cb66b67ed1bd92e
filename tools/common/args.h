/* args.h - the commands' options as tables: one table gives an option's
 * parsing (kind, range, where its value goes), its error line and its
 * --help text, so the three cannot drift apart (llama.cpp's common/arg.cpp
 * is the model). A command lists its own table and the shared groups it
 * takes (the model's options, the detector's, the crop's, the camera's),
 * each group's fields inside a struct of its own embedded in the command's
 * arguments.
 *
 * Every bad invocation ends in one line on stderr and exit status 2:
 *   hamer: CMD: unknown option '--x' (see 'hamer CMD --help')
 *   hamer: CMD: option '--x' needs a value
 *   hamer: CMD: --x must be WANT, got 'V'
 *   hamer: CMD: WHY                         (an FN parser's own reason)
 *   hamer: CMD: --x N: WHY                  (the same for the N-th of a repeated option)
 *   hamer: CMD: more than N --x options     (a repeatable option, once too often)
 *   hamer: CMD: --x REASON                  (an option the command refuses)
 *   hamer: CMD: missing --x                 (a required option)
 *   hamer: CMD: give --x or --y, not both   (two exclusive options)
 * where WANT is what the table says the option takes ("an integer in
 * 1..1024", "fp32 or fast", ...). Checks between options beyond these
 * (one option needs another, ...) stay in the command, after the parse.
 */
#ifndef HM_TOOL_ARGS_H
#define HM_TOOL_ARGS_H

#include <stddef.h>
#include <stdio.h>
#include "hamer.h"
#include "common/common.h"

typedef enum {
    HM_OPT_FLAG,    /* no value: the int field is set to `set` (1 when 0; 0 with clear) */
    HM_OPT_STR,     /* const char *: the value as given */
    HM_OPT_INT,     /* int in [lo, hi], written as decimal digits (an optional sign) */
    HM_OPT_LLONG,   /* long long, as INT */
    HM_OPT_REAL,    /* double in [lo, hi]; open_lo / open_hi refuse lo / hi themselves */
    HM_OPT_FLOAT,   /* float, as REAL */
    HM_OPT_CHOICE,  /* int: values[i] (or i) for the value equal to choices[i] */
    HM_OPT_FN,      /* fn(value, field, ctx, why, n): 0 ok, -1 bad (the line says
                       `want`, or what fn wrote into why) */
    HM_OPT_REFUSED, /* a known option this command refuses, with `want` as the reason
                       ("hamer: CMD: --x REASON"); not in --help */
} hm_opt_kind;

typedef struct hm_opt {
    const char *name;            /* "--model"; NULL ends a table */
    const char *meta;            /* the value's name in --help ("CKPT"); NULL for flags */
    hm_opt_kind kind;
    size_t off;                  /* the field's offset in the group's struct */
    const char *help;            /* --help text; lines after the first start with '\n' */
    double lo, hi;               /* INT, LLONG, REAL, FLOAT */
    int open_lo, open_hi;        /* REAL, FLOAT: lo / hi themselves are refused */
    const char *const *choices;  /* CHOICE: NULL-terminated */
    const int *values;           /* CHOICE: the values stored (NULL: the index) */
    int (*fn)(const char *v, void *field, void *ctx, char *why, size_t n);  /* FN */
    const char *want;            /* the error line's WANT (computed for INT, REAL, CHOICE) */
    int set;                     /* FLAG */
    int clear;                   /* FLAG: store 0 (an option that turns a default off) */
    int as_bool;                 /* FLAG, CHOICE: the field is a bool, not an int */
    /* Repeatable (STR, FN): up to `repeat` values, the k-th stored in element
     * k of an array at off (elements of `elem` bytes), their count in the int
     * at count_off of the same struct. 0: once (a later value replaces). */
    int repeat;
    size_t elem, count_off;
    /* STR: the value is kept as given, but refused where the option of
     * the same name in the table `like` would refuse it (its line then):
     * a command that passes a value on checks it as the one that uses it. */
    const struct hm_opt *like;
} hm_opt;

/* A table and where its group's struct is inside the command's arguments;
 * an array of groups ends with opts NULL. */
typedef struct {
    const hm_opt *opts;
    size_t base;                 /* offsetof(command args, group struct) */
    const char *title;           /* --help heading, or NULL (the command's own) */
} hm_opt_group;

typedef struct {
    const char *cmd;             /* "run" */
    const char *synopsis;        /* "usage: hamer run --model M ..." (whole lines) */
    const char *about;           /* what the command does (printed before the options) */
    const char *epilog;          /* after the options (outputs, exit status), or NULL */
    const hm_opt_group *groups;
    const char *const *required; /* options that must be given, checked in this order
                                    ("hamer: CMD: missing --x"); NULL-terminated, or NULL */
    const char *const *exclusive;/* pairs of options not to give together: "--a", "--b",
                                    ..., NULL ("give --a or --b, not both"); or NULL */
    void *ctx;                   /* passed to FN parsers */
} hm_command;

/* Parse argv[0..argc) into args. 0 ok; -1 after printing --help (-h); 2
 * after printing the one usage line of a bad invocation. Positional
 * arguments are refused (no command takes any). At most 256 options a
 * command. */
int hm_args_parse(const hm_command *c, int argc, char **argv, void *args);
/* The command's --help text into f: its lines fit 80 columns when the
 * synopsis, about, epilog and help texts do (the name column is 22 wide,
 * the text at least two spaces after it). */
void hm_args_help(const hm_command *c, FILE *f);
/* For a command that still parses by hand: argv[*i] against c's groups.
 * -1 when it is none of theirs; 0 taken (its value too: *i advanced); 2
 * after printing the usage line of a bad value. Repeat counts and the
 * required / exclusive rules are the caller's. */
int hm_args_parse_one(const hm_command *c, int argc, char **argv, int *i, void *args);

/* ---- groups the commands share (args_groups.c) ---- */

typedef struct {
    const char *model, *mano, *device;
    int precision;               /* HAMER_PRECISION_* */
    int threads;                 /* 0: the online CPUs */
} hm_model_args;
extern const hm_opt hm_opts_model[];      /* --model --mano --precision --device */
extern const hm_opt hm_opts_threads[];    /* --threads (in hm_model_args) */
void hm_model_args_defaults(hm_model_args *m);

/* The detector on an hm_tool_detect_args (common.h; hm_tool_detect_defaults):
 * its models (--detector --lite; every command that detects), and its
 * options for photos (--max-hands --min-score --single-pass --body
 * --body-boxes --proposals; run, batch, detect, worker, bench). */
extern const hm_opt hm_opts_detector[];
extern const hm_opt hm_opts_detect[];
/* The crop on a hamer_predict_params: --rescale --crop-mode. */
extern const hm_opt hm_opts_crop[];
/* The photo's camera on a hamer_predict_params: --focal --fov. */
extern const hm_opt hm_opts_camera[];
/* --draw LIST on an unsigned: the HAMER_DRAW_* bits not drawn. */
extern const hm_opt hm_opts_draw[];
/* --box, repeatable up to HAMER_MAX_HANDS, on an hm_box_list. */
extern const hm_opt hm_opts_box[];

/* Tracking (video, live): the detector's options for tracked frames and
 * the tracker's. hm_track_args_defaults: the tracker's defaults, the
 * detector's with max_hands from the tracker and no tiles;
 * hm_track_args_finish after the parse: the detector's choices into the
 * tracker's parameters. */
typedef struct {
    hm_tool_detect_args det;     /* --detector --lite --max-hands --min-score --tiles --body --proposals */
    hamer_tracker_params tp;     /* --redetect-every ... and the smoothing */
} hm_track_args;
extern const hm_opt hm_opts_track[];   /* --max-hands --min-score --tiles --single-pass --body
                                          --proposals --redetect-every --cut-threshold
                                          --track-presence (--body-boxes refused) */
extern const hm_opt hm_opts_smooth[];  /* --smooth --min-cutoff --beta --d-cutoff */
void hm_track_args_defaults(hm_track_args *t);
void hm_track_args_finish(hm_track_args *t);

/* What --box fills. */
typedef struct {
    hamer_box box[HAMER_MAX_HANDS];
    int n;
} hm_box_list;

#endif
