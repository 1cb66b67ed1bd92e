/* glb.c - the hands of a photo as one binary glTF 2.0 file (GLB): per hand
 * a skinned MANO mesh that 3D tools can turn around and repose.
 *
 * Per hand (only those with a result):
 *   - a node "hand_K_right|left" at the camera translation (cam_t_full) in
 *     glTF's axes (x right, y up, the camera looking down -z: the OBJ's
 *     "demo frame", a 180-degree turn about x of the camera's), with the 16
 *     MANO joints below it as MANO's kinematic tree: each joint node's
 *     translation is its rest offset from its parent, its rotation the
 *     predicted rotation (global_orient, hand_pose: the values of
 *     RESULT.json, so left hands are the mirror image of a right MANO, as
 *     HaMeR's demo has them);
 *   - the 21 keypoints as named nodes (OpenPose order) under the joint
 *     they move with, placed where RESULT.json's keypoints_3d are;
 *   - a mesh: the bind shape is MANO's template with this hand's betas,
 *     in the rest pose; one morph target ("pose_correctives", weight 1)
 *     holds MANO's pose-dependent offsets for this pose; the faces are the
 *     OBJ's (MANO's, the wrist closed); normals of the bind shape;
 *   - a skin over the 16 joints: inverse bind matrices from the rest
 *     joints, and per vertex MANO's 4 largest LBS weights, renormalised to
 *     sum 1 (glTF's one JOINTS_0/WEIGHTS_0 set holds 4; MANO's vertices
 *     have up to 16 non-zero weights, most of the mass in the first 2-3:
 *     the posed mesh moves away from the exact one by what is left out,
 *     measured in tests/test_glb.py).
 * Skinning the bind shape + correctives with the joint nodes' transforms
 * then gives RESULT.json's vertices (up to that truncation) in the camera
 * frame, so that two hands stand where they are in the photo.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "format/mesh_io.h"
#include "pipeline/anim.h"
#include "pipeline/glb.h"

typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} bytes;

static size_t put(bytes *b, const void *data, size_t n) {
    size_t at = b->n, need = (b->n + n + 3) & ~(size_t)3;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < need) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return 0;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    memset(b->p + b->n + n, 0, need - b->n - n);
    b->n = need;
    return at;
}

/* A bufferView + accessor over n elements of `type` just appended at
 * offset; min/max for float VEC3 (glTF requires them for POSITION). The
 * accessor's index. */
static int accessor(json_t *doc, bytes *b, const void *data, size_t bytes_len, int ctype, const char *type,
                    int count, int target, const float *mn, const float *mx) {
    size_t at = put(b, data, bytes_len);
    json_t *views = json_object_get(doc, "bufferViews"), *accs = json_object_get(doc, "accessors");
    json_t *v = json_pack("{s:i,s:I,s:I}", "buffer", 0, "byteOffset", (json_int_t)at, "byteLength",
                          (json_int_t)bytes_len);
    if (target) json_object_set_new(v, "target", json_integer(target));
    json_array_append_new(views, v);
    json_t *a = json_pack("{s:I,s:i,s:i,s:s}", "bufferView", (json_int_t)json_array_size(views) - 1,
                          "componentType", ctype, "count", count, "type", type);
    if (mn) {
        json_object_set_new(a, "min", json_pack("[f,f,f]", (double)mn[0], (double)mn[1], (double)mn[2]));
        json_object_set_new(a, "max", json_pack("[f,f,f]", (double)mx[0], (double)mx[1], (double)mx[2]));
    }
    json_array_append_new(accs, a);
    return (int)json_array_size(accs) - 1;
}

static int vec3_accessor(json_t *doc, bytes *b, const float *v, int n, int with_bounds) {
    float mn[3] = {INFINITY, INFINITY, INFINITY}, mx[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) mn[k] = fminf(mn[k], v[3 * i + k]), mx[k] = fmaxf(mx[k], v[3 * i + k]);
    return accessor(doc, b, v, sizeof(float) * 3 * (size_t)n, 5126, "VEC3", n, 34962, with_bounds ? mn : NULL,
                    with_bounds ? mx : NULL);
}

