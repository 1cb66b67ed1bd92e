"""Photos in the formats a user is likely to drop, through the library's one
bounded decode path (src/format/image.c, image_ext.c; tests/c/tool_image
decodes with it, so the checks run under the sanitizers too):

- WebP (Debian's libwebp; lossless and lossy, with alpha): as OpenCV's
  imread gives it (libwebp too): bit for bit;
- BMP and TIFF (FFmpeg's decoders): bit for bit with OpenCV's imread
  (24-bit, 8-bit palette, grey, with alpha: alpha dropped);
- GIF: the first frame, bit for bit with Pillow's (palette expanded);
- AVIF (FFmpeg's mov demuxer and libdav1d): within 3 levels of the ffmpeg
  command-line decoder's RGB of the same file (swscale's rounding paths
  differ), and close to the photo it was encoded from;
- the content decides, never the name: every format saved as `.jpg` (and
  a JPEG as `.png`) decodes the same; hamer detect finds the same hands in
  a WebP copy of a photo as in the photo;
- hostile variants: every format cut at 10 points and with a huge declared
  size (70000 x 70000, or 65535 x 65535 = 4.3 G pixels) is refused with
  one line naming the file and format, before any pixels are allocated
  (the test runs under ASan too); formats recognised but not read (HEIF,
  animated WebP) are named.
"""

import os
import subprocess
import tempfile

import numpy as np
import pytest

from conftest import BUILD, REPO, SANITIZE, require_tool

PHOTO = REPO.parent / "shared" / "images" / "wilor_cooking.jpg"


class DecodeError(Exception):
    pass


def read_image(src):
    """The library's RGB of a file (path) or of bytes; DecodeError with its
    message when it refuses."""
    with tempfile.TemporaryDirectory() as d:
        if isinstance(src, (bytes, bytearray)):
            p = os.path.join(d, "img.jpg")
            with open(p, "wb") as f:
                f.write(src)
            src = p
        out = os.path.join(d, "out.npz")
        r = subprocess.run([str(require_tool("tool_image")), str(src), out], capture_output=True, text=True,
                           timeout=120 * (4 if SANITIZE else 1))
        if r.returncode == 1:
            assert r.stderr.startswith("tool_image: ") and r.stderr.count("\n") == 1, r.stderr
            raise DecodeError(r.stderr[len("tool_image: "):].strip())
        assert r.returncode == 0, r.stderr
        rgb = np.load(out)["rgb"]
        # the size the header declares (the server's bound before decoding) is the size decoded
        # (a JPEG's EXIF orientation may turn it)
        head = r.stdout.split()
        assert head[0] == "header" and head[1] != "none", r.stdout   # every test image states its size
        w, h = int(head[1]), int(head[2])
        assert (h, w) == rgb.shape[:2] or (head[3] == "JPEG" and (w, h) == rgb.shape[:2]), (r.stdout, rgb.shape)
        return rgb


def bgr():
    import cv2
    im = cv2.imread(str(PHOTO), cv2.IMREAD_COLOR)
    assert im is not None
    return im


def cv_rgb(path):
    import cv2
    return np.ascontiguousarray(cv2.imread(str(path), cv2.IMREAD_COLOR)[:, :, ::-1])


def write_cv(path, img, params=()):
    import cv2
    assert cv2.imwrite(str(path), img, list(params)), path
    return path


def ffmpeg(*args):
    r = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *map(str, args)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def avif(tmp_path, img):
    png = write_cv(tmp_path / "src.png", img)
    out = tmp_path / "img.avif"
    ffmpeg("-i", png, "-c:v", "libaom-av1", "-still-picture", "1", "-crf", "20", "-cpu-used", "8", out)
    return out


def decode_error(data):
    with pytest.raises(DecodeError) as e:
        read_image(data)
    msg = str(e.value)
    assert "\n" not in msg, msg
    return msg


