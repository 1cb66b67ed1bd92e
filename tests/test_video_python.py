"""The Python binding's video side, and through hamer.read_video the
library's decoded pixels:

- Model.video(path) and Model.track(frames) give `hamer video`'s records
  bit for bit;
- read_video: lossless RGB frames exactly, variable frame rate times as
  ffprobe reports them, rotation metadata applied as the ffmpeg CLI
  applies it, stride, a damaged file's frames then the error;
- the ctypes structures match the header.

Sanitizer builds: as tests/test_python.py, everything runs in a python3
with the ASan runtime preloaded (test_binding_under_sanitizer).
"""

import ctypes
import os
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import video_fixtures as V
from conftest import BUILD, HAMER_LIB, REPO, SANITIZE, TIMEOUT_SMALL, checkpoint_path, describe, run_hamer
from detect.common import models_dir

sys.path.insert(0, str(REPO / "python"))
os.environ["HAMER_LIB"] = str(HAMER_LIB)
import hamer  # noqa: E402
from hamer import _lib  # noqa: E402

IN_ASAN_CHILD = os.environ.get("HAMER_PY_ASAN_CHILD") == "1"
DELEGATE_TO_ASAN_CHILD = SANITIZE and not IN_ASAN_CHILD


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    d = tmp_path_factory.mktemp("clip")
    frames = V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 4, (240, 320))
    return frames, V.encode(frames, d / "clip.mkv", codec="png")


