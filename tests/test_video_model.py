"""`hamer video` with a model (the small d2h2 / d1h1 fixtures): what is
regressed, how it is smoothed, the overlay video, memory.

- smoothing off: every frame's hands equal `hamer run --boxes <the boxes
  the tracker reports>` on that frame, bit for bit;
- smoothing on: "raw" equals the unsmoothed run bit for bit; the smoothed
  values are the documented One Euro filter of the raw ones (recomputed
  here; the rotations' on the rotation group), lie within the range of the
  track's raw values, rotations stay rotations, betas are the running
  median; on a still video the smoothed
  keypoints jitter far less than the raw ones;
- --render / --render-dir: frame count, size and timestamps of the input,
  each PNG equal to `hamer run --render` (meshes, boxes, keypoints), each
  video frame within codec
  error of it; image names and patterns refused before any work; a failed
  render leaves an existing overlay as it was and writes the lines;
- peak RSS after 100 and after 1000 frames of a synthetic video.
"""

import json

import numpy as np
import pytest
from PIL import Image

import video_fixtures as V
from conftest import SANITIZE, describe, run_hamer
from detect.common import models_dir

METRES = 0.1  # include/hamer.h: metres are divided by 0.1 m before beta


@pytest.fixture(scope="module")
def e5():
    return V.photo("hamer_example_5.jpg", 320)


def video(tmp_path, model, vid, *extra, name="out.jsonl"):
    out = tmp_path / name
    proc = run_hamer(["video", "--model", model, "--video", vid, "--output", out, "--detector", models_dir(), *extra])
    assert proc.returncode == 0, describe(proc)
    return V.read_lines(out)


def run_frame(tmp_path, model, frame, hands, k, *extra):
    """`hamer run` on one frame with the tracker's boxes: its RESULT.json."""
    png, boxes, out = tmp_path / f"frame{k}.png", tmp_path / f"boxes{k}.json", tmp_path / f"result{k}.json"
    Image.fromarray(frame).save(png)
    boxes.write_text(json.dumps([{"bbox": h["bbox"], "is_right": h["is_right"]} for h in hands]))
    proc = run_hamer(["run", "--model", model, "--image", png, "--boxes", boxes, "--output", out, *extra])
    assert proc.returncode == 0, describe(proc)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_unsmoothed_equals_run_with_the_trackers_boxes(tmp_path, ckpt, e5):
    model = ckpt("d2h2")
    frames_in = V.pan_zoom(e5, 5, (240, 320))
    vid = V.encode(frames_in, tmp_path / "pan.mkv", codec="png")  # lossless: run sees the same pixels
    _, frames, _ = video(tmp_path, model, vid, "--smooth", "none", "--vertices")
    assert len(frames) == 5
    for k, f in enumerate(frames):
        assert len(f["hands"]) == 2 and all("raw" not in h for h in f["hands"])
        want = run_frame(tmp_path, model, frames_in[k], f["hands"], k, "--vertices")["hands"]
        for got, ref in zip(f["hands"], want):
            for key, value in ref.items():
                assert got[key] == value, (k, key)


def one_euro(xs, ts, scales, min_cutoff=1.0, beta=1.0, d_cutoff=1.0):
    """include/hamer.h's One Euro filter, in float64, per column of xs."""
    def alpha(fc, dt):
        return 1.0 / (1.0 + 1.0 / (2 * np.pi * fc * dt))
    out = [xs[0].astype(np.float64)]
    x, dx = xs[0].astype(np.float64), np.zeros(xs.shape[1])
    for i in range(1, len(xs)):
        dt = ts[i] - ts[i - 1]
        d = (xs[i] - x) / dt
        dx = dx + alpha(d_cutoff, dt) * (d - dx)
        fc = min_cutoff + beta * np.abs(dx) / scales[i]
        x = x + alpha(fc, dt) * (xs[i] - x)
        out.append(x.copy())
    return np.array(out)


def _qmul(a, b):
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def _quat(R):
    """Unit quaternion of R: the eigenvector of Bar-Itzhack's matrix."""
    (xx, xy, xz), (yx, yy, yz), (zx, zy, zz) = R
    K = np.array([[xx - yy - zz, yx + xy, zx + xz, zy - yz], [yx + xy, yy - xx - zz, zy + yz, xz - zx],
                  [zx + xz, zy + yz, zz - xx - yy, yx - xy], [zy - yz, xz - zx, yx - xy, xx + yy + zz]]) / 3
    w, v = np.linalg.eigh(K)
    x, y, z, q0 = v[:, np.argmax(w)]
    return np.array([q0, x, y, z])


