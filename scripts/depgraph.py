#!/usr/bin/env python3
"""Link-level dependency graph of the library and the CLI, from the object
files of a build (nm: which file defines and which uses each symbol).

    python3 scripts/depgraph.py [BUILD_DIR] [--dot] [--repo DIR]

Fails (exit 1) when
  * two source files depend on each other, directly or through others
    (a cycle), or
  * a file depends on a layer above its own: the layers, bottom up, are
      core < kernels < format < model < backend < load < tflite < tfjs < pipeline, render, detect, video, track
      < src/hamer.c, src/hamer_job.c, src/hamer_folder*.c (the public API) < tools/common
      < tools/cli, tools/serve, tools/worker < tools/hamer_main.c (the command table),
    and files of one layer may use each other only without cycles, or
  * two folders depend on each other, directly or through others (a cycle
    in the folder graph: folder A -> folder B when a file in A uses a
    symbol defined in B or includes a header of B), or
  * a file under src/ or tools/ includes a header of a layer above its own
    (include/hamer.h, the public types, may be included anywhere), or
  * libhamer.so (when built) exports a symbol not named hamer_*.
With --dot it prints the file graph in Graphviz format instead. --repo
names the source tree the objects were built from (default: this one; the
tests plant a cycle in a small tree of their own).
"""
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LAYERS = [
    ["src/core"],
    ["src/kernels"],
    ["src/format"],
    ["src/model"],
    ["src/backend"],
    ["src/load"],
    ["src/tflite"],
    ["src/tfjs"],
    ["src/pipeline", "src/render", "src/detect", "src/video", "src/track"],
    ["src/hamer.c", "src/hamer_job.c", "src/hamer_folder.c", "src/hamer_folder_plan.c", "src/hamer_folder.h",
     "src/hamer_render.c", "src/hamer_scene.c", "src/hamer_detect.c", "src/hamer_video.c", "src/hamer_live.c",
     "src/hamer_impl.h", "src/api.h"],
    ["tools/common"],
    ["tools/cli", "tools/serve", "tools/worker"],
    ["tools/hamer_main.c"],
]


def layer_of(src):
    for i, names in enumerate(LAYERS):
        for n in names:
            if src == n or src.startswith(n + "/"):
                return i
    return None


def folder_of(path):
    """The folder a file is in: "src/core" for src/core/util.c, "src" for
    src/hamer.c. A folder's subfolders are parts of it, not folders of their
    own: src/kernels/x86/ (one architecture's bodies of src/kernels' kernels)
    and src/backend/cpu/ (one backend behind src/backend's interface) need
    their parent and it needs them, as ggml's backends and their registry
    do; the file graph still has no cycle."""
    parts = path.split("/")
    if len(parts) > 3 and parts[0] in ("src", "tools"):
        return "/".join(parts[:2])
    return path.rsplit("/", 1)[0] if "/" in path else "."


def folder_cycles(edges):
    """Cycles of the folder graph of file edges (a, b, why): a's folder ->
    b's folder whenever they differ. One problem line per cycle naming its
    folders, then one indented line per edge inside it (the first file edge
    that makes it)."""
    graph, why = defaultdict(set), {}
    for a, b, w in edges:
        fa, fb = folder_of(a), folder_of(b)
        graph[fa]
        graph[fb]
        if fa != fb:
            graph[fa].add(fb)
            why.setdefault((fa, fb), f"{a} {w} {b}")
    out = []
    for comp in sccs(graph):
        out.append("folder cycle: " + " <-> ".join(comp))
        for fa in comp:
            for fb in sorted(graph[fa]):
                if fb in comp:
                    out.append(f"    {fa} -> {fb}: {why[(fa, fb)]}")
    return out


def objects(build, repo=REPO):
    dirs = [build / "CMakeFiles" / "hamer_obj.dir", build / "CMakeFiles" / "hamer.dir"]
    out = {}
    for d in dirs:
        for o in sorted(d.rglob("*.o")):
            rel = o.relative_to(d).as_posix()[:-2]  # "src/kernels/gemm.c"
            if (repo / rel).exists():  # not a stale object of a moved file
                out[rel] = o
    return out


