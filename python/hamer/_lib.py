"""Finding and loading libhamer.so, and the ctypes mirror of include/hamer.h.

Search order (the first that exists wins; see ``find_library_candidates``):

1. ``$HAMER_LIB``: the path of the library file. When it is set, nothing
   else is tried, so a wrong value is an error instead of silently loading a
   different build.
2. Next to this package: ``hamer/libhamer.so`` (or ``libhamer.so.0``), the
   library ``pip install ./python`` bundles (python/_hamer_build.py).
3. A development checkout: ``<repo>/build/libhamer.so`` when the package is
   imported from ``<repo>/python/hamer`` (recognised by
   ``<repo>/include/hamer.h``), the default ``cmake -B build`` directory.
4. The dynamic loader's search path (``LD_LIBRARY_PATH``, ``ld.so.cache``,
   e.g. after ``cmake --install``): ``libhamer.so.0``, then ``libhamer.so``,
   then whatever ``ctypes.util.find_library("hamer")`` names.

The library is opened with ``ctypes.CDLL``, which releases the GIL for the
duration of every foreign call (``ctypes.PyDLL`` would hold it): inference
in one Python thread does not block the others.
"""

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path

# ---- Constants of include/hamer.h ------------------------------------------
# (Sizes and codes the header defines as macros, which a shared library
# cannot export; tests/test_python.py checks them against the header.)

CROP_H = 256
CROP_W = 192
N_VERTS = 778
N_FACES = 1538
N_KP = 21
N_PARAMS = 157
FOCAL = 5000.0
MAX_HANDS = 64
BOXES_GIVEN, BOXES_DETECTED = 0, 1   # hamer_boxes_source
MAX_RESCALE = 16.0

OK = 0
E_ARG = -1
E_IO = -2
E_FORMAT = -3
E_SHAPE = -4
E_NOMEM = -5
E_UNSUPPORTED = -6
E_NOMANO = -7
E_CANCELLED = -8

ERROR_NAMES = {
    E_ARG: "HAMER_E_ARG",
    E_IO: "HAMER_E_IO",
    E_FORMAT: "HAMER_E_FORMAT",
    E_SHAPE: "HAMER_E_SHAPE",
    E_NOMEM: "HAMER_E_NOMEM",
    E_UNSUPPORTED: "HAMER_E_UNSUPPORTED",
    E_NOMANO: "HAMER_E_NOMANO",
    E_CANCELLED: "HAMER_E_CANCELLED",
}

PRECISION_FP32 = 0
PRECISION_FAST = 1

# Every *_params struct ends with this many reserved bytes (zero: the
# structures here start from the library's hamer_*_default_params()).
PARAMS_RESERVED = 64
# hamer_hand and hamer_timings end with this many (the library zeroes them).
HAND_RESERVED = 4096
TIMINGS_RESERVED = 64

CROP_WARP = 0
CROP_PAD = 1

# hamer_focal_source, hamer_anim_shape
FOCAL_NONE, FOCAL_DEFAULT, FOCAL_GIVEN, FOCAL_EXIF = 0, 1, 2, 3
ANIM_SHAPE_TRACK, ANIM_SHAPE_FIRST = 0, 1
MAX_FOCAL = 1e7

# ---- Structures (same field order and types as hamer.h; ctypes applies the
# platform's C alignment rules, so the layouts match the compiler's) --------

c_float_p = ctypes.POINTER(ctypes.c_float)
c_uint8_p = ctypes.POINTER(ctypes.c_uint8)
_Reserved = ctypes.c_uint8 * PARAMS_RESERVED

# ---- Integers at the boundary ------------------------------------------------
# ctypes stores a Python int into a C integer by keeping its low bits, so
# 2**32 + 3 given for an int would reach the library as 3, and 2**40 as 0.
# Every integer structure field and every integer argument of a bound
# function is range-checked here instead (the public functions in
# __init__.py check their own arguments first, with the argument's name;
# this is the net under them).

_INT_RANGES = {}
for _t in (ctypes.c_int, ctypes.c_uint, ctypes.c_long, ctypes.c_longlong, ctypes.c_size_t):
    _bits = 8 * ctypes.sizeof(_t)
    _signed = _t(-1).value < 0
    _INT_RANGES[_t] = (-(1 << (_bits - 1)), (1 << (_bits - 1)) - 1) if _signed else (0, (1 << _bits) - 1)
