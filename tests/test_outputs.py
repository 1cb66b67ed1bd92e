"""Outputs of the CLI are never half-written and never destroy what was
there (issue 12, findings 1-3).

Every output goes to a temp file beside its (symlink-followed) target and is
renamed over it only when complete; a failure leaves the previous file and
the link; a directory or device node at an output path is refused, never
removed; all outputs of a command are finished before any is renamed; an
output that is an input or another output is refused before any work.
"""

import json
import os
import resource
import signal
import stat
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import HAMER_BIN, checkpoint_path, describe, float_crops, run_hamer

BOX = "60.5,40.25,170,200:right"


@pytest.fixture(scope="module")
def model():
    return checkpoint_path("d1h1")


@pytest.fixture
def photo(tmp_path):
    rng = np.random.RandomState(0)
    path = tmp_path / "photo.png"
    Image.fromarray(rng.randint(0, 256, (240, 320, 3)).astype(np.uint8)).save(path)
    return path


def run_args(model, photo, out, *extra):
    return ["run", "--model", model, "--image", photo, "--box", BOX, "--output", out, *extra]


def temp_files(d):
    """Hidden entries of d: the temp files the writer makes."""
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def device_like_dev_full(tmp_path):
    """A character device to write to: a private node of /dev/full's device
    where this process may create one (so the real /dev/full is never at
    risk), else /dev/full itself; None when neither is possible."""
    if not os.path.exists("/dev/full"):
        return None
    node = tmp_path / "full"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
        return node
    except OSError:
        return "/dev/full"


# --- finding 1: a failed write must not delete or damage the path -------------

def test_output_through_symlink_keeps_the_link(tmp_path, model, photo, hamer_bin):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to("real.json")
    proc = run_hamer(run_args(model, photo, link, "--render", tmp_path / "ov-link.png"))
    assert proc.returncode == 0, describe(proc)
    assert link.is_symlink() and os.readlink(link) == "real.json"
    assert json.loads(real.read_text())["hands"][0]["is_right"] is True
    assert temp_files(tmp_path) == []


@pytest.mark.parametrize("cmd", ["run", "regress", "crop"])
def test_device_node_refused_and_untouched(tmp_path, model, photo, hamer_bin, cmd):
    dev = device_like_dev_full(tmp_path)
    if dev is None:
        pytest.skip("no /dev/full on this machine")
    before = os.stat(dev)
    if cmd == "run":
        args = run_args(model, photo, dev)
    elif cmd == "regress":
        np.save(tmp_path / "crops.npy", float_crops(1))
        args = ["regress", "--model", model, "--input", tmp_path / "crops.npy", "--output", dev]
    else:
        args = ["crop", "--image", photo, "--box", BOX, "--output", dev]
    proc = run_hamer(args)
    assert proc.returncode == 1, describe(proc)
    assert str(dev) in proc.stderr and "not a regular file" in proc.stderr, describe(proc)
    after = os.stat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino


def test_directory_output_named_with_reason(tmp_path, model, hamer_bin):
    np.save(tmp_path / "crops.npy", float_crops(1))
    (tmp_path / "adir").mkdir()
    proc = run_hamer(["regress", "--model", model, "--input", tmp_path / "crops.npy",
                      "--output", tmp_path / "adir"])
    assert proc.returncode == 1 and f"cannot create '{tmp_path / 'adir'}': Is a directory" in proc.stderr, \
        describe(proc)
    assert (tmp_path / "adir").is_dir()


# --- finding 2: outputs are atomic --------------------------------------------

def run_with_file_limit(args, limit, kill):
    """hamer with writes limited to `limit` bytes per file: a write past it
    fails (SIGXFSZ ignored) or kills the process mid-write (SIGXFSZ's
    default action), as a full disk or a crash would."""
    def limit_writes():
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL if kill else signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    cmd = [str(HAMER_BIN)] + [str(a) for a in args]
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=300,
                          preexec_fn=limit_writes)


@pytest.mark.parametrize("kill", [False, True], ids=["write-fails", "killed-mid-write"])
def test_failed_or_killed_write_keeps_previous_result(tmp_path, model, photo, hamer_bin, kill):
    real = tmp_path / "result.json"
    real.write_text('{"previous": true}')
    out = tmp_path / "result-link.json"   # the link must survive too
    out.symlink_to("result.json")
    npz = tmp_path / "out.npz"
    npz.write_bytes(b"previous npz")
    np.save(tmp_path / "crops.npy", float_crops(1))
    for args, path, old in [(run_args(model, photo, out, "--vertices"), out, '{"previous": true}'),
                            (["regress", "--model", model, "--input", tmp_path / "crops.npy", "--output", npz],
                             npz, "previous npz")]:
        proc = run_with_file_limit(args, 4096, kill)
        if kill:
            assert proc.returncode == -signal.SIGXFSZ, describe(proc)
        else:
            assert proc.returncode == 1 and "File too large" in proc.stderr and str(path) in proc.stderr, \
                describe(proc)
            assert temp_files(tmp_path) == [], "a failed write must remove its temp file"
        assert path.read_text() == old, "the previous file was damaged"
    assert out.is_symlink() and real.read_text() == '{"previous": true}'


