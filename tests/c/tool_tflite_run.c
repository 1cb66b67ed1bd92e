/* tool_tflite_run - run a .tflite model with the C executor, for the tests
 * and for timing.
 *
 *   tool_tflite_run MODEL.tflite [--input IN.npy]... [--output OUT.npz]
 *                   [--threads N] [--bench N] [--profile [--top N]] [--info]
 *   tool_tflite_run MODEL.json --feed NODE --shape D0,D1,... --fetch NODE...
 *                   [the options above]
 *
 *   MODEL.json  a TF.js graph model (tfjs/tfjs.h), compiled from node
 *               --feed (given --shape) to the --fetch nodes (in order: the
 *               outputs), then run like a .tflite model
 *   --input     one per graph input, in order: float32 or float64 .npy with
 *               the input's element count (unfilled inputs are zero)
 *   --output    write output i as member "output_<i>" (float32, the graph's
 *               shape), the names tests/detect/tflite_ref.js uses
 *   --threads   thread-pool size (default 1)
 *   --bench N   after the first invoke, N timed invokes: prints
 *               "median_ms M min_ms m" (one line)
 *   --profile   with --bench: per op its fastest time over the runs (robust
 *               on a shared machine), summed per op kind, and the slowest
 *               ops (--top N of them, default 10) with their multiply-adds
 *   --info      print inputs, outputs, op count, arena size, the work
 *               estimates (all ops, the run ops, the largest op) and the
 *               bytes folded at load
 *
 * Errors: "tool_tflite_run: error CODE: MESSAGE" (the library's code and
 * one-line message) on stderr, exit 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/pool.h"
#include "core/util.h"
#include "tflite/tflite.h"
#include "tflite/tflite_impl.h"
#include "format/npy.h"
#include "tfjs/tfjs.h"

static int usage(const char *msg) {
    fprintf(stderr, "tool_tflite_run: %s\nusage: tool_tflite_run MODEL.tflite [--input IN.npy]... [--output OUT.npz] "
                    "[--threads N] [--bench N] [--profile [--top N]] [--info]\n", msg);
    return 2;
}

static int fail(void) {
    fprintf(stderr, "tool_tflite_run: error %d: %s\n", hm_errcode(), hm_errmsg());
    return 1;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_shape(const hm_tfl_shape *s) {
    printf("[");
    for (int d = 0; d < s->ndim; d++) printf(d ? ",%d" : "%d", s->dims[d]);
    printf("]");
}

/* Multiply-adds of one op (0 for data movement). */
static double op_macs(const hm_tfl_model *m, const hm_tfl_op *op) {
    double out = (double)m->t[op->out[0]].numel;
    switch (op->code) {
    case HM_TFL_OP_CONV_2D:
    case HM_TFL_OP_FULLY_CONNECTED: return out * op->W.K;
    case HM_TFL_OP_DEPTHWISE_CONV_2D: return out * op->kh * op->kw;
    default: return 0;
    }
}

static void profile(const hm_tfl_model *m, const double *sec, int runs, int top) {
    double total = 0, macs = 0;
    for (int r = 0; r < m->nrun; r++) total += sec[r], macs += op_macs(m, &m->ops[m->run[r]]);
    printf("sum of per-op minima %.3f ms, %.3f GMAC\n", 1e3 * total / runs, macs * 1e-9);
    for (int code = 0; code < 64; code++) {
        double t = 0, mc = 0;
        int n = 0;
        for (int r = 0; r < m->nrun; r++)
            if (m->ops[m->run[r]].code == code) t += sec[r], mc += op_macs(m, &m->ops[m->run[r]]), n++;
        if (n)
            printf("  %-18s %3d ops %8.3f ms %5.1f%%  %.3f GMAC%s", hm_tfl_op_name(code), n, 1e3 * t / runs,
                   100 * t / total, mc * 1e-9, mc > 0 ? "" : "\n");
        if (n && mc > 0) printf("  %.1f GMAC/s\n", mc * 1e-9 / (t / runs));
    }
    int *order = malloc((size_t)m->nrun * sizeof *order);
    if (!order) return;
    for (int r = 0; r < m->nrun; r++) order[r] = r;
    for (int a = 0; a < m->nrun; a++)
        for (int b = a + 1; b < m->nrun; b++)
            if (sec[order[b]] > sec[order[a]]) {
                int t = order[a];
                order[a] = order[b];
                order[b] = t;
            }
    for (int k = 0; k < top && k < m->nrun; k++) {
        const hm_tfl_op *op = &m->ops[m->run[order[k]]];
        const hm_tfl_tensor *y = &m->t[op->out[0]];
        printf("  op %3d %-18s %7.3f ms  out ", m->run[order[k]], hm_tfl_op_name(op->code), 1e3 * sec[order[k]] / runs);
        print_shape(&y->shape);
        if (op->code == HM_TFL_OP_CONV_2D || op->code == HM_TFL_OP_DEPTHWISE_CONV_2D) printf(" k%dx%d s%d", op->kh, op->kw, op->stride_h);
        printf("  %.1f MMAC\n", op_macs(m, op) * 1e-6);
    }
    free(order);
}

