"""The hand detector on real photos, scored as shared/images/README.md says:
the numpy reference (models in the real TFLite runtime) always, the C
pipeline (tool_detect: C stages + C executor) where it is built, and the
two compared with each other.

Measured facts these tests pin down:
- MediaPipe's single full-frame pass finds both hands of hamer_example_5
  but misses the girl's lower hand (index finger up) in hamer_example_1;
  the multi-pass scheme finds every non-difficult hand, with no extras.
- Handedness: the raw output (score of label "Left") is > 0.5 for RIGHT
  hands on these non-mirrored photos; mirroring the photo flips it.
- camera.png (gloved photographer): no pass of either model finds the
  gloved hands (tiles 96-448 px, both model sizes, presence never above
  0.7 even on hand-picked crops); what matters here is that nothing else
  is returned.
"""


import numpy as np
import pytest

from detect.common import (PHOTOS, R, annotations, landmark_model, load_rgb, palm_model, run_detect_tool, runtime,
                           score_image, shared_images, skimage_path, tool)

NO_HANDS = ('coffee.png', 'chelsea.png', 'rocket.jpg')


def ref_detect(img, **opts):
    return R.detect(img, runtime(), palm_model(), landmark_model(), **opts)[0]


def score(hands, name):
    return score_image([h['box'] for h in hands], [h['is_right'] for h in hands], annotations()[name]['hands'])


@pytest.mark.no_binary
def test_reference_single_pass_baseline():
    ex1 = score(ref_detect(load_rgb(shared_images() / 'hamer_example_1.jpg'), levels=()), 'hamer_example_1.jpg')
    ex5 = score(ref_detect(load_rgb(shared_images() / 'hamer_example_5.jpg'), levels=()), 'hamer_example_5.jpg')
    assert ex5['pass'], ex5
    assert not ex1['pass'] and ex1['missed'] == [2] and not ex1['extra'], ex1


@pytest.mark.slow
@pytest.mark.no_binary
@pytest.mark.parametrize('name', PHOTOS)
def test_reference_multipass(name):
    r = score(ref_detect(load_rgb(shared_images() / name)), name)
    assert r['pass'], r


@pytest.mark.slow
@pytest.mark.no_binary
def test_handedness_direction():
    """raw > 0.5 means a right hand on a non-mirrored photo; a mirrored
    photo gives the opposite raw label for the same hand."""
    seen = 0
    for name in PHOTOS:
        img = load_rgb(shared_images() / name)
        ann = annotations()[name]['hands']
        for mirrored in (False, True):
            im = np.ascontiguousarray(img[:, ::-1]) if mirrored else img
            w = im.shape[1]
            hands = ref_detect(im)
            boxes = [h['box'] for h in hands]
            pts = [dict(a, point=[w - 1 - a['point'][0], a['point'][1]]) for a in ann] if mirrored else ann
            r = score_image(boxes, [h['is_right'] for h in hands], pts)
            for j, i in r['pairs'].items():
                if ann[j]['is_right'] is None:
                    continue
                raw_right = hands[i]['handedness'] > 0.5
                assert raw_right == (ann[j]['is_right'] != mirrored), (name, mirrored, ann[j], hands[i]['handedness'])
                seen += 1
    assert seen >= 6


@pytest.mark.slow
@pytest.mark.no_binary
@pytest.mark.parametrize('name', NO_HANDS + ('camera.png',))
def test_reference_no_false_hands(name):
    assert ref_detect(load_rgb(skimage_path(name))) == []


def exif_rotated(path, tmp_path):
    """plain.jpg and exif.jpg from the same pixels (same encoder and quality);
    exif.jpg carries orientation 6, so decoders that honour it show the
    photo turned 90 degrees clockwise."""
    from PIL import Image
    im = Image.open(path).convert('RGB')
    plain, rot = tmp_path / 'plain.jpg', tmp_path / 'exif.jpg'
    im.save(plain, quality=95)
    ex = Image.Exif()
    ex[0x0112] = 6
    im.save(rot, quality=95, exif=ex.tobytes())
    return plain, rot


def rotate_box_cw(b, h):
    """A box of an h-high image turned 90 degrees clockwise (x' = h-1-y, y' = x)."""
    return [h - 1 - b[3], b[0], h - 1 - b[1], b[2]]


def assert_same_hands_rotated(plain_hands, rot_hands, h):
    assert len(plain_hands) == len(rot_hands) > 0
    for p in plain_hands:
        want = rotate_box_cw(p['box'], h)
        best = max(rot_hands, key=lambda r: R.overlap_stats(want, r['box'])[0])
        assert R.overlap_stats(want, best['box'])[0] > 0.7, (want, best['box'])
        assert best['is_right'] == p['is_right']


@pytest.mark.slow
@pytest.mark.no_binary
def test_reference_exif_rotation(tmp_path):
    plain, rot = exif_rotated(shared_images() / 'hamer_example_5.jpg', tmp_path)
    a, b = load_rgb(plain), load_rgb(rot)
    assert b.shape == (a.shape[1], a.shape[0], 3)
    np.testing.assert_array_equal(b, np.ascontiguousarray(np.rot90(a, -1)))
    assert_same_hands_rotated(ref_detect(a), ref_detect(b), a.shape[0])


# ------------------------------------------------------------------ C side --

def c_hands(js):
    return [dict(h, box=h['bbox'], landmarks=np.array(h['landmarks'])) for h in js['hands']]