def test_webp(tmp_path):
    import cv2
    im = bgr()
    for q in (101, 80):  # lossless, lossy
        p = write_cv(tmp_path / ("q%d.webp" % q), im, (cv2.IMWRITE_WEBP_QUALITY, q))
        np.testing.assert_array_equal(read_image(str(p)), cv_rgb(p))
    rgba = np.dstack([im, np.linspace(0, 255, im.size // 3).astype(np.uint8).reshape(im.shape[:2])])
    p = write_cv(tmp_path / "alpha.webp", rgba, (cv2.IMWRITE_WEBP_QUALITY, 101))
    np.testing.assert_array_equal(read_image(str(p)), cv_rgb(p))  # alpha dropped, as imread


def test_bmp_tiff(tmp_path):
    im = bgr()
    grey = np.ascontiguousarray(im[:, :, 1])
    rgba = np.dstack([im, np.full(im.shape[:2], 128, np.uint8)])
    cases = [("rgb.bmp", im), ("grey.bmp", grey), ("rgb.tiff", im), ("grey.tiff", grey), ("rgba.tiff", rgba)]
    for name, a in cases:
        p = write_cv(tmp_path / name, a)
        np.testing.assert_array_equal(read_image(str(p)), cv_rgb(p), err_msg=name)
    from PIL import Image
    pal = Image.fromarray(im[:, :, ::-1]).quantize(64)
    pal.save(tmp_path / "pal.bmp")
    np.testing.assert_array_equal(read_image(str(tmp_path / "pal.bmp")), cv_rgb(tmp_path / "pal.bmp"))


def test_gif_first_frame(tmp_path):
    from PIL import Image
    im = bgr()[:, :, ::-1]
    frames = [Image.fromarray(im).quantize(200), Image.fromarray(np.ascontiguousarray(im[::-1])).quantize(200)]
    p = tmp_path / "anim.gif"
    frames[0].save(p, save_all=True, append_images=frames[1:], duration=100, loop=0)
    want = np.asarray(Image.open(p).convert("RGB"))
    np.testing.assert_array_equal(read_image(str(p)), want)


def test_avif(tmp_path):
    im = bgr()
    p = avif(tmp_path, im)
    got = read_image(str(p))
    ref = tmp_path / "ref.png"
    ffmpeg("-i", p, "-frames:v", "1", "-pix_fmt", "rgb24", ref)
    want = cv_rgb(ref)
    assert got.shape == want.shape
    assert np.abs(got.astype(int) - want).max() <= 3
    assert np.abs(got.astype(float) - im[:, :, ::-1]).mean() < 4  # the photo, lossy


def test_content_decides(tmp_path):
    """Each format under a wrong name decodes as its content says."""
    import cv2
    im = bgr()
    files = {"webp": write_cv(tmp_path / "a.webp", im, (cv2.IMWRITE_WEBP_QUALITY, 90)),
             "bmp": write_cv(tmp_path / "a.bmp", im), "tiff": write_cv(tmp_path / "a.tiff", im),
             "avif": avif(tmp_path, im), "jpeg": write_cv(tmp_path / "a.jpeg", im)}
    for kind, p in files.items():
        wrong = tmp_path / ("really_%s.%s" % (kind, "png" if kind == "jpeg" else "jpg"))
        wrong.write_bytes(p.read_bytes())
        np.testing.assert_array_equal(read_image(str(wrong)), read_image(str(p)))


def test_detect_webp_named_jpg(tmp_path):
    """hamer detect on a WebP saved as .jpg (what a browser's "save image"
    often gives): the same hands as on a lossless copy's source."""
    import cv2
    src = REPO.parent / "shared" / "images" / "hamer_example_5.jpg"
    web = tmp_path / "photo.jpg"
    write_cv(tmp_path / "x.webp", cv2.imread(str(src)), (cv2.IMWRITE_WEBP_QUALITY, 101))
    web.write_bytes((tmp_path / "x.webp").read_bytes())
    boxes = []
    for p in (src, web):
        out = tmp_path / (p.stem + ".json")
        r = subprocess.run([str(BUILD / "hamer"), "detect", "--image", str(p), "--output", str(out), "--single-pass",
                            "--body", "off"], capture_output=True, text=True, timeout=300 * (4 if SANITIZE else 1))
        assert r.returncode == 0, r.stderr
        import json
        boxes.append([h["bbox"] for h in json.loads(out.read_text())["hands"]])
    assert len(boxes[0]) == len(boxes[1]) == 2
    np.testing.assert_allclose(boxes[0], boxes[1], atol=0.5)


def hostile_files(tmp_path):
    """(name, bytes) of each format whole, for the cuts."""
    import cv2
    im = bgr()[:120, :160]
    from PIL import Image
    Image.fromarray(np.ascontiguousarray(im[:, :, ::-1])).quantize(32).save(tmp_path / "h.gif")
    return {"WebP": write_cv(tmp_path / "h.webp", im, (cv2.IMWRITE_WEBP_QUALITY, 90)).read_bytes(),
            "BMP": write_cv(tmp_path / "h.bmp", im).read_bytes(),
            "TIFF": write_cv(tmp_path / "h.tiff", im).read_bytes(),
            "GIF": (tmp_path / "h.gif").read_bytes(),
            "AVIF": avif(tmp_path, im).read_bytes()}


def test_truncated(tmp_path):
    for fmt, data in hostile_files(tmp_path).items():
        read_image(data)  # whole: fine
        for k in range(1, 11):
            cut = data[:len(data) * k // 11]
            msg = decode_error(cut)
            assert fmt in msg or "not an image" in msg, (fmt, k, msg)


def huge(fmt, data):
    """The file with a declared size of 70000 x 70000 (GIF: 65535 x 65535,
    its largest)."""
    b = bytearray(data)
    if fmt == "BMP":
        b[18:22] = (70000).to_bytes(4, "little")
        b[22:26] = (70000).to_bytes(4, "little")
    elif fmt == "GIF":
        b[6:10] = (65535).to_bytes(2, "little") * 2
    elif fmt == "TIFF":
        le = b[:2] == b"II"
        ifd = int.from_bytes(b[4:8], "little" if le else "big")
        n = int.from_bytes(b[ifd:ifd + 2], "little" if le else "big")
        for i in range(n):
            e = ifd + 2 + 12 * i
            tag = int.from_bytes(b[e:e + 2], "little" if le else "big")
            if tag in (256, 257):
                b[e + 2:e + 4] = (4).to_bytes(2, "little" if le else "big")
                b[e + 8:e + 12] = (70000).to_bytes(4, "little" if le else "big")
    elif fmt == "WebP":
        # a lossless (VP8L) header: 14-bit width-1 and height-1
        return b"RIFF" + (21).to_bytes(4, "little") + b"WEBPVP8L" + (9).to_bytes(4, "little") + \
            bytes([0x2f]) + (((16383 - 1) | ((16383 - 1) << 14)).to_bytes(4, "little")) + b"\0\0\0\0"
    elif fmt == "AVIF":
        i = b.find(b"ispe")
        assert i > 0
        b[i + 8:i + 12] = (70000).to_bytes(4, "big")
        b[i + 12:i + 16] = (70000).to_bytes(4, "big")
    return bytes(b)


def test_huge_dimensions(tmp_path):
    for fmt, data in hostile_files(tmp_path).items():
        msg = decode_error(huge(fmt, data))
        assert fmt in msg and ("megapixel" in msg or "over" in msg or "corrupt" in msg), (fmt, msg)


def test_named_but_not_read(tmp_path):
    assert "HEIF/MP4" in decode_error(b"\0\0\0\x18ftypheic\0\0\0\0mif1heic")
    from PIL import Image
    im = bgr()[:64, :64, ::-1]
    p = tmp_path / "anim.webp"
    Image.fromarray(np.ascontiguousarray(im)).save(p, save_all=True,
                                                   append_images=[Image.fromarray(np.ascontiguousarray(im[::-1]))])
    if b"ANIM" in p.read_bytes():
        assert "animated WebP" in decode_error(p.read_bytes())
    assert "not an image" in decode_error(b"hello, this is text")