def _rot(q):
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def one_euro_rot(Rs, ts, min_cutoff=1.0, beta=1.0, d_cutoff=1.0):
    """include/hamer.h's One Euro filter on the rotation group, in float64:
    d = log(qs^-1 q), the angular velocity d / dt filtered, the cutoff from
    its magnitude (rad/s), qs <- qs exp(a d)."""
    def alpha(fc, dt):
        return 1.0 / (1.0 + 1.0 / (2 * np.pi * fc * dt))
    qs, ws, out = _quat(Rs[0]), np.zeros(3), [np.array(Rs[0], np.float64)]
    for i in range(1, len(Rs)):
        dt = ts[i] - ts[i - 1]
        r = _qmul(qs * [1, -1, -1, -1], _quat(Rs[i]))
        r = r if r[0] >= 0 else -r
        s = np.linalg.norm(r[1:])
        d = r[1:] / s * 2 * np.arctan2(s, r[0]) if s > 1e-12 else 2 * r[1:]
        ws = ws + alpha(d_cutoff, dt) * (d / dt - ws)
        step = alpha(min_cutoff + beta * np.linalg.norm(ws), dt) * d
        th = np.linalg.norm(step)
        e = np.concatenate([[np.cos(th / 2)], step / th * np.sin(th / 2)]) if th > 0 else np.array([1.0, 0, 0, 0])
        qs = _qmul(qs, e)
        qs /= np.linalg.norm(qs)
        out.append(_rot(qs))
    return out


def geodesic(a, b):
    c = (np.trace(a.T @ b) - 1) / 2
    return float(np.arccos(np.clip(c, -1, 1)))


@pytest.mark.slow
@pytest.mark.accuracy  # the smoother's C path runs under ASan in test_memory_flat_over_a_long_video and
# test_video_python.py::test_video_and_track_equal_the_cli (smoothing on); this compares its numbers
def test_smoothing_is_the_documented_filter(tmp_path, ckpt, e5):
    model = ckpt("d2h2")
    vid = V.encode(V.noisy_still(e5, 20), tmp_path / "still.mp4")
    _, frames, _ = video(tmp_path, model, vid)
    _, plain, _ = video(tmp_path, model, vid, "--smooth", "none", name="plain.jsonl")
    for f, g in zip(frames, plain):  # tracking does not depend on smoothing
        assert [h["bbox"] for h in f["hands"]] == [h["bbox"] for h in g["hands"]]
        for h, r in zip(f["hands"], g["hands"]):
            for key, value in h["raw"].items():
                assert r[key] == value, key  # "raw" is the unsmoothed result
    jitter = {}
    for tid in (0, 1):
        hs = [h for f in frames for h in f["hands"] if h["track_id"] == tid]
        ts = np.array([f["time_s"] for f in frames for h in f["hands"] if h["track_id"] == tid])
        assert len(hs) == 20
        sizes = np.array([h["crop"]["size"] for h in hs])
        for key, scale in (("cam_t_full", None), ("keypoints_3d", None), ("keypoints_2d", sizes)):
            raw = np.array([np.ravel(h["raw"][key]) for h in hs], np.float64)
            sm = np.array([np.ravel(h[key]) for h in hs], np.float64)
            sc = scale if scale is not None else np.full(len(hs), METRES)
            np.testing.assert_allclose(sm, one_euro(raw, ts, sc), rtol=2e-6, atol=1e-6 * np.abs(raw).max())
            # the documented bound: within the range of the track's raw values so far
            for i in range(len(hs)):
                lo, hi = raw[:i + 1].min(0), raw[:i + 1].max(0)
                slack = 1e-6 * np.maximum(np.abs(lo), np.abs(hi)) + 1e-9
                assert np.all(sm[i] >= lo - slack) and np.all(sm[i] <= hi + slack), (key, i)
            if key == "keypoints_2d":  # frame-to-frame movement of a still hand, px RMS, once settled
                jitter[tid] = tuple(float(np.sqrt((np.diff(x[6:], axis=0) ** 2).mean())) for x in (raw, sm))
        for j in range(16):  # the rotations: the filter on the rotation group, recomputed
            pick = (lambda h: h["global_orient"]) if j == 0 else (lambda h: h["hand_pose"][j - 1])
            want = one_euro_rot([np.array(pick(h["raw"]), np.float64) for h in hs], ts)
            got = [np.array(pick(h), np.float64) for h in hs]
            assert max(np.abs(g - w).max() for g, w in zip(got, want)) < 2e-5, j
        for i, h in enumerate(hs):  # rotations stay rotations, near the raw ones
            for R, R0 in [(h["global_orient"], h["raw"]["global_orient"])] + list(zip(h["hand_pose"],
                                                                                      h["raw"]["hand_pose"])):
                R, R0 = np.array(R, np.float64), np.array(R0, np.float64)
                assert np.abs(R @ R.T - np.eye(3)).max() < 1e-5 and abs(np.linalg.det(R) - 1) < 1e-5
            past = [np.array(x["raw"]["global_orient"]) for x in hs[:i + 1]]
            cur = np.array(h["raw"]["global_orient"])
            assert geodesic(np.array(h["global_orient"]), cur) <= max(geodesic(p, cur) for p in past) + 1e-4
        betas = np.array([h["raw"]["betas"] for h in hs], np.float32)
        for i, h in enumerate(hs):  # raw for 4 frames, then the median so far (betas_min 5)
            want = betas[i] if i < 4 else np.median(betas[:i + 1].astype(np.float64), axis=0).astype(np.float32)
            np.testing.assert_allclose(h["betas"], want, rtol=1e-6, atol=1e-7)
    for tid, (raw_j, sm_j) in jitter.items():
        print(f"track {tid}: keypoints_2d jitter raw {raw_j:.4f} px, smoothed {sm_j:.4f} px")
        assert sm_j < 0.5 * raw_j, (tid, raw_j, sm_j)


