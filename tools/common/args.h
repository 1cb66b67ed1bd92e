/* args.h - the commands' options as tables: one table gives an option's
 * parsing (kind, range, where its value goes), its error line and its
 * --help text, so the three cannot drift apart (llama.cpp's common/arg.cpp
 * is the model). A command lists its own table and the shared groups it
 * takes (the model's options, the detector's), each group's fields inside
 * a struct of its own embedded in the command's arguments.
 *
 * Every bad invocation ends in one line on stderr and exit status 2:
 *   hamer: CMD: unknown option '--x' (see 'hamer CMD --help')
 *   hamer: CMD: option '--x' needs a value
 *   hamer: CMD: --x must be WANT, got 'V'
 *   hamer: CMD: missing --x                 (a required option)
 * where WANT is what the table says the option takes ("an integer in
 * 1..1024", "fp32 or fast", ...).
 */
#ifndef HM_TOOL_ARGS_H
#define HM_TOOL_ARGS_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    HM_OPT_FLAG,    /* no value: the int field is set to `set` (1 when 0) */
    HM_OPT_STR,     /* const char *: the value as given */
    HM_OPT_INT,     /* int in [lo, hi] */
    HM_OPT_REAL,    /* double in [lo, hi], or (lo, hi] with open_lo */
    HM_OPT_FLOAT,   /* float, as REAL */
    HM_OPT_CHOICE,  /* int: values[i] (or i) for the value equal to choices[i] */
    HM_OPT_FN,      /* fn(value, field, ctx): 0 ok, -1 bad (the line says `want`) */
} hm_opt_kind;

typedef struct hm_opt {
    const char *name;            /* "--model"; NULL ends a table */
    const char *meta;            /* the value's name in --help ("CKPT"); NULL for flags */
    hm_opt_kind kind;
    size_t off;                  /* the field's offset in the group's struct */
    const char *help;            /* --help text; lines after the first start with '\n' */
    double lo, hi;               /* INT, REAL, FLOAT */
    int open_lo;                 /* REAL, FLOAT: lo itself is refused */
    const char *const *choices;  /* CHOICE: NULL-terminated */
    const int *values;           /* CHOICE: the values stored (NULL: the index) */
    int (*fn)(const char *v, void *field, void *ctx);  /* FN */
    const char *want;            /* the error line's WANT (computed for INT, REAL, CHOICE) */
    int set;                     /* FLAG */
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
    const char *const *required; /* STR options that must be given, checked in this order
                                    ("hamer: CMD: missing --x"); NULL-terminated, or NULL */
    void *ctx;                   /* passed to FN parsers */
} hm_command;

/* Parse argv[0..argc) into args. 0 ok; -1 after printing --help (-h); 2
 * after printing the one usage line of a bad invocation. Positional
 * arguments are refused (no command takes any). */
int hm_args_parse(const hm_command *c, int argc, char **argv, void *args);
/* The command's --help text into f. */
void hm_args_help(const hm_command *c, FILE *f);

/* Groups the commands share (args.c). */
typedef struct {
    const char *model, *mano, *device;
    int precision;               /* HAMER_PRECISION_* */
    int threads;                 /* 0: the online CPUs */
} hm_model_args;
extern const hm_opt hm_opts_model[];      /* --model --mano --precision --device */
extern const hm_opt hm_opts_threads[];    /* --threads (in hm_model_args) */
void hm_model_args_defaults(hm_model_args *m);

#endif
