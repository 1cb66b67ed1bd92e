/* cli_submit.c - `hamer submit`: one job onto the jobs stream (an XADD any
 * Redis client can do as well; this is the reference client). Prints the
 * job id: the one given, else the entry ID Redis assigned.
 *
 * Exit status: 0 submitted; 1 failed (file, Redis); 2 bad usage.
 */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/args.h"
#include "common/common.h"
#include "worker/worker.h"

typedef struct {
    const char *url, *url_given, *image, *boxes_file, *id, *stream, *rescale, *crop_mode, *focal, *fov;
    hm_box_list boxes;      /* --box */
    int vertices;
} submit_args;

/* --id: 1..HM_WK_ID_MAX printable characters without spaces. */
static int id_option(const char *v, void *field, void *ctx, char *why, size_t n) {
    (void)ctx, (void)why, (void)n;
    size_t k = strlen(v), ok = k >= 1 && k <= HM_WK_ID_MAX;
    for (size_t j = 0; j < k; j++) ok &= (unsigned char)v[j] > 0x20 && (unsigned char)v[j] < 0x7f;
    if (!ok) return -1;
    *(const char **)field = v;
    return 0;
}

#define S(field) (offsetof(submit_args, field))

/* The job's fields go to the worker as given, checked here as the
 * worker's own options would check them (.like). */
static const hm_opt submit_in[] = {
    {.name = "--redis", .meta = "URL", .kind = HM_OPT_STR, .off = S(url_given),
     .help = "redis://[[user]:password@]HOST[:PORT][/DB] (default:\n$HAMER_REDIS_URL)"},
    {.name = "--image", .meta = "IMG", .kind = HM_OPT_STR, .off = S(image),
     .help = "the photo (its bytes are the job's image field)"},
    {0},
};

static const hm_opt submit_opts[] = {
    {.name = "--boxes", .meta = "FILE.json", .kind = HM_OPT_STR, .off = S(boxes_file),
     .help = "the hands' boxes, any document 'hamer run --boxes'\nreads (checked here)"},
    {.name = "--id", .meta = "ID", .kind = HM_OPT_FN, .off = S(id), .fn = id_option,
     .want = "1..200 printable characters without spaces",
     .help = "1..200 printable characters without spaces; a job id\n"
             "already answered (within the workers' --result-ttl-s)\n"
             "is not computed again"},
    {.name = "--vertices", .kind = HM_OPT_FLAG, .off = S(vertices),
     .help = "the 778 vertices per hand in the result"},
    {.name = "--rescale", .meta = "S", .kind = HM_OPT_STR, .off = S(rescale), .like = hm_opts_crop,
     .help = "the job's box enlargement, in (0, 16] (default 2.0)"},
    {.name = "--crop-mode", .meta = "M", .kind = HM_OPT_STR, .off = S(crop_mode), .like = hm_opts_crop,
     .help = "the job's crop: warp (default) or pad ('hamer run\n--help')"},
    {.name = "--focal", .meta = "PX", .kind = HM_OPT_STR, .off = S(focal), .like = hm_opts_camera,
     .help = "the photo's focal length in pixels, in (0, 1e7]"},
    {.name = "--fov", .meta = "DEG", .kind = HM_OPT_STR, .off = S(fov), .like = hm_opts_camera,
     .help = "or its field of view across the longer side, in\ndegrees, in (0, 180) (default: its EXIF, else the\nmodel's camera)"},
    {.name = "--stream", .meta = "S", .kind = HM_OPT_STR, .off = S(stream),
     .help = "the jobs stream (default hamer:jobs)"},
    {0},
};

static const hm_command submit_cmd = {
    .cmd = "submit",
    .synopsis =
        "usage: hamer submit --redis URL --image IMG\n"
        "                    [--box x1,y1,x2,y2[:left|:right] ... | --boxes FILE.json]\n"
        "                    [--id ID] [--vertices] [--rescale S] [--crop-mode warp|pad]\n"
        "                    [--stream hamer:jobs] [--focal PX | --fov DEG]\n",
    .about =
        "Adds one job to the jobs stream for 'hamer worker': XADD <stream> * [id ID]\n"
        "image <bytes> [boxes JSON] [vertices 1] [rescale S] [crop_mode M] [focal PX]\n"
        "[fov DEG]. Without boxes the worker's detector finds the hands. Prints the\n"
        "job id (--id, else the entry ID); its result appears on the results stream\n"
        "('hamer results').\n",
    .epilog = "Exit status: 0 submitted; 1 failed (file, Redis); 2 bad usage.\n",
    .groups = (const hm_opt_group[]){{submit_in, 0, NULL},
                                     {hm_opts_box, S(boxes), NULL},
                                     {submit_opts, 0, NULL},
                                     {NULL, 0, NULL}},
    .required = (const char *const[]){"--image", NULL},
    .exclusive = (const char *const[]){"--box", "--boxes", NULL},
};

/* The --box list as the boxes document the worker reads (malloc'd by jansson). */
static char *boxes_json(const submit_args *a) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < a->boxes.n; i++) {
        const float *b = a->boxes.box[i].bbox;
        json_t *o = json_pack("{s:[f,f,f,f],s:b}", "bbox", (double)b[0], (double)b[1], (double)b[2], (double)b[3],
                              "is_right", a->boxes.box[i].is_right);
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
    int rc = hm_args_parse(&submit_cmd, argc, argv, a);
    if (rc) return rc;
    if (!(a->url = hm_wk_url_arg(a->url_given)))
        return hm_tool_fail(2, "submit: --redis URL (or $HAMER_REDIS_URL) is required%s", "");
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
    } else if (a.boxes.n) {
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
