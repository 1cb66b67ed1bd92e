"""`hamer serve`: POST /v1/live, hands live from frames a client sends (the
web page's webcam and video file), on 127.0.0.1 only (the d2h2 checkpoint,
the installed detector).

* a session's life: the first POST starts it (its token, the MANO faces),
  frames come with ?session=, the answers carry the newest tracked record
  and, once, each newer regressed one (778 vertices a hand); end=1 answers
  the totals (every frame received is captured, replaced or bad) and the
  token is then 404.
* a frame that does not decode is counted and named in the next answer,
  and the session goes on.
* bounds: --live-sessions (503 beyond, a slot free again once a session
  ends), --live-idle-s (an idle session's token becomes 404), a frame's
  pixels (413 before decoding), --max-body-mb (413 unread).
* the query: each bad key or value a 400 naming it; GET 405; a body that is
  not an image 415; --live-sessions 0 turns the endpoint off (404).
* the server exits 0 on SIGTERM with sessions running.
"""

import io
import time

import pytest
import requests
from PIL import Image

from test_serve import SLOW, Server, post
from test_serve_limits import huge_claiming_jpeg, shared_photo

WAIT_S = 90 * SLOW


@pytest.fixture(scope="module")
def frames():
    """The photo (three hands) as a 424 x 282 JPEG, and its mirror image."""
    im = Image.open(shared_photo("hamer_example_1.jpg")).convert("RGB")
    im = im.resize((im.width // 2, im.height // 2), Image.BILINEAR)
    out = []
    for x in (im, im.transpose(Image.FLIP_LEFT_RIGHT)):
        b = io.BytesIO()
        x.save(b, format="JPEG", quality=90)
        out.append(b.getvalue())
    return out


@pytest.fixture(scope="module")
def srv(tmp_path_factory, ckpt):
    s = Server(tmp_path_factory.mktemp("live"), ckpt("d2h2"), "--threads", 1, "--live-sessions", 2,
               "--live-idle-s", 2 * SLOW, "--timeout-s", 60 * SLOW)
    s.wait_ready()
    yield s
    s.stop()


def live(srv, body=b"", query="", ctype="image/jpeg"):
    return post(srv.url + "/v1/live", body, ctype if body else None, query)


def start(srv, frame, query=""):
    """A new session; a slot an ended session holds frees once its engine
    stopped (the janitor's next turn, its regression cancelled between
    blocks): a 503 then is retried for a few seconds."""
    deadline = time.monotonic() + 5 * SLOW
    while (r := live(srv, frame, query)).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert r.status_code == 200, r.text
    a = r.json()
    assert len(a["session"]) == 32 and int(a["session"], 16) >= 0
    assert a["received"] == 1 and len(a["faces"]) == 3 * 1538
    return a["session"]


def end(srv, token):
    r = live(srv, query=f"?session={token}&end=1")
    assert r.status_code == 200, r.text
    return r.json()


def test_session_life(srv, frames):
    token = start(srv, frames[0])
    sent, tracked, regressed = 1, None, []
    deadline = time.monotonic() + WAIT_S
    while len(regressed) < 2 and time.monotonic() < deadline:
        r = live(srv, frames[sent % 2], f"?session={token}")
        assert r.status_code == 200, r.text
        sent += 1
        a = r.json()
        assert a["session"] == token and a["received"] == sent and a["bad"] == 0 and a["error"] is None
        assert "faces" not in a
        if a["tracked"]:
            tracked = a["tracked"]
        if a["regressed"]:
            assert not regressed or a["regressed"]["frame"] > regressed[-1]["frame"], "a regressed record twice"
            regressed.append(a["regressed"])
    assert len(regressed) == 2, f"no regressed frame in {WAIT_S} s ({sent} frames sent)"
    assert tracked and tracked["hands"] and "vertices" not in tracked["hands"][0]
    for rec in regressed:
        assert rec["regressed"] is True and 1 <= len(rec["hands"]) <= 2
        assert rec["latency_ms"] >= 0 and isinstance(rec["capture_time_ms"], int)
        for h in rec["hands"]:
            assert len(h["vertices"]) == 778 and len(h["keypoints_2d"]) == 21
    a = end(srv, token)
    t = a["ended"]
    assert t["captured"] + a["replaced"] + a["bad"] in (sent - 1, sent), (t, a, sent)
    assert t["regressed"] >= 2 and t["tracked"] >= t["regressed"]
    assert t["dropped"]["source"] == a["replaced"]
    assert 0 <= t["latency_ms"]["p50"] <= t["latency_ms"]["p90"] <= t["latency_ms"]["max"]
    r = live(srv, frames[0], f"?session={token}")
    assert r.status_code == 404 and "no such live session" in r.json()["error"]
    assert srv.metric("hamer_requests_total", endpoint="/v1/live", status="200") >= sent + 1


def test_bad_frame_reported_session_goes_on(srv, frames):
    token = start(srv, frames[0])
    r = live(srv, b"\xff\xd8\xff\xe0 not a JPEG at all", f"?session={token}")
    assert r.status_code == 200, r.text
    deadline = time.monotonic() + WAIT_S
    errors = [r.json()["error"]] if r.json()["error"] else []
    while not errors and time.monotonic() < deadline:
        time.sleep(0.05)
        a = live(srv, query=f"?session={token}").json()     # an empty body: the records only
        errors += [a["error"]] if a["error"] else []
    assert errors and errors[0].startswith("frame 1: ") and a["bad"] == 1, errors
    assert live(srv, query=f"?session={token}").json()["error"] is None, "the error is said once"
    got = None
    while not got and time.monotonic() < deadline:
        a = live(srv, frames[1], f"?session={token}").json()
        got = a["tracked"] if a["tracked"] and a["tracked"]["frame"] >= 2 else None
    assert got, "the session stopped after a bad frame"
    assert end(srv, token)["bad"] == 1


def test_sessions_bounded_and_idle_ones_end(srv, frames):
    a, b = start(srv, frames[0]), start(srv, frames[1])
    r = live(srv, frames[0])        # a third at once
    assert r.status_code == 503 and "--live-sessions" in r.json()["error"] and "Retry-After" in r.headers
    end(srv, a)
    deadline = time.monotonic() + 10 * SLOW
    while (r := live(srv, frames[0])).status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert r.status_code == 200, "the ended session's slot was not freed"
    c = r.json()["session"]
    # both left alone: idle past --live-idle-s (2 s), they end
    deadline = time.monotonic() + 10 * SLOW
    while live(srv, query=f"?session={b}").status_code == 200 and time.monotonic() < deadline:
        time.sleep(2.5 * SLOW)      # longer than the idle time: each probe is itself activity
    for t in (b, c):
        r = live(srv, query=f"?session={t}")
        assert r.status_code == 404, r.text
    assert "idle for" in srv.log()


@pytest.mark.parametrize("query, words", [
    ("?session=abc", "session must be the 32 hex digits"),
    ("?session=" + "G" * 32, "session must be the 32 hex digits"),
    ("?end=1", "end=1 needs session="),
    ("?end=2", "end must be 0 or 1"),
    ("?max_hands=9", "max_hands must be an integer in 1..8"),
    ("?min_score=1.5", "min_score must be a number in (0, 1)"),
    ("?smooth=kalman", "smooth must be one-euro or none"),
    ("?session=" + "a" * 32 + "&max_hands=2", "a new session's"),
    ("?boxes=1,2,3,4", "unknown, repeated or valueless query parameter 'boxes'"),
    ("?max_hands=1&max_hands=2", "unknown, repeated or valueless"),
])
def test_query_refused(srv, frames, query, words):
    r = live(srv, frames[0], query)
    assert r.status_code == 400 and words in r.json()["error"], r.text


def test_other_refusals(srv, frames):
    r = live(srv, b"")
    assert r.status_code == 400 and "first frame" in r.json()["error"]
    r = live(srv, query="?session=" + "0" * 32)
    assert r.status_code == 404
    r = requests.get(srv.url + "/v1/live", timeout=10)
    assert r.status_code == 405 and "takes POST" in r.json()["error"]
    r = live(srv, b"hello", ctype="text/plain")
    assert r.status_code == 415 and "image type" in r.json()["error"]
    r = live(srv, huge_claiming_jpeg(frames[0]))
    assert r.status_code == 413 and "10000x10000" in r.json()["error"], r.text
    # the same through a chunked body (no Content-Length): the type checked all the same
    r = requests.post(srv.url + "/v1/live", data=iter([b"hel", b"lo"]), headers={"Content-Type": "text/plain"},
                      timeout=10)
    assert r.status_code == 415, r.text


def test_body_limit_and_endpoint_off(tmp_path, ckpt, frames):
    s = Server(tmp_path, ckpt("d2h2"), "--live-sessions", 0, "--max-body-mb", 1, "--no-detector", "--quiet")
    try:
        s.wait_ready()
        r = live(s, frames[0])
        assert r.status_code == 404 and "--live-sessions 0" in r.json()["error"]
        r = live(s, b"\xff" * (1 << 20 | 1))
        assert r.status_code == 413 and "--max-body-mb" in r.json()["error"]
    finally:
        s.stop()


def test_sigterm_with_sessions_running(tmp_path, ckpt, frames):
    s = Server(tmp_path, ckpt("d2h2"), "--threads", 1, "--quiet")
    try:
        s.wait_ready()
        for f in frames:
            start(s, f)
    finally:
        s.stop()        # exit 0, no sanitizer report