del _t, _bits, _signed


def check_int(what, value, lo, hi):
    """value (an int, or anything with __index__: numpy integers, bools)
    as a Python int in lo..hi; else ValueError (out of range) or TypeError
    (not an integer), naming what and the range."""
    try:
        v = value.__index__()
    except (AttributeError, TypeError):
        raise TypeError(f"{what} must be an integer, got {type(value).__name__}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{what} = {v} is outside {lo}..{hi}, the range of the C integer it is passed as")
    return v


def _checked_type(base):
    """A subclass of the ctypes integer type `base` whose from_param (what
    ctypes calls for each argument) refuses values out of its range."""
    lo, hi = _INT_RANGES[base]

    @classmethod
    def from_param(cls, value):
        return base(check_int("value", value, lo, hi))

    return type(f"checked_{base.__name__}", (base,), {"from_param": from_param})


_CHECKED = {t: _checked_type(t) for t in _INT_RANGES}


def checked_argtypes(argtypes):
    """argtypes with every integer passed by value range-checked."""
    return [_CHECKED.get(t, t) for t in argtypes]


class _Struct(ctypes.Structure):
    """A structure whose integer fields refuse what their C type cannot
    hold (ValueError naming Structure.field and the range)."""

    def __setattr__(self, name, value):
        limits = _FIELD_RANGES.get(type(self))
        if limits is None:
            limits = _FIELD_RANGES[type(self)] = {f[0]: _INT_RANGES[f[1]] for f in getattr(self, "_fields_", ())
                                                  if f[1] in _INT_RANGES}
        if name in limits:
            value = check_int(f"{type(self).__name__}.{name}", value, *limits[name])
        super().__setattr__(name, value)


_FIELD_RANGES = {}


class ModelParams(_Struct):
    _fields_ = [
        ("mano_path", ctypes.c_char_p),
        ("progress", ctypes.c_bool),
        ("precision", ctypes.c_int),  # hamer_precision: a C enum, int-sized with gcc/clang
        ("no_cache", ctypes.c_bool),
        ("device", ctypes.c_char_p),  # took 7 bytes of alignment and 8 of the reserved space
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 15)),
    ]


class ModelInfo(_Struct):
    _fields_ = [
        ("vit_depth", ctypes.c_int),
        ("vit_dim", ctypes.c_int),
        ("vit_heads", ctypes.c_int),
        ("vit_mlp", ctypes.c_int),
        ("n_tokens", ctypes.c_int),
        ("head_depth", ctypes.c_int),
        ("head_dim", ctypes.c_int),
        ("head_heads", ctypes.c_int),
        ("head_dim_head", ctypes.c_int),
        ("head_mlp", ctypes.c_int),
        ("has_mano", ctypes.c_int),
        ("isa", ctypes.c_char_p),
        ("precision", ctypes.c_int),
        ("scheme", ctypes.c_char_p),
        ("device", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 64),
    ]


class StateParams(_Struct):
    _fields_ = [
        ("max_batch", ctypes.c_int),
        ("n_threads", ctypes.c_int),
        ("device", ctypes.c_char_p),
        ("reserved", _Reserved),
    ]


class BackendInfo(_Struct):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("n_devices", ctypes.c_int),
        ("why", ctypes.c_char_p),
        ("info", ctypes.c_char_p),
        ("reserved", ctypes.c_uint8 * 64),
    ]


class Output(_Struct):
    _fields_ = [
        ("params", c_float_p),
        ("pred_cam", c_float_p),
        ("pred_cam_t", c_float_p),
        ("vertices", c_float_p),
        ("keypoints_3d", c_float_p),
        ("keypoints_2d", c_float_p),
    ]


class Box(_Struct):
    _fields_ = [
        ("bbox", ctypes.c_float * 4),
        ("is_right", ctypes.c_int),
    ]


class PredictParams(_Struct):
    _fields_ = [
        ("rescale", ctypes.c_double),
        ("crop_mode", ctypes.c_int),  # a C enum: int-sized with gcc/clang
        ("focal_px", ctypes.c_float),
        ("fov_deg", ctypes.c_float),
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 8)),  # focal_px and fov_deg took 8 bytes
    ]


