"""`hamer serve` under abuse: the limits of issue 12 (findings 4-11) and
detection without boxes (issue 13), on 127.0.0.1 only.

Each test starts its own small server (the d2h2 checkpoint) with limits
scaled down so that a flood stays small: tens to a couple of hundred
sockets, a few MB of bodies, a few seconds. Clients that must come from
another address bind to 127.0.0.2-4 (all of 127/8 is loopback on Linux).

* 4: half-closed uploads are freed at once (fds, RSS, budget) and do not
  hold up SIGTERM.
* 5: the per-address limit keeps a trickling flood from taking the server;
  /healthz stays fast; the header deadline closes tricklers although they
  keep sending; the total limit bounds fds.
* 6: the upload budget answers 503 before reading a body beyond it.
* 7: cache keys cannot be forged by moving bytes between query and body;
  the cache is bounded in bytes.
* 8: a 504'd, disconnected or abandoned-while-queued request stops using
  the worker.
* 9: SIGHUP drains and exits 0; a second SIGTERM stops at once; --drain-s
  bounds the drain.
* 10: conflicting Content-Length, %00 in boxes, hex floats, a tiny JPEG
  claiming a huge size.
* 11: /metrics counts every request once by its final status, also those
  libmicrohttpd answers itself; --quiet silences libmicrohttpd's lines.
* 13: /v1/predict and /v1/render without boxes on a real photo equal `hamer
  run` without boxes; /readyz and /info say where the detector is from.
* answers nobody reads: the response budget answers 503 before a job whose
  answer cannot be held starts (413 when it could never be); unread
  answers are dropped at --timeout-s, their connections closed, and the
  budget given back; RSS stays near the budget.
"""

import io
import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import REPO, SANITIZE, describe, run_hamer, textured_image
from test_serve import HOST, RIGHT, SLOW, Server, box_arg, multipart, post, strip_timings


def fds(srv):
    return len(os.listdir(f"/proc/{srv.proc.pid}/fd"))


