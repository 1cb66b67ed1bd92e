/* hamer_folder.c - folder mode of include/hamer.h (hamer_folder_*): every
 * photo of a folder through the photo job, resumable, as `hamer batch` and
 * Model.predict_folder run it. Both are front ends over this file, so an
 * output folder written by one is resumed by the other.
 *
 * The rules, in the order they apply:
 *
 * 1. Names (core/names.h). Every file name, and every message that may
 *    hold one, is written in one escaped form that is lossless and
 *    printable.
 * Rules 2 to 5 are src/hamer_folder_plan.c's; the outputs of one image
 * are this file's.
 *
 * 2. Scan (hm_folder_scan). The regular files of the folder sorted by name (bytes),
 *    names starting with '.' left out, the globs applied to the name; with
 *    recursive the subfolders where they come in that order. Links are
 *    followed, but each folder (device, inode) is scanned once, at its
 *    first path in that order: a link cycle ends, a folder reached by two
 *    paths is done once (under a link's name when the link sorts first);
 *    the output and boxes folders count as seen. At most
 *    HAMER_FOLDER_MAX_DEPTH folders deep and HAMER_FOLDER_MAX_ENTRIES names
 *    read in all, else the open fails before any work.
 * 3. Stems (hm_folder_plan_stems). The images of one folder with one NAME (a.jpg,
 *    a.png) share NAME.json, which records the image it came from first of
 *    all: "input": {"path": its path below the input folder (rule 1),
 *    "size", "mtime_ns"}. The recorded image, while it is a regular file of
 *    the input folder, owns NAME; otherwise (no NAME.json, no record, that
 *    file gone) the first of them by name does. Every other image of that
 *    NAME fails (stage "name") rather than overwrite the owner's outputs.
 * 4. Done (complete). An image is skipped when it owns NAME, NAME.json
 *    records it with its present size and mtime, and every output the
 *    options ask for is there and at least as new as the image (and its
 *    boxes file), with the vertices iff vertices.
 * 5. Failures that stand (permanent): an image of unchanged size and mtime
 *    that did not decode is not retried, nor one whose name still clashes
 *    (retry_failed does); every other failure is retried.
 * 6. A photo without hands is a result, not a failure: its NAME.json
 *    lists none, no errors.jsonl line (an earlier version's "no hand
 *    found" line for a complete image is dropped at open). A hand that
 *    failed (a bad box) is a failure of the image (stage "hands"), its
 *    NAME.json written all the same.
 *
 * Files: per image NAME.json (RESULT.json with the "input" record first),
 * NAME_all.png, NAME_side.png, NAME_N.obj, NAME.glb, NAME.bvh, each written to a temporary
 * file, fsync'd and renamed (core/fileio.h), NAME.json last: an image is
 * complete exactly when its NAME.json is there. OUT/errors.jsonl: one line
 * {"path","stage","reason","size","mtime_ns"} per failure, appended with
 * one write and fsync'd; at open it is rewritten to the failures that
 * stand. OUT/.hamer-batch.lock: flock'd while a folder is open, so that two
 * runs never remove each other's temporary files.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/names.h"
#include "core/util.h"
#include "hamer_folder.h"

/* mkdir -p; 0 or -1 with errno. */
static int mkdir_p(const char *path) {
    if (!*path) return errno = ENOENT, -1;
    char *p = strdup(path);
    if (!p) return errno = ENOMEM, -1;
    for (char *s = p + 1;; s++) {
        if (*s != '/' && *s) continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            free(p);
            return -1;
        }
        *s = c;
        if (!c) break;
    }
    struct stat st;
    int ok = stat(p, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return ok ? 0 : (errno = ENOTDIR, -1);
}

/* ---- open ---- */

hamer_folder_params hamer_folder_default_params(void) {
    hamer_folder_params p;
    memset(&p, 0, sizeof p);
    p.render_draw = HAMER_DRAW_ALL;
    return p;
}

/* The folders, before any work: OUT created, writable, not the input, and
 * locked. 0 or a negative code. */
