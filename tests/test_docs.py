"""The documentation's examples run, and the docs cannot go stale silently.

* Every fenced block of README.md and docs/*.md carries a mark in its info
  string: ``doctest`` (run here) or ``no-doctest`` (shown only: a usage
  synopsis with [optional] parts, a build or install step, a server or a
  Redis setup, a measurement on the full-size model, an output). The one
  exception is README.md's first block (the two commands at the top),
  exempt by rule. GitHub highlights by the first word, so ```sh doctest
  renders as ```sh does.
* A runnable block runs in a fresh temporary folder that holds the names
  the docs use: hamer.ckpt (a small fixture checkpoint with MANO),
  photo.jpg (a shared photo with two hands), photos/ (a folder with that
  photo) and build/hamer, build/libhamer.so (links to the build's, in a
  folder of the temporary one, so nothing is written into the build). The
  detector is the installed one (~/.local/share/hamer/detector).
  ``sh`` blocks run with bash -euo pipefail and must run clean (nothing
  on stderr but the commands' summary lines); ``c`` blocks are complete
  programs, compiled with cc against include/ (and the build's generated
  hamer_version.h) and the build's libhamer.so
  and run; ``python`` blocks run with PYTHONPATH=python and HAMER_LIB set
  to the build's library. Each must exit 0; every JSON file a block writes
  must parse, and a RESULT.json with detected boxes must list hands.
* docs/internals.md's layout table names every folder and file directly
  under src/ and tools/, and every path it names exists.

Left out of the ASan + UBSan pass (tests/CMakeLists.txt): the examples
drive paths that test_run, test_batch, test_python and the C tests cover
there.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from conftest import BUILD, HAMER_BIN, HAMER_LIB, REPO, SANITIZE, checkpoint_path, describe, python_child_env
from detect.common import shared_images

DOCS = [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md"))
RUN, EXEMPT = "doctest", "no-doctest"
FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
PHOTO = "hamer_example_5.jpg"       # 1200 x 1799, two hands (README's result.json)
TIMEOUT = 120


class Block:
    def __init__(self, path, line, info, text):
        self.path, self.line, self.info, self.text = path, line, info, text
        words = info.split()
        self.lang = words[0] if words else ""
        self.marks = words[1:]

    @property
    def name(self):
        return f"{self.path.relative_to(REPO)}:{self.line}"


def blocks(path):
    """The fenced blocks of a Markdown file (CommonMark fences: ``` or ~~~,
    closed by a fence of the same character at least as long)."""
    out, lines = [], path.read_text().splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        start, body = i + 1, []
        i += 1
        while i < len(lines):
            c = FENCE.match(lines[i])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) and not c.group(3).strip():
                break
            line = lines[i]
            body.append(line[min(indent, len(line) - len(line.lstrip(" "))):])
            i += 1
        assert i < len(lines), f"{path.relative_to(REPO)}:{start}: fence never closed"
        out.append(Block(path, start, info, "\n".join(body) + "\n"))
        i += 1
    return out


ALL = [b for p in DOCS for b in blocks(p)]


def exempt_by_rule(b):
    """README.md's first block: the two commands at the top, left as plain ```sh."""
    return b.path == REPO / "README.md" and b.line == blocks(b.path)[0].line


RUNNERS = ("sh", "c", "python")
RUNNABLE = [b for b in ALL if RUN in b.marks]


# ---------------------------------------------------------------------------
# Every block is marked
# ---------------------------------------------------------------------------

def test_every_block_is_marked():
    """A block is run (doctest) or explicitly shown only (no-doctest), so a
    new example cannot go untested without saying so."""
    bad = []
    for b in ALL:
        if exempt_by_rule(b):
            continue
        marks = [m for m in b.marks if m in (RUN, EXEMPT)]
        if len(marks) != 1 or len(b.marks) != 1:
            bad.append(f"{b.name}: ```{b.info}: the info string must be 'LANG {RUN}' or 'LANG {EXEMPT}'")
        elif RUN in marks and b.lang not in RUNNERS:
            bad.append(f"{b.name}: ```{b.info}: no runner for '{b.lang}' (one of {', '.join(RUNNERS)})")
    assert not bad, "\n".join(bad)


def test_readme_first_block_is_the_two_commands():
    first = blocks(REPO / "README.md")[0]
    assert first.info == "sh", first.info
    assert [ln.split()[:2] for ln in first.text.splitlines()] == [["bash", "scripts/demo.sh"], ["bash", ".ci/run"]]


def test_readme_short_with_an_example_per_interface():
    """README.md: at most 200 lines, with a runnable CLI (<= 10 lines),
    C (<= 15) and Python (<= 10) example."""
    readme = REPO / "README.md"
    assert len(readme.read_text().splitlines()) <= 200
    limit = {"sh": 10, "c": 15, "python": 10}
    have = {b.lang: len(b.text.splitlines()) for b in blocks(readme) if RUN in b.marks}
    for lang, n in limit.items():
        assert lang in have, f"README.md has no runnable {lang} block"
        assert have[lang] <= n, f"README.md's {lang} example is {have[lang]} lines (at most {n})"


# ---------------------------------------------------------------------------
# Running the runnable blocks
# ---------------------------------------------------------------------------

def workdir(tmp_path):
    """tmp_path with the names the docs use."""
    (tmp_path / "hamer.ckpt").symlink_to(checkpoint_path("d2h2"))
    (tmp_path / "photo.jpg").symlink_to(shared_images() / PHOTO)
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / PHOTO).symlink_to(shared_images() / PHOTO)
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "hamer").symlink_to(HAMER_BIN)
    (tmp_path / "build" / "libhamer.so").symlink_to(HAMER_LIB)
    return tmp_path


def check_outputs(d):
    """Every JSON (Lines) file a block wrote parses; a RESULT.json lists its
    hands, and one with detected boxes found the photo's hands."""
    for f in sorted(d.rglob("*")):
        if f.is_symlink() or not f.is_file():
            continue
        if f.suffix == ".jsonl":
            for line in f.read_text().splitlines():
                json.loads(line)
        elif f.suffix == ".json":
            doc = json.loads(f.read_text())
            if not (isinstance(doc, dict) and "hands" in doc and "image" in doc):
                continue
            assert isinstance(doc["hands"], list), f
            if "detector" in doc:           # hamer detect's document
                assert doc["hands"], f"{f}: no hand detected on {PHOTO}"
                assert all(len(h["landmarks"]) == 21 for h in doc["hands"]), f
            elif "boxes" in doc:            # RESULT.json
                assert all("error" in h or len(h["keypoints_3d"]) == 21 for h in doc["hands"]), f
                if doc["boxes"] == "detected":
                    assert doc["hands"], f"{f}: no hand detected on {PHOTO}"
        elif f.suffix == ".png":
            assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f


def run(cmd, cwd, env=None):
    """Run cmd in its own session, its output in files (a process left in
    the background cannot hold a pipe open). A block that leaves a process
    running (a server it started) fails; the session's group is killed."""
    with open(cwd / ".stdout", "w+") as out, open(cwd / ".stderr", "w+") as err:
        proc = subprocess.Popen([str(c) for c in cmd], cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, start_new_session=True)
        try:
            rc = proc.wait(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            rc = None
        try:
            os.killpg(proc.pid, signal.SIGKILL)
            left = True
        except ProcessLookupError:
            left = False
        proc.wait()
        out.seek(0), err.seek(0)
        done = subprocess.CompletedProcess(proc.args, rc, out.read(), err.read())
    if rc is None:
        pytest.fail(f"timed out after {TIMEOUT}s: {cmd}\n" + describe(done))
    if left and rc == 0:
        pytest.fail(f"{cmd} exited but left processes running (killed)\n" + describe(done))
    return done


def run_block(b, d):
    src = d / {"sh": "block.sh", "c": "block.c", "python": "block.py"}[b.lang]
    src.write_text(b.text)
    env = dict(os.environ, HAMER_NO_CACHE="1", PYTHONDONTWRITEBYTECODE="1")
    if b.lang == "sh":
        return run(["bash", "-euo", "pipefail", src], d, env)
    if b.lang == "python":
        env.update(PYTHONPATH=str(REPO / "python"), HAMER_LIB=str(HAMER_LIB))
        return run([sys.executable, src], d, python_child_env(env))
    cc = shutil.which("cc") or shutil.which("gcc")
    assert cc, "no C compiler"
    exe = d / "block"
    flags = ["-fsanitize=address,undefined"] if SANITIZE else []
    proc = run([cc, "-std=c11", "-Wall", "-Wextra", "-Werror", *flags, "-I", REPO / "include", "-I", BUILD / "include", src, "-o", exe,
                "-L", BUILD, "-lhamer", f"-Wl,-rpath,{BUILD}"], d)
    if proc.returncode != 0:
        return proc
    return run([exe], d, env)


# What a block that works may print on stderr: the commands' summary lines.
# Anything else (a tool's complaint, an empty error line) is a stray line:
# the example works by accident or hides a failure.
CLEAN_STDERR = [re.compile(p) for p in (
    r"^hamer: batch: \d+ images: .*",        # hamer batch's summary
    r"^hamer: wrote \S+ \(precision .*",      # hamer convert's summary
)]


@pytest.mark.parametrize("b", RUNNABLE, ids=[b.name for b in RUNNABLE])
def test_block_runs(b, tmp_path, hamer_bin):
    """Each runnable block exits 0 and runs clean: nothing on stderr but
    the commands' summary lines."""
    d = workdir(tmp_path)
    proc = run_block(b, d)
    assert proc.returncode == 0, f"{b.name} (```{b.info}) failed:\n{b.text}\n" + describe(proc)
    stray = [ln for ln in proc.stderr.splitlines() if not any(p.match(ln) for p in CLEAN_STDERR)]
    assert not stray, f"{b.name}: stray lines on stderr: {stray}\n" + describe(proc)
    check_outputs(d)


def test_runnable_blocks_cover_the_commands():
    """The main subcommands each appear in a runnable block."""
    text = "".join(b.text for b in RUNNABLE)
    for cmd in ("run", "detect", "crop", "regress", "batch", "convert", "serve"):
        assert re.search(rf"\bbuild/hamer {cmd}\b", text), f"no runnable block runs `hamer {cmd}`"
    for lang in RUNNERS:
        assert any(b.lang == lang for b in RUNNABLE), f"no runnable {lang} block"


# ---------------------------------------------------------------------------
# docs/internals.md's layout table
# ---------------------------------------------------------------------------

def layout_rows():
    text = (REPO / "docs" / "internals.md").read_text()
    section = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\| `([^`]+)` \| (.*) \|$", line)
        if m:
            rows.append((m.group(1), m.group(2)))
    assert len(rows) > 10, "the layout table was not found (| `path` | what |)"
    return rows


def test_layout_table_names_every_folder_and_file():
    named = {p for p, _ in layout_rows()}
    missing = []
    for top in ("src", "tools"):
        for entry in sorted((REPO / top).iterdir()):
            if entry.name.startswith("."):
                continue
            key = f"{top}/{entry.name}/" if entry.is_dir() else f"{top}/{entry.name}"
            if key not in named:
                missing.append(key)
    assert not missing, f"docs/internals.md's layout table lacks {missing}"


def test_layout_table_paths_exist():
    gone = []
    for path, what in layout_rows():
        if not (REPO / path).exists() or path.endswith("/") != (REPO / path).is_dir():
            gone.append(path)
        # Paths in the description: `src/...`, `tools/...`, `include/...`, and
        # file names (`x.c`, `x.h`) in a folder's row.
        for tok in re.findall(r"`([^`]+)`", what):
            if re.match(r"^(src|tools|include|tests|scripts)/[\w./-]*$", tok):
                if not (REPO / tok).exists():
                    gone.append(f"{path}: {tok}")
            elif path.endswith("/") and re.match(r"^[\w-]+\.[ch]$", tok):
                if not (REPO / path / tok).exists():
                    gone.append(f"{path}: {tok}")
    assert not gone, f"docs/internals.md's layout table names paths that do not exist: {gone}"


# ---------------------------------------------------------------------------
# The folder example on the photos a user has: one without hands, one broken
# ---------------------------------------------------------------------------

def test_folder_example_on_photos_without_hands_and_broken(tmp_path, hamer_bin):
    """docs/library.md's folder-mode program: a photo without hands is a
    result (exit 0, nothing on stderr); a file that does not decode prints
    the library's reason for it and exits non-zero."""
    (b,) = [b for b in RUNNABLE if b.lang == "c" and "hamer_folder_open" in b.text]
    d = workdir(tmp_path)
    from PIL import Image
    Image.new("RGB", (160, 120), (128, 128, 128)).save(d / "photos" / "blank.png")
    proc = run_block(b, d)
    assert proc.returncode == 0 and proc.stderr == "", describe(proc)
    assert sorted(ln.split(":")[0] for ln in proc.stdout.splitlines()) == ["blank.png", PHOTO], proc.stdout
    assert json.loads((d / "out" / "blank.json").read_text())["hands"] == []
    (d / "photos" / "broken.jpg").write_bytes(b"\xff\xd8\xff not a JPEG")
    proc = run_block(b, d)
    assert proc.returncode == 3, describe(proc)
    (line,) = proc.stderr.splitlines()
    assert line.startswith("broken.jpg: ") and "JPEG" in line, line
