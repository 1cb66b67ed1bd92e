"""`hamer batch` (a folder of photos in, a folder of results out) and
Model.predict_folder.

- a folder with the shared photos, a corrupt JPEG, a PNG with alpha, a
  non-image file, a photo without hands and a nested folder: NAME.json,
  NAME_all.png, NAME_side.png, NAME_N.obj per image, the subfolder
  mirrored, one errors.jsonl line per bad image, exit 3;
- per image the same RESULT.json as `hamer run` on that image, byte for
  byte (timings aside), and the same pictures and meshes;
- a second run computes nothing; a touched image is redone; --force
  redoes all;
- killed with SIGKILL after K images and run again: no finished image
  computed twice (mtimes unchanged, the summary's counts), none missing,
  no partial or temporary file left;
- an output folder that cannot be created or written: a clear error
  before any work (before the model is even looked at);
- --boxes-dir, --glob, --jobs (same results), usage errors;
- Model.predict_folder: the same files and records as the command.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from PIL import Image

from conftest import BUILD, HAMER_BIN, REPO, SANITIZE, TIMEOUT_SMALL, describe, python_child_env, run_hamer
from detect.common import shared_images

TEMP = re.compile(r"^\..+\.(json|png|obj|jsonl)\.[A-Za-z0-9]{6}$")


def batch(model, inp, out, *extra, env=None):
    return run_hamer(["batch", "--model", model, "--input-dir", inp, "--out-dir", out, *extra], env=env)


def summary(proc):
    assert proc.stdout.strip(), describe(proc)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def without_timings(text):
    """RESULT.json's text up to its timings (the last key), which differ
    from run to run."""
    i = text.index('"timings_ms"')
    return text[:i]


def errors(out):
    p = out / "errors.jsonl"
    return [json.loads(l) for l in p.read_text().splitlines()] if p.exists() else []


def small_photo(dst, scale, mode="RGB"):
    """hamer_example_5 scaled (its two hands stay findable at 1/2): a
    smaller input for the slower tests."""
    img = Image.open(shared_images() / "hamer_example_5.jpg").convert(mode)
    img = img.resize((int(img.width * scale), int(img.height * scale)), Image.BILINEAR)
    img.save(dst)


def make_folder(root):
    inp = root / "in"
    (inp / "nested" / "deeper").mkdir(parents=True)
    for name in ("hamer_example_1.jpg", "hamer_example_5.jpg"):
        shutil.copy(shared_images() / name, inp / name)
    data = (shared_images() / "hamer_example_5.jpg").read_bytes()
    (inp / "corrupt.jpg").write_bytes(data[: len(data) // 3])
    rgba = Image.open(shared_images() / "hamer_example_5.jpg").convert("RGBA")
    rgba = rgba.resize((rgba.width // 2, rgba.height // 2))
    a = np.asarray(rgba).copy()
    a[..., 3] = 200  # a real alpha channel: decoded as RGB, alpha dropped
    Image.fromarray(a, "RGBA").save(inp / "alpha.png")
    (inp / "notes.txt").write_text("not a picture\n")
    y, x = np.mgrid[0:120, 0:160]
    Image.fromarray(np.stack([x * 255 // 160, y * 255 // 120, 0 * x + 90], -1).astype(np.uint8)).save(
        inp / "nested" / "plain.png")
    small_photo(inp / "nested" / "deeper" / "hands.jpg", 0.5)
    (inp / ".hidden.jpg").write_bytes(data)  # hidden files are not inputs
    return inp


GOOD = ["hamer_example_1", "hamer_example_5", "alpha", "nested/deeper/hands"]
BAD = {"corrupt.jpg": "decode", "notes.txt": "decode", "nested/plain.png": "hands"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory, ckpt, hamer_bin):
    root = tmp_path_factory.mktemp("batch")
    inp = make_folder(root)
    out = root / "out"
    model = ckpt("d2h2")
    proc = batch(model, inp, out, "--recursive", "--render", "--side-view", "--save-mesh", "--vertices", "--json")
    return dict(root=root, inp=inp, out=out, model=model, proc=proc)


def test_outputs_and_errors(folder):
    proc, out = folder["proc"], folder["out"]
    assert proc.returncode == 3, describe(proc)
    s = summary(proc)
    assert s["images"] == len(GOOD) + len(BAD) and s["computed"] == len(GOOD) + 1  # plain.png: written, no hand
    assert s["skipped"] == 0 and s["failed"] == len(BAD) and not s["interrupted"], s
    for name in GOOD:
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["boxes"] == "detected" and len(doc["hands"]) >= 2, name
        for i, h in enumerate(doc["hands"]):
            assert "error" not in h and len(h["vertices"]) == 778
            assert (out / f"{name}_{i}.obj").is_file()
        assert not (out / f"{name}_{len(doc['hands'])}.obj").exists()
        for pic in ("all", "side"):
            assert Image.open(out / f"{name}_{pic}.png").size[0] > 0
    assert json.loads((out / "nested" / "plain.json").read_text())["hands"] == []
    errs = errors(out)
    assert len(errs) == len(BAD), errs
    for e in errs:
        rel = os.path.relpath(e["path"], folder["inp"])
        assert BAD[rel] == e["stage"] and e["reason"], e
    by = {os.path.relpath(e["path"], folder["inp"]): e["reason"] for e in errs}
    assert "JPEG" in by["corrupt.jpg"] and "not a JPEG or PNG" in by["notes.txt"]
    assert by["nested/plain.png"] == "no hand found"
    for name in ("corrupt", "notes", "hidden", ".hidden"):
        assert not list(out.glob(f"{name}*")), name
    assert not [p for p in out.rglob(".*") if TEMP.match(p.name)]
    # The summary line on stderr names the counts too.
    assert f"{len(GOOD) + len(BAD)} images" in proc.stderr and "see errors.jsonl" in proc.stderr


def test_same_as_hamer_run(folder, tmp_path):
    """Each NAME.json is `hamer run`'s RESULT.json for that image, byte for
    byte up to the timings; the pictures and meshes are the same files."""
    for name in GOOD:
        img = next(folder["inp"].glob(f"{name}.*"))
        res, objs = tmp_path / f"{name.replace('/', '_')}.json", tmp_path / f"objs_{name.replace('/', '_')}"
        pic, side = tmp_path / "pic.png", tmp_path / "side.png"
        p = run_hamer(["run", "--model", folder["model"], "--image", img, "--output", res, "--vertices",
                       "--render", pic, "--side-view", side, "--obj-dir", objs])
        assert p.returncode == 0, describe(p)
        mine = (folder["out"] / f"{name}.json").read_text()
        assert without_timings(mine) == without_timings(res.read_text()), name
        assert set(json.loads(mine)["timings_ms"]) == set(json.loads(res.read_text())["timings_ms"])
        assert (folder["out"] / f"{name}_all.png").read_bytes() == pic.read_bytes()
        assert (folder["out"] / f"{name}_side.png").read_bytes() == side.read_bytes()
        hands = json.loads(mine)["hands"]
        for i, h in enumerate(hands):
            theirs = objs / f"hand_{i:02d}_{'right' if h['is_right'] else 'left'}.obj"
            assert (folder["out"] / f"{name}_{i}.obj").read_bytes() == theirs.read_bytes()


def test_rerun_skips_touch_redoes_force_redoes_all(folder, tmp_path):
    root = tmp_path
    inp = root / "in"
    inp.mkdir()
    small_photo(inp / "a.jpg", 0.5)
    small_photo(inp / "b.png", 0.5)
    (inp / "bad.jpg").write_bytes(b"\xff\xd8\xff garbage")
    out = root / "out"
    args = ("--save-mesh", "--json")
    p = batch(folder["model"], inp, out, *args)
    assert p.returncode == 3 and summary(p)["computed"] == 2, describe(p)
    mt = {f.name: f.stat().st_mtime_ns for f in out.iterdir()}
    p = batch(folder["model"], inp, out, *args)
    s = summary(p)
    assert p.returncode == 3 and s["computed"] == 0 and s["skipped"] == 3 and s["failed_earlier"] == 1, describe(p)
    assert s["load_seconds"] == 0  # nothing to do: the model is not even loaded
    assert {f.name: f.stat().st_mtime_ns for f in out.iterdir() if f.name != "errors.jsonl"} == \
        {k: v for k, v in mt.items() if k != "errors.jsonl"}
    assert len(errors(out)) == 1  # the earlier record kept, not repeated
    # A newer input is redone, alone.
    time.sleep(0.05)
    os.utime(inp / "b.png")
    p = batch(folder["model"], inp, out, *args)
    s = summary(p)
    assert s["computed"] == 1 and s["skipped"] == 2, describe(p)
    assert (out / "a.json").stat().st_mtime_ns == mt["a.json"]
    assert (out / "b.json").stat().st_mtime_ns > mt["b.json"]
    # A lost output makes its image incomplete.
    (out / "a_1.obj").unlink()
    s = summary(batch(folder["model"], inp, out, *args))
    assert s["computed"] == 1 and (out / "a_1.obj").is_file()
    # Asking for more than was written (--render) redoes what lacks it.
    s = summary(batch(folder["model"], inp, out, *args, "--render"))
    assert s["computed"] == 2
    # --force redoes everything; --retry-failed tries the bad one again.
    s = summary(batch(folder["model"], inp, out, *args, "--force"))
    assert s["computed"] == 2 and s["failed"] == 1 and s["skipped"] == 0
    s = summary(batch(folder["model"], inp, out, *args, "--retry-failed"))
    assert s["computed"] == 0 and s["failed"] == 1 and s["skipped"] == 2
    assert len(errors(out)) == 1


def test_kill_and_resume(folder, tmp_path):
    """SIGKILL after K finished images, then a rerun: every image done
    exactly once (the finished ones are not touched), no partial file."""
    n, k = (4, 1) if SANITIZE else (8, 3)
    inp, out = tmp_path / "in", tmp_path / "out"
    inp.mkdir()
    for i in range(n):
        small_photo(inp / f"p{i:02d}.jpg", 0.5 + 0.03 * i)
    cmd = [str(HAMER_BIN), "batch", "--model", str(folder["model"]), "--input-dir", str(inp), "--out-dir",
           str(out), "--save-mesh", "--render", "--json", "--threads", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + TIMEOUT_SMALL
    try:
        while len(list(out.glob("p*.json"))) < k:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    done = {f.name: f.stat().st_mtime_ns for f in out.iterdir() if f.name.endswith(".json")}
    finished = len(done)
    assert k <= finished < n, f"the run was not interrupted halfway ({finished} of {n} done)"
    for f in out.glob("p*.json"):
        json.loads(f.read_text())  # complete files only, under the final names
    p = batch(folder["model"], inp, out, "--save-mesh", "--render", "--json")
    s = summary(p)
    assert p.returncode == 0, describe(p)
    assert s["skipped"] == finished and s["computed"] == n - finished and s["failed"] == 0, s
    for name, mt in done.items():
        assert (out / name).stat().st_mtime_ns == mt, f"{name} computed twice"
    for i in range(n):
        doc = json.loads((out / f"p{i:02d}.json").read_text())
        assert (out / f"p{i:02d}_all.png").is_file()
        for j in range(len(doc["hands"])):
            assert (out / f"p{i:02d}_{j}.obj").is_file()
    assert not [f for f in out.iterdir() if TEMP.match(f.name)], sorted(os.listdir(out))


def test_unusable_output_folder_fails_before_any_work(tmp_path, folder):
    inp = tmp_path / "in"
    inp.mkdir()
    small_photo(inp / "a.jpg", 0.3)
    blocker = tmp_path / "file"
    blocker.write_text("a regular file")
    missing_model = tmp_path / "no-such-model.ckpt"
    t0 = time.monotonic()
    p = batch(missing_model, inp, blocker / "out", "--json")
    lines = p.stderr.splitlines()
    assert p.returncode == 1 and len(lines) == 1, describe(p)
    assert str(blocker / "out") in lines[0] and "output folder" in lines[0], describe(p)
    assert "no-such-model" not in p.stderr and time.monotonic() - t0 < 30
    if os.geteuid() != 0:  # root writes through a read-only mode
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        try:
            p = batch(missing_model, inp, ro, "--json")
            assert p.returncode == 1 and str(ro) in p.stderr and "no-such-model" not in p.stderr, describe(p)
        finally:
            ro.chmod(0o755)
    # The input folder as output: refused (outputs would become inputs).
    p = batch(missing_model, inp, inp)
    assert p.returncode == 1 and "input folder" in p.stderr, describe(p)


def test_boxes_dir_glob_and_jobs(folder, tmp_path):
    """Boxes from --boxes-dir (a `hamer detect` document per image) give
    `hamer run --boxes`'s results; --glob filters; --jobs 2 and --prefetch 0
    change nothing in the results."""
    inp, boxes = tmp_path / "in", tmp_path / "boxes"
    inp.mkdir()
    boxes.mkdir()
    small_photo(inp / "a.jpg", 0.5)
    small_photo(inp / "b.jpg", 0.6)
    small_photo(inp / "c.png", 0.5)
    for name in ("a", "b"):
        p = run_hamer(["detect", "--image", inp / f"{name}.jpg", "--output", boxes / f"{name}.json"])
        assert p.returncode == 0, describe(p)
    out = tmp_path / "out"
    p = batch(folder["model"], inp, out, "--boxes-dir", boxes, "--glob", "*.jpg", "--json")
    assert p.returncode == 0 and summary(p)["computed"] == 2, describe(p)
    assert not (out / "c.json").exists()
    for name in ("a", "b"):
        res = tmp_path / f"{name}.json"
        p = run_hamer(["run", "--model", folder["model"], "--image", inp / f"{name}.jpg", "--boxes",
                       boxes / f"{name}.json", "--output", res])
        assert p.returncode == 0, describe(p)
        mine = (out / f"{name}.json").read_text()
        assert json.loads(mine)["boxes"] == "given"
        assert without_timings(mine) == without_timings(res.read_text())
    # A boxes file newer than the result redoes its image.
    time.sleep(0.05)
    os.utime(boxes / "a.json")
    s = summary(batch(folder["model"], inp, out, "--boxes-dir", boxes, "--glob", "*.jpg", "--json"))
    assert s["computed"] == 1 and s["skipped"] == 1
    # An image without its boxes file fails alone.
    s = summary(batch(folder["model"], inp, out, "--boxes-dir", boxes, "--json"))
    assert s["failed"] == 1 and errors(out)[-1]["stage"] == "boxes" and "c.json" in errors(out)[-1]["reason"]
    # Detected, with 2 jobs and without prefetch: the same files.
    outs = []
    for extra in (["--jobs", "2"], ["--prefetch", "0"]):
        o = tmp_path / f"out{len(outs)}"
        p = batch(folder["model"], inp, o, "--json", *extra)
        assert p.returncode == 0 and summary(p)["computed"] == 3, describe(p)
        outs.append({n: without_timings((o / f"{n}.json").read_text()) for n in "abc"})
    assert outs[0] == outs[1]


def test_name_clash(folder, tmp_path):
    inp = tmp_path / "in"
    inp.mkdir()
    small_photo(inp / "x.jpg", 0.4)
    small_photo(inp / "x.png", 0.4)
    out = tmp_path / "out"
    p = batch(folder["model"], inp, out, "--json")
    s = summary(p)
    assert p.returncode == 3 and s["computed"] == 1 and s["failed"] == 1, describe(p)
    e = errors(out)
    assert len(e) == 1 and e[0]["path"].endswith("x.png") and "x.jpg" in e[0]["reason"]


@pytest.mark.parametrize("args,needle", [
    ([], "required"), (["--jobs", "0"], "--jobs"), (["--prefetch", "-1"], "--prefetch"),
    (["--bogus", "x"], "unknown option"), (["--glob"], "needs a value"),
])
def test_usage_errors(tmp_path, args, needle):
    base = [] if not args or args == [] else ["--model", "m", "--input-dir", str(tmp_path), "--out-dir",
                                              str(tmp_path / "o")]
    p = run_hamer(["batch", *base, *args])
    assert p.returncode == 2 and needle in p.stderr and len(p.stderr.splitlines()) == 1, describe(p)
    assert not (tmp_path / "o").exists()


PY_CHILD = r"""
import json, sys
import hamer
model, inp, out, opts = json.loads(sys.argv[1])
with hamer.Model(model) as m:
    try:
        print(json.dumps(list(m.predict_folder(inp, out, **opts))))
    except hamer.HamerError as e:
        print(json.dumps({"raised": type(e).__name__, "message": str(e)}))
