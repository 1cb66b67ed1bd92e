"""scripts/depgraph.py: the real build has no layering problem, and a cycle
between folders, planted in a small source tree of the test's own (object
files built with cc, the layout of a cmake build), makes it fail naming the
folders."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import BUILD, REPO

DEPGRAPH = REPO / "scripts" / "depgraph.py"
CC = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def load_depgraph():
    spec = importlib.util.spec_from_file_location("depgraph", DEPGRAPH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_depgraph(*args):
    return subprocess.run([sys.executable, str(DEPGRAPH), *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def plant(tmp_path, files):
    """A source tree (path -> text) and its objects where depgraph looks for
    them (BUILD/CMakeFiles/hamer.dir/<path>.o); returns (repo, build)."""
    repo, build = tmp_path / "repo", tmp_path / "build"
    objdir = build / "CMakeFiles" / "hamer.dir"
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    for rel in files:
        if not rel.endswith(".c"):
            continue
        obj = objdir / (rel + ".o")
        obj.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([CC, "-c", "-I", str(repo / "tools"), "-o", str(obj), str(repo / rel)], check=True,
                       timeout=120)
    return repo, build


# Two folders of one layer, no file cycle: cli/a.c -> serve/b.c, serve/c.c -> cli/d.c.
A = "int b_fn(void);\nint a_fn(void) { return b_fn(); }\n"
B = "int b_fn(void) { return 1; }\n"
C = "int d_fn(void);\nint c_fn(void) { return d_fn(); }\n"
D = "int d_fn(void) { return 2; }\n"


def test_real_build_has_no_problem():
    if not (BUILD / "CMakeFiles").is_dir():
        pytest.skip(f"no build at {BUILD}")
    res = run_depgraph(BUILD)
    assert res.returncode == 0, res.stdout + res.stderr
    assert " 0 problem(s)" in res.stdout
    assert "folder cycle" not in res.stdout


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_without_the_back_edge_no_problem(tmp_path):
    repo, build = plant(tmp_path, {"tools/cli/a.c": A, "tools/serve/b.c": B, "tools/cli/d.c": D})
    res = run_depgraph(build, "--repo", repo)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3 files, 1 edges, 0 problem(s)" in res.stdout


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_planted_folder_cycle_by_symbols_fails(tmp_path):
    repo, build = plant(tmp_path, {"tools/cli/a.c": A, "tools/serve/b.c": B, "tools/serve/c.c": C,
                                   "tools/cli/d.c": D})
    res = run_depgraph(build, "--repo", repo)
    print(res.stdout)
    assert res.returncode == 1, res.stdout + res.stderr
    # Not a file cycle and not upward: only the folders make the problem.
    assert "cycle: tools" not in res.stdout.replace("folder cycle:", "")
    assert "upward" not in res.stdout
    assert "folder cycle: tools/cli <-> tools/serve" in res.stdout
    assert "tools/cli -> tools/serve: tools/cli/a.c uses b_fn from tools/serve/b.c" in res.stdout
    assert "tools/serve -> tools/cli: tools/serve/c.c uses d_fn from tools/cli/d.c" in res.stdout
    assert "1 problem(s)" in res.stdout


@pytest.mark.skipif(CC is None, reason="no C compiler")
def test_planted_folder_cycle_by_include_fails(tmp_path):
    c = '#include "cli/d.h"\nint c_fn(void) { return D_VALUE; }\n'
    repo, build = plant(tmp_path, {"tools/cli/a.c": A, "tools/serve/b.c": B, "tools/serve/c.c": c,
                                   "tools/cli/d.h": "#define D_VALUE 2\n"})
    res = run_depgraph(build, "--repo", repo)
    print(res.stdout)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "folder cycle: tools/cli <-> tools/serve" in res.stdout
    assert "tools/serve -> tools/cli: tools/serve/c.c includes tools/cli/d.h" in res.stdout


def test_folder_cycles_of_an_edge_list():
    dg = load_depgraph()
    edges = [("src/a/x.c", "src/b/y.c", "uses f from"), ("src/b/z.c", "src/c/w.c", "uses g from"),
             ("src/c/w.c", "src/a/v.h", "includes"), ("src/d/q.c", "src/a/x.c", "uses h from")]
    out = dg.folder_cycles(edges)
    assert out[0] == "folder cycle: src/a <-> src/b <-> src/c"
    assert "    src/c -> src/a: src/c/w.c includes src/a/v.h" in out
    assert not any("src/d" in line for line in out)
    assert dg.folder_cycles(edges[:2] + edges[3:]) == []
    # Files of one folder never make a folder edge.
    assert dg.folder_cycles([("src/a/x.c", "src/a/y.c", "uses f from"), ("src/a/y.c", "src/a/x.c", "uses g from")]) == []
