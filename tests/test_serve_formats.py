"""`hamer serve`: what the web page asks of /v1/predict and /v1/render, on
127.0.0.1 only (the d2h2 checkpoint).

* format=all: one request, one job (the hands counted once), answers
  multipart/form-data whose parts are byte for byte the separate answers:
  "result" = format=json (but its timings), "overlay" = /v1/render with the
  same draw=, "glb" = format=glb, "obj" = format=obj.
* draw=: none leaves the photo as it was, mesh differs from all; a bad
  value, draw= on a plain predict or with side_view=1 is a 400 naming it.
* min_score / max_hands: 400 with boxes or out of range; on a real photo
  (detector) the answers equal `hamer run --min-score / --max-hands`, and
  max_hands=1 gives one hand where the default gives several.
* every image type the server decodes (WebP, AVIF, BMP, TIFF, GIF beside
  JPEG and PNG) is taken; a lossless one answers what the PNG answers.
"""

import io
import re
import subprocess

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import describe, run_hamer
from test_serve import LEFT, RIGHT, SLOW, Server, box_arg, post, strip_timings
from test_serve_limits import shared_photo

BOXES = "boxes=" + box_arg(RIGHT) + ";" + box_arg(LEFT, "left")


@pytest.fixture(scope="module")
def srv(tmp_path_factory, ckpt):
    d = tmp_path_factory.mktemp("formats")
    from conftest import textured_image
    img = textured_image()
    Image.fromarray(img).save(d / "photo.png")
    s = Server(d, ckpt("d2h2"), "--workers", 1, "--threads", 2, "--timeout-s", 120 * SLOW, "--quiet")
    s.wait_ready()
    s.dir, s.img, s.png, s.model = d, img, (d / "photo.png").read_bytes(), ckpt("d2h2")
    yield s
    s.stop()


def split_multipart(body, ctype):
    """The parts of a multipart/form-data answer, strictly: {name: (headers, bytes)}.
    Every part is CRLF-framed, named, typed; the closing delimiter ends the body."""
    m = re.fullmatch(r'multipart/form-data; boundary=([A-Za-z0-9\-]{1,70})', ctype)
    assert m, ctype
    delim = b"--" + m.group(1).encode()
    assert body.startswith(delim + b"\r\n") and body.endswith(delim + b"--\r\n"), body[:80]
    chunks = body[:-len(delim) - 4].split(b"\r\n" + delim + b"\r\n")
    chunks[0] = chunks[0][len(delim) + 2:]
    chunks[-1] = chunks[-1][:-2]            # the CRLF before the closing delimiter
    assert body[-len(delim) - 6:-len(delim) - 4] == b"\r\n"
    parts = {}
    for c in chunks:
        head, sep, data = c.partition(b"\r\n\r\n")
        assert sep, c[:80]
        headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n"))
        name = re.match(r'form-data; name="([a-z]+)"', headers["Content-Disposition"]).group(1)
        assert name not in parts
        parts[name] = (headers, data)
    return parts


def hands_done(s):
    return s.metric("hamer_hands_processed_total", result="ok")


def test_format_all_is_every_answer_from_one_job(srv):
    before = hands_done(srv)
    r = post(srv.url + "/v1/predict", srv.png, "image/png", "?format=all&vertices=1&draw=mesh,boxes&" + BOXES)
    assert r.status_code == 200, r.text
    assert hands_done(srv) - before == 2, "format=all regressed the two hands more than once"
    parts = split_multipart(r.content, r.headers["Content-Type"])
    assert list(parts) == ["result", "overlay", "glb", "obj"]
    types = {k: h["Content-Type"] for k, (h, _) in parts.items()}
    assert types == {"result": "application/json", "overlay": "image/png", "glb": "model/gltf-binary",
                     "obj": "model/obj"}

    one = post(srv.url + "/v1/predict", srv.png, "image/png", "?vertices=1&" + BOXES)
    assert one.status_code == 200 and len(one.json()["hands"]) == 2
    assert strip_timings(parts["result"][1].decode()) == strip_timings(one.text)
    ren = post(srv.url + "/v1/render", srv.png, "image/png", "?draw=mesh,boxes&" + BOXES)
    assert ren.status_code == 200 and parts["overlay"][1] == ren.content
    for fmt in ("glb", "obj"):
        one = post(srv.url + "/v1/predict", srv.png, "image/png", f"?format={fmt}&" + BOXES)
        assert one.status_code == 200 and parts[fmt][1] == one.content, fmt


def test_draw(srv):
    def render(q):
        r = post(srv.url + "/v1/render", srv.png, "image/png", "?" + q + "&" + BOXES)
        assert r.status_code == 200, r.text
        return np.asarray(Image.open(io.BytesIO(r.content)).convert("RGB"))
    np.testing.assert_array_equal(render("draw=none"), srv.img)
    mesh, full = render("draw=mesh"), render("draw=all")
    assert (mesh != srv.img).any() and (mesh != full).any()
    np.testing.assert_array_equal(full, render("draw=mesh,boxes,keypoints,labels"))
    for q, words in (("/v1/render?draw=mesh,hats", "draw takes mesh, boxes"),
                     ("/v1/render?draw=", "draw takes"),
                     ("/v1/render?side_view=1&draw=mesh", "draw= is for the overlay"),
                     ("/v1/predict?draw=mesh", "draw= is for the overlay"),
                     ("/v1/predict?format=glb&draw=mesh", "draw= is for the overlay")):
        r = post(srv.url + q.split("?")[0], srv.png, "image/png", "?" + q.split("?")[1] + "&" + BOXES)
        assert r.status_code == 400 and words in r.json()["error"], (q, r.text)


