"""Test videos for tests/test_video*.py, made from the annotated photos
(../shared/images) with Debian's ffmpeg CLI: frames are drawn in numpy
and piped in as raw RGB, so every test knows what each frame shows.

Kept small (240-320 px wide, tens of frames) so the suite stays fast,
also under ASan.
"""

import json
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from detect.common import shared_images

FFMPEG = shutil.which("ffmpeg")
FFPROBE = shutil.which("ffprobe")


def need_ffmpeg():
    if not FFMPEG or not FFPROBE:
        pytest.fail("the ffmpeg and ffprobe commands are missing (Debian package ffmpeg; scripts/deps.sh)")


def photo(name, width):
    """A photo scaled to `width` (even height), as uint8 RGB."""
    im = Image.open(shared_images() / name).convert("RGB")
    h = int(round(im.height * width / im.width / 2)) * 2
    return np.asarray(im.resize((width, h), Image.BILINEAR))


def encode(frames, path, fps=30, codec="libx264", extra=()):
    """Raw RGB frames (a list of equal-size uint8 arrays) -> a video file."""
    need_ffmpeg()
    h, w = frames[0].shape[:2]
    if codec == "png":  # lossless RGB: decoded frames equal these bit for bit
        enc = ["-c:v", "png", "-pix_fmt", "rgb24"]
    elif codec == "libx264":
        enc = ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast", "-crf", "18"]
    else:
        enc = ["-c:v", codec]
    cmd = [FFMPEG, "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", f"{w}x{h}", "-r", str(fps),
           "-i", "-", *enc, *extra, str(path)]
    data = b"".join(np.ascontiguousarray(f, np.uint8).tobytes() for f in frames)
    subprocess.run(cmd, input=data, check=True, timeout=300)
    return path


def still(img, n):
    return [img] * n


def noisy_still(img, n, sigma=4.0, seed=0):
    """img held for n frames with a camera's noise: Gaussian, sigma levels."""
    rng = np.random.RandomState(seed)
    return [np.clip(img + rng.normal(0, sigma, img.shape), 0, 255).astype(np.uint8) for _ in range(n)]


def pan_zoom(img, n, size):
    """A window of `size` (w, h) moving slowly across img and zooming in a
    little: each frame the crop, resized back to `size`."""
    H, W = img.shape[:2]
    w0, h0 = size
    out = []
    pil = Image.fromarray(img)
    for i in range(n):
        s = 1.0 - 0.15 * i / max(n - 1, 1)          # zoom in by 15 %
        cw, ch = w0 * s, h0 * s
        x0 = (W - cw) * (0.2 + 0.6 * i / max(n - 1, 1))  # pan across
        y0 = (H - ch) * 0.5
        out.append(np.asarray(pil.resize(size, Image.BILINEAR, box=(x0, y0, x0 + cw, y0 + ch))))
    return out


def slide(img, offsets, fill=128):
    """img shifted right by each offset (pixels; negative: left) on a grey canvas."""
    W = img.shape[1]
    out = []
    for o in offsets:
        f = np.full_like(img, fill)
        o = int(o)
        s0, s1 = max(0, -o), min(W, W - o)
        if s1 > s0:
            f[:, s0 + o:s1 + o] = img[:, s0:s1]
        out.append(f)
    return out


def tag_rotation(src, dst):
    """A copy of src whose stream says "rotate 90" (FFmpeg stores that as a
    display matrix of 90 degrees counterclockwise)."""
    need_ffmpeg()
    subprocess.run([FFMPEG, "-v", "error", "-y", "-i", str(src), "-c", "copy", "-metadata:s:v:0", "rotate=90",
                    str(dst)], check=True, timeout=120)
    return dst


def probe_frames(path):
    """Presentation times (s) of the decoded frames, as ffprobe reports them."""
    need_ffmpeg()
    out = subprocess.run([FFPROBE, "-v", "error", "-select_streams", "v:0", "-show_entries", "frame=pts_time",
                          "-of", "json", str(path)], check=True, stdout=subprocess.PIPE, timeout=120).stdout
    return [float(f["pts_time"]) for f in json.loads(out)["frames"]]


def decode_frames_rotated(path):
    """decode_frames of a video with 90-degree rotation metadata (which the
    ffmpeg CLI applies: the frames are the stored ones turned)."""
    return decode_frames(path, turned=True)


def decode_frames(path, turned=False):
    """Every frame of a video as uint8 RGB, decoded by the ffmpeg CLI."""
    need_ffmpeg()
    out = subprocess.run([FFPROBE, "-v", "error", "-select_streams", "v:0", "-show_entries",
                          "stream=width,height", "-of", "json", str(path)], check=True, stdout=subprocess.PIPE,
                         timeout=120).stdout
    st = json.loads(out)["streams"][0]
    w, h = st["width"], st["height"]
    if turned:
        w, h = h, w
    raw = subprocess.run([FFMPEG, "-v", "error", "-i", str(path), "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                         check=True, stdout=subprocess.PIPE, timeout=300).stdout
    return np.frombuffer(raw, np.uint8).reshape(-1, h, w, 3)


def read_lines(path):
    """A `hamer video` output: (header, frame records, summary)."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert lines and "video" in lines[0], lines[:1]
    assert "summary" in lines[-1], lines[-1:]
    return lines[0], lines[1:-1], lines[-1]["summary"]


def black_png(w, h, depth=8, channels=3):
    """A black w x h PNG (depth 8 or 16 bits, 1 grey / 3 RGB / 4 RGBA
    channels) built without holding its pixels: each row is deflated once
    and ends with a full flush (which resets the compressor), so every
    later row's bytes are the same and are repeated. A 16000x16000 RGBA
    16-bit picture (2 GB of pixels) is a 2.3 MB file made in a fraction of
    a second."""
    ctype = {1: 0, 3: 2, 4: 6}[channels]
    row = bytes(1 + w * channels * depth // 8)      # filter byte 0, then zeros
    c = zlib.compressobj(9)
    first = c.compress(row) + c.flush(zlib.Z_FULL_FLUSH)    # with the zlib header
    again = c.compress(row) + c.flush(zlib.Z_FULL_FLUSH)
    n = len(row) * h
    # an empty final stored block, then the Adler-32 of n zero bytes: a = 1, b = n
    data = first + again * (h - 1) + b"\x03\x00" + struct.pack(">I", ((n % 65521) << 16) | 1)

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    ihdr = struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", data) + chunk(b"IEND", b"")


def png_sequence(pngs, path):
    """PNG files as the frames of a Matroska video, 1 frame a second, copied
    as they are (no re-encoding: each frame keeps its own size)."""
    need_ffmpeg()
    d = Path(path).parent
    for i, data in enumerate(pngs):
        (d / f"seq_{i + 1}.png").write_bytes(data)
    subprocess.run([FFMPEG, "-v", "error", "-y", "-framerate", "1", "-i", str(d / "seq_%d.png"), "-c:v", "copy",
                    str(path)], check=True, timeout=120)
    return path
