/* cli_convert.c - `hamer convert`: a checkpoint in, a packed model file out.
 *
 *   hamer convert --model CKPT --output FILE [--precision fp32|fast] [--mano FILE.npz]
 *
 * The packed file holds the weights as this machine's kernels use them, so
 * `--model FILE` loads by mapping it instead of repacking the checkpoint.
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * FILE appears only once it is complete (temporary name, then rename).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "common/args.h"
#include "hamer.h"

typedef struct {
    hm_model_args m;             /* --model --mano --precision --device */
    const char *output;
} convert_args;

static const hm_opt convert_opts[] = {
    {.name = "--output", .meta = "FILE", .kind = HM_OPT_STR, .off = offsetof(convert_args, output),
     .help = "the packed model file to write"},
    {0},
};

static const hm_command convert_cmd = {
    .cmd = "convert",
    .synopsis = "usage: hamer convert --model CKPT --output FILE [--precision fp32|fast]\n"
                "                     [--device D] [--mano FILE.npz]\n",
    .about = "Writes a packed model file: the weights already in this machine's kernel\n"
             "layout and in the chosen precision, which every --model option accepts in\n"
             "place of the checkpoint and loads by mapping it (no repacking). --mano's\n"
             "buffers are included when the checkpoint has no mano.* entries.\n",
    .epilog = "The file is tied to what it was packed for: the backend (cpu), the kernel\n"
              "ISA (HAMER_ISA or this CPU's best), the precision and its low-precision\n"
              "variant. Loading it where any of these differ fails, saying to convert\n"
              "again; nothing is repacked silently. Every section is checksummed and\n"
              "checked at load.\n"
              "\n"
              "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
              "stderr saying what was wrong.\n",
    .groups = (const hm_opt_group[]){{hm_opts_model, offsetof(convert_args, m), NULL},
                                     {convert_opts, 0, NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--model", "--output", NULL},
};

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, convert_args *a) {
    memset(a, 0, sizeof *a);
    hm_model_args_defaults(&a->m);
    return hm_args_parse(&convert_cmd, argc, argv, a);
}

static int run(const convert_args *a) {
    const char *outs[1] = {a->output}, *ins[2] = {a->m.model, a->m.mano};
    int bad = hm_cli_check_outputs("convert", outs, 1, ins, 2);
    if (bad) return bad;
    double t0 = hm_now();
    /* The output is the packed file; a second copy in the cache would only
     * cost the disk space. */
    setenv("HAMER_NO_CACHE", "1", 1);
    hamer_model *hm = hm_tool_load_model(a->m.model, a->m.mano, a->m.precision, a->m.device);
    if (!hm) return hm_tool_fail(1, "%s", hamer_last_error());
    double t_load = hm_now() - t0;
    hamer_model_info info;
    hamer_model_get_info(hm, &info);
    t0 = hm_now();
    int rc = hamer_model_save_packed(hm, a->output);
    double t_save = hm_now() - t0;
    hamer_model_free(hm);
    if (rc) return hm_tool_fail(1, "%s", hamer_last_error());
    fprintf(stderr, "hamer: wrote %s (precision %s, kernels %s%s; loaded in %.1f s, written in %.1f s)\n", a->output,
            a->m.precision == HAMER_PRECISION_FAST ? "fast" : "fp32", info.isa, info.has_mano ? ", with MANO" : ", no MANO",
            t_load, t_save);
    return 0;
}

int hm_cli_convert(int argc, char **argv) {
    convert_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