def same(a, b):
    """A Python record equals the CLI's JSON one: arrays as the lists they came from."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return np.array_equal(a, np.array(b, a.dtype))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


@pytest.mark.slow
def test_video_and_track_equal_the_cli(tmp_path, ckpt, clip):
    frames, vid = clip
    model = ckpt("d2h2")
    out = tmp_path / "cli.jsonl"
    proc = run_hamer(["video", "--model", model, "--video", vid, "--output", out, "--detector", models_dir()])
    assert proc.returncode == 0, describe(proc)
    _, cli, _ = V.read_lines(out)
    with hamer.Model(str(model)) as m:
        by_path = list(m.video(vid, detector=models_dir()))
        by_frames = list(m.track(frames, times=[r["time_s"] for r in cli], detector=models_dir()))
    assert len(by_path) == len(by_frames) == len(cli) == 4
    for a, b, c in zip(by_path, by_frames, cli):
        for rec in (a, b):
            assert rec["frame"] == c["frame"] and rec["time_s"] == c["time_s"]
            assert len(rec["hands"]) == len(c["hands"]) == 2
            for h, ref in zip(rec["hands"], c["hands"]):
                assert same(h, ref)
    with pytest.raises(hamer.HamerError, match="smooth"):
        list(hamer.Model(str(model)).track(frames, smooth="kalman"))


def test_video_animation_files_equal_the_cli(tmp_path, ckpt, clip):
    """Model.video(..., glb=, bvh=, focal=) writes the files `hamer video
    --glb --bvh --focal` writes, byte for byte (keys on the clip's frames);
    Model.track (given the frames' times) writes the same motion; a bad shape
    is refused at the call."""
    frames, vid = clip
    model = ckpt("d2h2")
    glb, bvh = tmp_path / "cli.glb", tmp_path / "cli.bvh"
    proc = run_hamer(["video", "--model", model, "--video", vid, "--output", tmp_path / "cli.jsonl", "--detector",
                      models_dir(), "--glb", glb, "--bvh", bvh, "--focal", "500"])
    assert proc.returncode == 0, describe(proc)
    pg, pb, tg = tmp_path / "py.glb", tmp_path / "py.bvh", tmp_path / "track.bvh"
    with hamer.Model(str(model)) as m:
        recs = list(m.video(vid, detector=models_dir(), glb=pg, bvh=pb, focal=500))
        assert recs[0]["hands"][0]["camera"]["source"] == "given"
        times = [r["time_s"] for r in recs]  # the pictures' own times: the same smoothing
        list(m.track(frames, times=times, detector=models_dir(), bvh=tg, focal=500))
        with pytest.raises(hamer.HamerArgumentError, match="shape"):
            m.track(frames, bvh=tg, shape="mean")
    assert pg.read_bytes() == glb.read_bytes() and pb.read_text() == bvh.read_text()
    assert tg.read_text().splitlines()[-4:] == bvh.read_text().splitlines()[-4:]  # the same motion lines


def test_read_video(tmp_path, clip):
    frames, vid = clip
    got = list(hamer.read_video(vid))
    assert [i for i, _, _ in got] == [0, 1, 2, 3]
    assert all(np.array_equal(rgb, f) for (_, _, rgb), f in zip(got, frames))
    assert [i for i, _, _ in hamer.read_video(vid, stride=2)] == [0, 2]
    with pytest.raises(hamer.HamerIOError, match="missing.mkv"):
        list(hamer.read_video(tmp_path / "missing.mkv"))
    # damage: the frames before it, then the error
    full = V.encode(V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 40, (240, 320)), tmp_path / "long.mkv")
    cut = tmp_path / "cut.mkv"
    cut.write_bytes(full.read_bytes()[:int(full.stat().st_size * 0.6)])
    seen = []
    with pytest.raises(hamer.HamerFormatError, match="cut.mkv"):
        for i, _, _ in hamer.read_video(cut):
            seen.append(i)
    assert 0 < len(seen) < 40


def test_read_video_variable_frame_rate(tmp_path):
    frames = V.pan_zoom(V.photo("hamer_example_5.jpg", 320), 10, (240, 320))
    raw = V.encode(frames, tmp_path / "cfr.mkv", codec="png")
    vid = tmp_path / "vfr.mkv"
    subprocess.run([V.FFMPEG, "-v", "error", "-y", "-i", raw, "-vf", "setpts='0.04*pow(N,1.5)/TB'",
                    "-fps_mode", "passthrough", "-enc_time_base", "1:1000", "-c:v", "png", vid], check=True,
                   timeout=120)
    got = list(hamer.read_video(vid))
    want = V.probe_frames(vid)
    np.testing.assert_allclose([t for _, t, _ in got], np.array(want) - want[0], atol=1e-6)
    for (_, _, rgb), src in zip(got, frames):
        assert np.array_equal(rgb, src)  # lossless RGB in, the same pixels out


def test_read_video_rotation(tmp_path):
    e5 = V.photo("hamer_example_5.jpg", 320)
    rot = V.tag_rotation(V.encode(V.still(e5, 3), tmp_path / "base.mp4"), tmp_path / "rot.mp4")
    ours = np.array([rgb for _, _, rgb in hamer.read_video(rot)])
    cli = V.decode_frames_rotated(rot)  # the ffmpeg CLI applies the rotation itself
    assert ours.shape == cli.shape == (3, 320, 480, 3)
    assert np.abs(ours.astype(int) - cli).mean() < 1.0
    # turning a frame back gives the stored picture
    back = [np.rot90(ours[0], k).astype(int) for k in (1, 3)]
    assert min(np.abs(b - e5).mean() for b in back) < 3.0


def test_close_ends_open_generators(ckpt, clip):
    """Issue 21: a track() / video() generator held an inference state of
    the model between frames, so close() (leaving the with block) waited
    for it forever. Now close() returns at once and the generators' next
    frame raises HamerError."""
    frames, vid = clip
    model = str(ckpt("d2h2"))
    bound = 600 if SANITIZE else 120
    done = []

    def with_block():
        with hamer.Model(model) as m:
            g = m.track(frames, detector=models_dir())
            next(g)
        done.append(g)

    th = threading.Thread(target=with_block, daemon=True)
    th.start()
    th.join(bound)
    assert done, "leaving the with block waited for the open track() generator"
    with pytest.raises(hamer.HamerError, match="closed"):
        next(done[0])
    m = hamer.Model(model)
    gens = [m.track(frames, detector=models_dir()), m.video(vid, detector=models_dir())]
    assert [len(next(g)["hands"]) for g in gens] == [2, 2]
    closer = threading.Thread(target=m.close, daemon=True)
    closer.start()
    closer.join(bound)
    assert not closer.is_alive() and m.closed, "close() waited for open generators"
    for g in gens:
        with pytest.raises(hamer.HamerError, match="closed"):
            next(g)
    with pytest.raises(hamer.HamerError, match="closed"):  # a new one fails at the call
        m.track(frames)


def test_integers_out_of_c_range_are_refused(ckpt, clip):
    """Issue 21: ctypes passes the low 32 bits of a Python int, so
    read_video(stride=2**32+3) ran with stride 3 and 2**40 reported
    "stride 0". Every integer is checked where the binding hands it over,
    at the call (a HamerArgumentError naming it), with a net under the
    public functions: integer structure fields and integer arguments of
    every bound function refuse values out of their C range."""
    frames, vid = clip
    for stride in (2**32 + 3, 2**40, -2**31 - 1, np.int64(2**32 + 3)):
        with pytest.raises(hamer.HamerArgumentError, match=r"stride = -?\d+ does not fit the C int"):
            hamer.read_video(vid, stride=stride)
    for stride in ("2", 2.0, True, None):
        with pytest.raises(hamer.HamerArgumentError, match="stride must be an integer"):
            hamer.read_video(vid, stride=stride)
    for kw in ({"start": "0"}, {"duration": 10**400}):
        with pytest.raises(hamer.HamerArgumentError, match=next(iter(kw)) + " must be a number"):
            hamer.read_video(vid, **kw)
    assert [i for i, _, _ in hamer.read_video(vid, stride=np.int32(3))] == [0, 3]
    with hamer.Model(str(ckpt("d2h2"))) as m:
        for kw, name in [({"max_hands": 2**32 + 2}, "max_hands"), ({"fps": 0}, "fps"), ({"beta": "1"}, "beta"),
                         ({"rescale": 2**1100}, "rescale")]:
            with pytest.raises(hamer.HamerArgumentError, match=name):
                m.track(frames, detector=models_dir(), **kw)
        with pytest.raises(hamer.HamerArgumentError, match="stride"):
            m.video(vid, stride=2**32 + 1)
    with pytest.raises(ValueError, match=r"VideoParams\.stride = 4294967299 is outside"):
        _lib.VideoParams().stride = 2**32 + 3
    with pytest.raises(ValueError, match=r"TrackerParams\.max_hands"):
        _lib.TrackerParams(max_hands=2**31)
    with pytest.raises(ValueError, match=r"VideoFrame\.index"):
        _lib.VideoFrame(index=2**63)
    with pytest.raises(ctypes.ArgumentError, match="outside"):
        _lib.load().hamer_strerror(2**32 - 1)
    with pytest.raises(ctypes.ArgumentError, match="outside"):
        _lib.load().hamer_tracker_frame_json(None, 2**64, 0, -1.0)


def test_video_params_one_check_for_the_cli_and_python(tmp_path, ckpt, clip):
    """Issue 21: Model.video(duration=-5) was accepted where `hamer video
    --duration -5` was refused. Both now use the library's
    hamer_video_check_params: the same refusals, word for word, Python's
    at the call; duration 0 means to the end in both."""
    frames, vid = clip
    with hamer.Model(str(ckpt("d2h2"))) as m:
        for opt, kw, value in [("--duration", "duration", -5), ("--duration", "duration", 2e9),
                               ("--start", "start", -1), ("--start", "start", 1e300), ("--stride", "stride", 0),
                               ("--stride", "stride", 1000001)]:
            proc = run_hamer(["video", "--video", vid, "--output", tmp_path / "x.jsonl", opt, str(value)])
            assert proc.returncode == 2, describe(proc)
            with pytest.raises(hamer.HamerArgumentError) as e:
                hamer.read_video(vid, **{kw: value})
            assert proc.stderr == f"hamer: {e.value} (option {opt})\n"
            assert kw in str(e.value) and (f"{value:g}" if isinstance(value, float) else str(value)) in str(e.value)
            with pytest.raises(hamer.HamerArgumentError) as e2:
                m.video(vid, detector=models_dir(), **{kw: value})
            assert str(e2.value) == str(e.value)
    assert not (tmp_path / "x.jsonl").exists()
    assert len(list(hamer.read_video(vid, duration=0))) == 4
    proc = run_hamer(["video", "--video", vid, "--output", tmp_path / "all.jsonl", "--detector", models_dir(),
                      "--duration", "0"])
    assert proc.returncode == 0, describe(proc)
    assert len(V.read_lines(tmp_path / "all.jsonl")[1]) == 4


PROBE = r"""
#include <stddef.h>
#include <stdio.h>
#include "hamer.h"
#define F(T, f) printf("%s.%s %zu\n", #T, #f, offsetof(T, f));
#define S(T) printf("%s %zu\n", #T, sizeof(T));
int main(void) {
    S(hamer_detector_params) F(hamer_detector_params, lite)
    S(hamer_tracker_params) F(hamer_tracker_params, tiles) F(hamer_tracker_params, cut_threshold)
    F(hamer_tracker_params, smooth) F(hamer_tracker_params, min_cutoff) F(hamer_tracker_params, d_cutoff)
    F(hamer_tracker_params, betas_min) F(hamer_tracker_params, body)
    S(hamer_video_params) F(hamer_video_params, stride) F(hamer_video_params, threads)
    S(hamer_video_info) F(hamer_video_info, fps) F(hamer_video_info, frames) F(hamer_video_info, format)
    S(hamer_video_frame) F(hamer_video_frame, index) F(hamer_video_frame, time_s) F(hamer_video_frame, decode_ms)
    return 0;
}
"""


def test_struct_layouts(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to check the structure layouts with")
    src = tmp_path / "probe.c"
    src.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    subprocess.run([cc, "-std=c11", "-I", str(REPO / "include"), "-I", str(BUILD / "include"), "-o",
                    str(tmp_path / "probe"), str(src)], check=True, env=env, timeout=120)
    out = subprocess.run([str(tmp_path / "probe")], check=True, stdout=subprocess.PIPE, text=True, env=env,
                         timeout=60).stdout
    structs = {"hamer_detector_params": _lib.DetectorParams, "hamer_tracker_params": _lib.TrackerParams,
               "hamer_video_params": _lib.VideoParams, "hamer_video_info": _lib.VideoInfo,
               "hamer_video_frame": _lib.VideoFrame}
    for line in out.splitlines():
        name, value = line.split()
        if "." in name:
            t, f = name.split(".")
            got = getattr(structs[t], f).offset
        else:
            got = ctypes.sizeof(structs[name])
        assert got == int(value), f"{name}: ctypes {got}, C {value}"
    d = _lib.load().hamer_tracker_default_params()
    assert (d.max_hands, d.redetect_every, d.smooth, d.min_cutoff, d.beta, d.d_cutoff) == (2, 10, 1, 1.0, 1.0, 1.0)


@pytest.mark.skipif(not DELEGATE_TO_ASAN_CHILD, reason="only in sanitizer builds (HAMER_SANITIZE=1)")
def test_binding_under_sanitizer(hamer_bin):
    """Run this file in a python3 with the ASan runtime preloaded."""
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a sanitizer build needs the compiler's libasan.so"
    libasan = subprocess.run([cc, "-print-file-name=libasan.so"], stdout=subprocess.PIPE, text=True,
                             check=True).stdout.strip()
    assert os.path.isabs(libasan) and os.path.exists(libasan), f"libasan.so not found ({libasan!r})"
    checkpoint_path("d2h2")  # generated here: the child only reads it
    env = dict(os.environ, LD_PRELOAD=libasan, ASAN_OPTIONS="detect_leaks=0", HAMER_PY_ASAN_CHILD="1",
               HAMER_BUILD=str(BUILD), HAMER_SANITIZE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", __file__],
                          cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=3 * TIMEOUT_SMALL)
    assert proc.returncode == 0, f"video binding tests under ASan failed (exit {proc.returncode}):\n{proc.stdout[-12000:]}"


if DELEGATE_TO_ASAN_CHILD:
    for _name, _fn in list(globals().items()):
        if _name.startswith("test_") and _name != "test_binding_under_sanitizer" and callable(_fn):
            globals()[_name] = pytest.mark.skip(reason="runs in test_binding_under_sanitizer's ASan python")(_fn)
