"""Model.predict_folder: every image of a folder, as ``hamer batch`` does.

Both are front ends over the library's folder mode (hamer_folder_*,
src/hamer_folder.c: the scan, the names, the skip rule, errors.jsonl and the
lock), so that the two take turns on one output folder: per image NAME (its
file name without the extension, in OUT's mirror of its subfolder)
NAME.json (RESULT.json), NAME_all.png (render), NAME_side.png (side_view),
NAME_N.obj (save_mesh), each written atomically, NAME.json last.
"""

import ctypes
import json
import os
import time

from . import _lib

_STATUS = {_lib.FOLDER_SKIPPED: "skipped", _lib.FOLDER_COMPUTED: "computed", _lib.FOLDER_FAILED: "failed"}
_JOB_STAGE_DETECT = 2  # hamer_job_stage HAMER_JOB_STAGE_DETECT

# The library functions this module needs beyond those _lib binds.
_EXTRA = {
    "hamer_detect_default_params": (_lib.DetectParams, []),
    "hamer_detect_state_new": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "hamer_detect_state_free": (None, [ctypes.c_void_p]),
}


def _library():
    lib = _lib.load()
    for name, (restype, argtypes) in _EXTRA.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, _lib.checked_argtypes(argtypes)
    return lib


def _text(b):
    """A string of the library (a path as the OS names it: os.fsdecode)."""
    return None if b is None else os.fsdecode(b)


def _load_result(path):
    """NAME.json of an earlier run, parsed; None when there is none (or it
    is not a regular file: a FIFO there must not block the run)."""
    try:
        if not os.path.stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def predict_folder(self, input_dir, out_dir=None, recursive=False, glob=None, boxes_dir=None, vertices=False,
                   render=False, side_view=False, save_mesh=False, glb=False, force=False, retry_failed=False,
                   detector=None,
                   lite=False, max_hands=8, min_score=0.5, tiles=True, rescale=2.0, crop_mode="warp", draw="all",
                   bvh=False, focal=None, fov=None):
    """Every image of a folder, as ``hamer batch``: a generator of one dict
    per image, in the command's order (sorted by name, subfolders where
    they come):

        {"path": the image file, "name": its path below input_dir (str
         paths, as os.listdir gives them: a name that is not UTF-8 comes
         with os.fsdecode's surrogates),
         "status": "computed" | "skipped" | "failed",
         "result": its NAME.json document (json.loads of it: RESULT.json
                   with the "input" record first) or None,
         "error": {"stage", "reason"} or None}

    out_dir     None: nothing is written, every image computed. Otherwise
                the files of ``hamer batch --out-dir``: NAME.json,
                NAME_all.png (render; what it shows: draw, as Model.render's),
                NAME_side.png (side_view),
                NAME_N.obj (save_mesh), NAME.glb (glb), NAME.bvh (bvh),
                OUT/errors.jsonl;
                an image whose
                NAME.json records it as it is now and whose outputs are
                complete and newer than it is "skipped" (its result read
                back, with the error an earlier run recorded for it, if
                any) unless force; an image an earlier run could not decode
                is "skipped" with that error unless retry_failed. Two
                images with one NAME: the one NAME.json records (else the
                first by name) keeps it, the other fails (stage "name").
    recursive, glob (a pattern or a list of them), boxes_dir (NAME.json
    boxes documents; else the detector: detector, lite, max_hands,
    min_score, tiles), rescale, crop_mode, vertices, focal, fov: as
    ``hamer batch`` (focal / fov: every photo's camera; None: each
    photo's EXIF, else the model's own).
    The rules (names, scan, stems, skips) are the library's folder mode,
    listed at the top of src/hamer_folder.c.

    A bad image never stops the iteration: it comes out "failed" with the
    reason (and a line in errors.jsonl; names in reasons and records in
    the escaped form of folder mode's rule 1). An output folder that cannot
    be created or written, or an input folder beyond the scan's limits,
    raises HamerIOError before any image is read.
    A photo with a failed hand is "failed" and still has its result (as
    ``hamer run`` writes it); a photo without hands is "computed", its
    result listing none.

    Ctrl-C (SIGINT in the main thread) stops the image in flight at its
    next pass and raises KeyboardInterrupt: that image stays to do, nothing
    of it written, and the next call computes it. An interrupt that comes
    while its files are being written (after its last pass) finds it
    complete in the output folder, not yielded: the next call yields it as
    "skipped" with its result. The output folder is the record; the
    generator shows it as it is made."""
    from ._model import (HamerError, _library_error, _CROP_MODES, E_ARG, _int_arg, _num_arg, _draw_hide,  # circular
                         _predict_params)

    # checked at the call: ctypes would keep the low 32 bits of max_hands
    max_hands, min_score, rescale = _int_arg("max_hands", max_hands), _num_arg("min_score", min_score), \
        _num_arg("rescale", rescale)
    globs = [glob] if isinstance(glob, (str, os.PathLike)) else list(glob or [])
    if crop_mode not in _CROP_MODES:
        raise HamerError(f"crop_mode must be 'warp' or 'pad', got {crop_mode!r}", E_ARG)
    lib = _library()
    fp = lib.hamer_folder_default_params()
    # Kept alive with fp while the folder is opened (it copies them).
    enc = [os.fsencode(os.fspath(g)) for g in globs]
    glob_arr = (ctypes.c_char_p * max(1, len(enc)))(*enc)
    fp.input_dir = os.fsencode(os.fspath(input_dir))
    fp.out_dir = None if out_dir is None else os.fsencode(os.fspath(out_dir))
    fp.boxes_dir = None if boxes_dir is None else os.fsencode(os.fspath(boxes_dir))
    fp.globs, fp.n_globs = glob_arr, len(enc)
    fp.recursive, fp.force, fp.retry_failed = bool(recursive), bool(force), bool(retry_failed)
    fp.render, fp.side_view = bool(render), bool(side_view)
    fp.render_draw = _lib.DRAW_ALL & ~_draw_hide(draw)
    if not fp.render_draw:
        raise HamerError(f"draw={draw!r} draws nothing (leave render=False)", E_ARG)
    fp.save_mesh, fp.vertices, fp.glb, fp.bvh = bool(save_mesh), bool(vertices), bool(glb), bool(bvh)
    params = _predict_params(rescale, _CROP_MODES[crop_mode], focal, fov)  # checked before the folder opens
    folder = ctypes.c_void_p()
    rc = lib.hamer_folder_open(ctypes.byref(fp), ctypes.byref(folder))
    if rc < 0:
        raise _library_error(rc)
    try:
        dparams = lib.hamer_detect_default_params()
        dparams.max_hands, dparams.min_score, dparams.tiles = max_hands, min_score, bool(tiles)
        yield from _run(self, lib, folder, boxes_dir is None, params, dparams, detector, lite, _library_error)
    finally:
        lib.hamer_folder_close(folder)


