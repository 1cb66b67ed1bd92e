"""MediaPipe Holistic's body-guided hand pass, CPU graphs, static image mode,
re-stated in numpy: the reference for src/detect/body.c and pose.c.

Written from the published graphs (mediapipe/modules/pose_detection/
pose_detection_cpu.pbtxt, pose_landmark/pose_detection_to_roi.pbtxt,
pose_landmark_by_roi_cpu.pbtxt, tensors_to_pose_landmarks_and_segmentation
.pbtxt, pose_landmarks_to_roi.pbtxt, holistic_landmark/
hand_landmarks_left_and_right_cpu.pbtxt, hand_landmarks_from_pose_cpu.pbtxt,
hand_visibility_from_hand_landmarks_from_pose.pbtxt,
hand_landmarks_from_pose_to_recrop_roi.pbtxt, hand_recrop_by_roi_cpu.pbtxt)
and the calculators they name; the option values were checked against the
graphs compiled into @mediapipe/holistic@0.5.1675471629's WebAssembly
binary. The four TFLite models run in the real TFLite runtime (`runtime`
with infer(model, x) -> [outputs], tests/detect/tflite_runtime.py).

Stages:
  ImageToTensor      224x224, [-1, 1], BORDER_ZERO, letterboxed (pose
                     detection); 256x256 [0, 1] border replicate (pose
                     landmarks, hand re-crop). [-1, 1] is taken as
                     (v / 255) * 2 - 1 (OpenCV's convertTo with one scale and
                     offset differs by float rounding).
  SsdAnchors         5 layers, strides 8,16,32,32,32, 2 anchors per layer and
                     cell, fixed size: 28x28x2 + 14x14x2 + 7x7x6 = 2254.
  TensorsToDetections 12 values (box x,y,w,h + 4 keypoints), /224, sigmoid
                     of the score clipped to +-100, >= 0.5.
  NonMaxSuppression  WEIGHTED, IoU > 0.3.
  AlignmentPointsRects keypoints 0 (centre) -> 1 (scale, rotation), 90 deg;
  RectTransformation 1.25, square_long.
  pose landmarks     39 x (x, y, z, visibility, presence) in 256 px,
                     visibility and presence through a sigmoid; pose flag
                     >= 0.5; RefineLandmarksFromHeatmap kernel 7, 0.5;
                     letterbox removal, projection.
  hands from pose    left: landmarks 15, 17, 19; right: 16, 18, 20 (wrist,
                     pinky, index); wrist visibility > 0.1;
                     HandDetectionsFromPoseToRects: centre m = (2 index +
                     pinky) / 3, side 2 |m - wrist|, rotation wrist -> m at 90
                     deg; RectTransformation 2.7, shift_y -0.1, square_long.
  hand re-crop       2 points / 256, letterbox removal, projection;
                     AlignmentPointsRects 0 -> 1 at -90 deg;
                     RectTransformation 1.0, shift_y -0.1, square_long.
  hand landmarks     mp_reference.landmark_hand on that rectangle, presence
                     >= 0.5.
"""

import math

import numpy as np

import mp_reference as R

POSE_SIZE, POSE_LM_SIZE, RECROP_SIZE = 224, 256, 256
NUM_ANCHORS = 2254
SIDES = {'left': (15, 17, 19), 'right': (16, 18, 20)}


def pose_anchors():
    strides = [8, 16, 32, 32, 32]
    out = []
    layer = 0
    while layer < len(strides):
        last = layer
        n = 0
        while last < len(strides) and strides[last] == strides[layer]:
            n += 2
            last += 1
        fm = int(math.ceil(POSE_SIZE / strides[layer]))
        for y in range(fm):
            for x in range(fm):
                out += [((x + 0.5) / fm, (y + 0.5) / fm)] * n
        layer = last
    a = np.array(out, np.float32)
    assert a.shape == (NUM_ANCHORS, 2)
    return a


def decode(raw_boxes, raw_scores, anchors, min_score=0.5):
    rb = np.asarray(raw_boxes, np.float32).reshape(NUM_ANCHORS, 12)
    rs = np.asarray(raw_scores, np.float32).reshape(NUM_ANCHORS)
    s = np.float32(POSE_SIZE)
    ax, ay = anchors[:, 0], anchors[:, 1]
    xc, yc = rb[:, 0] / s + ax, rb[:, 1] / s + ay
    w, h = rb[:, 2] / s, rb[:, 3] / s
    kx, ky = rb[:, 4::2] / s + ax[:, None], rb[:, 5::2] / s + ay[:, None]
    sc = np.clip(rs, -100.0, 100.0).astype(np.float32)
    sc = (1.0 / (1.0 + np.exp(-sc.astype(np.float64)))).astype(np.float32)
    out = []
    for i in range(NUM_ANCHORS):
        if not (sc[i] >= min_score):
            continue
        box = np.array([xc[i] - w[i] / 2, yc[i] - h[i] / 2, xc[i] + w[i] / 2, yc[i] + h[i] / 2], np.float32)
        if not (box[2] - box[0] >= 0 and box[3] - box[1] >= 0):
            continue
        out.append({'score': float(sc[i]), 'box': box.astype(np.float64),
                    'kp': np.stack([kx[i], ky[i]], 1).astype(np.float64), 'anchor': i})
    return out


