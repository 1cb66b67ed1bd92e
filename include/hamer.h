/* hamer.h - HaMeR 3D hand-mesh recovery in C: the one public header.
 *
 * A hamer_model is loaded once from the released checkpoint (hamer.ckpt,
 * a PyTorch Lightning torch.save zip) or a packed model file and is
 * read-only afterwards. Each thread doing inference owns a hamer_state
 * (activation buffers + thread pool), created once; a forward allocates
 * nothing.
 *
 * Lifetimes and threads:
 *   - a model outlives every state made from it: free the states first,
 *     then the model (hamer_model_free does not free states);
 *   - a model may be used from any number of threads at once (it is never
 *     written after loading); a state by one thread at a time (each
 *     thread its own state, or a lock around a shared one);
 *   - functions without a model or state (image decoding, JSON, version,
 *     strerror) are thread-safe; hamer_log_set is not: call it before
 *     other threads use the library;
 *   - memory returned by the library is freed with hamer_free.
 *
 * Errors: functions return HAMER_OK (0) or a negative hamer_status, or
 * NULL; the one-line reason is in hamer_last_error() and the code in
 * hamer_last_error_code() (per calling thread). Every function checks its
 * handles and pointers: NULL where a handle is required is HAMER_E_ARG,
 * never a crash.
 *
 * Parameter structs (every hamer_*_params) can grow without breaking
 * programs built against an older header: each ends with
 * `uint8_t reserved[...]`, HAMER_PARAMS_RESERVED (64) bytes when the struct
 * was introduced. A later version takes a new field from the front of that
 * space and shrinks the array by as much, so within a major version the
 * struct's size and every field's offset stay the same, and the new field's
 * zero value keeps the old behaviour. Start from hamer_*_default_params()
 * (it zeroes the reserved bytes) or zero the whole struct. Every function
 * taking params refuses non-zero reserved bytes with HAMER_E_ARG and a
 * message naming the struct ("hamer_detect_params: reserved bytes must be
 * zero ..."), before doing anything else: a program built against a newer
 * header that sets a field this library does not have fails instead of
 * having it ignored. In params, yes/no fields are bool and choices are
 * named enums (int-sized); result records (hamer_box, hamer_hand,
 * hamer_detection, ...) keep int 0/1 for their yes/no fields.
 *
 * The result structs a caller allocates and the library fills (hamer_hand,
 * hamer_timings) grow by the same rule: each ends with `uint8_t
 * reserved[...]`, HAMER_HAND_RESERVED (4096) and HAMER_TIMINGS_RESERVED
 * (64) bytes when the rule came in, and a later version takes a new field
 * from the front of that space, so the size and every older offset stay.
 * The library writes the reserved bytes as zero. A field taken from that
 * space is zero when filled by a library older than the field, so its
 * zero value means "not computed" (an enum's 0 is its NONE), never a
 * result: a program built against a newer header reads the zero, not
 * garbage, from an older library. The fields taken so far are marked
 * "(from reserved)" below; tests/c/test_params_abi.c checks the sizes and
 * offsets.
 */
#ifndef HAMER_H
#define HAMER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hamer_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Symbols of the shared library: only the functions declared here are
 * exported (it is built with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define HAMER_API __attribute__((visibility("default")))
#else
#define HAMER_API
#endif

#define HAMER_CROP_H 256
#define HAMER_CROP_W 192
#define HAMER_N_VERTS 778
#define HAMER_N_FACES 1538
#define HAMER_N_KP 21
#define HAMER_N_PARAMS 157    /* 16 row-major 3x3 rotations, 10 betas, 3 cam */
#define HAMER_FOCAL 5000.0f   /* pixels, for a 256-pixel crop */

typedef enum hamer_status {
    HAMER_OK = 0,
    HAMER_E_ARG = -1,         /* bad argument (shape, batch, NULL, ...) */
    HAMER_E_IO = -2,          /* file missing or unreadable */
    HAMER_E_FORMAT = -3,      /* malformed file */
    HAMER_E_SHAPE = -4,       /* checkpoint tensor of wrong shape/dtype/layout */
    HAMER_E_NOMEM = -5,
    HAMER_E_UNSUPPORTED = -6, /* valid request this build/CPU cannot do */
    HAMER_E_NOMANO = -7,      /* mesh output requested but no MANO buffers */
    HAMER_E_CANCELLED = -8,   /* the state's cancel callback asked to stop */
} hamer_status;
#define HAMER_N_STATUS 9          /* codes 0 .. -8 */

/* Largest box scale factor (hamer_predict_params.rescale): the crop then
 * covers 16 times the box, already far beyond any use. */
#define HAMER_MAX_RESCALE 16.0

/* Size of the reserved space ending each *_params struct when it was
 * introduced (see "Parameter structs" above). */
#define HAMER_PARAMS_RESERVED 64
/* Size of the reserved space ending hamer_hand and hamer_timings when the
 * rule came in (see "Parameter structs" above). */
#define HAMER_HAND_RESERVED 4096
#define HAMER_TIMINGS_RESERVED 64

typedef struct hamer_model hamer_model;
typedef struct hamer_state hamer_state;

/* FP32 computes the PyTorch model to float precision. FAST is the gated
 * low-precision scheme for the backbone's big matmuls (hamer_model_get_info
 * names it); loading fails if this CPU cannot run it. */
typedef enum { HAMER_PRECISION_FP32 = 0, HAMER_PRECISION_FAST = 1 } hamer_precision;

typedef struct {
    const char *mano_path;  /* optional .npz with MANO buffers (no "mano." prefix);
                               used when the checkpoint lacks mano.* */
    bool progress;          /* report load progress (HAMER_LOG_PROGRESS messages) */
    hamer_precision precision; /* default HAMER_PRECISION_FP32 */
    bool no_cache;          /* a checkpoint is neither looked up in nor written to the
                               packed-model cache (see hamer_model_load) */
    const char *device;     /* where the model runs: "cpu" (also NULL or "", the default),
                               or "NAME" / "NAME:INDEX" of another backend this build has
                               (hamer_backend_get lists them: "cuda", "cuda:1"). A device that
                               is unknown or cannot run here fails the load with the reason;
                               nothing falls back to another device. (Taken from the reserved
                               space: 7 bytes of alignment and the pointer's 8.) */
    uint8_t reserved[HAMER_PARAMS_RESERVED - 15]; /* zero (hamer_model_default_params) */
} hamer_model_params;

/* A result struct: it ends with reserved space the library writes as zero
 * and later versions take fields from, as hamer_hand does. */
typedef struct {
    int vit_depth, vit_dim, vit_heads, vit_mlp, n_tokens;      /* 32, 1280, 16, 5120, 192 */
    int head_depth, head_dim, head_heads, head_dim_head, head_mlp; /* 6, 1024, 8, 64, 1024 */
    int has_mano;
    const char *isa;        /* CPU kernel ISA in use: "avx512", "avx2", "neon", "scalar" */
    hamer_precision precision; /* the precision the model was loaded with */
    const char *scheme;     /* what that precision is inside, e.g. "fp32" */
    const char *device;     /* the device it runs on: "cpu", "cuda:0" (owned by the model) */
    uint8_t reserved[64];   /* zero */
} hamer_model_info;

/* The backends this build has (a backend is where a forward runs: "cpu",
 * "cuda"). A result struct (reserved space written as zero). */
typedef struct {
    const char *name;       /* the device name: "cpu", "cuda" */
    int n_devices;          /* its devices usable here; 0: unavailable (why says why) */
    const char *why;        /* why it is unavailable, or NULL */
    const char *info;       /* one line on what it runs ("kernels: avx512; ...") */
    uint8_t reserved[64];   /* zero */
} hamer_backend_info;

/* Per-crop outputs; each pointer is caller-owned, sized for B crops, and may
 * be NULL to skip that output. vertices / keypoints need MANO buffers. */
typedef struct {
    float *params;        /* [B,157] */
    float *pred_cam;      /* [B,3]  (s, tx, ty) */
    float *pred_cam_t;    /* [B,3]  (tx, ty, 2*5000/(256*s+1e-9)) */
    float *vertices;      /* [B,778,3] metres, root-relative */
    float *keypoints_3d;  /* [B,21,3] OpenPose order */
    float *keypoints_2d;  /* [B,21,2] normalised crop units (pixels = 256*k + 128) */
} hamer_output;

HAMER_API hamer_model_params hamer_model_default_params(void);

/* Load a checkpoint, or a packed model file (hamer_model_save_packed; told
 * apart by its first bytes). A packed file is mmapped read-only and used
 * in place; it loads only in the precision it was packed in, on a CPU and
 * active ISA (HAMER_ISA) and low-precision variant (HAMER_LOWP) matching
 * the ones it was packed for, otherwise the error says to convert again.
 * A checkpoint goes through the packed-model cache unless params->no_cache
 * or the environment's HAMER_NO_CACHE (any value but "0") says otherwise:
 * the first load of a checkpoint in a precision writes its packed form to
 * $HAMER_CACHE_DIR, else $XDG_CACHE_HOME/hamer, else ~/.cache/hamer
 * (at most $HAMER_CACHE_MAX_MB, default 8192, least recently used entries
 * removed first); later loads of the same, unchanged checkpoint map that
 * entry after verifying it in full. A cache that cannot be written is a
 * HAMER_LOG_WARN message, not an error; an entry that fails any check is
 * rebuilt. NULL on failure (see hamer_last_error()). */
HAMER_API hamer_model *hamer_model_load(const char *path, const hamer_model_params *params);
/* Write the loaded model as a packed model file at path: its weights as
 * they are in memory (kernel layout of this machine's ISA, in the model's
 * precision), 64-byte aligned sections with XXH3 checksums, a versioned
 * header. Written to a temporary file beside path and renamed, so path is
 * either the complete new file or untouched. HAMER_OK or a negative code. */
HAMER_API int hamer_model_save_packed(const hamer_model *model, const char *path);
HAMER_API void hamer_model_free(hamer_model *model);
/* HAMER_OK, or HAMER_E_ARG when model or info is NULL. */
HAMER_API int hamer_model_get_info(const hamer_model *model, hamer_model_info *info);
/* The MANO triangle list [1538*3] (right hand winding), or NULL without MANO. */
HAMER_API const int32_t *hamer_model_get_faces(const hamer_model *model);

/* Per-thread inference state for up to max_batch crops per internal pass
 * (larger batches are processed in passes) and n_threads worker threads
 * (0 = number of online CPUs), on the model's device. NULL on failure. */
HAMER_API hamer_state *hamer_state_new(const hamer_model *model, int max_batch, int n_threads);

typedef struct {
    int max_batch;          /* crops per internal pass, 1..4096 (default 16) */
    int n_threads;          /* host threads, 0..1024, 0 = online CPUs (default 0) */
    const char *device;     /* NULL (the default): the model's device; otherwise it must name
                               that device ("cpu", "cuda:0"): the weights live there */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_state_default_params) */
} hamer_state_params;