/* Unit quaternion (x, y, z, w) of a row-major rotation matrix. */
static void quat_of(const double *R, double *q) {
    double t = R[0] + R[4] + R[8];
    if (t > 0) {
        double s = 2 * sqrt(t + 1);
        q[3] = 0.25 * s, q[0] = (R[7] - R[5]) / s, q[1] = (R[2] - R[6]) / s, q[2] = (R[3] - R[1]) / s;
    } else if (R[0] > R[4] && R[0] > R[8]) {
        double s = 2 * sqrt(1 + R[0] - R[4] - R[8]);
        q[3] = (R[7] - R[5]) / s, q[0] = 0.25 * s, q[1] = (R[1] + R[3]) / s, q[2] = (R[2] + R[6]) / s;
    } else if (R[4] > R[8]) {
        double s = 2 * sqrt(1 + R[4] - R[0] - R[8]);
        q[3] = (R[2] - R[6]) / s, q[0] = (R[1] + R[3]) / s, q[1] = 0.25 * s, q[2] = (R[5] + R[7]) / s;
    } else {
        double s = 2 * sqrt(1 + R[8] - R[0] - R[4]);
        q[3] = (R[3] - R[1]) / s, q[0] = (R[2] + R[6]) / s, q[1] = (R[5] + R[7]) / s, q[2] = 0.25 * s;
    }
    double n = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    for (int i = 0; i < 4; i++) q[i] /= n;
}

/* The rotation the quaternion stands for (row-major): the node's own, so
 * that the keypoints are placed with the transforms a viewer computes. */
static void rot_of(const double *q, double *R) {
    double x = q[0], y = q[1], z = q[2], w = q[3];
    R[0] = 1 - 2 * (y * y + z * z), R[1] = 2 * (x * y - z * w), R[2] = 2 * (x * z + y * w);
    R[3] = 2 * (x * y + z * w), R[4] = 1 - 2 * (x * x + z * z), R[5] = 2 * (y * z - x * w);
    R[6] = 2 * (x * z - y * w), R[7] = 2 * (y * z + x * w), R[8] = 1 - 2 * (x * x + y * y);
}

static const char *const JOINT_NAMES[HM_NJ] = {"wrist",  "index1", "index2", "index3", "middle1", "middle2",
                                               "middle3", "pinky1", "pinky2", "pinky3", "ring1",  "ring2",
                                               "ring3",  "thumb1", "thumb2", "thumb3"};
static const char *const KP_NAMES[HM_NKP] = {
    "wrist",   "thumb1", "thumb2", "thumb3", "thumb4", "index1", "index2", "index3", "index4", "middle1", "middle2",
    "middle3", "middle4", "ring1", "ring2", "ring3",  "ring4",  "pinky1", "pinky2", "pinky3", "pinky4"};

/* One hand: its nodes, mesh and skin appended to doc and b; *root_node
 * (when given) is its hand node, the joints the 16 nodes after it.
 * correctives 0: no morph target (an animation, whose correctives would
 * change with every pose). */
