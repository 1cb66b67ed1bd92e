/* cli_submit.c - `hamer submit`: one job onto the jobs stream (an XADD any
 * Redis client can do as well; this is the reference client). Prints the
 * job id: the one given, else the entry ID Redis assigned.
 *
 * Exit status: 0 submitted; 1 failed (file, Redis); 2 bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/common.h"
#include "worker/worker.h"

static const char *USAGE_SUBMIT =
    "usage: hamer submit --redis URL --image IMG [--box x1,y1,x2,y2[:left|:right] ... | --boxes FILE.json]\n"
    "                    [--id ID] [--vertices] [--rescale S] [--crop-mode warp|pad] [--stream hamer:jobs]\n"
    "                    [--focal PX | --fov DEG]\n"
    "\n"
    "Adds one job to the jobs stream for 'hamer worker': XADD <stream> * [id ID]\n"
    "image <bytes> [boxes JSON] [vertices 1] [rescale S] [crop_mode M] [focal PX]\n"
    "[fov DEG]. Without\n"
    "boxes the worker's detector finds the hands. Prints the job id (--id, else\n"
    "the entry ID); its result appears on the results stream ('hamer results').\n"
    "\n"
    "  --redis URL   redis://[[user]:password@]HOST[:PORT][/DB] (default: $HAMER_REDIS_URL)\n"
    "  --id ID       1..200 printable characters without spaces; a job id already\n"
    "                answered (within the workers' --result-ttl-s) is not computed again\n";

typedef struct {
    const char *url, *image, *boxes_file, *id, *stream, *rescale, *crop_mode, *focal, *fov;
    hamer_box boxes[HAMER_MAX_HANDS];
    int nbox, vertices;
} submit_args;

/* The --box list as the boxes document the worker reads (malloc'd by jansson). */
static char *boxes_json(const submit_args *a) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->nbox; i++) {
        const float *b = a->boxes[i].bbox;
        json_t *o = json_pack("{s:[f,f,f,f],s:b}", "bbox", (double)b[0], (double)b[1], (double)b[2], (double)b[3],
                              "is_right", a->boxes[i].is_right);
        if (!o || json_array_append_new(arr, o)) {
            json_decref(arr);
            return NULL;
        }
    }
    char *s = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    return s;
}

/* Arguments -> a; 0, -1 (help printed) or 2 (usage error reported). */
static int parse(int argc, char **argv, submit_args *a) {
    memset(a, 0, sizeof *a);
    a->stream = "hamer:jobs";
    const char *url = NULL;
    for (int i = 0; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            fputs(USAGE_SUBMIT, stdout);
            return -1;
        }
        if (!strcmp(o, "--vertices")) {
            a->vertices = 1;
            continue;
        }
        if (o[0] != '-' || o[1] != '-') return hm_tool_fail(2, "submit: unexpected argument '%s'", o);
        if (i + 1 >= argc) return hm_tool_fail(2, "submit: option '%s' needs a value (or is unknown)", o);
        const char *v = argv[++i];
        double rescale;
        if (!strcmp(o, "--redis")) url = v;
        else if (!strcmp(o, "--image")) a->image = v;
        else if (!strcmp(o, "--boxes")) a->boxes_file = v;
        else if (!strcmp(o, "--stream")) a->stream = v;
        else if (!strcmp(o, "--id")) {
            size_t k = strlen(v), ok = k >= 1 && k <= HM_WK_ID_MAX;
            for (size_t j = 0; j < k; j++) ok &= (unsigned char)v[j] > 0x20 && (unsigned char)v[j] < 0x7f;
            if (!ok) return hm_tool_fail(2, "submit: --id must be 1..200 printable characters without spaces, got '%s'", v);
            a->id = v;
        } else if (!strcmp(o, "--box")) {
            if (a->nbox == HAMER_MAX_HANDS) return hm_tool_fail(2, "submit: more than 64 --box options%s", "");
            if (hamer_box_parse(v, &a->boxes[a->nbox])) return hm_tool_fail(2, "submit: %s", hamer_last_error());
            a->nbox++;
        } else if (!strcmp(o, "--rescale")) {
            if (hm_tool_parse_rescale(v, &rescale)) return hm_tool_fail(2, "submit: --rescale must be a number in (0, 16], got '%s'", v);
            a->rescale = v;
        } else if (!strcmp(o, "--focal") || !strcmp(o, "--fov")) {
            hamer_predict_params pp = hamer_predict_default_params();
            if (hm_tool_camera_option(o + 2, v, &pp, "submit")) return 2;
            *(o[4] == 'c' ? &a->focal : &a->fov) = v;
        } else if (!strcmp(o, "--crop-mode")) {
            if (strcmp(v, "warp") && strcmp(v, "pad")) return hm_tool_fail(2, "submit: --crop-mode must be warp or pad, got '%s'", v);
            a->crop_mode = v;
        } else {
            return hm_tool_fail(2, "submit: unknown option '%s' (see 'hamer submit --help')", o);
        }
    }
    if (!(a->url = hm_wk_url_arg(url))) return hm_tool_fail(2, "submit: --redis URL (or $HAMER_REDIS_URL) is required%s", "");
    if (!a->image) return hm_tool_fail(2, "submit: --image is required%s", "");
    if (a->nbox && a->boxes_file) return hm_tool_fail(2, "submit: give hand boxes with --box or --boxes, not both%s", "");
    return 0;
}