HAMER_API hamer_state_params hamer_state_default_params(void);
/* hamer_state_new with the parameters above. */
HAMER_API hamer_state *hamer_state_new_with_params(const hamer_model *model, const hamer_state_params *params);

/* The backends compiled in: their count, and backend i's description
 * (HAMER_E_ARG for i out of range or info NULL). Strings are constant. */
HAMER_API int hamer_backend_count(void);
HAMER_API int hamer_backend_get(int i, hamer_backend_info *info);
HAMER_API void hamer_state_free(hamer_state *state);

/* Regress B crops. float: [B,3,256,192] normalised ((x/255-mean)/std, RGB);
 * a crop holding a NaN or an infinity is refused (HAMER_E_ARG, the message
 * names the crop index and the first such value) before any work.
 * uint8: [B,256,192,3] RGB (normalisation folded into the patch weights). */
HAMER_API int hamer_regress_f32(hamer_state *state, const float *crops, int B, hamer_output *out);
HAMER_API int hamer_regress_u8(hamer_state *state, const uint8_t *crops, int B, hamer_output *out);

/* ---- Image in, hands out ---- */

#define HAMER_MAX_HANDS 64

typedef struct {
    float bbox[4];          /* x1, y1, x2, y2 in image pixels */
    int is_right;           /* 1 right hand, 0 left hand */
} hamer_box;

typedef enum { HAMER_CROP_WARP = 0, HAMER_CROP_PAD = 1 } hamer_crop_mode;

/* Largest focal length hamer_predict_params.focal_px may give, in pixels. */
#define HAMER_MAX_FOCAL 1e7

typedef struct {
    double rescale;         /* box scale factor, default 2.0 */
    hamer_crop_mode crop_mode;  /* default HAMER_CROP_WARP (the official demo's) */
    /* The camera the photo was taken with (from reserved), for the hands'
     * metric place (hamer_hand.cam_t): its focal length in pixels of this
     * image, (0, HAMER_MAX_FOCAL], or its field of view across the image's
     * longer side in degrees, (0, 180), which gives focal = (max(W, H) / 2) /
     * tan(fov / 2). focal_px wins over fov_deg. 0 (default): not given (a
     * photo job then reads the focal length from the photo's EXIF, else
     * takes the model's own: HAMER_FOCAL / HAMER_CROP_H * max(W, H)). */
    float focal_px;
    float fov_deg;
    uint8_t reserved[HAMER_PARAMS_RESERVED - 8]; /* zero (hamer_predict_default_params) */
} hamer_predict_params;

/* Where the focal length of a hand's camera came from (hamer_hand.focal_source). */
typedef enum {
    HAMER_FOCAL_NONE = 0,    /* not computed (a hand without a result, or an older library) */
    HAMER_FOCAL_DEFAULT = 1, /* the model's own: HAMER_FOCAL / HAMER_CROP_H * max(W, H) */
    HAMER_FOCAL_GIVEN = 2,   /* hamer_predict_params.focal_px or fov_deg */
    HAMER_FOCAL_EXIF = 3     /* the photo's EXIF (a photo job; hamer_exif_focal) */
} hamer_focal_source;

/* One hand's result. Left hands are mirrored back as HaMeR's demo does:
 * vertex / keypoint x negated; rotations mirrored (M R M, M = diag(-1,1,1)). */
typedef struct {
    int ok;                 /* 0: `error` says why this hand has no result */
    char error[256];
    hamer_box box;
    float global_orient[9]; /* row-major 3x3 */
    float hand_pose[15 * 9];
    float betas[10];
    float pred_cam[3];      /* crop camera (s, tx, ty) as predicted */
    float cam_t_full[3];    /* camera translation in the full image */
    float focal_length;     /* 5000/256 * max(W, H) */
    float keypoints_3d[HAMER_N_KP * 3];  /* metres, MANO frame (add cam_t_full for the camera frame) */
    float keypoints_2d[HAMER_N_KP * 2];  /* full-image pixels */
    float vertices[HAMER_N_VERTS * 3];     /* same frame as keypoints_3d */
    double box_center[2], box_size; /* the crop the model saw */
    /* Where the box came from: filled by hamer_predict_detections (detected
     * = 1), zero for boxes given to hamer_predict. */
    struct {
        int detected;
        float score;             /* palm detector score */
        float presence;          /* hand presence (landmark model) */
        float handedness;        /* P(right hand) */
        float landmarks[HAMER_N_KP * 3]; /* x, y image pixels; z relative depth on x's scale */
        int pass;                /* 0 full frame, k > 0 tile level k */
        int source, body, person; /* as in hamer_detection */
    } detection;
    /* ---- The hand in the photo's camera (from reserved). The camera: the
     * focal length focal_px (source focal_source), principal point at the
     * image centre, x right, y down, z forward, metres. cam_t is solved so
     * that keypoints_3d + cam_t projects onto keypoints_2d through it:
     * linear least squares on the 21 keypoints, then Gauss-Newton steps on
     * the pixel error (every keypoint weighed alike). With the model's own
     * focal (HAMER_FOCAL_DEFAULT) it is cam_t_full; with the real one two
     * hands of a photo stand at their true relative depth. The camera-frame
     * vertices are vertices + cam_t. */
    hamer_focal_source focal_source;
    float focal_px;
    float principal_point[2];           /* (W / 2, H / 2), pixels */
    float cam_t[3];                     /* metres, camera frame */
    float keypoints_3d_cam[HAMER_N_KP * 3]; /* keypoints_3d + cam_t */
    float reproj_error;                 /* mean pixel distance, keypoints_3d_cam projected to keypoints_2d */
    float reproj_error_max;             /* the largest of the 21 */
    /* ---- The rotations in other conventions (from reserved), joint 0
     * global_orient, then the 15 of hand_pose in MANO order, all as the
     * rotation matrices above (a left hand's mirrored back). */
    float axis_angle[16 * 3];           /* angle (radians, [0, pi]) times the unit axis */
    float quaternion[16 * 4];           /* unit quaternions (w, x, y, z), w >= 0 */
    /* MANO's PCA coefficients of hand_pose: the least-squares c with
     * hand_mean + c . hand_components = hand_pose's 45 axis-angle values,
     * over the n_pca rows of the model's mano.hand_components (6 in the
     * released checkpoint, 45 in a full MANO file; 0: the model has none, and
     * smplx_hand_pose is not computed either). A left hand's coefficients are
     * its mirror image's (a right hand's) in the right hand's basis, which is
     * MANO_LEFT's in its own, that basis being the mirror of the right one. */
    int n_pca;
    float pca[45];
    /* SMPL-X's right_hand_pose (left_hand_pose for a left hand) for smplx's
     * default flat_hand_mean=False: the 15 axis-angle rotations minus the
     * hand mean (mano.hand_mean, mirrored as (x, -y, -z) for a left hand).
     * With flat_hand_mean=True the pose is axis_angle[3..47] itself. A left
     * hand's values are already mirrored the way SMPL-X's left hand wants. */
    float smplx_hand_pose[45];
    uint8_t reserved[HAMER_HAND_RESERVED - 1100]; /* zero; later fields come from its front */
} hamer_hand;

typedef struct {
    double decode_ms, crop_ms, regress_ms, finalise_ms;
    double detect_ms;       /* hand detection, when the boxes were detected (else 0) */
    uint8_t reserved[HAMER_TIMINGS_RESERVED]; /* zero; later fields come from its front */
} hamer_timings;

HAMER_API hamer_predict_params hamer_predict_default_params(void);

/* Regress every box of an RGB image (w x h, interleaved, 8-bit). A bad box
 * (NaN, empty, outside the image, ...) fails only its own hand (ok = 0 with
 * the reason); the call fails (negative code) for bad arguments, more than
 * HAMER_MAX_HANDS boxes, or a model without MANO buffers. */
HAMER_API int hamer_predict(hamer_state *state, const uint8_t *rgb, int w, int h, const hamer_box *boxes, int n,
                  const hamer_predict_params *params, hamer_hand *hands, hamer_timings *timings);

/* ---- Hand detection (built in: MediaPipe Hands' palm detector and hand
 * landmark model, run by the library's own TFLite executor) ----
 *
 * A hamer_detector holds the two models (read-only, shareable between
 * threads, like a hamer_model); each thread detecting owns a
 * hamer_detect_state (all buffers, allocated once). The models are files
 * installed by scripts/get_detector.sh; the library looks in
 * params.dir when given (and only there), else $HAMER_DETECTOR_DIR, then
 * ${XDG_DATA_HOME:-$HOME/.local/share}/hamer/detector, then
 * /usr/local/share/hamer/detector. */

typedef struct hamer_detector hamer_detector;
typedef struct hamer_detect_state hamer_detect_state;