static int add_hand(json_t *doc, bytes *b, const hm_mano *mn, const int32_t *faces, int nf, const hamer_hand *h,
                    int k, int correctives, int *root_node) {
    int right = h->box.is_right != 0;
    double sx = right ? 1 : -1;  /* left hands: the mirror image, x negated */
    /* MANO runs on a right hand: a left hand's rotations mirrored back */
    float params[9 * HM_NJ + HM_NB];
    const float *Rs[HM_NJ];
    for (int j = 0; j < HM_NJ; j++) Rs[j] = j ? h->hand_pose + 9 * (j - 1) : h->global_orient;
    for (int j = 0; j < HM_NJ; j++)
        for (int e = 0; e < 9; e++) {
            int r = e / 3, c = e % 3;
            double m = right || (r == 0) == (c == 0) ? 1 : -1;  /* M R M, M = diag(-1,1,1) */
            params[9 * j + e] = (float)(m * Rs[j][e]);
        }
    memcpy(params + 9 * HM_NJ, h->betas, sizeof h->betas);
    double J[HM_NJ * 3], *vs = malloc(sizeof(double) * 3 * HM_NV), *vp = malloc(sizeof(double) * 3 * HM_NV);
    float *bind = malloc(sizeof(float) * 3 * HM_NV), *delta = malloc(sizeof(float) * 3 * HM_NV);
    float *nrm = calloc(3 * HM_NV, sizeof(float)), *wts = malloc(sizeof(float) * 4 * HM_NV);
    uint8_t *jts = malloc(4 * HM_NV);
    uint16_t *idx = malloc(sizeof(uint16_t) * 3 * (size_t)nf);
    int rc = 0;
    if (!vs || !vp || !bind || !delta || !nrm || !wts || !jts || !idx) {
        rc = hm_err(HM_E_NOMEM, "out of memory writing a GLB");
        goto done;
    }
    hm_mano_rest(mn, params, vs, J, vp);
    for (int v = 0; v < HM_NV; v++)
        for (int c = 0; c < 3; c++) {
            double m = c == 0 ? sx : 1;
            bind[3 * v + c] = (float)(m * vs[3 * v + c]);
            delta[3 * v + c] = (float)(m * (vp[3 * v + c] - vs[3 * v + c]));
        }
    for (int j = 0; j < HM_NJ; j++) J[3 * j] *= sx;
    /* faces: right-hand winding; a mirrored hand's reversed */
    for (int f = 0; f < nf; f++) {
        int a = faces[3 * f], bb = faces[3 * f + (right ? 1 : 2)], c = faces[3 * f + (right ? 2 : 1)];
        idx[3 * f] = (uint16_t)a, idx[3 * f + 1] = (uint16_t)bb, idx[3 * f + 2] = (uint16_t)c;
        float e1[3], e2[3], n[3];
        for (int i = 0; i < 3; i++) e1[i] = bind[3 * bb + i] - bind[3 * a + i], e2[i] = bind[3 * c + i] - bind[3 * a + i];
        n[0] = e1[1] * e2[2] - e1[2] * e2[1], n[1] = e1[2] * e2[0] - e1[0] * e2[2], n[2] = e1[0] * e2[1] - e1[1] * e2[0];
        for (int i = 0; i < 3; i++) nrm[3 * a + i] += n[i], nrm[3 * bb + i] += n[i], nrm[3 * c + i] += n[i];
    }
    for (int v = 0; v < HM_NV; v++) {
        float *n = nrm + 3 * v, l = sqrtf(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
        if (l > 0) n[0] /= l, n[1] /= l, n[2] /= l;
        else n[0] = 0, n[1] = 1, n[2] = 0;
    }
    /* the 4 largest weights, renormalised */
    for (int v = 0; v < HM_NV; v++) {
        const float *w = mn->lbs_weights + (size_t)v * HM_NJ;
        int top[4] = {-1, -1, -1, -1};
        for (int s = 0; s < 4; s++)
            for (int j = 0; j < HM_NJ; j++) {
                int taken = 0;
                for (int t = 0; t < s; t++) taken |= top[t] == j;
                if (!taken && w[j] > 0 && (top[s] < 0 || w[j] > w[top[s]])) top[s] = j;
            }
        double sum = 0;
        for (int s = 0; s < 4; s++) sum += top[s] >= 0 ? w[top[s]] : 0;
        for (int s = 0; s < 4; s++) {
            jts[4 * v + s] = (uint8_t)(top[s] >= 0 ? top[s] : 0);
            wts[4 * v + s] = top[s] >= 0 && sum > 0 ? (float)(w[top[s]] / sum) : 0.0f;
        }
    }
    int a_pos = vec3_accessor(doc, b, bind, HM_NV, 1), a_nrm = vec3_accessor(doc, b, nrm, HM_NV, 0);
    int a_delta = correctives ? vec3_accessor(doc, b, delta, HM_NV, 1) : -1;
    int a_jts = accessor(doc, b, jts, 4 * HM_NV, 5121, "VEC4", HM_NV, 34962, NULL, NULL);
    int a_wts = accessor(doc, b, wts, sizeof(float) * 4 * HM_NV, 5126, "VEC4", HM_NV, 34962, NULL, NULL);
    int a_idx = accessor(doc, b, idx, sizeof(uint16_t) * 3 * (size_t)nf, 5123, "SCALAR", 3 * nf, 34963, NULL, NULL);
    float ibm[HM_NJ * 16];
    memset(ibm, 0, sizeof ibm);
    for (int j = 0; j < HM_NJ; j++) {
        float *m = ibm + 16 * j;
        m[0] = m[5] = m[10] = m[15] = 1;
        for (int c = 0; c < 3; c++) m[12 + c] = (float)-J[3 * j + c];
    }
    int a_ibm = accessor(doc, b, ibm, sizeof ibm, 5126, "MAT4", HM_NJ, 0, NULL, NULL);

    json_t *nodes = json_object_get(doc, "nodes");
    int base = (int)json_array_size(nodes);  /* hand root, then the 16 joints, the 21 keypoints, the mesh */
    char name[64];
    snprintf(name, sizeof name, "hand_%d_%s", k, right ? "right" : "left");
    /* the place in the photo's camera; the demo's for a hand without it */
    const float *t = h->focal_source != HAMER_FOCAL_NONE ? h->cam_t : h->cam_t_full, *tf = h->cam_t_full;
    json_t *root = json_pack("{s:s,s:[f,f,f],s:[i,i,i,i],s:[i],s:{s:b,s:[f,f,f],s:[f,f,f]}}", "name", name,
                             "translation", (double)t[0], -(double)t[1], -(double)t[2], "rotation", 1, 0, 0, 0,
                             "children", base + 1, "extras", "is_right", right, "cam_t", (double)t[0], (double)t[1],
                             (double)t[2], "cam_t_full", (double)tf[0], (double)tf[1], (double)tf[2]);
    json_array_append_new(nodes, root);
    /* joints: the global transforms (as the quaternions give them) for the keypoints */
    double G[HM_NJ][12];
    json_t *jn[HM_NJ];
    for (int j = 0; j < HM_NJ; j++) {
        int p = mn->parents[j];
        double T[3], Rd[9], q[4];
        for (int c = 0; c < 3; c++) T[c] = p < 0 ? J[3 * j + c] : J[3 * j + c] - J[3 * p + c];
        for (int e = 0; e < 9; e++) Rd[e] = Rs[j][e];
        quat_of(Rd, q);
        rot_of(q, Rd);
        snprintf(name, sizeof name, "hand_%d_%s", k, JOINT_NAMES[j]);
        jn[j] = json_pack("{s:s,s:[f,f,f],s:[f,f,f,f]}", "name", name, "translation", T[0], T[1], T[2], "rotation",
                          q[0], q[1], q[2], q[3]);
        json_array_append_new(nodes, jn[j]);
        double L[12];
        for (int r = 0; r < 3; r++) {
            for (int c = 0; c < 3; c++) L[4 * r + c] = Rd[3 * r + c];
            L[4 * r + 3] = T[r];
        }
        if (p < 0) {
            memcpy(G[j], L, sizeof L);
        } else {
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 4; c++) {
                    double v = G[p][4 * r] * L[c] + G[p][4 * r + 1] * L[4 + c] + G[p][4 * r + 2] * L[8 + c];
                    G[j][4 * r + c] = v + (c == 3 ? G[p][4 * r + 3] : 0);
                }
            json_t *ch = json_object_get(jn[p], "children");
            if (!ch) json_object_set_new(jn[p], "children", ch = json_array());
            json_array_append_new(ch, json_integer(base + 1 + j));
        }
    }
    /* keypoints: under the joint they move with (a fingertip: the joint
     * with the largest weight at its vertex), at RESULT.json's position */
    for (int o = 0; o < HM_NKP; o++) {
        int s = mn->joint_map[o], j = s;
        if (s >= HM_NJ) {
            const float *w = mn->lbs_weights + (size_t)mn->tips[s - HM_NJ] * HM_NJ;
            j = 0;
            for (int i = 1; i < HM_NJ; i++)
                if (w[i] > w[j]) j = i;
        }
        const float *x = h->keypoints_3d + 3 * o;
        double d[3], l[3];
        for (int c = 0; c < 3; c++) d[c] = x[c] - G[j][4 * c + 3];
        for (int c = 0; c < 3; c++) l[c] = G[j][c] * d[0] + G[j][4 + c] * d[1] + G[j][8 + c] * d[2];  /* R^T d */
        snprintf(name, sizeof name, "hand_%d_kp%02d_%s", k, o, KP_NAMES[o]);
        json_array_append_new(nodes, json_pack("{s:s,s:[f,f,f]}", "name", name, "translation", l[0], l[1], l[2]));
        json_t *ch = json_object_get(jn[j], "children");
        if (!ch) json_object_set_new(jn[j], "children", ch = json_array());
        json_array_append_new(ch, json_integer(base + 1 + HM_NJ + o));
    }
    json_t *meshes = json_object_get(doc, "meshes"), *skins = json_object_get(doc, "skins");
    json_t *joints = json_array();
    for (int j = 0; j < HM_NJ; j++) json_array_append_new(joints, json_integer(base + 1 + j));
    json_array_append_new(skins, json_pack("{s:i,s:i,s:o}", "inverseBindMatrices", a_ibm, "skeleton", base, "joints",
                                           joints));
    snprintf(name, sizeof name, "hand_%d_mesh", k);
    if (correctives)
        json_array_append_new(
            meshes, json_pack("{s:s,s:[{s:{s:i,s:i,s:i,s:i},s:i,s:i,s:[{s:i}]}],s:[f],s:{s:[s]}}", "name", name,
                              "primitives", "attributes", "POSITION", a_pos, "NORMAL", a_nrm, "JOINTS_0", a_jts,
                              "WEIGHTS_0", a_wts, "indices", a_idx, "material", 0, "targets", "POSITION",
                              a_delta, "weights", 1.0, "extras", "targetNames", "pose_correctives"));
    else
        json_array_append_new(
            meshes, json_pack("{s:s,s:[{s:{s:i,s:i,s:i,s:i},s:i,s:i}]}", "name", name, "primitives", "attributes",
                              "POSITION", a_pos, "NORMAL", a_nrm, "JOINTS_0", a_jts, "WEIGHTS_0", a_wts,
                              "indices", a_idx, "material", 0));
    if (root_node) *root_node = base;
    json_array_append_new(nodes, json_pack("{s:s,s:I,s:I}", "name", name, "mesh",
                                           (json_int_t)json_array_size(meshes) - 1, "skin",
                                           (json_int_t)json_array_size(skins) - 1));
    json_t *roots = json_object_get(json_array_get(json_object_get(doc, "scenes"), 0), "nodes");
    json_array_append_new(roots, json_integer(base));
    json_array_append_new(roots, json_integer(base + 1 + HM_NJ + HM_NKP));
    if (b->oom) rc = hm_err(HM_E_NOMEM, "out of memory writing a GLB");
done:
    free(vs), free(vp), free(bind), free(delta), free(nrm), free(wts), free(jts), free(idx);
    return rc;
}