static int check_folders(hamer_folder *f, struct stat *in_st) {
    struct stat st;
    if (stat(f->input_dir, in_st) != 0)
        return hm_folder_fail_named(HM_E_IO, "cannot read the input folder '%s': %s", f->input_dir, strerror(errno));
    if (!S_ISDIR(in_st->st_mode)) return hm_folder_fail_named(HM_E_IO, "the input folder '%s' is not a folder%s", f->input_dir, NULL);
    if (f->boxes_dir && (stat(f->boxes_dir, &st) != 0 || !S_ISDIR(st.st_mode)))
        return hm_folder_fail_named(HM_E_IO, "the boxes folder '%s' is not a folder%s", f->boxes_dir, NULL);
    if (!f->out_dir) return 0;
    if (mkdir_p(f->out_dir) != 0)
        return hm_folder_fail_named(HM_E_IO, "cannot create the output folder '%s': %s", f->out_dir, strerror(errno));
    if (stat(f->out_dir, &st) != 0)
        return hm_folder_fail_named(HM_E_IO, "cannot read the output folder '%s': %s", f->out_dir, strerror(errno));
    if (st.st_dev == in_st->st_dev && st.st_ino == in_st->st_ino)
        return hm_err(HM_E_ARG, "the output folder must not be the input folder (its outputs would become inputs)");
    if (access(f->out_dir, W_OK) != 0)
        return hm_folder_fail_named(HM_E_IO, "cannot write in the output folder '%s': %s", f->out_dir, strerror(errno));
    char *lockp = hm_folder_printf("%s/.hamer-batch.lock", f->out_dir);
    if (!lockp) return hm_err(HM_E_NOMEM, "out of memory");
    f->lockfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc = 0;
    if (f->lockfd < 0) rc = hm_folder_fail_named(HM_E_IO, "cannot create '%s': %s", lockp, strerror(errno));
    else if (flock(f->lockfd, LOCK_EX | LOCK_NB) != 0)
        rc = hm_folder_fail_named(HM_E_IO, "another hamer batch is using '%s': %s", f->out_dir, strerror(errno));
    free(lockp);
    if (rc || hm_folder_dir_add(&f->seen, st.st_dev, st.st_ino) >= 0) return rc;
    return hm_err(HM_E_NOMEM, "out of memory");
}

/* What is left to do, the earlier failures that stand, errors.jsonl
 * rewritten to them and opened for this run's lines. */

static char *dup_or_null(const char *s, int *oom) {
    char *d = s ? strdup(s) : NULL;
    if (s && !d) *oom = 1;
    return d;
}

int hamer_folder_open(const hamer_folder_params *params, hamer_folder **out) {
    if (out) *out = NULL;
    if (!params || !out || !params->input_dir || params->n_globs < 0 || (params->n_globs && !params->globs))
        return hm_err(HM_E_ARG, "%s: NULL argument, no input folder or bad globs", __func__);
    if (HM_CHECK_RESERVED(params, "hamer_folder_params")) return HM_E_ARG;
    if (params->render_draw & ~(uint32_t)HAMER_DRAW_ALL)
        return hm_err(HM_E_ARG, "%s: render_draw 0x%x has bits outside HAMER_DRAW_ALL", __func__,
                      (unsigned)params->render_draw);
    hamer_folder *f = calloc(1, sizeof *f);
    if (!f) return hm_err(HM_E_NOMEM, "out of memory");
    f->p = *params;
    f->errfd = f->lockfd = -1;
    pthread_mutex_init(&f->mu, NULL);
    int oom = 0;
    f->input_dir = dup_or_null(params->input_dir, &oom);
    f->out_dir = dup_or_null(params->out_dir, &oom);
    f->boxes_dir = dup_or_null(params->boxes_dir, &oom);
    f->globs = calloc((size_t)params->n_globs + 1, sizeof *f->globs);
    if (!f->globs) oom = 1;
    for (int i = 0; f->globs && i < params->n_globs; i++) f->globs[i] = dup_or_null(params->globs[i], &oom);
    f->n_globs = params->n_globs;
    f->p.input_dir = f->input_dir, f->p.out_dir = f->out_dir, f->p.boxes_dir = f->boxes_dir;
    f->p.globs = (const char *const *)f->globs;
    if (f->out_dir && !(f->errors_path = hm_folder_printf("%s/errors.jsonl", f->out_dir))) oom = 1;
    int rc = oom ? hm_err(HM_E_NOMEM, "out of memory") : 0;
    struct stat in_st, st;
    if (!rc) rc = check_folders(f, &in_st);
    /* Rule 2: the input folder is seen; the output and boxes folders may
     * lie inside it and are not inputs. */
    if (!rc && (hm_folder_dir_add(&f->seen, in_st.st_dev, in_st.st_ino) < 0 ||
                (f->boxes_dir && stat(f->boxes_dir, &st) == 0 && hm_folder_dir_add(&f->seen, st.st_dev, st.st_ino) < 0)))
        rc = hm_err(HM_E_NOMEM, "out of memory");
    if (!rc) rc = hm_folder_scan(f, f->input_dir, "", 0);
    if (!rc) rc = hm_folder_plan_stems(f);
    if (!rc) rc = hm_folder_plan_todo(f);
    if (rc) {
        /* The message stays the one set where it failed. */
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hm_errmsg());
        hamer_folder_close(f);
        return hm_err(rc, "%s", msg);
    }
    f->stats.images = (int)f->n;
    for (size_t i = 0; i < f->n; i++) f->stats.todo += f->v[i].status == HAMER_FOLDER_TODO;
    *out = f;
    return 0;
}