@pytest.mark.parametrize('name', PHOTOS)
@pytest.mark.parametrize('single', (False, True))
def test_c_matches_reference(name, single):
    """C pipeline + C executor vs the reference with the real runtime: the
    same hands, boxes and landmarks within 1 % of the hand's size (at least
    1 px), scores within 2e-3. Measured: hamer_example_5's full-frame crop
    differs from cv2's in 0.6 % of its values (exact rounding ties, see
    test_detect_stages), which moves its landmarks by up to 1.3 px on hands
    400 px tall; everything else agrees to a fraction of a pixel."""
    path = shared_images() / name
    js = run_detect_tool(path, *(['--single'] if single else []))
    got = c_hands(js)
    want = ref_detect(load_rgb(path), **({'levels': ()} if single else {}))
    assert len(got) == len(want), (got, want)
    for g, w in zip(got, want):
        tol = max(1.0, 0.01 * max(w['box'][2] - w['box'][0], w['box'][3] - w['box'][1]))
        np.testing.assert_allclose(g['box'], w['box'], atol=tol)
        np.testing.assert_allclose(g['landmarks'][:, :2], w['landmarks'][:, :2], atol=tol)
        assert g['is_right'] == w['is_right'] and g['level'] == w['level'] and g['levels'] == w['levels']
        for k, kw in (('palm_score', 'palm'), ('presence', 'presence'), ('handedness', 'handedness')):
            assert abs(g[k] - w[kw]) < 2e-3, (k, g[k], w[kw])
    r = score(got, name)
    assert r['pass'] or (single and name == 'hamer_example_1.jpg'), r


@pytest.mark.parametrize('name', NO_HANDS + ('camera.png',))
def test_c_no_false_hands(name):
    assert run_detect_tool(skimage_path(name))['hands'] == []


def test_c_exif_rotation(tmp_path):
    plain, rot = exif_rotated(shared_images() / 'hamer_example_5.jpg', tmp_path)
    a, b = run_detect_tool(plain), run_detect_tool(rot)
    assert (b['image']['width'], b['image']['height']) == (a['image']['height'], a['image']['width'])
    assert_same_hands_rotated(c_hands(a), c_hands(b), a['image']['height'])


def test_c_options():
    path = shared_images() / 'hamer_example_1.jpg'
    one = run_detect_tool(path, '--max-hands', 1)
    assert len(one['hands']) == 1
    strict = run_detect_tool(path, '--min-score', 0.99)
    assert len(strict['hands']) < 3
    t = run_detect_tool(path)['timings_ms']
    assert t['detect'] > 0 and t['palm'] > 0


def test_c_missing_models(tmp_path):
    import subprocess
    r = subprocess.run([str(tool('tool_detect')), '--models', str(tmp_path), str(shared_images() / PHOTOS[0])],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    msg = r.stderr.strip()
    assert '\n' not in msg and str(tmp_path) in msg and 'get_detector.sh' in msg


# ------------------------------------------------------------- collages --
# The two photos shrunk onto a grey canvas: small hands in a large image,
# with the annotations carried along. In C1 and C5 the girl's lower hand
# (only one finger shows) is about 40 px tall: below what any pass resolves
# (the smallest tiles are 192 px: no upsampling); everything else is found.

COLLAGES = {
    'C1': ([('hamer_example_1.jpg', 0.5, (100, 100)), ('hamer_example_5.jpg', 0.25, (900, 500))], (1600, 1200), [2]),
    'C2': ([('hamer_example_1.jpg', 1.0, (0, 0)), ('hamer_example_5.jpg', 0.5, (1000, 1000))], (2000, 2000), []),
    'C3': ([('hamer_example_5.jpg', 0.15, (700, 300))], (1200, 900), []),
    'C4': ([('hamer_example_1.jpg', 0.7, (50, 400)), ('hamer_example_5.jpg', 0.35, (800, 20))], (1400, 1000), []),
    'C5': ([('hamer_example_1.jpg', 0.35, (600, 600)), ('hamer_example_5.jpg', 0.2, (100, 100))], (1200, 1000), [2]),
}


def collage(key, tmp_path=None):
    import cv2
    spec, (w, h), _ = COLLAGES[key]
    can = np.full((h, w, 3), 128, np.uint8)
    hands = []
    for name, s, (ox, oy) in spec:
        im = cv2.resize(load_rgb(shared_images() / name), None, fx=s, fy=s, interpolation=cv2.INTER_AREA)
        can[oy:oy + im.shape[0], ox:ox + im.shape[1]] = im
        hands += [dict(a, point=[a['point'][0] * s + ox, a['point'][1] * s + oy]) for a in annotations()[name]['hands']]
    path = None
    if tmp_path is not None:
        path = tmp_path / f'{key}.png'
        cv2.imwrite(str(path), can[:, :, ::-1])
    return can, hands, path


@pytest.mark.slow
@pytest.mark.no_binary
@pytest.mark.parametrize('key', sorted(COLLAGES))
def test_reference_collage(key):
    img, ann, _ = collage(key)
    want_missed = COLLAGES[key][2]
    got = ref_detect(img)
    r = score_image([h['box'] for h in got], [h['is_right'] for h in got], ann)
    assert r['missed'] == want_missed and not r['extra'] and not r['wrong_hand'], r
    single = ref_detect(img, levels=())
    r1 = score_image([h['box'] for h in single], [h['is_right'] for h in single], ann)
    assert len(r1['missed']) > len(want_missed), r1  # the single pass alone misses more


@pytest.mark.parametrize('key', sorted(COLLAGES))
def test_c_collage(key, tmp_path):
    img, ann, path = collage(key, tmp_path)
    got = c_hands(run_detect_tool(path))
    r = score_image([h['box'] for h in got], [h['is_right'] for h in got], ann)
    assert r['missed'] == COLLAGES[key][2] and not r['extra'] and not r['wrong_hand'], r