/* The document every file starts from: the asset, one scene, one material. */
static json_t *doc_new(const char *generator) {
    return json_pack("{s:{s:s,s:s},s:i,s:[{s:s,s:[]}],s:[],s:[],s:[],s:[],s:[],s:[],s:[{s:s,s:{s:[f,f,f,f],"
                     "s:f,s:f}}]}",
                     "asset", "version", "2.0", "generator", generator, "scene", 0, "scenes", "name", "hands", "nodes",
                     "nodes", "meshes", "skins", "accessors", "bufferViews", "buffers", "materials", "name", "hand",
                     "pbrMetallicRoughness", "baseColorFactor", 166 / 255.0, 189 / 255.0, 219 / 255.0, 1.0,
                     "metallicFactor", 0.0, "roughnessFactor", 0.6);
}

/* doc and b as the GLB's two chunks (doc and b.p consumed). 0 or HM_E_NOMEM. */
static int pack(json_t *doc, bytes *b, int empty, uint8_t **out, size_t *out_len) {
    if (empty) {
        /* no hand: a valid file with an empty scene, no buffer */
        json_object_del(doc, "buffers"), json_object_del(doc, "bufferViews"), json_object_del(doc, "accessors");
        json_object_del(doc, "meshes"), json_object_del(doc, "skins"), json_object_del(doc, "materials");
        json_object_del(doc, "nodes");
        json_object_del(json_array_get(json_object_get(doc, "scenes"), 0), "nodes");
    } else {
        json_array_append_new(json_object_get(doc, "buffers"), json_pack("{s:I}", "byteLength", (json_int_t)b->n));
    }
    char *text = b->oom ? NULL : json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(doc);
    size_t jl = text ? strlen(text) : 0, jpad = (jl + 3) & ~(size_t)3;
    size_t total = 12 + 8 + jpad + (b->n ? 8 + b->n : 0);
    uint8_t *g = text ? malloc(total) : NULL;
    if (!g) {
        free(b->p), free(text);
        return hm_err(HM_E_NOMEM, "out of memory writing a GLB");
    }
    uint32_t hdr[5] = {0x46546C67u, 2, (uint32_t)total, (uint32_t)jpad, 0x4E4F534Au};  /* "glTF", v2; "JSON" */
    memcpy(g, hdr, sizeof hdr);
    memcpy(g + 20, text, jl);
    memset(g + 20 + jl, ' ', jpad - jl);
    if (b->n) {
        uint32_t bh[2] = {(uint32_t)b->n, 0x004E4942u};  /* "BIN\0" */
        memcpy(g + 20 + jpad, bh, sizeof bh);
        memcpy(g + 28 + jpad, b->p, b->n);
    }
    free(b->p), free(text);
    *out = g, *out_len = total;
    return 0;
}