int hamer_folder_get_count(const hamer_folder *f) { return f ? (int)f->n : 0; }

int hamer_folder_get_image(const hamer_folder *f, int i, hamer_folder_image *out) {
    if (!f || !out || i < 0 || (size_t)i >= f->n) return hm_err(HM_E_ARG, "%s: no image %d", __func__, i);
    const item *it = &f->v[i];
    out->path = it->path, out->rel = it->rel, out->shown = it->shown;
    out->result_path = it->clash ? NULL : it->json;   /* a clashing image's NAME.json is its owner's */
    out->status = it->status;
    out->error_stage = it->stage, out->error_reason = it->stage ? it->reason : NULL;
    return 0;
}

int hamer_folder_get_stats(const hamer_folder *f, hamer_folder_stats *out) {
    if (!f || !out) return hm_err(HM_E_ARG, "%s: NULL argument", __func__);
    pthread_mutex_lock((pthread_mutex_t *)&f->mu);
    *out = f->stats;
    pthread_mutex_unlock((pthread_mutex_t *)&f->mu);
    return 0;
}

void hamer_folder_close(hamer_folder *f) {
    if (!f) return;
    if (f->errfd >= 0) close(f->errfd);
    if (f->lockfd >= 0) close(f->lockfd);
    for (size_t i = 0; i < f->n; i++) {
        item *it = &f->v[i];
        free(it->path), free(it->rel), free(it->name), free(it->shown), free(it->out_dir), free(it->stem);
        free(it->json), free(it->boxes), free(it->clash), free(it->reason);
    }
    free(f->v);
    free(f->seen.v);
    for (int i = 0; f->globs && i < f->n_globs; i++) free(f->globs[i]);
    free(f->globs);
    free(f->input_dir), free(f->out_dir), free(f->boxes_dir), free(f->errors_path);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

char *hamer_name_escape(const char *s) {
    if (!s) {
        hm_err(HM_E_ARG, "%s: NULL name", __func__);
        return NULL;
    }
    char *t = hm_name_text(s);
    if (!t) hm_err(HM_E_NOMEM, "out of memory");
    return t;
}

/* ---- one image ---- */

/* RESULT.json with the image's record first,
 * {"input":{"path","size","mtime_ns"},<the rest as hamer run writes it>}
 * (malloc'd; NULL: out of memory). */
static char *with_input(const item *it, const char *result) {
    json_t *o = json_pack("{s:s,s:I,s:I}", "path", it->name, "size", (json_int_t)it->size, "mtime_ns",
                          (json_int_t)hm_folder_ns(it->mtime));
    char *rec = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(o);
    char *s = rec && result[0] == '{' ? hm_folder_printf("{\"input\":%s,%s", rec, result + 1) : NULL;
    free(rec);
    return s;
}

/* The boxes of D/NAME.json; their count or -1 with the reason in err. */
static int read_boxes(const char *path, hamer_box *boxes, char *err, size_t errlen) {
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, errlen, "no boxes file '%s': %s", path, strerror(errno));
        return -1;
    }
    char *buf = NULL;
    long n = fseek(fp, 0, SEEK_END) == 0 ? ftell(fp) : -1;
    if (n < 0 || (unsigned long)n > FOLDER_BOXES_FILE_MAX) {
        snprintf(err, errlen, "'%s': unreadable or larger than 64 MB", path);
    } else if (rewind(fp), !(buf = malloc((size_t)n + 1)) || fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        snprintf(err, errlen, "cannot read '%s'", path);
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (!buf) return -1;
    buf[n] = 0;
    int k = hamer_boxes_parse(buf, (size_t)n, boxes, HAMER_MAX_HANDS);
    free(buf);
    if (k < 0) snprintf(err, errlen, "%s: %s", path, hamer_last_error());
    return k;
}

