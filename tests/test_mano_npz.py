"""A checkpoint without MANO's buffers: what the commands say, and
scripts/mano_npz.py, which turns MANO's own MANO_RIGHT.pkl into the
--mano file (docs/models.md).

MANO_RIGHT.pkl is not redistributable, so the pickle here is made the way
the real one is laid out: a Python 2-era protocol-2 pickle of a dict whose
shapedirs is a chumpy ``Ch`` (its array in the state's "x"), J_regressor a
scipy.sparse ``csc_matrix`` (data / indices / indptr / _shape in its
state), posedirs ``(778, 3, 135)``, kintree_table ``(2, 16)`` uint32 with
the root's parent 2**32 - 1, weights, f uint32 and the hand-pose PCA
arrays (the checkpoint's 6 rows; the converter keeps what there is). Its arrays are the fixture's MANO buffers
(the ones embedded in the d2h2 checkpoint), so the converted file must
equal the fixture's npz, and `hamer run` with it must give the results of
the checkpoint that embeds them.
"""

import json
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

import hamer_fixture

from conftest import REPO, describe, run_hamer
from detect.common import shared_images

SCRIPT = REPO / "scripts" / "mano_npz.py"
PHOTO = "hamer_example_5.jpg"


def fake_module(name, cls_name):
    """A module `name` holding a class `cls_name` whose instances pickle by
    the default protocol-2 reduction (NEWOBJ + BUILD with their dict), as
    chumpy's Ch and scipy's sparse matrices do."""
    mod = types.ModuleType(name)
    cls = type(cls_name, (), {"__module__": name})
    setattr(mod, cls_name, cls)
    return mod, cls


def write_mano_pkl(path, bufs):
    mods = {}
    ch_mod, Ch = fake_module("chumpy.ch", "Ch")
    sp_mod, Csc = fake_module("scipy.sparse.csc", "csc_matrix")
    for name, mod in (("chumpy", types.ModuleType("chumpy")), ("chumpy.ch", ch_mod),
                      ("scipy", types.ModuleType("scipy")), ("scipy.sparse", types.ModuleType("scipy.sparse")),
                      ("scipy.sparse.csc", sp_mod)):
        mods[name] = sys.modules.get(name)
        sys.modules[name] = mod
    try:
        shapedirs = Ch()
        shapedirs.__dict__.update(x=bufs["shapedirs"].astype(np.float64), _dirty_vars=set(), _itr=None,
                                  _depends_on_deps={}, _make_dense=False, _make_sparse=False)
        J = bufs["J_regressor"].astype(np.float64)
        cols = [np.nonzero(J[:, j])[0] for j in range(J.shape[1])]
        jreg = Csc()
        jreg.__dict__.update(data=np.concatenate([J[c, j] for j, c in enumerate(cols)]),
                             indices=np.concatenate(cols).astype(np.int32),
                             indptr=np.cumsum([0] + [len(c) for c in cols]).astype(np.int32),
                             _shape=J.shape, maxprint=50, format="csc")
        parents = bufs["parents"].astype(np.int64)
        kintree = np.stack([np.where(parents < 0, 2**32 - 1, parents), np.arange(16)]).astype(np.uint32)
        posedirs = bufs["posedirs"].astype(np.float64).T.reshape(778, 3, 135)
        # the hand-pose PCA: the checkpoint's rows (the real file has 45, the checkpoint keeps 6)
        pca = hamer_fixture.mano_buffers(0)
        data = {"hands_components": bufs.get("hand_components", pca["hand_components"]).astype(np.float64),
                "hands_coeffs": np.zeros((10, 45)),
                "hands_mean": bufs.get("hand_mean", pca["hand_mean"]).astype(np.float64),
                "f": bufs["faces_tensor"].astype(np.uint32), "J_regressor": jreg, "kintree_table": kintree,
                "J": np.zeros((16, 3)), "bs_style": "lbs", "bs_type": "lrotmin",
                "weights": bufs["lbs_weights"].astype(np.float64), "posedirs": posedirs,
                "v_template": bufs["v_template"].astype(np.float64), "shapedirs": shapedirs}
        path.write_bytes(pickle.dumps(data, protocol=2))
    finally:
        for name, mod in mods.items():
            if mod is None:
                del sys.modules[name]
            else:
                sys.modules[name] = mod


