"""The hand detector's C stages (tool_detect_stages) against the numpy
reference (tests/detect/mp_reference.py), stage by stage, on tensors the
real TFLite runtime produced for the annotated photos. Independent of the
C TFLite executor.

Tolerances (the C code computes the geometry in double from float inputs,
the reference in float64/float32 as noted in it):
  anchors, decoding        exact / 1e-6 (the same float32 operations)
  weighted NMS             1e-5 in tensor units (float accumulations)
  palm -> image, rect      1e-3 px, 1e-5 rad
  crops (warp)             >= 99 % of values equal to cv2's, the rest
                           within 4/255. Measured: bit-identical on every
                           crop but one, the 1200x1799 photo's full frame
                           (99.41 % equal, max 3/255): its sample positions
                           fall exactly on halves of the 1/32-pixel grid,
                           which the C code rounds to even and OpenCV's
                           inexact matrix solve breaks either way
  landmark projection      1e-3 px
  suppression, merge       identical choices
"""

import subprocess

import numpy as np
import pytest

from detect.common import PHOTOS, R, landmark_model, load_rgb, palm_model, runtime, shared_images, tool


def run_stages(tmp_path, **arrays):
    inp, out = tmp_path / 'in.npz', tmp_path / 'out.npz'
    np.savez(inp, **arrays)
    r = subprocess.run([str(tool('tool_detect_stages')), str(inp), str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture(scope='module')
def scene():
    """Per photo: the image, palm passes (full frame + two level-1 tiles)
    with the runtime's raw outputs and the reference's results, and each
    palm's landmark run."""
    rt = runtime()
    pm, lm = palm_model(), landmark_model()
    anchors = R.ssd_anchors()
    out = []
    for name in PHOTOS:
        img = load_rgb(shared_images() / name)
        h, w = img.shape[:2]
        rois = [r for lv, r in R.pass_rois(w, h, (2,), 0.25, 192)][:3]
        passes = []
        for roi in rois:
            px, inter = R.palm_pass(img, roi, rt, pm, anchors)
            hands = [R.landmark_hand(img, R.palm_to_roi(d), rt, lm) for d in px]
            passes.append({'roi': roi, 'px': px, 'inter': inter, 'hands': hands})
        out.append({'name': name, 'img': img, 'passes': passes})
    return out


def test_anchors(tmp_path):
    z = run_stages(tmp_path, dummy=np.zeros(1))
    np.testing.assert_array_equal(z['anchors'], R.ssd_anchors())


def test_tiles(tmp_path):
    cfg = [(848, 424, 0.25), (565, 424, 0.25), (848, 212, 0.25), (565, 212, 0.25), (1799, 450, 0.25),
           (300, 424, 0.25), (1000, 100, 0.5), (1000, 333, 0.0), (424, 424, 0.25)]
    z = run_stages(tmp_path, tile_cfg=np.array(cfg, np.float64))
    for t, (n, side, ov) in enumerate(cfg):
        ref = [c for c, _ in R.tiles(n, 1, side, ov)]
        np.testing.assert_allclose(z[f'tile_{t}'], ref, rtol=0, atol=1e-9, err_msg=str((n, side, ov)))


def test_palm_post(scene, tmp_path):
    for s in scene:
        ps = s['passes']
        z = run_stages(tmp_path, palm_raw_boxes=np.stack([p['inter']['raw_boxes'] for p in ps]),
                       palm_raw_scores=np.stack([p['inter']['raw_scores'] for p in ps]),
                       palm_rois=np.array([p['roi'] for p in ps], np.float64), palm_min=np.array([0.5]))
        for i, p in enumerate(ps):
            what = f"{s['name']} pass {i}"
            dec = p['inter']['decoded']
            assert z[f'dec_{i}'].shape[0] == len(dec), what
            ref = np.array([[d['score'], *d['box'], *d['kp'].ravel(), d['anchor']] for d in dec]).reshape(-1, 20)
            np.testing.assert_allclose(z[f'dec_{i}'], ref, rtol=0, atol=1e-6, err_msg=what)
            nms = p['inter']['nms']
            assert z[f'nms_{i}'].shape[0] == len(nms), what
            ref = np.array([[d['score'], *d['box'], *d['kp'].ravel(), d['anchor']] for d in nms]).reshape(-1, 20)
            np.testing.assert_allclose(z[f'nms_{i}'], ref, rtol=0, atol=1e-5, err_msg=what)
            ref = np.array([[d['score'], *d['box_px'], *d['kp_px'].ravel()] for d in p['px']]).reshape(-1, 19)
            np.testing.assert_allclose(z[f'px_{i}'], ref, rtol=0, atol=1e-3, err_msg=what)
            ref = np.array([R.palm_to_roi(d) for d in p['px']]).reshape(-1, 5)
            np.testing.assert_allclose(z[f'rect_{i}'][:, :4], ref[:, :4], rtol=0, atol=1e-3, err_msg=what)
            np.testing.assert_allclose(z[f'rect_{i}'][:, 4], ref[:, 4], rtol=0, atol=1e-5, err_msg=what)
    assert sum(len(p['px']) for s in scene for p in s['passes']) >= 4  # the test saw real palms


def warp_cases(scene):
    """(image, roi, size, replicate): each palm pass's letterboxed roi and
    each landmark crop (rotated, replicated border)."""
    cases = []
    for s in scene:
        for p in s['passes']:
            cases.append((s['img'], R.pad_roi(p['roi'], 192, 192)[0], 192, 0))
            for h in p['hands']:
                cases.append((s['img'], R.pad_roi(h['roi'], 224, 224)[0], 224, 1))
    return cases


def test_warp(scene, tmp_path):
    cases = warp_cases(scene)
    assert any(abs(c[1][4]) > 0.1 for c in cases)  # rotated crops are covered
    by_img = {}
    for c in cases:
        by_img.setdefault(id(c[0]), []).append(c)
    worst = 1.0
    for group in by_img.values():
        img = group[0][0]
        z = run_stages(tmp_path, image=img, warp_rects=np.array([c[1] for c in group], np.float64),
                       warp_cfg=np.array([(c[2], c[2], c[3]) for c in group], np.int64))
        for i, (_, roi, size, rep) in enumerate(group):
            ref = R.warp_roi(img, roi, size, size, 'replicate' if rep else 'zero')
            got = z[f'warp_{i}']
            d = np.abs(got - ref)
            eq = float(np.mean(d == 0))
            worst = min(worst, eq)
            assert eq >= 0.99, f'crop {roi}: {eq:.5f} of values equal'
            assert d.max() <= 4 / 255 + 1e-7, f'crop {roi}: max difference {d.max() * 255:.2f}/255'
    print(f'warp: worst crop has {worst * 100:.3f}% of values equal to cv2')


def test_landmark_projection(scene, tmp_path):
    hands = [h for s in scene for p in s['passes'] for h in p['hands']]
    assert len(hands) >= 4
    z = run_stages(tmp_path, lm_raw=np.array([h['raw'] for h in hands], np.float32),
                   lm_rects=np.array([h['roi'] for h in hands], np.float64))
    ref = np.array([R.project_landmarks(h['raw'], *R.pad_roi(h['roi'], 224, 224)) for h in hands])
    np.testing.assert_allclose(z['lm_proj'], ref, rtol=0, atol=1e-3)
    np.testing.assert_allclose(z['lm_box'], np.array([R.tight_box(r) for r in ref]), rtol=0, atol=1e-3)


def multipass_runs(**opts):
    rt = runtime()
    return {name: R.detect(load_rgb(shared_images() / name), rt, palm_model(), landmark_model(), **opts)
            for name in PHOTOS}


@pytest.fixture(scope='module')
def multipass():
    """The reference's whole multi-pass run on each photo (its debug
    lists feed the suppression comparison)."""
    return multipass_runs()


@pytest.fixture(scope='module')
def multipass_repeats():
    """The same with the tiles' palms inside a full-frame hand landmarked
    too (the default skips them), so that the merge has repeats to remove."""
    return multipass_runs(skip_repeats=False)


def test_cross_pass_suppression(multipass, tmp_path):
    for name, (hands, dbg) in multipass.items():
        c = dbg['candidates']
        z = run_stages(tmp_path, sup_boxes=np.array([x['det']['box_px'] for x in c], np.float64),
                       sup_scores=np.array([x['det']['score'] for x in c], np.float64),
                       sup_levels=np.array([x['level'] for x in c], np.int64), sup_iou=np.array([0.5]))
        ref_order = [next(i for i, x in enumerate(c) if x is k) for k in dbg['kept']]
        assert list(z['sup_order']) == ref_order, name
        assert list(z['sup_levels_out']) == [k['levels'] for k in dbg['kept']], name


def test_merge(multipass_repeats, tmp_path):
    for name, (hands, dbg) in multipass_repeats.items():
        hs = dbg['hands']
        # the reference merged in place: recompute the levels each hand arrived with
        lv = [1 << h['level'] for h in hs]
        z = run_stages(tmp_path, mrg_boxes=np.array([h['box'] for h in hs], np.float32),
                       mrg_landmarks=np.array([h['landmarks'] for h in hs], np.float32),
                       mrg_levels=np.array(lv, np.int64), mrg_cfg=np.array([0.25]))
        ref = [next(i for i, h in enumerate(hs) if h is k) for k in hands]
        assert list(z['mrg_index']) == ref, name
    assert sum(len(dbg['hands']) - len(h) for h, dbg in multipass_repeats.values()) > 0  # some repeats were merged
