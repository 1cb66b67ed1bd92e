"""Model.predict_folder: every image of a folder, as ``hamer batch`` does.

The same files, names, skip rule and errors.jsonl records as the command
(tools/cli/cli_batch.c), so that the two can take turns on one output
folder: per image NAME (its file name without the extension, in OUT's mirror
of its subfolder) NAME.json (RESULT.json), NAME_all.png (render),
NAME_side.png (side_view), NAME_N.obj (save_mesh), each written to a
temporary file, fsync'd and renamed, NAME.json last.
"""

import ctypes
import errno
import fcntl
import fnmatch
import json
import os
import re
import secrets
import string
import time

from . import _lib

_STALE_TEMP = re.compile(r"^\..+\.(json|png|obj|jsonl)\.[A-Za-z0-9]{6}$")
_TEMP_CHARS = string.ascii_letters + string.digits

# The library functions this module needs beyond those _lib binds.
_EXTRA = {
    "hamer_detect_default_params": (_lib.DetectParams, []),
    "hamer_detect_state_new": (ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int]),
    "hamer_detect_state_free": (None, [ctypes.c_void_p]),
    "hamer_detect": (ctypes.c_int, [ctypes.c_void_p, _lib.c_uint8_p, ctypes.c_int, ctypes.c_int,
                                    ctypes.POINTER(_lib.DetectParams), ctypes.POINTER(_lib.Detection), ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_double)]),
    "hamer_predict_detections": (ctypes.c_int, [ctypes.c_void_p, _lib.c_uint8_p, ctypes.c_int, ctypes.c_int,
                                                ctypes.POINTER(_lib.Detection), ctypes.c_int,
                                                ctypes.POINTER(_lib.PredictParams), ctypes.POINTER(_lib.Hand),
                                                ctypes.POINTER(_lib.Timings)]),
    "hamer_hand_obj": (ctypes.c_int, [ctypes.c_void_p, ctypes.POINTER(_lib.Hand),
                                      ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]),
    "hamer_boxes_parse": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_lib.Box), ctypes.c_int]),
}


def _library():
    lib = _lib.load()
    for name, (restype, argtypes) in _EXTRA.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def _write_atomic(path, data):
    """path replaced by data or left as it was: a temporary file beside it
    (named as core/fileio.h names them, so either side removes the other's
    leftovers), fsync'd, renamed, the folder fsync'd."""
    d, base = os.path.split(path)
    d = d or "."
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    while True:
        tmp = os.path.join(d, f".{base}." + "".join(secrets.choice(_TEMP_CHARS) for _ in range(6)))
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _fresh(path, after):
    try:
        st = os.stat(path)
    except OSError:
        return False
    return os.path.isfile(path) and all(st.st_mtime_ns >= t for t in after)


class _Item:
    __slots__ = ("path", "rel", "out_dir", "stem", "boxes", "mtime_ns", "size", "clash")


def _scan(input_dir, out_dir, boxes_dir, recursive, globs):
    skip = []
    for d in (out_dir, boxes_dir):
        if d is not None and os.path.isdir(d):
            st = os.stat(d)
            skip.append((st.st_dev, st.st_ino))
    items = []

    def walk(dir_, rel):
        names = sorted(e for e in os.listdir(dir_) if not e.startswith("."))
        for name in names:
            path = os.path.join(dir_, name)
            r = f"{rel}/{name}" if rel else name
            try:
                st = os.stat(path)
            except OSError:
                continue  # a dangling link, a file removed meanwhile
            if os.path.stat.S_ISDIR(st.st_mode):
                if recursive and (st.st_dev, st.st_ino) not in skip:
                    walk(path, r)
            elif os.path.stat.S_ISREG(st.st_mode) and (not globs or any(fnmatch.fnmatchcase(name, g) for g in globs)):
                it = _Item()
                it.path, it.rel, it.mtime_ns, it.size, it.clash = path, r, st.st_mtime_ns, st.st_size, None
                stem = os.path.splitext(name)[0]
                if out_dir is not None:
                    it.out_dir = os.path.join(out_dir, rel) if rel else out_dir
                    it.stem = os.path.join(it.out_dir, stem)
                else:
                    it.out_dir = it.stem = None
                it.boxes = (os.path.join(boxes_dir, rel, stem + ".json") if rel else
                            os.path.join(boxes_dir, stem + ".json")) if boxes_dir else None
                items.append(it)

    walk(os.fspath(input_dir), "")
    seen = {}
    for it in sorted(items, key=lambda i: (os.path.join(os.path.dirname(i.rel), os.path.splitext(os.path.basename(i.rel))[0]), i.rel)):
        key = os.path.join(os.path.dirname(it.rel), os.path.splitext(os.path.basename(it.rel))[0])
        if key in seen:
            it.clash = seen[key]
        else:
            seen[key] = it.rel
    return items


