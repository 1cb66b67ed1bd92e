/* cli_convert.c - `hamer convert`: a checkpoint in, a packed model file out.
 *
 *   hamer convert --model CKPT --output FILE [--precision fp32|fast] [--mano FILE.npz]
 *
 * The packed file holds the weights as this machine's kernels use them, so
 * `--model FILE` loads by mapping it instead of repacking the checkpoint.
 * Errors: one line on stderr ("hamer: ..."), exit 1 (2 for usage errors);
 * FILE appears only once it is complete (temporary name, then rename).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli/cli.h"
#include "hamer.h"

static const char *USAGE_CONVERT =
    "usage: hamer convert --model CKPT --output FILE [--precision fp32|fast] [--device D]\n"
    "                     [--mano FILE.npz]\n"
    "\n"
    "Writes a packed model file: the weights already in this machine's kernel\n"
    "layout and in the chosen precision, which every --model option accepts in\n"
    "place of the checkpoint and loads by mapping it (no repacking).\n"
    "\n"
    "  --model CKPT      the released hamer.ckpt (or a packed model file)\n"
    "  --output FILE     the packed model file to write\n"
    "  --device D        where the model runs: cpu (default) or a backend this build\n"
    "                    has, as NAME or NAME:INDEX ('hamer --version' lists them)\n"
    "  --precision P     fp32 (default) or fast; the file loads only in this\n"
    "                    precision\n"
    "  --mano FILE.npz   MANO buffers to include when the checkpoint has no\n"
    "                    mano.* entries\n"
    "\n"
    "The file is tied to what it was packed for: the kernel ISA (HAMER_ISA or\n"
    "this CPU's best), the precision and its low-precision variant. Loading it\n"
    "where any of these differ fails, saying to convert again; nothing is\n"
    "repacked silently. Every section is checksummed and checked at load.\n"
    "\n"
    "Exit status 0 on success; otherwise 1 (2 for bad usage) with one line on\n"
    "stderr saying what was wrong.\n";

typedef struct {
    const char *model, *output, *mano, *device;
    int precision;
} convert_args;

/* Arguments -> a; 0, -1 after --help, or the exit status of a usage error. */
static int parse(int argc, char **argv, convert_args *a) {
    memset(a, 0, sizeof *a);
    a->precision = HAMER_PRECISION_FP32;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_CONVERT, stdout);
            return -1;
        }
        const char **dst = NULL;
        if (!strcmp(o, "--model")) dst = &a->model;
        else if (!strcmp(o, "--output")) dst = &a->output;
        else if (!strcmp(o, "--mano")) dst = &a->mano;
        else if (!strcmp(o, "--device")) dst = &a->device;
        else if (strcmp(o, "--precision")) return hm_tool_fail(2, "convert: unknown option '%s' (see 'hamer convert --help')", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "convert: option '%s' needs a value", o);
        const char *v = argv[++i];
        if (dst) *dst = v;
        else if (hm_tool_parse_precision(v, &a->precision))
            return hm_tool_fail(2, "convert: --precision must be fp32 or fast, got '%s'", v);
    }
    if (!a->model) return hm_tool_fail(2, "convert: missing --model%s", "");
    if (!a->output) return hm_tool_fail(2, "convert: missing --output%s", "");
    return 0;
}

static int run(const convert_args *a) {
    const char *outs[1] = {a->output}, *ins[2] = {a->model, a->mano};
    int bad = hm_cli_check_outputs("convert", outs, 1, ins, 2);
    if (bad) return bad;
    double t0 = hm_now();
    /* The output is the packed file; a second copy in the cache would only
     * cost the disk space. */
    setenv("HAMER_NO_CACHE", "1", 1);
    hamer_model *hm = hm_tool_load_model(a->model, a->mano, a->precision, a->device);
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
            a->precision == HAMER_PRECISION_FAST ? "fast" : "fp32", info.isa, info.has_mano ? ", with MANO" : ", no MANO",
            t_load, t_save);
    return 0;
}

int hm_cli_convert(int argc, char **argv) {
    convert_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    return run(&a);
}