class HandDetection(_Struct):
    _fields_ = [
        ("detected", ctypes.c_int),
        ("score", ctypes.c_float),
        ("presence", ctypes.c_float),
        ("handedness", ctypes.c_float),
        ("landmarks", ctypes.c_float * (N_KP * 3)),
        ("pass_", ctypes.c_int),
        ("source", ctypes.c_int),
        ("body", ctypes.c_int),
        ("person", ctypes.c_int),
    ]


class Hand(_Struct):
    _fields_ = [
        ("ok", ctypes.c_int),
        ("error", ctypes.c_char * 256),
        ("box", Box),
        ("global_orient", ctypes.c_float * 9),
        ("hand_pose", ctypes.c_float * (15 * 9)),
        ("betas", ctypes.c_float * 10),
        ("pred_cam", ctypes.c_float * 3),
        ("cam_t_full", ctypes.c_float * 3),
        ("focal_length", ctypes.c_float),
        ("keypoints_3d", ctypes.c_float * (N_KP * 3)),
        ("keypoints_2d", ctypes.c_float * (N_KP * 2)),
        ("vertices", ctypes.c_float * (N_VERTS * 3)),
        ("box_center", ctypes.c_double * 2),
        ("box_size", ctypes.c_double),
        ("detection", HandDetection),
        # from the reserved space: the hand in the photo's camera, the rotations' conventions
        ("focal_source", ctypes.c_int),  # hamer_focal_source
        ("focal_px", ctypes.c_float),
        ("principal_point", ctypes.c_float * 2),
        ("cam_t", ctypes.c_float * 3),
        ("keypoints_3d_cam", ctypes.c_float * (N_KP * 3)),
        ("reproj_error", ctypes.c_float),
        ("reproj_error_max", ctypes.c_float),
        ("axis_angle", ctypes.c_float * (16 * 3)),
        ("quaternion", ctypes.c_float * (16 * 4)),
        ("n_pca", ctypes.c_int),
        ("pca", ctypes.c_float * 45),
        ("smplx_hand_pose", ctypes.c_float * 45),
        ("reserved", ctypes.c_uint8 * (HAND_RESERVED - 1100)),
    ]


class Detection(_Struct):
    _fields_ = [
        ("box", Box),
        ("score", ctypes.c_float),
        ("presence", ctypes.c_float),
        ("handedness", ctypes.c_float),
        ("landmarks", ctypes.c_float * (N_KP * 3)),
        ("pass_", ctypes.c_int),
        ("source", ctypes.c_int),
        ("body", ctypes.c_int),
        ("person", ctypes.c_int),
    ]


class DetectParams(_Struct):
    _fields_ = [
        ("max_hands", ctypes.c_int),
        ("min_score", ctypes.c_float),
        ("min_presence", ctypes.c_float),
        ("tiles", ctypes.c_bool),
        ("body", ctypes.c_int),  # hamer_body_mode: a C enum, int-sized with gcc/clang
        ("body_boxes", ctypes.c_bool),
        ("proposals", ctypes.c_int),  # hamer_proposals_mode (after 3 bytes of padding)
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 8)),  # body_boxes and proposals took the first 8
    ]


# hamer_body_mode
BODY_AUTO, BODY_ON, BODY_OFF = 0, 1, 2
SOURCE_PALM, SOURCE_BODY, SOURCE_BODY_KEYPOINTS, SOURCE_PROPOSAL = 0, 1, 2, 3


class DetectorParams(_Struct):
    _fields_ = [
        ("dir", ctypes.c_char_p),
        ("lite", ctypes.c_bool),
        ("body", ctypes.c_int),
        ("proposals", ctypes.c_int),  # hamer_proposals_mode
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 4)),
    ]


class Timings(_Struct):
    _fields_ = [
        ("decode_ms", ctypes.c_double),
        ("crop_ms", ctypes.c_double),
        ("regress_ms", ctypes.c_double),
        ("finalise_ms", ctypes.c_double),
        ("detect_ms", ctypes.c_double),
        ("reserved", ctypes.c_uint8 * TIMINGS_RESERVED),
    ]