def _complete(it, render, side_view, save_mesh, vertices):
    after = [it.mtime_ns]
    if it.boxes:
        try:
            after.append(os.stat(it.boxes).st_mtime_ns)
        except OSError:
            return False
    if not _fresh(it.stem + ".json", after):
        return False
    if render and not _fresh(it.stem + "_all.png", after):
        return False
    if side_view and not _fresh(it.stem + "_side.png", after):
        return False
    try:
        with open(it.stem + ".json", "rb") as f:
            hands = json.load(f)["hands"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    if not isinstance(hands, list):
        return False
    for i, h in enumerate(hands):
        if "error" in h:
            continue
        if ("vertices" in h) != bool(vertices):
            return False
        if save_mesh and not _fresh(f"{it.stem}_{i}.obj", after):
            return False
    return True


def _read_errors(path):
    out = []
    try:
        with open(path, "rb") as f:
            for line in f:
                try:
                    rec = json.loads(line)
                    if isinstance(rec.get("path"), str) and isinstance(rec.get("stage"), str):
                        out.append((rec, line))
                except ValueError:
                    pass
    except FileNotFoundError:
        pass
    return out


def _remove_stale_temps(d):
    try:
        names = os.listdir(d)
    except OSError:
        return
    for n in names:
        if _STALE_TEMP.match(n):
            try:
                os.unlink(os.path.join(d, n))
            except OSError:
                pass


def predict_folder(self, input_dir, out_dir=None, recursive=False, glob=None, boxes_dir=None, vertices=False,
                   render=False, side_view=False, save_mesh=False, force=False, retry_failed=False, detector=None,
                   lite=False, max_hands=8, min_score=0.5, tiles=True, rescale=2.0, crop_mode="warp"):
    """Every image of a folder, as ``hamer batch``: a generator of one dict
    per image, in the command's order (sorted by name, subfolders where
    they come):

        {"path": the image file, "name": its path below input_dir,
         "status": "computed" | "skipped" | "failed",
         "result": its RESULT.json document (json.loads of it) or None,
         "error": {"stage", "reason"} or None}

    out_dir     None: nothing is written, every image computed. Otherwise
                the files of ``hamer batch --out-dir``: NAME.json,
                NAME_all.png (render), NAME_side.png (side_view),
                NAME_N.obj (save_mesh), OUT/errors.jsonl; an image whose
                outputs are complete and newer than it is "skipped" (its
                result read back, with the error an earlier run recorded
                for it, if any) unless force; an image an earlier run
                could not decode is "skipped" with that error unless
                retry_failed.
    recursive, glob (a pattern or a list of them), boxes_dir (NAME.json
    boxes documents; else the detector: detector, lite, max_hands,
    min_score, tiles), rescale, crop_mode, vertices: as ``hamer batch``.

    A bad image never stops the iteration: it comes out "failed" with the
    reason (and a line in errors.jsonl). An output folder that cannot be
    created or written raises HamerIOError before any image is read.
    A photo without hands, or with a failed hand, is "failed" and still
    has its result (as ``hamer run`` writes it)."""
    from . import HamerError, _library_error, _CROP_MODES, E_ARG, E_IO  # circular at import time

    globs = [glob] if isinstance(glob, (str, os.PathLike)) else list(glob or [])
    if crop_mode not in _CROP_MODES:
        raise HamerError(f"crop_mode must be 'warp' or 'pad', got {crop_mode!r}", E_ARG)
    input_dir = os.fspath(input_dir)
    if not os.path.isdir(input_dir):
        raise HamerError(f"input_dir '{input_dir}' is not a folder", E_IO)
    if boxes_dir is not None and not os.path.isdir(boxes_dir):
        raise HamerError(f"boxes_dir '{boxes_dir}' is not a folder", E_IO)
    lock = None
    errors_path = None
    if out_dir is not None:
        out_dir = os.fspath(out_dir)
        try:
            os.makedirs(out_dir, exist_ok=True)
            if os.path.samefile(out_dir, input_dir):
                raise HamerError("out_dir must not be the input folder (its outputs would become inputs)", E_ARG)
            lock = os.open(os.path.join(out_dir, ".hamer-batch.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise HamerError(f"cannot use the output folder '{out_dir}': {e.strerror or e}", E_IO) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            raise HamerError(f"another hamer batch is using '{out_dir}'", E_IO) from None
        errors_path = os.path.join(out_dir, "errors.jsonl")
    try:
        yield from _run(self, input_dir, out_dir, errors_path, recursive, globs, boxes_dir, vertices, render,
                        side_view, save_mesh, force, retry_failed, detector, lite, max_hands, min_score, tiles,
                        rescale, crop_mode, HamerError, _library_error, _CROP_MODES)
    finally:
        if lock is not None:
            os.close(lock)


def _run(self, input_dir, out_dir, errors_path, recursive, globs, boxes_dir, vertices, render, side_view, save_mesh,
         force, retry_failed, detector, lite, max_hands, min_score, tiles, rescale, crop_mode, HamerError,
         _library_error, _CROP_MODES):
    lib = _library()
    items = _scan(input_dir, out_dir, boxes_dir, recursive, globs)
    old = _read_errors(errors_path) if errors_path else []
    plan, keep = [], set()
    last_dir = None
    for it in items:
        recs = [r for r, _ in old if r["path"] == it.path]
        same = [r for r in recs if r.get("size") == it.size and r.get("mtime_ns") == it.mtime_ns]
        status, err = "todo", None
        if out_dir is not None and not force:
            if not it.clash and _complete(it, render, side_view, save_mesh, vertices):
                status = "skipped"
            elif not retry_failed and same and same[-1]["stage"] in ("decode", "name"):
                status, err = "skipped", same[-1]
        if status == "skipped":
            keep.add(it.path)
            err = recs[-1] if recs else None
        plan.append((it, status, err))
        if out_dir is not None and it.out_dir != last_dir:
            _remove_stale_temps(it.out_dir)
            last_dir = it.out_dir
    errfd = None
    if errors_path:
        _write_atomic(errors_path, b"".join(line for r, line in old if r["path"] in keep))
        errfd = os.open(errors_path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)

    def record(it, stage, reason):
        if errfd is not None:
            rec = {"path": it.path, "stage": stage, "reason": reason, "size": it.size, "mtime_ns": it.mtime_ns}
            os.write(errfd, (json.dumps(rec, separators=(",", ":")) + "\n").encode())
            os.fsync(errfd)
        return {"stage": stage, "reason": reason}

    det = ds = None
    try:
        params = _lib.PredictParams(rescale=float(rescale), crop_mode=_CROP_MODES[crop_mode])
        dparams = lib.hamer_detect_default_params()
        dparams.max_hands, dparams.min_score, dparams.tiles = int(max_hands), float(min_score), int(bool(tiles))
        for it, status, err in plan:
            out = {"path": it.path, "name": it.rel, "status": status, "result": None, "error": None}
            if status == "skipped":
                if err is not None:
                    out["error"] = {"stage": err["stage"], "reason": err["reason"]}
                try:
                    with open(it.stem + ".json", "rb") as f:
                        out["result"] = json.load(f)
                except (OSError, ValueError):
                    pass
                yield out
                continue
            out["status"] = "failed"
            if it.clash:
                out["error"] = record(it, "name", f"its outputs would overwrite those of '{it.clash}' "
                                                  "(same name without extension)")
                yield out
                continue
            t0 = time.monotonic()
            buf, w, h = _lib.c_uint8_p(), ctypes.c_int(), ctypes.c_int()
            rc = lib.hamer_image_load(os.fsencode(it.path), ctypes.byref(buf), ctypes.byref(w), ctypes.byref(h))
            decode_ms = 1e3 * (time.monotonic() - t0)
            if rc < 0:
                out["error"] = record(it, "decode", _lib.last_error())
                yield out
                continue
            try:
                res, error = _one(self, lib, it, buf, w.value, h.value, decode_ms, boxes_dir, params, dparams,
                                  detector, lite, vertices, render, side_view, save_mesh, out_dir, _library_error,
                                  (det, ds))
                det, ds = res.pop("_det")
            finally:
                lib.hamer_free(buf)
            if "stage" in res:
                out["error"] = record(it, res["stage"], res["reason"])
            else:
                out["result"] = res["doc"]
                if error:
                    out["error"] = record(it, "hands", error)
                else:
                    out["status"] = "computed"
            yield out
    finally:
        if ds:
            lib.hamer_detect_state_free(ds)
        if det:
            lib.hamer_detector_free(det)
        if errfd is not None:
            os.close(errfd)


def _one(self, lib, it, rgb, w, h, decode_ms, boxes_dir, params, dparams, detector, lite, vertices, render,
         side_view, save_mesh, out_dir, _library_error, dets_state):
    """One decoded image, with the library calls of ``hamer run`` in its
    order. {"doc", "_det"} and a hands error, or {"stage", "reason",
    "_det"}."""
    det, ds = dets_state
    n_max = _lib.MAX_HANDS
    tm = _lib.Timings()
    hands = (_lib.Hand * n_max)()
    detected = boxes_dir is None

    def fail(stage, reason):
        return {"stage": stage, "reason": reason, "_det": (det, ds)}, None

    with self._use() as st:
        if detected:
            if det is None:
                dp = lib.hamer_detector_default_params()
                dir_bytes = os.fsencode(detector) if detector is not None else None
                dp.dir, dp.lite = dir_bytes, int(bool(lite))
                det = lib.hamer_detector_load(ctypes.byref(dp))
                if not det:
                    raise _library_error(fallback="cannot load the hand detector")
                ds = lib.hamer_detect_state_new(det, int(self._threads or 0))
                if not ds:
                    raise _library_error(fallback="cannot create a detection state")
            dets = (_lib.Detection * n_max)()
            ms = ctypes.c_double()
            n = lib.hamer_detect(ds, rgb, w, h, ctypes.byref(dparams), dets, n_max, ctypes.byref(ms))
            if n < 0:
                return fail("detect", _lib.last_error())
            rc = lib.hamer_predict_detections(st, rgb, w, h, dets, n, ctypes.byref(params), hands, ctypes.byref(tm))
            tm.detect_ms = ms.value
        else:
            try:
                with open(it.boxes, "rb") as f:
                    text = f.read((64 << 20) + 1)
            except OSError as e:
                return fail("boxes", f"no boxes file '{it.boxes}': {e.strerror}")
            if len(text) > 64 << 20:
                return fail("boxes", f"'{it.boxes}': larger than 64 MB")
            boxes = (_lib.Box * n_max)()
            n = lib.hamer_boxes_parse(text, len(text), boxes, n_max)
            if n < 0:
                return fail("boxes", f"{it.boxes}: {_lib.last_error()}")
            rc = lib.hamer_predict(st, rgb, w, h, boxes, n, ctypes.byref(params), hands, ctypes.byref(tm))
        if rc < 0:
            return fail("predict", _lib.last_error())
    tm.decode_ms = decode_ms
    ptr = lib.hamer_result_json_source(w, h, hands, n, int(bool(vertices)), ctypes.byref(tm),
                                       _lib.BOXES_DETECTED if detected else _lib.BOXES_GIVEN)
    if not ptr:
        return fail("predict", _lib.last_error())
    try:
        text = ctypes.string_at(ptr)
    finally:
        lib.hamer_free(ptr)
    if out_dir is not None:
        try:
            os.makedirs(it.out_dir, exist_ok=True)
            for k, (want, suffix) in enumerate(((render, "_all.png"), (side_view, "_side.png"))):
                if not want:
                    continue
                png, size = _lib.c_uint8_p(), ctypes.c_size_t()
                if lib.hamer_render_png(self._handle, rgb, w, h, hands, n, k, ctypes.byref(png), ctypes.byref(size)):
                    return fail("render", _lib.last_error())
                try:
                    data = ctypes.string_at(png, size.value)
                finally:
                    lib.hamer_free(png)
                _write_atomic(it.stem + suffix, data)
            for i in range(n if save_mesh else 0):
                if not hands[i].ok:
                    continue
                obj, size = ctypes.c_void_p(), ctypes.c_size_t()
                if lib.hamer_hand_obj(self._handle, ctypes.byref(hands[i]), ctypes.byref(obj), ctypes.byref(size)):
                    return fail("write", _lib.last_error())
                try:
                    data = ctypes.string_at(obj, size.value)
                finally:
                    lib.hamer_free(obj)
                _write_atomic(f"{it.stem}_{i}.obj", data)
            _write_atomic(it.stem + ".json", text)
        except OSError as e:
            return fail("write", f"cannot write in '{it.out_dir}': {e.strerror or e}")
    doc = json.loads(text)
    error = None
    if detected and n == 0:
        error = "no hand found"
    else:
        bad = [i for i in range(n) if not hands[i].ok]
        if bad:
            error = f"{len(bad)} of {n} hands failed; {hands[bad[0]].error.decode('utf-8', 'replace')}"
    return {"doc": doc, "_det": (det, ds)}, error
