"""``hamer crop`` against the official preprocessing, Pillow and the decoders.

* warp: the official demo's pipeline is transcribed below from
  hamer/datasets/vitdet_dataset.py and utils.py (ViTDetDataset.__getitem__,
  expand_to_aspect_ratio, gen_trans_from_patch_cv, generate_image_patch_cv2)
  and run with Debian's OpenCV 4.6 and scikit-image. Crops that skip the blur
  must be bit-identical; blurred ones equal within 1e-5 (normalised units;
  in practice they are identical too).
* pad: grey-padded square + Pillow's BILINEAR resize + mirror, built with
  Pillow: bit-identical.
* Decoding: the crop of a 96x128 box at rescale 2 with an integer centre is
  an exact copy of a 192x256 window of pixels, so tiling the image with such
  boxes (``--u8``) reads back the decoded image through the CLI. JPEGs must
  decode exactly as Pillow (same libjpeg-turbo) and OpenCV do, EXIF
  orientation applied; PNGs exactly as cv2.imread(IMREAD_COLOR).
* Bad input: non-zero exit, exactly one line on stderr, no output file.
"""

import io
import struct
import zlib

import cv2
import numpy as np
import pytest
from PIL import Image, ImageOps
from skimage.filters import gaussian

from conftest import describe, run_hamer

MEAN = 255.0 * np.array([0.485, 0.456, 0.406])
STD = 255.0 * np.array([0.229, 0.224, 0.225])
GREY = (124, 116, 104)
WARP_BLUR_TOL = 1e-5


# ---------------------------------------------------------------------------
# The official pipeline (transcribed; rot = 0, scale = 1, BBOX_SHAPE [192, 256])
# ---------------------------------------------------------------------------

def expand_to_aspect_ratio(input_shape, target_aspect_ratio):
    w, h = input_shape
    w_t, h_t = target_aspect_ratio
    if h / w < h_t / w_t:
        h_new = max(w * h_t / w_t, h)
        w_new = w
    else:
        h_new = h
        w_new = max(h * w_t / h_t, w)
    return np.array([w_new, h_new])


def rotate_2d(pt_2d, rot_rad):
    x, y = pt_2d[0], pt_2d[1]
    sn, cs = np.sin(rot_rad), np.cos(rot_rad)
    return np.array([x * cs - y * sn, x * sn + y * cs], dtype=np.float32)


def gen_trans_from_patch_cv(c_x, c_y, src_width, src_height, dst_width, dst_height, scale, rot):
    src_w = src_width * scale
    src_h = src_height * scale
    src_center = np.zeros(2)
    src_center[0] = c_x
    src_center[1] = c_y
    rot_rad = np.pi * rot / 180
    src_downdir = rotate_2d(np.array([0, src_h * 0.5], dtype=np.float32), rot_rad)
    src_rightdir = rotate_2d(np.array([src_w * 0.5, 0], dtype=np.float32), rot_rad)
    dst_center = np.array([dst_width * 0.5, dst_height * 0.5], dtype=np.float32)
    dst_downdir = np.array([0, dst_height * 0.5], dtype=np.float32)
    dst_rightdir = np.array([dst_width * 0.5, 0], dtype=np.float32)
    src = np.zeros((3, 2), dtype=np.float32)
    src[0, :] = src_center
    src[1, :] = src_center + src_downdir
    src[2, :] = src_center + src_rightdir
    dst = np.zeros((3, 2), dtype=np.float32)
    dst[0, :] = dst_center
    dst[1, :] = dst_center + dst_downdir
    dst[2, :] = dst_center + dst_rightdir
    return cv2.getAffineTransform(np.float32(src), np.float32(dst))


def box_geometry(box, rescale):
    """ViTDetDataset.__init__ and the top of __getitem__: float32 centre,
    bbox_size with NumPy's own dtype promotions."""
    boxes = np.array([box], dtype=np.float32)
    center = (boxes[:, 2:4] + boxes[:, 0:2]) / 2.0
    scale = rescale * (boxes[:, 2:4] - boxes[:, 0:2]) / 200.0
    bbox_size = expand_to_aspect_ratio(scale[0] * 200, target_aspect_ratio=[192, 256]).max()
    return center[0][0], center[0][1], bbox_size