int hm_glb_hands(const hm_mano *mn, const hamer_hand *hands, int n, const char *generator, uint8_t **out,
                 size_t *out_len) {
    *out = NULL, *out_len = 0;
    int32_t faces[(HM_NF + HM_MESH_EXTRA_FACES) * 3];
    int nf = hm_mesh_close_hand(mn->faces, HM_NF, HM_NV, faces);
    if (nf < 0) return nf;
    json_t *doc = doc_new(generator);
    if (!doc) return hm_err(HM_E_NOMEM, "out of memory writing a GLB");
    bytes b = {0};
    int rc = 0, k = 0;
    for (int i = 0; i < n && !rc; i++)
        if (hands[i].ok) rc = add_hand(doc, &b, mn, faces, nf, &hands[i], k++, 1, NULL);
    if (rc) {
        json_decref(doc);
        free(b.p);
        return rc;
    }
    return pack(doc, &b, k == 0, out, out_len);
}

/* ---- animation: one skinned hand per track (recorded by anim.c), its
 * joints' rotations and its place over the frames it was tracked ---- */

/* Track k's channels (its nodes named hand_K_...): a hand built from its
 * first sample with the track's betas (the bind shape), then a LINEAR
 * sampler per joint rotation and for the hand node's translation over the
 * track's times, and a STEP sampler of the hand node's scale (1 while
 * tracked, 0 before and from a frame (frame_dt) after its last sample). */
