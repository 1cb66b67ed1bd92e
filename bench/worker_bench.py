#!/usr/bin/env python3
"""Throughput of `hamer worker`: K workers on one redis-server of its own
(127.0.0.1, a free port, a temporary directory), N jobs of one kind, timed
from the first XADD to the last result; the workers are started and ready
before the jobs are added, so model loading is not counted.

    python3 bench/worker_bench.py --model build/test-fixtures/d1h1.ckpt \\
        [--jobs 60] [--workers 1] [--threads 1] [--batch 4] [--kind box|none]

--kind box: a 320x240 PNG with one box (decode, crop, regression, answer);
none: the same picture with `boxes: []` (no hand: the queue's own cost).
Prints jobs/s and jobs per worker CPU-second (user + system time of the
worker processes, which does not depend on what else the machine runs).
Uses the helpers of tests/test_worker.py (its RESP client and Redis runner).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
os.environ.setdefault("HAMER_BUILD", str(REPO / "build"))

import test_worker as T  # noqa: E402
from PIL import Image  # noqa: E402


def cpu_seconds(proc):
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--jobs", type=int, default=60)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--kind", choices=("box", "none"), default="box")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        Image.fromarray(T.textured(320, 240, 2)).save(d / "mid.png")
        img = (d / "mid.png").read_bytes()
        boxes = b'[{"bbox":[60.5,40.25,170,200]}]' if a.kind == "box" else b"[]"
        red = T.RedisServer(d)
        ws = []
        try:
            r = red.client()
            for i in range(a.workers):
                log = open(d / f"w{i}.log", "wb")
                ws.append(subprocess.Popen([str(T.HAMER_BIN), "worker", "--model", a.model, "--redis", red.url,
                                            "--consumer", f"b{i}", "--threads", str(a.threads),
                                            "--batch", str(a.batch)], stderr=log))
            for i, w in enumerate(ws):
                while "ready:" not in (d / f"w{i}.log").read_text():
                    if w.poll() is not None:
                        sys.exit((d / f"w{i}.log").read_text())
                    time.sleep(0.05)
            c0 = sum(cpu_seconds(w) for w in ws)
            t0 = time.monotonic()
            r.pipeline([["XADD", "hamer:jobs", "*", "id", f"j{j}", "image", img, "boxes", boxes]
                        for j in range(a.jobs)])
            while r.call("XLEN", "hamer:results") < a.jobs:
                time.sleep(0.01)
            dt = time.monotonic() - t0
            cs = sum(cpu_seconds(w) for w in ws) - c0
            print(f"{a.jobs} '{a.kind}' jobs in {dt:.2f} s: {a.jobs / dt:.1f} jobs/s with {a.workers} worker(s) "
                  f"x {a.threads} thread(s), batch {a.batch}; {a.jobs / cs:.1f} jobs per worker CPU-second; "
                  f"load average {os.getloadavg()[0]:.1f}")
        finally:
            for w in ws:
                w.terminate()
                w.wait()
            red.stop()


if __name__ == "__main__":
    main()