class JobParams(_Struct):
    _fields_ = [
        ("predict", PredictParams),
        ("detect", DetectParams),
        ("reserved", _Reserved),
    ]


class JobInput(_Struct):
    _fields_ = [
        ("path", ctypes.c_char_p),
        ("data", ctypes.c_void_p),
        ("len", ctypes.c_size_t),
        ("rgb", c_uint8_p),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("decode_ms", ctypes.c_double),
        ("boxes", ctypes.POINTER(Box)),
        ("n_boxes", ctypes.c_int),
        ("source", ctypes.c_int),  # hamer_boxes_source (a C enum: int-sized)
        ("params", ctypes.POINTER(JobParams)),
    ]


class JobResult(_Struct):
    _fields_ = [
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("rgb", c_uint8_p),
        ("source", ctypes.c_int),
        ("n_hands", ctypes.c_int),
        ("hands", ctypes.POINTER(Hand)),
        ("detections", ctypes.POINTER(Detection)),
        ("n_failed", ctypes.c_int),
        ("timings", Timings),
        ("failed_stage", ctypes.c_int),  # hamer_job_stage
    ]


class AnimParams(_Struct):
    _fields_ = [
        ("fps", ctypes.c_double),
        ("shape", ctypes.c_int),  # hamer_anim_shape
        ("reserved", _Reserved),
    ]


class FolderParams(_Struct):
    _fields_ = [
        ("input_dir", ctypes.c_char_p),
        ("out_dir", ctypes.c_char_p),
        ("boxes_dir", ctypes.c_char_p),
        ("globs", ctypes.POINTER(ctypes.c_char_p)),
        ("n_globs", ctypes.c_int),
        ("recursive", ctypes.c_bool),
        ("force", ctypes.c_bool),
        ("retry_failed", ctypes.c_bool),
        ("render", ctypes.c_bool),
        ("side_view", ctypes.c_bool),
        ("save_mesh", ctypes.c_bool),
        ("vertices", ctypes.c_bool),
        ("glb", ctypes.c_bool),
        ("cancel", ctypes.c_void_p),
        ("cancel_user", ctypes.c_void_p),
        ("render_draw", ctypes.c_uint32),
        ("bvh", ctypes.c_bool),
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 5)),  # render_draw and bvh took 5 bytes
    ]


# hamer_draw bits (hamer_render_params.hide, hamer_folder_params.render_hide)
DRAW = {"mesh": 1, "boxes": 2, "keypoints": 4, "labels": 8}
DRAW_ALL = 15


class RenderParams(_Struct):
    _fields_ = [
        ("hide", ctypes.c_uint),
        ("reserved", _Reserved),
    ]


class FolderImage(_Struct):
    _fields_ = [
        ("path", ctypes.c_char_p),
        ("rel", ctypes.c_char_p),
        ("shown", ctypes.c_char_p),
        ("result_path", ctypes.c_char_p),
        ("status", ctypes.c_int),  # hamer_folder_status
        ("error_stage", ctypes.c_char_p),
        ("error_reason", ctypes.c_char_p),
    ]


class FolderDecoded(_Struct):
    _fields_ = [
        ("rgb", c_uint8_p),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("decode_ms", ctypes.c_double),
        ("decode_error", ctypes.c_char_p),
    ]


FOLDER_TODO, FOLDER_SKIPPED, FOLDER_COMPUTED, FOLDER_FAILED = 0, 1, 2, 3


# ---- Prototypes --------------------------------------------------------------

_P = ctypes.c_void_p  # opaque hamer_model * / hamer_state *
_INT = ctypes.c_int

# hamer_cancel_fn: int (*)(void *user)
CANCEL_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)

