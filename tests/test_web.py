"""The web page of `hamer serve` (GET /, web/ installed by scripts/get_web.sh),
in a real browser: Debian's chromium, headless, WebGL on SwiftShader,
driven by playwright-core (tests/web/page.mjs; `cd tests/web && npm ci
--ignore-scripts`), against a server on 127.0.0.1 with the d2h2 fixture
(MANO inside, so the GLB works) and the hand detector.

On a shared photo (../shared/images), with the page's threshold and
maximum of hands set: one request (/v1/predict?format=all, those two in
its query) answers everything; the page shows the overlay, as many hands
as /v1/predict finds, with their handedness; the 3D view (the GLB through
three.js) has pixels off its background colour, fewer with hand 0 turned
off, and Reset view after an orbit and a zoom frames the hands as before;
the marks can be turned off and on; the downloads are named after the
photo, the GLB and OBJ are /v1/predict?format=glb's and ?format=obj's
bytes (the GLB passes the Khronos glTF validator with 0 errors and 0
warnings), RESULT.json is /v1/predict's but for timings; a box drawn on
the photo gives that one hand; an example photo (shipped with the page)
gives its hand; a file that is not an image and one over --max-body-mb
show the API's error text and nothing of the previous result stays, a
photo without hands says so; no Content-Security-Policy violation, no
script error, no request off the server. The page's load-to-result time is
printed; the screenshots go to BUILD/web-page.png and BUILD/web-error.png
(CI artifacts).

The webcam (Chromium's fake camera playing a Y4M clip of the photo): the
page sends frames to /v1/live one at a time (never two in flight), the
server tracks and regresses them, the page draws the marks over the live
picture and the hands in the 3D view; Stop ends the session. A video file
(WebM) played as a file until its hands are tracked. Screenshot: BUILD/web-live.png.

Then the server side of the page: only the listed files are served, with
their Content-Type and the page's headers; other paths (traversal,
encodings, trailing slashes, and 400 paths made at random from the
pieces of listed ones) are 404 JSON like any unknown endpoint; and
without the page's files / answers a 404 text naming scripts/get_web.sh
while the API still works. Last, scripts/get_web.sh itself: checked in
place, reinstalled whole when a file differs.
"""

import io
import json
import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import BUILD, REPO, SANITIZE
from detect.common import models_dir, shared_images
from test_serve import Server, strip_timings

WEB = Path(__file__).resolve().parent / "web"
GLTF = Path(__file__).resolve().parent / "gltf"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
PHOTO = "hamer_example_5.jpg"
BACKGROUND = (0x1B, 0x1F, 0x27)      # web/app.js BACKGROUND
SLOW = 4 if SANITIZE else 1      # client-side time allowance factor
CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:"
FILES = {"/": "text/html", "/index.html": "text/html", "/app.js": "text/javascript", "/style.css": "text/css",
         "/vendor/three.module.js": "text/javascript", "/vendor/GLTFLoader.js": "text/javascript",
         "/vendor/OrbitControls.js": "text/javascript", "/vendor/BufferGeometryUtils.js": "text/javascript",
         "/vendor/three-LICENSE.txt": "text/plain", "/vendor/nocurl.jpg": "image/jpeg",
         "/vendor/halfcurl.jpg": "image/jpeg", "/vendor/fullcurl.jpg": "image/jpeg",
         "/vendor/fingerpose-LICENSE.txt": "text/plain"}


def node():
    exe = shutil.which("node")
    if not exe or not (WEB / "node_modules" / "playwright-core").is_dir():
        pytest.fail("tests/web needs node and its packages: cd tests/web && npm ci --ignore-scripts")
    if not (GLTF / "node_modules" / "gltf-validator").is_dir():
        pytest.fail("tests/gltf needs its packages: cd tests/gltf && npm ci --ignore-scripts")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"{CHROMIUM} not found: apt-get install chromium (scripts/deps.sh), or set CHROMIUM")
    return exe