def raw(port, data, src=None, timeout=5):
    """A connected socket (optionally from source address src) with data sent."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    if src:
        s.bind((src, 0))
    s.connect((HOST, port))
    if data:
        s.sendall(data)
    return s


def read_reply(s, timeout=10):
    s.settimeout(timeout)
    out = b""
    try:
        while True:
            c = s.recv(65536)
            if not c:
                break
            out += c
            if b"\r\n\r\n" in out:
                head, _, body = out.partition(b"\r\n\r\n")
                m = re.search(rb"Content-Length: (\d+)", head, re.I)
                if m and len(body) >= int(m.group(1)):
                    break
    except (ConnectionResetError, socket.timeout, OSError):
        pass
    return out


def closed_by_peer(s):
    try:
        return s.recv(4096, socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def upload_head(length, query="?boxes=1,2,30,40", ctype="image/png"):
    return (f"POST /v1/predict{query} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: {ctype}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


def wait_for(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def metric_line(srv, name):
    """Whether /metrics has a sample of this metric at all."""
    text = requests.get(srv.url + "/metrics", timeout=10 * SLOW).text
    return any(line.startswith(name + " ") or line.startswith(name + "{") for line in text.splitlines())


def long_boxes(n=64):
    return ";".join(box_arg((10 + i, 10 + i, 150 + i, 200 + i)) for i in range(n))


@pytest.fixture(scope="module")
def scene(tmp_path_factory, hamer_bin, ckpt):
    d = tmp_path_factory.mktemp("limits")
    img = textured_image()
    Image.fromarray(img).save(d / "photo.png")
    Image.fromarray(img).save(d / "photo.jpg", quality=90)
    return dict(dir=d, img=img, model=ckpt("d2h2"), png=(d / "photo.png").read_bytes(),
                jpg=(d / "photo.jpg").read_bytes())


def server(scene, *args):
    srv = Server(scene["dir"], scene["model"], "--threads", 1, "--no-detector", *args)
    srv.wait_ready()
    return srv


# ---------------------------------------------------------------------------
# 4. Half-closed uploads
# ---------------------------------------------------------------------------

def test_half_closed_uploads_released_at_once(scene):
    srv = server(scene, "--max-body-mb", 4, "--timeout-s", 60, "--max-connections-per-ip", 256,
                 "--upload-budget-mb", 32)
    try:
        base_fds, base_rss = fds(srv), srv.rss_kb()
        n = 40 if SANITIZE else 100
        part = b"\x89PNG" + b"\xab" * (1 << 20)              # 1 MB of a declared 4 MB
        for _ in range(n):
            s = raw(srv.port, None)
            try:
                s.sendall(upload_head(4 << 20) + part)
            except OSError:         # refused 503 (budget) and closed before all was sent
                pass
            s.close()
        wait_for(lambda: fds(srv) <= base_fds + 2, 3 * SLOW,
                 f"half-closed uploads still hold fds: {fds(srv)} (was {base_fds})")
        wait_for(lambda: srv.metric("hamer_upload_bytes") == 0, 3 * SLOW, "upload budget not given back")
        # at most the budget's 32 MB of bodies at once (8 uploads): the rest got 503 unread
        assert srv.rss_kb() - base_rss < (32 + 32) * 1024, (base_rss, srv.rss_kb())
        refused = srv.metric("hamer_requests_total", endpoint="/v1/predict", status="503")
        assert srv.metric("hamer_connections_dropped_total") + refused == n
        t0 = time.monotonic()
        srv.stop()
        assert time.monotonic() - t0 < 5 * SLOW
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 5. Connection floods: per-address and total limits, header deadline
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_trickling_flood_bounded_healthz_fast(scene):
    srv = server(scene, "--max-connections", 40, "--max-connections-per-ip", 16, "--header-timeout-s", 2)
    socks = []
    stop = threading.Event()
    try:
        base = fds(srv)
        n = 200
        for _ in range(n):
            try:
                socks.append(raw(srv.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ", src="127.0.0.2"))
            except OSError:
                pass

        def trickle():                       # one header byte per socket every 0.5 s
            while not stop.is_set():
                for s in socks:
                    try:
                        s.send(b"a", socket.MSG_DONTWAIT)
                    except OSError:
                        pass
                stop.wait(0.5)

        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        worst = 0.0
        peak = 0
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:      # inside the header deadline: the flood holds its 16
            t0 = time.monotonic()
            assert requests.get(srv.url + "/healthz", timeout=5 * SLOW).status_code == 200
            worst = max(worst, time.monotonic() - t0)
            peak = max(peak, fds(srv))
            time.sleep(0.1)
        assert peak <= base + 16 + 2, f"{peak} fds with a flood from one address (base {base})"
        assert worst < 0.5 * SLOW, f"/healthz took {worst:.3f} s under the flood"
        # past the 2 s header deadline every trickler is closed, though it keeps sending
        wait_for(lambda: fds(srv) <= base + 1, 4 * SLOW, f"tricklers outlived the header deadline: {fds(srv)}")
        assert srv.metric("hamer_deadline_closed_total") >= 16
        stop.set()
        t.join()
        for s in socks:
            s.close()
        socks = []
        # the total limit: three addresses x 16 > 40
        for src in ("127.0.0.2", "127.0.0.3", "127.0.0.4"):
            for _ in range(16):
                try:
                    socks.append(raw(srv.port, b"GET /healthz HTTP/1.1\r\n", src=src))
                except OSError:
                    pass
        time.sleep(0.5)
        assert fds(srv) <= base + 40 + 1, fds(srv)
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: requests.get(srv.url + "/healthz", timeout=5).status_code == 200, 5, "not serving again")
        srv.stop()
    finally:
        stop.set()
        for s in socks:
            s.close()
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 6. Upload budget
# ---------------------------------------------------------------------------

def test_upload_budget_503_before_reading(scene):
    srv = server(scene, "--max-body-mb", 2, "--upload-budget-mb", 5, "--timeout-s", 30)
    socks = []
    try:
        base_rss = srv.rss_kb()
        for _ in range(10):
            s = raw(srv.port, upload_head(2 << 20) + b"\x89PNG" + b"\0" * 100000)
            socks.append(s)
            time.sleep(0.05)
        replies = []
        for s in socks:
            s.settimeout(0.5)
            try:
                replies.append(s.recv(4096))
            except socket.timeout:
                replies.append(None)        # still uploading: holds budget
        waiting = [r for r in replies if r is None]
        refused = [r for r in replies if r is not None]
        assert len(waiting) == 2, replies     # 2 x 2 MB fit in 5 MB, a third does not
        assert all(r.startswith(b"HTTP/1.1 503") and b"upload-budget-mb" in r for r in refused), refused
        assert srv.metric("hamer_upload_bytes") == 4 << 20
        assert srv.metric("hamer_upload_budget_refused_total") == 8
        assert srv.rss_kb() - base_rss < 32 * 1024
        for s in socks:
            s.close()
        socks = []
        wait_for(lambda: srv.metric("hamer_upload_bytes") == 0, 3 * SLOW, "budget not given back")
        r = post(srv.url + "/v1/predict", scene["png"], "image/png", "?boxes=" + box_arg(RIGHT))
        assert r.status_code == 200, r.text
        srv.stop()
    finally:
        for s in socks:
            s.close()
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 7. Cache keys and cache bytes
# ---------------------------------------------------------------------------

def test_cache_key_not_forgeable_and_bounded_in_bytes(scene):
    srv = server(scene, "--cache", 100, "--cache-mb", 0.5, "--timeout-s", 60 * SLOW)
    try:
        url = srv.url
        q = "?boxes=" + box_arg(RIGHT)
        a = post(url + "/v1/predict", scene["png"], "image/png", q + "&vertices=1")
        assert a.status_code == 200 and a.headers["X-Cache"] == "miss"
        # the same bytes, if fields were only NUL-separated: the parameter moved into the body
        b = post(url + "/v1/predict", b"vertices\x001\x00" + scene["png"], "image/png", q)
        assert b.headers.get("X-Cache") != "hit" and b.status_code == 400, (b.status_code, b.headers)
        # renders of the textured picture are ~100s of KB: a few overflow 0.5 MB
        sizes = []
        for i in range(8):
            r = post(url + "/v1/render", scene["png"], "image/png", "?boxes=" + box_arg((60 + i, 40, 170, 200)))
            assert r.status_code == 200, r.text
            sizes.append(len(r.content))
            if sum(sizes) > 3 << 18:
                break
        assert sum(sizes) > 3 << 18, sizes
        assert metric_line(srv, "hamer_cache_bytes")
        assert 0 < srv.metric("hamer_cache_bytes") <= 1 << 19
        first = post(url + "/v1/render", scene["png"], "image/png", "?boxes=" + box_arg((60, 40, 170, 200)))
        assert first.headers["X-Cache"] == "miss", "the oldest answer should have been evicted"
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 8. Work nobody waits for
# ---------------------------------------------------------------------------

def test_disconnected_and_abandoned_work_cancelled(scene):
    srv = server(scene, "--workers", 1, "--queue", 4, "--timeout-s", 120 * SLOW)
    try:
        q = "?boxes=" + long_boxes()
        busy = raw(srv.port, upload_head(len(scene["png"]), q) + scene["png"])
        wait_for(lambda: srv.metric("hamer_workers_busy") == 1, 10 * SLOW, "the long job never started")
        queued = [raw(srv.port, upload_head(len(scene["png"]), q) + scene["png"]) for _ in range(2)]
        wait_for(lambda: srv.metric("hamer_queue_depth") == 2, 10 * SLOW, "jobs not queued")
        t0 = time.monotonic()
        for s in [busy] + queued:
            s.close()
        # the running inference stops within a transformer block; the queued ones never start
        wait_for(lambda: srv.metric("hamer_workers_busy") == 0 and srv.metric("hamer_queue_depth") == 0,
                 3 * SLOW, "work for departed clients kept going")
        assert time.monotonic() - t0 < 3 * SLOW
        assert srv.metric("hamer_inference_cancelled_total") >= 1
        wait_for(lambda: srv.metric("hamer_requests_total", endpoint="/v1/predict", status="499") == 3, 3 * SLOW,
                 "the three requests were not all counted 499 (client closed)")
        r = post(srv.url + "/v1/predict", scene["png"], "image/png", "?boxes=" + box_arg(RIGHT))
        assert r.status_code == 200
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 9. Signals
# ---------------------------------------------------------------------------

def start_long(srv, scene, results):
    def go():
        try:
            r = post(srv.url + "/v1/predict", scene["png"], "image/png", "?boxes=" + long_boxes(),
                     timeout=120 * SLOW)
            results.append(r.status_code)
        except requests.RequestException as e:
            results.append(repr(e))
    t = threading.Thread(target=go, daemon=True)
    t.start()
    wait_for(lambda: srv.metric("hamer_workers_busy") == 1, 10 * SLOW, "the long job never started")
    return t


def test_sighup_drains_and_exits_0(scene):
    srv = server(scene, "--timeout-s", 120 * SLOW)
    results = []
    t = threading.Thread(target=lambda: results.append(
        post(srv.url + "/v1/predict", scene["png"], "image/png", "?boxes=" + box_arg(RIGHT)).status_code))
    t.start()
    wait_for(lambda: srv.metric("hamer_requests_in_flight") >= 2, 10 * SLOW, "request never arrived")
    srv.proc.send_signal(signal.SIGHUP)
    t.join(60 * SLOW)
    assert results == [200], results
    log = srv.stop()
    assert "SIGHUP: draining" in log


def test_second_sigterm_forces_bounded_shutdown(scene):
    srv = server(scene, "--timeout-s", 120 * SLOW, "--drain-s", 300)
    results = []
    t = start_long(srv, scene, results)
    srv.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(timeout=30 * SLOW)
    assert time.monotonic() - t0 < 5 * SLOW, "second SIGTERM did not stop the server promptly"
    t.join(10)
    assert rc == 0 and results == [503], (rc, results, srv.log()[-2000:])
    assert "second signal" in srv.log()


def test_drain_s_bounds_shutdown(scene):
    srv = server(scene, "--timeout-s", 120 * SLOW, "--drain-s", 1)
    results = []
    t = start_long(srv, scene, results)
    t0 = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    rc = srv.proc.wait(timeout=30 * SLOW)
    assert time.monotonic() - t0 < 1 + 4 * SLOW
    t.join(10)
    assert rc == 0 and results == [503], (rc, results)
    assert "drain grace expired" in srv.log()


# ---------------------------------------------------------------------------
# 10. Parsing
# ---------------------------------------------------------------------------

def huge_claiming_jpeg(jpg):
    """The JPEG with its SOF saying 10000 x 10000 (a few KB of body)."""
    b = bytearray(jpg)
    i = 2
    while i < len(b):
        m = b[i + 1]
        seg = b[i + 2] << 8 | b[i + 3]
        if 0xC0 <= m <= 0xCF and m not in (0xC4, 0xC8, 0xCC):
            b[i + 5:i + 9] = (10000).to_bytes(2, "big") + (10000).to_bytes(2, "big")
            return bytes(b[:6000])
        i += 2 + seg
    raise AssertionError("no SOF")


def test_parsing_refusals(scene):
    srv = server(scene, "--timeout-s", 30)
    try:
        png = scene["png"]
        head = (f"POST /v1/predict?boxes=1,2,30,40 HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: image/png\r\n"
                f"Content-Length: {len(png)}\r\nContent-Length: 5\r\n\r\n").encode()
        s = raw(srv.port, head + png)
        reply = read_reply(s)
        s.close()
        assert reply.startswith(b"HTTP/1.1 400") and b"conflicting Content-Length" in reply, reply[:300]
        r = post(srv.url + "/v1/predict", png, "image/png", "?boxes=1,2,30,40%00;5,6,70,80")
        assert r.status_code == 400 and "NUL" in r.json()["error"], r.text
        r = post(srv.url + "/v1/predict", png, "image/png", "?boxes=0x10,2,0x64,40")
        assert r.status_code == 400 and "box 0" in r.json()["error"], r.text
        r = post(srv.url + "/v1/predict", png, "image/png", "?boxes=1,2,30,40&rescale=0x1p1")
        assert r.status_code == 400 and "rescale" in r.json()["error"], r.text
        bomb = huge_claiming_jpeg(scene["jpg"])
        t0 = time.monotonic()
        rss0 = srv.rss_kb()
        r = post(srv.url + "/v1/predict", bomb, "image/jpeg", "?boxes=1,2,30,40")
        assert r.status_code == 413 and "decode budget" in r.json()["error"], r.text
        assert srv.rss_kb() - rss0 < 100 * 1024 and time.monotonic() - t0 < 5 * SLOW
        # the same bytes rule passes a real photo
        r = post(srv.url + "/v1/predict", scene["jpg"], "image/jpeg", "?boxes=" + box_arg(RIGHT))
        assert r.status_code == 200, r.text
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 11. /metrics adds up; --quiet
# ---------------------------------------------------------------------------

def statuses(srv):
    text = requests.get(srv.url + "/metrics", timeout=10 * SLOW).text
    out = {}
    for m in re.finditer(r'hamer_requests_total\{endpoint="([^"]+)",status="([^"]+)"\} (\d+)', text):
        out[(m.group(1), m.group(2))] = int(m.group(3))
    dropped = int(re.search(r"^hamer_connections_dropped_total (\d+)", text, re.M).group(1))
    return out, dropped


@pytest.mark.parametrize("quiet", [False, True])
def test_metrics_count_every_request_once(scene, quiet):
    srv = server(scene, "--max-body-mb", 1, *(["--quiet"] if quiet else []))
    try:
        startup_lines = len(srv.log().splitlines())
        before, dropped0 = statuses(srv)
        sends = [
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n", 431),
            (b"GET /healthz HTTP/7.1\r\nHost: x\r\n\r\n", 505),
            (b"GET /" + b"a" * 40000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414),
            (upload_head(50 << 20), 413),
            (b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200),
        ]
        for data, status in sends:
            s = raw(srv.port, data)
            reply = read_reply(s)
            s.close()
            assert reply.startswith(b"HTTP/1.1 %d" % status), (status, reply[:100])
        s = raw(srv.port, upload_head(1000) + b"\x89PNG")     # dropped mid-body
        s.close()
        time.sleep(0.5)
        after, dropped1 = statuses(srv)
        diff = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
        diff.pop(("/metrics", "200"), None)
        got = {}
        for (ep, st), v in diff.items():
            got[int(st)] = got.get(int(st), 0) + v
        assert got == {431: 1, 505: 1, 414: 1, 413: 1, 200: 1}, diff
        assert dropped1 - dropped0 == 1
        log = srv.stop()
        later = log.splitlines()[startup_lines:]
        if quiet:
            assert not [line for line in later if "libmicrohttpd" in line or " ms" in line], later
        else:
            assert any("libmicrohttpd" in line for line in later)
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# ---------------------------------------------------------------------------
# 13. Detection in the server
# ---------------------------------------------------------------------------

def shared_photo(name="hamer_example_5.jpg"):
    d = Path(os.environ.get("HAMER_SHARED_IMAGES") or REPO.parent / "shared" / "images")
    p = d / name
    if not p.exists():
        pytest.fail(f"the test photos are missing: no {p} (set HAMER_SHARED_IMAGES)")
    return p


@pytest.mark.slow
def test_predict_without_boxes_detects_like_run(scene, tmp_path):
    photo = shared_photo()
    out = tmp_path / "run.json"
    proc = run_hamer(["run", "--model", scene["model"], "--image", photo, "--output", out,
                      "--render", tmp_path / "run.png"])
    if proc.returncode == 1 and "get_detector.sh" in proc.stderr:
        pytest.fail("the detector's models are not installed (scripts/get_detector.sh): " + proc.stderr)
    assert proc.returncode in (0, 3), describe(proc)
    want = out.read_text()
    assert json.loads(want)["boxes"] == "detected" and json.loads(want)["hands"]
    srv = Server(scene["dir"], scene["model"], "--threads", 2, "--timeout-s", 120 * SLOW)
    try:
        ready = srv.wait_ready()
        assert ready["detector"]["loaded"] is True and ready["detector"]["dir"] and ready["detector"]["body"] is True
        info = requests.get(srv.url + "/info", timeout=10).json()
        assert info["detector"] == ready["detector"]
        body = photo.read_bytes()
        r = post(srv.url + "/v1/predict", body, "image/jpeg")
        assert r.status_code == 200, r.text
        got = r.json()
        assert got["boxes"] == "detected" and all("detection" in h for h in got["hands"])
        assert strip_timings(r.text) == strip_timings(want)
        # multipart without a 'hands' part: detected too
        mp, ctype = multipart([("image", body, ["Content-Type: image/jpeg"])])
        r = post(srv.url + "/v1/predict", mp, ctype)
        assert r.status_code == 200 and strip_timings(r.text) == strip_timings(want)
        # given boxes say so
        r = post(srv.url + "/v1/predict", body, "image/jpeg", "?boxes=" + box_arg(RIGHT))
        assert r.json()["boxes"] == "given" and "detection" not in r.json()["hands"][0]
        # the overlay equals `hamer run --render`
        r = post(srv.url + "/v1/render", body, "image/jpeg")
        assert r.status_code == 200 and r.headers["Content-Type"] == "image/png"
        np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(r.content)).convert("RGB")),
                                      np.asarray(Image.open(tmp_path / "run.png").convert("RGB")))
        # a photo without hands: detected, none found
        r = post(srv.url + "/v1/predict", scene["png"], "image/png")
        assert r.status_code == 200 and r.json()["boxes"] == "detected", r.text
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def test_no_detector_and_bad_detector_dir(scene, tmp_path):
    srv = server(scene)     # --no-detector
    try:
        ready = requests.get(srv.url + "/readyz", timeout=10).json()
        assert ready["detector"]["loaded"] is False and "--no-detector" in ready["detector"]["reason"]
        r = post(srv.url + "/v1/predict", scene["png"], "image/png")
        assert r.status_code == 400
        err = r.json()["error"]
        assert "no hand detector" in err and "boxes" in err and "--detector" in err, err
        srv.stop()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()
    proc = run_hamer(["serve", "--model", scene["model"], "--port", "0", "--host", HOST,
                      "--detector", tmp_path / "nothing-here"], timeout=120 * SLOW)
    assert proc.returncode == 1 and "cannot load the hand detector" in proc.stderr, describe(proc)
    proc = run_hamer(["serve", "--model", scene["model"], "--no-detector", "--lite"])
    assert proc.returncode == 2 and "--no-detector" in proc.stderr


# ---------------------------------------------------------------------------
# Answers nobody reads: the response budget
# ---------------------------------------------------------------------------

def noise_jpeg(side, quality=30, seed=0):
    """A JPEG of noise: small to send, its render a PNG of ~3 bytes a pixel."""
    rng = np.random.RandomState(seed)
    out = io.BytesIO()
    Image.fromarray(rng.randint(0, 256, (side, side, 3)).astype(np.uint8)).save(out, "JPEG", quality=quality)
    return out.getvalue()


def non_reader(port, head, body):
    """A client that sends its request and never reads: a tiny receive
    buffer, so that the server cannot push the answer into the kernel."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((HOST, port))
    s.sendall(head + body)
    return s


