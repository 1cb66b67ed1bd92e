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
    "hamer_boxes_parse": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t, ctypes.POINTER(_lib.Box), ctypes.c_int]),
}


def _library():
    lib = _lib.load()
    for name, (restype, argtypes) in _EXTRA.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, _lib.checked_argtypes(argtypes)
    return lib


def _last_error():
    """The library's last error message, its bytes kept (a file name in it
    need not be UTF-8): rule 1 escapes it when it is recorded."""
    msg = _lib.load().hamer_last_error()
    return os.fsdecode(msg) if msg else ""


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
    return os.path.stat.S_ISREG(st.st_mode) and all(st.st_mtime_ns >= t for t in after)


# ==== The folder-mode rules ====
#
# tools/cli/cli_batch.c holds the same rules, in the same order, under the
# same names, so that either side can resume the other's output folder: a
# change here is a change there (tests/test_batch.py checks the two against
# each other).
#
# 1. Names (_name_text / _name_bytes; C: name_text / name_bytes). A file
#    name is bytes; errors.jsonl and NAME.json are UTF-8. Every file name,
#    and every message that may hold one, is written in one escaped form
#    that is lossless and printable: well-formed UTF-8 stays as it is except
#    the control characters (U+0000-001F, U+007F, U+0080-009F), written
#    \xNN per byte, as is every byte outside well-formed UTF-8; a backslash
#    is written \\.
# 2. Scan (_scan; C: scan). The regular files of the folder sorted by name
#    (bytes), names starting with '.' left out, the globs applied to the
#    name; recursive: the subfolders where they come in that order. Links
#    are followed, but each folder (device, inode) is scanned once, at its
#    first path in that order: a link cycle ends, a folder reached by two
#    paths is done once (under a link's name when the link sorts first);
#    the output and boxes folders count as seen. At most
#    _MAX_DEPTH folders deep and _MAX_ENTRIES names read in all, else
#    HamerIOError before any image.
# 3. Stems (_plan_stems; C: plan_stems). The images of one folder with one
#    NAME (a.jpg, a.png) share NAME.json, which records the image it came
#    from first of all: "input": {"path": its path below the input folder
#    (rule 1), "size", "mtime_ns"}. The recorded image, while it is a
#    regular file of the input folder, owns NAME; otherwise (no NAME.json,
#    no record, that file gone) the first of them by name does. Every other
#    image of that NAME fails (stage "name") rather than overwrite the
#    owner's outputs.
# 4. Done (_complete; C: complete). An image is skipped when it owns NAME,
#    NAME.json records it with its present size and mtime, and every output
#    the options ask for is there and at least as new as the image (and its
#    boxes file), with the vertices iff vertices.
# 5. Failures that stand (_permanent; C: permanent): an image of unchanged
#    size and mtime that did not decode is not retried, nor one whose name
#    still clashes (retry_failed does); every other failure is retried.

_MAX_DEPTH = 64
_MAX_ENTRIES = 1000000
_ESCAPE = re.compile(r"\\(?:\\|x([0-9A-Fa-f]{2}))")
_ESCAPED = re.compile(r"(?:[^\\]|\\\\|\\x[0-9A-Fa-f]{2})*", re.S)


def _name_text(name):
    """Rule 1: name (bytes, or a str as os.fsdecode makes it) in the
    escaped form."""
    if isinstance(name, str):
        name = os.fsencode(name)
    out = []
    for ch in name.decode("utf-8", "surrogateescape"):
        o = ord(ch)
        if 0xDC80 <= o <= 0xDCFF:  # a byte outside well-formed UTF-8
            out.append("\\x%02x" % (o - 0xDC00))
        elif o < 0x20 or o == 0x7F:
            out.append("\\x%02x" % o)
        elif 0x80 <= o <= 0x9F:
            out.append("\\xc2\\x%02x" % o)
        elif ch == "\\":
            out.append("\\\\")
        else:
            out.append(ch)
    return "".join(out)


