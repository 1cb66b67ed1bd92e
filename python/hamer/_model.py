"""The implementation of the hamer package (its namespace, __init__.py,
re-exports the public names): models, detectors, photos, video, errors.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._lib import (CROP_H, CROP_W, E_ARG, E_CANCELLED, E_FORMAT, E_IO, E_NOMANO, E_NOMEM, E_SHAPE,  # noqa: F401
                   E_UNSUPPORTED, FOCAL, MAX_HANDS, N_FACES, N_KP, N_PARAMS, N_VERTS)

# The types of the public signatures.
PathLike = Union[str, "os.PathLike[str]"]
#: an HxWx3 uint8 RGB array, a JPEG/PNG path, or the encoded file's bytes
ImageLike = Union[np.ndarray, str, "os.PathLike[str]", bytes, bytearray, memoryview]
#: a hand of RESULT.json (numbers as numpy arrays), a detection, a record
Hand = Dict[str, Any]

_PRECISIONS = {"fp32": _lib.PRECISION_FP32, "fast": _lib.PRECISION_FAST}
_PRECISION_NAMES = {v: k for k, v in _PRECISIONS.items()}
_CROP_MODES = {"warp": _lib.CROP_WARP, "pad": _lib.CROP_PAD}
_INT_MAX = 2**31 - 1

# The per-hand arrays of a result and their shapes (RESULT.json's nesting).
_HAND_ARRAYS = {
    "global_orient": (3, 3),
    "hand_pose": (15, 3, 3),
    "betas": (10,),
    "pred_cam": (3,),
    "cam_t_full": (3,),
    "keypoints_3d": (N_KP, 3),
    "keypoints_2d": (N_KP, 2),
    "vertices": (N_VERTS, 3),
}


class HamerError(Exception):
    """An error reported by libhamer, or a bad argument caught before the
    call. ``code`` is the library's HAMER_E_* value (a negative int)."""

    def __init__(self, message: str, code: Optional[int] = None) -> None:
        super().__init__(message)
        self.code = code

    def __new__(cls, message="", code=None):
        # HamerError(msg, code) picks the subclass the code belongs to.
        if cls is HamerError:
            cls = _ERROR_CLASSES.get(code, HamerError)
        if issubclass(cls, MemoryError):  # MemoryError's own __new__ refuses subclasses
            return Exception.__new__(cls, message)
        return super().__new__(cls, message)

    @property
    def code_name(self) -> Optional[str]:
        """"HAMER_E_IO" etc., or None."""
        return _lib.ERROR_NAMES.get(self.code)


class HamerArgumentError(HamerError, ValueError):
    """A bad argument (HAMER_E_ARG)."""


class HamerFormatError(HamerError, ValueError):
    """A malformed file, or a tensor of the wrong shape / dtype in it
    (HAMER_E_FORMAT, HAMER_E_SHAPE)."""


class HamerIOError(HamerError, OSError):
    """A file missing or unreadable (HAMER_E_IO)."""


class HamerUnsupportedError(HamerError, RuntimeError):
    """A valid request this build, CPU or model cannot do
    (HAMER_E_UNSUPPORTED, HAMER_E_NOMANO)."""


class HamerMemoryError(HamerError, MemoryError):
    """Out of memory (HAMER_E_NOMEM)."""


_ERROR_CLASSES = {
    E_ARG: HamerArgumentError, E_FORMAT: HamerFormatError, E_SHAPE: HamerFormatError, E_IO: HamerIOError,
    E_UNSUPPORTED: HamerUnsupportedError, E_NOMANO: HamerUnsupportedError, E_NOMEM: HamerMemoryError,
}


def _library_error(rc=None, fallback="libhamer call failed"):
    """HamerError (of the code's subclass) with this thread's last library
    message and code; rc is the code a call returned, if it returns one.

    Must be called in the thread that made the failing call, right after it:
    hamer_last_error() is per thread (ctypes runs foreign calls in the
    calling thread, so that holds)."""
    if rc is None or rc >= 0:
        rc = _lib.last_error_code() or None
    msg = _lib.last_error() or (_lib.strerror(rc) if rc is not None else fallback)
    return HamerError(msg, rc)


def strerror(code: int) -> str:
    """The library's short description of a HAMER_E_* code."""
    return _lib.strerror(code)


def system_info() -> str:
    """The kernels and CPU features this process uses (hamer_system_info)."""
    return _lib.load().hamer_system_info().decode()


def backends() -> List[Dict[str, Any]]:
    """The backends this build has (where a model can run), as a list of
    dicts: name ("cpu", "cuda"), devices (usable here; 0 = unavailable),
    why (the reason it is unavailable, or None), info (what it runs)."""
    lib = _lib.load()
    out = []
    for i in range(lib.hamer_backend_count()):
        b = _lib.BackendInfo()
        if lib.hamer_backend_get(i, ctypes.byref(b)):
            raise _library_error()
        out.append({"name": b.name.decode(), "devices": b.n_devices,
                    "why": b.why.decode() if b.why else None, "info": (b.info or b"").decode()})
    return out


def library_version() -> str:
    """The library's version string (hamer_version())."""
    return _lib.load().hamer_version().decode()


def library_path() -> str:
    """The libhamer.so file (or soname) in use; loads it if needed."""
    return _lib.path()


# ---- Arguments at the boundary ---------------------------------------------------

_INT_MIN = -2**31


def _int_arg(name, value):
    """value as a Python int for a C int argument of the library, else a
    HamerArgumentError naming the argument. Without this ctypes passes the
    low 32 bits: stride=2**32+3 ran with stride 3, 2**40 with 0. Only what
    a C int holds is checked here; the library checks the meaning (its
    message gives the argument's own range)."""
    if isinstance(value, (bool, np.bool_)) or not hasattr(value, "__index__"):
        raise HamerError(f"{name} must be an integer, got {value!r}", E_ARG)
    v = value.__index__()
    if not _INT_MIN <= v <= _INT_MAX:
        raise HamerError(f"{name} = {v} does not fit the C int the library takes ({_INT_MIN}..{_INT_MAX})", E_ARG)
    return v


def _num_arg(name, value):
    """value as a Python float for a C double (finite or not: the library
    says which it takes), else a HamerArgumentError naming the argument:
    a str, a bool or an int too large for a double is refused."""
    if isinstance(value, (bool, np.bool_, str, bytes)):
        raise HamerError(f"{name} must be a number, got {value!r}", E_ARG)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError) as e:
        raise HamerError(f"{name} must be a number, got {value!r} ({e})", E_ARG) from None


def _threads_arg(threads):
    """A ``threads`` argument as the library takes it: None is 0, the
    library's "one per online CPU" (the CLI's default); else 1..1024."""
    if threads is None:
        return 0
    if not (isinstance(threads, int) and 1 <= threads <= 1024):
        raise HamerError(f"threads must be None or an integer in 1..1024, got {threads!r}", E_ARG)
    return threads


# ---- Inputs ------------------------------------------------------------------

def _decoded(rc, buf, w, h):
    """numpy copy of an image the library decoded (freed here)."""
    lib = _lib.load()
    if rc < 0:
        raise _library_error(rc)
    try:
        n = w.value * h.value * 3
        return np.ctypeslib.as_array(buf, shape=(n,)).copy().reshape(h.value, w.value, 3)
    finally:
        lib.hamer_free(buf)


def read_image(source: ImageLike) -> np.ndarray:
    """Decode a photo (JPEG, PNG, WebP, AVIF, BMP, TIFF, GIF's first frame; the
    bytes decide the format) into an ``HxWx3`` uint8 RGB array, exactly as the
    CLI does (EXIF orientation applied; at most 100 megapixels).

    ``source``: a path (str or os.PathLike) or the encoded file's bytes
    (bytes, bytearray, memoryview). Raises HamerError (code E_IO for a
    missing file, E_FORMAT etc. for a bad one)."""
    lib = _lib.load()
    buf, w, h = _lib.c_uint8_p(), ctypes.c_int(), ctypes.c_int()
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = np.frombuffer(source, dtype=np.uint8)
        rc = lib.hamer_image_decode(data.ctypes.data, data.size, ctypes.byref(buf), ctypes.byref(w),
                                    ctypes.byref(h))
    else:
        rc = lib.hamer_image_load(os.fsencode(source), ctypes.byref(buf), ctypes.byref(w), ctypes.byref(h))
    return _decoded(rc, buf, w, h)


