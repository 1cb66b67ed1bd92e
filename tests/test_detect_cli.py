"""`hamer detect` and `hamer run` without boxes: the built-in detector as
users reach it (public API, CLI), on the annotated photos.

- `hamer detect` scores as shared/images/README.md says on both photos
  (every non-difficult hand, handedness right, no extras), writes a
  document `hamer run --boxes` reads, and a picture;
- `hamer run` without boxes equals `hamer run --boxes <detect's output>`
  hand for hand, bit for bit, and RESULT.json carries each detection;
- a photo without hands: exit 4, an empty list, still written;
- missing models: exit 1, one line naming where it looked, nothing written.
"""

import json
import os

import numpy as np
import pytest
from PIL import Image

from conftest import describe, run_hamer
from detect.common import PHOTOS, annotations, models_dir, score_image, shared_images, skimage_path


def detect(img, out, *extra):
    return run_hamer(["detect", "--image", img, "--output", out, *extra])


@pytest.mark.parametrize("name", PHOTOS)
def test_detect_scores_on_the_photos(tmp_path, name):
    out, pic = tmp_path / "boxes.json", tmp_path / "boxes.png"
    proc = detect(shared_images() / name, out, "--render", pic, "--detector", models_dir())
    assert proc.returncode == 0, describe(proc)
    doc = json.loads(out.read_text())
    ann = annotations()[name]
    assert doc["image"] == {"width": ann["width"], "height": ann["height"]}
    hands = doc["hands"]
    r = score_image([h["bbox"] for h in hands], [h["is_right"] for h in hands], ann["hands"])
    assert r["pass"], r
    for h in hands:
        lm = np.array(h["landmarks"])
        assert lm.shape == (21, 3)
        # The box is the tight box of the landmarks.
        np.testing.assert_allclose(h["bbox"], [*lm[:, :2].min(0), *lm[:, :2].max(0)], atol=1e-3)
        assert 0.5 <= h["score"] <= 1 and 0.5 <= h["presence"] <= 1 and 0 <= h["handedness"] <= 1
        if "source" not in h or h["person"] < 0:  # the landmark model's side (palm pass alone, or
            assert h["is_right"] == (h["handedness"] > 0.5)  # a person's side it contradicted)
        if "source" in h:  # where the body pass found it (and the model agreed): the person's side
            assert h["source"] in ("palm", "body") and h["person"] >= -1
    # The picture is the photo with marks only near the hands.
    src = np.asarray(Image.open(shared_images() / name).convert("RGB")).astype(int)
    got = np.asarray(Image.open(pic).convert("RGB")).astype(int)
    changed = np.any(src != got, -1)
    assert changed.any()
    near = np.zeros_like(changed)
    for h in hands:
        x1, y1, x2, y2 = h["bbox"]
        pad = max(src.shape) / 100 + 4
        near[max(0, int(y1 - pad)):int(y2 + pad) + 1, max(0, int(x1 - pad)):int(x2 + pad) + 1] = True
    assert not (changed & ~near).any()


def test_single_pass_option_misses_the_small_hand(tmp_path):
    """--single-pass is MediaPipe's own pass: it misses the lower hand of
    hamer_example_1 that the tile pass finds (the reason tiles exist)."""
    out = tmp_path / "b.json"
    proc = detect(shared_images() / "hamer_example_1.jpg", out, "--single-pass")
    assert proc.returncode == 0, describe(proc)
    hands = json.loads(out.read_text())["hands"]
    r = score_image([h["bbox"] for h in hands], [h["is_right"] for h in hands],
                    annotations()["hamer_example_1.jpg"]["hands"])
    assert not r["pass"] and r["missed"] and not r["extra"], r
    assert json.loads(out.read_text())["detector"]["passes"] == "full frame"


