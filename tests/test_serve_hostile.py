"""`hamer serve` against hostile requests and operator inputs (issue 38),
on 127.0.0.1 only, with raw sockets where the bytes matter.

* Framing (docs/server.md, "Framing"): a head with both Content-Length and
  Transfer-Encoding, a folded line, whitespace before a colon, an unknown
  or repeated Transfer-Encoding, or Transfer-Encoding in HTTP/1.0 is
  answered 400 or 501 at once and the connection closed, so the bytes after
  it are never read as a second request. libmicrohttpd 0.9.75 alone read the
  first two as one request plus a smuggled `GET /metrics`, ignored the
  third, and held an unknown coding without an answer for --timeout-s.
* `%00` in the path is 400 (it cut `/app.js%00.png` to `/app.js`, 200).
* Plain framing is unchanged: a chunked upload, a pipelined pair of GETs.
* Operator inputs that block: a FIFO in --web DIR hung the server before it
  listened, with SIGTERM/SIGINT/SIGHUP blocked (only SIGKILL stopped it);
  --model naming a FIFO listened and then ignored two SIGTERMs. Now a FIFO
  is refused at once, a detector model that is a FIFO too (the warm-up
  used to block in its open, where no signal flag reached it). Symbolic links in --web DIR are refused (one to any file the
  server could read was served).
"""

import os
import re
import signal
import socket
import subprocess
import time

import pytest

from conftest import HAMER_BIN, textured_image
from detect.common import models_dir
from test_serve import HOST, RIGHT, SLOW, Server, box_arg

SMUGGLED = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"


def exchange(port, data, wait=3.0):
    """Send data on a new connection and read until the server closes it or
    `wait` seconds pass: (reply bytes, closed by the server, seconds)."""
    s = socket.create_connection((HOST, port), timeout=wait)
    t0 = time.monotonic()
    s.sendall(data)
    out, closed = b"", False
    try:
        while time.monotonic() - t0 < wait:
            chunk = s.recv(65536)
            if not chunk:
                closed = True
                break
            out += chunk
    except socket.timeout:
        pass
    except ConnectionResetError:
        closed = True
    finally:
        s.close()
    return out, closed, time.monotonic() - t0


def statuses(reply):
    return [int(m) for m in re.findall(rb"HTTP/1\.[01] (\d{3}) ", reply)]


@pytest.fixture(scope="module")
def srv(tmp_path_factory, ckpt):
    d = tmp_path_factory.mktemp("hostile")
    from PIL import Image
    Image.fromarray(textured_image()).save(d / "photo.png")
    s = Server(d, ckpt("d2h2"), "--threads", 1, "--no-detector", "--timeout-s", 30)
    s.wait_ready()
    s.png = (d / "photo.png").read_bytes()
    yield s
    s.stop()


def post_head(extra, version="HTTP/1.1", path="/v1/predict?boxes=1,2,30,40"):
    return (f"POST {path} {version}\r\nHost: {HOST}\r\nContent-Type: image/png\r\n" + extra + "\r\n").encode()


