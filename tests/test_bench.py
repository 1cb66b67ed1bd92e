"""`hamer bench`: JSON report, the fast-precision gate and usage errors.

Full-size runs (--synthetic without --depth) are far too slow for CI under
sanitizers; these tests use the small 2/2 fixture checkpoint and a 1/1
synthetic model.
"""

import json
import math

import pytest

from conftest import describe, run_hamer

STAGES = ["patch_embed", "layernorm", "qkv", "attention", "proj", "fc1_gelu", "fc2", "head", "mano", "finalise"]


def model_flops(depth, head_depth):
    """Model FLOPs per crop at the release widths (multiply-add = 2)."""
    T, D, M, inner, hd, hm = 192, 1280, 5120, 512, 1024, 1024
    f = 2 * T * 768 * D
    f += depth * (2 * T * D * (3 * D + D + 2 * M) + 4 * T * T * D)
    f += head_depth * (2 * T * D * 2 * inner + 2 * hd * 3 * inner + 2 * inner * hd
                       + 2 * hd * inner + 4 * T * inner + 2 * inner * hd + 4 * hd * hm)
    return f + 2 * hd * 109


def bench_json(args):
    proc = run_hamer(["bench", *args, "--json"])
    assert proc.returncode == 0, describe(proc)
    try:
        return json.loads(proc.stdout)
    except ValueError:
        pytest.fail("stdout is not one JSON object: " + describe(proc))