static int write_out(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    if (!path) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (hm_file_write_atomic(path, data, len) == 0) return 0;
    snprintf(err, errlen, "%s", hamer_last_error());
    return -1;
}

/* The pictures and meshes the options ask for, then NAME.json (doc) last:
 * NAME.json present means every output of the image is. 0, or -1 after
 * recording the failure. */
static int write_outputs(hamer_folder *f, item *it, hamer_job *job, const hamer_job_result *r, const char *doc,
                         double *t_render, double *t_write) {
    char err[1024];
    if (mkdir_p(it->out_dir) != 0) {
        char *t = hm_name_text(it->out_dir);
        snprintf(err, sizeof err, "cannot create the folder '%s': %s", t ? t : "?", strerror(errno));
        free(t);
        hm_folder_record_error(f, it, "write", err);
        return -1;
    }
    double t0 = hm_now();
    for (int k = 0; k < 2; k++) {
        if (!(k ? f->p.side_view : f->p.render)) continue;
        uint8_t *png;
        size_t len;
        const hamer_render_params rp = {.hide = f->p.render_draw ? HAMER_DRAW_ALL & ~f->p.render_draw
                                                                 : HAMER_DRAW_ALL & ~HAMER_DRAW_MESH};
        if (k ? hamer_job_render_png(job, 1, &png, &len) : hamer_job_render_overlay_png(job, &rp, &png, &len)) {
            hm_folder_record_error(f, it, "render", hamer_last_error());
            return -1;
        }
        double t1 = hm_now();
        *t_render += t1 - t0;
        char *path = hm_folder_printf("%s_%s.png", it->stem, k ? "side" : "all");
        int bad = write_out(path, png, len, err, sizeof err);
        hamer_free(png);
        free(path);
        t0 = hm_now();
        *t_write += t0 - t1;
        if (bad) {
            hm_folder_record_error(f, it, "write", err);
            return -1;
        }
    }
    for (int i = 0; f->p.save_mesh && i < r->n_hands; i++) {
        if (!r->hands[i].ok) continue;
        char *obj, *path = hm_folder_printf("%s_%d.obj", it->stem, i);
        size_t len;
        if (!path || hamer_job_hand_obj(job, i, &obj, &len)) {
            hm_folder_record_error(f, it, "write", path ? hamer_last_error() : "out of memory");
            free(path);
            return -1;
        }
        int bad = write_out(path, obj, len, err, sizeof err);
        hamer_free(obj);
        free(path);
        if (bad) {
            hm_folder_record_error(f, it, "write", err);
            return -1;
        }
    }
    if (f->p.glb) {
        uint8_t *glb;
        size_t len;
        if (hamer_job_glb(job, &glb, &len)) {
            hm_folder_record_error(f, it, "write", hamer_last_error());
            return -1;
        }
        char *path = hm_folder_printf("%s.glb", it->stem);
        int bad = write_out(path, glb, len, err, sizeof err);
        hamer_free(glb);
        free(path);
        if (bad) {
            hm_folder_record_error(f, it, "write", err);
            return -1;
        }
    }
    if (f->p.bvh) {
        char *bvh;
        size_t len;
        if (hamer_job_bvh(job, &bvh, &len)) {
            hm_folder_record_error(f, it, "write", hamer_last_error());
            return -1;
        }
        char *path = hm_folder_printf("%s.bvh", it->stem);
        int bad = write_out(path, bvh, len, err, sizeof err);
        hamer_free(bvh);
        free(path);
        if (bad) {
            hm_folder_record_error(f, it, "write", err);
            return -1;
        }
    }
    if (write_out(it->json, doc, strlen(doc), err, sizeof err)) {
        hm_folder_record_error(f, it, "write", err);
        return -1;
    }
    *t_write += hm_now() - t0;
    return 0;
}

