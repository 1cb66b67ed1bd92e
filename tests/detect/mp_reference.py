"""MediaPipe Hands, CPU graphs, re-stated in numpy: the reference for src/detect/.

Written from the published graphs (mediapipe/modules/palm_detection/
palm_detection_cpu.pbtxt, mediapipe/modules/hand_landmark/
palm_detection_detection_to_roi.pbtxt, hand_landmark_cpu.pbtxt) and the
calculators they name, not from the C code. The two TFLite models run in the
real TFLite runtime through a `runtime` object with
`infer(model_path, x) -> [outputs]` (see tflite_runtime.py).

Coordinates: every rectangle is kept in image pixels, (cx, cy, w, h,
rotation). MediaPipe keeps them normalised to the image and converts with
the image size at each use; for the square regions used here both forms are
the same arithmetic up to float rounding.

Stages (names as in the calculators):
  ImageToTensor      roi -> letterboxed roi (PadRoi), then the OpenCV CPU
                     converter: cv2.boxPoints of the roi, getPerspectiveTransform
                     to the output corners (0,H) (0,0) (W,0) (W,H), warpPerspective
                     INTER_LINEAR on the uint8 image, then x/255 in float32.
                     Palm: 192x192, BORDER_ZERO. Landmarks: 224x224, border
                     unspecified = BORDER_REPLICATE.
  SsdAnchors         4 layers, strides 8,16,16,16, 2 anchors per layer and cell
                     (aspect 1 + the interpolated scale), fixed size 1x1.
  TensorsToDetections XYWH (reverse_output_order), /192 * anchor size + anchor
                     centre, sigmoid of the score clipped to +-100, kept if
                     >= 0.5 and the box has non-negative size.
  NonMaxSuppression  WEIGHTED, IoU > 0.3, score-sorted.
  DetectionLetterboxRemoval, DetectionsToRects (bounding box; rotation
                     90deg - atan2(-(y2-y0), x2-x0) from keypoints 0 and 2),
  RectTransformation scale 2.6, shift_y -0.5 (rotated), square_long.
  hand landmark      21 x (x, y, z) in 224 px; presence (already a
                     probability in the file) >= 0.5; handedness: binary, score
                     s for label 0 "Left" and 1-s for "Right".
  TensorsToLandmarks /224 (z /224/0.4), LandmarkLetterboxRemoval,
  LandmarkProjection rotate about the roi centre, scale by its size.

Beyond MediaPipe (the multi-pass scheme, see hm_det docs in src/detect/
detect.h): palm passes on square tiles, each one is ImageToTensor of a square
roi with no rotation; candidates from all passes go through the landmark model
and are merged afterwards.
"""

import math

import cv2
import numpy as np

PALM_SIZE = 192
LM_SIZE = 224
NUM_ANCHORS = 2016


# ---------------------------------------------------------------- anchors --

def ssd_anchors():
    """(2016, 2) anchor centres in [0,1], in the calculator's order
    (layer group, y, x, anchor)."""
    strides = [8, 16, 16, 16]
    out = []
    layer = 0
    while layer < len(strides):
        last = layer
        n_per_cell = 0
        while last < len(strides) and strides[last] == strides[layer]:
            n_per_cell += 2  # aspect ratio 1.0 + interpolated scale
            last += 1
        fm = int(math.ceil(PALM_SIZE / strides[layer]))
        for y in range(fm):
            for x in range(fm):
                for _ in range(n_per_cell):
                    out.append(((x + 0.5) / fm, (y + 0.5) / fm))
        layer = last
    a = np.array(out, dtype=np.float32)
    assert a.shape == (NUM_ANCHORS, 2)
    return a


# ---------------------------------------------------------- image to tensor --

def pad_roi(roi, out_w, out_h):
    """PadRoi with keep_aspect_ratio: grow the roi to the tensor's aspect;
    returns the new roi and (left, top, right, bottom) padding fractions."""
    cx, cy, w, h, rot = roi
    ta = np.float32(out_h) / np.float32(out_w)
    ra = np.float32(h) / np.float32(w)
    hp = vp = np.float32(0)
    if ta > ra:
        nw, nh = w, w * ta
        vp = (np.float32(1) - ra / ta) / np.float32(2)
    else:
        nw, nh = h / ta, h
        hp = (np.float32(1) - ta / ra) / np.float32(2)
    return (cx, cy, float(nw), float(nh), rot), (float(hp), float(vp), float(hp), float(vp))