@pytest.fixture(scope="module")
def web_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("share") / "web"
    proc = subprocess.run(["bash", str(REPO / "scripts" / "get_web.sh"), str(d)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return d


@pytest.fixture(scope="module")
def server(tmp_path_factory, ckpt, web_dir):
    s = Server(tmp_path_factory.mktemp("web-serve"), ckpt("d2h2"), "--workers", 2, "--threads", 1,
               "--max-body-mb", 1, "--web", web_dir, "--detector", models_dir())
    s.wait_ready()
    yield s
    s.stop()


def off_background(png, border=6):
    """Pixels of a screenshot more than 24 levels off the background in some
    channel (a border left out: the frame's rounded corners)."""
    a = np.asarray(Image.open(png).convert("RGB"), np.int16)[border:-border, border:-border]
    return int((np.abs(a - np.array(BACKGROUND, np.int16)).max(axis=2) > 24).sum()), a.shape[0] * a.shape[1]


@pytest.mark.skipif(SANITIZE, reason="the browser's run is inference the other server tests drive under ASan "
                    "(over 70 s there against 20-40 s in Release); this file's other tests run the page's "
                    "server code there")
def test_page_in_the_browser(server, tmp_path):
    exe = node()
    photo = shared_images() / PHOTO
    assert photo.stat().st_size < 1 << 20       # under the server's --max-body-mb 1
    others = {"notes.txt": b"these are not the pixels you are looking for\n"}
    big = io.BytesIO()        # noise: no compression brings it under 1 MB
    Image.fromarray(np.random.RandomState(0).randint(0, 256, (700, 700, 3)).astype(np.uint8)).save(big, "PNG")
    others["big.png"] = big.getvalue()
    blank = io.BytesIO()      # nothing for the detector
    Image.new("RGB", (320, 240), (128, 128, 128)).save(blank, "PNG")
    others["blank.png"] = blank.getvalue()
    for name, data in others.items():
        (tmp_path / name).write_bytes(data)
    out = tmp_path / "page"
    out.mkdir()
    proc = subprocess.run([exe, str(WEB / "page.mjs"), server.url + "/", str(photo), str(out),
                           *[str(tmp_path / name) for name in others]],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=240 * SLOW,
                          cwd=WEB)
    assert proc.returncode == 0, proc.stderr[-4000:] + server.log()[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    for shot, name in (("page.png", "web-page.png"), ("error.png", "web-error.png")):
        if (out / shot).exists():
            shutil.copy(out / shot, BUILD / name)
    assert got["status_state"] == "done", got["status"]

    # one request for the photo, with the page's threshold and maximum of hands
    assert got["photo_posts"] == ["/v1/predict?format=all&draw=mesh&min_score=0.40&max_hands=3"], got["photo_posts"]

    # what the page shows is what the API answers
    body = photo.read_bytes()
    api = requests.post(server.url + "/v1/predict?min_score=0.4&max_hands=3", data=body,
                        headers={"Content-Type": "image/jpeg"}, timeout=60 * SLOW)
    assert api.status_code == 200, api.text
    hands = api.json()["hands"]
    assert len(hands) > 1 and got["hand_count"] == len(hands), (got["status"], len(hands))
    assert [r[1] for r in got["rows"]] == ["right" if h["is_right"] else "left" for h in hands]
    w, h = Image.open(photo).size
    assert got["overlay"] == {"width": w, "height": h, "hidden": False}, got["overlay"]

    # the 3D view drew the hands; a hand turned off draws fewer pixels; the
    # view reset after an orbit and a zoom is the view it started with
    assert got["rendered"] == "1"
    lit, total = off_background(out / "canvas.png")
    assert lit > 100, f"3D view: only {lit} of {total} pixels off the background"
    assert 0 < got["lit_hidden"] < got["lit"] and got["lit_shown"] == got["lit"], got
    assert got["lit_orbited"] != got["lit"] and got["lit_reset"] == got["lit"], got
    assert got["hidden_overlay_changed"] and got["marks_off_changed"] and got["marks_back"], got

    # the downloads: named after the photo, the API's bytes
    stem = photo.stem
    names = got["downloads"]
    assert names == {"#dl-json": stem + ".json", "#dl-glb": stem + ".glb", "#dl-obj": stem + ".obj",
                     "#dl-png": stem + "_overlay.png"}, names
    assert strip_timings((out / names["#dl-json"]).read_text()) == strip_timings(api.text)
    glb = requests.post(server.url + "/v1/predict?format=glb&min_score=0.4&max_hands=3", data=body,
                        headers={"Content-Type": "image/jpeg"}, timeout=60 * SLOW)
    assert glb.status_code == 200 and (out / names["#dl-glb"]).read_bytes() == glb.content
    obj = requests.post(server.url + "/v1/predict?format=obj&min_score=0.4&max_hands=3", data=body,
                        headers={"Content-Type": "image/jpeg"}, timeout=60 * SLOW)
    assert obj.status_code == 200 and (out / names["#dl-obj"]).read_bytes() == obj.content
    assert obj.text.count("\no hand_") == len(api.json()["hands"])
    png = Image.open(out / names["#dl-png"])
    assert png.size == (w, h)
    v = subprocess.run([exe, str(GLTF / "skin.mjs"), str(out / names["#dl-glb"])], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    assert v.returncode == 0, v.stderr
    check = json.loads(v.stdout)
    report = check["validator"]
    assert report["errors"] == 0 and report["warnings"] == 0, report
    assert len(check["hands"]) == len([x for x in hands if "error" not in x])

    # a box drawn on the photo: that hand, given, in one request
    assert got["drawn_boxes"] and ":left" not in got["drawn_boxes"], got["drawn_boxes"]
    assert got["drawn_status"].startswith("Done: 1 hand(s)"), got["drawn_status"]
    assert len(got["drawn_rows"]) == 1 and got["drawn_rows"][0][3] == "given", got["drawn_rows"]
    assert len(got["drawn_posts"]) == 1 and "boxes=" in got["drawn_posts"][0], got["drawn_posts"]

    # the first example photo: its hand, its name
    ex = got["example"]
    assert ex["state"] == "done" and int(ex["count"]) >= 1 and ex["json"] == "nocurl.json", ex

    # a file that is not an image, one too large: the API's own messages,
    # nothing of the previous result left; a photo without hands: said so
    shown = {o["file"]: o for o in got["others"]}
    for name, status in [("notes.txt", 400), ("big.png", 413)]:
        ctype = "image/png" if name.endswith(".png") else "image/jpeg"
        err = requests.post(server.url + "/v1/predict", data=others[name], headers={"Content-Type": ctype},
                            timeout=60 * SLOW)
        assert err.status_code == status, err.text
        o = shown[name]
        assert o["state"] == "error" and err.json()["error"] in o["text"] and f"HTTP {status}" in o["text"], o
        assert o["count"] == "" and o["overlay_hidden"] and o["rendered"] == "0" and o["json_href"] is None, o
    o = shown["blank.png"]
    assert o["state"] == "done" and o["count"] == "0" and "found no hand" in o["text"], o

    # the page kept to its Content-Security-Policy and to the server
    assert got["pageErrors"] == [], got["pageErrors"]
    # (the browser logs every answer that is not 2xx: the 400s and 413s above)
    noise = [m for m in got["console"] if not re.match(r"Failed to load resource: .* status of 4(00|13) ", m)]
    assert noise == [], noise
    strays = [u for u in got["requests"] if not u.startswith((server.url + "/", "blob:", "data:"))]
    assert strays == [], strays

    server_ms = {k: v for k, v in got["timings"]}
    print(f"\nweb page on {PHOTO} ({w}x{h}, {len(hands)} hands): load-to-result {got['result_ms']} ms in the "
          f"browser ({got['page_ms']} ms by the page: {server_ms.get('POST /v1/predict?format=all (one job)')} "
          f"for the one request); page load {got['page_load_ms']} ms; 3D view {lit} of {total} pixels lit; "
          f"glTF validator: {report['errors']} errors, {report['warnings']} warnings, {report['infos']} infos, "
          f"{report['hints']} hints")


@pytest.mark.skipif(SANITIZE, reason="a browser session's inference; the live endpoint's server code runs under "
                    "ASan in test_serve_live.py")
def test_webcam_and_video_file_in_the_browser(server, tmp_path):
    """The page's live mode in Chromium: its fake camera plays a Y4M clip
    of the photo (one second, looped): frames go to /v1/live one at a time,
    hands come back tracked and regressed, drawn over the picture and in the
    3D view. Then a WebM of it is played from a file until its hands are
    tracked."""
    exe = node()
    clip, webm = tmp_path / "clip.y4m", tmp_path / "clip.webm"
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-loop", "1", "-i", str(shared_images() / PHOTO), "-vf",
                    "scale=640:-2,crop=640:480:0:'200+40*sin(t*3)',format=yuv420p", "-r", "30", "-t", "1",
                    "-f", "yuv4mpegpipe", str(clip)], check=True, timeout=120)
    # the file: the clip at 10 fps (the page loops it), VP8 at its fastest setting (its default takes ~6 s of CPU)
    subprocess.run(["ffmpeg", "-v", "error", "-y", "-i", str(clip), "-r", "10", "-c:v", "libvpx", "-deadline",
                    "realtime", "-cpu-used", "8", "-b:v", "1M", str(webm)], check=True, timeout=120)
    out = tmp_path / "live"
    out.mkdir()
    proc = subprocess.run([exe, str(WEB / "live.mjs"), server.url + "/", str(clip), str(out), str(8 * SLOW),
                           str(webm)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=180 * SLOW, cwd=WEB)
    assert proc.returncode == 0, proc.stderr[-4000:] + server.log()[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    if (out / "live.png").exists():
        shutil.copy(out / "live.png", BUILD / "web-live.png")
    for mode in ("camera", "file"):
        g = got[mode]
        assert g["video"]["width"] == 640 and g["video"]["height"] == 480, g
        assert g["frames_sent"] >= 3 and g["marks"] > 100, g
        if mode == "camera":    # its hands regressed and drawn in 3D
            assert g["regressed"] >= 1 and int(g["hand_count"]) >= 1 and g["rendered"] == "1", g
            # the hands table lists the newest regressed frame's hands
            assert len(g["hand_rows"]) == int(g["hand_count"]), g["hand_rows"]
            assert all(r[0].startswith("track ") and r[1] in ("left", "right") and len(r[2].split(", ")) == 4
                       for r in g["hand_rows"]), g["hand_rows"]
        else:                   # its hands tracked
            assert g["tracked_hands"] >= 1, g
        # one request in flight at most: the newest frame goes when the answer comes
        events = sorted([(x["start"], 1) for x in g["live"]] + [(x["end"], -1) for x in g["live"]])
        inflight = peak = 0
        for _, d in events:
            inflight += d
            peak = max(peak, inflight)
        assert peak == 1, g["live"]
        assert g["live"][0]["url"].startswith("/v1/live?min_score=") and \
            all("session=" in x["url"] for x in g["live"][1:]), g["live"][:3]
        assert g["stopped"].startswith("Live stopped after"), g
    # (the test's own pixel reads of the overlay canvas make Chromium suggest willReadFrequently)
    noise = [m for m in got["console"] if not m.startswith("Canvas2D: Multiple readback operations")]
    assert got["pageErrors"] == [] and noise == [], got
    cam = got["camera"]
    print(f"\nwebcam (fake, 640x480): {cam['frames_sent']} frames sent, {cam['regressed']} regressed in "
          f"{cam['seconds']} s; {dict(cam['stats'])}; video file: {got['file']['frames_sent']} frames in "
          f"{got['file']['seconds']} s. Seconds from the browser's start: launched {got['launch_s']}, page "
          f"{got['page_s']}, camera read {cam['read_s']}, screenshot {cam['shot_s']}, file read "
          f"{got['file']['read_s']}, all {got['total_s']}")


def test_only_the_listed_files(server, web_dir):
    for path, ctype in FILES.items():
        r = requests.get(server.url + path, timeout=10 * SLOW)
        assert r.status_code == 200, path
        assert r.headers["Content-Type"] == (ctype if ctype.startswith("image/") else ctype + "; charset=utf-8"), path
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Content-Security-Policy"].startswith(CSP), r.headers["Content-Security-Policy"]
        assert "unsafe" not in r.headers["Content-Security-Policy"]
        name = "index.html" if path == "/" else path[1:]
        assert r.content == (web_dir / name).read_bytes(), path
    assert requests.head(server.url + "/", timeout=10).status_code == 200
    r = requests.post(server.url + "/", data=b"x", timeout=10)
    assert r.status_code == 405 and r.headers["Allow"] == "GET, HEAD"
    # the API's answers are not sniffed either
    assert requests.get(server.url + "/healthz", timeout=10).headers["X-Content-Type-Options"] == "nosniff"
    for raw in ["/../etc/passwd", "/vendor/../app.js", "/%2e%2e/app.js", "/app.js/", "//app.js", "/./app.js",
                "/vendor/", "/vendor", "/App.js", "/app.js.bak", "/.get_web", "/web/app.js", "/index.html%2f",
                "/%2fetc%2fpasswd", "/vendor/three.module.js/..", "/" + "a" * 3000, "/three-LICENSE.txt"]:
        s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        s.sendall(f"GET {raw} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        s.close()
        head = reply.split(b"\r\n\r\n", 1)[0].decode()
        assert head.startswith("HTTP/1.1 404") or (raw.startswith("/aaa") and head.startswith("HTTP/1.1 414")), \
            (raw, head)
        if head.startswith("HTTP/1.1 404"):
            assert "application/json" in head, (raw, head)
    # the path is compared once %-decoded: these name a listed file, and get it
    for raw, path in [("/%61pp.js", "/app.js"), ("/vendor%2fGLTFLoader.js", "/vendor/GLTFLoader.js")]:
        r = requests.get(server.url + raw, timeout=10)
        assert r.status_code == 200 and r.content == (web_dir / path[1:]).read_bytes(), raw


def test_random_paths(server, web_dir):
    """Paths made at random from the pieces of the listed ones (and of
    traversals): each is 200 with a listed file's bytes exactly when its
    %-decoded form is that file's path, 400 when it holds a %00 (which
    would cut it short: docs/server.md, "Framing"), else 404."""
    rng = np.random.RandomState(7)
    pieces = ["/", "//", ".", "..", "%2e", "%2f", "%2F", "%5c", "\\", "%00", "app", ".js", "style", ".css", "index",
              ".html", "vendor", "three", ".module", "GLTFLoader", "-LICENSE", ".txt", "%61", "~", "etc", "passwd"]
    decode = lambda s: requests.utils.unquote(s)
    session = requests.Session()
    tried = {"200": 0, "400": 0, "404": 0}
    for _ in range(400):
        raw = "".join(rng.choice(pieces, size=rng.randint(1, 7)))
        if not raw.startswith("/"):
            raw = "/" + raw
        if rng.rand() < 0.3:    # often close to a listed path
            raw = str(rng.choice(list(FILES))) + "".join(rng.choice(pieces, size=rng.randint(0, 2)))
        req = requests.Request("GET", server.url + "/").prepare()
        req.url = server.url + raw       # as it is: no normalisation by the client
        r = session.send(req, timeout=10)
        path = decode(raw)
        if "\0" in path:
            assert r.status_code == 400 and "NUL" in r.json()["error"], raw
            tried["400"] += 1
        elif path in FILES:
            name = "index.html" if path == "/" else path[1:]
            assert r.status_code == 200 and r.content == (web_dir / name).read_bytes(), raw
            tried["200"] += 1
        else:
            assert r.status_code in (400, 404), (raw, r.status_code)
            tried["404"] += 1
    assert tried["200"] > 20 and tried["400"] > 20 and tried["404"] > 150, tried


def test_not_installed(tmp_path, ckpt):
    s = Server(tmp_path, ckpt("d1h1"), "--no-detector", "--web", tmp_path / "nowhere")
    try:
        s.wait_ready()
        r = requests.get(s.url + "/", timeout=10)
        assert r.status_code == 404 and r.headers["Content-Type"].startswith("text/plain"), r.text
        assert "scripts/get_web.sh" in r.text and "--web DIR" in r.text and str(tmp_path / "nowhere") in r.text
        assert requests.get(s.url + "/app.js", timeout=10).status_code == 404
        assert requests.get(s.url + "/healthz", timeout=10).status_code == 200
        assert "/v1/predict" in requests.get(s.url + "/openapi.json", timeout=10).json()["paths"]
    finally:
        log = s.stop()
    assert "web page: not installed" in log and "scripts/get_web.sh" in log


@pytest.mark.no_binary
def test_get_web_script(tmp_path):
    """scripts/get_web.sh DIR: every file checked in place (nothing done when
    all are as installed), a changed or missing one reinstalls the whole
    page by renaming a complete new directory into place, nothing left
    beside it; a DIR it cannot create is one line on stderr, exit 1."""
    d = tmp_path / "share" / "web"
    script = str(REPO / "scripts" / "get_web.sh")
    run = lambda *a: subprocess.run(["bash", script, *map(str, a)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, timeout=300)
    proc = run(d)
    assert proc.returncode == 0 and "installed in" in proc.stdout, proc.stderr
    files = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())
    assert files == sorted(["app.js", "index.html", "style.css"] +
                           ["vendor/" + f for f in ("three.module.js", "GLTFLoader.js", "OrbitControls.js",
                                                    "BufferGeometryUtils.js", "three-LICENSE.txt", "nocurl.jpg",
                                                    "halfcurl.jpg", "fullcurl.jpg", "fingerpose-LICENSE.txt")]), files
    for f in ("nocurl.jpg", "halfcurl.jpg", "fullcurl.jpg"):   # the example photos: JPEGs, a hand each
        assert Image.open(d / "vendor" / f).size == (480, 640), f
    assert "MIT License" in (d / "vendor" / "fingerpose-LICENSE.txt").read_text()
    for page in ("app.js", "index.html", "style.css"):
        assert (d / page).read_bytes() == (REPO / "web" / page).read_bytes()
    for f in ("GLTFLoader.js", "OrbitControls.js", "BufferGeometryUtils.js"):
        text = (d / "vendor" / f).read_text()
        assert "from 'three'" not in text and "from './three.module.js'" in text, f
    proc = run(d)
    assert proc.returncode == 0 and "already installed" in proc.stdout, proc.stdout
    inode = (d / "vendor").stat().st_ino
    (d / "vendor" / "OrbitControls.js").write_text("// changed\n")
    (d / "style.css").unlink()
    proc = run(d)
    assert proc.returncode == 0 and "installed in" in proc.stdout and "already" not in proc.stdout, proc.stderr
    assert (d / "style.css").read_bytes() == (REPO / "web" / "style.css").read_bytes()
    assert "OrbitControls" in (d / "vendor" / "OrbitControls.js").read_text()
    assert (d / "vendor").stat().st_ino != inode            # a new directory, renamed into place
    assert sorted(p.name for p in d.parent.iterdir()) == ["web"]   # no temporary left beside it
    (tmp_path / "file").write_text("not a directory\n")
    proc = run(tmp_path / "file" / "web")
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith("get_web.sh: cannot create"), proc.stderr