int hamer_folder_process(hamer_folder *f, int i, hamer_job *job, const hamer_folder_decoded *pre, char **result) {
    if (result) *result = NULL;
    /* No job is needed to record an image the caller could not decode. */
    if (!f || (!job && !(pre && !pre->rgb)) || i < 0 || (size_t)i >= f->n)
        return hm_err(HM_E_ARG, "%s: NULL argument or no image %d", __func__, i);
    item *it = &f->v[i];
    if (it->status != HAMER_FOLDER_TODO) return hm_err(HM_E_ARG, "%s: image %d is not to be computed", __func__, i);
    hamer_box boxes[HAMER_MAX_HANDS];
    char err[1024];
    hamer_job_result r;
    memset(&r, 0, sizeof r);
    double t_render = 0, t_write = 0, decode_ms = 0;
    char *json = NULL, *doc = NULL;
    uint8_t *rgb = NULL;
    int w = 0, h = 0, n = 0, rc = 0;
    if (pre) {
        decode_ms = pre->decode_ms;
        if (!pre->rgb) {
            hm_folder_record_error(f, it, "decode", pre->decode_error ? pre->decode_error : "not decoded");
            goto account;
        }
    } else {
        double t0 = hm_now();
        int bad = hamer_image_load(it->path, &rgb, &w, &h);
        decode_ms = 1e3 * (hm_now() - t0);
        if (bad) {
            hm_folder_record_error(f, it, "decode", hamer_last_error());
            goto account;
        }
    }
    int detected = !f->boxes_dir;
    if (!detected && (n = read_boxes(it->boxes, boxes, err, sizeof err)) < 0) {
        hm_folder_record_error(f, it, "boxes", err);
        goto account;
    }
    hamer_job_input in = {.path = it->path, .rgb = pre ? pre->rgb : rgb, .width = pre ? pre->width : w,
                          .height = pre ? pre->height : h, .decode_ms = decode_ms, .boxes = boxes, .n_boxes = n,
                          .source = detected ? HAMER_BOXES_DETECTED : HAMER_BOXES_GIVEN};
    int jrc = hamer_job_run(job, &in);
    hamer_job_get_result(job, &r);
    if (jrc == HAMER_E_CANCELLED) {
        rc = HAMER_E_CANCELLED;
        goto account;
    }
    if (jrc) {
        hm_folder_record_error(f, it, r.failed_stage == HAMER_JOB_STAGE_DETECT ? "detect" : "predict", hamer_last_error());
        goto account;
    }
    n = r.n_hands;
    json = hamer_job_result_json(job, f->p.vertices);
    doc = json ? with_input(it, json) : NULL;
    if (!doc) {
        hm_folder_record_error(f, it, "predict", json ? "out of memory" : hamer_last_error());
        goto account;
    }
    if (f->out_dir && write_outputs(f, it, job, &r, doc, &t_render, &t_write)) goto account;
    it->status = HAMER_FOLDER_COMPUTED;
    /* Written, as `hamer run` writes it (its exit 3), and recorded; no
     * hand at all is an answer (rule 6). */
    for (int k = 0; k < n; k++)
        if (!r.hands[k].ok) {
            snprintf(err, sizeof err, "%d of %d hands failed; %s", r.n_failed, n, r.hands[k].error);
            hm_folder_record_error(f, it, "hands", err);
            break;
        }
    pthread_mutex_lock(&f->mu);
    f->stats.computed++;
    f->stats.hands += n;
    pthread_mutex_unlock(&f->mu);
    if (result) *result = doc, doc = NULL;  /* also for a failed hand or no hand: it was written */
account:
    pthread_mutex_lock(&f->mu);
    f->stats.decode_s += decode_ms * 1e-3, f->stats.detect_s += r.timings.detect_ms * 1e-3;
    f->stats.crop_s += r.timings.crop_ms * 1e-3, f->stats.regress_s += r.timings.regress_ms * 1e-3;
    f->stats.finalise_s += r.timings.finalise_ms * 1e-3;
    f->stats.render_s += t_render, f->stats.write_s += t_write;
    pthread_mutex_unlock(&f->mu);
    hamer_free(json);
    free(doc);
    hamer_free(rgb);
    return rc;
}

/* The messages spell the limits out. */
_Static_assert(HAMER_FOLDER_MAX_ENTRIES == 1000000 && HAMER_FOLDER_MAX_DEPTH == 64, "update the scan's messages");