# --- finding 3: "nothing written" is true; aliases refused ----------------------

def test_unwritable_output_writes_nothing(tmp_path, model, photo, hamer_bin):
    extras = ["--obj-dir", tmp_path / "objs", "--render", tmp_path / "ov.png", "--side-view", tmp_path / "side.png"]
    for out in [tmp_path / "missing-dir" / "result.json", tmp_path]:
        proc = run_hamer(run_args(model, photo, out, *extras))
        assert proc.returncode == 1 and str(out) in proc.stderr and "nothing written" in proc.stderr, describe(proc)
        assert not (tmp_path / "objs").exists()
        assert not (tmp_path / "ov.png").exists() and not (tmp_path / "side.png").exists()
        assert temp_files(tmp_path) == []


def test_all_outputs_written_together(tmp_path, model, photo, hamer_bin):
    """A picture that cannot be written keeps RESULT.json and the meshes
    from being written too, and the old RESULT.json stays."""
    out = tmp_path / "result.json"
    out.write_text("old")
    (tmp_path / "side.png").mkdir()
    proc = run_hamer(run_args(model, photo, out, "--obj-dir", tmp_path / "objs", "--render", tmp_path / "ov.png",
                              "--side-view", tmp_path / "side.png"))
    assert proc.returncode == 1 and "side.png" in proc.stderr, describe(proc)
    assert out.read_text() == "old" and not (tmp_path / "ov.png").exists() and not (tmp_path / "objs").exists()


def alias_cases(tmp_path, model, photo):
    np.save(tmp_path / "crops.npy", float_crops(1))
    crops = tmp_path / "crops.npy"
    (tmp_path / "photo-link.png").symlink_to("photo.png")
    x = tmp_path / "x.png"
    return {
        "run --output = --image": (run_args(model, photo, photo), photo),
        "run --output = --image via a link": (run_args(model, photo, tmp_path / "photo-link.png"), photo),
        "run --render = --image": (run_args(model, photo, tmp_path / "r.json", "--render", photo), photo),
        "run --output X --render X": (run_args(model, photo, x, "--render", x), x),
        "run --render X --side-view X": (run_args(model, photo, tmp_path / "r.json", "--render", x,
                                                  "--side-view", x), x),
        "run --output = --model": (run_args(model, photo, model), model),
        "regress --output = --input": (["regress", "--model", model, "--input", crops, "--output", crops], crops),
        "crop --output = --image": (["crop", "--image", photo, "--box", BOX, "--output", photo], photo),
        "detect --output = --image": (["detect", "--image", photo, "--output", photo], photo),
        "detect --output X --render X": (["detect", "--image", photo, "--output", x, "--render", x], x),
    }


def test_alias_refused_before_any_work(tmp_path, model, photo, hamer_bin):
    for name, (args, victim) in alias_cases(tmp_path, model, photo).items():
        before = open(victim, "rb").read() if os.path.exists(victim) else None
        proc = run_hamer(args)
        assert proc.returncode == 2, f"{name}: {describe(proc)}"
        low = proc.stderr.lower()
        assert len(proc.stderr.splitlines()) == 1 and ("is the input" in low or "same file" in low), \
            f"{name}: {describe(proc)}"
        after = open(victim, "rb").read() if os.path.exists(victim) else None
        assert after == before, f"{name}: {victim} changed"
        assert temp_files(tmp_path) == [], name


def test_convert_and_save_packed_keep_links_and_devices(tmp_path, model, hamer_bin):
    """hamer_model_save_packed renames over the symlink-followed target and
    refuses a device node (before, it renamed over the link or the node)."""
    real = tmp_path / "real.hpk"
    real.write_bytes(b"old")
    link = tmp_path / "link.hpk"
    link.symlink_to("real.hpk")
    proc = run_hamer(["convert", "--model", model, "--output", link])
    assert proc.returncode == 0, describe(proc)
    assert link.is_symlink() and real.read_bytes()[:3] != b"old"
    import sys
    from conftest import HAMER_LIB, REPO, SANITIZE
    if SANITIZE:
        return  # a sanitizer libhamer needs the ASan runtime preloaded: test_python.py's child covers the binding
    env = dict(os.environ, HAMER_LIB=str(HAMER_LIB), PYTHONPATH=str(REPO / "python"))
    dev = device_like_dev_full(tmp_path)
    targets = [str(link)] + ([str(dev)] if dev is not None else [])
    code = ("import sys, hamer\n"
            "m = hamer.Model(sys.argv[1])\n"
            "for t in sys.argv[2:]:\n"
            "    try:\n"
            "        m.save_packed(t); print('ok', t)\n"
            "    except hamer.HamerIOError as e:\n"
            "        print('refused', e)\n")
    p = subprocess.run([sys.executable, "-c", code, str(model), *targets], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == f"ok {link}" and link.is_symlink()
    if dev is not None:
        assert lines[1].startswith("refused") and "not a regular file" in lines[1], p.stdout
        assert stat.S_ISCHR(os.stat(dev).st_mode)
