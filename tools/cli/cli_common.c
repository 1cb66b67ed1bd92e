/* cli_common.c - the subcommands' outputs (tools/common has what serve and worker share too). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "cli/cli.h"
#include "core/fileio.h"
#include "core/util.h"

int hm_cli_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (hm_file_write_atomic(path, data, len) == HM_OK) return 0;
    snprintf(err, errlen, "%s", hm_errmsg());
    return -1;
}

int hm_cli_check_outputs(const char *cmd, const char *const *outs, int nout, const char *const *ins, int nin) {
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        for (int j = 0; j < nin; j++)
            if (ins[j] && hm_path_same(outs[i], ins[j])) {
                fprintf(stderr, "hamer: %s: output '%s' is the input '%s': refusing to overwrite an input\n", cmd,
                        outs[i], ins[j]);
                return 2;
            }
        for (int j = 0; j < i; j++)
            if (outs[j] && hm_path_same(outs[i], outs[j])) {
                fprintf(stderr, "hamer: %s: outputs '%s' and '%s' are the same file: one would be lost\n", cmd,
                        outs[j], outs[i]);
                return 2;
            }
    }
    /* Opening the temp file and dropping it at once finds an output that
     * cannot be written (missing directory, a directory or device at the
     * path) before the model is loaded, and leaves nothing behind. */
    for (int i = 0; i < nout; i++) {
        if (!outs[i]) continue;
        hm_outfile o;
        if (hm_outfile_open(&o, outs[i])) {
            fprintf(stderr, "hamer: %s: %s (nothing written)\n", cmd, hm_errmsg());
            return 1;
        }
        hm_outfile_abort(&o);
    }
    return 0;
}

int hm_cli_write_outputs(const char *cmd, const hm_cli_output *outs, int n) {
    hm_outfile *o = calloc(n > 0 ? (size_t)n : 1, sizeof *o);
    if (!o) {
        fprintf(stderr, "hamer: %s: out of memory (nothing written)\n", cmd);
        return 1;
    }
    int i, rc = 0;
    for (i = 0; i < n && !rc; i++) {
        rc = hm_outfile_open(&o[i], outs[i].path);
        if (!rc) rc = hm_outfile_write(&o[i], outs[i].data, outs[i].len);
        if (!rc) rc = hm_outfile_finish(&o[i]);
    }
    if (rc) {
        fprintf(stderr, "hamer: %s: %s (nothing written)\n", cmd, hm_errmsg());
        for (i = 0; i < n; i++) hm_outfile_abort(&o[i]);
        free(o);
        return 1;
    }
    /* Everything is complete on disk; only renames are left, which fail
     * only if the directory changed under us. Then say what is in place. */
    for (i = 0; i < n && !rc; i++) rc = hm_outfile_commit(&o[i]);
    if (rc) {
        fprintf(stderr, "hamer: %s: %s; ", cmd, hm_errmsg());
        int failed = i - 1;
        if (failed == 0) fputs("nothing written", stderr);
        else {
            fputs("written:", stderr);
            for (int k = 0; k < failed; k++) fprintf(stderr, " %s", outs[k].path);
        }
        fputs("; not written:", stderr);
        for (int k = failed; k < n; k++) fprintf(stderr, " %s", outs[k].path);
        fputc('\n', stderr);
        for (int k = failed + 1; k < n; k++) hm_outfile_abort(&o[k]);
    }
    free(o);
    return rc ? 1 : 0;
}