def _as_rgb(image):
    """A C-contiguous HxWx3 uint8 array from an array, a path or bytes."""
    if isinstance(image, (str, os.PathLike, bytes, bytearray, memoryview)):
        return read_image(image)
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim != 3 or arr.shape[2] != 3:
        raise HamerError(f"image must be an HxWx3 uint8 RGB array, a path or the bytes of a JPEG/PNG file; "
                         f"got a {arr.dtype} array of shape {list(arr.shape)}", E_ARG)
    if not (1 <= arr.shape[0] <= _INT_MAX and 1 <= arr.shape[1] <= _INT_MAX):
        raise HamerError(f"image of shape {list(arr.shape)} is empty or too large", E_ARG)
    return np.ascontiguousarray(arr)


def _job_image(inp, image):
    """The photo into a job input: a path or file bytes as they are (the
    library decodes them and reads their EXIF focal length), an array as
    RGB pixels. Returns what the input points into (keep it alive)."""
    if isinstance(image, (str, os.PathLike)):
        inp.path = os.fsencode(image)
        return inp.path
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = np.frombuffer(image, dtype=np.uint8)
        if data.size == 0:
            raise HamerError("image: empty bytes", E_ARG)
        inp.data, inp.len = data.ctypes.data, data.size
        return data
    rgb = _as_rgb(image)
    inp.rgb, inp.height, inp.width = rgb.ctypes.data_as(_lib.c_uint8_p), rgb.shape[0], rgb.shape[1]
    return rgb


def _predict_params(rescale, crop_mode, focal, fov):
    """hamer_predict_params: the box scale, crop mode and camera (focal in
    pixels or fov in degrees; None: not given)."""
    pp = _lib.PredictParams(rescale=_num_arg("rescale", rescale), crop_mode=crop_mode)
    if focal is not None:
        f = _num_arg("focal", focal)
        if not 0 < f <= _lib.MAX_FOCAL:
            raise HamerError(f"focal must be a focal length in pixels in (0, 1e7], got {focal!r}", E_ARG)
        pp.focal_px = f
    if fov is not None:
        v = _num_arg("fov", fov)
        if not 0 < v < 180:
            raise HamerError(f"fov must be a field of view in degrees in (0, 180), got {fov!r}", E_ARG)
        pp.fov_deg = v
    return pp