/* The body pass (MediaPipe Holistic's hands from the pose: pose detection,
 * pose landmarks, the hand rectangle from the wrist, pinky and index, the
 * hand re-crop, the hand landmark model): its models are installed by
 * scripts/get_detector.sh next to the hand models. */
typedef enum {
    HAMER_BODY_AUTO = 0,    /* detector: load the body models when installed (palm pass only when not);
                               detect: run the body pass when they are loaded, tiles is on and
                               the palm pass found fewer than two hands (a person's two: where
                               it has both, the body pass could only repeat them) */
    HAMER_BODY_ON = 1,      /* detector: the body models are required; detect: always run it */
    HAMER_BODY_OFF = 2      /* detector: do not load them; detect: never run it */
} hamer_body_mode;

/* The proposal pass: the hand-box detector of @vladmandic/human (a TF.js
 * SSD, installed by scripts/get_detector.sh) proposes boxes where hands may
 * be (holding things, seen from the owner's eyes, where the palm model sees
 * none), and each becomes a hand only when the hand landmark model, on the
 * body pass's re-crop of the box, finds one there (presence >= 0.5): its
 * box and side then come from the landmarks. It needs the body models. */
typedef enum {
    HAMER_PROPOSALS_AUTO = 0, /* detector: load its model when installed (and the body models are);
                               detect: run it when loaded, tiles is on and the palm and body
                               passes found fewer than two hands (measured: docs/detector.md) */
    HAMER_PROPOSALS_ON = 1,   /* detector: its model is required; detect: always run it */
    HAMER_PROPOSALS_OFF = 2   /* detector: do not load it; detect: never run it */
} hamer_proposals_mode;

typedef struct {
    const char *dir;        /* models directory, or NULL to search (above) */
    bool lite;              /* the lite models (faster, less accurate) */
    hamer_body_mode body;   /* the body pass's models (above); default HAMER_BODY_AUTO */
    hamer_proposals_mode proposals; /* the proposal pass's model (above); default HAMER_PROPOSALS_AUTO */
    uint8_t reserved[HAMER_PARAMS_RESERVED - 4]; /* zero (hamer_detector_default_params) */
} hamer_detector_params;

typedef struct {
    int max_hands;          /* at most this many hands (1..HAMER_MAX_HANDS), default 8 */
    float min_score;        /* palm detector score threshold, default 0.5 */
    float min_presence;     /* hand presence threshold, default 0.5 */
    bool tiles;             /* true (default): also search overlapping tiles of the
                               image for small hands; false: MediaPipe's one
                               full-frame pass only (faster) */
    hamer_body_mode body;   /* the body pass (above); default HAMER_BODY_AUTO. ON with a
                               detector without the body models: an error naming
                               scripts/get_detector.sh */
    bool body_boxes;        /* when the body pass runs, also return the box it takes from a
                               person's wrist, index and pinky where the hand landmark model
                               rejected the hand and the pose model sees the wrist (visibility
                               >= 0.5, the keypoint confidence HaMeR's demo asks): source
                               HAMER_SOURCE_BODY_KEYPOINTS, no landmarks, score the wrist's
                               visibility; default true (measured: docs/detector.md) */
    hamer_proposals_mode proposals; /* the proposal pass (above); default HAMER_PROPOSALS_AUTO */
    uint8_t reserved[HAMER_PARAMS_RESERVED - 8]; /* zero (hamer_detect_default_params) */
} hamer_detect_params;

/* Which pass found a detection (hamer_detection.source). */
enum {
    HAMER_SOURCE_PALM = 0,  /* the palm detector (pass: full frame or tile level) */
    HAMER_SOURCE_BODY = 1,  /* the body pass (pose -> hand re-crop -> hand landmarks) */
    HAMER_SOURCE_BODY_KEYPOINTS = 2, /* the body pass's box from the body keypoints alone, the
                               hand stage having rejected it (body_boxes): landmarks all zero,
                               presence the rejected presence; HaMeR's official demo takes
                               its boxes from body keypoints this way */
    HAMER_SOURCE_PROPOSAL = 3 /* the proposal pass: a hand-box proposal the hand landmark model
                               confirmed (score: the proposal's) */
};

typedef struct {
    hamer_box box;          /* tight box of the 21 landmarks; is_right from handedness */
    float score;            /* palm detector score */
    float presence;         /* hand presence */
    float handedness;       /* P(right hand) on a non-mirrored photo */
    float landmarks[21 * 3];/* x, y image pixels; z relative depth on x's scale */
    int pass;               /* 0 full frame, k > 0 tile level k (0 for source BODY) */
    int source;             /* HAMER_SOURCE_*: the pass whose result this is (BODY: score is
                               the person's pose detection score; BODY_KEYPOINTS: the
                               wrist's visibility) */
    int body;               /* 1: the body pass found this hand (source BODY, or a palm
                               hand it found too); is_right is then the person's side */
    int person;             /* the body pass's person index when body = 1, else -1; also -1
                               (and is_right from handedness) when the hand landmark model
                               confidently (> 0.9 / < 0.1) says the other side: the pose's
                               wrist was on another person's hand */
} hamer_detection;

HAMER_API hamer_detector_params hamer_detector_default_params(void);
HAMER_API hamer_detect_params hamer_detect_default_params(void);
/* NULL on failure (models not found: the message lists where it looked and
 * names scripts/get_detector.sh; a malformed model file: what is wrong). */
HAMER_API hamer_detector *hamer_detector_load(const hamer_detector_params *params);
HAMER_API void hamer_detector_free(hamer_detector *detector);
/* The directory the models were loaded from (owned by the detector). */
HAMER_API const char *hamer_detector_get_dir(const hamer_detector *detector);
/* 1 when the proposal pass's model is loaded, 0 when not, < 0 on error. */
HAMER_API int hamer_detector_get_proposals(const hamer_detector *detector);
/* 1 when the body pass's models are loaded, 0 when not (AUTO and not
 * installed, or OFF), negative on a NULL detector. */
HAMER_API int hamer_detector_get_body(const hamer_detector *detector);
/* Per-thread detection state with n_threads worker threads (0 = online CPUs). */
HAMER_API hamer_detect_state *hamer_detect_state_new(const hamer_detector *detector, int n_threads);
HAMER_API void hamer_detect_state_free(hamer_detect_state *state);
/* Hands in an RGB image (w x h, interleaved, 8-bit): up to max (and
 * params->max_hands) detections, best palm score first (the body pass's own
 * hands after the palm pass's); returns their
 * count, or a negative code. Duplicates across passes are merged: a hand
 * is never returned twice. detect_ms (may be NULL) receives the time. */
HAMER_API int hamer_detect(hamer_detect_state *state, const uint8_t *rgb, int w, int h,
                           const hamer_detect_params *params, hamer_detection *out, int max, double *detect_ms);
/* hamer_predict on detected hands: their boxes, with each hand's
 * `detection` filled from its detection. */
HAMER_API int hamer_predict_detections(hamer_state *state, const uint8_t *rgb, int w, int h,
                                       const hamer_detection *dets, int n, const hamer_predict_params *params,
                                       hamer_hand *hands, hamer_timings *timings);
/* The boxes document `hamer run --boxes` reads, with each detection's
 * scores and landmarks added ({"bbox", "is_right", "score", "presence",
 * "handedness", "pass", "landmarks"}), as the JSON object {"image":
 * {"width", "height"}, "detector": {...}, "hands": [...]}. Free with
 * hamer_free; NULL on failure. */
HAMER_API char *hamer_detections_json(int w, int h, const hamer_detection *dets, int n, const hamer_detector *detector,
                                      const hamer_detect_params *params, double detect_ms);

/* PNG (in memory) of the image with every detection's box (green: right
 * hand, orange: left) and landmark skeleton drawn over it. *png is freed
 * with hamer_free. */
HAMER_API int hamer_render_detections_png(const uint8_t *rgb, int w, int h, const hamer_detection *dets, int n,
                                          uint8_t **png, size_t *len);

/* ---- Video (FFmpeg's libraries) ----
 *
 * A hamer_video reads any container and codec this FFmpeg build decodes,
 * on a decode thread of its own that keeps up to `queue` frames converted
 * to RGB ahead of the caller (bounded: it waits while the queue is full).
 * Rotation metadata (the display matrix) is applied, so frames come out
 * upright; every frame carries its presentation time, so variable frame
 * rates are kept. A hamer_video is used by one thread at a time.
 *
 * FFmpeg prints to stderr by default; the library does not: the first
 * hamer_video_open / hamer_video_writer_open installs an FFmpeg log
 * callback that keeps the messages of the library's own FFmpeg calls (its
 * decode thread, its writer calls) off stderr and hands every other
 * thread's messages to FFmpeg's default callback. */

typedef struct hamer_video hamer_video;

typedef struct {
    double start_s;         /* first frame: the first at or after this time, 0..1e9 s (default 0) */
    double duration_s;      /* frames before start_s + duration_s only, 0..1e9 s; 0: to the end
                               (default) */
    int stride;             /* every stride-th frame from the start, 1..1000000 (default 1); the
                               others are decoded (they may be references) but not converted */
    int queue;              /* frames decoded ahead, 1..64 (default 4) */
    int threads;            /* decoder threads, 0..64; 0 = FFmpeg's choice (default 1) */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_video_default_params) */
} hamer_video_params;

typedef struct {
    int width, height;      /* of the frames as delivered (rotation applied) */
    int rotation;           /* degrees clockwise applied to the stored pictures: 0, 90, 180, 270 */
    double fps;             /* average frame rate the container states (0: unknown) */
    double duration_s;      /* duration the container states (0: unknown) */
    int time_base_num, time_base_den; /* the stream's time base (pts units) */
    long long frames;       /* frame count the container states (0: unknown) */
    const char *codec;      /* decoder name (owned by FFmpeg) */
    const char *format;     /* container name (owned by FFmpeg) */
} hamer_video_info;