static int add_track(json_t *doc, bytes *b, const hm_mano *mn, const int32_t *faces, int nf, const hm_anim_rec *s,
                     int n, const float *betas, int k, json_t *samplers, json_t *channels, double frame_dt) {
    hamer_hand hh;  /* the track's first frame, as add_hand takes it */
    memset(&hh, 0, sizeof hh);
    hh.ok = 1, hh.box.is_right = s[0].is_right;
    memcpy(hh.global_orient, s[0].R, sizeof hh.global_orient);
    memcpy(hh.hand_pose, s[0].R + 9, sizeof hh.hand_pose);
    memcpy(hh.betas, betas, sizeof hh.betas);
    memcpy(hh.cam_t_full, s[0].cam_t, sizeof hh.cam_t_full);
    memcpy(hh.keypoints_3d, s[0].kp3d, sizeof hh.keypoints_3d);
    int root, rc = add_hand(doc, b, mn, faces, nf, &hh, k, 0, &root);
    if (rc) return rc;
    float *t = malloc(sizeof(float) * (size_t)n), *q = malloc(sizeof(float) * 4 * (size_t)n);
    float *tr = malloc(sizeof(float) * 3 * (size_t)n);
    if (!t || !q || !tr) {
        free(t), free(q), free(tr);
        return hm_err(HM_E_NOMEM, "out of memory writing a GLB");
    }
    for (int i = 0; i < n; i++) {
        t[i] = (float)s[i].time;
        tr[3 * i] = s[i].cam_t[0], tr[3 * i + 1] = -s[i].cam_t[1], tr[3 * i + 2] = -s[i].cam_t[2];
    }
    float tmin = t[0], tmax = t[n - 1];
    json_t *accs = json_object_get(doc, "accessors");
    int a_t = accessor(doc, b, t, sizeof(float) * (size_t)n, 5126, "SCALAR", n, 0, NULL, NULL);
    json_t *ta = json_array_get(accs, (size_t)a_t);
    json_object_set_new(ta, "min", json_pack("[f]", (double)tmin));
    json_object_set_new(ta, "max", json_pack("[f]", (double)tmax));
    /* channel: sampler over a_t with output `out`, on node's `path` */
#define CHANNEL(out_acc, node, path, interp)                                                                       \
    do {                                                                                                          \
        json_array_append_new(samplers, json_pack("{s:i,s:i,s:s}", "input", a_t, "output", (out_acc),             \
                                                  "interpolation", (interp)));                                   \
        json_array_append_new(channels, json_pack("{s:I,s:{s:i,s:s}}", "sampler",                                 \
                                                  (json_int_t)json_array_size(samplers) - 1, "target", "node",   \
                                                  (node), "path", (path)));                                      \
    } while (0)
    for (int j = 0; j < HM_NJ; j++) {
        double prev[4] = {0, 0, 0, 1};
        for (int i = 0; i < n; i++) {
            double R[9], qq[4];
            for (int e = 0; e < 9; e++) R[e] = s[i].R[9 * j + e];
            quat_of(R, qq);
            /* the shorter way between samples: q and -q are one rotation */
            if (i && qq[0] * prev[0] + qq[1] * prev[1] + qq[2] * prev[2] + qq[3] * prev[3] < 0)
                for (int c = 0; c < 4; c++) qq[c] = -qq[c];
            for (int c = 0; c < 4; c++) q[4 * i + c] = (float)qq[c], prev[c] = qq[c];
        }
        int a_q = accessor(doc, b, q, sizeof(float) * 4 * (size_t)n, 5126, "VEC4", n, 0, NULL, NULL);
        CHANNEL(a_q, root + 1 + j, "rotation", "LINEAR");
    }
    int a_tr = accessor(doc, b, tr, sizeof(float) * 3 * (size_t)n, 5126, "VEC3", n, 0, NULL, NULL);
    CHANNEL(a_tr, root, "translation", "LINEAR");
    /* visibility: scale 0 outside the track (STEP keys at 0, tmin, a frame after tmax) */
    float vt[3], vs[9] = {0, 0, 0, 1, 1, 1, 0, 0, 0};
    int nv = 0, off = 0;
    if (tmin > 0) vt[nv++] = 0;
    else off = 3;
    vt[nv++] = tmin;
    vt[nv++] = (float)(s[n - 1].time + frame_dt);
    int a_vt = accessor(doc, b, vt, sizeof(float) * (size_t)nv, 5126, "SCALAR", nv, 0, NULL, NULL);
    json_t *va = json_array_get(accs, (size_t)a_vt);
    json_object_set_new(va, "min", json_pack("[f]", (double)vt[0]));
    json_object_set_new(va, "max", json_pack("[f]", (double)vt[nv - 1]));
    int a_vs = accessor(doc, b, vs + off, sizeof(float) * 3 * (size_t)nv, 5126, "VEC3", nv, 0, NULL, NULL);
    json_array_append_new(samplers, json_pack("{s:i,s:i,s:s}", "input", a_vt, "output", a_vs, "interpolation", "STEP"));
    json_array_append_new(channels, json_pack("{s:I,s:{s:i,s:s}}", "sampler", (json_int_t)json_array_size(samplers) - 1,
                                              "target", "node", root, "path", "scale"));
#undef CHANNEL
    free(t), free(q), free(tr);
    return b->oom ? hm_err(HM_E_NOMEM, "out of memory writing a GLB") : 0;
}