@pytest.mark.slow
def test_run_without_boxes_equals_run_with_detected_boxes(tmp_path, ckpt):
    model = ckpt("d2h2")
    img = shared_images() / "hamer_example_1.jpg"
    boxes, auto, given = tmp_path / "boxes.json", tmp_path / "auto.json", tmp_path / "given.json"
    assert detect(img, boxes).returncode == 0
    p = run_hamer(["run", "--model", model, "--image", img, "--output", auto, "--vertices"])
    assert p.returncode == 0, describe(p)
    p = run_hamer(["run", "--model", model, "--image", img, "--output", given, "--vertices", "--boxes", boxes])
    assert p.returncode == 0, describe(p)
    a, g, b = (json.loads(f.read_text()) for f in (auto, given, boxes))
    assert a["boxes"] == "detected" and g["boxes"] == "given"
    assert "detect" in a["timings_ms"] and "detect" not in g["timings_ms"]
    assert len(a["hands"]) == len(g["hands"]) == len(b["hands"]) >= 3
    for ha, hg, hb in zip(a["hands"], g["hands"], b["hands"]):
        det = ha.pop("detection")
        assert "detection" not in hg
        assert ha == hg  # the same hand, bit for bit
        assert ha["bbox"] == hb["bbox"] and ha["is_right"] == hb["is_right"]
        assert det["landmarks"] == hb["landmarks"] and det["score"] == hb["score"]
    # RESULT.json itself is a boxes document too.
    again = tmp_path / "again.json"
    p = run_hamer(["run", "--model", model, "--image", img, "--output", again, "--vertices", "--boxes", given])
    assert p.returncode == 0 and json.loads(again.read_text())["hands"] == g["hands"], describe(p)


def test_no_hand_photo(tmp_path, ckpt):
    img = skimage_path("coffee.png")
    out = tmp_path / "b.json"
    proc = detect(img, out)
    assert proc.returncode == 4 and "no hand found" in proc.stderr, describe(proc)
    assert json.loads(out.read_text())["hands"] == []
    res = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d1h1"), "--image", img, "--output", res])
    assert proc.returncode == 4, describe(proc)
    assert json.loads(res.read_text())["hands"] == []


def test_missing_models_fail_cleanly(tmp_path, ckpt):
    empty = tmp_path / "no-models"
    empty.mkdir()
    for args in (["detect", "--image", shared_images() / "hamer_example_5.jpg", "--output", tmp_path / "o.json"],
                 ["run", "--model", ckpt("d1h1"), "--image", shared_images() / "hamer_example_5.jpg",
                  "--output", tmp_path / "o.json"]):
        proc = run_hamer([*args, "--detector", empty])
        lines = proc.stderr.splitlines()
        assert proc.returncode == 1 and len(lines) == 1, describe(proc)
        assert str(empty) in lines[0] and "get_detector.sh" in lines[0], describe(proc)
        assert not (tmp_path / "o.json").exists()
    # The search, without --detector, names every place it looked.
    env = dict(os.environ, HAMER_DETECTOR_DIR=str(empty), XDG_DATA_HOME=str(tmp_path / "xdg"))
    proc = run_hamer(["detect", "--image", shared_images() / "hamer_example_5.jpg", "--output", tmp_path / "o.json"],
                     env=env)
    assert proc.returncode == 1 and str(empty) in proc.stderr and "xdg" in proc.stderr, describe(proc)


def test_fifo_model_refused_at_once(tmp_path):
    """A FIFO in place of a detector model (or of the body and proposal
    models) is refused as not a regular file, at once: the loaders open
    without blocking; a FIFO nobody writes used to hang the load."""
    import shutil
    import time
    src = models_dir()
    for name in ("palm_detection_full.tflite", "pose_landmark_full.tflite", "handtrack.json"):
        d = tmp_path / name
        shutil.copytree(src, d)
        (d / name).unlink()
        os.mkfifo(d / name)
        t0 = time.monotonic()
        proc = run_hamer(["detect", "--image", shared_images() / "hamer_example_5.jpg", "--output", tmp_path / "o.json",
                          "--detector", d, "--body", "on", "--proposals", "on"])
        lines = proc.stderr.splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and time.monotonic() - t0 < 20, describe(proc)
        assert name in lines[0], describe(proc)
        assert not (tmp_path / "o.json").exists()