typedef struct {
    const uint8_t *rgb;     /* width x height x 3, RGB; valid until the next hamer_video_next or close */
    int width, height;
    long long index;        /* frame number: 0 for the first frame at or after start_s, counting every
                               decoded frame (so with a stride K: 0, K, 2K, ...) */
    long long pts;          /* presentation time in time-base units, from the stream's start */
    double time_s;          /* the same in seconds */
    double decode_ms;       /* decode-thread time spent on this frame (decode + conversion) */
} hamer_video_frame;

HAMER_API hamer_video_params hamer_video_default_params(void);
/* HAMER_OK when every field is in its range above, else HAMER_E_ARG with a
 * message naming the field (hamer_video_open checks the same): the one
 * check of these values, for callers that want it before opening. */
HAMER_API int hamer_video_check_params(const hamer_video_params *params);
/* Open a video file; NULL when it cannot be opened, has no video stream,
 * its codec has no decoder here, its frames exceed 100 megapixels, or its
 * rotation is not a multiple of 90 degrees (the message says which). */
HAMER_API hamer_video *hamer_video_open(const char *path, const hamer_video_params *params);
HAMER_API int hamer_video_get_info(const hamer_video *video, hamer_video_info *info);
/* The next frame: 1 (frame filled), 0 at the end, or a negative code. A
 * damaged or truncated file delivers every frame decoded before the damage,
 * then HAMER_E_FORMAT with a message naming the file, the time and what
 * failed; a read error is HAMER_E_IO. */
HAMER_API int hamer_video_next(hamer_video *video, hamer_video_frame *frame);
/* Stop the decode thread and free everything (NULL is fine). */
HAMER_API void hamer_video_close(hamer_video *video);

/* A video file written frame by frame: H.264 (libx264) when this FFmpeg
 * has that encoder, else MPEG-4 part 2 (FFmpeg's own mpeg4, always built
 * in); the container from the file name's extension (.mp4, .mkv, .mov,
 * ...). Timestamps are the caller's (pts in the time base given), so a
 * variable frame rate is kept. It is written to a temporary file beside
 * path (FFmpeg is given only that file) and renamed by
 * hamer_video_writer_close, so path is either complete or untouched. */
typedef struct hamer_video_writer hamer_video_writer;
/* fps: the nominal rate for the encoder's rate control (> 0). NULL with
 * HAMER_E_ARG, nothing created or left behind, for a path that names no
 * single video file of a container with timestamps: a frame-number
 * pattern ("%03d"), an image or segment muxer (.png, .jpg, .m3u8, ...), a
 * raw stream (.h264, .yuv, ...), a format that cannot hold the encoder's
 * video (.webm, .gif, ...); HAMER_E_IO when path exists and is not a
 * regular file. */
HAMER_API hamer_video_writer *hamer_video_writer_open(const char *path, int width, int height, int time_base_num,
                                                      int time_base_den, double fps);
/* The encoder in use ("libx264" or "mpeg4"). */
HAMER_API const char *hamer_video_writer_get_codec(const hamer_video_writer *writer);
/* One RGB frame (width x height x 3) at pts (time-base units, increasing). */
HAMER_API int hamer_video_writer_write(hamer_video_writer *writer, const uint8_t *rgb, long long pts);
/* Flush the encoder, finish the file and rename it into place; frees the
 * writer whatever happens. HAMER_OK or a negative code (then path is
 * untouched). abort = 1: discard the file instead. */
HAMER_API int hamer_video_writer_close(hamer_video_writer *writer, int abort);

/* ---- Tracking hands through a video ----
 *
 * A hamer_tracker follows the hands of a stream of frames as MediaPipe does
 * on video: the 21 landmarks of frame t give the hand's rectangle in frame
 * t+1, where only the landmark model runs; palm detection runs on the first
 * frame, when a track is lost (presence below track_presence), every
 * redetect_every frames while fewer than max_hands hands are tracked, and
 * on a scene cut. Every hand carries a track_id kept while it stays in
 * view; its handedness is the mean over its track (is_right = mean > 0.5).
 *
 * Smoothing (HAMER_SMOOTH_ONE_EURO) filters each tracked hand's results
 * over time with a One Euro filter (Casiez, Roussel, Vogel, CHI 2012): per
 * scalar x at time t (dt = t - t_prev),
 *     a(fc)  = 1 / (1 + 1 / (2 pi fc dt))
 *     dx     = (x - xs_prev) / dt,   dxs = dxs_prev + a(d_cutoff) (dx - dxs_prev)
 *     fc     = min_cutoff + beta |dxs| / scale
 *     xs     = xs_prev + a(fc) (x - xs_prev)
 * (the first frame of a track passes through). Filtered: cam_t_full,
 * cam_t, keypoints_3d, vertices (scale 0.1 m), keypoints_2d (scale: the
 * hand's crop size in pixels); each filtered scalar is a convex
 * combination of the track's raw values so far, so it lies within their
 * range. The 16 rotations are filtered on the rotation group: with qs the
 * filtered rotation, d = log(qs^-1 q) is the rotation vector to the raw
 * one, d / dt the angular velocity (filtered at d_cutoff; beta weighs its
 * magnitude in rad/s), and qs becomes qs . exp(a(fc) d), the slerp from qs
 * towards q by a(fc): always a rotation, the same for q and -q. The
 * rotations' other forms (axis_angle, quaternion), keypoints_3d_cam and
 * the reprojection errors follow from the filtered values; the PCA
 * coefficients and SMPL-X pose need the model: hamer_tracker_frame computes
 * them again, hamer_tracker_smooth leaves the raw hand's. Betas: raw for a
 * track's first betas_min - 1 frames, then the per-component median of the
 * betas of its frames so far, frozen once betas_frames frames are in (the
 * betas reported; the mesh and keypoints keep each frame's own shape,
 * filtered: hamer_anim fits one shape per track for the animation files).
 * A track whose voted side flips starts its filters again. The raw values
 * stay available (hamer_tracker_get_results, "raw" in the JSON).
 *
 * A tracker holds per-stream state only (tracks, filters, its own
 * detection state and buffers, all allocated by hamer_tracker_new; a frame
 * allocates nothing); the detector and model stay read-only and shared.
 * Use it from one thread at a time; free it before its detector. */

typedef struct hamer_tracker hamer_tracker;

typedef enum { HAMER_SMOOTH_NONE = 0, HAMER_SMOOTH_ONE_EURO = 1 } hamer_smooth_mode;

typedef struct {
    int max_hands;          /* hands tracked at once, 1..HAMER_MAX_HANDS (default 2) */
    float min_score;        /* palm detector score threshold (default 0.5) */
    float min_presence;     /* presence a newly detected hand needs (default 0.5) */
    float track_presence;   /* a tracked hand below this presence is lost (default 0.5) */
    bool tiles;             /* palm detection also on tiles (small hands); default false */
    int redetect_every;     /* frames between palm detections while fewer than max_hands
                               hands are tracked, 1..10000 (default 10) */
    float cut_threshold;    /* scene cut: mean absolute difference of 16x16 RGB thumbnails
                               of consecutive frames, in [0, 1] of full scale (default 0.15;
                               1 or more: never) */
    hamer_smooth_mode smooth; /* default HAMER_SMOOTH_ONE_EURO */
    double min_cutoff;      /* One Euro minimum cutoff, Hz (default 1.0) */
    double beta;            /* One Euro speed coefficient (default 1.0) */
    double d_cutoff;        /* One Euro cutoff of the speed, Hz (default 1.0) */
    int betas_frames;       /* frames whose betas make a track's shape, 1..256 (default 30) */
    int betas_min;          /* frames before the shape is fixed, 1..betas_frames (default 5) */
    hamer_body_mode body;   /* the body pass on detection frames (its hands start tracks too:
                               re-acquisition from the pose): as hamer_detect_params.body
                               (default AUTO: with tiles, when its models are loaded) */
    hamer_proposals_mode proposals; /* the proposal pass on detection frames (its hands start
                               tracks too): as hamer_detect_params.proposals (default AUTO:
                               with tiles, when its model is loaded) */
    uint8_t reserved[HAMER_PARAMS_RESERVED - 4]; /* zero (hamer_tracker_default_params) */
} hamer_tracker_params;

typedef struct {
    hamer_detection det;    /* this frame: box (tight box of the landmarks; is_right from the
                               track's vote), presence, raw handedness, landmarks; score,
                               pass, source, body and person of the detection that started
                               the track (source BODY: re-acquired from the pose; PROPOSAL:
                               from a hand-box proposal) */
    int track_id;           /* 0, 1, 2, ... in order of appearance */
    int tracked;            /* 1: found from the previous frame's landmarks; 0: by palm
                               detection in this frame */
    int frames;             /* frames in the track so far, this one included */
    float handedness_vote;  /* mean raw handedness over the track */
} hamer_track;

typedef struct {
    int detected;           /* palm detection ran on this frame */
    int cut;                /* a scene cut was seen (every track ended before it) */
    int lost;               /* tracks lost in this frame */
    int new_tracks;         /* tracks started in this frame */
    double track_ms, detect_ms, smooth_ms;
    hamer_timings predict;  /* the regression of the frame's hands (hamer_tracker_frame) */
} hamer_track_stats;