def warp_roi(img, roi, out_w, out_h, border):
    """The OpenCV CPU converter: uint8 RGB image -> float32 [out_h,out_w,3]
    in [0,1]. border: 'zero' or 'replicate'."""
    cx, cy, w, h, rot = roi
    rr = ((np.float32(cx), np.float32(cy)), (np.float32(w), np.float32(h)), np.float32(rot) * np.float32(180.0 / math.pi))
    src = cv2.boxPoints(rr).astype(np.float32)
    dst = np.array([[0, out_h], [0, 0], [out_w, 0], [out_w, out_h]], dtype=np.float32)
    m = cv2.getPerspectiveTransform(src, dst)
    bm = cv2.BORDER_CONSTANT if border == 'zero' else cv2.BORDER_REPLICATE
    t = cv2.warpPerspective(img, m, (out_w, out_h), flags=cv2.INTER_LINEAR, borderMode=bm, borderValue=0)
    return t.astype(np.float32) * np.float32(1.0 / 255.0)


def square_roi(cx, cy, side):
    return (float(cx), float(cy), float(side), float(side), 0.0)


def full_frame_roi(w, h):
    """ImageToTensor without a rect: the whole image (then letterboxed)."""
    return (0.5 * w, 0.5 * h, float(w), float(h), 0.0)


# ------------------------------------------------------------- detections --

def decode(raw_boxes, raw_scores, anchors, min_score=0.5):
    """TensorsToDetections. Returns a list of dicts with 'score', 'box'
    (xmin, ymin, xmax, ymax) and 'kp' (7,2), all in [0,1] tensor units."""
    rb = np.asarray(raw_boxes, np.float32).reshape(NUM_ANCHORS, 18)
    rs = np.asarray(raw_scores, np.float32).reshape(NUM_ANCHORS)
    s = np.float32(PALM_SIZE)
    ax, ay = anchors[:, 0], anchors[:, 1]
    xc = rb[:, 0] / s + ax
    yc = rb[:, 1] / s + ay
    w = rb[:, 2] / s
    h = rb[:, 3] / s
    kx = rb[:, 4::2] / s + ax[:, None]
    ky = rb[:, 5::2] / s + ay[:, None]
    sc = np.clip(rs, -100.0, 100.0).astype(np.float32)
    sc = (1.0 / (1.0 + np.exp(-sc.astype(np.float64)))).astype(np.float32)
    out = []
    for i in range(NUM_ANCHORS):
        if not (sc[i] >= min_score):
            continue
        xmin, ymin = xc[i] - w[i] / 2, yc[i] - h[i] / 2
        xmax, ymax = xc[i] + w[i] / 2, yc[i] + h[i] / 2
        if not (xmax - xmin >= 0 and ymax - ymin >= 0):
            continue
        out.append({'score': float(sc[i]), 'box': np.array([xmin, ymin, xmax, ymax], np.float64),
                    'kp': np.stack([kx[i], ky[i]], 1).astype(np.float64), 'anchor': i})
    return out


