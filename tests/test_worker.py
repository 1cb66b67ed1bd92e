"""`hamer worker` / `submit` / `results`: HaMeR jobs on Redis Streams.

Every test starts its own `redis-server` (Debian's, 7.x) on a free
loopback port with a temporary directory, and stops it; never a shared
or external Redis. Workers are real `hamer worker` processes on the
smallest checkpoint (d1h1, --threads 1); jobs are small pictures, most of
them cheap (no hand, or a box outside the image) and some regressed or
detected, so a job takes milliseconds to a few hundred.

Scenarios (each asserts jobs submitted / results / duplicate ids / dead
letters, and that nothing is left pending):
* 500 jobs, 3 workers: exactly one result per job, each equal to `hamer
  run` on the same input (the JSON without "timings_ms"); metrics and
  `hamer results --stats` agree;
* `kill -9` of a worker holding a batch: its jobs are claimed by the
  others after --claim-idle-ms;
* poison jobs (truncated JPEG, NaN boxes, a 50 MB payload, ...)
  interleaved with good ones: an error result each, the good ones right;
  and entries of random fields and bytes: one answer per job id;
* deliveries over --max-deliveries: dead letters with their last error;
  a job id answered before: acknowledged, not computed again;
* Redis killed and restarted (AOF, appendfsync always) while workers run:
  they reconnect, no job lost, none answered twice;
* SIGTERM during a batch: the batch is answered and acknowledged, exit 0.
Plus AUTH (ACL user and password, database number), the detector's
absence, and the commands' usage errors.

Under HAMER_SANITIZE=1 (ASan + UBSan builds, several times slower) the
job counts are cut (500 -> 100 in the big test, fewer regressions
elsewhere) and the waits are longer; the scenarios stay the same.
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import requests
from PIL import Image

from conftest import HAMER_BIN, REPO, SANITIZE, describe, run_hamer, textured_image

SLOW = 6 if SANITIZE else 1
N_BIG = 100 if SANITIZE else 500
N_REGRESS_BIG = 12 if SANITIZE else 40
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "SUMMARY: AddressSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")


# ---------------------------------------------------------------------------
# A minimal RESP2 client (the tests need nothing but a socket)
# ---------------------------------------------------------------------------

class RespError(Exception):
    pass


class Resp:
    def __init__(self, port, timeout=60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.f = self.sock.makefile("rb")

    def close(self):
        self.f.close()
        self.sock.close()

    @staticmethod
    def encode(args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += [b"$%d\r\n" % len(a), a, b"\r\n"]
        return b"".join(out)

    def reply(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise ValueError(f"bad RESP line {line!r}")

    def call(self, *args):
        self.sock.sendall(self.encode(args))
        r = self.reply()
        if isinstance(r, RespError):
            raise r
        return r

    def pipeline(self, cmds):
        self.sock.sendall(b"".join(self.encode(c) for c in cmds))
        return [self.reply() for _ in cmds]


def entries(reply):
    """[(entry id, {field: value bytes})] of an XRANGE-style reply."""
    out = []
    for eid, fields in reply or []:
        d = {fields[i].decode(): fields[i + 1] for i in range(0, len(fields), 2)} if fields else None
        out.append((eid.decode(), d))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """A redis-server of the test's own, on 127.0.0.1 only."""

    def __init__(self, tmp, aof=False, extra=()):
        exe = shutil.which("redis-server") or "/usr/bin/redis-server"
        if not os.path.exists(exe):
            pytest.fail("redis-server is not installed (scripts/deps.sh installs Debian's redis-server)")
        self.dir = tmp / f"redis-{time.monotonic_ns()}"
        self.dir.mkdir()
        self.proc = None
        # free_port() closes the port before redis-server binds it; another
        # test process (ctest -j) may take it meanwhile: then another port.
        for attempt in range(5):
            self.port = free_port()
            self.cmd = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
                        "--save", "", "--appendonly", "yes" if aof else "no", "--appendfsync", "always",
                        "--daemonize", "no", "--logfile", str(self.dir / "redis.log"), *extra]
            self.url = f"redis://127.0.0.1:{self.port}"
            if self.start(retry_if_taken=attempt < 4):
                break

    def start(self, retry_if_taken=False):
        """Start (or restart) redis-server on self.port; False only when
        retry_if_taken and the port turned out to be in use."""
        log_path = self.dir / "redis.log"
        start = log_path.stat().st_size if log_path.exists() else 0

        def own_log():      # what this start wrote (a restart appends)
            if not log_path.exists():
                return ""
            with open(log_path, "rb") as f:
                f.seek(start)
                return f.read().decode(errors="replace")
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while True:
            # Ready by its own log, not by a PING alone: with test processes
            # side by side the port may answer from another test's server.
            if "Ready to accept connections" in own_log() and self.proc.poll() is None:
                try:
                    c = Resp(self.port, timeout=2)
                    ok = c.pipeline([["PING"]])[0]
                    c.close()
                    if ok == "PONG" or "NOAUTH" in str(ok):     # up (a password is asked for)
                        return True
                except (OSError, ConnectionError):
                    pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                log = own_log()
                if retry_if_taken and "Address already in use" in log:
                    return False
                pytest.fail(f"redis-server did not start: {self.cmd}\n{log[-2000:]}")
            time.sleep(0.02)

    def client(self):
        c = Resp(self.port)
        return c

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=30)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def redis_factory(tmp_path):
    servers = []

    def make(**kw):
        s = RedisServer(tmp_path, **kw)
        servers.append(s)
        return s
    yield make
    for s in servers:
        s.stop()