def crop(img, roi, n, border, signed):
    lroi, pad = R.pad_roi(roi, n, n)
    x = R.warp_roi(img, lroi, n, n, border)
    if signed:
        x = x * np.float32(2) - np.float32(1)
    return x, lroi, pad


def align_rect(p0, p1, target_deg):
    (x0, y0), (x1, y1) = p0, p1
    side = 2 * math.hypot(x1 - x0, y1 - y0)
    rot = R.normalize_radians(math.radians(target_deg) - math.atan2(-(y1 - y0), x1 - x0))
    return (x0, y0, side, side, rot)


def rect_transform(r, scale, shift_x=0.0, shift_y=0.0):
    cx, cy, w, h, rot = R.rect_transform(r, scale, shift_x, shift_y)
    return (cx, cy, w, h, R.normalize_radians(rot))


def pose_detections(img, runtime, model, anchors, min_score=0.5):
    h, w = img.shape[:2]
    x, lroi, pad = crop(img, R.full_frame_roi(w, h), POSE_SIZE, 'zero', True)
    outs = [np.asarray(o, np.float32) for o in runtime.infer(model, x[None])]
    raw_boxes = next(o for o in outs if o.size == NUM_ANCHORS * 12).reshape(NUM_ANCHORS, 12)
    raw_scores = next(o for o in outs if o.size == NUM_ANCHORS).reshape(NUM_ANCHORS)
    dets = decode(raw_boxes, raw_scores, anchors, min_score)
    kept = R.weighted_nms(dets, 0.3)
    px = [R.to_image(d, lroi, pad) for d in kept]
    return px, {'input': x, 'raw_boxes': raw_boxes, 'raw_scores': raw_scores, 'decoded': dets, 'nms': kept,
                'roi': lroi, 'padding': pad}


def person_roi(det):
    return rect_transform(align_rect(det['kp_px'][0], det['kp_px'][1], 90.0), 1.25)


def sigmoid(x):
    return (1.0 / (1.0 + np.exp(-np.asarray(x, np.float32).astype(np.float64)))).astype(np.float32)


def refine_from_heatmap(lm, heat, kernel=7, min_conf=0.5):
    """RefineLandmarksFromHeatmap on tensor-unit landmarks (x, y in [0,1]);
    the calculator's range check tests the column against the height."""
    hh, ww, c = heat.shape
    out = lm.copy()
    off = (kernel - 1) // 2
    conf_all = sigmoid(heat)
    for i in range(len(lm)):
        col, row = int(np.float32(lm[i, 0]) * np.float32(ww)), int(np.float32(lm[i, 1]) * np.float32(hh))
        if col < 0 or col >= ww or row < 0 or col >= hh:
            continue
        r0, r1 = max(0, row - off), min(hh, row + off + 1)
        c0, c1 = max(0, col - off), min(ww, col + off + 1)
        conf = conf_all[r0:r1, c0:c1, i].astype(np.float64)
        if conf.size == 0:
            continue
        s = conf.sum()
        if conf.max() >= min_conf and s > 0:
            rows, cols = np.mgrid[r0:r1, c0:c1]
            out[i, 0] = (cols * conf).sum() / ww / s
            out[i, 1] = (rows * conf).sum() / hh / s
    return out


def project(u, v, z, roi, pad):
    """LandmarkLetterboxRemoval + LandmarkProjection of tensor-unit points."""
    cx, cy, w, h, rot = roi
    l, t, r, b = pad
    u = (np.asarray(u, np.float64) - l) / (1 - l - r) - 0.5
    v = (np.asarray(v, np.float64) - t) / (1 - t - b) - 0.5
    z = np.asarray(z, np.float64) / (1 - l - r)
    c, s = math.cos(rot), math.sin(rot)
    return np.stack([(c * u - s * v) * w + cx, (s * u + c * v) * h + cy, z * w], -1)


