"""Checkpoint and .npz reader against torch.save / numpy (tool_ckpt_dump).

Builds real torch.save files (several dtypes, views sharing storages, a
Lightning-like nested dict with an unknown class, 'cuda:0' location tags,
a non-'archive' zip prefix), compares the C reader's view of every tensor
with torch's, and checks that malformed files fail with exit code 1 and a
one-line message. Also round-trips .npz files in both directions.
"""
import collections
import io
import math
import os
import random
import struct
import subprocess
import zipfile
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from conftest import build_tool, require_tool  # noqa: E402

TOOL = build_tool("tool_ckpt_dump")

DTYPES = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "bool",
}
NP_DTYPES = {"float32": "f32", "float64": "f64", "uint8": "u8", "int32": "i32", "int64": "i64",
             "bool": "bool", "float16": "f16", "int16": "i16", "int8": "i8"}


@pytest.fixture(scope="module", autouse=True)
def tool_exists():
    require_tool("tool_ckpt_dump")


def run_tool(*args):
    env = dict(os.environ)
    # Sanitizer reports must not masquerade as the tool's clean exit code 1.
    env["ASAN_OPTIONS"] = "exitcode=99:detect_leaks=1"
    env["UBSAN_OPTIONS"] = "exitcode=98:halt_on_error=1:print_stacktrace=1"
    return subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, env=env, timeout=120)


def parse_dump(out):
    rows = {}
    for line in out.splitlines():
        p = line.split(" ")
        key, dt, nd = p[0], p[1], int(p[2])
        assert p[3 + nd] == "|" and p[4 + 2 * nd] == "|" and p[6 + 2 * nd] == "|", line
        rows[key] = (dt, tuple(int(x) for x in p[3:3 + nd]), tuple(int(x) for x in p[4 + nd:4 + 2 * nd]),
                     int(p[5 + 2 * nd]), float(p[7 + 2 * nd]))
    return rows


def exact_sum(values):
    vals = [float(v) for v in values]
    return math.fsum(vals), math.fsum(abs(v) for v in vals)


def assert_sum(key, got, values):
    want, scale = exact_sum(values)
    assert abs(got - want) <= 1e-9 * max(1.0, scale), (key, got, want)


def check_against_torch(path, tensors):
    r = run_tool(path)
    assert r.returncode == 0, r.stderr
    rows = parse_dump(r.stdout)
    assert list(rows) == sorted(rows), "output not sorted by key"
    assert set(rows) == set(tensors), (set(rows) ^ set(tensors))
    for k, t in tensors.items():
        dt, shape, stride, contig, s = rows[k]
        assert dt == DTYPES[t.dtype], k
        assert shape == tuple(t.shape), k
        assert stride == tuple(t.stride()), k
        assert contig == int(t.is_contiguous()), k
        assert_sum(k, s, t.detach().double().flatten().tolist())


def zip_prefix(path):
    return zipfile.ZipFile(path).namelist()[0].split("/")[0]


def sample_tensors():
    g = torch.Generator().manual_seed(0)
    base = torch.randn(6, 7, generator=g)
    long_base = torch.randint(-1000, 1000, (20,), generator=g)
    t = collections.OrderedDict()
    t["f32"] = torch.randn(3, 4, generator=g)
    t["f64"] = torch.randn(5, generator=g, dtype=torch.float64)
    t["f16"] = torch.randn(2, 3, generator=g).half()
    t["bf16"] = torch.randn(4, 2, generator=g).bfloat16()
    t["i64"] = torch.randint(-2**40, 2**40, (7,), generator=g)
    t["i32"] = torch.randint(-2**30, 2**30, (3, 3), generator=g, dtype=torch.int32)
    t["i16"] = torch.randint(-30000, 30000, (4,), generator=g, dtype=torch.int16)
    t["i8"] = torch.randint(-128, 128, (5,), generator=g, dtype=torch.int8)
    t["u8"] = torch.randint(0, 256, (2, 5), generator=g, dtype=torch.uint8)
    t["bool"] = torch.rand(9, generator=g) > 0.5
    t["base"] = base
    t["view.transposed"] = base.t()
    t["view.sliced"] = base[1:, 2:]           # offset into a shared storage
    t["view.strided"] = base[::2, 1::3]
    t["view.expanded"] = torch.randn(3, generator=g).expand(4, 3)
    t["view.permuted"] = torch.randn(2, 3, 4, 5, generator=g).permute(2, 0, 3, 1)
    t["view.long_tail"] = long_base[5:12]
    t["scalar"] = torch.tensor(2.25)
    t["empty"] = torch.zeros(0, 3)
    t["unit_dims"] = torch.randn(1, 5, 1, generator=g)
    t["param"] = torch.nn.Parameter(torch.randn(2, 2, generator=g))
    return t