def convert(src, dst):
    return subprocess.run([sys.executable, str(SCRIPT), str(src), str(dst)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def test_converted_file_equals_the_buffers(tmp_path, mano_npz):
    with np.load(mano_npz) as z:
        bufs = {k: z[k] for k in z.files}
    pkl, out = tmp_path / "MANO_RIGHT.pkl", tmp_path / "MANO.npz"
    write_mano_pkl(pkl, bufs)
    proc = convert(pkl, out)
    assert proc.returncode == 0, describe(proc)
    pca = hamer_fixture.mano_buffers(0)
    bufs.update(hand_components=pca["hand_components"], hand_mean=pca["hand_mean"])  # the PCA space, kept
    with np.load(out) as z:
        assert sorted(z.files) == sorted(bufs)
        for k, v in bufs.items():
            assert z[k].shape == v.shape, k
            assert np.array_equal(z[k].astype(v.dtype), v), k
        assert z["parents"].dtype == np.int64 and z["faces_tensor"].dtype == np.int64


def test_run_without_mano_says_what_and_where(tmp_path, ckpt, hamer_bin):
    """No MANO buffers: exit 1 before any output, one line naming the model,
    --mano, the converter, MANO's site and docs/models.md."""
    out = tmp_path / "r.json"
    proc = run_hamer(["run", "--model", ckpt("d2h2_nomano"), "--image", shared_images() / PHOTO,
                      "--box", "600,490,780,870:left", "--output", out])
    assert proc.returncode == 1, describe(proc)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, describe(proc)
    line = lines[0]
    for want in ("d2h2_nomano.ckpt has no MANO buffers", "--mano MANO.npz", "scripts/mano_npz.py",
                 "https://mano.is.tue.mpg.de", "docs/models.md"):
        assert want in line, f"{want!r} not in {line!r}"
    assert not out.exists()


def test_run_with_converted_mano_equals_embedded(tmp_path, ckpt, mano_npz, hamer_bin):
    with np.load(mano_npz) as z:
        bufs = {k: z[k] for k in z.files}
    pkl, npz = tmp_path / "MANO_RIGHT.pkl", tmp_path / "MANO.npz"
    write_mano_pkl(pkl, bufs)
    assert convert(pkl, npz).returncode == 0
    docs = []
    for name, extra in (("d2h2", []), ("d2h2_nomano", ["--mano", npz])):
        out = tmp_path / f"{name}.json"
        proc = run_hamer(["run", "--model", ckpt(name), *extra, "--image", shared_images() / PHOTO,
                          "--box", "600,490,780,870:left", "--output", out, "--vertices"])
        assert proc.returncode == 0, describe(proc)
        doc = json.loads(out.read_text())
        doc.pop("timings_ms")
        docs.append(doc)
    assert docs[0] == docs[1]


def test_missing_tensor_names_it_and_the_docs(tmp_path, ckpt, hamer_bin):
    proc = run_hamer(["run", "--model", ckpt("d1h1_missing_key"), "--image", shared_images() / PHOTO,
                      "--box", "600,490,780,870", "--output", tmp_path / "r.json"])
    assert proc.returncode == 1, describe(proc)
    assert "missing tensor 'backbone.last_norm.weight'" in proc.stderr and "docs/models.md" in proc.stderr


@pytest.mark.parametrize("payload", [
    b"cos\nsystem\n(S'true'\ntR.",                                 # a global outside the allow list
    pickle.dumps({"v_template": np.zeros((778, 3))}, protocol=2),  # not a MANO file
    b"not a pickle",
])
def test_refuses_what_is_not_mano(tmp_path, payload):
    src, dst = tmp_path / "x.pkl", tmp_path / "x.npz"
    src.write_bytes(payload)
    proc = convert(src, dst)
    assert proc.returncode == 1, describe(proc)
    assert proc.stderr.startswith("mano_npz.py: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not dst.exists() and not list(tmp_path.glob(".mano_npz.*"))