@pytest.mark.slow
def test_response_budget_bounds_unread_answers(scene):
    # --timeout-s also drops an unread answer: it must outlast the second
    # render (one worker, one after the other), or on a loaded machine the
    # first answer is dropped before the second is held and the two are
    # never held together (seen at 3 s with the CPUs shared). The test waits
    # for that drop, so the limit is set from a render timed on this build
    # and machine: 6 times it, at least the 8 s that held in Release builds
    # (a sanitizer build's render takes several times longer).
    body = noise_jpeg(1700)                 # ~0.8 MB; its render ~8.7 MB, its bound ~8.8 MB
    probe = server(scene, "--workers", 1, "--quiet")
    try:
        post(probe.url + "/v1/render", body, "image/jpeg", "?boxes=100,100,600,600")    # warm
        t0 = time.monotonic()
        r = post(probe.url + "/v1/render", body, "image/jpeg", "?boxes=100,100,600,600")
        render_s = time.monotonic() - t0
        assert r.status_code == 200, r.text[:200]
        probe.stop()
    finally:
        if probe.proc.poll() is None:
            probe.proc.kill()
    timeout = max(8.0, 6 * render_s)
    budget_mb = 20
    srv = server(scene, "--workers", 1, "--queue", 32, "--timeout-s", f"{timeout:.1f}", "--response-budget-mb",
                 budget_mb, "--quiet")
    socks = []
    try:
        head = (f"POST /v1/render?boxes=100,100,600,600 HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: image/jpeg\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        base_rss = srv.rss_kb()
        n = 16
        socks = [non_reader(srv.port, head, body) for _ in range(n)]
        # Two answers fit in 20 MB: those two run; the others are refused at once, unrun.
        wait_for(lambda: srv.metric("hamer_response_budget_refused_total") == n - 2, 20 * SLOW,
                 "the response budget did not refuse the requests beyond it")
        wait_for(lambda: srv.metric("hamer_workers_busy") == 0 and srv.metric("hamer_queue_depth") == 0,
                 20 * SLOW, "the admitted renders did not finish")
        held = srv.metric("hamer_response_bytes")
        assert 2 * 8e6 < held <= budget_mb << 20, held
        assert srv.metric("hamer_response_budget_bytes") == budget_mb << 20
        grown_mb = (srv.rss_kb() - base_rss) / 1024
        print(f"{n} non-reading clients: RSS +{grown_mb:.0f} MB, answers held {held / 1e6:.1f} MB; "
              f"render {render_s:.2f} s, --timeout-s {timeout:.1f}")
        if not SANITIZE:     # the sanitizers' allocator keeps freed memory in quarantine
            assert grown_mb < budget_mb + 64, f"RSS grew {grown_mb:.0f} MB with a {budget_mb} MB response budget"
        heads = []
        for s in socks:
            s.settimeout(2 * SLOW)
            heads.append(s.recv(4096))
        ok = [h for h in heads if h.startswith(b"HTTP/1.1 200")]
        busy = [h for h in heads if h.startswith(b"HTTP/1.1 503")]
        assert len(ok) == 2 and len(busy) == n - 2, [h[:40] for h in heads]
        assert all(b"response-budget-mb" in h and b"Retry-After: 1" in h for h in busy), busy[0]
        # Not read within --timeout-s: dropped, the connections closed, the budget given back.
        wait_for(lambda: srv.metric("hamer_answers_dropped_total", reason="timeout") == 2, timeout + 5 * SLOW,
                 "the unread answers were not dropped at --timeout-s")
        wait_for(lambda: srv.metric("hamer_response_bytes") == 0, 2 * SLOW, "the response budget was not given back")
        for s, h in zip(socks, heads):
            if h.startswith(b"HTTP/1.1 200"):
                got, m = len(h), re.search(rb"Content-Length: (\d+)", h, re.I)
                s.settimeout(5 * SLOW)
                try:
                    while True:
                        c = s.recv(1 << 20)
                        if not c:
                            break
                        got += len(c)
                except (ConnectionResetError, socket.timeout, OSError):
                    pass
                assert got < int(m.group(1)), "a dropped answer was sent in full"
        assert srv.metric("hamer_requests_total", endpoint="/v1/render", status="503") == n - 2
        # The budget serves the next client; an answer larger than all of it is 413, never run.
        r = post(srv.url + "/v1/render", body, "image/jpeg", "?boxes=100,100,600,600")
        assert r.status_code == 200 and r.headers["Content-Type"] == "image/png", r.text[:200]
        out = io.BytesIO()
        Image.fromarray(np.full((3000, 3000, 3), 90, np.uint8)).save(out, "JPEG")
        r = post(srv.url + "/v1/render", out.getvalue(), "image/jpeg", "?boxes=100,100,600,600")
        assert r.status_code == 413 and "--response-budget-mb" in r.json()["error"], r.text
        assert srv.metric("hamer_response_bytes") == 0
        srv.stop()
    finally:
        for s in socks:
            s.close()
        if srv.proc.poll() is None:
            srv.proc.kill()