/* A video's tracked hands for animation tools: hamer_anim_add after each
 * frame with the tracker's results (the smoothed hands where there are),
 * then hamer_anim_write_glb and / or hamer_anim_write_bvh at the end.
 *
 * One skeleton per track (MANO's 16 joints; its bone lengths from the
 * track's shape, below), each joint's rotation and the hand's place in the
 * camera (cam_t) at every frame. With fps (the clip's frame rate,
 * hamer_video_info.fps) every sample lands on its whole frame, round(time
 * * fps), and the files say the rate (GLB: "fps" in the scene's and the
 * animation's extras, which Blender imports as the scene's custom
 * properties and three.js as the scene's userData; BVH: Frame Time).
 * shape TRACK fits one betas to each track (the median of its frames'),
 * FIRST takes the track's first frame's; every frame keeps its own
 * translation (docs/usage.md has the measurement that chose them). The
 * samples wait in a temporary file, so memory stays flat while a long
 * video runs.
 *
 * GLB: one skinned hand per track (bind shape from the track's betas, no
 * pose correctives), one animation "video" with each joint's rotation and
 * each hand's place, the hand hidden (scale 0) before and after its track.
 * BVH: one ROOT per track (hand<K>_<side>_wrist with position and
 * rotation channels, the 15 finger joints with rotations, Z X Y order,
 * the fingertips as End Sites), metres, y up and the camera looking down
 * -z (the GLB's and OBJ's axes), one motion line per frame from the first
 * recorded frame to the last in steps of the smallest step between them;
 * a skeleton holds its first pose before its track begins and its last
 * after it ends (BVH has no visibility). On error NULL / a negative code
 * with the message set. */
typedef enum {
    HAMER_ANIM_SHAPE_TRACK = 0, /* one betas per track, the median over the whole sequence (default) */
    HAMER_ANIM_SHAPE_FIRST = 1  /* the track's first frame's betas */
} hamer_anim_shape;

typedef struct {
    double fps;             /* the clip's frame rate, 0..10000; 0 (default): the times as given,
                               30 fps assumed where a rate must be written */
    hamer_anim_shape shape; /* default HAMER_ANIM_SHAPE_TRACK */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_anim_default_params) */
} hamer_anim_params;

typedef struct hamer_anim hamer_anim;
HAMER_API hamer_anim_params hamer_anim_default_params(void);
HAMER_API hamer_anim *hamer_anim_new(const hamer_model *model, const hamer_anim_params *params);
/* One frame at time_s (seconds, increasing) with its n tracked hands (n 0:
 * a frame without hands, which still counts for the BVH's frames). */
HAMER_API int hamer_anim_add(hamer_anim *anim, double time_s, const hamer_track *tracks, const hamer_hand *hands,
                             int n);
/* The files, written atomically (temporary file + rename); both may be
 * written from one recording. */
HAMER_API int hamer_anim_write_glb(hamer_anim *anim, const char *path);
HAMER_API int hamer_anim_write_bvh(hamer_anim *anim, const char *path);
HAMER_API void hamer_anim_free(hamer_anim *anim);

HAMER_API hamer_tracker_params hamer_tracker_default_params(void);
/* NULL on bad parameters (the message names the field) or no memory. */
HAMER_API hamer_tracker *hamer_tracker_new(const hamer_detector *detector, const hamer_tracker_params *params,
                                           int n_threads);
HAMER_API void hamer_tracker_free(hamer_tracker *tracker);
/* Forget every track (a new stream); ids continue. */
HAMER_API int hamer_tracker_reset(hamer_tracker *tracker);
/* Track the hands of the next frame (RGB, w x h; time_s increasing): up to
 * max tracks (ordered by track_id) into out; their count or a negative
 * code. stats may be NULL. */
HAMER_API int hamer_tracker_push(hamer_tracker *tracker, const uint8_t *rgb, int w, int h, double time_s,
                                 hamer_track *out, int max, hamer_track_stats *stats);
/* Smooth the hands regressed for push's tracks (raw[i] for tracks[i], as
 * hamer_predict_detections gives them) into smoothed (may equal raw), with
 * the filters of each track; with HAMER_SMOOTH_NONE a copy. Call once per
 * pushed frame, after the push. */
HAMER_API int hamer_tracker_smooth(hamer_tracker *tracker, const hamer_track *tracks, int n, const hamer_hand *raw,
                                   hamer_hand *smoothed);
/* One whole frame: push, then (state not NULL) every hand regressed as one
 * batch (hamer_predict_detections) and smoothed. The results stay in the
 * tracker until the next frame (hamer_tracker_get_results). With state NULL
 * the hands are tracked only (no regression). The hand count, or a
 * negative code. */
HAMER_API int hamer_tracker_frame(hamer_tracker *tracker, hamer_state *state, const uint8_t *rgb, int w, int h,
                                  double time_s, const hamer_predict_params *params);
/* The last frame's results (owned by the tracker; any pointer may be
 * NULL): tracks, raw and smoothed hands (NULL hands when the frame was not
 * regressed), stats; returns the count. */
HAMER_API int hamer_tracker_get_results(const hamer_tracker *tracker, const hamer_track **tracks, const hamer_hand **raw,
                                    const hamer_hand **smoothed, hamer_track_stats *stats);
/* The last frame as one JSON Lines record (no newline): {"frame", "time_s",
 * "detected", "cut", "hands": [RESULT.json hand fields (smoothed) +
 * "track_id", "tracked", "frames", "detector_score", "handedness_vote",
 * "raw": {the filtered fields as regressed}], "timings_ms"}. decode_ms < 0
 * leaves "decode" out of the timings. Free with hamer_free. */
HAMER_API char *hamer_tracker_frame_json(const hamer_tracker *tracker, long long frame, int with_vertices,
                                         double decode_ms);

/* ---- Live: frame sources, and hands at camera pace ----
 *
 * A frame source is anything that delivers frames one after another: a
 * camera, a network stream, a file played at its own pace, a browser
 * sending its webcam's frames. It is a context and callbacks, so a program
 * can bring its own (as a VFS brings files to sqlite):
 *   read   the next frame into *frame: 1, 0 at the end, or a negative
 *          hamer_status with the message set (hamer_last_error on the
 *          reading thread); blocks until a frame comes. The frame's pixels
 *          stay valid until the next read or close. Frames that came while
 *          nobody read are the source's to drop (the newest wins), counted
 *          in frame->dropped.
 *   stop   (may be NULL) makes a blocked read, and every later one, return
 *          0 soon; callable from any thread, also while read runs.
 *   close  frees the source (after the last read has returned).
 * hamer_capture_open makes one on FFmpeg; hamer_live_run reads one. */

typedef struct {
    const uint8_t *rgb;     /* width x height x 3, RGB */
    int width, height;
    long long index;        /* 0, 1, 2, ...: the frames this source delivered */
    double time_s;          /* the frame's time in its stream, seconds (increasing) */
    double capture_s;       /* when the source had the frame, on hamer_clock's clock */
    long long dropped;      /* frames the source replaced unread so far (newest wins) */
} hamer_source_frame;

typedef struct hamer_frame_source {
    void *ctx;
    int (*read)(void *ctx, hamer_source_frame *frame);
    void (*stop)(void *ctx);
    void (*close)(void *ctx);
} hamer_frame_source;

/* Seconds on the library's monotonic clock (CLOCK_MONOTONIC): the clock of
 * capture_s and of the latencies the live records state. */
HAMER_API double hamer_clock(void);

/* When a capture publishes its frames. */
typedef enum {
    HAMER_PACE_AUTO = 0,    /* a file at its timestamps (as a camera would deliver it); a device or a
                               network stream as it delivers */
    HAMER_PACE_ON = 1,      /* every input at its timestamps */
    HAMER_PACE_OFF = 2      /* as fast as it decodes */
} hamer_pace;

typedef struct {
    const char *format;     /* FFmpeg input format: "v4l2" (a camera), "lavfi", ...; NULL: from the URL */
    const char *options;    /* the input's options, "key=value" pairs joined by ':'
                               ("video_size=640x480:framerate=30"); NULL: none. An option the
                               input does not take is an error */
    hamer_pace pace;        /* default HAMER_PACE_AUTO */
    int threads;            /* decoder threads 0..64 (0: FFmpeg's choice); default 1 */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_capture_default_params) */
} hamer_capture_params;

HAMER_API hamer_capture_params hamer_capture_default_params(void);
/* A frame source on FFmpeg (libavdevice and libavformat): url is a device
 * (/dev/video0 with format "v4l2"), a stream (rtsp://, udp://, http://) or a
 * file. A thread of its own reads and decodes as the input delivers and
 * keeps only the newest frame (three buffers, allocated here); frames must
 * keep the first one's size (at most 100 megapixels, also enforced inside
 * the decoder). On error a negative code with the message, *out zeroed.
 * HAMER_E_UNSUPPORTED in a build without FFmpeg. */
HAMER_API int hamer_capture_open(const char *url, const hamer_capture_params *params, hamer_frame_source *out);

/* hamer_live: a frame source's hands at its pace. Three stages, each on a
 * thread of its own, hand frames on through one-frame slots where the
 * newest wins: the capture reads the source; the tracker
 * (hamer_tracker_push: detection and landmarks) takes the newest captured
 * frame; the regressor (when a state is given) takes the newest tracked
 * frame whenever it is free, regresses its hands as one batch and smooths
 * them per track (the tracker's One Euro and betas options). A frame
 * replaced in a slot before the next stage took it is dropped and counted;
 * nothing else waits anywhere, so nothing grows when a stage is slower
 * than the source: at most five frames exist at once (the capture's, the
 * tracker's, the regressor's and the two slots'). Every frame buffer, the
 * tracks and the hands are allocated by hamer_live_new and at the first
 * frame (again only if the frame size changes). */
typedef struct hamer_live hamer_live;

typedef struct {
    hamer_tracker_params tracker;   /* hamer_tracker_default_params() */
    hamer_predict_params predict;   /* hamer_predict_default_params() */
    bool every_frame;               /* also a record for each tracked frame the regressor did not take
                                       (regressed 0: tracks, boxes, landmarks); default false */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_live_default_params) */
} hamer_live_params;

/* One record: a regressed frame, or (every_frame, or without a state) a
 * tracked one. Pointers are the engine's, valid during the callback. */
