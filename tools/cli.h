/* cli.h - the `hamer` command's subcommands and shared helpers. */
#ifndef HM_CLI_H
#define HM_CLI_H
#include "hamer.h"

/* Each subcommand gets the arguments after its name; returns the exit code. */
int hm_cli_regress(int argc, char **argv);
int hm_cli_crop(int argc, char **argv);
int hm_cli_bench(int argc, char **argv);
int hm_cli_run(int argc, char **argv);
int hm_cli_serve(int argc, char **argv);
int hm_cli_convert(int argc, char **argv);

/* Print "hamer: " + fmt (one %s for arg) + newline to stderr; returns code. */
int hm_cli_fail(int code, const char *fmt, const char *arg);
/* Parse a thread count 1..1024; 0 ok, -1 bad. */
int hm_cli_parse_threads(const char *s, int *out);
/* Monotonic seconds. */
double hm_cli_now(void);
/* hamer_model_load with the commands' common parameters (a progress bar on
 * a terminal); NULL with hamer_last_error() set on failure. */
hamer_model *hm_cli_load_model(const char *path, const char *mano, int precision);

#endif
