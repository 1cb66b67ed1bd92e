"""Shared helpers of the detector tests (tests/test_detect_*.py).

Environment:
  HAMER_SHARED_IMAGES  the annotated photos (default: <repo>/../shared/images);
                       missing photos fail the tests that need them.
  HAMER_DETECTOR_DIR   the MediaPipe models (else the default install
                       directory; see scripts/get_detector.sh); missing models
                       skip the tests, with the command that installs them.
  HAMER_BUILD          the cmake build directory (default <repo>/build).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import mp_reference as R  # noqa: E402,F401  (re-exported for the tests)
import tflite_runtime  # noqa: E402

from conftest import RUNNER, SANITIZE, require_tool  # noqa: E402
PHOTOS = ('hamer_example_1.jpg', 'hamer_example_5.jpg')


def shared_images():
    d = Path(os.environ.get('HAMER_SHARED_IMAGES') or REPO.parent / 'shared' / 'images')
    if not (d / 'hands.json').exists():
        pytest.fail(f'the annotated photos are missing: no {d}/hands.json (set HAMER_SHARED_IMAGES)')
    return d


def annotations():
    return json.loads((shared_images() / 'hands.json').read_text())['images']


def models_dir(lite=False):
    v = 'lite' if lite else 'full'
    cands = []
    if os.environ.get('HAMER_DETECTOR_DIR'):
        cands.append(Path(os.environ['HAMER_DETECTOR_DIR']))
    xdg = os.environ.get('XDG_DATA_HOME') or os.path.join(os.environ.get('HOME', '/nonexistent'), '.local', 'share')
    cands += [Path(xdg) / 'hamer' / 'detector', Path('/usr/local/share/hamer/detector')]
    for c in cands:
        if (c / f'palm_detection_{v}.tflite').exists() and (c / f'hand_landmark_{v}.tflite').exists():
            return c
    pytest.fail('hand detector models not installed (run scripts/get_detector.sh, or set HAMER_DETECTOR_DIR)')


def palm_model(lite=False):
    return str(models_dir(lite) / f"palm_detection_{'lite' if lite else 'full'}.tflite")


def landmark_model(lite=False):
    return str(models_dir(lite) / f"hand_landmark_{'lite' if lite else 'full'}.tflite")


_RUNTIME = []


def runtime():
    """The real TFLite runtime, one per test process (one node process
    serves all of its inferences)."""
    why = tflite_runtime.unavailable_reason()
    if why:
        pytest.fail(why)
    if not _RUNTIME:
        from conftest import FIXTURE_DIR
        _RUNTIME.append(tflite_runtime.RefRuntime(FIXTURE_DIR / 'tflite-cache'))
    return _RUNTIME[0]


def tool(name):
    return require_tool(name)


def load_rgb(path):
    """uint8 RGB as the C decoder gives it (cv2.imread semantics, EXIF applied)."""
    import cv2
    im = cv2.imread(str(path), cv2.IMREAD_COLOR)
    assert im is not None, path
    return np.ascontiguousarray(im[:, :, ::-1])


def skimage_path(name):
    import skimage.data
    p = Path(skimage.data.__file__).parent / name
    if not p.exists():
        pytest.fail(f'scikit-image sample {name} not found (Debian python3-skimage)')
    return p


def run_detect_tool(image, *args, timeout=600):
    """tool_detect on an image file -> its JSON."""
    r = subprocess.run(RUNNER + [str(tool('tool_detect')), '--models', str(models_dir()), *map(str, args), str(image)],
                       capture_output=True, text=True, timeout=timeout * (4 if SANITIZE else 1))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def score_image(boxes, is_right, hands):
    """The scoring of shared/images/README.md: boxes matched one to one to
    annotated palm points (a box may take a hand whose point it contains),
    the matching with the most non-difficult hands (Kuhn's augmenting paths,
    non-difficult hands first: a hand once matched stays matched). Pass:
    every non-difficult hand matched, known handedness right, no box left
    over (a difficult hand may take one)."""
    def contains(b, p):
        return b[0] <= p[0] <= b[2] and b[1] <= p[1] <= b[3]
    hand_of, box_of = {}, {}

    def augment(j, seen):
        for i, b in enumerate(boxes):
            if i in seen or not contains(b, hands[j]['point']):
                continue
            seen.add(i)
            if i not in hand_of or augment(hand_of[i], seen):
                hand_of[i], box_of[j] = j, i
                return True
        return False
    for j in sorted(range(len(hands)), key=lambda j: hands[j]['difficult']):
        augment(j, set())
    missed = [j for j, h in enumerate(hands) if not h['difficult'] and j not in box_of]
    extra = [i for i in range(len(boxes)) if i not in hand_of]
    wrong = [j for j, i in box_of.items() if hands[j]['is_right'] is not None and bool(is_right[i]) != hands[j]['is_right']]
    return {'pass': not missed and not extra and not wrong, 'matched': sorted(box_of), 'missed': missed,
            'extra': extra, 'wrong_hand': wrong, 'pairs': dict(box_of)}