def symbols(obj):
    res = subprocess.run(["nm", "--defined-only", "-g", str(obj)], capture_output=True, text=True, check=True)
    defined = {ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()}
    res = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True)
    used = {ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()}
    return defined, used


def sccs(graph):
    """Tarjan's strongly connected components (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on:
                    low[v] = min(low[v], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    argv = sys.argv[1:]
    repo = REPO
    if "--repo" in argv:
        i = argv.index("--repo")
        if i + 1 >= len(argv):
            sys.exit("depgraph: --repo needs a directory")
        repo = Path(argv[i + 1]).resolve()
        del argv[i:i + 2]
    args = [a for a in argv if not a.startswith("--")]
    build = Path(args[0] if args else "build")
    objs = objects(build, repo)
    if not objs:
        sys.exit(f"depgraph: no object files under {build} (build first)")
    defs, uses = {}, {}
    for src, o in objs.items():
        d, u = symbols(o)
        uses[src] = u
        for s in d:
            defs.setdefault(s, src)
    graph = defaultdict(set)
    why = {}
    for src, u in uses.items():
        graph[src]
        for s in sorted(u):
            dst = defs.get(s)
            if dst and dst != src:
                graph[src].add(dst)
                why.setdefault((src, dst), s)
    if "--dot" in sys.argv:
        print("digraph hamer {")
        for a in sorted(graph):
            for b in sorted(graph[a]):
                print(f'  "{a}" -> "{b}";')
        print("}")
        return
    bad = 0
    for comp in sccs(graph):
        bad += 1
        print("cycle: " + " <-> ".join(comp))
        for a in comp:
            for b in sorted(graph[a]):
                if b in comp:
                    print(f"    {a} uses {why[(a, b)]} from {b}")
    for a in sorted(graph):
        la = layer_of(a)
        for b in sorted(graph[a]):
            lb = layer_of(b)
            if la is None or lb is None:
                print(f"unlayered: {a} -> {b}")
                bad += 1
            elif lb > la:
                print(f"upward: {a} (layer {la}) uses {why[(a, b)]} from {b} (layer {lb})")
                bad += 1
    folder_edges = [(a, b, f"uses {why[(a, b)]} from") for a in graph for b in graph[a]]
    for path in sorted(list(repo.glob("src/**/*.[ch]")) + list(repo.glob("tools/**/*.[ch]"))):
        rel = path.relative_to(repo).as_posix()
        lf = layer_of(rel)
        for m in re.finditer(r'^#include "([^"]+)"', path.read_text(), re.M):
            inc = m.group(1)
            cand = [f"src/{inc}", f"tools/{inc}", (path.parent.relative_to(repo) / inc).as_posix()]
            hit = next((c for c in cand if (repo / c).exists()), None)
            if hit is None or hit.startswith("include/"):
                continue
            folder_edges.append((rel, hit, "includes"))
            lh = layer_of(hit)
            if lf is not None and lh is not None and lh > lf:
                print(f"upward include: {rel} (layer {lf}) includes {inc} (layer {lh})")
                bad += 1
    for line in folder_cycles(folder_edges):
        print(line)
        bad += not line.startswith(" ")
    so = build / "libhamer.so"
    if so.exists():
        res = subprocess.run(["nm", "-D", "--defined-only", str(so)], capture_output=True, text=True, check=True)
        exported = [ln.split()[-1] for ln in res.stdout.splitlines() if ln.strip()]
        for sym in exported:
            if not sym.startswith("hamer_"):
                print(f"exported: {sym} (libhamer.so must export only hamer_*)")
                bad += 1
        print(f"depgraph: libhamer.so exports {len(exported)} symbols")
    nedges = sum(len(v) for v in graph.values())
    print(f"depgraph: {len(graph)} files, {nedges} edges, {bad} problem(s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