@pytest.mark.slow
def test_overlay_video_and_pngs(tmp_path, ckpt, e5):
    model = ckpt("d2h2")
    frames_in = V.pan_zoom(e5, 6, (240, 320))
    vid = V.encode(frames_in, tmp_path / "in.mkv", codec="png")
    out_mp4, pngs = tmp_path / "overlay.mp4", tmp_path / "pngs"
    # the labels are left out: a given box (run's) has no detector score to show
    head, frames, summary = video(tmp_path, model, vid, "--smooth", "none", "--render", out_mp4, "--render-dir",
                                  pngs, "--draw", "mesh,boxes,keypoints")
    assert head["render"]["codec"] in ("libx264", "mpeg4") and summary["render_codec"] == head["render"]["codec"]
    assert not list(tmp_path.glob("overlay.mp4.part*")) and not list(pngs.glob("*.tmp*"))
    assert V.probe_frames(out_mp4) == pytest.approx(V.probe_frames(vid), abs=1e-3)
    decoded = V.decode_frames(out_mp4)
    assert decoded.shape == (6, 320, 240, 3)
    for k, f in enumerate(frames):
        res = tmp_path / f"ov{k}.png"
        run_frame(tmp_path, model, frames_in[k], f["hands"], k, "--render", res, "--draw", "mesh,boxes,keypoints")
        want = np.asarray(Image.open(res).convert("RGB"))
        got = np.asarray(Image.open(pngs / f"frame_{k:06d}.png").convert("RGB"))
        assert np.array_equal(got, want), k
        assert not np.array_equal(want, frames_in[k])  # meshes were drawn
        err = np.abs(decoded[k].astype(int) - want).mean()
        # 1.5 px lines of saturated colour are the worst case of 4:2:0 chroma
        # (measured 3.1 with the marks, under 3 with meshes alone)
        assert err < 4.0, (k, err)


def listing(d):
    """Every file under d with its bytes."""
    return {str(p.relative_to(d)): (p.read_bytes() if p.is_file() else None) for p in sorted(d.rglob("*"))}