@pytest.mark.parametrize("args,needle", [
    (["--max-hands", "0"], "--max-hands"), (["--max-hands", "65"], "--max-hands"),
    (["--min-score", "1"], "--min-score"), (["--min-score", "0x1"], "--min-score"),
    (["--detector"], "needs a value"), (["--body", "yes"], "--body"), (["--body"], "needs a value"),
])
def test_detect_usage_errors(tmp_path, args, needle):
    out = tmp_path / "o.json"
    proc = detect(shared_images() / "hamer_example_5.jpg", out, *args)
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.splitlines()) == 1, describe(proc)
    assert not out.exists()


def test_body_option(tmp_path):
    """--body: the detector's "body" line says what ran; the body pass's
    hands carry source and person; with the hand models alone, auto is the
    palm pass (said on stderr and in the document) and on fails naming
    scripts/get_detector.sh."""
    img = shared_images() / "hamer_example_5.jpg"
    docs = {}
    for mode in ("auto", "on", "off"):
        out = tmp_path / f"{mode}.json"
        proc = detect(img, out, "--body", mode, "--single-pass")
        assert proc.returncode == 0, describe(proc)
        docs[mode] = json.loads(out.read_text())
    assert docs["auto"]["detector"]["body"] == "auto: off (single pass)"
    assert docs["on"]["detector"]["body"] == "on" and docs["off"]["detector"]["body"] == "off (not loaded)"
    assert all("source" not in h for h in docs["off"]["hands"] + docs["auto"]["hands"])
    assert [h["bbox"] for h in docs["on"]["hands"]] == [h["bbox"] for h in docs["off"]["hands"]]
    assert sorted(h["source"] + str(h["person"]) for h in docs["on"]["hands"]) == ["palm0", "palm0"]
    # the annotated sides: the body side agrees on this photo
    assert [h["is_right"] for h in docs["on"]["hands"]] == [h["is_right"] for h in docs["off"]["hands"]]
    hands_only = tmp_path / "hands_only"
    hands_only.mkdir()
    for f in ("palm_detection_full.tflite", "hand_landmark_full.tflite"):
        (hands_only / f).symlink_to(models_dir() / f)
    out = tmp_path / "h.json"
    proc = detect(img, out, "--detector", hands_only)
    assert proc.returncode == 0 and "palm pass only" in proc.stderr and "get_detector.sh" in proc.stderr, \
        describe(proc)
    assert json.loads(out.read_text())["detector"]["body"].startswith("off: models not installed")
    proc = detect(img, tmp_path / "h2.json", "--detector", hands_only, "--body", "on")
    assert proc.returncode == 1 and "pose_detection.tflite" in proc.stderr and "get_detector.sh" in proc.stderr, \
        describe(proc)


def test_proposals_option(tmp_path):
    """--proposals: the detector's "proposals" line says what ran; on the
    egocentric cooking photo (no palm or body hand) auto runs the pass and
    its verified proposal is the one hand ("source": "proposal"), off finds
    none; with the MediaPipe models alone auto says on stderr and in the
    document that the pass does not run, and on fails naming
    scripts/get_detector.sh."""
    img = shared_images() / "wilor_cooking.jpg"
    docs = {}
    for mode in ("auto", "on", "off"):
        out = tmp_path / f"{mode}.json"
        proc = detect(img, out, "--proposals", mode)
        assert proc.returncode in (0, 4), describe(proc)
        docs[mode] = json.loads(out.read_text())
    assert docs["auto"]["detector"]["proposals"].startswith("auto: with the tiles")
    assert docs["on"]["detector"]["proposals"] == "on" and docs["off"]["detector"]["proposals"].startswith("off")
    assert [h["source"] for h in docs["auto"]["hands"]] == ["proposal"] and docs["auto"]["hands"] == docs["on"]["hands"]
    assert docs["off"]["hands"] == []
    mp_only = tmp_path / "mediapipe_only"
    mp_only.mkdir()
    for f in models_dir().iterdir():
        if f.suffix in (".tflite", ".txt"):
            (mp_only / f.name).symlink_to(f)
    out = tmp_path / "m.json"
    proc = detect(img, out, "--detector", mp_only)
    assert proc.returncode == 4 and "proposal pass" in proc.stderr and "get_detector.sh" in proc.stderr, describe(proc)
    assert json.loads(out.read_text())["detector"]["proposals"].startswith("off: model not installed")
    proc = detect(img, tmp_path / "m2.json", "--detector", mp_only, "--proposals", "on")
    assert proc.returncode == 1 and "handtrack.json" in proc.stderr and "get_detector.sh" in proc.stderr, describe(proc)