/* `hamer submit ARGS`: one XADD; the exit status. */
int hm_submit_main(int argc, char **argv) {
    static submit_args a;   /* 64 boxes: off the stack */
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? 0 : rc;
    char err[700];
    hm_wk_redis r;
    memset(&r, 0, sizeof r);
    r.timeout_s = 30;
    if (hm_wk_url_parse(a.url, &r.url, err, sizeof err)) return hm_tool_fail(2, "submit: %s", err);
    size_t ilen = 0, blen = 0;
    /* Redis takes at most 512 MB per value; the workers' limit is smaller. */
    char *image = hm_tool_read_file(a.image, 512u << 20, &ilen, err, sizeof err), *boxes = NULL;
    if (!image) return hm_tool_fail(1, "%s", err);
    if (a.boxes_file) {
        boxes = hm_tool_read_file(a.boxes_file, HM_TOOL_BOXES_FILE_MAX, &blen, err, sizeof err);
        hamer_box tmp[HAMER_MAX_HANDS];
        if (!boxes) rc = hm_tool_fail(1, "%s", err);
        else if (hamer_boxes_parse(boxes, blen, tmp, HAMER_MAX_HANDS) < 0) {
            /* Refused here already: the worker would answer with this error. */
            fprintf(stderr, "hamer: %s: %s\n", a.boxes_file, hamer_last_error());
            rc = 1;
        }
    } else if (a.nbox) {
        char *j = boxes_json(&a);
        boxes = j ? strdup(j) : NULL;
        free(j);
        if (!boxes) rc = hm_tool_fail(1, "out of memory%s", "");
        else blen = strlen(boxes);
    }
    redisReply *rep = NULL;
    if (!rc) {
        hm_wk_cmd c;
        hm_wk_cmd_init(&c);
        hm_wk_arg(&c, "XADD");
        hm_wk_arg(&c, a.stream);
        hm_wk_arg(&c, "*");
        if (a.id) hm_wk_arg(&c, "id"), hm_wk_arg(&c, a.id);
        hm_wk_arg(&c, "image");
        hm_wk_argn(&c, image, ilen);
        if (boxes) hm_wk_arg(&c, "boxes"), hm_wk_argn(&c, boxes, blen);
        if (a.vertices) hm_wk_arg(&c, "vertices"), hm_wk_arg(&c, "1");
        if (a.rescale) hm_wk_arg(&c, "rescale"), hm_wk_arg(&c, a.rescale);
        if (a.crop_mode) hm_wk_arg(&c, "crop_mode"), hm_wk_arg(&c, a.crop_mode);
        if (a.focal) hm_wk_arg(&c, "focal"), hm_wk_arg(&c, a.focal);
        if (a.fov) hm_wk_arg(&c, "fov"), hm_wk_arg(&c, a.fov);
        int e = hm_wk_redis_connect(&r);
        if (!e) e = hm_wk_call(&r, &c, &rep, "XADD");
        if (e) rc = hm_tool_fail(1, "%s", r.err);
        else if (rep->type != REDIS_REPLY_STRING) rc = hm_tool_fail(1, "XADD: unexpected reply%s", "");
        else printf("%s\n", a.id ? a.id : rep->str);
    }
    if (rep) freeReplyObject(rep);
    hm_wk_redis_close(&r);
    free(boxes);
    free(image);
    return rc;
}