int main(int argc, char **argv) {
    const char *model = NULL, *output = NULL, *inputs[64], *feed = NULL, *fetch[64];
    int ninputs = 0, threads = 1, bench = 0, prof = 0, info = 0, top = 10, nfetch = 0;
    hm_tfl_shape feed_shape = {0, {0}};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--input") && has) {
            if (ninputs == 64) return usage("too many inputs");
            inputs[ninputs++] = argv[++i];
        } else if (!strcmp(a, "--output") && has) output = argv[++i];
        else if (!strcmp(a, "--threads") && has) threads = atoi(argv[++i]);
        else if (!strcmp(a, "--bench") && has) bench = atoi(argv[++i]);
        else if (!strcmp(a, "--profile")) prof = 1;
        else if (!strcmp(a, "--top") && has) top = atoi(argv[++i]);
        else if (!strcmp(a, "--info")) info = 1;
        else if (!strcmp(a, "--feed") && has) feed = argv[++i];
        else if (!strcmp(a, "--fetch") && has) {
            if (nfetch == 64) return usage("too many --fetch");
            fetch[nfetch++] = argv[++i];
        } else if (!strcmp(a, "--shape") && has) {
            char *p = argv[++i];
            while (*p && feed_shape.ndim < HM_TFL_MAX_DIMS) {
                feed_shape.dims[feed_shape.ndim++] = (int)strtol(p, &p, 10);
                if (*p == ',') p++;
            }
            if (*p) return usage("bad --shape");
        } else if (a[0] == '-') return usage("unknown option");
        else if (!model) model = a;
        else return usage("more than one model");
    }
    if (!model) return usage("no model");
    if (threads < 1 || threads > 256 || bench < 0) return usage("bad --threads or --bench");

    hm_tfl_model *m;
    size_t ml = strlen(model);
    if (ml > 5 && !strcmp(model + ml - 5, ".json")) {
        if (!feed || !nfetch || !feed_shape.ndim) return usage("a .json model needs --feed, --shape and --fetch");
        hm_tfjs_graph *g;
        if (hm_tfjs_load(model, &g)) return fail();
        int rc = hm_tfjs_compile(g, feed, &feed_shape, fetch, nfetch, &m);
        hm_tfjs_free(g);
        if (rc) return fail();
    } else if (hm_tfl_load(model, &m)) {
        return fail();
    }
    if (info) {
        for (int i = 0; i < hm_tfl_n_inputs(m); i++) {
            hm_tfl_shape s;
            hm_tfl_input_shape(m, i, &s);
            printf("input %d %s ", i, hm_tfl_input_name(m, i));
            print_shape(&s);
            printf("\n");
        }
        for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
            hm_tfl_shape s;
            hm_tfl_output_shape(m, i, &s);
            printf("output %d %s ", i, hm_tfl_output_name(m, i));
            print_shape(&s);
            printf("\n");
        }
        int64_t top = 0;
        for (int i = 0; i < m->nops; i++)
            if (m->ops[i].work > top) top = m->ops[i].work;
        printf("ops %d run %d arena_bytes %zu scratch_bytes %zu work %lld run_work %lld max_op_work %lld "
               "folded_bytes %lld isa %s\n", m->nops, m->nrun, m->arena * sizeof(float), m->scratch * sizeof(float),
               (long long)m->work, (long long)m->run_work, (long long)top, (long long)m->folded_bytes,
               hm_isa_name(m->isa));
    }
    int rc = 1;
    hm_tfl_state *s = NULL;
    hm_pool *pool = NULL;
    double *sec = NULL, *times = NULL;
    if (ninputs > hm_tfl_n_inputs(m)) {
        fprintf(stderr, "tool_tflite_run: %d inputs given, the model has %d\n", ninputs, hm_tfl_n_inputs(m));
        goto out;
    }
    if (hm_tfl_state_new(m, &s) || !(pool = hm_pool_create(threads))) {
        fail();
        goto out;
    }
    for (int i = 0; i < ninputs; i++) {
        hm_array a;
        if (hm_npy_load(inputs[i], &a)) {
            fail();
            goto out;
        }
        hm_tfl_shape sh;
        hm_tfl_input_shape(m, i, &sh);
        int64_t n = 1;
        for (int d = 0; d < sh.ndim; d++) n *= sh.dims[d];
        if (a.numel != n || (a.dtype != HM_DT_F32 && a.dtype != HM_DT_F64)) {
            fprintf(stderr, "tool_tflite_run: %s: need %lld float32/float64 values\n", inputs[i], (long long)n);
            hm_array_free(&a);
            goto out;
        }
        float *dst = hm_tfl_input(s, i);
        for (int64_t k = 0; k < n; k++) dst[k] = a.dtype == HM_DT_F32 ? ((float *)a.data)[k] : (float)((double *)a.data)[k];
        hm_array_free(&a);
    }
    if (hm_tfl_invoke(s, pool)) {
        fail();
        goto out;
    }
    if (output) {
        hm_npz_writer *w;
        if (hm_npz_write_begin(output, &w)) {
            fail();
            goto out;
        }
        for (int i = 0; i < hm_tfl_n_outputs(m); i++) {
            hm_tfl_shape sh;
            hm_tfl_output_shape(m, i, &sh);
            int64_t shape[HM_TFL_MAX_DIMS];
            for (int d = 0; d < sh.ndim; d++) shape[d] = sh.dims[d];
            char name[32];
            snprintf(name, sizeof name, "output_%d", i);
            if (hm_npz_write_add(w, name, HM_DT_F32, sh.ndim, shape, hm_tfl_output(s, i))) {
                fail();
                hm_npz_write_abort(w);
                goto out;
            }
        }
        if (hm_npz_write_finish(w)) {
            fail();
            goto out;
        }
    }
    if (bench) {
        sec = calloc(2 * ((size_t)m->nrun + 1), sizeof *sec);
        times = calloc((size_t)bench, sizeof *times);
        if (!sec || !times) goto out;
        double *one = sec + m->nrun + 1;
        for (int r = 0; r < m->nrun; r++) sec[r] = 1e30;
        for (int k = 0; k < bench; k++) {
            memset(one, 0, ((size_t)m->nrun + 1) * sizeof *one);
            double t0 = now_s();
            if (hm_tfl_invoke_timed(s, pool, prof ? one : NULL)) {
                fail();
                goto out;
            }
            times[k] = now_s() - t0;
            /* Per op the fastest run: on a shared machine that is the one
             * least disturbed by other processes. */
            for (int r = 0; r < m->nrun; r++)
                if (one[r] < sec[r]) sec[r] = one[r];
        }
        qsort(times, (size_t)bench, sizeof *times, cmp_double);
        printf("median_ms %.3f min_ms %.3f threads %d isa %s\n", 1e3 * times[bench / 2], 1e3 * times[0], threads,
               hm_isa_name(m->isa));
        if (prof) profile(m, sec, 1, top);
    }
    rc = 0;
out:
    free(sec);
    free(times);
    hm_pool_destroy(pool);
    hm_tfl_state_free(s);
    hm_tfl_free(m);
    return rc;
}