"""


def predict_folder(model, inp, out, **opts):
    """Model.predict_folder in a child python (under the sanitizers an
    instrumented libhamer.so needs the ASan runtime loaded first)."""
    env = python_child_env(dict(os.environ, PYTHONPATH=str(REPO / "python"), HAMER_LIB=str(BUILD / "libhamer.so")))
    arg = json.dumps([str(model), str(inp), None if out is None else str(out), opts])
    p = subprocess.run([sys.executable, "-c", PY_CHILD, arg], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, env=env, timeout=TIMEOUT_SMALL)
    assert p.returncode == 0, describe(p)
    return json.loads(p.stdout)


def test_predict_folder(folder, tmp_path):
    """Model.predict_folder: the command's files (the same bytes, timings
    aside) and records; skips and errors with the same semantics."""
    out = tmp_path / "py"
    opts = dict(recursive=True, render=True, side_view=True, save_mesh=True, vertices=True)
    got = predict_folder(folder["model"], folder["inp"], out, **opts)
    assert len(got) == len(GOOD) + len(BAD)
    by = {r["name"]: r for r in got}
    for name in GOOD:
        r = next(v for k, v in by.items() if k.rsplit(".", 1)[0] == name)
        assert r["status"] == "computed" and r["error"] is None, r
        mine = (out / f"{name}.json").read_text()
        assert without_timings(mine) == without_timings((folder["out"] / f"{name}.json").read_text())
        assert r["result"] == json.loads(mine)
        for f in [f"{name}_all.png", f"{name}_side.png"] + [f"{name}_{i}.obj" for i in
                                                            range(len(r["result"]["hands"]))]:
            assert (out / f).read_bytes() == (folder["out"] / f).read_bytes(), f
    for rel, stage in BAD.items():
        assert by[rel]["status"] == "failed" and by[rel]["error"]["stage"] == stage, by[rel]
    assert by["nested/plain.png"]["result"]["hands"] == []
    assert sorted((e["path"], e["stage"], e["reason"]) for e in errors(out)) == \
        sorted((e["path"], e["stage"], e["reason"]) for e in errors(folder["out"]))
    # Again: everything skipped, results read back, errors as recorded.
    again = predict_folder(folder["model"], folder["inp"], out, **opts)
    assert all(r["status"] == "skipped" for r in again)
    assert {r["name"]: r["error"] for r in again} == {r["name"]: r["error"] for r in got}
    assert [r["result"] for r in again] == [r["result"] for r in got]
    # The command takes over the folder Python wrote: nothing to do.
    p = batch(folder["model"], folder["inp"], out, "--recursive", "--render", "--side-view", "--save-mesh",
              "--vertices", "--json")
    s = summary(p)
    assert p.returncode == 3 and s["computed"] == 0 and s["skipped"] == len(GOOD) + len(BAD), describe(p)
    # Without an output folder: results only, nothing written.
    mem = predict_folder(folder["model"], folder["inp"], None, recursive=True, vertices=True)
    assert [r["status"] for r in mem] == [r["status"] for r in got]
    assert [without_timings(json.dumps(r["result"])) for r in mem if r["result"]] == \
        [without_timings(json.dumps(r["result"])) for r in got if r["result"]]
    # An output folder that cannot exist: HamerIOError before any image.
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = predict_folder(folder["model"], folder["inp"], blocker / "out")
    assert r["raised"] == "HamerIOError" and "output folder" in r["message"], r



def test_no_hand_found_says_detected(tmp_path, ckpt):
    """A photo without hands: NAME.json says "detected" with the detection's
    time (as `hamer run`, exit 4), from the command and predict_folder; with
    --boxes-dir and an empty list it stays "given", without a detect time."""
    inp, boxes = tmp_path / "in", tmp_path / "boxes"
    inp.mkdir()
    boxes.mkdir()
    Image.fromarray(np.full((120, 160, 3), 128, np.uint8)).save(inp / "grey.png")
    (boxes / "grey.json").write_text("[]")
    model = ckpt("d1h1")
    ref = tmp_path / "ref.json"
    p = run_hamer(["run", "--model", model, "--image", inp / "grey.png", "--output", ref])
    assert p.returncode == 4, describe(p)
    p = batch(model, inp, tmp_path / "out", "--json")
    assert p.returncode == 3 and summary(p)["computed"] == 1, describe(p)
    mine = (tmp_path / "out" / "grey.json").read_text()
    py = predict_folder(model, inp, tmp_path / "py")
    assert py[0]["status"] == "failed" and py[0]["error"]["reason"] == "no hand found", py
    for text in (mine, (tmp_path / "py" / "grey.json").read_text(), json.dumps(py[0]["result"])):
        doc = json.loads(text)
        assert doc["hands"] == [] and doc["boxes"] == "detected", doc
        assert set(doc["timings_ms"]) == {"decode", "detect", "crop", "regress", "finalise"}, doc
    assert without_timings(mine) == without_timings(ref.read_text())
    p = batch(model, inp, tmp_path / "given", "--boxes-dir", boxes, "--json")
    assert p.returncode == 0 and summary(p)["computed"] == 1, describe(p)
    doc = json.loads((tmp_path / "given" / "grey.json").read_text())
    assert doc["hands"] == [] and doc["boxes"] == "given" and "detect" not in doc["timings_ms"], doc

def test_empty_folder(tmp_path):
    """Nothing to do: exit 0 without opening the model."""
    (tmp_path / "in").mkdir()
    p = batch(tmp_path / "no-model.ckpt", tmp_path / "in", tmp_path / "out", "--json")
    assert p.returncode == 0 and summary(p)["images"] == 0, describe(p)
