/* anim.c - the recorder behind the animation files (anim.h).
 *
 * A track's shape: MANO's betas change a little from frame to frame (the
 * model sees each frame alone), but a skeleton in an animation file has
 * one set of bone lengths. HAMER_ANIM_SHAPE_TRACK fits one betas to the
 * whole track, the per-component median of its frames' (robust to the
 * odd frame); HAMER_ANIM_SHAPE_FIRST takes the first frame's. Either way
 * each frame keeps its own translation (cam_t): solving it again for the
 * track's shape moved hands by millimetres in depth (a shape's size sets
 * the depth it is seen at) without bringing the joints closer to the 2D
 * keypoints (bench/anim_shape.py, docs/usage.md). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pipeline/anim.h"

struct hm_anim {
    FILE *tmp;
    long n;                      /* records in tmp */
    int tracks;                  /* largest track id + 1 */
    double fps;
    int shape;
    long long frames;            /* frames added (with or without hands) */
    int64_t first, last, step;   /* recorded frame numbers */
    double t_prev;
};

hm_anim *hm_anim_new(double fps, int shape) {
    if (!(fps >= 0 && fps <= 1e4) || (shape != HAMER_ANIM_SHAPE_TRACK && shape != HAMER_ANIM_SHAPE_FIRST)) {
        hm_err(HM_E_ARG, "animation: fps %g (0..10000) or shape %d unknown", fps, shape);
        return NULL;
    }
    hm_anim *a = calloc(1, sizeof *a);
    if (!a) {
        hm_err(HM_E_NOMEM, "out of memory");
        return NULL;
    }
    if (!(a->tmp = tmpfile())) {
        hm_err(HM_E_IO, "cannot create a temporary file for the animation: %s", strerror(errno));
        free(a);
        return NULL;
    }
    a->fps = fps, a->shape = shape;
    return a;
}

void hm_anim_free(hm_anim *a) {
    if (!a) return;
    if (a->tmp) fclose(a->tmp);
    free(a);
}

int hm_anim_add(hm_anim *a, double time_s, const hamer_track *tracks, const hamer_hand *hands, int n) {
    if (a->frames && !(time_s > a->t_prev))
        return hm_err(HM_E_ARG, "animation: time %.6f s does not increase (previous frame %.6f s)", time_s, a->t_prev);
    const int64_t frame = a->fps > 0 ? (int64_t)llround(time_s * a->fps) : (int64_t)a->frames;
    if (a->frames && frame == a->last) return 0;  /* a second sample on one frame */
    if (a->frames && frame - a->last < a->step) a->step = frame - a->last;
    if (!a->frames) a->first = frame, a->step = INT64_MAX;
    a->last = frame, a->t_prev = time_s, a->frames++;
    for (int i = 0; i < n; i++) {
        const hamer_hand *h = &hands[i];
        if (!h->ok || tracks[i].track_id < 0) continue;
        hm_anim_rec r;
        memset(&r, 0, sizeof r);
        r.track = tracks[i].track_id, r.is_right = h->box.is_right != 0;
        r.frame = frame, r.time = a->fps > 0 ? (double)frame / a->fps : time_s;
        memcpy(r.R, h->global_orient, sizeof h->global_orient);
        memcpy(r.R + 9, h->hand_pose, sizeof h->hand_pose);
        memcpy(r.betas, h->betas, sizeof r.betas);
        /* hands of a library before the camera fields: the demo's translation */
        memcpy(r.cam_t, h->focal_source != HAMER_FOCAL_NONE ? h->cam_t : h->cam_t_full, sizeof r.cam_t);
        memcpy(r.kp3d, h->keypoints_3d, sizeof r.kp3d);
        if (fwrite(&r, sizeof r, 1, a->tmp) != 1)
            return hm_err(HM_E_IO, "cannot write the animation's temporary file: %s", strerror(errno));
        a->n++;
        if (r.track + 1 > a->tracks) a->tracks = r.track + 1;
    }
    return 0;
}

double hm_anim_fps(const hm_anim *a) { return a->fps; }
int hm_anim_tracks(const hm_anim *a) { return a->tracks; }

int hm_anim_frames(const hm_anim *a, int64_t *first, int64_t *last, int64_t *step) {
    if (!a->frames) return 0;
    *first = a->first, *last = a->last, *step = a->frames > 1 ? a->step : 1;
    return 1;
}

static int cmp_float(const void *x, const void *y) {
    const float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* The TRACK shape: the median betas; each sample's keypoints again for them
 * (the GLB's keypoint nodes), its translation kept. */
static int fit_track(const hm_mano *mn, hm_anim_rec *s, int n, float betas[HM_NB]) {
    float *col = malloc(sizeof(float) * (size_t)n);
    if (!col) return hm_err(HM_E_NOMEM, "out of memory writing an animation");
    for (int b = 0; b < HM_NB; b++) {
        for (int i = 0; i < n; i++) col[i] = s[i].betas[b];
        qsort(col, (size_t)n, sizeof *col, cmp_float);
        betas[b] = n % 2 ? col[n / 2] : (float)(0.5 * ((double)col[n / 2 - 1] + col[n / 2]));
    }
    free(col);
    float params[9 * HM_NJ + HM_NB], kp[HM_NKP * 3];
    for (int i = 0; i < n; i++) {
        hm_anim_rec *r = &s[i];
        /* MANO on the right hand the model saw: a left hand mirrored back */
        for (int e = 0; e < 9 * HM_NJ; e++) {
            const int row = (e % 9) / 3, c = e % 3;
            params[e] = r->is_right || (row == 0) == (c == 0) ? r->R[e] : -r->R[e];
        }
        memcpy(params + 9 * HM_NJ, betas, sizeof(float) * HM_NB);
        hm_mano_forward(mn, params, NULL, kp);
        for (int k = 0; k < HM_NKP * 3; k++) r->kp3d[k] = k % 3 || r->is_right ? kp[k] : -kp[k];
        memcpy(r->betas, betas, sizeof(float) * HM_NB);
    }
    return 0;
}

int hm_anim_track(hm_anim *a, const hm_mano *mn, int tr, hm_anim_rec **s, size_t *cap, int *n, float betas[HM_NB]) {
    *n = 0;
    if (fseek(a->tmp, 0, SEEK_SET) != 0) return hm_err(HM_E_IO, "cannot read the animation's temporary file");
    hm_anim_rec r;
    while (fread(&r, sizeof r, 1, a->tmp) == 1) {
        if (r.track != tr) continue;
        if ((size_t)*n == *cap) {
            size_t c = *cap ? 2 * *cap : 256;
            hm_anim_rec *q = realloc(*s, c * sizeof *q);
            if (!q) return hm_err(HM_E_NOMEM, "out of memory writing an animation");
            *s = q, *cap = c;
        }
        (*s)[(*n)++] = r;
    }
    if (ferror(a->tmp)) return hm_err(HM_E_IO, "cannot read the animation's temporary file");
    if (!*n) return 0;
    if (a->shape == HAMER_ANIM_SHAPE_TRACK) return fit_track(mn, *s, *n, betas);
    memcpy(betas, (*s)[0].betas, sizeof(float) * HM_NB);
    return 0;
}