def test_render_refuses_images_and_patterns(tmp_path, ckpt, e5):
    """--render writes one video file through a temporary file (issue 21):
    an image name (FFmpeg's image2 muxer opened the target itself and left
    a raw H.264 frame in it), a frame-number pattern (it wrote
    shot001.png, shot002.png, ... over existing files), a raw stream, a
    playlist or a format that cannot hold the video are refused before the
    model is loaded, exit 2, nothing created or changed."""
    model = ckpt("d2h2")
    vid = V.encode(V.still(e5, 9), tmp_path / "in.mp4")
    work = tmp_path / "work"
    work.mkdir()
    (work / "ov.png").write_text("PRECIOUS\n")
    (work / "shot001.png").write_text("OLD\n")
    before = listing(work)
    for name, why in [("ov.png", "image file name"), ("shot%03d.png", "frame-number pattern"),
                      ("clip%d.mp4", "frame-number pattern"), ("ov.jpg", "image file name"),
                      ("o.h264", "no timestamps"), ("o.m3u8", "files of its own"), ("o.gif", "does not take"),
                      ("o.webm", "cannot hold")]:
        out = work / "o.jsonl"
        proc = run_hamer(["video", "--model", model, "--video", vid, "--duration", "0.3", "--output", out,
                          "--detector", models_dir(), "--render", work / name])
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2, (name, describe(proc))
        assert len(lines) == 1 and "--render" in lines[0] and name in lines[0] and why in lines[0], (name, lines)
        assert listing(work) == before, name
    # refused before the model is loaded: a model that does not exist is not reached
    proc = run_hamer(["video", "--model", tmp_path / "missing.ckpt", "--video", vid, "--output", work / "o.jsonl",
                      "--detector", models_dir(), "--render", work / "ov.png"])
    assert proc.returncode == 2 and "ov.png" in proc.stderr and "missing.ckpt" not in proc.stderr, describe(proc)
    assert listing(work) == before


def test_failed_render_keeps_the_overlay_and_writes_the_lines(tmp_path, ckpt, e5):
    """A frame that cannot be rendered (here: its PNG's name is taken by a
    directory) stops the run, exit 1: an existing overlay video stays as it
    was, no temporary file is left, and the JSON Lines of the frames
    processed are written, their summary and stderr saying what failed."""
    model = ckpt("d2h2")
    vid = V.encode(V.pan_zoom(e5, 5, (240, 320)), tmp_path / "in.mkv", codec="png")
    ov, pngs, out = tmp_path / "ov.mp4", tmp_path / "pngs", tmp_path / "o.jsonl"
    ov.write_text("PRECIOUS\n")
    (pngs / "frame_000002.png").mkdir(parents=True)
    proc = run_hamer(["video", "--model", model, "--video", vid, "--output", out, "--detector", models_dir(),
                      "--smooth", "none", "--render", ov, "--render-dir", pngs])
    assert proc.returncode == 1, describe(proc)
    assert ov.read_text() == "PRECIOUS\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.mkv", "o.jsonl", "ov.mp4", "pngs"]
    assert sorted(p.name for p in pngs.iterdir()) == ["frame_000000.png", "frame_000001.png", "frame_000002.png"]
    _, frames, summary = V.read_lines(out)
    assert [f["frame"] for f in frames] == [0, 1, 2] and summary["frames"] == 3
    assert summary["error"].startswith("rendering frame 2 failed: ") and "frame_000002.png" in summary["error"]
    assert "rendering frame 2 failed" in proc.stderr and f"'{out}' written with the 3 frames" in proc.stderr
    assert "overlay video was not" in proc.stderr


@pytest.mark.skipif(SANITIZE, reason="AddressSanitizer's quarantine makes RSS meaningless; "
                                     "its leak check covers this build")
@pytest.mark.slow
def test_memory_flat_over_a_long_video(tmp_path, ckpt, e5):
    """1000 frames: a hand shown for 10 frames of every 100 (tracking,
    detection, cuts, regression, smoothing, rendering all exercised), grey
    otherwise; peak RSS after 100 frames and after 1000 must agree."""
    model = ckpt("d1h1")
    hand = V.photo("hamer_example_5.jpg", 240)[:, :120]
    grey = np.full_like(hand, 128)
    frames_in = [hand if i % 100 < 10 else grey for i in range(1000)]
    vid = V.encode(frames_in, tmp_path / "long.mp4")
    rss = {}
    for n in (100, 1000):
        _, frames, summary = video(tmp_path, model, vid, "--max-hands", "1", "--render", tmp_path / f"o{n}.mp4",
                                   "--duration", str(n / 30 - 0.01), name=f"long{n}.jsonl")
        assert summary["frames"] == n and summary["hands"] >= n // 10 - 2
        rss[n] = summary["peak_rss_mb"]
    assert rss[1000] - rss[100] < 8.0, rss
