#!/usr/bin/env python3
"""MANO_RIGHT.pkl -> MANO.npz: the right-hand MANO model as the arrays
`hamer ... --mano MANO.npz` (hamer_model_params.mano_path) reads.

    python3 scripts/mano_npz.py MANO_RIGHT.pkl MANO.npz

Only needed for a checkpoint without MANO's buffers (`mano.*`): the released
hamer.ckpt carries them and needs no MANO file (docs/models.md).
MANO_RIGHT.pkl comes from https://mano.is.tue.mpg.de (free registration,
MANO's own licence: it is not redistributable, so hamer.c ships none).

The file is a Python 2 pickle whose arrays are numpy arrays, chumpy `Ch`
objects (a numpy array in their state's "x") and, for J_regressor, a
scipy.sparse CSC matrix. It is read with an unpickler that builds numpy
arrays and stand-ins for those two classes from their pickled state and
refuses every other class, so neither chumpy nor scipy is needed and the
file cannot run code. The arrays are those smplx's MANO layer builds (and
HaMeR's checkpoint stores as its mano.* buffers):

    v_template    (778, 3)      float32
    shapedirs     (778, 3, 10)  float32
    posedirs      (135, 2334)   float32  (the pickle's (778, 3, 135), flattened to rows, transposed)
    J_regressor   (16, 778)     float32  (dense)
    parents       (16,)         int64    (kintree_table[0], the root's -1)
    lbs_weights   (778, 16)     float32  (the pickle's "weights")
    faces_tensor  (1538, 3)     int64    (the pickle's "f")
    hand_components (k, 45)     float32  (the pickle's "hands_components": the PCA pose space, kept
    hand_mean     (45,)         float32   when present, for the PCA coefficients and SMPL-X's pose)

The output is written to a temporary file beside it and renamed. Errors:
one line on stderr, exit 1.
"""
import _compat_pickle
import os
import pickle
import sys
import tempfile

import numpy as np

N_VERTS, N_JOINTS, N_FACES, N_BETAS = 778, 16, 1538, 10


class _Pickled:
    """A chumpy or scipy.sparse object: its pickled state, nothing run."""

    kind = ""

    def __init__(self, *args, **kwargs):
        self.state = {}

    def __setstate__(self, state):
        self.state = state if isinstance(state, dict) else {"state": state}


class _Chumpy(_Pickled):
    kind = "chumpy"


class _Sparse(_Pickled):
    kind = "sparse"


class _Unpickler(pickle.Unpickler):
    """numpy's array and dtype reconstruction, the stand-ins, and nothing else."""

    NUMPY = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
             ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
             ("numpy._core.multiarray", "scalar")}

    def find_class(self, module, name):
        py2 = (module, name)
        # Python 2's names (copy_reg, __builtin__) as Python 3 calls them
        if py2 in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[py2]
        elif module in _compat_pickle.IMPORT_MAPPING:
            module = _compat_pickle.IMPORT_MAPPING[module]
        if (module, name) in self.NUMPY:
            return super().find_class(*py2)
        # object reconstruction, a chumpy object's set of names, and bytes
        # as a protocol-2 pickle written by Python 3 spells them
        if (module, name) in (("copyreg", "_reconstructor"), ("builtins", "object"), ("builtins", "set"),
                              ("_codecs", "encode")):
            return super().find_class(*py2)
        if module == "chumpy" or module.startswith("chumpy."):
            return _Chumpy
        if module.startswith("scipy.sparse") and name in ("csc_matrix", "csr_matrix"):
            return type(name, (_Sparse,), {"fmt": name[:3]})
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} (not part of a MANO model file)")


