/* bvh.c - hands as BVH motion (bvh.h).
 *
 * A skeleton is MANO's kinematic tree: each joint's OFFSET is its rest
 * offset from its parent (MANO's joint regressor on the template with the
 * hand's betas: J_j - J_parent), and each frame's rotation channels are
 * the joint's rotation (global_orient, hand_pose), so that BVH's forward
 * kinematics, parent . [R_j | offset_j], is MANO's G_j and puts every
 * joint where keypoints_3d has it. The root's OFFSET is 0 and its position
 * channels the wrist's place in the camera (J_0 + cam_t): both readings of
 * a root's position (added to the offset or replacing it) agree. A left
 * hand is the mirror image: offsets with x negated, its (mirrored)
 * rotations as they are. The fingertips are End Sites, their offsets the
 * tip vertex's rest offset from the last joint of its finger (the joint
 * with the largest skinning weight at the vertex): rigid there, so a
 * posed tip is not MANO's skinned one (tests/test_bvh.py measures by how
 * much).
 *
 * Axes: metres, y up, the camera looking down -z (a turn of 180 degrees
 * about x of the camera frame, D = diag(1, -1, -1): the GLB's and OBJ's
 * axes, Blender's BVH import default). The root rotation is D R_0 and its
 * position D (J_0 + cam_t); the offsets and the other rotations are in
 * MANO's frame, under the root. Rotations are Euler angles in degrees,
 * channels "Zrotation Xrotation Yrotation" (R = Rz Rx Ry, the common
 * motion-capture order).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "pipeline/bvh.h"

static const char *const JOINT_NAMES[HM_NJ] = {"wrist",  "index1", "index2", "index3", "middle1", "middle2",
                                               "middle3", "pinky1", "pinky2", "pinky3", "ring1",  "ring2",
                                               "ring3",  "thumb1", "thumb2", "thumb3"};

/* Channel values of one hand at one frame: root position, then per joint
 * (z, x, y) in degrees. */
#define BVH_NCH (3 + 3 * HM_NJ)

typedef struct {
    char name[24];                /* hand<K>_<side> */
    int right;
    double off[HM_NJ][3];         /* rest offsets from the parent (root: the rest wrist, for the position) */
    int has_tip[HM_NJ];
    double tip[HM_NJ][3];         /* End Site offsets */
} skeleton;

void hm_bvh_euler_zxy(const double R[9], double *z, double *x, double *y) {
    const double s = R[7] > 1 ? 1 : R[7] < -1 ? -1 : R[7];
    *x = asin(s);
    if (fabs(s) < 1 - 1e-12) {
        *z = atan2(-R[1], R[4]);
        *y = atan2(-R[6], R[8]);
    } else {  /* x = +-90 degrees: only z + y or z - y is defined; y = 0 */
        *z = atan2(R[3], R[0]);
        *y = 0;
    }
}