def test_dtypes_and_views(tmp_path):
    t = sample_tensors()
    sd = dict(t)
    sd["not_a_tensor"] = 17
    sd["also_not"] = ["x", 2.5, None]
    path = tmp_path / "plain.pt"
    torch.save(sd, path)
    assert zip_prefix(path) == "plain"
    check_against_torch(path, t)


class HyperParams:
    """Stands in for omegaconf's DictConfig: a class the reader cannot know."""

    def __init__(self):
        self.cfg = {"MODEL": {"IMAGE_SIZE": 256, "BBOX_SHAPE": [192, 256]}, "lr": 1e-5, "tags": {"a", "b"}}
        self.name = "hamer"
        self.mean = torch.tensor([0.485, 0.456, 0.406])   # a tensor outside the state dict


def lightning_like():
    net = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
    net.register_buffer("initialized", torch.tensor(True))
    sd = net.state_dict()   # an OrderedDict carrying a _metadata attribute
    for k, v in sample_tensors().items():
        sd["extra." + k] = v
    ckpt = {
        "epoch": 3,
        "global_step": 12345,
        "pytorch-lightning_version": "2.0.3",
        "state_dict": sd,
        "loops": {"fit_loop": {"state_dict": {}, "epoch_progress": {"total": {"ready": 4, "completed": 3}},
                               "optim": [torch.zeros(2), (1, 2.0, "three"), 2**80, b"\x00\xff"]}},
        "callbacks": collections.OrderedDict(a=1),
        "hparams_name": "cfg",
        "hyper_parameters": HyperParams(),
    }
    return ckpt, dict(sd)


def test_lightning_like_archive_prefix(tmp_path):
    ckpt, sd = lightning_like()
    buf = io.BytesIO()
    torch.save(ckpt, buf)   # a file object: the prefix is "archive"
    path = tmp_path / "lightning.bin"
    path.write_bytes(buf.getvalue())
    assert zip_prefix(path) == "archive"
    check_against_torch(path, sd)


def test_lightning_like_model_ckpt_prefix(tmp_path):
    ckpt, sd = lightning_like()
    path = tmp_path / "model.ckpt"
    torch.save(ckpt, path)
    assert zip_prefix(path) == "model"
    check_against_torch(path, sd)


def test_state_dict_not_a_dict_falls_back(tmp_path):
    t = {"w": torch.randn(2, 2), "state_dict": "not a dict"}
    path = tmp_path / "fallback.pt"
    torch.save(t, path)
    check_against_torch(path, {"w": t["w"]})


# Both hooks are inert unless _TAG_CUDA is set, so other tests in the same
# process see torch's usual behaviour.
_TAG_CUDA = False


def _cuda_tagger(storage):
    if _TAG_CUDA and getattr(storage, "device", torch.device("cpu")).type == "cpu":
        return "cuda:0"
    return None


def _cuda_deserializer(obj, location):
    if _TAG_CUDA and location.startswith("cuda"):
        return obj   # keep it on the CPU
    return None


torch.serialization.register_package(1, _cuda_tagger, _cuda_deserializer)


def test_cuda_location_tag(tmp_path):
    global _TAG_CUDA
    t = sample_tensors()
    path = tmp_path / "gpu.ckpt"
    _TAG_CUDA = True
    try:
        torch.save({"state_dict": t, "epoch": 1}, path)
        back = torch.load(path)
    finally:
        _TAG_CUDA = False
    with zipfile.ZipFile(path) as z:
        assert b"cuda:0" in z.read("gpu/data.pkl")
    assert torch.equal(back["state_dict"]["f32"], t["f32"])
    check_against_torch(path, t)


# ---- malformed checkpoints ----

def small_ckpt(tmp_path):
    ckpt = {"epoch": 1, "state_dict": collections.OrderedDict(
        w=torch.randn(3, 4), b=torch.arange(5), h=torch.randn(2).half()), "hyper_parameters": HyperParams()}
    path = tmp_path / "small.ckpt"
    torch.save(ckpt, path)
    return path.read_bytes()