def official_crop(rgb, box, right, rescale=2.0):
    """Normalised float32 [3,256,192] crop and whether the blur ran; the image
    is handed over as OpenCV holds it (BGR)."""
    center_x, center_y, bbox_size = box_geometry(box, rescale)
    cvimg = np.ascontiguousarray(rgb[:, :, ::-1])
    downsampling_factor = (bbox_size * 1.0) / 256
    downsampling_factor = downsampling_factor / 2.0
    blurred = downsampling_factor > 1.1
    if blurred:
        cvimg = gaussian(cvimg, sigma=(downsampling_factor - 1) / 2, channel_axis=2, preserve_range=True)
    img = cvimg
    img_width = img.shape[1]
    if not right:
        img = img[:, ::-1, :]
        center_x = img_width - center_x - 1
    trans = gen_trans_from_patch_cv(center_x, center_y, bbox_size, bbox_size, 256, 256, 1.0, 0)
    patch = cv2.warpAffine(img, trans, (256, 256), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                           borderValue=0)
    patch = patch[:, :, ::-1]
    out = np.transpose(patch.copy(), (2, 0, 1)).astype(np.float32)
    for c in range(3):
        out[c, :, :] = (out[c, :, :] - MEAN[c]) / STD[c]
    return out[:, :, 32:-32], blurred


def pad_crop(rgb, box, right, rescale=2.0):
    """The pad mode's definition: an n x n square, n = round(bbox_size), top
    left at round(centre - n/2) (halves up), grey outside the image, Pillow
    BILINEAR to 256x256, mirrored for left hands, centre 192 columns."""
    cx, cy, bb = box_geometry(box, rescale)
    n = max(1, int(np.floor(bb + 0.5)))
    x0 = int(np.floor(float(cx) - 0.5 * n + 0.5))
    y0 = int(np.floor(float(cy) - 0.5 * n + 0.5))
    H, W = rgb.shape[:2]
    canvas = np.empty((n, n, 3), np.uint8)
    canvas[:] = GREY
    ix0, iy0, ix1, iy1 = max(x0, 0), max(y0, 0), min(x0 + n, W), min(y0 + n, H)
    if ix1 > ix0 and iy1 > iy0:
        canvas[iy0 - y0:iy1 - y0, ix0 - x0:ix1 - x0] = rgb[iy0:iy1, ix0:ix1]
    im = Image.fromarray(canvas).resize((256, 256), Image.BILINEAR)
    if not right:
        im = im.transpose(Image.FLIP_LEFT_RIGHT)
    a = np.asarray(im)[:, 32:224]
    out = np.transpose(a, (2, 0, 1)).astype(np.float32)
    for c in range(3):
        out[c] = (out[c] - MEAN[c]) / STD[c]
    return out


# ---------------------------------------------------------------------------
# Inputs and the CLI
# ---------------------------------------------------------------------------