_PROTOTYPES = {
    # name: (restype, argtypes)
    "hamer_model_default_params": (ModelParams, []),
    "hamer_model_load": (_P, [ctypes.c_char_p, ctypes.POINTER(ModelParams)]),
    "hamer_model_free": (None, [_P]),
    "hamer_model_get_info": (_INT, [_P, ctypes.POINTER(ModelInfo)]),
    "hamer_backend_count": (_INT, []),
    "hamer_state_default_params": (StateParams, []),
    "hamer_state_new_with_params": (_P, [_P, ctypes.POINTER(StateParams)]),
    "hamer_backend_get": (_INT, [_INT, ctypes.POINTER(BackendInfo)]),
    "hamer_model_get_faces": (ctypes.POINTER(ctypes.c_int32), [_P]),
    "hamer_model_save_packed": (_INT, [_P, ctypes.c_char_p]),
    "hamer_state_new": (_P, [_P, _INT, _INT]),
    "hamer_state_free": (None, [_P]),
    "hamer_state_set_cancel": (_INT, [_P, CANCEL_FN, ctypes.c_void_p]),
    "hamer_regress_f32": (_INT, [_P, c_float_p, _INT, ctypes.POINTER(Output)]),
    "hamer_regress_u8": (_INT, [_P, c_uint8_p, _INT, ctypes.POINTER(Output)]),
    "hamer_predict_default_params": (PredictParams, []),
    "hamer_predict": (_INT, [_P, c_uint8_p, _INT, _INT, ctypes.POINTER(Box), _INT,
                             ctypes.POINTER(PredictParams), ctypes.POINTER(Hand),
                             ctypes.POINTER(Timings)]),
    "hamer_image_load": (_INT, [ctypes.c_char_p, ctypes.POINTER(c_uint8_p),
                                ctypes.POINTER(_INT), ctypes.POINTER(_INT)]),
    "hamer_image_decode": (_INT, [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(c_uint8_p),
                                  ctypes.POINTER(_INT), ctypes.POINTER(_INT)]),
    # char * that must be passed back to hamer_free: c_void_p, not c_char_p
    # (which would copy the text and lose the pointer).
    "hamer_result_json": (ctypes.c_void_p, [_INT, _INT, ctypes.POINTER(Hand), _INT, _INT,
                                            ctypes.POINTER(Timings)]),
    # the last argument: hamer_boxes_source (BOXES_GIVEN / BOXES_DETECTED)
    "hamer_result_json_source": (ctypes.c_void_p, [_INT, _INT, ctypes.POINTER(Hand), _INT, _INT,
                                                   ctypes.POINTER(Timings), _INT]),
    "hamer_render_png": (_INT, [_P, c_uint8_p, _INT, _INT, ctypes.POINTER(Hand), _INT, _INT,
                                ctypes.POINTER(c_uint8_p), ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_render_overlay_png": (_INT, [_P, c_uint8_p, _INT, _INT, ctypes.POINTER(Hand), _INT,
                                        ctypes.POINTER(RenderParams), ctypes.POINTER(c_uint8_p),
                                        ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_hands_glb": (_INT, [_P, ctypes.POINTER(Hand), _INT, ctypes.POINTER(c_uint8_p),
                               ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_hands_bvh": (_INT, [_P, ctypes.POINTER(Hand), _INT, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_exif_focal": (_INT, [ctypes.c_void_p, ctypes.c_size_t, _INT, _INT, ctypes.POINTER(ctypes.c_float)]),
    "hamer_exif_focal_file": (_INT, [ctypes.c_char_p, _INT, _INT, ctypes.POINTER(ctypes.c_float)]),
    "hamer_anim_default_params": (AnimParams, []),
    "hamer_anim_new": (_P, [_P, ctypes.POINTER(AnimParams)]),
    "hamer_anim_add": (_INT, [_P, ctypes.c_double, _P, _P, _INT]),
    "hamer_anim_write_glb": (_INT, [_P, ctypes.c_char_p]),
    "hamer_anim_write_bvh": (_INT, [_P, ctypes.c_char_p]),
    "hamer_anim_free": (None, [_P]),
    # tracks / raw / smoothed as opaque pointers (handed on to hamer_anim_add); stats NULL
    "hamer_tracker_get_results": (_INT, [_P, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_void_p),
                                         ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]),
    "hamer_job_default_params": (JobParams, []),
    "hamer_job_new": (_P, [_P, _P, ctypes.POINTER(JobParams)]),
    "hamer_job_free": (None, [_P]),
    "hamer_job_run": (_INT, [_P, ctypes.POINTER(JobInput)]),
    "hamer_job_get_result": (_INT, [_P, ctypes.POINTER(JobResult)]),
    "hamer_job_result_json": (ctypes.c_void_p, [_P, _INT]),
    "hamer_job_render_png": (_INT, [_P, _INT, ctypes.POINTER(c_uint8_p), ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_job_hand_obj": (_INT, [_P, _INT, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_folder_default_params": (FolderParams, []),
    "hamer_folder_open": (_INT, [ctypes.POINTER(FolderParams), ctypes.POINTER(_P)]),
    "hamer_folder_get_count": (_INT, [_P]),
    "hamer_folder_get_image": (_INT, [_P, _INT, ctypes.POINTER(FolderImage)]),
    "hamer_folder_process": (_INT, [_P, _INT, _P, ctypes.POINTER(FolderDecoded), ctypes.POINTER(ctypes.c_void_p)]),
    "hamer_folder_close": (None, [_P]),
    "hamer_name_escape": (ctypes.c_void_p, [ctypes.c_char_p]),
    "hamer_free": (None, [ctypes.c_void_p]),
    "hamer_last_error": (ctypes.c_char_p, []),
    "hamer_last_error_code": (_INT, []),
    "hamer_strerror": (ctypes.c_char_p, [_INT]),
    "hamer_version": (ctypes.c_char_p, []),
    "hamer_system_info": (ctypes.c_char_p, []),
}

_NAMES = ("libhamer.so", "libhamer.so.0")
_lock = threading.Lock()
_lib = None
_lib_path = None


def find_library_candidates():
    """The library files to try, in order, as (path or soname, origin)."""
    env = os.environ.get("HAMER_LIB")
    if env:
        return [(env, "HAMER_LIB")]
    here = Path(__file__).resolve().parent
    out = [(str(here / n), "package directory") for n in _NAMES]
    repo = here.parent.parent
    if (repo / "include" / "hamer.h").is_file():
        out.append((str(repo / "build" / "libhamer.so"), "development build"))
    out += [("libhamer.so.0", "loader path"), ("libhamer.so", "loader path")]
    found = ctypes.util.find_library("hamer")
    if found:
        out.append((found, "loader path"))
    return out


def _bind(lib):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(lib, name)  # AttributeError: the library is too old
        fn.restype = restype
        fn.argtypes = checked_argtypes(argtypes)


def load():
    """The loaded library (ctypes.CDLL), loading it on first use.

    Raises OSError naming every place tried when none works."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for cand, origin in find_library_candidates():
            # Paths (not bare sonames) that do not exist are skipped quietly,
            # except an explicit HAMER_LIB.
            if os.sep in cand and not os.path.exists(cand) and origin != "HAMER_LIB":
                tried.append(f"{cand} ({origin}): not found")
                continue
            try:
                lib = ctypes.CDLL(cand)
                _bind(lib)
            except (OSError, AttributeError) as e:
                tried.append(f"{cand} ({origin}): {e}")
                continue
            _lib, _lib_path = lib, cand
            return lib
        raise OSError("cannot load libhamer.so; tried:\n  " + "\n  ".join(tried) +
                      "\nset HAMER_LIB to the library's path (e.g. build/libhamer.so)")


def path():
    """The file (or soname) the library was loaded from."""
    load()
    return _lib_path


def last_error():
    """This thread's last library error message (hamer_last_error)."""
    msg = load().hamer_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def last_error_code():
    """This thread's last library error code (hamer_last_error_code; 0 if none)."""
    return load().hamer_last_error_code()


def strerror(code):
    """The library's description of a status code (hamer_strerror)."""
    return load().hamer_strerror(code).decode()


# ---- Video and tracking (hamer_video_*, hamer_tracker_*) --------------------
# The binding reads tracked frames as the library's JSON records, so it
# mirrors only these small parameter structures.

SMOOTH_NONE = 0
SMOOTH_ONE_EURO = 1


class TrackerParams(_Struct):
    _fields_ = [
        ("max_hands", ctypes.c_int),
        ("min_score", ctypes.c_float),
        ("min_presence", ctypes.c_float),
        ("track_presence", ctypes.c_float),
        ("tiles", ctypes.c_bool),
        ("redetect_every", ctypes.c_int),
        ("cut_threshold", ctypes.c_float),
        ("smooth", ctypes.c_int),  # hamer_smooth_mode
        ("min_cutoff", ctypes.c_double),
        ("beta", ctypes.c_double),
        ("d_cutoff", ctypes.c_double),
        ("betas_frames", ctypes.c_int),
        ("betas_min", ctypes.c_int),
        ("body", ctypes.c_int),  # hamer_body_mode
        ("proposals", ctypes.c_int),  # hamer_proposals_mode
        ("reserved", ctypes.c_uint8 * (PARAMS_RESERVED - 4)),
    ]


class CaptureParams(_Struct):
    _fields_ = [
        ("format", ctypes.c_char_p),
        ("options", ctypes.c_char_p),
        ("pace", ctypes.c_int),  # hamer_pace
        ("threads", ctypes.c_int),
        ("reserved", _Reserved),
    ]


class LiveParams(_Struct):
    _fields_ = [
        ("tracker", TrackerParams),
        ("predict", PredictParams),
        ("every_frame", ctypes.c_bool),
        ("reserved", _Reserved),
    ]


class VideoParams(_Struct):
    _fields_ = [
        ("start_s", ctypes.c_double),
        ("duration_s", ctypes.c_double),
        ("stride", ctypes.c_int),
        ("queue", ctypes.c_int),
        ("threads", ctypes.c_int),
        ("reserved", _Reserved),
    ]


class VideoInfo(_Struct):
    _fields_ = [
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("rotation", ctypes.c_int),
        ("fps", ctypes.c_double),
        ("duration_s", ctypes.c_double),
        ("time_base_num", ctypes.c_int),
        ("time_base_den", ctypes.c_int),
        ("frames", ctypes.c_longlong),
        ("codec", ctypes.c_char_p),
        ("format", ctypes.c_char_p),
    ]


class VideoFrame(_Struct):
    _fields_ = [
        ("rgb", c_uint8_p),
        ("width", ctypes.c_int),
        ("height", ctypes.c_int),
        ("index", ctypes.c_longlong),
        ("pts", ctypes.c_longlong),
        ("time_s", ctypes.c_double),
        ("decode_ms", ctypes.c_double),
    ]


_PROTOTYPES.update({
    "hamer_detector_default_params": (DetectorParams, []),
    "hamer_detector_load": (_P, [ctypes.POINTER(DetectorParams)]),
    "hamer_detector_free": (None, [_P]),
    "hamer_detector_get_dir": (ctypes.c_char_p, [_P]),
    "hamer_detector_get_body": (ctypes.c_int, [_P]),
    "hamer_detector_get_proposals": (ctypes.c_int, [_P]),
    "hamer_detect_default_params": (DetectParams, []),
    "hamer_detect_state_new": (_P, [_P, _INT]),
    "hamer_detect_state_free": (None, [_P]),
    "hamer_detect": (_INT, [_P, c_uint8_p, _INT, _INT, ctypes.POINTER(DetectParams), ctypes.POINTER(Detection),
                            _INT, ctypes.POINTER(ctypes.c_double)]),
    "hamer_predict_detections": (_INT, [_P, c_uint8_p, _INT, _INT, ctypes.POINTER(Detection), _INT,
                                        ctypes.POINTER(PredictParams), ctypes.POINTER(Hand),
                                        ctypes.POINTER(Timings)]),
    "hamer_tracker_default_params": (TrackerParams, []),
    "hamer_tracker_new": (_P, [_P, ctypes.POINTER(TrackerParams), _INT]),
    "hamer_tracker_free": (None, [_P]),
    "hamer_tracker_frame": (_INT, [_P, _P, c_uint8_p, _INT, _INT, ctypes.c_double,
                                   ctypes.POINTER(PredictParams)]),
    "hamer_tracker_frame_json": (ctypes.c_void_p, [_P, ctypes.c_longlong, _INT, ctypes.c_double]),
    "hamer_video_default_params": (VideoParams, []),
    "hamer_video_check_params": (_INT, [ctypes.POINTER(VideoParams)]),
    "hamer_video_open": (_P, [ctypes.c_char_p, ctypes.POINTER(VideoParams)]),
    "hamer_video_get_info": (_INT, [_P, ctypes.POINTER(VideoInfo)]),
    "hamer_video_next": (_INT, [_P, ctypes.POINTER(VideoFrame)]),
    "hamer_video_close": (None, [_P]),
})