def _as_boxes(boxes):
    """float32 [n, 4] boxes. float64 first, then one rounding to float32,
    as the CLI's parser does (strtod, then a cast to float)."""
    try:
        arr = np.asarray(boxes, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise HamerError(f"boxes must be a sequence of [x1, y1, x2, y2]: {e}", E_ARG) from None
    if arr.size == 0:
        return np.zeros((0, 4), np.float32)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise HamerError(f"boxes must be a sequence of [x1, y1, x2, y2], got an array of shape {list(arr.shape)}",
                         E_ARG)
    return arr.astype(np.float32)


def _as_sides(is_right, n):
    """A list of n bools from one bool or a sequence of n bools."""
    if isinstance(is_right, (bool, np.bool_)):
        return [bool(is_right)] * n
    try:
        sides = list(is_right)
    except TypeError:
        raise HamerError(f"is_right must be a bool or a sequence of bools, got {type(is_right).__name__}",
                         E_ARG) from None
    if len(sides) != n:
        raise HamerError(f"is_right has {len(sides)} entries for {n} boxes", E_ARG)
    if not all(isinstance(s, (bool, np.bool_)) for s in sides):
        raise HamerError("is_right entries must be bools (True: right hand, False: left hand)", E_ARG)
    return [bool(s) for s in sides]


def _hand_dicts(ptr, boxes):
    """The "hands" of a RESULT.json document the library wrote (ptr, freed
    here), as Python objects."""
    lib = _lib.load()
    if not ptr:
        raise _library_error(fallback="hamer_job_result_json failed")
    try:
        doc = json.loads(ctypes.string_at(ptr).decode("utf-8"))
    finally:
        lib.hamer_free(ptr)
    out = []
    for i, hand in enumerate(doc["hands"]):
        d = {}
        for key, value in hand.items():
            if key == "bbox":
                # The boxes as given (float32). Equal to the JSON's numbers,
                # and also right for non-finite boxes, which JSON cannot hold.
                d[key] = boxes[i].copy()
            elif key in ("is_right", "error"):
                d[key] = value
            elif key == "focal_length":
                d[key] = float(np.float32(value))  # a C float
            elif key == "crop":
                # box_center / box_size are doubles in the library: kept as
                # the JSON's float64 numbers.
                d[key] = {"center": np.array(value["center"], np.float64), "size": float(value["size"])}
            elif key == "detection":
                d[key] = _detection_fields(value)
            else:
                d[key] = _json_value(key, value)
        out.append(d)
    return out


def _json_value(key, value):
    """A hand's field from the library's JSON: the camera, reprojection
    error and SMPL-X objects as dicts (floats of float32 values, float32
    arrays, strings), every other number as a float32 array."""
    if key == "camera":
        return {"focal_length": float(np.float32(value["focal_length"])), "source": str(value["source"]),
                "principal_point": np.array(value["principal_point"], np.float32)}
    if key == "reprojection_error":
        return {k: float(np.float32(v)) for k, v in value.items()}
    if key == "smplx":
        return {k: (str(v) if k == "param" else np.array(v, np.float32)) for k, v in value.items()}
    return np.array(value, np.float32)


def _detection_fields(value):
    """A detection's scores and landmarks from the library's JSON: floats
    (float32 values), "pass" and "person" ints, "source" a str, landmarks
    float32 [21, 3]."""
    out = {}
    for k, v in value.items():
        if k == "landmarks":  # null for a box from the body keypoints alone
            out[k] = None if v is None else np.array(v, np.float32).reshape(N_KP, 3)
        elif k in ("pass", "person"):
            out[k] = int(v)
        elif k == "source":
            out[k] = str(v)
        else:
            out[k] = float(np.float32(v))
    return out


def _detection_dict(det):
    """One hamer_detection as `hamer detect`'s JSON entry has it."""
    d = {
        "bbox": np.array(det.box.bbox[:], np.float32),
        "is_right": bool(det.box.is_right),
        "score": float(det.score),
        "presence": float(det.presence),
        "handedness": float(det.handedness),
        "pass": int(det.pass_),
        "landmarks": np.array(det.landmarks[:], np.float32).reshape(N_KP, 3),
    }
    if det.body or det.source != _lib.SOURCE_PALM:  # as the JSON: only where the body pass found it
        d["source"] = _SOURCE_NAMES[det.source]
        d["person"] = int(det.person)
    if det.source == _lib.SOURCE_BODY_KEYPOINTS:
        d["landmarks"] = None  # a box from the body keypoints alone
    return d


_BODY_MODES = {"auto": _lib.BODY_AUTO, "on": _lib.BODY_ON, "off": _lib.BODY_OFF}
_SOURCE_NAMES = {_lib.SOURCE_PALM: "palm", _lib.SOURCE_BODY: "body", _lib.SOURCE_BODY_KEYPOINTS: "body-keypoints",
                 _lib.SOURCE_PROPOSAL: "proposal"}


def _proposals_arg(proposals):
    if proposals not in _BODY_MODES:
        raise HamerError(f"proposals must be 'auto', 'on' or 'off', got {proposals!r}", E_ARG)
    return _BODY_MODES[proposals]  # HAMER_PROPOSALS_* has the values of HAMER_BODY_*


def _body_arg(body):
    if body not in _BODY_MODES:
        raise HamerError(f"body must be 'auto', 'on' or 'off', got {body!r}", E_ARG)
    return _BODY_MODES[body]


def _draw_hide(draw):
    """A ``draw`` argument ("mesh,boxes", ["keypoints"], "all", "none") as
    the hamer_draw bits not to draw."""
    names = draw.split(",") if isinstance(draw, str) else list(draw)
    shown = 0
    for name in names:
        if name not in _lib.DRAW and name not in ("all", "none"):
            raise HamerError(f"draw: unknown {name!r} (mesh, boxes, keypoints, labels, all, none)", E_ARG)
        shown |= _lib.DRAW_ALL if name == "all" else _lib.DRAW.get(name, 0)
    return _lib.DRAW_ALL & ~shown


_RENDER_NEEDS = ("vertices", "cam_t_full", "focal_length")
_GLB_NEEDS = ("global_orient", "hand_pose", "betas", "cam_t_full", "keypoints_3d")


def _hand_structs(hands, needs=_RENDER_NEEDS, what="rendering"):
    """hamer_hand structs back from predict()'s dicts (for render, glb)."""
    n = len(hands)
    arr = (_lib.Hand * max(n, 1))()
    for i, d in enumerate(hands):
        c = arr[i]
        try:
            c.box.bbox[:] = [float(v) for v in np.asarray(d["bbox"], np.float32).reshape(4)]
            c.box.is_right = int(bool(d["is_right"]))
        except (KeyError, TypeError, ValueError):
            raise HamerError(f"hand {i}: needs 'bbox' [x1, y1, x2, y2] and 'is_right'", E_ARG) from None
        if "error" in d:
            c.ok = 0
            c.error = str(d["error"]).encode()[:255]
            continue
        missing = [k for k in needs if k not in d]
        if missing:
            hint = " (call predict(..., vertices=True))" if "vertices" in missing else ""
            raise HamerError(f"hand {i}: {what} needs {', '.join(missing)}{hint}", E_ARG)
        c.ok = 1
        for key, shape in _HAND_ARRAYS.items():
            if key not in d:
                continue
            v = np.ascontiguousarray(d[key], dtype=np.float32)
            if v.shape != shape:
                raise HamerError(f"hand {i}: '{key}' must have shape {list(shape)}, got {list(v.shape)}", E_ARG)
            ctypes.memmove(ctypes.addressof(c) + getattr(_lib.Hand, key).offset, v.ctypes.data, v.nbytes)
        c.focal_length = float(d.get("focal_length", 0.0))
        if "camera" in d and "cam_t" in d:  # the hand in the photo's camera (GLB, BVH place it there)
            c.focal_source = {"default": _lib.FOCAL_DEFAULT, "given": _lib.FOCAL_GIVEN,
                              "exif": _lib.FOCAL_EXIF}.get(d["camera"].get("source"), _lib.FOCAL_DEFAULT)
            c.focal_px = float(d["camera"]["focal_length"])
            c.principal_point[:] = [float(v) for v in np.asarray(d["camera"]["principal_point"]).reshape(2)]
            c.cam_t[:] = [float(v) for v in np.asarray(d["cam_t"], np.float32).reshape(3)]
        det = d.get("detection")
        if isinstance(det, dict) and "score" in det:  # the labels show the detector's score
            c.detection.detected, c.detection.score = 1, float(det["score"])
        if "crop" in d:
            c.box_center[:] = [float(v) for v in d["crop"]["center"]]
            c.box_size = float(d["crop"]["size"])
    return arr


# ---- Ctrl-C during a long call ------------------------------------------------

class _Interruptible:
    """While a library call on `state` runs in the main thread, Ctrl-C stops
    it and raises KeyboardInterrupt when it returns.

    Python runs signal handlers only between bytecodes of the main thread,
    which is inside the foreign call, so a plain Ctrl-C would wait for the
    whole batch. For the call's duration SIGINT gets a handler that only
    records the signal; the state's cancel callback (asked by the library
    between transformer blocks and passes, on the calling thread, with the
    GIL taken by ctypes, which lets that pending handler run) reports it and
    the call returns HAMER_E_CANCELLED within tens of milliseconds. On exit
    the previous handler is restored and, if the signal came, called as it
    would have been (Python's default raises KeyboardInterrupt). Left alone:
    other threads (signals reach only the main thread) and a SIGINT that is
    ignored or not handled by Python."""

    def __init__(self, lib, state):
        self._lib, self._state = lib, state
        self._prev = None
        self._frame = None
        self.fired = False

    def _on_sigint(self, signum, frame):
        self.fired, self._frame = True, frame

    def _poll(self, _user):
        return 1 if self.fired else 0

    def __enter__(self):
        if threading.current_thread() is not threading.main_thread():
            return self
        prev = signal.getsignal(signal.SIGINT)
        if not callable(prev):  # SIG_IGN, SIG_DFL, or installed outside Python
            return self
        self._fn = _lib.CANCEL_FN(self._poll)  # kept alive until __exit__
        self._lib.hamer_state_set_cancel(self._state, self._fn, None)
        self._prev = prev
        signal.signal(signal.SIGINT, self._on_sigint)
        return self

    def __exit__(self, *exc):
        prev, self._prev = self._prev, None
        if prev is None:
            return False
        signal.signal(signal.SIGINT, prev)
        self._lib.hamer_state_set_cancel(self._state, _lib.CANCEL_FN(), None)
        if self.fired:
            prev(signal.SIGINT, self._frame)
        return False


# ---- Handle-owning objects ------------------------------------------------------

class _Handle:
    """An object owning a libhamer handle (subclasses define close and
    _check_open): a context manager, closed when collected. A copy would
    share the C handle (and the state pool) with the original, and whichever
    is freed first would free it under the other: copying and pickling are
    refused. Make a new object instead."""

    def __enter__(self):
        self._check_open()
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing sensible to do
            pass

    def _refuse(self, what):
        raise TypeError(f"{type(self).__module__}.{type(self).__name__} owns a libhamer handle and cannot be "
                        f"{what}; create another {type(self).__name__}(...) instead")

    def __copy__(self):
        self._refuse("copied")

    def __deepcopy__(self, memo):
        self._refuse("copied")

    def __reduce_ex__(self, protocol):
        self._refuse("pickled")

    def __reduce__(self):
        self._refuse("pickled")

    def __getstate__(self):
        self._refuse("pickled")


# ---- The hand detector -----------------------------------------------------------

class Detector(_Handle):
    """The built-in hand detector: MediaPipe Hands' palm detector and hand
    landmark model, run by the library's own TFLite executor on the CPU.

    Detector(dir=None, lite=False, threads=None, body="auto", proposals="auto")

    dir      the models' directory; None: the library's search
             ($HAMER_DETECTOR_DIR, ${XDG_DATA_HOME:-~/.local/share}/hamer/detector,
             /usr/local/share/hamer/detector). The models are installed by
             ``bash scripts/get_detector.sh [DIR]``; when they are missing,
             HamerIOError lists where the library looked and names that
             script.
    lite     the lite models (faster, less accurate)
    threads  worker threads per detection state; None: online CPUs
    body     the body pass's models (MediaPipe Holistic's pose and hand
             re-crop models, installed by the same script): "auto" loads
             them when installed (``has_body`` says whether), "on"
             requires them, "off" does not load them
    proposals the proposal pass's model (the hand-box detector of
             @vladmandic/human, installed by the same script; it needs the
             body models): "auto" loads it when installed
             (``has_proposals``), "on" requires it, "off" does not load it

    ``detect(image)`` gives the hands, as ``hamer detect``. Thread-safe
    like Model (a pool of detection states, one per concurrent call). A
    context manager; ``close()`` frees it. Cannot be copied or pickled.
    """

    def __init__(self, dir: Optional[PathLike] = None, lite: bool = False, threads: Optional[int] = None,
                 body: str = "auto", proposals: str = "auto") -> None:
        self._handle = None
        self._closed = True
        threads = _threads_arg(threads)
        lib = _lib.load()
        params = lib.hamer_detector_default_params()
        dir_b = None if dir is None else os.fsencode(dir)
        params.dir = dir_b
        params.lite = bool(lite)
        params.body = _body_arg(body)
        params.proposals = _proposals_arg(proposals)
        handle = lib.hamer_detector_load(ctypes.byref(params))
        if not handle:
            raise _library_error(fallback="cannot load the hand detector (run scripts/get_detector.sh)")
        self._lib, self._handle, self._threads, self.lite = lib, handle, threads, bool(lite)
        self._cond = threading.Condition()
        self._idle = []
        self._active = 0
        self._closed = False

    @property
    def dir(self) -> str:
        """The directory the models were loaded from."""
        self._check_open()
        return os.fsdecode(self._lib.hamer_detector_get_dir(self._handle))

    @property
    def has_body(self) -> bool:
        """True when the body pass's models are loaded."""
        self._check_open()
        return self._lib.hamer_detector_get_body(self._handle) == 1

    @property
    def has_proposals(self) -> bool:
        """True when the proposal pass's model is loaded."""
        self._check_open()
        return self._lib.hamer_detector_get_proposals(self._handle) == 1

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self):
        if self._closed:
            raise HamerError("the detector is closed", E_ARG)

    def close(self) -> None:
        """Free the models and states, after the calls in progress. Idempotent."""
        cond = getattr(self, "_cond", None)
        if cond is None:
            return
        with cond:
            if self._closed:
                return
            self._closed = True
            while self._active:
                cond.wait()
            states, self._idle = self._idle, []
            handle, self._handle = self._handle, None
        for st in states:
            self._lib.hamer_detect_state_free(st)
        if handle:
            self._lib.hamer_detector_free(handle)

    def __repr__(self):
        return f"<hamer.Detector {'closed' if self._closed else self.dir!r}>"

    def _params(self, max_hands, min_score, min_presence, tiles, body="auto", body_boxes=True, proposals="auto"):
        """hamer_detect_params from detect()'s arguments (checked)."""
        if not (isinstance(max_hands, int) and 1 <= max_hands <= MAX_HANDS):
            raise HamerError(f"max_hands must be an integer in 1..{MAX_HANDS}, got {max_hands!r}", E_ARG)
        for name, v in (("min_score", min_score), ("min_presence", min_presence)):
            if not (isinstance(v, (int, float)) and 0 < v < 1):
                raise HamerError(f"{name} must be a number in (0, 1), got {v!r}", E_ARG)
        params = self._lib.hamer_detect_default_params()
        params.max_hands, params.min_score, params.min_presence = max_hands, float(min_score), float(min_presence)
        params.tiles = bool(tiles)
        params.body = _body_arg(body)
        if not isinstance(body_boxes, bool):
            raise HamerError(f"body_boxes must be True or False, got {body_boxes!r}", E_ARG)
        params.body_boxes = body_boxes
        params.proposals = _proposals_arg(proposals)
        return params

    @contextlib.contextmanager
    def _lend(self):
        """A detection state of the pool for the call's duration (close()
        waits for it)."""
        with self._cond:
            self._check_open()
            st = self._idle.pop() if self._idle else None
            self._active += 1
        try:
            if st is None:
                st = self._lib.hamer_detect_state_new(self._handle, self._threads)
                if not st:
                    raise _library_error(fallback="cannot create a detection state")
            yield st
        finally:
            with self._cond:
                if st:
                    self._idle.append(st)
                self._active -= 1
                self._cond.notify_all()

    def _raw(self, rgb, max_hands, min_score, min_presence, tiles, body="auto", body_boxes=True, proposals="auto"):
        """hamer_detect on a C-contiguous RGB array: (Detection array, count)."""
        params = self._params(max_hands, min_score, min_presence, tiles, body, body_boxes, proposals)
        h, w = rgb.shape[:2]
        dets = (_lib.Detection * MAX_HANDS)()
        with self._lend() as st:
            n = self._lib.hamer_detect(st, rgb.ctypes.data_as(_lib.c_uint8_p), w, h, ctypes.byref(params), dets,
                                       MAX_HANDS, None)
            if n < 0:
                raise _library_error(n)
        return dets, n

    def detect(self, image: ImageLike, max_hands: int = 8, min_score: float = 0.5, min_presence: float = 0.5,
               tiles: bool = True, body: str = "auto", body_boxes: bool = True,
               proposals: str = "auto") -> List[Hand]:
        """The hands of a photo, best palm score first, as the "hands" of
        ``hamer detect``'s document (which ``hamer run --boxes`` reads).

        image         HxWx3 uint8 RGB array, a JPEG/PNG path or file bytes
        max_hands     at most this many (1..64)
        min_score     palm detector score threshold in (0, 1)
        min_presence  hand presence threshold in (0, 1)
        tiles         also search overlapping tiles for small hands (the
                      default; False: MediaPipe's one full-frame pass)
        body          the body pass (MediaPipe Holistic: pose -> hand
                      re-crop -> hand landmarks): "auto" (with tiles, when
                      its models are loaded and the palm pass found fewer
                      than 2 hands), "on" (HamerError without them), "off"
        body_boxes    when the body pass runs, also the boxes it takes from
                      a wrist, index and pinky the hand landmark model
                      rejected but the pose sees (wrist visibility >= 0.5):
                      source "body-keypoints", landmarks None, score the
                      wrist's visibility
        proposals     the proposal pass (hand-box proposals, each checked by
                      the hand landmark model): "auto" (with tiles, when its
                      model is loaded and the other passes found fewer than
                      2 hands), "on" (HamerError without it), "off"; its
                      hands have source "proposal"

        One dict per hand: bbox float32[4] (the tight box of the
        landmarks), is_right bool, score, presence, handedness (P(right
        hand)) floats, pass int (0 full frame, k tile level k), landmarks
        float32[21, 3] (x, y image pixels; z relative depth); where the
        body pass found the hand also source ("palm" / "body": whose result
        it is) and person (its index, is_right then that person's side; -1
        where the landmark model confidently said the other side)."""
        rgb = _as_rgb(image)
        dets, n = self._raw(rgb, max_hands, min_score, min_presence, tiles, body, body_boxes, proposals)
        return [_detection_dict(dets[i]) for i in range(n)]