def _array(value, what):
    """value as a numpy array: as is, a chumpy object's "x", a sparse matrix densified."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, _Chumpy):
        x = value.state.get("x")
        if isinstance(x, np.ndarray):
            return x
        raise ValueError(f"{what}: a chumpy object without an array in its state")
    if isinstance(value, _Sparse):
        s = value.state
        shape = s.get("_shape", s.get("shape"))
        data, indices, indptr = s.get("data"), s.get("indices"), s.get("indptr")
        if shape is None or data is None or indices is None or indptr is None:
            raise ValueError(f"{what}: a sparse matrix without data, indices, indptr and shape")
        rows, cols = (int(v) for v in shape)
        major = cols if value.fmt == "csc" else rows
        if len(indptr) != major + 1 or indptr[-1] != len(data) or len(indices) != len(data):
            raise ValueError(f"{what}: inconsistent sparse matrix")
        dense = np.zeros((rows, cols), np.float64)
        for j in range(major):
            for k in range(int(indptr[j]), int(indptr[j + 1])):
                if value.fmt == "csc":
                    dense[int(indices[k]), j] += data[k]
                else:
                    dense[j, int(indices[k])] += data[k]
        return dense
    raise ValueError(f"{what}: expected an array, got {type(value).__name__}")


def convert(data):
    """The arrays of --mano from the unpickled MANO dictionary."""
    if not isinstance(data, dict):
        raise ValueError("not a MANO model file (no dictionary at the top)")
    need = ["v_template", "shapedirs", "posedirs", "J_regressor", "kintree_table", "weights", "f"]
    missing = [k for k in need if k not in data]
    if missing:
        raise ValueError(f"not a MANO model file: no {', '.join(missing)}")
    a = {k: _array(data[k], k) for k in need}
    posedirs = a["posedirs"]
    if posedirs.ndim != 3 or posedirs.shape[:2] != (N_VERTS, 3):
        raise ValueError(f"posedirs has shape {posedirs.shape}, expected ({N_VERTS}, 3, 135)")
    parents = np.array(a["kintree_table"][0], np.int64)
    parents[0] = -1
    out = {
        "v_template": a["v_template"].astype(np.float32),
        "shapedirs": a["shapedirs"][:, :, :N_BETAS].astype(np.float32),
        "posedirs": posedirs.reshape(-1, posedirs.shape[-1]).T.astype(np.float32),
        "J_regressor": a["J_regressor"].astype(np.float32),
        "parents": parents,
        "lbs_weights": a["weights"].astype(np.float32),
        "faces_tensor": a["f"].astype(np.int64),
    }
    shapes = {"v_template": (N_VERTS, 3), "shapedirs": (N_VERTS, 3, N_BETAS),
              "posedirs": (9 * (N_JOINTS - 1), 3 * N_VERTS), "J_regressor": (N_JOINTS, N_VERTS),
              "parents": (N_JOINTS,), "lbs_weights": (N_VERTS, N_JOINTS), "faces_tensor": (N_FACES, 3)}
    for k, shape in shapes.items():
        if out[k].shape != shape:
            raise ValueError(f"{k} has shape {out[k].shape}, expected {shape} (not MANO's right hand?)")
    if "hands_components" in data and "hands_mean" in data:
        comps, mean = _array(data["hands_components"], "hands_components"), _array(data["hands_mean"], "hands_mean")
        if comps.ndim != 2 or not 1 <= comps.shape[0] <= 45 or comps.shape[1] != 45 or mean.shape != (45,):
            raise ValueError(f"hands_components {comps.shape} / hands_mean {mean.shape}: expected (k, 45) / (45,)")
        out["hand_components"], out["hand_mean"] = comps.astype(np.float32), mean.astype(np.float32)
    return out


def main(argv):
    if len(argv) != 3:
        print("usage: scripts/mano_npz.py MANO_RIGHT.pkl MANO.npz", file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    try:
        with open(src, "rb") as f:
            data = _Unpickler(f, encoding="latin1").load()
        arrays = convert(data)
        d = os.path.dirname(os.path.abspath(dst))
        fd, tmp = tempfile.mkstemp(prefix=".mano_npz.", suffix=".npz", dir=d)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **{k: np.ascontiguousarray(v) for k, v in arrays.items()})  # hamer reads C order
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, dst)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
        print(f"mano_npz.py: {src}: {e}", file=sys.stderr)
        return 1
    print(f"wrote {dst} (right-hand MANO: 778 vertices, 1538 faces, 16 joints)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