@pytest.mark.parametrize("q, words", [
    ("min_score=0.3&" + BOXES, "min_score= is the detector's"),
    ("max_hands=1&" + BOXES, "max_hands= bounds the detector's"),
    ("min_score=1", "min_score must be a number in (0, 1)"),
    ("min_score=0", "min_score must be a number in (0, 1)"),
    ("min_score=0x1p-1", "min_score must be"),
    ("max_hands=0", "max_hands must be an integer in 1..64"),
    ("max_hands=65", "max_hands must be an integer in 1..64"),
    ("max_hands=1.5", "max_hands must be"),
    ("proposals=maybe", "proposals must be auto, on or off"),
    ("proposals=on&" + BOXES, "proposals= chooses the detector's passes"),
])
def test_detector_parameters_refused(srv, q, words):
    for ep in ("/v1/predict", "/v1/render"):
        r = post(srv.url + ep, srv.png, "image/png", "?" + q)
        assert r.status_code == 400 and words in r.json()["error"], (ep, q, r.text)


def test_openapi_names_the_parameters(srv):
    doc = requests.get(srv.url + "/openapi.json", timeout=10).json()
    params = doc["components"]["parameters"]
    assert params["min_score"]["schema"]["maximum"] == 1 and params["max_hands"]["schema"]["maximum"] == 64
    for ep in ("/v1/predict", "/v1/render"):
        refs = {p.get("$ref", "").rsplit("/", 1)[-1] for p in doc["paths"][ep]["post"]["parameters"]}
        assert {"min_score", "max_hands", "draw", "proposals"} <= refs, ep
    fmt = [p for p in doc["paths"]["/v1/predict"]["post"]["parameters"] if p.get("name") == "format"][0]
    assert fmt["schema"]["enum"] == ["json", "glb", "obj", "bvh", "all"]
    assert "multipart/form-data" in doc["paths"]["/v1/predict"]["post"]["responses"]["200"]["content"]
    assert "post" in doc["paths"]["/v1/live"]


def encode(img, fmt, tmp):
    if fmt == "avif":   # Pillow here has no AVIF writer: FFmpeg's libaom, as test_image_formats does
        Image.fromarray(img).save(tmp / "src.png")
        out = tmp / "img.avif"
        proc = subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", str(tmp / "src.png"),
                               "-c:v", "libaom-av1", "-still-picture", "1", "-crf", "20", "-cpu-used", "8",
                               str(out)], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return out.read_bytes()
    b = io.BytesIO()
    kw = {"webp": dict(format="WEBP", lossless=True), "bmp": dict(format="BMP"),
          "tiff": dict(format="TIFF"), "gif": dict(format="GIF")}[fmt]
    Image.fromarray(img).save(b, **kw)
    return b.getvalue()


def test_every_decoded_image_type_taken(srv, tmp_path):
    want = strip_timings(post(srv.url + "/v1/predict", srv.png, "image/png", "?" + BOXES).text)
    for fmt in ("webp", "bmp", "tiff", "gif", "avif"):
        r = post(srv.url + "/v1/predict", encode(srv.img, fmt, tmp_path), f"image/{fmt}", "?" + BOXES)
        assert r.status_code == 200, (fmt, r.text)
        assert len(r.json()["hands"]) == 2
        if fmt in ("webp", "bmp", "tiff"):      # lossless: the very pixels
            assert strip_timings(r.text) == want, fmt
    r = post(srv.url + "/v1/predict", srv.png, "image/x-icon", "?" + BOXES)
    assert r.status_code == 415 and "image/webp, image/avif, image/bmp" in r.json()["error"]


@pytest.mark.slow
def test_detector_parameters_equal_run(srv, tmp_path):
    photo = shared_photo()
    body = photo.read_bytes()
    counts = {}
    for q, args in (("", []), ("max_hands=1", ["--max-hands", "1"]), ("min_score=0.9", ["--min-score", "0.9"]),
                    ("proposals=on", ["--proposals", "on"]), ("proposals=off", ["--proposals", "off"])):
        out = tmp_path / "run.json"
        proc = run_hamer(["run", "--model", srv.model, "--image", photo, "--output", out, *args])
        assert proc.returncode in (0, 3, 4), describe(proc)
        r = post(srv.url + "/v1/predict", body, "image/jpeg", "?" + q if q else "")
        assert r.status_code == 200, r.text
        assert strip_timings(r.text) == strip_timings(out.read_text()), q
        counts[q] = len(r.json()["hands"])
    assert counts[""] >= 2 and counts["max_hands=1"] == 1, counts
    assert counts["min_score=0.9"] <= counts[""], counts