def pose_project(raw, heat, lroi, pad):
    p = np.asarray(raw, np.float32).reshape(39, 5)
    n = np.float32(POSE_LM_SIZE)
    lm = np.stack([p[:, 0] / n, p[:, 1] / n, p[:, 2] / n, sigmoid(p[:, 3]), sigmoid(p[:, 4])], 1).astype(np.float64)
    if heat is not None:
        lm = refine_from_heatmap(lm, np.asarray(heat, np.float32).reshape(64, 64, 39))
    xyz = project(lm[:, 0], lm[:, 1], lm[:, 2], lroi, pad)
    return np.concatenate([xyz, lm[:, 3:]], 1)


def pose_landmarks(img, roi, runtime, model):
    x, lroi, pad = crop(img, roi, POSE_LM_SIZE, 'replicate', False)
    outs = [np.asarray(o, np.float32) for o in runtime.infer(model, x[None])]
    raw = next(o for o in outs if o.size == 195).ravel()
    flag = float(next(o for o in outs if o.size == 1).ravel()[0])
    heat = next(o for o in outs if o.size == 64 * 64 * 39)
    return {'raw': raw, 'heatmap': heat.reshape(64, 64, 39), 'presence': flag, 'lroi': lroi, 'padding': pad,
            'landmarks': pose_project(raw, heat, lroi, pad), 'input': x}


def next_roi(lm):
    return rect_transform(align_rect(lm[33, :2], lm[34, :2], 90.0), 1.25)


def hand_rect_from_pose(wrist, pinky, index):
    f = np.float32
    mx = (f(2) * f(index[0]) + f(pinky[0])) / f(3)
    my = (f(2) * f(index[1]) + f(pinky[1])) / f(3)
    dx, dy = float(mx) - float(wrist[0]), float(my) - float(wrist[1])
    side = 2 * math.hypot(dx, dy)
    return (float(mx), float(my), side, side, R.normalize_radians(math.pi / 2 - math.atan2(-dy, dx)))


def recrop_rect(raw, lroi, pad):
    p = np.asarray(raw, np.float32).reshape(2, 2) / np.float32(RECROP_SIZE)
    pts = project(p[:, 0], p[:, 1], np.zeros(2), lroi, pad)
    return rect_transform(align_rect(pts[0, :2], pts[1, :2], -90.0), 1.0, 0.0, -0.1)


def hand_from_pose(img, lm, side, runtime, recrop_model, hand_model, min_presence=0.5):
    wi, pi, ii = SIDES[side]
    if not (lm[wi, 3] > 0.1):
        return None
    pose_roi = hand_rect_from_pose(lm[wi], lm[pi], lm[ii])
    big = rect_transform(pose_roi, 2.7, 0.0, -0.1)
    x, lbig, pad = crop(img, big, RECROP_SIZE, 'replicate', False)
    raw = np.asarray(runtime.infer(recrop_model, x[None])[0], np.float32).ravel()
    roi = recrop_rect(raw, lbig, pad)
    lh = R.landmark_hand(img, roi, runtime, hand_model)
    found = lh['presence'] >= min_presence
    if found:
        box = lh['box']
    else:
        cx, cy, w, h, rot = pose_roi
        c, s = abs(math.cos(rot)), abs(math.sin(rot))
        hx, hy = (w * c + h * s) / 2, (w * s + h * c) / 2
        box = np.array([cx - hx, cy - hy, cx + hx, cy + hy])
    return {'side': side, 'is_right': side == 'right', 'body_only': not found, 'box': box,
            'landmarks': lh['landmarks'] if found else None, 'presence': lh['presence'],
            'handedness': lh['handedness_raw'], 'wrist_visibility': float(lm[wi, 3]), 'pose_roi': pose_roi,
            'big_roi': big, 'recrop_raw': raw, 'recrop_input': x, 'roi': roi}


def body(img, runtime, models, max_persons=1, anchors=None):
    """The whole pass: (hands, persons). models: dict with pose_detection,
    pose_landmark, hand_recrop, hand_landmark paths."""
    if anchors is None:
        anchors = pose_anchors()
    dets, inter = pose_detections(img, runtime, models['pose_detection'], anchors)
    persons, hands = [], []
    for d in dets[:max_persons]:
        roi = person_roi(d)
        if not (roi[2] > 0):
            continue
        pl = pose_landmarks(img, roi, runtime, models['pose_landmark'])
        if not (pl['presence'] >= 0.5):
            continue
        person = len(persons)
        persons.append({'det': d, 'roi': roi, **pl})
        for side in ('left', 'right'):
            hd = hand_from_pose(img, pl['landmarks'], side, runtime, models['hand_recrop'], models['hand_landmark'])
            if hd is not None:
                hands.append({'person': person, **hd})
    return hands, persons, inter