def test_no_impossible_box(tmp_path):
    """camera.png: the body keypoints' box of the cameraman's hidden hand
    (8 x 8 px in the background, 0.05 of his shoulder width) is not
    returned; the box at his gloved hand on the camera is."""
    out = tmp_path / "c.json"
    proc = detect(skimage_path("camera.png"), out)
    assert proc.returncode == 0, describe(proc)
    hands = json.loads(out.read_text())["hands"]
    assert len(hands) == 1 and hands[0]["source"] == "body-keypoints", hands
    b = hands[0]["bbox"]
    assert min(b[2] - b[0], b[3] - b[1]) > 100 and b[0] < 300 < b[2], b


BASKETBALL = "/usr/share/doc/opencv-doc/examples/data/basketball1.png"


def test_body_keypoint_boxes(tmp_path, ckpt):
    """--body-boxes on|off (default on): basketball1's hand the hand
    landmark model rejects comes as a box from the body keypoints
    ("source": "body-keypoints", "landmarks": null, the person's side, its
    score the wrist's visibility), drawn as a box alone; `hamer run`
    regresses it like any box; off leaves the other hands as they were;
    a bad value is a usage error (exit 2), and video refuses the option."""
    if not os.path.exists(BASKETBALL):
        pytest.fail(f"{BASKETBALL} missing: apt-get install opencv-doc (scripts/deps.sh)")
    on, off, pic = tmp_path / "on.json", tmp_path / "off.json", tmp_path / "on.png"
    p = detect(BASKETBALL, on, "--render", pic)
    assert p.returncode == 0, describe(p)
    p = detect(BASKETBALL, off, "--body-boxes", "off")
    assert p.returncode == 0, describe(p)
    a, b = json.loads(on.read_text()), json.loads(off.read_text())
    kp = [h for h in a["hands"] if h.get("source") == "body-keypoints"]
    assert len(kp) == 1 and kp[0]["landmarks"] is None and kp[0]["person"] == 0, a["hands"]
    assert 0.5 <= kp[0]["score"] <= 1 and kp[0]["is_right"] is False, kp[0]
    assert [h for h in a["hands"] if h.get("source") != "body-keypoints"] == b["hands"] and b["hands"]
    # the picture: the keypoint box's outline is drawn, no skeleton inside it
    src = np.asarray(Image.open(BASKETBALL).convert("RGB")).astype(int)
    got = np.asarray(Image.open(pic).convert("RGB")).astype(int)
    x1, y1, x2, y2 = (int(round(v)) for v in kp[0]["bbox"])
    assert np.any(src[y1 - 1:y1 + 2, x1:x2] != got[y1 - 1:y1 + 2, x1:x2])
    result = tmp_path / "result.json"
    p = run_hamer(["run", "--model", ckpt("d2h2"), "--image", BASKETBALL, "--output", result])
    assert p.returncode == 0, describe(p)
    hands = json.loads(result.read_text())["hands"]
    assert [h["bbox"] for h in hands] == [h["bbox"] for h in a["hands"]]
    assert [h["detection"].get("source") for h in hands] == [h.get("source") for h in a["hands"]]
    assert all(len(h["keypoints_3d"]) == 21 for h in hands)
    p = detect(BASKETBALL, tmp_path / "bad.json", "--body-boxes", "maybe")
    assert p.returncode == 2 and "--body-boxes must be on or off" in p.stderr, describe(p)
    p = run_hamer(["video", "--body-boxes", "on"])
    assert p.returncode == 2 and "--body-boxes is for photos" in p.stderr, describe(p)