def make_image(h, w, seed):
    """Noise over gradients and a checker: every region differs."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    a = np.stack([xx * 255 // max(w - 1, 1), yy * 255 // max(h - 1, 1),
                  ((xx // 7 + yy // 5) % 2) * 200 + (xx + yy) % 50], -1).astype(np.int32)
    a += rng.integers(-40, 41, (h, w, 3))
    return np.clip(a, 0, 255).astype(np.uint8)


def save_png(path, rgb):
    Image.fromarray(rgb).save(path)
    return path


def random_boxes(rng, w, h, n):
    """Boxes inside, crossing and partly beyond the frame, tiny to huge (up
    to 4x the image), both hands, odd aspect ratios."""
    boxes = []
    for i in range(n):
        kind = i % 5
        if kind == 0:      # tiny
            bw = float(rng.uniform(0.3, 6))
        elif kind == 4:    # huge
            bw = float(rng.uniform(1, 4) * max(w, h))
        else:
            bw = float(np.exp(rng.uniform(np.log(min(8, max(w, h))), np.log(max(w, h) + 1))))
        bh = bw * float(np.exp(rng.uniform(-1, 1)))
        if kind == 1:      # inside
            x1, y1 = rng.uniform(0, max(w - bw, 1)), rng.uniform(0, max(h - bh, 1))
        else:              # crossing or beyond the edges
            x1, y1 = rng.uniform(-0.9 * bw, w - 0.1 * bw), rng.uniform(-0.9 * bh, h - 0.1 * bh)
        boxes.append(((float(x1), float(y1), float(x1) + bw, float(y1) + bh), bool(rng.integers(0, 2))))
    return boxes


def box_arg(box, right):
    return "%r,%r,%r,%r:%s" % (*box, "right" if right else "left")


def crop_cli(tmp_path, image, boxes, mode="warp", rescale=None, u8=False):
    out = tmp_path / "crops.npy"
    if out.exists():
        out.unlink()
    args = ["crop", "--image", image, "--output", out, "--crop-mode", mode]
    if rescale is not None:
        args += ["--rescale", repr(rescale)]
    if u8:
        args.append("--u8")
    for b, r in boxes:
        args += ["--box", box_arg(b, r)]
    proc = run_hamer(args)
    assert proc.returncode == 0, "hamer crop failed: " + describe(proc)
    a = np.load(out)
    assert a.shape == ((len(boxes), 256, 192, 3) if u8 else (len(boxes), 3, 256, 192))
    assert a.dtype == (np.uint8 if u8 else np.float32)
    return a


def decode_cli(tmp_path, path, w, h):
    """The decoded image, read back through identity crops."""
    xs = sorted({min(x, max(w - 192, 0)) for x in range(0, w, 192)})
    ys = sorted({min(y, max(h - 256, 0)) for y in range(0, h, 256)})
    boxes = [((tx + 96 - 48.0, ty + 128 - 64.0, tx + 96 + 48.0, ty + 128 + 64.0), True) for ty in ys for tx in xs]
    crops = crop_cli(tmp_path, path, boxes, "warp", u8=True)
    out = np.zeros((h, w, 3), np.uint8)
    for (tx, ty), c in zip([(tx, ty) for ty in ys for tx in xs], crops):
        cw, ch = min(192, w - tx), min(256, h - ty)
        out[ty:ty + ch, tx:tx + cw] = c[:ch, :cw]
    return out


def assert_same(name, got, want):
    if not np.array_equal(got, want):
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        pytest.fail(f"{name}: {int(np.count_nonzero(d))} of {d.size} values differ, max {d.max()} at "
                    f"{np.unravel_index(int(np.argmax(d)), d.shape)}")


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("crop_images")
    out = {}
    for name, (h, w, seed) in {"odd": (517, 333, 1), "wide": (90, 700, 2), "big": (1200, 1600, 3),
                               "tiny": (3, 2, 4), "strip": (12, 2000, 5)}.items():
        rgb = make_image(h, w, seed)
        out[name] = (rgb, save_png(d / f"{name}.png", rgb))
    return out


# ---------------------------------------------------------------------------
# warp: the official pipeline
# ---------------------------------------------------------------------------

def check_warp(tmp_path, rgb, path, boxes, rescale=2.0):
    got = crop_cli(tmp_path, path, boxes, "warp", rescale=rescale)
    nblur = 0
    for i, (b, r) in enumerate(boxes):
        want, blurred = official_crop(rgb, b, r, rescale)
        if blurred:
            nblur += 1
            err = float(np.abs(got[i].astype(np.float64) - want).max())
            assert err <= WARP_BLUR_TOL, f"box {i} {b} right={r}: blurred crop max |C - official| = {err:.3g}"
        else:
            assert_same(f"box {i} {b} right={r} (no blur)", got[i], want)
    return nblur


@pytest.mark.parametrize("name", ["odd", "wide", "tiny"])
def test_warp_matches_official(hamer_bin, tmp_path, images, name):
    rgb, path = images[name]
    rng = np.random.default_rng(100 + len(name))
    h, w = rgb.shape[:2]
    boxes = random_boxes(rng, w, h, 40)
    check_warp(tmp_path, rgb, path, boxes)
    # other rescale factors, as the dataset class allows
    check_warp(tmp_path, rgb, path, boxes[:10], rescale=2.5)
    check_warp(tmp_path, rgb, path, boxes[10:16], rescale=0.7)


def test_warp_blur_matches_official(hamer_bin, tmp_path, images):
    """Boxes large enough for the anti-alias blur (bbox_size > 563 px)."""
    rgb, path = images["big"]
    rng = np.random.default_rng(7)
    boxes = []
    for size in (300, 450, 700, 1100, 2500):
        x1, y1 = rng.uniform(-0.3 * size, 1600 - 0.7 * size), rng.uniform(-0.3 * size, 1200 - 0.7 * size)
        boxes.append(((float(x1), float(y1), float(x1 + size * 0.8), float(y1 + size)), len(boxes) % 2 == 0))
    boxes.append(((10.0, 20.0, 110.0, 150.0), False))  # a small one on the same image: no blur
    assert check_warp(tmp_path, rgb, path, boxes) == 5


def test_warp_blur_long_kernel(hamer_bin, tmp_path, images):
    """A 12-pixel-high strip under a box thousands of pixels high: the
    Gaussian radius runs hundreds of pixels past both image edges."""
    rgb, path = images["strip"]
    boxes = [((-5000.0, -15000.0, 25000.0, 15000.0), True), ((100.0, 2.0, 2100.0, 10.0), False),
             ((1000.0, -40.0, 1500.0, 60.0), True)]
    assert check_warp(tmp_path, rgb, path, boxes) == 3


def test_u8_output(hamer_bin, tmp_path, images):
    """--u8 = the float crop de-normalised with round-half-up; without the
    blur it is OpenCV's uint8 patch itself."""
    rgb, path = images["odd"]
    boxes = random_boxes(np.random.default_rng(3), 333, 517, 12)
    f = crop_cli(tmp_path, path, boxes, "warp")
    u = crop_cli(tmp_path, path, boxes, "warp", u8=True)
    s32, m32 = STD.astype(np.float32), MEAN.astype(np.float32)
    want = np.floor(f.transpose(0, 2, 3, 1).astype(np.float64) * s32 + m32 + 0.5)
    assert_same("--u8 vs float", u, np.clip(want, 0, 255).astype(np.uint8))
    for i, (b, r) in enumerate(boxes):
        cx, cy, bb = box_geometry(b, 2.0)
        if bb / 512 > 1.1:
            continue
        img = rgb[:, ::-1] if not r else rgb
        cxm = rgb.shape[1] - cx - 1 if not r else cx
        patch = cv2.warpAffine(np.ascontiguousarray(img), gen_trans_from_patch_cv(cxm, cy, bb, bb, 256, 256, 1.0, 0),
                               (256, 256), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        assert_same(f"--u8 box {i}", u[i], patch[:, 32:224])


# ---------------------------------------------------------------------------
# pad: Pillow
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["odd", "wide", "tiny", "big"])
def test_pad_matches_pillow(hamer_bin, tmp_path, images, name):
    rgb, path = images[name]
    h, w = rgb.shape[:2]
    rng = np.random.default_rng(200 + len(name))
    # Pillow's padded canvas is n x n: keep it to a few thousand pixels
    boxes = [(b, r) for b, r in random_boxes(rng, w, h, 30) if max(b[2] - b[0], b[3] - b[1]) < 1.5 * max(w, h)]
    boxes = boxes[:20] if name != "big" else [(b, r) for b, r in boxes if b[3] - b[1] < 900][:6]
    for rescale in (2.0, 1.3):
        got = crop_cli(tmp_path, path, boxes, "pad", rescale=rescale)
        for i, (b, r) in enumerate(boxes):
            assert_same(f"pad box {i} {b} right={r} rescale {rescale}", got[i], pad_crop(rgb, b, r, rescale))