typedef struct {
    long long frame;                /* the source's index of the frame */
    double time_s;                  /* its stream time */
    double capture_s;               /* when the source had it (hamer_clock) */
    double latency_ms;              /* from capture_s to this record */
    int width, height;
    int regressed;                  /* 1: hands regressed; 0: tracked only */
    int n;                          /* tracks (and hands) */
    const hamer_track *tracks;
    const hamer_hand *raw;          /* regressed: the hands as regressed, else NULL */
    const hamer_hand *hands;        /* regressed: smoothed (raw without smoothing), else NULL */
    hamer_track_stats stats;        /* the tracker's and (regressed) the regression's times */
    /* totals since the run started, this record's frame included */
    long long captured;             /* frames read from the source */
    long long tracked;              /* frames the tracker took */
    long long regressed_frames;     /* frames regressed */
    long long dropped_source;       /* replaced in the source before it was read */
    long long dropped_track;        /* captured, replaced before the tracker was free */
    long long dropped_regress;      /* tracked, replaced before the regressor was free */
    int waiting_max;                /* the most frames waiting in the two slots at once (at most 2) */
    uint8_t reserved[HAMER_PARAMS_RESERVED];
} hamer_live_record;

/* Called for every record, never for two at once (the tracker's thread
 * for tracked-only records, the calling thread for regressed ones);
 * non-zero stops the run. */
typedef int (*hamer_live_fn)(void *user, const hamer_live_record *record);

/* Totals of a run: hamer_live_record's counters (a frame a stop left in a
 * slot counts as dropped there, so captured = tracked + dropped_track and,
 * with a state, tracked = regressed_frames + dropped_regress), the records
 * written, the latency (median, 90th percentile, maximum, ms; the quantiles within 0.5%)
 * of the records with regressed hands (of every record without a state)
 * and of the tracked-only ones (every_frame), and the run's seconds. */
typedef struct {
    long long captured, tracked, regressed_frames, dropped_source, dropped_track, dropped_regress, records;
    int waiting_max;
    double latency_p50_ms, latency_p90_ms, latency_max_ms;
    double track_latency_p50_ms, track_latency_p90_ms, track_latency_max_ms;
    double seconds;
    uint8_t reserved[HAMER_PARAMS_RESERVED];
} hamer_live_stats;

HAMER_API hamer_live_params hamer_live_default_params(void);
/* An engine on detector (required) and state (NULL: track only), with
 * n_threads worker threads for the tracker (0: online CPUs; the state has
 * its own). NULL on bad parameters (the message names the field) or no
 * memory. Free it before the detector and the state. */
HAMER_API hamer_live *hamer_live_new(const hamer_detector *detector, hamer_state *state,
                                     const hamer_live_params *params, int n_threads);
/* Run until the source ends, fn returns non-zero, or hamer_live_stop. The
 * source is read, not closed. HAMER_OK, or the source's, tracker's or
 * regression's error (the message names it; the run stops at the first).
 * A run may follow another on the same engine (tracks start again). */
HAMER_API int hamer_live_run(hamer_live *live, const hamer_frame_source *source, hamer_live_fn fn, void *user);
/* Ask a running hamer_live_run to stop soon (the source's stop included);
 * from any thread, or a signal handler's helper thread. */
HAMER_API void hamer_live_stop(hamer_live *live);
/* The last (or current) run's totals. */
HAMER_API int hamer_live_get_stats(const hamer_live *live, hamer_live_stats *stats);
/* A record as one JSON Lines line (no newline): {"frame", "time_s",
 * "capture_time_ms" (Unix time, integer milliseconds), "latency_ms", "regressed", "hands":
 * [hamer_tracker_frame_json's hand fields], "timings_ms", "frames":
 * {"captured", "tracked", "regressed"}, "dropped": {"source", "track",
 * "regress"}}. Free with hamer_free. */
HAMER_API char *hamer_live_record_json(const hamer_live_record *record, int with_vertices);
HAMER_API void hamer_live_free(hamer_live *live);

/* The overlay of hamer_render_png as RGB pixels into out (w x h x 3). */
HAMER_API int hamer_render_rgb(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands,
                               int n, uint8_t *out);

/* Decode a photo file / buffer (JPEG, PNG, WebP, AVIF, BMP, TIFF, GIF's first
 * frame; the bytes decide the format) into 8-bit RGB (JPEG EXIF orientation
 * applied; at most 100 megapixels). *rgb is freed with hamer_free. */
HAMER_API int hamer_image_load(const char *path, uint8_t **rgb, int *w, int *h);
HAMER_API int hamer_image_decode(const void *buf, size_t len, uint8_t **rgb, int *w, int *h);
/* The width and height an image file's header declares, for every format
 * hamer_image_decode reads, without decoding it (what a server needs to
 * bound a body's pixels before the work): HAMER_OK, or HAMER_E_FORMAT when
 * the bytes are no image it reads or their header states no size. The
 * decoder checks the size again (and the pixels it finds). */
HAMER_API int hamer_image_size(const void *buf, size_t len, int *w, int *h);

/* The focal length in pixels of a photo (JPEG APP1 or PNG eXIf) of width x
 * height pixels as decoded (orientation applied), from its EXIF:
 * FocalLengthIn35mmFilm (the 43.27 mm diagonal of a 36 x 24 mm frame
 * mapped onto the image's diagonal), else FocalLength with
 * FocalPlaneXResolution and its unit, scaled from PixelXDimension /
 * PixelYDimension (the image the resolution refers to) to this one; a
 * value outside 0.05 .. 100 times max(width, height) is not used. 1 with
 * *focal_px set, 0 when the EXIF gives none (no EXIF, no such tags, a
 * malformed block: never an error), HAMER_E_ARG for bad arguments. Reads
 * at most the first HAMER_EXIF_SCAN bytes, each offset bounds-checked. */
#define HAMER_EXIF_SCAN (1 << 20)
HAMER_API int hamer_exif_focal(const void *data, size_t len, int width, int height, float *focal_px);
/* The same from a file's first HAMER_EXIF_SCAN bytes; HAMER_E_IO when it
 * cannot be read. */
HAMER_API int hamer_exif_focal_file(const char *path, int width, int height, float *focal_px);

/* Where the boxes of a request came from (RESULT.json's "boxes"). */
typedef enum {
    HAMER_BOXES_GIVEN = 0,    /* the caller's (hamer_predict) */
    HAMER_BOXES_DETECTED = 1  /* the built-in detector's (hamer_detect, hamer_predict_detections) */
} hamer_boxes_source;

/* The RESULT.json document of `hamer run` for these hands (timings may be
 * NULL: then no "timings_ms" key). source decides "boxes" and whether
 * timings_ms has "detect": a photo where the detector found no hand is
 * HAMER_BOXES_DETECTED with n = 0. HAMER_E_ARG for another source, or for
 * HAMER_BOXES_GIVEN with a hand that carries a detection. NULL on failure.
 * Free with hamer_free. */
HAMER_API char *hamer_result_json_source(int w, int h, const hamer_hand *hands, int n, int with_vertices,
                                         const hamer_timings *timings, hamer_boxes_source source);
/* hamer_result_json_source with the source inferred from the hands: detected
 * when one carries a detection. With no hands that says "given" even when
 * the detector ran; front ends that detect call hamer_result_json_source. */
HAMER_API char *hamer_result_json(int w, int h, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *timings);

/* PNG (in memory) of the hands drawn over the image (side_view 0), or of
 * the meshes turned 90 degrees on white (side_view 1). *png is freed with
 * hamer_free. */
HAMER_API int hamer_render_png(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands, int n,
                     int side_view, uint8_t **png, size_t *len);

/* What a picture of the hands shows (hamer_render_params.hide): the
 * overlays of `hamer run --render`, `batch --render`, `video --render`,
 * the server's /v1/render and Model.render draw all of it by default. */
typedef enum {
    HAMER_DRAW_MESH = 1,        /* the meshes, as hamer_render_png draws them (needs MANO) */
    HAMER_DRAW_BOXES = 2,       /* each hand's box: green for a right hand, orange for a left one */
    HAMER_DRAW_KEYPOINTS = 4,   /* the 21 keypoints (keypoints_2d) joined as the hand's skeleton */
    HAMER_DRAW_LABELS = 8       /* "#I right 0.98" above the box: the hand's index, side and (detected
                                   boxes) the detector's score; "#I error" for a hand without a result */
} hamer_draw;
#define HAMER_DRAW_ALL 15

typedef struct {
    unsigned int hide;          /* HAMER_DRAW_* bits not to draw; 0 (default): everything */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_render_default_params) */
} hamer_render_params;

HAMER_API hamer_render_params hamer_render_default_params(void);
/* The overlay with the marks params asks for (NULL: all) as RGB pixels
 * into out (w x h x 3): the image, the meshes of the hands with a result,
 * then every hand's box, keypoints and label. HAMER_E_ARG for bad
 * arguments or hide bits outside HAMER_DRAW_ALL, HAMER_E_NOMANO for meshes
 * without MANO buffers (marks alone need none). */
HAMER_API int hamer_render_overlay_rgb(const hamer_model *model, const uint8_t *rgb, int w, int h,
                                       const hamer_hand *hands, int n, const hamer_render_params *params, uint8_t *out);
/* The same as a PNG (in memory; *png freed with hamer_free). */
HAMER_API int hamer_render_overlay_png(const hamer_model *model, const uint8_t *rgb, int w, int h,
                                       const hamer_hand *hands, int n, const hamer_render_params *params, uint8_t **png,
                                       size_t *len);

/* The hand's mesh as the official demo's --save_mesh writes it (OBJ text:
 * vertices + cam_t_full turned 180 degrees about x, the 1538 faces plus
 * the 14 that close the wrist, winding reversed for left hands). *obj is
 * freed with hamer_free. HAMER_E_ARG for a hand without a result. */