def expect_clean_failure(path):
    r = run_tool(path)
    assert r.returncode == 1, (path, r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0], r.stderr
    return lines[0]


def expect_no_crash(path):
    r = run_tool(path)
    assert r.returncode in (0, 1), (path, r.returncode, r.stderr[-2000:])
    if r.returncode:
        assert len(r.stderr.strip("\n").split("\n")) == 1, r.stderr


def test_truncated_checkpoints(tmp_path):
    data = small_ckpt(tmp_path)
    n = len(data)
    cuts = set(range(0, n, max(1, n // 60))) | set(range(max(0, n - 700), n, 7)) | {1, 21, 22, n - 22, n - 1}
    for cut in sorted(cuts):
        p = tmp_path / f"cut_{cut}.ckpt"
        p.write_bytes(data[:cut])
        expect_clean_failure(p)
        p.unlink()


def cd_fields(data):
    """Central directory offset and size, and where the authoritative count,
    size and offset fields live (the zip64 end record when torch wrote one)."""
    pos = data.rfind(b"PK\x05\x06")
    _, _, _, count, _, cd_size, cd_off, _ = struct.unpack("<IHHHHIIH", data[pos:pos + 22])
    fields = {"count": (pos + 10, "<H"), "size": (pos + 12, "<I"), "offset": (pos + 16, "<I")}
    if data[pos - 20:pos - 16] == b"PK\x06\x07":
        (rec,) = struct.unpack("<Q", data[pos - 12:pos - 4])
        count, cd_size, cd_off = struct.unpack("<QQQ", data[rec + 32:rec + 56])
        fields = {"count": (rec + 32, "<Q"), "size": (rec + 40, "<Q"), "offset": (rec + 48, "<Q")}
    return cd_off, cd_size, fields


def test_corrupted_central_directory(tmp_path):
    data = small_ckpt(tmp_path)
    cd_off, cd_size, f = cd_fields(data)
    cases = {
        "signature": (cd_off, b"XXXX"),
        "name_len": (cd_off + 28, b"\xff\xff"),
        "local_offset": (cd_off + 42, b"\xfe\xff\xff\x7f"),
        "cd_offset": (f["offset"][0], struct.pack(f["offset"][1], len(data) - 30)),
        "cd_size": (f["size"][0], struct.pack(f["size"][1], 0x7FFFFFFF)),
        "entry_count": (f["count"][0], struct.pack(f["count"][1], 0x7FFF)),
        "cd_offset_shifted": (f["offset"][0], struct.pack(f["offset"][1], cd_off + 4)),
    }
    for name, (at, patch) in cases.items():
        bad = bytearray(data)
        bad[at:at + len(patch)] = patch
        p = tmp_path / f"cd_{name}.ckpt"
        p.write_bytes(bytes(bad))
        msg = expect_clean_failure(p)
        assert msg.startswith("checkpoint:"), msg
    rng = random.Random(7)
    for i in range(60):
        bad = bytearray(data)
        for _ in range(1 + i % 3):
            bad[cd_off + rng.randrange(cd_size)] ^= 1 << rng.randrange(8)
        p = tmp_path / f"cd_rand_{i}.ckpt"
        p.write_bytes(bytes(bad))
        expect_no_crash(p)


def member_location(data, name):
    """(data offset, size, local header offset, central entry offset) of a stored member."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        info = z.getinfo(name)
    h = info.header_offset
    nlen, xlen = struct.unpack("<HH", data[h + 26:h + 30])
    central = data.find(b"PK\x01\x02" + data[h + 4:h + 6])
    while central >= 0:
        cn = struct.unpack("<H", data[central + 28:central + 30])[0]
        if data[central + 46:central + 46 + cn] == name.encode():
            break
        central = data.find(b"PK\x01\x02", central + 4)
    return h + 30 + nlen + xlen, info.file_size, h, central


def test_pickle_replaced_with_garbage(tmp_path):
    data = small_ckpt(tmp_path)
    off, size, local, central = member_location(data, "small/data.pkl")
    rng = random.Random(3)
    for i in range(25):
        bad = bytearray(data)
        if i == 0:
            garbage = bytes(size)
        elif i < 10:
            garbage = bytes(rng.randrange(256) for _ in range(size))
        else:   # plausible prefix, then garbage: the VM runs deeper before failing
            keep = rng.randrange(2, size)
            garbage = data[off:off + keep] + bytes(rng.randrange(256) for _ in range(size - keep))
        bad[off:off + size] = garbage
        crc = struct.pack("<I", zlib.crc32(garbage) & 0xFFFFFFFF)
        bad[local + 14:local + 18] = crc
        bad[central + 16:central + 20] = crc
        p = tmp_path / f"garbage_{i}.ckpt"
        p.write_bytes(bytes(bad))
        if i < 10:
            expect_clean_failure(p)
        else:
            expect_no_crash(p)
    # Without fixing the CRC the damage is caught before unpickling.
    bad = bytearray(data)
    bad[off + size // 2] ^= 0x40
    p = tmp_path / "garbage_crc.ckpt"
    p.write_bytes(bytes(bad))
    assert "CRC" in expect_clean_failure(p)


def test_missing_file_and_not_a_zip(tmp_path):
    assert "cannot open" in expect_clean_failure(tmp_path / "nope.ckpt")
    p = tmp_path / "text.ckpt"
    p.write_text("hello world\n" * 10)
    expect_clean_failure(p)


# ---- npz ----

def npz_arrays():
    rng = np.random.default_rng(0)
    return {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f64": rng.standard_normal(7),
        "u8": rng.integers(0, 256, (2, 3, 4), dtype=np.uint8),
        "i32": rng.integers(-2**31, 2**31, 5, dtype=np.int32),
        "i64": rng.integers(-2**50, 2**50, (2, 2), dtype=np.int64),
        "mask": rng.random(6) > 0.5,
        "scalar": np.float64(3.5) * np.ones(()),
        "empty": np.zeros((0, 3), np.float32),
        "faces": np.arange(30, dtype=np.int64).reshape(10, 3),
    }


def check_npz_dump(path, arrays):
    r = run_tool("--npz", path)
    assert r.returncode == 0, r.stderr
    rows = parse_dump(r.stdout)
    assert set(rows) == set(arrays)
    for k, a in arrays.items():
        dt, shape, stride, contig, s = rows[k]
        assert dt == NP_DTYPES[a.dtype.name], k
        assert shape == a.shape and contig == 1, k
        assert stride == tuple(int(np.prod(a.shape[d + 1:])) for d in range(a.ndim)), k
        assert_sum(k, s, a.astype(np.float64).ravel().tolist())


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_numpy_npz_read(tmp_path, save):
    arrays = npz_arrays()
    path = tmp_path / "arrays.npz"
    save(path, **arrays)
    check_npz_dump(path, arrays)


def test_npz_rejects_fortran_and_big_endian(tmp_path):
    p = tmp_path / "fortran.npz"
    np.savez(p, a=np.asfortranarray(np.ones((3, 4), np.float32)))
    assert "Fortran" in expect_clean_failure_npz(p)
    p = tmp_path / "big.npz"
    np.savez(p, a=np.ones(3, ">f4"))
    assert "dtype" in expect_clean_failure_npz(p)
    p = tmp_path / "trunc.npz"
    np.savez(p, **npz_arrays())
    data = p.read_bytes()
    for cut in range(0, len(data), max(1, len(data) // 40)):
        p.write_bytes(data[:cut])
        expect_clean_failure_npz(p)


def expect_clean_failure_npz(path):
    r = run_tool("--npz", path)
    assert r.returncode == 1, (path, r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip("\n").split("\n")
    assert len(lines) == 1 and lines[0], r.stderr
    return lines[0]


def test_npz_written_by_c_loads_in_numpy(tmp_path):
    path = tmp_path / "fromc.npz"
    r = run_tool("--write-npz-test", path)
    assert r.returncode == 0, r.stderr
    with np.load(path) as z:
        got = {k: z[k] for k in z.files}
    want = {
        "f32": (np.arange(6, dtype=np.float32) * np.float32(0.5) - np.float32(1)).reshape(2, 3),
        "f64": 1.0 / (np.arange(4) + 3.0),
        "u8": (np.arange(5) * 60).astype(np.uint8),
        "i32": ((np.arange(8) - 4) * 100000).astype(np.int32).reshape(2, 2, 2),
        "i64": np.array(-1234567890123, dtype=np.int64),
        "empty": np.zeros((0, 3), np.float32),
    }
    assert set(got) == set(want)
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        assert np.array_equal(got[k], want[k]), k
    with zipfile.ZipFile(path) as z:
        assert z.testzip() is None
        assert all(i.compress_type == zipfile.ZIP_STORED for i in z.infolist())
    check_npz_dump(path, want)