# ---------------------------------------------------------------------------
# Decoding
# ---------------------------------------------------------------------------

JPEG_VARIANTS = {
    "q90_420": dict(quality=90),
    "q75_444": dict(quality=75, subsampling=0),
    "q95_422": dict(quality=95, subsampling=1),
    "progressive": dict(quality=85, progressive=True),
    "optimized_q30": dict(quality=30, optimize=True),
}


@pytest.mark.parametrize("variant", sorted(JPEG_VARIANTS) + ["grey", "cv2_written"])
def test_jpeg_decode_matches_pil(hamer_bin, tmp_path, images, variant):
    rgb, _ = images["odd"]
    path = tmp_path / "in.jpg"
    if variant == "grey":
        Image.fromarray(rgb).convert("L").save(path, quality=90)
    elif variant == "cv2_written":
        cv2.imwrite(str(path), rgb[:, :, ::-1], [cv2.IMWRITE_JPEG_QUALITY, 88])
    else:
        Image.fromarray(rgb).save(path, **JPEG_VARIANTS[variant])
    with Image.open(path) as im:
        want = np.asarray(im.convert("RGB"))
    got = decode_cli(tmp_path, path, 333, 517)
    assert_same(f"JPEG {variant} vs Pillow", got, want)
    assert_same(f"JPEG {variant} vs OpenCV", got, cv2.imread(str(path), cv2.IMREAD_COLOR)[:, :, ::-1])