def iou(a, b):
    """OverlapSimilarity INTERSECTION_OVER_UNION on (xmin, ymin, xmax, ymax)."""
    ix0, iy0 = max(a[0], b[0]), max(a[1], b[1])
    ix1, iy1 = min(a[2], b[2]), min(a[3], b[3])
    if ix1 < ix0 or iy1 < iy0:
        return 0.0
    inter = (ix1 - ix0) * (iy1 - iy0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def weighted_nms(dets, thresh=0.3):
    """NonMaxSuppression WEIGHTED: the best remaining detection absorbs every
    remaining one overlapping it by IoU > thresh (itself included); box and
    keypoints become score-weighted means, the score stays the best one's."""
    order = sorted(range(len(dets)), key=lambda i: (-dets[i]['score'], i))
    remain = order
    out = []
    while remain:
        top = dets[remain[0]]
        cand = [i for i in remain if iou(dets[i]['box'], top['box']) > thresh]
        rest = [i for i in remain if not iou(dets[i]['box'], top['box']) > thresh]
        tot = sum(dets[i]['score'] for i in cand)
        box = sum(dets[i]['box'] * dets[i]['score'] for i in cand) / tot
        kp = sum(dets[i]['kp'] * dets[i]['score'] for i in cand) / tot
        out.append({'score': top['score'], 'box': box, 'kp': kp, 'anchor': top['anchor'], 'merged': len(cand)})
        if len(rest) == len(remain):
            break
        remain = rest
    return out


def to_image(det, roi, padding):
    """DetectionLetterboxRemoval + the roi's placement: tensor units -> image
    pixels. roi is the letterboxed (square, unrotated) roi the pass used."""
    cx, cy, w, h, _ = roi
    l, t, r, b = padding
    # letterbox removal maps tensor units to units of the un-padded roi
    def ux(u):
        return (u - l) / (1 - l - r)

    def uy(v):
        return (v - t) / (1 - t - b)
    uw, uh = w * (1 - l - r), h * (1 - t - b)  # the un-padded roi
    x0, y0 = cx - uw / 2, cy - uh / 2
    box = np.array([x0 + ux(det['box'][0]) * uw, y0 + uy(det['box'][1]) * uh,
                    x0 + ux(det['box'][2]) * uw, y0 + uy(det['box'][3]) * uh])
    kp = np.stack([x0 + ux(det['kp'][:, 0]) * uw, y0 + uy(det['kp'][:, 1]) * uh], 1)
    return {**det, 'box_px': box, 'kp_px': kp}


def normalize_radians(a):
    return a - 2 * math.pi * math.floor((a + math.pi) / (2 * math.pi))


def palm_to_roi(d):
    """DetectionsToRects (box + rotation from keypoints 0 -> 2, target 90deg)
    then RectTransformation (scale 2.6, shift_y -0.5, square_long), pixels."""
    x0, y0, x1, y1 = d['box_px']
    w, h = x1 - x0, y1 - y0
    cx, cy = x0 + w / 2, y0 + h / 2
    (kx0, ky0), (kx2, ky2) = d['kp_px'][0], d['kp_px'][2]
    rot = normalize_radians(math.pi / 2 - math.atan2(-(ky2 - ky0), kx2 - kx0))
    return rect_transform((cx, cy, w, h, rot), 2.6, 0.0, -0.5)


def rect_transform(r, scale, shift_x, shift_y):
    cx, cy, w, h, rot = r
    if rot == 0.0:
        cx, cy = cx + w * shift_x, cy + h * shift_y
    else:
        c, s = math.cos(rot), math.sin(rot)
        cx += w * shift_x * c - h * shift_y * s
        cy += w * shift_x * s + h * shift_y * c
    side = max(w, h)
    return (cx, cy, side * scale, side * scale, rot)


# -------------------------------------------------------------- landmarks --

def project_landmarks(raw, roi, padding):
    """TensorsToLandmarks (/224, z /224/0.4), LandmarkLetterboxRemoval and
    LandmarkProjection: -> (21,3) image pixels (z in the same pixel scale as
    x: MediaPipe's normalised z times the image width)."""
    cx, cy, w, h, rot = roi
    l, t, r, b = padding
    p = np.asarray(raw, np.float64).reshape(21, 3)
    u = p[:, 0] / LM_SIZE
    v = p[:, 1] / LM_SIZE
    z = p[:, 2] / LM_SIZE / 0.4
    u = (u - l) / (1 - l - r)
    v = (v - t) / (1 - t - b)
    z = z / (1 - l - r)
    x, y = u - 0.5, v - 0.5
    c, s = math.cos(rot), math.sin(rot)
    return np.stack([(c * x - s * y) * w + cx, (s * x + c * y) * h + cy, z * w], 1)


def tight_box(lm):
    return np.array([lm[:, 0].min(), lm[:, 1].min(), lm[:, 0].max(), lm[:, 1].max()])


# --------------------------------------------------------------- pipeline --

def palm_pass(img, roi, runtime, palm_model, anchors, min_score=0.5):
    """One palm-detector pass over `roi` (an unrotated rectangle in pixels):
    letterbox, infer, decode, weighted NMS, back to image pixels. Returns
    (detections, intermediates)."""
    lroi, pad = pad_roi(roi, PALM_SIZE, PALM_SIZE)
    x = warp_roi(img, lroi, PALM_SIZE, PALM_SIZE, 'zero')
    raw_boxes, raw_scores = palm_outputs(runtime.infer(palm_model, x[None]))
    dets = decode(raw_boxes, raw_scores, anchors, min_score)
    kept = weighted_nms(dets)
    px = [to_image(d, lroi, pad) for d in kept]
    return px, {'input': x, 'raw_boxes': raw_boxes, 'raw_scores': raw_scores, 'decoded': dets,
                'nms': kept, 'roi': lroi, 'padding': pad}


def palm_outputs(outs):
    """The palm model's (boxes [2016,18], scores [2016]) whatever the order."""
    a, b = [np.asarray(o, np.float32) for o in outs]
    if a.size == NUM_ANCHORS:
        a, b = b, a
    return a.reshape(NUM_ANCHORS, 18), b.reshape(NUM_ANCHORS)


def landmark_outputs(outs):
    """(landmarks 63, presence, handedness) from the four outputs, told apart
    by size and order: the two scalars come in the file's order (presence
    first), the first 63-vector is the image landmarks."""
    vec = [np.asarray(o, np.float32).ravel() for o in outs if np.asarray(o).size == 63]
    sca = [float(np.asarray(o).ravel()[0]) for o in outs if np.asarray(o).size == 1]
    return vec[0], sca[0], sca[1]


def landmark_hand(img, roi, runtime, lm_model):
    """The hand landmark subgraph on one roi: crop, infer, project."""
    lroi, pad = pad_roi(roi, LM_SIZE, LM_SIZE)
    x = warp_roi(img, lroi, LM_SIZE, LM_SIZE, 'replicate')
    raw, presence, hand = landmark_outputs(runtime.infer(lm_model, x[None]))
    lm = project_landmarks(raw, lroi, pad)
    return {'roi': roi, 'input': x, 'raw': raw, 'presence': presence, 'handedness_raw': hand, 'landmarks': lm,
            'box': tight_box(lm)}


def tiles(w, h, side, overlap):
    """Square tiles of `side` px covering the image with at least `overlap`
    (a fraction of the side) between neighbours; the count per axis is the
    fewest that achieves it and the tiles are spread evenly, the outer ones
    flush with the image edges. An axis shorter than the side gets one tile,
    centred (the warp pads it with zeros)."""
    def axis(n):
        if n <= side:
            return [n / 2.0]
        step_max = side * (1.0 - overlap)
        k = int(math.ceil((n - side) / step_max - 1e-9)) + 1
        step = (n - side) / (k - 1)
        return [side / 2.0 + i * step for i in range(k)]
    return [(cx, cy) for cy in axis(h) for cx in axis(w)]



# ------------------------------------------------------------ multi-pass --

DEFAULTS = dict(max_hands=8, min_palm=0.5, min_presence=0.5, tile_presence=0.9, levels=(4,), overlap=0.25,
                min_tile=192, tile_prior=0.02, prior_mask=1.0, palm_iou=0.5, same_hand=0.25,
                tile_repeat=0.6, skip_repeats=True)


def pass_rois(w, h, levels, overlap, min_tile):
    """[(level, roi)]: level 0 the full frame (MediaPipe's own pass), then
    for each k in levels square tiles of side round(max(w,h)/k), skipped
    when under min_tile pixels (the palm model would only see upsampled
    pixels)."""
    out = [(0, full_frame_roi(w, h))]
    for li, k in enumerate(levels):
        side = int(round(max(w, h) / k))
        if side < min_tile:
            continue
        out += [(li + 1, square_roi(cx, cy, side)) for cx, cy in tiles(w, h, side, overlap)]
    return out


def overlap_stats(a, b):
    """(IoU, intersection over the smaller box) of two (x1,y1,x2,y2) boxes."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(iw, 0.0) * max(ih, 0.0)
    aa = (a[2] - a[0]) * (a[3] - a[1])
    ab = (b[2] - b[0]) * (b[3] - b[1])
    union = aa + ab - inter
    return (inter / union if union > 0 else 0.0), (inter / min(aa, ab) if min(aa, ab) > 0 else 0.0)


def same_hand(a, b, o):
    """The merge rule (two palm-pass hands): b is a's hand again when both
    their wrists (landmark 0) and their palm centres (the mean of landmarks
    0, 5, 9, 13 and 17) lie within same_hand x the larger side of their
    landmark boxes. Box overlap alone is not used: two interlocked hands
    overlap almost completely; partial re-detections (a tile's palm inside
    a full-frame hand's) are not landmarked at all (in_palm)."""
    la, lb = np.asarray(a['landmarks'], np.float64), np.asarray(b['landmarks'], np.float64)
    size = max(max(h['box'][2] - h['box'][0], h['box'][3] - h['box'][1]) for h in (a, b))
    wrist = np.hypot(*(la[0, :2] - lb[0, :2]))
    palm = np.hypot(*(la[[0, 5, 9, 13, 17], :2].mean(0) - lb[[0, 5, 9, 13, 17], :2].mean(0)))
    return wrist < o['same_hand'] * size and palm < o['same_hand'] * size


def tile_prior(full_dbg, anchors, found, thr, mask_iou, hand_palms=(), contain=1.0):
    """The tile prior: the full-frame pass's raw outputs decoded again at
    score >= thr, in image pixels; those whose box overlaps none of the
    palms that pass kept (found) by IoU > mask_iou and lies inside none of
    the palms of the hands it found (hand_palms) by `contain` of its area
    or more (in_palm) -> their box centres."""
    pts = []
    for d in decode(full_dbg['raw_boxes'], full_dbg['raw_scores'], anchors, thr):
        b = to_image(d, full_dbg['roi'], full_dbg['padding'])['box_px']
        if any(iou(b, f['box_px']) > mask_iou for f in found) or in_palm(b, hand_palms, contain) is not None:
            continue
        pts.append(((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))
    return pts


def tiles_wanted(pts, level_rois):
    """The tiles of one level the prior asks for: each point asks for the
    one tile whose centre is nearest it along each axis (ties: the first),
    the tile it lies most centrally in, and only when it lies inside it,
    [x0, x1) x [y0, y1). Returns the set of wanted roi indices."""
    if not level_rois:
        return set()
    xs = sorted({r[0] for r in level_rois})
    ys = sorted({r[1] for r in level_rois})
    index = {(r[0], r[1]): i for i, r in enumerate(level_rois)}
    want = set()
    for x, y in pts:
        cx = min(xs, key=lambda c: abs(x - c))
        cy = min(ys, key=lambda c: abs(y - c))
        side = level_rois[0][2]
        if cx - side / 2 <= x < cx + side / 2 and cy - side / 2 <= y < cy + side / 2:
            want.add(index[(cx, cy)])
    return want


def in_palm(box, palms, contain):
    """The first of palms (boxes) holding at least `contain` of box's area:
    a tile palm lying that much inside a full-frame hand's palm is that hand
    seen again. None if none."""
    area = (box[2] - box[0]) * (box[3] - box[1])
    for k, b in enumerate(palms):
        iw = min(box[2], b[2]) - max(box[0], b[0])
        ih = min(box[3], b[3]) - max(box[1], b[1])
        if area > 0 and iw > 0 and ih > 0 and iw * ih / area >= contain:
            return k
    return None


def merge_hands(hands, o):
    """The merge, hands given in palm-score order: the full frame's (level
    0) are looked at first, then the tiles', each in that order; a hand
    that is an earlier kept one's hand again (same_hand) joins it (its
    levels OR-ed in; the full frame's landmarks stay: MediaPipe's crop).
    Returns the kept hands in the given order."""
    n = len(hands)
    rep = [-1] * n
    prio = [i for i in range(n) if hands[i]['level'] == 0] + [i for i in range(n) if hands[i]['level'] > 0]
    for a, i in enumerate(prio):
        for j in prio[:a]:
            if rep[j] < 0 and same_hand(hands[j], hands[i], o):
                rep[i] = j
                hands[j]['levels'] |= hands[i]['levels']
                break
    return [h for i, h in enumerate(hands) if rep[i] < 0]


def detect(img, runtime, palm_model, lm_model, anchors=None, **opts):
    """The whole detector on one uint8 RGB image. Returns (hands, debug):
    hands sorted by palm score, each a dict with box, is_right, palm,
    presence, handedness (the raw model output), landmarks (21,3), level
    (the pass that found its representative) and levels (bitmask of every
    pass level whose candidate merged into it). A tile pass runs only
    where the full frame's prior (tile_prior; 0: every tile) has a point,
    and a tile's palm (or a prior point's box) lying inside a full-frame
    hand's palm by tile_repeat of its area or more is that hand again: not
    landmarked (no tile asked for). skip_repeats=False: both as before;
    only the tests of the merge stage use that, for more repeats to merge."""
    o = dict(DEFAULTS)
    o.update(opts)
    if anchors is None:
        anchors = ssd_anchors()
    h, w = img.shape[:2]
    rois = pass_rois(w, h, o['levels'], o['overlap'], o['min_tile'])
    full, full_dbg = palm_pass(img, rois[0][1], runtime, palm_model, anchors, o['min_palm'])
    cands = [{'level': 0, 'det': d} for d in full]

    def suppress(cs, kept):
        """Palm-level suppression, in order: a palm overlapping a kept one by
        IoU > palm_iou is its repeat (its level joins the keeper's)."""
        for c in cs:
            rep = next((k for k in kept if iou(k['det']['box_px'], c['det']['box_px']) > o['palm_iou']), None)
            if rep is None:
                c['levels'] = 1 << c['level']
                kept.append(c)
            else:
                rep['levels'] |= 1 << c['level']
        return kept

    calls = [0]

    def landmark(c):
        calls[0] += 1
        lh = landmark_hand(img, palm_to_roi(c['det']), runtime, lm_model)
        need = o['min_presence'] if c['level'] == 0 else max(o['min_presence'], o['tile_presence'])
        if not (lh['presence'] >= need):
            return None
        return {'box': lh['box'], 'landmarks': lh['landmarks'], 'presence': lh['presence'],
                'handedness': lh['handedness_raw'], 'is_right': lh['handedness_raw'] > 0.5,
                'palm': c['det']['score'], 'level': c['level'], 'cand': c, 'roi': lh['roi']}

    # the full frame's palms (by score) and their hands, before any tile
    kept = suppress(sorted(cands, key=lambda c: -c['det']['score']), [])
    full_hands = [hd for hd in map(landmark, kept) if hd is not None]
    # the prior, less what lies inside the palms of the hands found
    use_prior = len(rois) > 1 and o['tile_prior'] > 0
    palms = [hd['cand']['det']['box_px'] for hd in full_hands] if o['skip_repeats'] else []
    pts = tile_prior(full_dbg, anchors, full, o['tile_prior'], o['prior_mask'], palms, o['tile_repeat']) if use_prior else []
    tiles_run = 0
    for li in range(1, len(o['levels']) + 1):
        level_rois = [roi for level, roi in rois[1:] if level == li]
        want = tiles_wanted(pts, level_rois) if use_prior else set(range(len(level_rois)))
        for i, roi in enumerate(level_rois):
            if i not in want:
                continue
            tiles_run += 1
            dets, _ = palm_pass(img, roi, runtime, palm_model, anchors, o['min_palm'])
            cands += [{'level': li, 'det': d} for d in dets]
    # the tiles' palms by score: repeats of a kept palm go, and so do those
    # inside a full-frame hand's box (that hand seen again)
    tile_cands = [c for c in cands if c['level'] > 0]
    order = sorted(range(len(tile_cands)), key=lambda i: (-tile_cands[i]['det']['score'], i))
    n0 = len(kept)
    kept = suppress([tile_cands[i] for i in order], kept)
    for hd in full_hands:
        hd['levels'] = hd['cand']['levels']
    hands = list(full_hands)
    for c in kept[n0:]:
        k = in_palm(c['det']['box_px'], [hd['cand']['det']['box_px'] for hd in full_hands], o['tile_repeat'])
        if k is not None and o['skip_repeats']:
            full_hands[k]['levels'] |= c['levels']
            continue
        hd = landmark(c)
        if hd is not None:
            hd['levels'] = c['levels']
            hands.append(hd)
    for hd in hands:
        del hd['cand']
    hands.sort(key=lambda hd: -np.float32(hd['palm']))  # stable: palm-score order
    out = merge_hands(list(hands), o)
    return out[:o['max_hands']], {'candidates': cands, 'kept': kept, 'hands': hands,
                                  'tiles_run': tiles_run, 'landmark_calls': calls[0], 'prior': pts}
