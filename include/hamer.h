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
 */
#ifndef HAMER_H
#define HAMER_H

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
} hamer_status;
#define HAMER_N_STATUS 8          /* codes 0 .. -7 */

/* Largest box scale factor (hamer_predict_params.rescale): the crop then
 * covers 16 times the box, already far beyond any use. */
#define HAMER_MAX_RESCALE 16.0

typedef struct hamer_model hamer_model;
typedef struct hamer_state hamer_state;

typedef struct {
    const char *mano_path;  /* optional .npz with MANO buffers (no "mano." prefix);
                               used when the checkpoint lacks mano.* */
    int progress;           /* 1: report load progress (HAMER_LOG_PROGRESS messages) */
    int precision;          /* HAMER_PRECISION_FP32 (default) or HAMER_PRECISION_FAST */
} hamer_model_params;

/* FP32 computes the PyTorch model to float precision. FAST is the gated
 * low-precision scheme for the backbone's big matmuls (hamer_model_get_info
 * names it); loading fails if this CPU cannot run it. */
#define HAMER_PRECISION_FP32 0
#define HAMER_PRECISION_FAST 1

typedef struct {
    int vit_depth, vit_dim, vit_heads, vit_mlp, n_tokens;      /* 32, 1280, 16, 5120, 192 */
    int head_depth, head_dim, head_heads, head_dim_head, head_mlp; /* 6, 1024, 8, 64, 1024 */
    int has_mano;
    const char *isa;        /* kernel ISA in use: "avx512", "avx2", "scalar" */
    int precision;          /* HAMER_PRECISION_* the model was loaded with */
    const char *scheme;     /* what that precision is inside, e.g. "fp32" */
} hamer_model_info;

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
 * NULL on failure (see hamer_last_error()). */
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
HAMER_API const int32_t *hamer_model_faces(const hamer_model *model);

/* Per-thread inference state for up to max_batch crops per internal pass
 * (larger batches are processed in passes) and n_threads worker threads
 * (0 = number of online CPUs). NULL on failure. */
HAMER_API hamer_state *hamer_state_new(const hamer_model *model, int max_batch, int n_threads);
HAMER_API void hamer_state_free(hamer_state *state);

/* Regress B crops. float: [B,3,256,192] normalised ((x/255-mean)/std, RGB).
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

typedef struct {
    double rescale;         /* box scale factor, default 2.0 */
    hamer_crop_mode crop_mode;  /* default HAMER_CROP_WARP (the official demo's) */
} hamer_predict_params;

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
    float keypoints_3d[21 * 3];  /* metres, MANO frame (add cam_t_full for the camera frame) */
    float keypoints_2d[21 * 2];  /* full-image pixels */
    float vertices[778 * 3];     /* same frame as keypoints_3d */
    double box_center[2], box_size; /* the crop the model saw */
    /* Where the box came from: filled by hamer_predict_detections (detected
     * = 1), zero for boxes given to hamer_predict. */
    struct {
        int detected;
        float score;             /* palm detector score */
        float presence;          /* hand presence (landmark model) */
        float handedness;        /* P(right hand) */
        float landmarks[21 * 3]; /* x, y image pixels; z relative depth on x's scale */
        int pass;                /* 0 full frame, k > 0 tile level k */
    } detection;
} hamer_hand;

typedef struct {
    double decode_ms, crop_ms, regress_ms, finalise_ms;
    double detect_ms;       /* hand detection, when the boxes were detected (else 0) */
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

typedef struct {
    const char *dir;        /* models directory, or NULL to search (above) */
    int lite;               /* 1: the lite models (faster, less accurate) */
} hamer_detector_params;

typedef struct {
    int max_hands;          /* at most this many hands (1..HAMER_MAX_HANDS), default 8 */
    float min_score;        /* palm detector score threshold, default 0.5 */
    float min_presence;     /* hand presence threshold, default 0.5 */
    int tiles;              /* 1 (default): also search overlapping tiles of the
                               image for small hands; 0: MediaPipe's one
                               full-frame pass only (faster) */
} hamer_detect_params;

typedef struct {
    hamer_box box;          /* tight box of the 21 landmarks; is_right from handedness */
    float score;            /* palm detector score */
    float presence;         /* hand presence */
    float handedness;       /* P(right hand) on a non-mirrored photo */
    float landmarks[21 * 3];/* x, y image pixels; z relative depth on x's scale */
    int pass;               /* 0 full frame, k > 0 tile level k */
} hamer_detection;

HAMER_API hamer_detector_params hamer_detector_default_params(void);
HAMER_API hamer_detect_params hamer_detect_default_params(void);
/* NULL on failure (models not found: the message lists where it looked and
 * names scripts/get_detector.sh; a malformed model file: what is wrong). */
HAMER_API hamer_detector *hamer_detector_load(const hamer_detector_params *params);
HAMER_API void hamer_detector_free(hamer_detector *detector);
/* The directory the models were loaded from (owned by the detector). */
HAMER_API const char *hamer_detector_dir(const hamer_detector *detector);
/* Per-thread detection state with n_threads worker threads (0 = online CPUs). */
HAMER_API hamer_detect_state *hamer_detect_state_new(const hamer_detector *detector, int n_threads);
HAMER_API void hamer_detect_state_free(hamer_detect_state *state);
/* Hands in an RGB image (w x h, interleaved, 8-bit): up to max (and
 * params->max_hands) detections, best palm score first; returns their
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

/* Decode a JPEG or PNG file / buffer into 8-bit RGB (EXIF orientation
 * applied; at most 100 megapixels). *rgb is freed with hamer_free. */
HAMER_API int hamer_image_load(const char *path, uint8_t **rgb, int *w, int *h);
HAMER_API int hamer_image_decode(const void *buf, size_t len, uint8_t **rgb, int *w, int *h);

/* The RESULT.json document of `hamer run` for these hands (timings may be
 * NULL: then no "timings_ms" key). NULL on failure. Free with hamer_free. */
HAMER_API char *hamer_result_json(int w, int h, const hamer_hand *hands, int n, int with_vertices, const hamer_timings *timings);

/* PNG (in memory) of the hands drawn over the image (side_view 0), or of
 * the meshes turned 90 degrees on white (side_view 1). *png is freed with
 * hamer_free. */
HAMER_API int hamer_render_png(const hamer_model *model, const uint8_t *rgb, int w, int h, const hamer_hand *hands, int n,
                     int side_view, uint8_t **png, size_t *len);

/* The hand's mesh as the official demo's --save_mesh writes it (OBJ text:
 * vertices + cam_t_full turned 180 degrees about x, the 1538 faces plus
 * the 14 that close the wrist, winding reversed for left hands). *obj is
 * freed with hamer_free. HAMER_E_ARG for a hand without a result. */
HAMER_API int hamer_hand_obj(const hamer_model *model, const hamer_hand *hand, char **obj, size_t *len);

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

/* Per-stage profiling: set_profile(1) zeroes and starts the counters;
 * hamer_state_profile copies up to max accumulated seconds per stage and
 * their names ("patch_embed", "layernorm", "qkv", "attention", "proj",
 * "fc1_gelu", "fc2", "head", "mano", "finalise") and returns the count. */
#define HAMER_N_STAGES 10
HAMER_API int hamer_state_set_profile(hamer_state *state, int on);
HAMER_API int hamer_state_profile(const hamer_state *state, double *seconds, const char **names, int max);

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
/* One line on the kernels this process runs: "kernels: avx512; precision
 * fp32: fp32; fast: <scheme>; cpu: avx2 avx512 vnni bf16" (constant
 * storage). */
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