@pytest.mark.parametrize("orientation", range(1, 9))
def test_jpeg_exif_orientation(hamer_bin, tmp_path, images, orientation):
    rgb = images["odd"][0][:200, :130]  # not square: rotations change the shape
    exif = Image.Exif()
    exif[0x0112] = orientation
    path = tmp_path / "o.jpg"
    Image.fromarray(rgb).save(path, quality=92, exif=exif.tobytes())
    with Image.open(path) as im:
        want = np.asarray(ImageOps.exif_transpose(im).convert("RGB"))
    h, w = want.shape[:2]
    got = decode_cli(tmp_path, path, w, h)
    assert_same(f"orientation {orientation} vs Pillow exif_transpose", got, want)
    assert_same(f"orientation {orientation} vs cv2.imread", got, cv2.imread(str(path))[:, :, ::-1])


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def png_bytes(rows_by_pass, w, h, depth, ctype, interlace=0):
    """A PNG from already-packed scanlines (filter 0), one list per pass."""
    raw = b"".join(b"\0" + r for rows in rows_by_pass for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def png_adam7_rgb(rgb):
    passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
    out = []
    for x0, y0, dx, dy in passes:
        sub = rgb[y0::dy, x0::dx]
        out.append([row.tobytes() for row in sub] if sub.shape[0] and sub.shape[1] else [])
    return png_bytes(out, rgb.shape[1], rgb.shape[0], 8, 2, interlace=1)


def png_grey2(grey8):
    v = (grey8 >> 6).astype(np.uint8)  # 2-bit samples
    w = v.shape[1]
    pad = (-w) % 4
    v = np.pad(v, ((0, 0), (0, pad)))
    packed = (v[:, 0::4] << 6) | (v[:, 1::4] << 4) | (v[:, 2::4] << 2) | v[:, 3::4]
    return png_bytes([[r.tobytes() for r in packed]], w, v.shape[0], 2, 0)


PNG_VARIANTS = ["grey8", "grey16", "grey2", "grey1", "grey_alpha", "rgba8", "rgb16", "rgba16", "palette",
                "palette_trns", "palette4", "interlaced"]


@pytest.mark.parametrize("variant", PNG_VARIANTS)
def test_png_variants_match_opencv(hamer_bin, tmp_path, images, variant):
    rgb = images["odd"][0][:300, :211]
    rng = np.random.default_rng(9)
    path = tmp_path / "in.png"
    im = Image.fromarray(rgb)
    if variant == "grey8":
        im.convert("L").save(path)
    elif variant == "grey16":
        cv2.imwrite(str(path), rgb[:, :, 1].astype(np.uint16) * 257 + rng.integers(0, 256, rgb.shape[:2]).astype(np.uint16))
    elif variant == "grey2":
        path.write_bytes(png_grey2(rgb[:, :, 0]))
    elif variant == "grey1":
        im.convert("1").save(path)
    elif variant == "grey_alpha":
        im.convert("LA").save(path)
    elif variant == "rgba8":
        Image.fromarray(np.dstack([rgb, rgb[:, :, 0]])).save(path)
    elif variant == "rgb16":
        cv2.imwrite(str(path), rgb[:, :, ::-1].astype(np.uint16) * 257 + 3)
    elif variant == "rgba16":
        cv2.imwrite(str(path), np.dstack([rgb[:, :, ::-1], rgb[:, :, :1]]).astype(np.uint16) * 251)
    elif variant == "palette":
        im.quantize(200).save(path)
    elif variant == "palette_trns":
        im.quantize(64).save(path, transparency=5)
    elif variant == "palette4":
        im.quantize(16).save(path, bits=4)
    elif variant == "interlaced":
        path.write_bytes(png_adam7_rgb(rgb))
    want = cv2.imread(str(path), cv2.IMREAD_COLOR)[:, :, ::-1]
    got = decode_cli(tmp_path, path, 211, 300)
    assert_same(f"PNG {variant} vs cv2.imread", got, want)


# ---------------------------------------------------------------------------
# Bad input: one line on stderr, non-zero exit, no output file
# ---------------------------------------------------------------------------

def _bad_files(d, rgb):
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "JPEG", quality=90)
    jpg = buf.getvalue()
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, "PNG")
    png = buf.getvalue()
    rng = np.random.default_rng(1)
    files = {
        "truncated.jpg": jpg[:len(jpg) // 2],
        "no_eoi.jpg": jpg[:-2],
        "corrupt_header.jpg": jpg[:2] + bytes(rng.integers(0, 256, 60, dtype=np.uint8)) + jpg[62:],
        "truncated.png": png[:len(png) // 2],
        "no_iend.png": png[:-12],
        "bad_crc.png": png[:20] + bytes([png[20] ^ 0x40]) + png[21:],
        "text.png": b"this is not an image\n",
        "empty.jpg": b"",
        "anim.gif": b"GIF89a\x01\x00\x01\x00\x00\x00\x00;",
        "huge.png": png_bytes([[]], 20000, 6000, 8, 2),  # 120 megapixels: refused from the header
        "wide.png": png_bytes([[]], 70000, 10, 8, 2),
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    return files


BAD_IMAGES = ["truncated.jpg", "no_eoi.jpg", "corrupt_header.jpg", "truncated.png", "no_iend.png", "bad_crc.png",
              "text.png", "empty.jpg", "anim.gif", "huge.png", "wide.png", "missing.png"]

BAD_BOXES = {
    "nan": "nan,10,50,80", "inf": "10,10,inf,80", "huge_float": "10,10,1e39,80", "zero_width": "10,10,10,80",
    "negative_height": "10,80,50,10", "outside": "400,10,450,80", "outside_left": "-90,10,-1,80",
    "trailing": "10,10,50,80x", "three": "10,10,50", "five": "10,10,50,80,90", "hand": "10,10,50,80:up",
    "space": " 10,10,50,80", "empty": "", "too_big": "-10000,-10000,10000,10000",
}


def _assert_one_line_failure(proc, out, expect_code=None, must_contain=None):
    assert proc.returncode != 0, "expected failure: " + describe(proc)
    if expect_code is not None:
        assert proc.returncode == expect_code, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hamer: "), "want one stderr line: " + describe(proc)
    if must_contain:
        assert must_contain in lines[0], describe(proc)
    assert not out.exists(), "an output file was written on failure"
    assert not list(out.parent.glob(out.name + ".tmp*")), "a temporary file was left behind"


@pytest.mark.parametrize("name", BAD_IMAGES)
def test_bad_image(hamer_bin, tmp_path, images, name):
    _bad_files(tmp_path, images["odd"][0][:64, :64])
    out = tmp_path / "out.npy"
    proc = run_hamer(["crop", "--image", tmp_path / name, "--box", "1,1,20,20", "--output", out])
    _assert_one_line_failure(proc, out, 1, must_contain=name)


@pytest.mark.parametrize("case", sorted(BAD_BOXES))
def test_bad_box(hamer_bin, tmp_path, images, case):
    out = tmp_path / "out.npy"
    proc = run_hamer(["crop", "--image", images["odd"][1], "--box", "1,1,20,20", "--box", BAD_BOXES[case],
                      "--output", out])
    _assert_one_line_failure(proc, out, must_contain="box 2")


@pytest.mark.parametrize("args", [
    ["--rescale", "0"], ["--rescale", "-1"], ["--rescale", "nan"], ["--rescale", "2x"], ["--rescale", "17"],
    ["--crop-mode", "bilinear"], ["--frobnicate"], ["--output"],
])
def test_bad_usage(hamer_bin, tmp_path, images, args):
    out = tmp_path / "out.npy"
    proc = run_hamer(["crop", "--image", images["odd"][1], "--box", "1,1,20,20", "--output", out] + args)
    _assert_one_line_failure(proc, out, 2)


def test_missing_arguments_and_too_many_hands(hamer_bin, tmp_path, images):
    out = tmp_path / "out.npy"
    img = images["odd"][1]
    for args in (["--box", "1,1,20,20", "--output", out], ["--image", img, "--box", "1,1,20,20"],
                 ["--image", img, "--output", out]):
        _assert_one_line_failure(run_hamer(["crop"] + args), out, 2)
    boxes = [a for i in range(65) for a in ("--box", f"{i},1,{i + 20},20")]
    _assert_one_line_failure(run_hamer(["crop", "--image", img, "--output", out] + boxes), out, 2, "64")
    # 64 is fine
    proc = run_hamer(["crop", "--image", img, "--output", out, "--u8"] + boxes[:128])
    assert proc.returncode == 0, describe(proc)
    assert np.load(out).shape == (64, 256, 192, 3)


def test_help(hamer_bin):
    proc = run_hamer(["crop", "--help"])
    assert proc.returncode == 0 and "--crop-mode" in proc.stdout
    assert "crop" in run_hamer(["--help"]).stdout