# ---------------------------------------------------------------------------
# Workers
# ---------------------------------------------------------------------------

_LIVE = []


@pytest.fixture(autouse=True)
def _reap_workers():
    """A failed test leaves no worker running."""
    yield
    while _LIVE:
        w = _LIVE.pop()
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


class Worker:
    """One `hamer worker` process; stderr to a file (never an unread pipe)."""

    def __init__(self, tmp, model, url, name, *args, wait_ready=True):
        self.name = name
        self.log_path = tmp / f"worker-{name}-{time.monotonic_ns()}.log"
        self.cmd = [str(HAMER_BIN), "worker", "--model", str(model), "--redis", url, "--consumer", name,
                    "--threads", "1", *[str(a) for a in args]]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=log)
        _LIVE.append(self)
        if wait_ready:
            self.wait_for("hamer worker: ready:", 120 * SLOW)

    def log(self):
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text, timeout):
        deadline = time.monotonic() + timeout
        while text not in self.log():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                pytest.fail(f"worker {self.name}: no '{text}' (exit {self.proc.poll()}):\n{self.log()[-4000:]}")
            time.sleep(0.05)

    def metrics_url(self):
        self.wait_for("metrics on http://", 30)
        m = re.search(r"metrics on (http://127\.0\.0\.1:\d+/metrics)", self.log())
        return m.group(1)

    def stop(self, sig=signal.SIGTERM, expect=0):
        """Signal; the exit status must be `expect` and the log sanitizer-clean."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=120 * SLOW)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            pytest.fail(f"worker {self.name} did not exit after {sig!r}:\n{self.log()[-4000:]}")
        log = self.log()
        assert rc == expect, f"worker {self.name}: exit {rc}\n{log[-4000:]}"
        for mark in SANITIZER_MARKS:
            assert mark not in log, log[-8000:]
        return log

    def counts(self):
        """The totals of its 'stopped:' line."""
        m = re.search(r"stopped: results ok (\d+), error (\d+); duplicates (\d+); claims (\d+); "
                      r"dead letters (\d+)", self.log())
        assert m, self.log()[-2000:]
        ok, err, dup, claims, dead = map(int, m.groups())
        return dict(ok=ok, error=err, duplicates=dup, claims=claims, dead=dead)


def worker_args(*extra):
    return ["--batch", 4, "--claim-idle-ms", 60000, *extra]


# ---------------------------------------------------------------------------
# Inputs and their `hamer run` references
# ---------------------------------------------------------------------------

def strip_timings(text):
    out, n = re.subn(r',"timings_ms":\{[^{}]*\}', "", text)
    assert n == 1, f"expected one timings_ms object in {text[:200]!r}"
    return out


def shared_photo():
    d = Path(os.environ.get("HAMER_SHARED_IMAGES") or REPO.parent / "shared" / "images")
    p = d / "hamer_example_5.jpg"
    if not p.exists():
        pytest.fail(f"the test photos are missing: no {p} (set HAMER_SHARED_IMAGES)")
    return p


class Scene:
    """Job templates (fields of a job entry) with their `hamer run` result."""

    def __init__(self, d, model):
        self.dir, self.model = d, model
        small = textured_image(96, 72, 1)
        mid = textured_image(320, 240, 2)
        Image.fromarray(small).save(d / "small.png")
        Image.fromarray(mid).save(d / "mid.png")
        Image.fromarray(mid).save(d / "mid.jpg", quality=90)
        photo = Image.open(shared_photo())
        photo.resize((photo.size[0] // 3, photo.size[1] // 3)).save(d / "hands.jpg", quality=90)
        self.files = {n: (d / n).read_bytes() for n in ("small.png", "mid.png", "mid.jpg", "hands.jpg")}
        self.templates = {}
        # cheap: no hand, or one hand whose box misses the image (its own error)
        self.add("none", "small.png", boxes=[])
        self.add("outside", "small.png", boxes=[{"bbox": [500, 500, 600, 600]}])
        self.add("none_jpg", "mid.jpg", boxes=[])
        # regressed
        self.add("right", "mid.png", boxes=[{"bbox": [60.5, 40.25, 170, 200]}])
        self.add("left_pad", "mid.png", boxes=[{"bbox": [150, 60, 260, 210], "is_right": False}],
                 crop_mode="pad")
        self.add("two_vertices", "mid.jpg", boxes=[{"bbox": [40, 30, 150, 180]},
                                                   {"bbox": [170, 50, 300, 220], "is_right": False}],
                 vertices=True, rescale="2.5")
        # detected (no boxes field)
        self.add("detected", "hands.jpg")

    def add(self, name, image, boxes=None, vertices=False, rescale=None, crop_mode=None):
        fields = {"image": self.files[image]}
        args = ["run", "--model", self.model, "--image", self.dir / image, "--output",
                self.dir / f"ref-{name}.json", "--threads", "1"]
        if boxes is not None:
            text = json.dumps(boxes)
            fields["boxes"] = text.encode()
            (self.dir / f"boxes-{name}.json").write_text(text)
            args += ["--boxes", self.dir / f"boxes-{name}.json"]
        if vertices:
            fields["vertices"] = b"1"
            args.append("--vertices")
        if rescale:
            fields["rescale"] = rescale.encode()
            args += ["--rescale", rescale]
        if crop_mode:
            fields["crop_mode"] = crop_mode.encode()
            args += ["--crop-mode", crop_mode]
        proc = run_hamer(args)
        assert proc.returncode in (0, 3, 4), describe(proc)
        ref = strip_timings((self.dir / f"ref-{name}.json").read_text())
        self.templates[name] = (fields, ref)

    def ref(self, name):
        return self.templates[name][1]

    def job(self, name, job_id):
        """XADD arguments of one job of this template."""
        fields = self.templates[name][0]
        args = ["XADD", "hamer:jobs", "*", "id", job_id]
        for k, v in fields.items():
            args += [k, v]
        return args


@pytest.fixture(scope="module")
def scene(tmp_path_factory, hamer_bin, ckpt):
    return Scene(tmp_path_factory.mktemp("worker"), ckpt("d1h1"))


def submit(r, scene, plan):
    """XADD the jobs of plan [(job id, template)]; {job id: entry id}."""
    replies = r.pipeline([scene.job(t, jid) for jid, t in plan])
    for x in replies:
        assert not isinstance(x, Exception), x
    return {jid: e.decode() for (jid, _), e in zip(plan, replies)}


def results(r, key="hamer:results"):
    return entries(r.call("XRANGE", key, "-", "+"))


def pending(r, consumer=None):
    args = ["XPENDING", "hamer:jobs", "hamer", "-", "+", 10000] + ([consumer] if consumer else [])
    return r.call(*args)


def wait_results(r, n, timeout, workers=()):
    """Until the results stream holds n entries and nothing is pending."""
    deadline = time.monotonic() + timeout
    while True:
        have = r.call("XLEN", "hamer:results")
        if have >= n and not pending(r):
            return have
        for w in workers:
            if w.proc.poll() is not None and w.proc.returncode != -9:
                pytest.fail(f"worker {w.name} exited {w.proc.returncode}:\n{w.log()[-4000:]}")
        if time.monotonic() > deadline:
            logs = "\n".join(w.log()[-1500:] for w in workers)
            pytest.fail(f"{have} of {n} results after {timeout} s; pending {pending(r)[:5]}\n{logs}")
        time.sleep(0.1)


def wait_drained(r, timeout, workers=()):
    """Until the group has read every entry of the jobs stream and nothing
    is pending (for entries that share a job id, and so one result)."""
    deadline = time.monotonic() + timeout
    while True:
        g = r.call("XINFO", "GROUPS", "hamer:jobs")
        read = g[0][9] if g else 0      # entries-read
        if read == r.call("XLEN", "hamer:jobs") and not pending(r):
            return
        for w in workers:
            if w.proc.poll() is not None:
                pytest.fail(f"worker {w.name} exited {w.proc.returncode}:\n{w.log()[-4000:]}")
        if time.monotonic() > deadline:
            pytest.fail(f"{read} entries read after {timeout} s; pending {pending(r)[:5]}")
        time.sleep(0.1)


def check_once(r, plan, scene=None, dead=0):
    """Exactly one result per submitted job (equal to its reference when the
    scene is given), no pending entry, `dead` dead letters. Returns
    {job id: fields} and prints the counts."""
    res = results(r)
    ids = [f["id"].decode() for _, f in res]
    by_id = {f["id"].decode(): f for _, f in res}
    counts = dict(submitted=len(plan), results=len(res), duplicates=len(ids) - len(set(ids)),
                  dead_letters=r.call("XLEN", "hamer:jobs:dead"))
    print("counts:", counts)
    assert counts["duplicates"] == 0, counts
    assert set(by_id) == {jid for jid, _ in plan}, counts
    assert counts["results"] == len(plan) and counts["dead_letters"] == dead, counts
    assert pending(r) == []
    if scene:
        for jid, t in plan:
            f = by_id[jid]
            assert f["status"] == b"ok", (jid, f.get("error"))
            assert strip_timings(f["result"].decode()) == scene.ref(t), (jid, t)
    return by_id


# ---------------------------------------------------------------------------
# Usage, URLs, detector
# ---------------------------------------------------------------------------

def test_usage_errors(hamer_bin, tmp_path):
    for cmd in ("worker", "submit", "results"):
        proc = run_hamer([cmd, "--help"])
        assert proc.returncode == 0 and "redis://" in proc.stdout, describe(proc)
    assert "worker" in run_hamer(["--help"]).stdout
    env = {k: v for k, v in os.environ.items() if k != "HAMER_REDIS_URL"}
    for args, what in ((["worker", "--redis", "redis://h"], "--model"),
                       (["worker", "--model", "m"], "--redis"),
                       (["worker", "--model", "m", "--redis", "rediss://h:6380"], "TLS"),
                       (["worker", "--model", "m", "--redis", "http://h"], "redis://"),
                       (["worker", "--model", "m", "--redis", "redis://h:99999"], "port"),
                       (["worker", "--model", "m", "--redis", "redis://h/x"], "database"),
                       (["worker", "--model", "m", "--redis", "redis://u:%zz@h"], "escape"),
                       (["worker", "--model", "m", "--redis", "redis://h", "--batch", "0"], "--batch"),
                       (["worker", "--model", "m", "--redis", "redis://h", "--consumer", "a b"], "--consumer"),
                       (["worker", "--model", "m", "--redis", "redis://h", "--bogus", "1"], "unknown option"),
                       (["worker", "--model", "m", "--redis", "redis://h", "--results", "hamer:jobs"], "different"),
                       (["submit", "--redis", "redis://h"], "--image"),
                       (["submit", "--redis", "redis://h", "--image", "x", "--box", "1,2,3"], "box"),
                       (["submit", "--redis", "redis://h", "--image", "x", "--id", "a b"], "--id"),
                       (["results", "--redis", "redis://h", "--from", "abc"], "--from")):
        proc = run_hamer(args, env=env)
        assert proc.returncode == 2 and what in proc.stderr, (args, describe(proc))


def test_missing_detector_refuses_to_start(redis_factory, tmp_path, ckpt):
    """Without its models the worker stops at start (naming where it looked);
    --no-detect starts it, and a job without boxes gets an error result."""
    red = redis_factory()
    proc = run_hamer(["worker", "--model", ckpt("d1h1"), "--redis", red.url, "--detector", tmp_path / "none"],
                     timeout=120 * SLOW)
    assert proc.returncode == 1, describe(proc)
    assert str(tmp_path / "none") in proc.stderr and "--no-detect" in proc.stderr
    Image.fromarray(textured_image(64, 48, 3)).save(tmp_path / "a.png")
    r = red.client()
    r.call("XADD", "hamer:jobs", "*", "id", "nobox", "image", (tmp_path / "a.png").read_bytes())
    w = Worker(tmp_path, ckpt("d1h1"), red.url, "nd", "--no-detect")
    wait_results(r, 1, 60 * SLOW, [w])
    w.stop()
    (_, f), = results(r)
    assert f["status"] == b"error" and b"without the detector" in f["error"]


def test_no_hand_found_says_detected(redis_factory, ckpt, tmp_path):
    """A job without boxes on a photo without hands: "detected" with the
    detection's time, as `hamer run` (exit 4) writes it; with "boxes": []
    it stays "given", without a detect time."""
    model = ckpt("d1h1")
    Image.fromarray(np.full((72, 96, 3), 128, np.uint8)).save(tmp_path / "grey.png")
    ref = tmp_path / "ref.json"
    proc = run_hamer(["run", "--model", model, "--image", tmp_path / "grey.png", "--output", ref,
                      "--threads", "1"])
    assert proc.returncode == 4, describe(proc)
    red = redis_factory()
    r = red.client()
    image = (tmp_path / "grey.png").read_bytes()
    r.call("XADD", "hamer:jobs", "*", "id", "auto", "image", image)
    r.call("XADD", "hamer:jobs", "*", "id", "given", "image", image, "boxes", "[]")
    w = Worker(tmp_path, model, red.url, "g", *worker_args())
    wait_results(r, 2, 60 * SLOW, [w])
    w.stop()
    by_id = {f["id"].decode(): f for _, f in results(r)}
    auto, given = (json.loads(by_id[k]["result"]) for k in ("auto", "given"))
    assert auto["hands"] == [] and auto["boxes"] == "detected", auto
    assert set(auto["timings_ms"]) == {"decode", "detect", "crop", "regress", "finalise"}, auto
    assert strip_timings(by_id["auto"]["result"].decode()) == strip_timings(ref.read_text())
    assert given["hands"] == [] and given["boxes"] == "given" and "detect" not in given["timings_ms"], given


# ---------------------------------------------------------------------------
# 500 jobs, 3 workers
# ---------------------------------------------------------------------------

def big_plan(n, n_regress):
    """n jobs: n_regress of them regressed (over three templates), two
    detected, the rest cheap; spread evenly."""
    plan = []
    regress = ["right", "left_pad", "two_vertices"]
    cheap = ["none", "outside", "none_jpg"]
    every = max(1, n // n_regress)
    for i in range(n):
        if i in (n // 3, 2 * n // 3):
            t = "detected"
        elif i % every == 0:
            t = regress[(i // every) % 3]
        else:
            t = cheap[i % 3]
        plan.append((f"job-{i:04d}", t))
    return plan


@pytest.mark.slow
def test_500_jobs_three_workers(redis_factory, scene, tmp_path):
    red = redis_factory()
    r = red.client()
    plan = big_plan(N_BIG, N_REGRESS_BIG)
    submit(r, scene, plan)
    t0 = time.monotonic()
    # Started together, so that none has the queue to itself while the others load.
    workers = [Worker(tmp_path, scene.model, red.url, f"w{k}", *worker_args("--batch", 8),
                      *(["--metrics-port", 0] if k == 0 else []), wait_ready=False) for k in range(3)]
    for w in workers:
        w.wait_for("hamer worker: ready:", 120 * SLOW)
    wait_results(r, len(plan), 600 * SLOW, workers)
    print(f"{len(plan)} jobs in {time.monotonic() - t0:.1f} s with 3 workers (model loads included)")
    # The metrics of worker 0 against its own share of the results.
    text = requests.get(workers[0].metrics_url(), timeout=10 * SLOW).text
    mine = sum(1 for _, f in results(r) if f["worker"] == b"w0")
    assert re.search(r'^hamer_worker_jobs_total\{result="ok"\} (\d+)$', text, re.M).group(1) == str(mine)
    assert 'hamer_worker_stage_seconds_bucket{stage="regress",le="+Inf"}' in text
    assert 'hamer_worker_info{consumer="w0"' in text and "hamer_worker_connected 1" in text
    for w in workers:
        w.stop()
    by_id = check_once(r, plan, scene)
    shares = [w.counts() for w in workers]
    assert sum(s["ok"] for s in shares) == len(plan) and all(s["error"] == 0 for s in shares), shares
    assert sum(1 for s in shares if s["ok"]) >= 2, shares        # the work was shared
    assert len({f["worker"] for f in by_id.values()}) >= 2
    # `hamer results` prints every result; --stats agrees with the counts above.
    proc = run_hamer(["results", "--redis", red.url])
    assert proc.returncode == 0, describe(proc)
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert len(lines) == len(plan) and all(x["status"] == "ok" and "result" in x for x in lines)
    assert lines[0]["result"]["image"]["width"] > 0
    proc = run_hamer(["results", "--redis", red.url, "--stats"])
    assert proc.returncode == 0, describe(proc)
    st = json.loads(proc.stdout)
    assert st["results"] == {"stream": "hamer:results", "length": len(plan), "ok": len(plan), "error": 0,
                             "jobs": len(plan), "duplicates": 0}
    assert st["jobs"]["length"] == len(plan) and st["dead_letters"]["length"] == 0
    g, = st["jobs"]["groups"]
    assert g["name"] == "hamer" and g["pending"] == 0 and g["lag"] == 0
    assert {c["name"] for c in st["jobs"]["consumers"]} == {"w0", "w1", "w2"}


# ---------------------------------------------------------------------------
# kill -9 in the middle of a batch
# ---------------------------------------------------------------------------

def test_kill9_mid_batch_jobs_are_claimed(redis_factory, scene, tmp_path):
    red = redis_factory()
    r = red.client()
    n = 12 if SANITIZE else 30
    plan = [(f"k-{i:03d}", ["right", "left_pad", "two_vertices"][i % 3]) for i in range(n)]
    submit(r, scene, plan)
    args = worker_args("--claim-idle-ms", 1500 * SLOW)
    victim = Worker(tmp_path, scene.model, red.url, "victim", *args)
    # Kill it while it holds a batch it has begun answering.
    deadline = time.monotonic() + 120 * SLOW
    while not (r.call("XLEN", "hamer:results") >= 1 and pending(r, "victim")):
        assert time.monotonic() < deadline, victim.log()[-3000:]
        time.sleep(0.02)
    victim.proc.kill()
    victim.proc.wait()
    held = [p[0].decode() for p in pending(r, "victim")]
    assert held, "the victim held no batch when killed"
    others = [Worker(tmp_path, scene.model, red.url, f"o{k}", *args) for k in range(2)]
    wait_results(r, n, 300 * SLOW, others)
    for w in others:
        w.stop()
    by_id = check_once(r, plan, scene)
    claims = sum(w.counts()["claims"] for w in others)
    assert claims >= len(held), (claims, held)
    entry_of = {f["entry"].decode(): f for f in by_id.values()}
    assert all(entry_of[e]["worker"] in (b"o0", b"o1") for e in held)
    print(f"victim held {len(held)} jobs when killed; {claims} claimed by the others")


# ---------------------------------------------------------------------------
# Poison jobs
# ---------------------------------------------------------------------------

def png_claiming(w, h):
    """A valid 2x2 PNG whose IHDR then claims w x h (CRC fixed)."""
    import io
    import struct
    import zlib
    buf = io.BytesIO()
    Image.fromarray(np.zeros((2, 2, 3), np.uint8)).save(buf, format="PNG")
    b = bytearray(buf.getvalue())
    b[16:24] = struct.pack(">II", w, h)
    b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])))
    return bytes(b)


def test_poison_jobs_get_error_results(redis_factory, scene, tmp_path):
    red = redis_factory()
    r = red.client()
    jpg = scene.files["mid.jpg"]
    png = scene.files["small.png"]
    poison = {
        "truncated-jpeg": (["image", jpg[:len(jpg) // 2], "boxes", '[{"bbox":[60,40,170,200]}]'], "JPEG"),
        "nan-boxes": (["image", png, "boxes", '[{"bbox":[NaN,10,50,60]}]'], "boxes"),
        "inf-boxes": (["image", png, "boxes", '[{"bbox":[1e999,10,50,60]}]'], "boxes"),
        "huge-payload": (["image", b"\xff\xd8" + bytes(50 << 20)], "over the limit"),
        "huge-image": (["image", png_claiming(20000, 20000), "boxes", "[]"], "megapixels"),
        "no-image": (["boxes", "[]"], "no 'image' field"),
        "unknown-field": (["image", png, "colour", "red"], "unknown field 'colour'"),
        "two-images": (["image", png, "image", png], "given twice"),
        "bad-vertices": (["image", png, "vertices", "yes"], "'vertices'"),
        "bad-rescale": (["image", png, "boxes", "[]", "rescale", "nan"], "'rescale'"),
        "bad-crop-mode": (["image", png, "boxes", "[]", "crop_mode", "zoom"], "'crop_mode'"),
        "bad-body": (["image", png, "body", "yes"], "'body'"),
        "body-with-boxes": (["image", png, "boxes", "[]", "body", "on"], "without 'boxes'"),
        "bad-body-boxes": (["image", png, "body_boxes", "yes"], "'body_boxes' must be 0 or 1"),
        "body-boxes-with-boxes": (["image", png, "boxes", "[]", "body_boxes", "1"], "'body_boxes' chooses"),
        "65-hands": (["image", png, "boxes", json.dumps([{"bbox": [1, 1, 9, 9]}] * 65)], "64"),
    }
    good = ["none", "right", "outside", "two_vertices"]
    cmds, plan_good, expect = [], [], {}
    for i, (name, (fields, what)) in enumerate(poison.items()):
        g = (f"good-{i:02d}", good[i % len(good)])
        plan_good.append(g)
        cmds.append(scene.job(g[1], g[0]))
        cmds.append(["XADD", "hamer:jobs", "*", "id", name, *fields])
        expect[name] = what
    # A job id that is itself malformed: answered under its entry ID.
    cmds.append(["XADD", "hamer:jobs", "*", "id", "bad id", "image", png])
    replies = r.pipeline(cmds)
    bad_id_entry = replies[-1].decode()
    w = Worker(tmp_path, scene.model, red.url, "p", *worker_args("--max-payload-mb", 20))
    total = len(cmds)
    wait_results(r, total, 300 * SLOW, [w])
    w.stop()
    res = results(r)
    by_id = {f["id"].decode(): f for _, f in res}
    ids = [f["id"].decode() for _, f in res]
    counts = dict(submitted=total, results=len(res), duplicates=len(ids) - len(set(ids)),
                  dead_letters=r.call("XLEN", "hamer:jobs:dead"))
    print("counts:", counts)
    assert counts == dict(submitted=total, results=total, duplicates=0, dead_letters=0)
    for name, what in expect.items():
        f = by_id[name]
        assert f["status"] == b"error" and "result" not in f, (name, f)
        assert what in f["error"].decode(), (name, f["error"])
    assert b"'id'" in by_id[bad_id_entry]["error"]
    # docs/server.md's table of job fields names exactly those the worker takes
    taken = re.search(r"\(fields: ([^)]*)\)", by_id["unknown-field"]["error"].decode()).group(1).split(", ")
    doc = (REPO / "docs" / "server.md").read_text()
    table = doc[doc.index("| field | | |"):]
    cells = re.findall(r"^\| ([^|]*) \|", table[:table.index("\n\n")], re.M)[2:]    # past the header rows
    documented = [name for cell in cells for name in re.findall(r"`(\w+)`", cell)]
    assert sorted(documented) == sorted(taken), (documented, taken)
    for jid, t in plan_good:
        assert by_id[jid]["status"] == b"ok"
        assert strip_timings(by_id[jid]["result"].decode()) == scene.ref(t)
    assert w.counts()["error"] == len(poison) + 1


def test_random_entries_each_get_one_answer(redis_factory, scene, tmp_path):
    """Entries of random fields and bytes (names right or wrong, values
    garbage, images with flipped bytes, boxes half-valid): each gets exactly
    one result, the worker never stops, and nothing stays pending."""
    red = redis_factory()
    r = red.client()
    rng = np.random.RandomState(16)
    names = [b"image", b"id", b"boxes", b"vertices", b"rescale", b"crop_mode", b"x", b"", b"image\0", b"ID"]
    png, jpg = scene.files["small.png"], scene.files["mid.jpg"]
    values = [lambda: bytes(rng.randint(0, 256, rng.randint(0, 300)).astype(np.uint8)),
              lambda: flip(png), lambda: flip(jpg), lambda: png,
              lambda: b'[{"bbox":[%d,%d,%d,%d],"is_right":%s}]' % (*rng.randint(-50, 120, 4),
                                                                   [b"true", b"false", b"1"][rng.randint(3)]),
              lambda: b"[]", lambda: b"1", lambda: b"0", lambda: b"nan", lambda: b"pad", lambda: b"\xff\xfe"]

    def flip(data):
        b = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            b[rng.randint(len(b))] ^= 1 << rng.randint(8)
        return bytes(b[:rng.randint(len(b) // 2, len(b) + 1)])

    n = 40 if SANITIZE else 150
    cmds = []
    # Values that are mostly right for each known field.
    fair = {b"id": lambda: b"r-%d" % rng.randint(1 << 30), b"boxes": values[4], b"vertices": values[6],
            b"rescale": lambda: b"2.5", b"crop_mode": values[9]}
    for i in range(n):
        # Half of them: a picture (intact or not), boxes, and other known fields.
        real = rng.rand() < 0.5
        fields = [b"image", [png, jpg, png, flip(png), flip(jpg)][rng.randint(5)], b"boxes", b"[]"] if real else []
        for _ in range(rng.randint(0 if real else 1, 3 if real else 6)):
            name = names[rng.randint(1, 6)] if real else names[rng.randint(len(names))]
            ok = real and rng.rand() < 0.8
            fields += [name, fair[name]() if ok else values[rng.randint(len(values))]()]
        cmds.append(["XADD", "hamer:jobs", "*", *fields])
    entry_ids = [e.decode() for e in r.pipeline(cmds)]
    w = Worker(tmp_path, scene.model, red.url, "g", *worker_args("--no-detect"))
    wait_drained(r, 300 * SLOW, [w])
    w.stop()
    res = results(r)
    answered = [f["entry"].decode() for _, f in res]
    # Several entries may carry the same (random) id: one answer per id then.
    print(f"counts: {n} random entries, {len(res)} results, {sum(f['status'] == b'ok' for _, f in res)} ok")
    assert len(answered) == len(set(answered)) and set(answered) <= set(entry_ids)
    assert len({f["id"] for _, f in res}) == len(res)
    assert pending(r) == [] and r.call("XLEN", "hamer:jobs:dead") == 0
    assert any(f["status"] == b"ok" for _, f in res) and any(f["status"] == b"error" for _, f in res)
    c = w.counts()
    assert c["ok"] + c["error"] == len(res) and c["ok"] + c["error"] + c["duplicates"] == n, c


# ---------------------------------------------------------------------------
# Dead letters, and a job id answered before
# ---------------------------------------------------------------------------

def test_dead_letters_and_answered_ids(redis_factory, scene, tmp_path):
    """Three jobs are read by a consumer that never answers ('ghost'); two of
    them are delivered again until they reach --max-deliveries (2). The
    worker claims all three: those two become dead letters (with the last
    error recorded for one of them, none for the other), the third is
    answered normally. A job id submitted again after its answer is
    acknowledged without being computed again."""
    red = redis_factory()
    r = red.client()
    plan = [("dl-1", "none"), ("dl-2", "outside"), ("dl-3", "right")]
    ent = submit(r, scene, plan)
    r.call("XGROUP", "CREATE", "hamer:jobs", "hamer", "0")
    assert len(r.call("XREADGROUP", "GROUP", "hamer", "ghost", "COUNT", 3, "STREAMS", "hamer:jobs", ">")[0][1]) == 3
    r.call("XCLAIM", "hamer:jobs", "hamer", "ghost", 0, ent["dl-1"], ent["dl-2"])     # 2 deliveries each
    r.call("HSET", "hamer:jobs:errors", ent["dl-1"], "out of memory (simulated)")
    time.sleep(0.3)
    w = Worker(tmp_path, scene.model, red.url, "d", *worker_args("--max-deliveries", 2, "--claim-idle-ms", 200))
    wait_results(r, 3, 120 * SLOW, [w])
    # The same job id again: acknowledged, not computed, no second result.
    again = submit(r, scene, [("dl-3", "right")])["dl-3"]
    deadline = time.monotonic() + 60 * SLOW
    while r.call("XINFO", "GROUPS", "hamer:jobs")[0][7].decode() != again or pending(r):   # last-delivered-id
        assert time.monotonic() < deadline, w.log()[-3000:]
        time.sleep(0.05)
    w.stop()
    by_id = check_once(r, plan, dead=2)
    dead = {f["id"].decode(): f for _, f in entries(r.call("XRANGE", "hamer:jobs:dead", "-", "+"))}
    assert set(dead) == {"dl-1", "dl-2"}
    assert dead["dl-1"]["deliveries"] == b"3" and dead["dl-1"]["entry"].decode() == ent["dl-1"]
    assert b"out of memory (simulated)" in dead["dl-1"]["error"]
    assert b"no error recorded" in dead["dl-2"]["error"]
    for j in ("dl-1", "dl-2"):
        assert by_id[j]["status"] == b"error" and b"dead letter after 3 deliveries" in by_id[j]["error"]
    assert by_id["dl-3"]["status"] == b"ok"
    assert strip_timings(by_id["dl-3"]["result"].decode()) == scene.ref("right")
    c = w.counts()
    assert c == dict(ok=1, error=2, duplicates=1, claims=3, dead=2), c
    assert r.call("HLEN", "hamer:jobs:errors") == 0
    assert 0 < r.call("TTL", "hamer:results:done:dl-3") <= 604800


# ---------------------------------------------------------------------------
# Redis restarted while the workers run
# ---------------------------------------------------------------------------

@pytest.mark.slow
def test_redis_restart_with_aof(redis_factory, scene, tmp_path):
    red = redis_factory(aof=True)
    r = red.client()
    n = 16 if SANITIZE else 40
    plan = [(f"rs-{i:03d}", ["right", "none", "left_pad", "outside"][i % 4]) for i in range(n)]
    submit(r, scene, plan)
    workers = [Worker(tmp_path, scene.model, red.url, f"r{k}", *worker_args("--claim-idle-ms", 5000 * SLOW))
               for k in range(2)]
    deadline = time.monotonic() + 120 * SLOW
    while r.call("XLEN", "hamer:results") < n // 4:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    r.close()
    red.kill()          # no goodbye: appendfsync always kept every acknowledged write
    time.sleep(1.0)
    red.start()
    r = red.client()
    wait_results(r, n, 300 * SLOW, workers)
    # Every worker reconnects, busy or idle at the kill: one that had already
    # finished its share may still be in its reconnect back-off when the last
    # result lands, so wait for it before stopping.
    for w in workers:
        w.wait_for("connected again", 60 * SLOW)
        w.stop()
    check_once(r, plan, scene)


# ---------------------------------------------------------------------------
# SIGTERM during a batch
# ---------------------------------------------------------------------------

def test_sigterm_finishes_and_acks_the_batch(redis_factory, scene, tmp_path):
    red = redis_factory()
    r = red.client()
    n = 16
    plan = [(f"t-{i:03d}", "right") for i in range(n)]
    submit(r, scene, plan)
    w = Worker(tmp_path, scene.model, red.url, "t", *worker_args("--batch", 8))
    deadline = time.monotonic() + 120 * SLOW
    while not pending(r, "t"):
        assert time.monotonic() < deadline, w.log()[-3000:]
        time.sleep(0.01)
    held = len(pending(r, "t"))
    w.stop(signal.SIGTERM, expect=0)
    assert "SIGTERM: the batch in hand is answered" in w.log()
    got = r.call("XLEN", "hamer:results")
    read = r.call("XINFO", "GROUPS", "hamer:jobs")[0][9]      # entries-read
    assert pending(r) == [] and got == read and held <= got < n, (held, got, read)
    print(f"SIGTERM with {held} jobs in hand: {got} answered and acknowledged, {n - got} left in the stream")
    # Another worker answers the rest; one result per job in the end.
    w2 = Worker(tmp_path, scene.model, red.url, "t2", *worker_args())
    wait_results(r, n, 300 * SLOW, [w2])
    w2.stop()
    check_once(r, plan, scene)


# ---------------------------------------------------------------------------
# AUTH, database number, `hamer submit`
# ---------------------------------------------------------------------------

def test_auth_user_password_and_db(redis_factory, scene, tmp_path):
    red = redis_factory(extra=["--requirepass", "pw0", "--user", "alice", "on", ">s3cr@t", "~*", "&*", "+@all"])
    url = f"redis://alice:s3cr%40t@127.0.0.1:{red.port}/3"
    r = red.client()
    r.call("AUTH", "alice", "s3cr@t")
    r.call("SELECT", 3)
    w = Worker(tmp_path, scene.model, url, "a", *worker_args())
    proc = run_hamer(["submit", "--redis", url, "--image", scene.dir / "mid.png", "--box", "60.5,40.25,170,200",
                      "--id", "sub-1"])
    assert proc.returncode == 0 and proc.stdout.strip() == "sub-1", describe(proc)
    env = dict(os.environ, HAMER_REDIS_URL=f"redis://:pw0@127.0.0.1:{red.port}/3")   # the default user
    proc = run_hamer(["submit", "--image", scene.dir / "small.png", "--boxes", scene.dir / "boxes-none.json"],
                     env=env)
    assert proc.returncode == 0 and re.fullmatch(r"\d+-\d+", proc.stdout.strip()), describe(proc)
    entry = proc.stdout.strip()
    wait_results(r, 2, 120 * SLOW, [w])
    w.stop()
    by_id = {f["id"].decode(): f for _, f in results(r)}
    assert strip_timings(by_id["sub-1"]["result"].decode()) == scene.ref("right")
    assert strip_timings(by_id[entry]["result"].decode()) == scene.ref("none")
    # `hamer results --follow --count` ends after that many.
    proc = run_hamer(["results", "--follow", "--count", "2"], env=env, timeout=60 * SLOW)
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 2, describe(proc)
    # A wrong password stops the worker at once, saying why.
    proc = run_hamer(["worker", "--model", scene.model, "--redis", f"redis://alice:nope@127.0.0.1:{red.port}",
                      "--no-detect"], timeout=120 * SLOW)
    assert proc.returncode == 1 and "WRONGPASS" in proc.stderr, describe(proc)
    proc = run_hamer(["results", "--redis", f"redis://127.0.0.1:{red.port}", "--stats"])
    assert proc.returncode == 1 and "NOAUTH" in proc.stderr, describe(proc)