FRAMING = [
    # (name, request bytes, status, words of the error)
    ("Content-Length and Transfer-Encoding",
     post_head("Content-Length: 60\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n" + SMUGGLED,
     400, "both Content-Length and Transfer-Encoding"),
    ("a folded Content-Length",
     post_head("Content-Length: 3\r\n 40\r\n") + b"abc" + SMUGGLED, 400, "folded"),
    ("a folded line after another header",
     b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\r\n\tb\r\n\r\n" + SMUGGLED, 400, "folded"),
    ("space before the colon of Transfer-Encoding",
     post_head("Transfer-Encoding : chunked\r\n") + b"5\r\nhello\r\n0\r\n\r\n" + SMUGGLED, 400, "not a token"),
    ("a tab before the colon", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A\t: b\r\n\r\n", 400, "not a token"),
    ("Transfer-Encoding xchunked", post_head("Transfer-Encoding: xchunked\r\n") + b"0\r\n\r\n", 501,
     "'xchunked' is not supported"),
    ("Transfer-Encoding gzip", post_head("Transfer-Encoding: gzip\r\n") + b"0\r\n\r\n", 501, "'gzip'"),
    ("Transfer-Encoding chunked, identity", post_head("Transfer-Encoding: chunked, identity\r\n") + b"0\r\n\r\n",
     501, "'chunked, identity'"),
    ("Transfer-Encoding on a GET", b"GET /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
     "'gzip'"),
    ("Transfer-Encoding twice",
     post_head("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n") + b"0\r\n\r\n" + SMUGGLED, 400,
     "given 2 times"),
    ("Transfer-Encoding in HTTP/1.0", post_head("Transfer-Encoding: chunked\r\n", "HTTP/1.0") + b"0\r\n\r\n", 400,
     "HTTP/1.0"),
    ("two Content-Lengths on a GET", b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: "
     + str(len(SMUGGLED)).encode() + b"\r\n\r\n" + SMUGGLED, 400, "conflicting Content-Length"),
]


@pytest.mark.parametrize("name,data,status,words", FRAMING, ids=[c[0] for c in FRAMING])
def test_framing_refused_and_closed(srv, name, data, status, words):
    reply, closed, secs = exchange(srv.port, data)
    # one answer, at once, then the connection closed: nothing after the
    # head (a smuggled GET /metrics) is read as a request
    assert statuses(reply) == [status], (name, reply[:600])
    assert words.encode() in reply and b"# TYPE" not in reply, (name, reply[:600])
    assert closed and secs < 2 * SLOW, (name, closed, secs)


@pytest.mark.parametrize("path", ["/app.js%00.png", "/readyz%00foo", "/metrics%00x", "/v1/render%00x",
                                  "/%00", "/healthz%00?x=1"])
def test_nul_in_path_refused(srv, path):
    reply, _, _ = exchange(srv.port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    assert statuses(reply) == [400] and b"NUL byte (%00)" in reply, (path, reply[:400])
    assert b"text/javascript" not in reply and b"hamer_" not in reply and b'"ready"' not in reply
    # %00 in the query is still the query's own refusal, and %2500 is a '%' followed by "00"
    reply, _, _ = exchange(srv.port, b"GET /healthz?a=%2500 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert statuses(reply) == [200], reply[:300]


def test_plain_framing_still_served(srv):
    png = srv.png
    # chunked (any case, as libmicrohttpd reads it) in three chunks
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (png[:100], png[100:5000], png[5000:])) + b"0\r\n\r\n"
    for te in ("chunked", "Chunked"):
        head = post_head(f"Transfer-Encoding: {te}\r\nConnection: close\r\n",
                         path="/v1/predict?boxes=" + box_arg(RIGHT))
        reply, closed, _ = exchange(srv.port, head + chunks, wait=60 * SLOW)
        assert statuses(reply) == [200] and b'"hands"' in reply, reply[:400]
    # keep-alive: two pipelined GETs, two answers on one connection
    two = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    reply, closed, _ = exchange(srv.port, two)
    assert statuses(reply) == [200, 200] and closed, reply[:600]
    # a bare LF ends a line (RFC 9112 2.2 allows it) and empty header values are fine
    reply, _, _ = exchange(srv.port, b"GET /healthz HTTP/1.1\nHost: x\nX-Empty:\nConnection: close\n\n")
    assert statuses(reply) == [200], reply[:300]


# ---------------------------------------------------------------------------
# Operator inputs that block or lead elsewhere
# ---------------------------------------------------------------------------

PAGE = ["index.html", "app.js", "style.css", "vendor/three.module.js", "vendor/GLTFLoader.js",
        "vendor/OrbitControls.js", "vendor/BufferGeometryUtils.js", "vendor/three-LICENSE.txt"]


def fake_page(d):
    """The page's file names with stand-in contents (the server only reads them)."""
    (d / "vendor").mkdir(parents=True)
    for f in PAGE:
        (d / f).write_text(f"// {f}\n")
    return d


def start(tmp_path, *args):
    """A server process on a free port; its log path."""
    log = tmp_path / f"serve-{time.monotonic_ns()}.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([str(HAMER_BIN), "serve", "--host", HOST, "--port", "0", *map(str, args)],
                                stdout=subprocess.DEVNULL, stderr=f)
    return proc, log


def stopped_within(proc, seconds):
    """The exit status if proc ended within seconds, else None (it is killed)."""
    try:
        return proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def port_of(log, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+) ", log.read_text(errors="replace"))
        if m:
            return int(m.group(1))
        time.sleep(0.05)
    return None


def test_web_dir_fifo_and_links_refused(tmp_path, ckpt):
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the page\n")
    cases = {"fifo": lambda d: (os.unlink(d / "app.js"), os.mkfifo(d / "app.js")),
             "file link": lambda d: (os.unlink(d / "app.js"), os.symlink(secret, d / "app.js")),
             "folder link": lambda d: (os.rename(d / "vendor", d.parent / f"{d.name}-vendor"),
                                       os.symlink(d.parent / f"{d.name}-vendor", d / "vendor"))}
    for name, make in cases.items():
        d = fake_page(tmp_path / name.replace(" ", "_") / "web")
        make(d)
        proc, log = start(tmp_path, "--model", ckpt("d2h2"), "--no-detector", "--threads", 1, "--web", d)
        try:
            port = port_of(log, proc, 20 * SLOW)
            assert port, f"{name}: never listened\n{log.read_text()}"
            why = "not a regular file" if name == "fifo" else "is a symbolic link"
            for path in ("/", "/app.js", "/vendor/three.module.js"):
                reply, _, _ = exchange(port, f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                assert statuses(reply) == [404] and why.encode() in reply, (name, path, reply[:500])
                assert b"not for the page" not in reply
            reply, _, _ = exchange(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert statuses(reply) == [200]
            proc.send_signal(signal.SIGTERM)
            assert stopped_within(proc, 30 * SLOW) == 0, log.read_text()
            assert f"web page: not installed" in log.read_text() and why in log.read_text()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_model_fifo_refused_at_once(tmp_path):
    fifo = tmp_path / "model.ckpt"
    os.mkfifo(fifo)
    proc, log = start(tmp_path, "--model", fifo, "--no-detector")
    rc = stopped_within(proc, 20 * SLOW)
    text = log.read_text()
    assert rc == 1 and f"--model '{fifo}' is not a regular file" in text, (rc, text)


def test_detector_fifo_refused_at_warm_up(tmp_path, ckpt):
    """A detector model that is a FIFO: the warm-up refuses it at once,
    naming the file, instead of blocking in its open (where no signal flag
    reaches it); the server stops, exit 1."""
    det = tmp_path / "detector"
    det.mkdir()
    for f in models_dir().iterdir():
        (det / f.name).symlink_to(f)
    (det / "palm_detection_full.tflite").unlink()
    os.mkfifo(det / "palm_detection_full.tflite")
    proc, log = start(tmp_path, "--model", ckpt("d2h2"), "--threads", 1, "--detector", det, "--drain-s", 2)
    try:
        rc = stopped_within(proc, 30 * SLOW)
        text = log.read_text()
        assert rc == 1, (rc, text)
        assert "palm_detection_full.tflite: not a regular file" in text, text
        assert "stopped (startup failed)" in text, text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