def _name_bytes(text):
    """Rule 1 backwards: the bytes an escaped name stands for (os.fsdecode
    makes the str path of them), or None when text is not in the form."""
    if not isinstance(text, str) or not _ESCAPED.fullmatch(text):
        return None
    try:
        parts, last = [], 0
        for m in _ESCAPE.finditer(text):
            parts.append(text[last:m.start()].encode("utf-8"))
            parts.append(b"\\" if m.group(1) is None else bytes([int(m.group(1), 16)]))
            last = m.end()
        parts.append(text[last:].encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate from a JSON \uDCxx
        return None
    b = b"".join(parts)
    return None if b"\0" in b else b


def _stem_key(rel):
    """rel (bytes) up to the last '.' of its file name: its folder and
    NAME, rule 3's key."""
    base = rel.rfind(b"/") + 1
    dot = rel.rfind(b".", base)
    return rel[:dot] if dot > base else rel


class _Item:
    __slots__ = ("path", "rel", "name", "shown", "out_dir", "stem", "boxes", "mtime_ns", "size", "clash", "done")


def _scan(input_dir, out_dir, boxes_dir, recursive, globs):
    """Rule 2: the images, in order."""
    from . import HamerError, E_IO  # circular at import time
    seen = {(os.stat(input_dir).st_dev, os.stat(input_dir).st_ino)}
    for d in (out_dir, boxes_dir):
        if d is not None and os.path.isdir(d):
            st = os.stat(d)
            seen.add((st.st_dev, st.st_ino))
    items = []
    entries = 0

    def walk(dir_, rel, depth):
        nonlocal entries
        try:
            listed = os.listdir(dir_)
        except OSError as e:
            raise HamerError(f"cannot read the folder '{_name_text(dir_)}': {e.strerror or e}", E_IO) from None
        names = [e for e in listed if not e.startswith(".")]
        entries += len(names)
        if entries > _MAX_ENTRIES:
            raise HamerError(f"more than {_MAX_ENTRIES} names under input_dir '{_name_text(input_dir)}' (the "
                             "scan's limit; split the folder)", E_IO)
        for name in sorted(names, key=os.fsencode):
            path = os.path.join(dir_, name)
            r = f"{rel}/{name}" if rel else name
            try:
                st = os.stat(path)
            except OSError:
                continue  # a dangling link, a file removed meanwhile
            if os.path.stat.S_ISDIR(st.st_mode):
                if recursive and (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    if depth >= _MAX_DEPTH:
                        raise HamerError(f"the folder '{_name_text(path)}' is more than {_MAX_DEPTH} folders below "
                                         "input_dir (the scan's limit)", E_IO)
                    walk(path, r, depth + 1)
            elif os.path.stat.S_ISREG(st.st_mode) and (not globs or any(fnmatch.fnmatchcase(name, g) for g in globs)):
                it = _Item()
                it.path, it.rel, it.mtime_ns, it.size = path, r, st.st_mtime_ns, st.st_size
                it.clash, it.done = None, False
                it.name, it.shown = _name_text(r), _name_text(path)
                stem = os.fsdecode(_stem_key(os.fsencode(name)))
                if out_dir is not None:
                    it.out_dir = os.path.join(out_dir, rel) if rel else out_dir
                    it.stem = os.path.join(it.out_dir, stem)
                else:
                    it.out_dir = it.stem = None
                it.boxes = (os.path.join(boxes_dir, rel, stem + ".json") if rel else
                            os.path.join(boxes_dir, stem + ".json")) if boxes_dir else None
                items.append(it)

    walk(input_dir, "", 0)
    return items


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


def _input_record(doc):
    """Rule 3: (rel bytes, size, mtime_ns) NAME.json records, or None."""
    rec = doc.get("input") if isinstance(doc, dict) else None
    if not isinstance(rec, dict):
        return None
    path, size, mtime_ns = rec.get("path"), rec.get("size"), rec.get("mtime_ns")
    if type(size) is not int or type(mtime_ns) is not int:
        return None
    rel = _name_bytes(path)
    return None if rel is None else (rel, size, mtime_ns)


def _with_input(it, text):
    """Rule 3: RESULT.json (bytes) with the image's record first, as the
    command writes it."""
    rec = json.dumps({"path": it.name, "size": it.size, "mtime_ns": it.mtime_ns}, separators=(",", ":"),
                     ensure_ascii=False).encode()
    return b'{"input":' + rec + b"," + text[1:]


def _complete(it, doc, render, side_view, save_mesh, vertices):
    """Rule 4, given NAME.json (doc) whose record the caller matched."""
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
    hands = doc.get("hands")
    if not isinstance(hands, list):
        return False
    for i, h in enumerate(hands):
        if isinstance(h, dict) and "error" in h:
            continue
        if not isinstance(h, dict) or ("vertices" in h) != bool(vertices):
            return False
        if save_mesh and not _fresh(f"{it.stem}_{i}.obj", after):
            return False
    return True


def _plan_stems(items, input_dir, out_dir, force, render, side_view, save_mesh, vertices):
    """Rule 3 (and 4 unless force) for every image: it.clash, it.done.
    NAME.json is read once per NAME."""
    groups = {}
    for it in sorted(items, key=lambda i: (_stem_key(os.fsencode(i.rel)), os.fsencode(i.rel))):
        groups.setdefault(_stem_key(os.fsencode(it.rel)), []).append(it)
    for group in groups.values():
        doc = _load_result(group[0].stem + ".json") if out_dir is not None else None
        rec = _input_record(doc)
        owner = os.fsencode(group[0].rel)
        if rec is not None and _stem_key(rec[0]) == _stem_key(owner) and \
                os.path.isfile(os.path.join(input_dir, os.fsdecode(rec[0]))):
            owner = rec[0]
        else:
            rec = None
        for it in group:
            if os.fsencode(it.rel) != owner:
                it.clash = os.fsdecode(owner)
            elif not force and rec is not None and rec[1] == it.size and rec[2] == it.mtime_ns:
                it.done = _complete(it, doc, render, side_view, save_mesh, vertices)


def _permanent(it, stage):
    """Rule 5."""
    return stage == "decode" or (stage == "name" and it.clash is not None)


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

        {"path": the image file, "name": its path below input_dir (str
         paths, as os.listdir gives them: a name that is not UTF-8 comes
         with os.fsdecode's surrogates),
         "status": "computed" | "skipped" | "failed",
         "result": its NAME.json document (json.loads of it: RESULT.json
                   with the "input" record first) or None,
         "error": {"stage", "reason"} or None}

    out_dir     None: nothing is written, every image computed. Otherwise
                the files of ``hamer batch --out-dir``: NAME.json,
                NAME_all.png (render), NAME_side.png (side_view),
                NAME_N.obj (save_mesh), OUT/errors.jsonl; an image whose
                NAME.json records it as it is now and whose outputs are
                complete and newer than it is "skipped" (its result read
                back, with the error an earlier run recorded for it, if
                any) unless force; an image an earlier run could not decode
                is "skipped" with that error unless retry_failed. Two
                images with one NAME: the one NAME.json records (else the
                first by name) keeps it, the other fails (stage "name").
    recursive, glob (a pattern or a list of them), boxes_dir (NAME.json
    boxes documents; else the detector: detector, lite, max_hands,
    min_score, tiles), rescale, crop_mode, vertices: as ``hamer batch``.
    The rules (names, scan, stems, skips) are those of the command, listed
    above _MAX_DEPTH in this file.

    A bad image never stops the iteration: it comes out "failed" with the
    reason (and a line in errors.jsonl; names in reasons and records in
    the escaped form of rule 1, _name_bytes undoes it). An output folder
    that cannot be created or written, or an input folder beyond the
    scan's limits, raises HamerIOError before any image is read.
    A photo without hands, or with a failed hand, is "failed" and still
    has its result (as ``hamer run`` writes it)."""
    from . import HamerError, _library_error, _CROP_MODES, E_ARG, E_IO, _int_arg, _num_arg  # circular at import

    # checked at the call: ctypes would keep the low 32 bits of max_hands
    max_hands, min_score, rescale = _int_arg("max_hands", max_hands), _num_arg("min_score", min_score), \
        _num_arg("rescale", rescale)
    globs = [glob] if isinstance(glob, (str, os.PathLike)) else list(glob or [])
    if crop_mode not in _CROP_MODES:
        raise HamerError(f"crop_mode must be 'warp' or 'pad', got {crop_mode!r}", E_ARG)
    # str paths (bytes ones as os.fsdecode makes them), as os.listdir names them
    input_dir = os.fsdecode(os.fspath(input_dir))
    boxes_dir = None if boxes_dir is None else os.fsdecode(os.fspath(boxes_dir))
    if not os.path.isdir(input_dir):
        raise HamerError(f"input_dir '{_name_text(input_dir)}' is not a folder", E_IO)
    if boxes_dir is not None and not os.path.isdir(boxes_dir):
        raise HamerError(f"boxes_dir '{_name_text(boxes_dir)}' is not a folder", E_IO)
    lock = None
    errors_path = None
    if out_dir is not None:
        out_dir = os.fsdecode(os.fspath(out_dir))
        try:
            os.makedirs(out_dir, exist_ok=True)
            if os.path.samefile(out_dir, input_dir):
                raise HamerError("out_dir must not be the input folder (its outputs would become inputs)", E_ARG)
            lock = os.open(os.path.join(out_dir, ".hamer-batch.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise HamerError(f"cannot use the output folder '{_name_text(out_dir)}': {e.strerror or e}",
                             E_IO) from None
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(lock)
            raise HamerError(f"another hamer batch is using '{_name_text(out_dir)}'", E_IO) from None
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
    _plan_stems(items, input_dir, out_dir, force, render, side_view, save_mesh, vertices)
    old = _read_errors(errors_path) if errors_path else []
    plan, keep = [], set()
    last_dir = None
    for it in items:
        recs = [r for r, _ in old if r["path"] == it.shown]
        same = [r for r in recs if r.get("size") == it.size and r.get("mtime_ns") == it.mtime_ns]
        status, err = "todo", None
        if out_dir is not None and not force:
            if it.done:
                status = "skipped"
            elif not retry_failed and same and _permanent(it, same[-1]["stage"]):
                status, err = "skipped", same[-1]
        if status == "skipped":
            keep.add(it.shown)
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
        reason = _name_text(reason)
        if errfd is not None:
            rec = {"path": it.shown, "stage": stage, "reason": reason, "size": it.size, "mtime_ns": it.mtime_ns}
            os.write(errfd, (json.dumps(rec, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
            os.fsync(errfd)
        return {"stage": stage, "reason": reason}

    det = ds = None
    try:
        params = _lib.PredictParams(rescale=rescale, crop_mode=_CROP_MODES[crop_mode])
        dparams = lib.hamer_detect_default_params()
        dparams.max_hands, dparams.min_score, dparams.tiles = max_hands, min_score, int(bool(tiles))
        for it, status, err in plan:
            out = {"path": it.path, "name": it.rel, "status": status, "result": None, "error": None}
            if status == "skipped":
                if err is not None:
                    out["error"] = {"stage": err["stage"], "reason": err["reason"]}
                if it.clash is None:  # a clashing image's NAME.json is its owner's
                    out["result"] = _load_result(it.stem + ".json")
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
                out["error"] = record(it, "decode", _last_error())
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
    detected = boxes_dir is None

    def fail(stage, reason):
        return {"stage": stage, "reason": reason, "_det": (det, ds)}, None

    boxes, n = None, 0
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
            return fail("boxes", f"{it.boxes}: {_last_error()}")
    jp = lib.hamer_job_default_params()
    jp.predict, jp.detect = params, dparams
    with self._use() as st:
        # The library's photo job (as `hamer run` and `hamer batch` run it) on
        # the image decoded above; freed with the state's use.
        job = lib.hamer_job_new(st, ds if detected else None, ctypes.byref(jp))
        if not job:
            raise _library_error(fallback="cannot create a photo job")
        try:
            inp = _lib.JobInput(rgb=rgb, width=w, height=h, decode_ms=decode_ms, boxes=boxes, n_boxes=n,
                                source=_lib.BOXES_DETECTED if detected else _lib.BOXES_GIVEN)
            rc = lib.hamer_job_run(job, ctypes.byref(inp))
            res = _lib.JobResult()
            lib.hamer_job_get_result(job, ctypes.byref(res))
            if rc < 0:
                return fail("detect" if res.failed_stage == _JOB_STAGE_DETECT else "predict", _last_error())
            return _outputs(lib, job, res, it, vertices, render, side_view, save_mesh, out_dir, detected, fail,
                            (det, ds))
        finally:
            lib.hamer_job_free(job)


_JOB_STAGE_DETECT = 2  # hamer_job_stage HAMER_JOB_STAGE_DETECT


def _outputs(lib, job, res, it, vertices, render, side_view, save_mesh, out_dir, detected, fail, dets_state):
    """NAME.json and the pictures and meshes of a job's result, NAME.json
    last; as _one returns."""
    n, hands = res.n_hands, res.hands
    ptr = lib.hamer_job_result_json(job, int(bool(vertices)))
    if not ptr:
        return fail("predict", _last_error())
    try:
        text = _with_input(it, ctypes.string_at(ptr))
    finally:
        lib.hamer_free(ptr)
    if out_dir is not None:
        try:
            os.makedirs(it.out_dir, exist_ok=True)
            for k, (want, suffix) in enumerate(((render, "_all.png"), (side_view, "_side.png"))):
                if not want:
                    continue
                png, size = _lib.c_uint8_p(), ctypes.c_size_t()
                if lib.hamer_job_render_png(job, k, ctypes.byref(png), ctypes.byref(size)):
                    return fail("render", _last_error())
                try:
                    data = ctypes.string_at(png, size.value)
                finally:
                    lib.hamer_free(png)
                _write_atomic(it.stem + suffix, data)
            for i in range(n if save_mesh else 0):
                if not hands[i].ok:
                    continue
                obj, size = ctypes.c_void_p(), ctypes.c_size_t()
                if lib.hamer_job_hand_obj(job, i, ctypes.byref(obj), ctypes.byref(size)):
                    return fail("write", _last_error())
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
            error = f"{len(bad)} of {n} hands failed; {os.fsdecode(hands[bad[0]].error)}"
    return {"doc": doc, "_det": dets_state}, error