/* The skeleton of a hand of this side and shape. */
static void build(const hm_mano *mn, int right, const float *betas, const char *name, skeleton *sk) {
    static const float eye[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    float params[9 * HM_NJ + HM_NB];
    for (int j = 0; j < HM_NJ; j++) memcpy(params + 9 * j, eye, sizeof eye);
    memcpy(params + 9 * HM_NJ, betas, sizeof(float) * HM_NB);
    double *vs = malloc(sizeof(double) * 3 * HM_NV), *vp = malloc(sizeof(double) * 3 * HM_NV), J[HM_NJ * 3];
    memset(sk, 0, sizeof *sk);
    snprintf(sk->name, sizeof sk->name, "%s", name);
    sk->right = right;
    if (!vs || !vp) {
        free(vs), free(vp);
        return;  /* the caller checks sk->name[0] */
    }
    hm_mano_rest(mn, params, vs, J, vp);
    const double sx = right ? 1 : -1;
    for (int j = 0; j < HM_NJ; j++) {
        const int p = mn->parents[j];
        for (int c = 0; c < 3; c++) sk->off[j][c] = (c ? 1 : sx) * (p < 0 ? J[3 * j + c] : J[3 * j + c] - J[3 * p + c]);
    }
    for (int t = 0; t < 5; t++) {
        const int v = mn->tips[t];
        const float *w = mn->lbs_weights + (size_t)v * HM_NJ;
        int j = 0;
        for (int i = 1; i < HM_NJ; i++)
            if (w[i] > w[j]) j = i;
        if (sk->has_tip[j]) continue;
        sk->has_tip[j] = 1;
        for (int c = 0; c < 3; c++) sk->tip[j][c] = (c ? 1 : sx) * (vs[3 * v + c] - J[3 * j + c]);
    }
    free(vs), free(vp);
}

/* A hand's channel values at one frame: R its 16 rotations (as hamer_hand),
 * t its translation in the camera. */
static void channels(const skeleton *sk, const float *R, const float *t, double *ch) {
    /* root: position D (J_0 + t), rotation D R_0 */
    ch[0] = sk->off[0][0] + t[0], ch[1] = -(sk->off[0][1] + t[1]), ch[2] = -(sk->off[0][2] + t[2]);
    for (int j = 0; j < HM_NJ; j++) {
        double M[9], z, x, y;
        for (int e = 0; e < 9; e++) M[e] = (j == 0 && e >= 3 ? -1.0 : 1.0) * R[9 * j + e];
        hm_bvh_euler_zxy(M, &z, &x, &y);
        ch[3 + 3 * j] = z * 180.0 / M_PI, ch[4 + 3 * j] = x * 180.0 / M_PI, ch[5 + 3 * j] = y * 180.0 / M_PI;
    }
}

static void indent(FILE *f, int d) {
    for (int i = 0; i < d; i++) fputs("  ", f);
}

/* Joint j and its subtree. */
static void write_joint(FILE *f, const hm_mano *mn, const skeleton *sk, int j, int d) {
    indent(f, d);
    fprintf(f, "%s %s_%s\n", j ? "JOINT" : "ROOT", sk->name, JOINT_NAMES[j]);
    indent(f, d);
    fputs("{\n", f);
    indent(f, d + 1);
    if (j) fprintf(f, "OFFSET %.9g %.9g %.9g\n", sk->off[j][0], sk->off[j][1], sk->off[j][2]);
    else fputs("OFFSET 0 0 0\n", f);
    indent(f, d + 1);
    fputs(j ? "CHANNELS 3 Zrotation Xrotation Yrotation\n"
            : "CHANNELS 6 Xposition Yposition Zposition Zrotation Xrotation Yrotation\n", f);
    for (int c = 1; c < HM_NJ; c++)
        if (mn->parents[c] == j) write_joint(f, mn, sk, c, d + 1);
    if (sk->has_tip[j]) {
        indent(f, d + 1);
        fputs("End Site\n", f);
        indent(f, d + 1);
        fputs("{\n", f);
        indent(f, d + 2);
        fprintf(f, "OFFSET %.9g %.9g %.9g\n", sk->tip[j][0], sk->tip[j][1], sk->tip[j][2]);
        indent(f, d + 1);
        fputs("}\n", f);
    }
    indent(f, d);
    fputs("}\n", f);
}

/* The channel values of a skeleton in the order write_joint lists them. */
static void write_values(FILE *f, const hm_mano *mn, const double *ch, int j, int *first) {
    const int n = j ? 3 : 6;                      /* the root: position, then its rotation */
    const double *v = j ? ch + 3 + 3 * j : ch;
    for (int i = 0; i < n; i++) {
        fprintf(f, *first ? "%.6f" : " %.6f", v[i]);
        *first = 0;
    }
    for (int c = 1; c < HM_NJ; c++)
        if (mn->parents[c] == j) write_values(f, mn, ch, c, first);
}

int hm_bvh_hands(const hm_mano *mn, const hamer_hand *hands, int n, char **out, size_t *len) {
    *out = NULL, *len = 0;
    char *buf = NULL;
    size_t sz = 0;
    FILE *f = open_memstream(&buf, &sz);
    skeleton *sk = malloc(sizeof *sk * (size_t)(n > 0 ? n : 1));
    double *ch = malloc(sizeof *ch * BVH_NCH * (size_t)(n > 0 ? n : 1));
    int rc = f && sk && ch ? 0 : hm_err(HM_E_NOMEM, "out of memory writing a BVH");
    if (!rc) fputs("HIERARCHY\n", f);
    for (int i = 0; !rc && i < n; i++) {
        if (!hands[i].ok) continue;
        char name[24];
        snprintf(name, sizeof name, "hand%d_%s", i, hands[i].box.is_right ? "right" : "left");
        build(mn, hands[i].box.is_right != 0, hands[i].betas, name, &sk[i]);
        if (!sk[i].name[0]) rc = hm_err(HM_E_NOMEM, "out of memory writing a BVH");
        else write_joint(f, mn, &sk[i], 0, 0);
    }
    if (!rc) {
        fputs("MOTION\nFrames: 1\nFrame Time: 0.0333333\n", f);
        int first = 1;
        for (int i = 0; i < n; i++) {
            if (!hands[i].ok) continue;
            float R[9 * HM_NJ];
            memcpy(R, hands[i].global_orient, sizeof hands[i].global_orient);
            memcpy(R + 9, hands[i].hand_pose, sizeof hands[i].hand_pose);
            const float *t = hands[i].focal_source != HAMER_FOCAL_NONE ? hands[i].cam_t : hands[i].cam_t_full;
            channels(&sk[i], R, t, ch);
            write_values(f, mn, ch, 0, &first);
        }
        fputc('\n', f);
    }
    free(sk), free(ch);
    if (f && fclose(f) && !rc) rc = hm_err(HM_E_NOMEM, "out of memory writing a BVH");
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf, *len = sz;
    return 0;
}

/* ---- a recording: one skeleton per track ----
 *
 * The motion lines run over frames, each holding every track, but the
 * recording is read one track at a time; each track's values for every
 * frame go to a temporary file first (a column per track), then the lines
 * are read across them: memory stays one track's samples. */

int hm_bvh_anim(hm_anim *a, const hm_mano *mn, FILE *f) {
    const int ntr = hm_anim_tracks(a);
    int64_t first = 0, last = 0, step = 1;
    const int any = hm_anim_frames(a, &first, &last, &step);
    const int64_t nframes = any ? (last - first) / step + 1 : 0;
    const double fps = hm_anim_fps(a);
    skeleton *sk = calloc((size_t)(ntr > 0 ? ntr : 1), sizeof *sk);
    int *used = calloc((size_t)(ntr > 0 ? ntr : 1), sizeof *used);
    FILE *cols = tmpfile();
    hm_anim_rec *s = NULL;
    size_t cap = 0;
    int rc = !sk || !used ? hm_err(HM_E_NOMEM, "out of memory writing a BVH")
             : !cols      ? hm_err(HM_E_IO, "cannot create a temporary file for the BVH: %s", strerror(errno))
                          : 0;
    double ch[BVH_NCH];
    for (int tr = 0; !rc && tr < ntr; tr++) {
        int n = 0;
        float betas[HM_NB];
        if ((rc = hm_anim_track(a, mn, tr, &s, &cap, &n, betas)) || !n) continue;
        char name[24];
        snprintf(name, sizeof name, "hand%d_%s", tr, s[0].is_right ? "right" : "left");
        build(mn, s[0].is_right, betas, name, &sk[tr]);
        if (!sk[tr].name[0]) {
            rc = hm_err(HM_E_NOMEM, "out of memory writing a BVH");
            break;
        }
        used[tr] = 1;
        /* every frame: the track's sample there, else the nearest one before it (its first
         * before it begins); samples of the other side (a flipped vote) are held over */
        int i = 0;
        for (int64_t k = 0; k < nframes; k++) {
            const int64_t frame = first + k * step;
            while (i + 1 < n && s[i + 1].frame <= frame) i++;
            int use = i;
            while (use > 0 && s[use].is_right != s[0].is_right) use--;
            channels(&sk[tr], s[use].R, s[use].cam_t, ch);
            if (fwrite(ch, sizeof ch, 1, cols) != 1) {
                rc = hm_err(HM_E_IO, "cannot write the BVH's temporary file: %s", strerror(errno));
                break;
            }
        }
    }
    free(s);
    if (!rc) {
        fputs("HIERARCHY\n", f);
        for (int tr = 0; tr < ntr; tr++)
            if (used[tr]) write_joint(f, mn, &sk[tr], 0, 0);
        fprintf(f, "MOTION\nFrames: %lld\nFrame Time: %.9g\n", (long long)nframes,
                fps > 0 ? (double)step / fps : 1.0 / 30);
        for (int64_t k = 0; !rc && k < nframes; k++) {
            int firstv = 1;
            for (int tr = 0, col = 0; tr < ntr && !rc; tr++) {
                if (!used[tr]) continue;
                if (fseek(cols, (long)((col++ * nframes + k) * (int64_t)sizeof ch), SEEK_SET) ||
                    fread(ch, sizeof ch, 1, cols) != 1)
                    rc = hm_err(HM_E_IO, "cannot read the BVH's temporary file");
                else write_values(f, mn, ch, 0, &firstv);
            }
            fputc('\n', f);
        }
    }
    if (cols) fclose(cols);
    free(sk), free(used);
    return rc;
}
