/* backend.h - where a forward runs: the interface every backend implements,
 * and the registry of the backends this build has.
 *
 * The seam is the whole forward of a fixed graph (crops in, parameters
 * out), not single ops as in a general tensor library: a backend packs the
 * loaded weights (model/model.h: hm_weights, plain row-major tensors) into
 * its own layout, makes per-request states, and runs a batch of crops
 * through the backbone and the MANO head. Camera and MANO (finalise) run on
 * the host for every backend (model/forward.c).
 *
 * Adding a backend: a folder src/backend/NAME/ with one hm_backend value
 * (below), a CMake option that compiles it, and its line in backend.c's
 * table. docs/internals.md, "Backends", walks through it.
 *
 * Devices are named "NAME" or "NAME:INDEX" ("cpu", "cuda:1"); an unknown
 * name, an index out of range or a backend that cannot run here is an
 * error with one line saying why, never a fallback to another backend.
 */
#ifndef HM_BACKEND_H
#define HM_BACKEND_H

#include <stddef.h>

#include "kernels/gemm.h"
#include "model/model.h"

/* ---- the packed model file's view of a backend's model ---------------------- */

/* How a matrix is packed: always fp32, in the model's precision, as the
 * backend packs a matmul that low precision hurts most (int8 with fine
 * weights in an int8 model, bf16 in a bf16 one), or, in the fast
 * precision, bf16 where the CPU has it and fp32 elsewhere. */
typedef enum { SLOT_FP32, SLOT_MODEL, SLOT_SENSITIVE, SLOT_BF16 } slot_kind;

/* One pass over every array a backend's model owns, in file order
 * (load/model_pack*.c write, bind and free through it). */
typedef struct hm_visitor hm_visitor;
struct hm_visitor {
    /* A packed matrix W [N, K] (+ bias [N] if bias). */
    int (*matrix)(hm_visitor *v, const char *name, hm_packed *p, int N, int K, int bias, slot_kind kind);
    /* A heap array: field is the address of the model's pointer member. */
    int (*array)(hm_visitor *v, const char *name, void *field, size_t bytes);
    /* An array stored inside the model struct itself. */
    int (*embedded)(hm_visitor *v, const char *name, void *data, size_t bytes);
};

/* ---- the interface ------------------------------------------------------------ */

typedef struct hm_backend {
    const char *name;            /* "cpu", "cuda": the device name */
    /* Devices present now (0 when the backend cannot run here), or a
     * negative code with the reason recorded (hm_errmsg). */
    int (*devices)(void);
    /* HM_OK when device dev can run precision prec, else
     * HM_E_UNSUPPORTED with the reason. */
    int (*check)(int dev, int prec);
    /* The scheme behind a precision here, e.g. "fp32" (static string). */
    const char *(*scheme)(int prec);
    /* One line on what runs where ("kernels: avx512; ..."; static string). */
    const char *(*describe)(void);
    /* Pack w for device dev in precision prec into *bm. HM_OK or a code
     * with a message; w's views are released through hm_weights_done. */
    int (*pack)(const hm_weights *w, int prec, int dev, void **bm);
    /* Packed model files (NULL when the backend has none): every array of
     * a packed model, in file order; and an empty model of config c whose
     * arrays a visit then binds (a file's reader fills them). */
    int (*visit)(void *bm, const hm_config *c, hm_visitor *v);
    int (*blank)(const hm_config *c, int prec, void **bm);
    /* Frees the packed model's own structures (its arrays are freed
     * through visit by the caller when the backend has one). */
    void (*model_free)(void *bm);
    /* A state for up to max_batch crops on nthreads host threads, using
     * *ctl for the run's switches (it must outlive the state). */
    int (*state_new)(const void *bm, const hm_config *c, int prec, int dev, int max_batch, int nthreads,
                     hm_run_ctl *ctl, void **bs);
    void (*state_free)(void *bs);
    /* B <= max_batch crops (float [B,3,256,192] normalised, any alignment,
     * or uint8 [B,256,192,3] RGB) -> params [B,157]. HM_OK or the code of
     * the step that failed (params then partly written). */
    int (*forward)(void *bs, const void *crops, int is_u8, int B, float *params);
} hm_backend;

/* ---- the registry ------------------------------------------------------------- */

/* The backends compiled in, in order ("cpu" first); n in *count. */
const hm_backend *const *hm_backends(int *count);
/* Parse a device string ("cpu", "cuda", "cuda:1"; NULL or "" is "cpu")
 * into its backend and index. HM_E_ARG for a malformed string, an unknown
 * name (the message lists the backends compiled in) or a negative index;
 * HM_E_UNSUPPORTED when the backend cannot run here or has no such device
 * (the message says why and how many it has). */
int hm_device_parse(const char *device, const hm_backend **be, int *dev);
/* "cpu", "cuda:1": the canonical name of a device (into buf). */
const char *hm_device_name(const hm_backend *be, int dev, char *buf, size_t n);

/* ---- the model and state over a backend (state.c, forward.c) ---------- */

/* The one regression entry (forward.c): B crops, float [B,3,256,192]
 * normalised (any alignment) or uint8 [B,256,192,3] RGB, in passes of at
 * most max_batch: the backend's forward (crops -> parameters), then camera
 * and MANO on the host. HM_OK or the first failing stage's code (outputs
 * then partly written); HM_E_NOMANO if mesh outputs are asked of a model
 * without MANO. */
int hm_forward(hm_state *s, const void *crops, int is_u8, int B, const hm_out *out);

/* Per-request state (state.c): the backend's state for max_batch crops and
 * nthreads threads, and the host buffers. */
int hm_state_init(hm_state *s, const hm_model *m, int max_batch, int nthreads);
void hm_state_release(hm_state *s);

/* The model's backend objects, MANO and m itself freed (state.c); arrays
 * inside a packed file's mapping are left to the mapping, which is
 * unmapped when the model owns it. NULL: nothing. */
void hm_model_free(hm_model *m);

/* The CPU backend (backend/cpu/), and the CUDA backend's entry, which
 * loads its shared object on first use (backend_dl.c, backend/cuda/). */
extern const hm_backend hm_backend_cpu;
extern const hm_backend hm_backend_cuda;

#endif