HAMER_API int hamer_hand_obj(const hamer_model *model, const hamer_hand *hand, char **obj, size_t *len);
/* The hands with a result in one OBJ text: per hand its hamer_hand_obj
 * lines with an "o hand_I_right|left" line (I: its index in hands) after
 * the comment and the face indices offset by the vertices before it, so a
 * viewer shows the hands where they stand in the photo. n 0 (or no hand
 * with a result): an empty text. *obj is freed with hamer_free.
 * HAMER_E_NOMANO without MANO buffers, HAMER_E_ARG for bad arguments. */
HAMER_API int hamer_hands_obj(const hamer_model *model, const hamer_hand *hands, int n, char **obj, size_t *len);
/* The hands (those with a result; n 0: an empty scene) as one binary glTF
 * 2.0 file (GLB): per hand a skinned mesh (MANO's 16 joints as nodes with
 * the predicted rotations, inverse bind matrices of the rest pose, the 4
 * largest LBS weights per vertex renormalised, the pose correctives as a
 * morph target at weight 1), the 21 keypoints as named nodes, placed in
 * the camera frame (the OBJ's axes) at cam_t (the translation through the
 * photo's camera; cam_t_full for a hand without it). *glb is freed with
 * hamer_free.
 * HAMER_E_NOMANO without MANO buffers, HAMER_E_ARG for bad arguments. */
HAMER_API int hamer_hands_glb(const hamer_model *model, const hamer_hand *hands, int n, uint8_t **glb, size_t *len);
/* The hands (those with a result) as one BVH text: per hand a skeleton
 * hand<I>_<side>_* (I its index in hands) as hamer_anim_write_bvh writes
 * them, its bone lengths from its betas, one frame. *bvh is freed with
 * hamer_free. HAMER_E_NOMANO without MANO buffers, HAMER_E_ARG for bad
 * arguments. */
HAMER_API int hamer_hands_bvh(const hamer_model *model, const hamer_hand *hands, int n, char **bvh, size_t *len);

/* ---- The photo job: image in, RESULT.json / overlay / meshes out ----
 *
 * What `hamer run`, `hamer batch`, the server, the worker and the Python
 * binding do with one photo, in one place: decode (JPEG/PNG from a file or
 * from memory, or RGB given), the boxes given or found by the detector,
 * crop, regress, the full-image results; then the documents of that
 * result (RESULT.json, the overlay or side-view PNG, an OBJ per hand).
 *
 * A hamer_job borrows an inference state (and, to detect, a detection
 * state): the model and detector stay read-only and shared. The job holds
 * the per-request buffers (decoded image, boxes, detections, hands),
 * allocated by hamer_job_new and grown only when an image or a request is
 * larger than any before, so a steady stream of requests allocates
 * nothing in the job itself. Use a job from one thread at a time, like its
 * states; free it before them. A cancel callback set on the state
 * (hamer_state_set_cancel) stops the job's regression. */

typedef struct hamer_job hamer_job;

typedef struct {
    hamer_predict_params predict;   /* rescale, crop mode (hamer_predict_default_params) */
    hamer_detect_params detect;     /* used when the boxes are detected (hamer_detect_default_params) */
    uint8_t reserved[HAMER_PARAMS_RESERVED]; /* zero (hamer_job_default_params) */
} hamer_job_params;

/* The stage a job stopped at (hamer_job_result.failed_stage). */
typedef enum {
    HAMER_JOB_STAGE_NONE = 0,       /* it did not fail */
    HAMER_JOB_STAGE_DECODE = 1,     /* the image could not be read or decoded */
    HAMER_JOB_STAGE_DETECT = 2,     /* the detector failed (or there is no detection state) */
    HAMER_JOB_STAGE_PREDICT = 3     /* the request as a whole was refused, or cancelled */
} hamer_job_stage;

/* One photo. The image is exactly one of: path (a JPEG/PNG file; messages
 * name it), data/len (its bytes in memory), rgb/width/height (interleaved
 * 8-bit RGB, not copied: it must outlive the result; decode_ms is then
 * reported as the decode time, for a caller that decoded it; a path given
 * with it names the file the pixels came from, whose EXIF alone is read).
 * Unless the predict params give a focal length, the one of the photo's
 * EXIF (hamer_exif_focal) places the hands (focal_source
 * HAMER_FOCAL_EXIF). source HAMER_BOXES_GIVEN: boxes[0..n_boxes)
 * (n_boxes 0: no hand, an empty result); HAMER_BOXES_DETECTED: the
 * detector finds them (boxes ignored). params NULL: the job's. */
typedef struct {
    const char *path;
    const void *data;
    size_t len;
    const uint8_t *rgb;
    int width, height;
    double decode_ms;
    const hamer_box *boxes;
    int n_boxes;
    hamer_boxes_source source;
    const hamer_job_params *params;
} hamer_job_input;

/* The last run's result, owned by the job and valid until its next run or
 * free. hands[i].ok / hands[i].error is each hand's status. */
typedef struct {
    int width, height;              /* the decoded image */
    const uint8_t *rgb;             /* its pixels (the caller's when given as RGB) */
    hamer_boxes_source source;      /* where the boxes came from */
    int n_hands;                    /* one hand per box, in order */
    const hamer_hand *hands;
    const hamer_detection *detections; /* n_hands detection records when detected, else NULL */
    int n_failed;                   /* hands with ok = 0 */
    hamer_timings timings;          /* decode (input's decode_ms for RGB given), detect, crop, regress, finalise */
    hamer_job_stage failed_stage;   /* where the last run stopped (NONE: it succeeded) */
} hamer_job_result;

HAMER_API hamer_job_params hamer_job_default_params(void);
/* A job on state (required) and detect_state (NULL: boxes must be given),
 * with params (NULL: the defaults; its values checked by hamer_job_run, with
 * hamer_predict's and hamer_detect's messages). On error NULL is returned
 * (HAMER_E_ARG for a NULL state or non-zero reserved bytes in params or
 * the two it holds, HAMER_E_NOMEM) and nothing is created. */
HAMER_API hamer_job *hamer_job_new(hamer_state *state, hamer_detect_state *detect_state, const hamer_job_params *params);
HAMER_API void hamer_job_free(hamer_job *job);
/* Run one photo: decode, detect or take the boxes, crop, regress. A bad box
 * fails only its own hand (ok = 0, the reason in error). On error a
 * negative code is returned with the reason in hamer_last_error() (the
 * same message hamer_image_load / hamer_detect / hamer_predict give) and
 * the result's failed_stage says which stage; the result then holds no
 * hands. HAMER_E_ARG for NULL arguments, no image or more than one, or
 * n_boxes outside 0..HAMER_MAX_HANDS. */
HAMER_API int hamer_job_run(hamer_job *job, const hamer_job_input *in);
/* The last run's result into *out (pointers into the job). On error
 * (NULL argument) HAMER_E_ARG is returned and nothing is changed. */
HAMER_API int hamer_job_get_result(const hamer_job *job, hamer_job_result *out);
/* The last run's RESULT.json (hamer_result_json_source with the run's
 * source and timings). On error NULL is returned (no successful run,
 * HAMER_E_NOMEM) and nothing is changed. Free with hamer_free. */
HAMER_API char *hamer_job_result_json(const hamer_job *job, int with_vertices);
/* The last run's overlay (side_view 0) or side view (1) as hamer_render_png
 * draws it. On error a negative code is returned and *png is not set. */
HAMER_API int hamer_job_render_png(const hamer_job *job, int side_view, uint8_t **png, size_t *len);
/* The last run's overlay with marks (hamer_render_overlay_png; params NULL:
 * all). On error a negative code is returned and *png is not set. */
HAMER_API int hamer_job_render_overlay_png(const hamer_job *job, const hamer_render_params *params, uint8_t **png,
                                           size_t *len);
/* The last run's hands as a GLB (hamer_hands_glb). On error a negative code
 * is returned and *glb is not set. */
HAMER_API int hamer_job_glb(const hamer_job *job, uint8_t **glb, size_t *len);
/* The last run's hands as a BVH (hamer_hands_bvh). On error a negative
 * code is returned and *bvh is not set. */
HAMER_API int hamer_job_bvh(const hamer_job *job, char **bvh, size_t *len);
/* The last run's hands as one OBJ (hamer_hands_obj). On error a negative
 * code is returned and *obj is not set. */
HAMER_API int hamer_job_obj(const hamer_job *job, char **obj, size_t *len);
/* Hand i of the last run as an OBJ (hamer_hand_obj). On error (no such
 * hand, a hand without a result) a negative code is returned and *obj is
 * not set. */
HAMER_API int hamer_job_hand_obj(const hamer_job *job, int hand, char **obj, size_t *len);

/* ---- Folder mode: every photo of a folder, resumable ----
 *
 * What `hamer batch` and Model.predict_folder do, in one place: the scan
 * (sorted by name, hidden files left out, globs; recursive: links
 * followed, each folder once, at most HAMER_FOLDER_MAX_DEPTH deep and
 * HAMER_FOLDER_MAX_ENTRIES names), the naming of the outputs (per image
 * NAME.EXT in OUT's mirror of its subfolder: NAME.json, NAME_all.png,
 * NAME_side.png, NAME_N.obj, NAME.glb, NAME.bvh), the skip rule (NAME.json records its input
 * by path, size and mtime; the first owner of a NAME keeps it), OUT's
 * errors.jsonl (one fsync'd line per failure) and the lock that keeps two
 * runs off one output folder. src/hamer_folder.c lists the rules.
 *
 * hamer_folder_open scans and plans: each image is TODO or SKIPPED (done
 * earlier, or a failure that stands); name clashes are FAILED at once.
 * hamer_folder_process computes one TODO image with a photo job; distinct
 * images may be processed from several threads at once. */

#define HAMER_FOLDER_MAX_DEPTH 64
#define HAMER_FOLDER_MAX_ENTRIES 1000000

typedef struct hamer_folder hamer_folder;