def check_report(r, precision, batch, threads, iters, depth, head_depth):
    num = (int, float)
    for key, typ in [("precision", str), ("scheme", str), ("isa", str), ("batch", int), ("threads", int),
                     ("iters", int), ("warmup", int), ("ms_per_crop_median", num), ("ms_per_crop_min", num),
                     ("crops_per_s", num), ("gflop_per_crop", num), ("gflops", num), ("peak_rss_mb", num),
                     ("rss_mb", num), ("params_pcc_vs_fp32", num), ("stages", dict), ("load_s", num)]:
        assert key in r, f"missing '{key}' in {sorted(r)}"
        assert isinstance(r[key], typ) and not isinstance(r[key], bool), f"{key}: {r[key]!r}"
    assert r["precision"] == precision
    assert (r["batch"], r["threads"], r["iters"]) == (batch, threads, iters)
    assert (r["vit_depth"], r["head_depth"]) == (depth, head_depth)
    assert r["isa"] in ("avx512", "avx2", "scalar")
    med, mn = r["ms_per_crop_median"], r["ms_per_crop_min"]
    assert 0 < mn <= med < 600_000
    # every timed iteration, for medians over interleaved runs (bench/peers)
    all_ms = r["ms_per_crop_all"]
    assert len(all_ms) == iters and min(all_ms) == pytest.approx(mn, rel=1e-9)
    assert sorted(all_ms)[(iters - 1) // 2] <= med <= sorted(all_ms)[iters // 2]
    assert r["crops_per_s"] == pytest.approx(1000.0 / med, rel=1e-6)
    assert r["gflop_per_crop"] == pytest.approx(model_flops(depth, head_depth) / 1e9, rel=1e-9)
    assert r["gflops"] == pytest.approx(r["gflop_per_crop"] * r["crops_per_s"], rel=1e-6)
    assert 10 < r["rss_mb"] <= r["peak_rss_mb"] < 64 * 1024
    if r["peak_gflops_fp32"] is not None:
        assert r["peak_gflops_fp32"] > 0
        assert r["pct_of_peak"] == pytest.approx(100 * r["gflops"] / r["peak_gflops_fp32"], rel=1e-6)
    assert list(r["stages"]) == STAGES
    for name, ms in r["stages"].items():
        assert isinstance(ms, (int, float)) and ms >= 0, (name, ms)
    # The profiled stages cover the forward: their medians add up to about
    # the median total (medians of parts need not sum exactly).
    total = sum(r["stages"].values())
    assert 0.5 * med < total < 1.5 * med, (total, med)
    for name in ("qkv", "fc2", "head"):
        assert r["stages"][name] > 0 or precision != "fp32", name


def test_bench_fp32_json(hamer_bin, ckpt):
    r = bench_json(["--model", ckpt("d2h2"), "--iters", "2", "--warmup", "1", "--threads", "2"])
    check_report(r, "fp32", 1, 2, 2, 2, 2)
    assert r["scheme"] == "fp32"
    assert r["model"].endswith("d2h2.ckpt")
    assert r["params_pcc_vs_fp32"] == 1.0
    assert r["vertices_mae_mm_vs_fp32"] == 0.0


def test_bench_batch_threads_peak(hamer_bin, ckpt):
    r = bench_json(["--model", ckpt("d2h2"), "--batch", "2", "--threads", "1", "--iters", "1",
                    "--warmup", "0", "--peak", "123.5"])
    check_report(r, "fp32", 2, 1, 1, 2, 2)
    assert r["peak_gflops_fp32"] == 123.5


def test_bench_without_mano(hamer_bin, ckpt):
    r = bench_json(["--model", ckpt("d2h2_nomano"), "--iters", "1", "--warmup", "0", "--peak", "100"])
    check_report(r, "fp32", 1, r["threads"], 1, 2, 2)
    assert r["vertices_mae_mm_vs_fp32"] is None


def test_bench_synthetic_small(hamer_bin):
    r = bench_json(["--synthetic", "--depth", "1", "--head-depth", "1", "--iters", "1", "--warmup", "0",
                    "--peak", "100"])
    check_report(r, "fp32", 1, r["threads"], 1, 1, 1)
    assert r["model"] == "synthetic"
    assert r["vertices_mae_mm_vs_fp32"] == 0.0


def test_bench_text_report(hamer_bin, ckpt):
    proc = run_hamer(["bench", "--model", ckpt("d2h2"), "--iters", "1", "--warmup", "0", "--peak", "100"])
    assert proc.returncode == 0, describe(proc)
    out = proc.stdout
    for word in ["per crop: median", "crops/s", "GFLOP/s", "peak RSS", "params PCC"] + STAGES:
        assert word in out, f"'{word}' missing from the report:\n{out}"


def test_bench_fast(hamer_bin, ckpt):
    """fast either works and is compared with fp32, or fails with one line."""
    proc = run_hamer(["bench", "--model", ckpt("d2h2"), "--precision", "fast", "--iters", "1",
                      "--warmup", "0", "--peak", "100", "--json"])
    if proc.returncode == 0:
        r = json.loads(proc.stdout)
        check_report(r, "fast", 1, r["threads"], 1, 2, 2)
        assert r["scheme"] != "fp32"
        pcc, mae = r["params_pcc_vs_fp32"], r["vertices_mae_mm_vs_fp32"]
        assert isinstance(pcc, float) and -1.0 <= pcc <= 1.0 and math.isfinite(pcc)
        assert isinstance(mae, float) and mae >= 0 and math.isfinite(mae)
    else:
        assert proc.returncode == 1, describe(proc)
        assert proc.stdout == "", describe(proc)
        lines = proc.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("hamer: "), describe(proc)
        assert "fast" in lines[0], describe(proc)


def test_bench_critical_path(hamer_bin, ckpt):
    """--critical-path: per stage, the model's ms on 1, 2, 4, 8, 16 threads.
    On one thread the simulated 1-thread time is the run's own (CPU time
    of the same work, so within the stage's wall time plus clock noise);
    more simulated threads never take longer than fewer of the same split
    by more than one task's worth, and the parallel stages do get faster;
    the serial ones (mano) stay."""
    r = bench_json(["--model", ckpt("d2h2"), "--iters", "2", "--warmup", "1", "--threads", "1",
                    "--precision", "fast", "--critical-path", "--peak", "100"])
    cp = r["critical_path_ms"]
    assert cp["threads"] == [1, 2, 4, 8, 16]
    assert list(cp["stages"]) == STAGES
    for name, ms in cp["stages"].items():
        assert len(ms) == 5 and all(isinstance(v, float) and v >= 0 for v in ms), (name, ms)
    assert cp["total"] == pytest.approx([sum(cp["stages"][s][k] for s in STAGES) for k in range(5)], rel=1e-9)
    one, sixteen = cp["total"][0], cp["total"][4]
    assert 0.3 * r["ms_per_crop_median"] < one < 1.5 * r["ms_per_crop_median"], (one, r["ms_per_crop_median"])
    for name in ("qkv", "fc1_gelu", "fc2", "attention"):
        ms = cp["stages"][name]
        assert ms[4] < 0.5 * ms[0], (name, ms)
    assert sixteen < 0.5 * one


def test_bench_missing_model(hamer_bin, tmp_path):
    proc = run_hamer(["bench", "--model", tmp_path / "nope.ckpt", "--iters", "1"])
    assert proc.returncode == 1, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hamer: ") and "nope.ckpt" in lines[0], describe(proc)


@pytest.mark.parametrize("args", [
    [],
    ["--synthetic", "--model", "x.ckpt"],
    ["--bogus"],
    ["--model"],
    ["--synthetic", "--precision", "fp16"],
    ["--synthetic", "--batch", "0"],
    ["--synthetic", "--iters", "0"],
    ["--synthetic", "--iters", "x"],
    ["--synthetic", "--warmup", "-1"],
    ["--synthetic", "--threads", "0"],
    ["--synthetic", "--peak", "abc"],
    ["--synthetic", "--peak", "-3"],
    ["--synthetic", "--depth", "0"],
    ["--synthetic", "--seed", "-1"],
])
def test_bench_usage_errors(hamer_bin, args):
    proc = run_hamer(["bench", *args])
    assert proc.returncode == 2, describe(proc)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hamer: bench: "), describe(proc)


def test_bench_help(hamer_bin):
    proc = run_hamer(["bench", "--help"])
    assert proc.returncode == 0 and "--synthetic" in proc.stdout, describe(proc)
    proc = run_hamer(["--help"])
    assert "bench" in proc.stdout, describe(proc)