def _image(lib, folder, i):
    im = _lib.FolderImage()
    lib.hamer_folder_get_image(folder, i, ctypes.byref(im))
    return im


def _error(im):
    return None if im.error_stage is None else {"stage": im.error_stage.decode(),
                                                "reason": im.error_reason.decode("utf-8", "replace")}


def _run(self, lib, folder, detected, params, dparams, detector, lite, _library_error):
    from ._model import _Interruptible  # circular at import
    det = ds = None
    jp = lib.hamer_job_default_params()
    jp.predict, jp.detect = params, dparams
    try:
        for i in range(lib.hamer_folder_get_count(folder)):
            im = _image(lib, folder, i)
            out = {"path": _text(im.path), "name": _text(im.rel), "status": _STATUS.get(im.status, "todo"),
                   "result": None, "error": _error(im)}
            if im.status == _lib.FOLDER_SKIPPED:
                if im.result_path is not None:  # a clashing image's NAME.json is its owner's
                    out["result"] = _load_result(im.result_path)
                yield out
                continue
            if im.status != _lib.FOLDER_TODO:  # a name clash, failed at the start
                yield out
                continue
            t0 = time.monotonic()
            buf, w, h = _lib.c_uint8_p(), ctypes.c_int(), ctypes.c_int()
            rc = lib.hamer_image_load(im.path, ctypes.byref(buf), ctypes.byref(w), ctypes.byref(h))
            pre = _lib.FolderDecoded(decode_ms=1e3 * (time.monotonic() - t0))
            doc = ctypes.c_void_p()
            try:
                if rc < 0:
                    pre.decode_error = lib.hamer_last_error()
                    rc = lib.hamer_folder_process(folder, i, None, ctypes.byref(pre), ctypes.byref(doc))
                else:
                    pre.rgb, pre.width, pre.height = buf, w.value, h.value
                    if detected and det is None:
                        det, ds = _detector(self, lib, detector, lite, _library_error)
                    with self._use() as st:
                        # The library's photo job on this call's state; freed with its use.
                        job = lib.hamer_job_new(st, ds if detected else None, ctypes.byref(jp))
                        if not job:
                            raise _library_error(fallback="cannot create a photo job")
                        try:
                            # Ctrl-C cancels the job: the image stays to do, KeyboardInterrupt on exit
                            with _Interruptible(lib, st):
                                rc = lib.hamer_folder_process(folder, i, job, ctypes.byref(pre), ctypes.byref(doc))
                        finally:
                            lib.hamer_job_free(job)
                if rc < 0:
                    raise _library_error(rc)
                if doc.value:
                    out["result"] = json.loads(ctypes.string_at(doc.value))
            finally:
                lib.hamer_free(doc)
                lib.hamer_free(buf)
            im = _image(lib, folder, i)
            out["status"], out["error"] = _STATUS.get(im.status, "todo"), _error(im)
            yield out
    finally:
        if ds:
            lib.hamer_detect_state_free(ds)
        if det:
            lib.hamer_detector_free(det)


def _detector(self, lib, detector, lite, _library_error):
    """The hand detector and a detection state, loaded at the first image
    that needs them."""
    dp = lib.hamer_detector_default_params()
    dp.dir = os.fsencode(detector) if detector is not None else None
    dp.lite = bool(lite)
    det = lib.hamer_detector_load(ctypes.byref(dp))
    if not det:
        raise _library_error(fallback="cannot load the hand detector")
    ds = lib.hamer_detect_state_new(det, int(self._threads or 0))
    if not ds:
        lib.hamer_detector_free(det)
        raise _library_error(fallback="cannot create a detection state")
    return det, ds