typedef struct {
    const char *input_dir;          /* required */
    const char *out_dir;            /* NULL: nothing written, nothing skipped */
    const char *boxes_dir;          /* D/.../NAME.json per image; NULL: the job's detector finds the hands */
    const char *const *globs;       /* fnmatch patterns on the file name; n_globs 0: every file */
    int n_globs;
    bool recursive;                 /* subfolders too (their outputs in OUT's mirror of them) */
    bool force;                     /* compute every image, even those done earlier */
    bool retry_failed;              /* compute again the images whose failure stands */
    bool render, side_view, save_mesh, vertices;    /* the outputs: NAME_all.png, NAME_side.png,
                                                       NAME_N.obj, vertices in NAME.json */
    bool glb;                       /* NAME.glb: the hands as a skinned binary glTF (hamer_hands_glb) */
    int (*cancel)(void *user);      /* polled by the scan (NULL: never stop) */
    void *cancel_user;
    uint32_t render_draw;           /* (from reserved) NAME_all.png: the HAMER_DRAW_* bits to draw
                                       (hamer_folder_default_params: HAMER_DRAW_ALL); 0: the meshes alone,
                                       as before this field */
    bool bvh;                       /* (from reserved) NAME.bvh: the hands as BVH skeletons (hamer_hands_bvh) */
    uint8_t reserved[HAMER_PARAMS_RESERVED - 5]; /* zero (hamer_folder_default_params) */
} hamer_folder_params;

typedef enum {
    HAMER_FOLDER_TODO = 0,
    HAMER_FOLDER_SKIPPED = 1,       /* complete from an earlier run, or a failure that stands */
    HAMER_FOLDER_COMPUTED = 2,
    HAMER_FOLDER_FAILED = 3         /* error_stage/error_reason say why; a result may still be written */
} hamer_folder_status;

/* One image of the plan; strings owned by the folder, valid until it is
 * closed (error_* until the image is processed again). */
typedef struct {
    const char *path;               /* the file, as the OS names it */
    const char *rel;                /* its path below input_dir */
    const char *shown;              /* path in the escaped, printable form of errors.jsonl */
    const char *result_path;        /* OUT/.../NAME.json; NULL without out_dir */
    hamer_folder_status status;
    const char *error_stage;        /* decode, boxes, detect, predict, render, write, name, hands; NULL: none */
    const char *error_reason;       /* (for a skipped image: the failure an earlier run recorded) */
} hamer_folder_image;

/* An image decoded by the caller (a prefetching front end): rgb (NULL with
 * decode_error set when it did not decode) and the time it took. */
typedef struct {
    const uint8_t *rgb;
    int width, height;
    double decode_ms;
    const char *decode_error;
} hamer_folder_decoded;

/* Totals so far: images (all), computed, skipped, failed (by this run),
 * failed_earlier (skipped images with a standing failure), hands, and the
 * seconds of each stage summed over the images. */
typedef struct {
    int images, todo, computed, skipped, failed, failed_earlier, hands;
    double decode_s, detect_s, crop_s, regress_s, finalise_s, render_s, write_s;
} hamer_folder_stats;

HAMER_API hamer_folder_params hamer_folder_default_params(void);
/* Check the folders (input readable, output created and writable and not
 * the input, boxes_dir a folder), take OUT's lock, scan, plan, rewrite
 * errors.jsonl to the failures that stand and record the name clashes.
 * Nothing is computed. On error a negative code is returned with a
 * one-line message (HAMER_E_IO for the folders, the lock and the scan's
 * limits, HAMER_E_ARG for bad parameters or OUT = input, HAMER_E_CANCELLED
 * when cancel said stop) and nothing is written. */
HAMER_API int hamer_folder_open(const hamer_folder_params *params, hamer_folder **out);
/* The number of images (0 for NULL). */
HAMER_API int hamer_folder_get_count(const hamer_folder *f);
/* Image i into *out; HAMER_E_ARG for NULL or i out of range. */
HAMER_API int hamer_folder_get_image(const hamer_folder *f, int i, hamer_folder_image *out);
/* Compute TODO image i with job (its detection state is used when there is
 * no boxes_dir): decode it (or take pre), read its boxes, run the job,
 * write its outputs (NAME.json last, each atomically) and record its
 * failure, if any, in errors.jsonl. The image's status becomes COMPUTED or
 * FAILED; a job cancelled through its state's callback leaves it TODO and
 * returns HAMER_E_CANCELLED. With result non-NULL, *result is NAME.json's
 * text (hamer_free; NULL when there is none). HAMER_OK otherwise (a failed
 * image is not an error of this call); HAMER_E_ARG for bad arguments or an
 * image that is not TODO. job may be NULL when pre says the image did not
 * decode. */
HAMER_API int hamer_folder_process(hamer_folder *f, int i, hamer_job *job, const hamer_folder_decoded *pre,
                                   char **result);
HAMER_API int hamer_folder_get_stats(const hamer_folder *f, hamer_folder_stats *out);
/* Release the lock and everything the folder holds. */
HAMER_API void hamer_folder_close(hamer_folder *f);
/* s in the escaped form folder mode writes names in (well-formed UTF-8
 * kept but control characters; other bytes \xNN; a backslash \\):
 * malloc'd (hamer_free), NULL when out of memory. */
HAMER_API char *hamer_name_escape(const char *s);

/* Hand boxes: a JSON document [{"bbox":[x1,y1,x2,y2],"is_right":true},
 * ...] (is_right optional, default true; what `hamer detect` writes and
 * `hamer run --boxes` reads) into at most max boxes: the count, or a
 * negative code with a message naming the entry. hamer_box_parse reads
 * one "x1,y1,x2,y2[:left|:right]". */
HAMER_API int hamer_boxes_parse(const char *json, size_t len, hamer_box *boxes, int max);
HAMER_API int hamer_box_parse(const char *text, hamer_box *box);

/* Free memory returned by this library. */
HAMER_API void hamer_free(void *p);

/* Verification mode: 1 runs the textbook formulation (full single-token
 * self-attention, per-layer K/V projections, no constant folding, uint8
 * normalised before the patch embedding). Slower; for checking the default
 * path, which computes the same function. */
HAMER_API int hamer_state_set_plain(hamer_state *state, int plain);

/* Per-stage profiling: set_profile(1) zeroes and starts the counters (0
 * stops them; 2: see hamer_state_get_profile_sim);
 * hamer_state_get_profile copies up to max accumulated seconds per stage and
 * their names ("patch_embed", "layernorm", "qkv", "attention", "proj",
 * "fc1_gelu", "fc2", "head", "mano", "finalise") and returns the count. */
/* Cancellation: while a call on this state runs, cancel(user) is asked
 * between transformer blocks and between passes (every few tens of
 * milliseconds); when it returns non-zero the call stops and returns
 * HAMER_E_CANCELLED, its outputs undefined. It is called on the thread that
 * made the call, never concurrently. NULL removes the callback. A server drops work nobody waits for this way; a
 * binding turns Ctrl-C into it. */
typedef int (*hamer_cancel_fn)(void *user);
HAMER_API int hamer_state_set_cancel(hamer_state *state, hamer_cancel_fn cancel, void *user);

#define HAMER_N_STAGES 10
HAMER_API int hamer_state_set_profile(hamer_state *state, int on);
HAMER_API int hamer_state_get_profile(const hamer_state *state, double *seconds, const char **names, int max);

/* Profiling mode 2 (set_profile(state, 2)) also models each stage's
 * critical path: every parallel task's duration is recorded, and the stage
 * is credited with the time its tasks would take on 1, 2, 4, 8 and 16
 * threads claiming them as the thread pool does (each task, in order, by
 * the first thread free), its serial parts staying serial. It predicts the
 * work split on more cores from a run on few (`hamer bench
 * --critical-path`); shared caches, memory bandwidth and thread wake-ups
 * are not modelled. get_profile_sim copies up to max_stages stages (in
 * get_profile's order), HAMER_SIM_THREADS seconds each: seconds[stage *
 * HAMER_SIM_THREADS + k] for 1 << k threads; returns the count. */
#define HAMER_SIM_THREADS 5
HAMER_API int hamer_state_get_profile_sim(const hamer_state *state, double *seconds, int max_stages);
/* Mode 2 with the parallel work cut as it would be for `split` threads
 * (1..1024; 0: for the state's own), still run on the state's threads:
 * the split that a machine with that many cores would run, timed here.
 * Results do not depend on the split. */
HAMER_API int hamer_state_set_profile_sim(hamer_state *state, int split);

/* This thread's last error message, and its code (HAMER_E_*, 0 if none). */
HAMER_API const char *hamer_last_error(void);
HAMER_API int hamer_last_error_code(void);
/* A short constant description of a code ("bad argument", ...); "unknown
 * error" for a value that is not a hamer_status. */
HAMER_API const char *hamer_strerror(int code);
/* The library's version, "MAJOR.MINOR.PATCH" (the header's is
 * HAMER_VERSION_STRING; they differ when a program runs against another
 * build of the library than it was compiled with). */
HAMER_API const char *hamer_version(void);
/* One line on the kernels this process runs and the backends it has:
 * "kernels: avx512; precision fp32: fp32; fast: <scheme>; ...; cpu: avx2
 * avx512 vnni bf16; backends: cpu" (constant storage). */
HAMER_API const char *hamer_system_info(void);

/* ---- Logging ---- */

typedef enum { HAMER_LOG_ERROR = 0, HAMER_LOG_WARN = 1, HAMER_LOG_INFO = 2, HAMER_LOG_PROGRESS = 3 } hamer_log_level;
/* msg is one line without a newline; PROGRESS messages ("loading weights
 * 42%") come in a series that a terminal may overwrite in place. */
typedef void (*hamer_log_fn)(void *user, hamer_log_level level, const char *msg);
/* Where the library's messages go (it never prints): fn(user, ...), or
 * nowhere when fn is NULL (the default). Process-wide; not thread-safe
 * against concurrent library calls. */
HAMER_API void hamer_log_set(hamer_log_fn fn, void *user);

#ifdef __cplusplus
}
#endif
#endif