int hm_glb_anim_write(hm_anim *a, const hm_mano *mn, const char *generator, uint8_t **out, size_t *out_len) {
    *out = NULL, *out_len = 0;
    int32_t faces[(HM_NF + HM_MESH_EXTRA_FACES) * 3];
    int nf = hm_mesh_close_hand(mn->faces, HM_NF, HM_NV, faces);
    if (nf < 0) return nf;
    json_t *doc = doc_new(generator);
    json_t *samplers = json_array(), *channels = json_array();
    hm_anim_rec *s = NULL;
    size_t cap = 0;
    bytes b = {0};
    int rc = 0, k = 0;
    if (!doc || !samplers || !channels) rc = hm_err(HM_E_NOMEM, "out of memory writing a GLB");
    /* a frame's duration: where a hand hides after its last sample */
    const double fps = hm_anim_fps(a);
    int64_t first = 0, last = 0, step = 1;
    hm_anim_frames(a, &first, &last, &step);
    const double frame_dt = fps > 0 ? (double)step / fps : 1.0 / 30;
    /* one track at a time: its samples in time order */
    for (int tr = 0; tr < hm_anim_tracks(a) && !rc; tr++) {
        int n = 0;
        float betas[HM_NB];
        rc = hm_anim_track(a, mn, tr, &s, &cap, &n, betas);
        if (!rc && n) rc = add_track(doc, &b, mn, faces, nf, s, n, betas, tr, samplers, channels, frame_dt), k++;
    }
    free(s);
    if (!rc && k) {
        json_t *anim = json_pack("{s:s,s:o,s:o}", "name", "video", "channels", channels, "samplers", samplers);
        if (fps > 0) {
            /* the clip's rate where importers keep it: Blender makes the scene's extras its custom
             * properties, three.js the scene's userData */
            json_object_set_new(anim, "extras", json_pack("{s:f,s:I,s:I}", "fps", fps, "frame_start",
                                                          (json_int_t)first, "frame_end", (json_int_t)last));
            json_object_set_new(json_array_get(json_object_get(doc, "scenes"), 0), "extras",
                                json_pack("{s:f,s:I,s:I}", "fps", fps, "frame_start", (json_int_t)first, "frame_end",
                                          (json_int_t)last));
        }
        json_object_set_new(doc, "animations", json_pack("[o]", anim));
    } else {
        json_decref(samplers), json_decref(channels);
    }
    if (rc) {
        json_decref(doc);
        free(b.p);
        return rc;
    }
    return pack(doc, &b, k == 0, out, out_len);
}