# ---- The model -----------------------------------------------------------------

class Model(_Handle):
    """A loaded HaMeR checkpoint (read-only) plus a pool of inference states.

    Model(path, precision="fp32", threads=None, mano=None, max_batch=16,
          max_states=None, detector=None, device="cpu")

    path        the released hamer.ckpt (str or os.PathLike)
    precision   "fp32" (default: the PyTorch model to float precision) or
                "fast" (the library's gated low-precision scheme; loading
                fails with HamerError where this CPU cannot run it)
    threads     worker threads per inference state; None: one per online
                CPU (the CLI's default). With k Python threads calling at
                once, about cpu_count / k avoids oversubscription.
    mano        .npz with the MANO buffers, for checkpoints without mano.*
    max_batch   crops per internal pass of a state (larger batches run in
                passes; the results do not depend on it). 16 as the CLI;
                each state holds about 13 MB of activations per crop of
                max_batch (~200 MB at 16), so lower it for many threads
                predicting a few hands each.
    max_states  at most this many states (so at most this many concurrent
                calls; further callers wait); None: one per concurrently
                calling thread, unbounded.
    detector    for detect() and predict() without boxes: None (the
                library's default search for the models), the models'
                directory, or a hamer.Detector to share between models
                (not closed with this one). Loaded on first use, once.
    device      where the model runs: "cpu" (default), or another backend
                this build has ("cuda", "cuda:1"; hamer.backends() lists
                them); one that is unknown or cannot run here raises
                HamerError with the reason, never a fallback

    A context manager; ``close()`` frees the model (waiting for calls in
    progress); any use after that raises HamerError. A Model cannot be
    copied or pickled (TypeError): it owns the library's handle; share the
    object itself between threads, or load another in another process.
    """

    def __init__(self, path: PathLike, precision: str = "fp32", threads: Optional[int] = None,
                 mano: Optional[PathLike] = None, max_batch: int = 16, max_states: Optional[int] = None,
                 detector: Union[None, PathLike, Detector] = None, device: str = "cpu") -> None:
        self._handle = None  # __del__ / close() must work if __init__ fails
        self._closed = True
        if detector is not None and not isinstance(detector, (Detector, str, os.PathLike)):
            raise TypeError(f"detector must be None, a models directory or a hamer.Detector, "
                            f"got {type(detector).__name__}")
        # A Detector given is shared (the caller closes it); one made here
        # from a directory or the default search is loaded on first use and
        # closed with the model.
        self._detector = detector if isinstance(detector, Detector) else None
        self._detector_dir = detector if isinstance(detector, (str, os.PathLike)) else None
        self._owns_detector = not isinstance(detector, Detector)
        self._detector_lock = threading.Lock()
        path_b = os.fsencode(path)
        mano_b = None if mano is None else os.fsencode(mano)
        if precision not in _PRECISIONS:
            raise HamerError(f"precision must be 'fp32' or 'fast', got {precision!r}", E_ARG)
        if not isinstance(device, str):
            raise HamerError(f"device must be a string such as 'cpu' or 'cuda:0', got {device!r}", E_ARG)
        threads = _threads_arg(threads)
        if not (isinstance(max_batch, int) and 1 <= max_batch <= 4096):
            raise HamerError(f"max_batch must be an integer in 1..4096, got {max_batch!r}", E_ARG)
        if max_states is not None and not (isinstance(max_states, int) and max_states >= 1):
            raise HamerError(f"max_states must be None or a positive integer, got {max_states!r}", E_ARG)
        lib = _lib.load()
        params = lib.hamer_model_default_params()
        params.mano_path = mano_b
        params.progress = False  # a library does not write to stderr
        params.precision = _PRECISIONS[precision]
        device_b = device.encode()
        params.device = device_b
        handle = lib.hamer_model_load(path_b, ctypes.byref(params))
        if not handle:
            raise _library_error(fallback="cannot load the model")
        self._lib = lib
        self._handle = handle
        self._path = os.fsdecode(path_b)
        self._threads = threads
        self._max_batch = max_batch
        self._max_states = max_states
        info = _lib.ModelInfo()
        lib.hamer_model_get_info(handle, ctypes.byref(info))
        self._info = {name: getattr(info, name) for name, _ in _lib.ModelInfo._fields_ if name != "reserved"}
        self._info["has_mano"] = bool(info.has_mano)
        self._info["device"] = (info.device or b"").decode()
        self._info["isa"] = (info.isa or b"").decode()
        self._info["scheme"] = (info.scheme or b"").decode()
        self._info["precision"] = _PRECISION_NAMES.get(info.precision, info.precision)
        # Pool: _idle holds the states not in use; _n_states counts all of
        # them (idle, in use, being created); _active counts calls in
        # progress, which close() waits for.
        self._cond = threading.Condition()
        self._idle = []
        self._n_states = 0
        self._active = 0
        self._closed = False

    # -- lifetime --

    def close(self) -> None:
        """Free the model and its states. Waits for calls in progress in
        other threads; later calls raise HamerError. Idempotent."""
        cond = getattr(self, "_cond", None)
        if cond is None:
            return
        with cond:
            if self._closed:
                return
            self._closed = True
            cond.notify_all()  # callers waiting for a state (max_states) give up
            while self._active:
                cond.wait()
            states, self._idle = self._idle, []
            handle, self._handle = self._handle, None
        for st in states:
            self._lib.hamer_state_free(st)
        if handle:
            self._lib.hamer_model_free(handle)
        det, self._detector = self._detector, None
        if det is not None and self._owns_detector:
            det.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self):
        state = "closed" if self._closed else self._info["precision"]
        return f"<hamer.Model {getattr(self, '_path', '?')!r} ({state})>"

    def _check_open(self):
        if self._closed:
            raise HamerError("the model is closed", E_ARG)

    @contextlib.contextmanager
    def _use(self, need_state=True):
        """Mark a call in progress (close() waits for it) and lend it an
        inference state of its own when need_state; a state is never used
        by two calls at once."""
        st, create = None, False
        with self._cond:
            self._check_open()
            if need_state:
                while (not self._idle and self._max_states is not None
                       and self._n_states >= self._max_states):
                    self._cond.wait()
                    self._check_open()
                if self._idle:
                    st = self._idle.pop()
                else:
                    self._n_states += 1
                    create = True
            self._active += 1
        try:
            if create:
                # Outside the lock: allocating buffers and starting worker
                # threads takes a while and must not block the other callers.
                st = self._lib.hamer_state_new(self._handle, self._max_batch, self._threads)
                if not st:
                    err = _library_error(fallback="cannot create an inference state")
                    with self._cond:
                        self._n_states -= 1
                    raise err
            yield st
        finally:
            with self._cond:
                if st:
                    self._idle.append(st)
                self._active -= 1
                self._cond.notify_all()

    # -- information --

    @property
    def info(self) -> Dict[str, Any]:
        """hamer_model_get_info as a dict: vit_depth, vit_dim, vit_heads,
        vit_mlp, n_tokens, head_depth, head_dim, head_heads, head_dim_head,
        head_mlp (ints), has_mano (bool), isa ("avx512", "avx2", "scalar"),
        precision ("fp32" / "fast", as given to Model), scheme (str)."""
        self._check_open()
        return dict(self._info)

    @property
    def faces(self) -> Optional[np.ndarray]:
        """The MANO triangles, int32 [1538, 3] (right-hand winding), or None
        for a model without MANO buffers."""
        with self._use(need_state=False):
            ptr = self._lib.hamer_model_get_faces(self._handle)
            if not ptr:
                return None
            return np.ctypeslib.as_array(ptr, shape=(N_FACES * 3,)).copy().reshape(N_FACES, 3)

    def save_packed(self, path: PathLike) -> None:
        """Write the model as a packed model file (``hamer convert``): its
        weights in this machine's kernel layout and the model's precision,
        which ``Model(path, precision=...)`` then maps instead of repacking.
        Written to a temporary file and renamed; raises HamerError."""
        path_b = os.fsencode(path)
        with self._use(need_state=False):
            rc = self._lib.hamer_model_save_packed(self._handle, path_b)
        if rc != 0:
            raise _library_error(rc)

    # -- inference --

    def regress(self, crops: np.ndarray, params_only: bool = False) -> Dict[str, np.ndarray]:
        """Regress hand crops; the outputs of ``hamer regress``.

        crops: float32 [B,3,256,192] normalised as (x/255 - mean)/std (RGB,
        mean 0.485,0.456,0.406, std 0.229,0.224,0.225), or uint8
        [B,256,192,3] RGB; any strides (copied to C order when needed).

        Returns a dict of C-contiguous float32 arrays: params [B,157],
        pred_cam [B,3], pred_cam_t [B,3] and, unless params_only,
        vertices [B,778,3], keypoints_3d [B,21,3], keypoints_2d [B,21,2]
        (which need MANO buffers: HamerError with code E_NOMANO without).
        """
        arr = np.asarray(crops)
        if arr.dtype == np.uint8:
            want, name, fn, ctype = (CROP_H, CROP_W, 3), "uint8", self._lib.hamer_regress_u8, _lib.c_uint8_p
        elif arr.dtype.kind == "f" and arr.dtype.itemsize == 4:
            arr = arr.astype(np.float32, copy=False)  # native byte order
            want, name, fn, ctype = (3, CROP_H, CROP_W), "float32", self._lib.hamer_regress_f32, _lib.c_float_p
        else:
            raise HamerError(f"crops must be float32 [B,3,256,192] or uint8 [B,256,192,3], got {arr.dtype}", E_ARG)
        if arr.ndim != 4 or arr.shape[1:] != want or not 1 <= arr.shape[0] <= _INT_MAX:
            raise HamerError(f"{name} crops must have shape [B,{','.join(map(str, want))}] with B >= 1, "
                             f"got {list(arr.shape)}", E_ARG)
        arr = np.ascontiguousarray(arr)
        B = arr.shape[0]
        shapes = {"params": (N_PARAMS,), "pred_cam": (3,), "pred_cam_t": (3,)}
        if not params_only:
            shapes.update(vertices=(N_VERTS, 3), keypoints_3d=(N_KP, 3), keypoints_2d=(N_KP, 2))
        out = {k: np.empty((B,) + s, np.float32) for k, s in shapes.items()}
        cout = _lib.Output(**{k: v.ctypes.data_as(_lib.c_float_p) for k, v in out.items()})
        with self._use() as st:
            with _Interruptible(self._lib, st):
                rc = fn(st, arr.ctypes.data_as(ctype), B, ctypes.byref(cout))
            if rc < 0:
                raise _library_error(rc)
        return out

    @property
    def detector(self) -> Detector:
        """The hamer.Detector that detect() and predict() without boxes use:
        the one given to Model(detector=...), else loaded on first use
        (from the directory given, or the library's default search) and
        kept until close(). HamerIOError when the models are missing (the
        message says where it looked; ``bash scripts/get_detector.sh``
        installs them)."""
        self._check_open()
        with self._detector_lock:
            if self._detector is None:
                self._detector = Detector(self._detector_dir, threads=self._threads or None)
            return self._detector

    def detect(self, image: ImageLike, max_hands: int = 8, min_score: float = 0.5, min_presence: float = 0.5,
               tiles: bool = True, body: str = "auto", body_boxes: bool = True,
               proposals: str = "auto") -> List[Hand]:
        """The hands of a photo found by the built-in detector, as ``hamer
        detect`` finds them: see Detector.detect (same arguments, same
        dicts: bbox, is_right, score, presence, handedness, pass,
        landmarks [21, 3])."""
        return self.detector.detect(image, max_hands, min_score, min_presence, tiles, body, body_boxes, proposals)

    def predict(self, image: ImageLike, boxes: Optional[Sequence[Sequence[float]]] = None,
                is_right: Union[bool, Sequence[bool]] = True, rescale: float = 2.0, crop_mode: str = "warp",
                vertices: bool = False, max_hands: int = 8, min_score: float = 0.5, min_presence: float = 0.5,
                tiles: bool = True, body: str = "auto", body_boxes: bool = True,
                proposals: str = "auto", focal: Optional[float] = None,
                fov: Optional[float] = None) -> List[Hand]:
        """Hands in a photo; the "hands" of ``hamer run``'s RESULT.json.

        image       HxWx3 uint8 RGB array; or a JPEG/PNG path (str or
                    os.PathLike) or file bytes, decoded by the library
        boxes       sequence of [x1, y1, x2, y2] in pixels (at most 64),
                    rounded to float32 as the CLI does; None: the hands are
                    found by the detector first (``self.detector``; with
                    max_hands, min_score, min_presence, tiles, body, body_boxes, proposals as in
                    detect()), as ``hamer run`` without boxes does, and each
                    hand also has "detection": {score, presence,
                    handedness, pass, landmarks float32[21,3]}
        is_right    one bool for all boxes, or one per box (ignored when
                    the boxes are detected: handedness decides)
        rescale     box scale factor in (0, 16] (MAX_RESCALE)
        crop_mode   "warp" (the official demo's affine warp) or "pad"
        vertices    include each hand's 778 vertices (and "vertices_cam")
        focal       the camera's focal length in pixels of this image, or
        fov         its field of view in degrees across the longer side;
                    None (default): the photo's EXIF when a path or bytes
                    carry one, else the model's own camera. Places each
                    hand in that camera: "camera" {focal_length, source
                    ("given", "exif", "default"), principal_point}, "cam_t",
                    "keypoints_3d_cam" (metres), "reprojection_error"
                    {mean, max} (pixels)

        Returns one dict per box, in order. A hand whose box the library
        rejects (NaN, empty, outside the image, ...) is
        {"bbox", "is_right", "error": "hand i: reason"}; the call raises
        HamerError only for a bad request as a whole (arguments, too many
        boxes, no MANO buffers). A good hand has, as in RESULT.json:
          bbox float32[4], is_right bool,
          global_orient float32[3,3], hand_pose float32[15,3,3],
          global_orient_axis_angle float32[3], hand_pose_axis_angle float32[15,3],
          betas float32[10], pred_cam float32[3], cam_t_full float32[3],
          focal_length float, crop {"center": float64[2], "size": float},
          keypoints_3d float32[21,3] (metres), keypoints_2d float32[21,2] (pixels),
          vertices float32[778,3] (with vertices=True),
          the camera fields above, global_orient_quaternion float32[4] and
          hand_pose_quaternion float32[15,4] (w, x, y, z), hand_pose_pca
          float32[n] (MANO's PCA coefficients, when the model has its PCA
          space) and "smplx" {param, flat_hand_mean_false float32[45],
          flat_hand_mean_true float32[45]} (SMPL-X's hand pose).
        Left hands are mirrored back as HaMeR's demo does.
        """
        if crop_mode not in _CROP_MODES:
            raise HamerError(f"crop_mode must be 'warp' or 'pad', got {crop_mode!r}", E_ARG)
        jp = self._lib.hamer_job_default_params()
        jp.predict = _predict_params(rescale, _CROP_MODES[crop_mode], focal, fov)
        inp = _lib.JobInput(params=ctypes.pointer(jp))
        keep = _job_image(inp, image)  # the array or bytes the input points into
        if boxes is None:
            detector = self.detector
            jp.detect = detector._params(max_hands, min_score, min_presence, tiles, body, body_boxes, proposals)
            inp.source = _lib.BOXES_DETECTED
            with detector._lend() as dst:
                return self._job(inp, dst, vertices, keep)
        bx = _as_boxes(boxes)
        n = len(bx)
        if n > MAX_HANDS:  # before the hand structures are allocated (10 kB each)
            raise HamerError(f"predict: {n} boxes, at most {MAX_HANDS} per image", E_ARG)
        sides = _as_sides(is_right, n)
        cboxes = (_lib.Box * max(n, 1))()
        for i in range(n):
            cboxes[i].bbox[:] = [float(v) for v in bx[i]]  # float32 -> double -> float: exact
            cboxes[i].is_right = int(sides[i])
        inp.boxes, inp.n_boxes, inp.source = cboxes, n, _lib.BOXES_GIVEN
        return self._job(inp, None, vertices, keep)

    def _job(self, inp, detect_state, vertices, keep=None):
        """The library's photo job (hamer_job_run, as ``hamer run``) on a
        state of this model: the "hands" of its RESULT.json as dicts."""
        with self._use() as st:
            job = self._lib.hamer_job_new(st, detect_state, inp.params)
            if not job:
                raise _library_error(fallback="cannot create a photo job")
            try:
                with _Interruptible(self._lib, st):
                    rc = self._lib.hamer_job_run(job, ctypes.byref(inp))
                if rc < 0:
                    raise _library_error(rc)
                res = _lib.JobResult()
                self._lib.hamer_job_get_result(job, ctypes.byref(res))
                # The boxes as the hands carry them (float32): the given
                # ones, or the detector's.
                bx = np.array([res.hands[i].box.bbox[:] for i in range(res.n_hands)],
                              np.float32).reshape(res.n_hands, 4)
                return _hand_dicts(self._lib.hamer_job_result_json(job, int(bool(vertices))), bx)
            finally:
                self._lib.hamer_job_free(job)

    def render(self, image: ImageLike, hands: Sequence[Hand], side_view: bool = False,
               draw: Union[str, Sequence[str]] = "all") -> bytes:
        """PNG bytes of the hands drawn over the image (as ``hamer run
        --render``), or with side_view=True of the meshes turned 90 degrees
        on white (``--side-view``). ``hands``: predict()'s result for this
        image, made with vertices=True (the meshes need the vertices; the
        marks alone, the keypoints); hands with an "error" get their box and
        label only. ``draw``: what the overlay shows, names from "mesh",
        "boxes", "keypoints", "labels" (a list or ``--draw``'s comma
        string), or "all" (default) / "none". Decode with read_image() for
        an array."""
        shown = _lib.DRAW_ALL & ~_draw_hide(draw)
        rgb = _as_rgb(image)
        h, w = rgb.shape[:2]
        hands = list(hands)
        mesh = side_view or shown & _lib.DRAW["mesh"]
        chands = _hand_structs(hands) if mesh else _hand_structs(hands, ("keypoints_2d",), "drawing the marks")
        png, size = _lib.c_uint8_p(), ctypes.c_size_t()
        with self._use(need_state=False):
            if side_view:
                rc = self._lib.hamer_render_png(self._handle, rgb.ctypes.data_as(_lib.c_uint8_p), w, h, chands,
                                                len(hands), 1, ctypes.byref(png), ctypes.byref(size))
            else:
                params = _lib.RenderParams(hide=_draw_hide(draw))
                rc = self._lib.hamer_render_overlay_png(self._handle, rgb.ctypes.data_as(_lib.c_uint8_p), w, h,
                                                        chands, len(hands), ctypes.byref(params), ctypes.byref(png),
                                                        ctypes.byref(size))
            if rc < 0:
                raise _library_error(rc)
        try:
            return ctypes.string_at(png, size.value)
        finally:
            self._lib.hamer_free(png)


    def glb(self, hands: Sequence[Hand]) -> bytes:
        """The hands (predict()'s result; hands with an "error" are left out)
        as one binary glTF 2.0 file (bytes), as ``hamer run --glb`` writes
        it: per hand a skinned MANO mesh with its 16 joints and 21 keypoints
        as nodes, placed in the camera frame. Blender, three.js and Unity
        import it."""
        hands = list(hands)
        chands = _hand_structs(hands, _GLB_NEEDS, "glb")
        buf, size = _lib.c_uint8_p(), ctypes.c_size_t()
        with self._use(need_state=False):
            rc = self._lib.hamer_hands_glb(self._handle, chands, len(hands), ctypes.byref(buf), ctypes.byref(size))
            if rc < 0:
                raise _library_error(rc)
        try:
            return ctypes.string_at(buf, size.value)
        finally:
            self._lib.hamer_free(buf)

    # The methods below are written further down (their docstrings are
    # those functions'); these signatures are what callers and type
    # checkers see.

    def track(self, frames: Iterable[np.ndarray], times: Optional[Iterable[float]] = None, fps: float = 30.0,
              detector: Optional[PathLike] = None, lite: bool = False, max_hands: int = 2, tiles: bool = False,
              smooth: str = "one-euro", min_cutoff: float = 1.0, beta: float = 1.0, d_cutoff: float = 1.0,
              vertices: bool = False, rescale: float = 2.0, focal: Optional[float] = None,
              fov: Optional[float] = None, glb: Optional[PathLike] = None, bvh: Optional[PathLike] = None,
              shape: str = "track") -> Iterator[Hand]:
        return _model_track(self, frames, times, fps, detector, lite, max_hands, tiles, smooth, min_cutoff, beta,
                            d_cutoff, vertices, rescale, focal, fov, glb, bvh, shape)

    def video(self, path: PathLike, start: float = 0.0, duration: float = 0.0, stride: int = 1,
              **kw: Any) -> Iterator[Hand]:
        return _model_video(self, path, start, duration, stride, **kw)

    def predict_folder(self, input_dir: PathLike, out_dir: Optional[PathLike] = None, recursive: bool = False,
                       glob: Union[None, str, Sequence[str]] = None, boxes_dir: Optional[PathLike] = None,
                       vertices: bool = False, render: bool = False, side_view: bool = False,
                       save_mesh: bool = False, glb: bool = False, force: bool = False, retry_failed: bool = False,
                       detector: Union[None, PathLike, Detector] = None, lite: bool = False, max_hands: int = 8,
                       min_score: float = 0.5, tiles: bool = True, rescale: float = 2.0,
                       crop_mode: str = "warp", draw: Union[str, Sequence[str]] = "all", bvh: bool = False,
                       focal: Optional[float] = None, fov: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        from ._folder import predict_folder
        return predict_folder(self, input_dir, out_dir=out_dir, recursive=recursive, glob=glob, boxes_dir=boxes_dir,
                              vertices=vertices, render=render, side_view=side_view, save_mesh=save_mesh, glb=glb,
                              force=force, retry_failed=retry_failed, detector=detector, lite=lite,
                              max_hands=max_hands, min_score=min_score, tiles=tiles, rescale=rescale,
                              crop_mode=crop_mode, draw=draw, bvh=bvh, focal=focal, fov=fov)


    def bvh(self, hands: Sequence[Hand]) -> str:
        """The hands (predict()'s result; hands with an "error" are left out)
        as BVH motion text (str), as ``hamer run --bvh`` writes it: per hand
        a skeleton of MANO's 16 joints (bone lengths from its betas,
        fingertips as End Sites) in one frame, the wrist at its place in the
        camera (metres, y up, the camera looking down -z)."""
        hands = list(hands)
        chands = _hand_structs(hands, _GLB_NEEDS, "bvh")
        buf, size = ctypes.c_void_p(), ctypes.c_size_t()
        with self._use(need_state=False):
            rc = self._lib.hamer_hands_bvh(self._handle, chands, len(hands), ctypes.byref(buf), ctypes.byref(size))
            if rc < 0:
                raise _library_error(rc)
        try:
            return ctypes.string_at(buf, size.value).decode("ascii")
        finally:
            self._lib.hamer_free(buf)


# ---- Video: hands tracked through frames --------------------------------------

# Fields of a tracked frame's hands that are numbers (float32 arrays here).
_TRACK_ARRAY_KEYS = ("bbox", "global_orient", "hand_pose", "global_orient_axis_angle", "hand_pose_axis_angle",
                     "betas", "pred_cam", "cam_t_full", "keypoints_3d", "keypoints_2d", "vertices", "landmarks")


def _track_arrays(d):
    for key, value in list(d.items()):
        if key in _TRACK_ARRAY_KEYS:
            d[key] = np.array(value, np.float32)
        elif key in ("raw", "detection") and isinstance(value, dict):
            _track_arrays(value)
        elif key == "crop":
            d[key] = {"center": np.array(value["center"], np.float64), "size": float(value["size"])}
    return d


def _track_record(ptr, lib):
    if not ptr:
        raise _library_error(fallback="hamer_tracker_frame_json failed")
    try:
        rec = json.loads(ctypes.string_at(ptr).decode("utf-8"))
    finally:
        lib.hamer_free(ptr)
    for hand in rec["hands"]:
        _track_arrays(hand)
    return rec


_SMOOTH_MODES = {"one-euro": _lib.SMOOTH_ONE_EURO, "none": _lib.SMOOTH_NONE}


@contextlib.contextmanager
def _tracking(detector, lite, threads, max_hands, tiles, smooth, min_cutoff, beta, d_cutoff):
    """A detector and a tracker for one stream, freed at the end."""
    lib = _lib.load()
    if smooth not in _SMOOTH_MODES:
        raise HamerError(f"smooth must be 'one-euro' or 'none', got {smooth!r}", E_ARG)
    dp = lib.hamer_detector_default_params()
    dir_bytes = os.fsencode(detector) if detector is not None else None
    dp.dir = dir_bytes
    dp.lite = bool(lite)
    det = lib.hamer_detector_load(ctypes.byref(dp))
    if not det:
        raise _library_error(fallback="cannot load the hand detector")
    tr = None
    try:
        tp = lib.hamer_tracker_default_params()
        tp.max_hands, tp.tiles, tp.smooth = max_hands, bool(tiles), _SMOOTH_MODES[smooth]
        tp.min_cutoff, tp.beta, tp.d_cutoff = min_cutoff, beta, d_cutoff
        tr = lib.hamer_tracker_new(det, ctypes.byref(tp), int(threads or 0))
        if not tr:
            raise _library_error(fallback="cannot create a hand tracker")
        yield lib, tr
    finally:
        if tr:
            lib.hamer_tracker_free(tr)
        lib.hamer_detector_free(det)


def _video_params(lib, start, duration, stride):
    """hamer_video_params from read_video's arguments, checked now by the
    library's own hamer_video_check_params (the check `hamer video` and
    hamer_video_open use), so that a bad value fails at the call."""
    vp = lib.hamer_video_default_params()
    vp.start_s, vp.duration_s = _num_arg("start", start), _num_arg("duration", duration)
    vp.stride = _int_arg("stride", stride)
    rc = lib.hamer_video_check_params(ctypes.byref(vp))
    if rc < 0:
        raise _library_error(rc)
    return vp


def read_video(path: PathLike, start: float = 0.0, duration: float = 0.0,
               stride: int = 1) -> Iterator[tuple]:
    """The frames of a video file as the library decodes them (FFmpeg;
    rotation metadata applied): yields (index, time_s, rgb) with rgb an
    HxWx3 uint8 array (a copy). start and duration in seconds (0..1e9;
    duration 0: to the end), every stride-th frame (1..1000000): checked
    when called (HamerArgumentError). Raises HamerFormatError, after the
    frames before it, when the file is damaged or truncated."""
    lib = _lib.load()
    path_b = os.fsencode(path)
    return _read_video(lib, path_b, _video_params(lib, start, duration, stride))


def _video_fps(path):
    """The frame rate a video file's container states (0: unknown)."""
    lib = _lib.load()
    vp = lib.hamer_video_default_params()
    v = lib.hamer_video_open(os.fsencode(path), ctypes.byref(vp))
    if not v:
        raise _library_error(fallback="cannot open the video")
    try:
        info = _lib.VideoInfo()
        if lib.hamer_video_get_info(v, ctypes.byref(info)) < 0:
            raise _library_error()
        return float(info.fps) if 0 < info.fps <= 1e4 else 0.0
    finally:
        lib.hamer_video_close(v)


def _read_video(lib, path_b, vp):
    v = lib.hamer_video_open(path_b, ctypes.byref(vp))
    if not v:
        raise _library_error(fallback="cannot open the video")
    try:
        f = _lib.VideoFrame()
        while True:
            rc = lib.hamer_video_next(v, ctypes.byref(f))
            if rc == 0:
                return
            if rc < 0:
                raise _library_error(rc)
            n = f.width * f.height * 3
            rgb = np.ctypeslib.as_array(f.rgb, shape=(n,)).reshape(f.height, f.width, 3).copy()
            yield f.index, f.time_s, rgb
    finally:
        lib.hamer_video_close(v)


_ANIM_SHAPES = {"track": _lib.ANIM_SHAPE_TRACK, "first": _lib.ANIM_SHAPE_FIRST}


def _model_track(self, frames, times=None, fps=30.0, detector=None, lite=False, max_hands=2, tiles=False,
                 smooth="one-euro", min_cutoff=1.0, beta=1.0, d_cutoff=1.0, vertices=False, rescale=2.0,
                 focal=None, fov=None, glb=None, bvh=None, shape="track", _anim_fps=None):
    """Hands tracked, regressed and smoothed through a sequence of frames.

    frames      iterable of HxWx3 uint8 RGB arrays (one stream: same size)
    times       their times in seconds (increasing); default i / fps
    detector    the models' directory (default: the library's search)
    max_hands   hands tracked at once; smooth "one-euro" (default) or "none"
                with the One Euro min_cutoff (Hz), beta and d_cutoff (Hz)
                as ``hamer video`` documents them
    focal, fov  the camera (as predict(); default the model's own)
    glb, bvh    paths: the tracks as an animated GLB and / or BVH, written
                when the last frame is done (as ``hamer video --glb / --bvh``;
                keys on whole frames of fps when times are not given, else
                at the times given); shape "track" (one MANO shape per
                track, default) or "first"

    Yields one dict per frame, as a line of ``hamer video``: "frame",
    "time_s", "detected", "cut", "hands" (each with the predict() fields,
    smoothed, plus "track_id", "tracked", "frames", "detector_score",
    "handedness_vote", "detection" and "raw"), "timings_ms"; numbers as
    float32 arrays.

    Arguments of the wrong type or range raise HamerArgumentError at the
    call. Each frame borrows an inference state for its own duration only,
    so the generator holds nothing of the model between frames: close()
    does not wait for an open generator, whose next frame then raises
    HamerError ("the model is closed")."""
    self._check_open()
    if smooth not in _SMOOTH_MODES:
        raise HamerError(f"smooth must be 'one-euro' or 'none', got {smooth!r}", E_ARG)
    fps = _num_arg("fps", fps)
    if times is None and not (0 < fps < float("inf")):
        raise HamerError(f"fps must be a finite number > 0, got {fps!r}", E_ARG)
    opts = dict(max_hands=_int_arg("max_hands", max_hands), min_cutoff=_num_arg("min_cutoff", min_cutoff),
                beta=_num_arg("beta", beta), d_cutoff=_num_arg("d_cutoff", d_cutoff), tiles=tiles, smooth=smooth)
    params = _predict_params(rescale, _lib.CROP_WARP, focal, fov)
    if shape not in _ANIM_SHAPES:
        raise HamerError(f"shape must be 'track' or 'first', got {shape!r}", E_ARG)
    anim = None
    if glb is not None or bvh is not None:
        anim = dict(glb=None if glb is None else os.fsencode(glb), bvh=None if bvh is None else os.fsencode(bvh),
                    shape=_ANIM_SHAPES[shape],
                    fps=_anim_fps if _anim_fps is not None else fps if times is None else 0.0)
    return _track(self, frames, times, fps, detector, lite, opts, bool(vertices), params, anim)


def _track(self, frames, times, fps, detector, lite, opts, vertices, params, anim=None):
    it_times = iter(times) if times is not None else None
    with _tracking(detector, lite, self._threads, opts["max_hands"], opts["tiles"], opts["smooth"],
                   opts["min_cutoff"], opts["beta"], opts["d_cutoff"]) as (lib, tr), _recording(self, anim) as rec_anim:
        for i, frame in enumerate(frames):
            rgb = _as_rgb(frame)
            h, w = rgb.shape[:2]
            t = _num_arg("times", next(it_times)) if it_times is not None else i / fps
            # The state only for this frame (the tracker keeps the stream's
            # own state): a suspended generator must not hold a call open,
            # which close() would wait for forever.
            with self._use() as st:
                rc = lib.hamer_tracker_frame(tr, st, rgb.ctypes.data_as(_lib.c_uint8_p), w, h, t,
                                             ctypes.byref(params))
                if rc < 0:
                    raise _library_error(rc)
                rec = _track_record(lib.hamer_tracker_frame_json(tr, i, int(vertices), -1.0), lib)
                if rec_anim:
                    tracks, raw, smoothed = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
                    n = lib.hamer_tracker_get_results(tr, ctypes.byref(tracks), ctypes.byref(raw),
                                                      ctypes.byref(smoothed), None)
                    if lib.hamer_anim_add(rec_anim, t, tracks, smoothed or raw, n) < 0:
                        raise _library_error()
            yield rec
        if rec_anim:  # every frame done: the files
            for key, write in (("glb", lib.hamer_anim_write_glb), ("bvh", lib.hamer_anim_write_bvh)):
                if anim[key] is not None and write(rec_anim, anim[key]) < 0:
                    raise _library_error()


@contextlib.contextmanager
def _recording(model, anim):
    """The animation recorder of a track() call (None without glb / bvh)."""
    if not anim:
        yield None
        return
    lib = _lib.load()
    ap = lib.hamer_anim_default_params()
    ap.fps, ap.shape = anim["fps"], anim["shape"]
    with model._use(need_state=False):
        a = lib.hamer_anim_new(model._handle, ctypes.byref(ap))
    if not a:
        raise _library_error(fallback="cannot create the animation recorder")
    try:
        yield a
    finally:
        lib.hamer_anim_free(a)


def _model_video(self, path, start=0.0, duration=0.0, stride=1, **kw):
    """Model.track on the frames of a video file (read_video: start,
    duration in seconds, every stride-th frame); "frame" is the frame's
    number in the file and "time_s" its presentation time; glb= / bvh=
    write the tracks' animation with its keys on the clip's frames (the
    container's frame rate), as ``hamer video --glb / --bvh``. Bad
    arguments raise HamerArgumentError at the call (read_video's and
    track's checks); a damaged file raises HamerFormatError after the
    frames before it."""
    frames = read_video(path, start, duration, stride)
    if kw.get("glb") is not None or kw.get("bvh") is not None:
        kw.setdefault("fps", _video_fps(path))  # the animation's keys on the clip's frames
    times, index = [], []

    def pictures():
        for i, t, rgb in frames:
            index.append(i)
            times.append(t)
            yield rgb

    def clock():
        while True:
            yield times[-1]

    anim_fps = kw.pop("fps", 30.0)
    records = _model_track(self, pictures(), times=clock(), fps=anim_fps, _anim_fps=anim_fps, **kw)

    def numbered():
        for rec in records:
            rec["frame"] = int(index[-1])
            yield rec

    return numbered()


def _docs():
    from ._folder import predict_folder
    Model.track.__doc__ = _model_track.__doc__
    Model.video.__doc__ = _model_video.__doc__
    Model.predict_folder.__doc__ = predict_folder.__doc__


_docs()
