"""The real TFLite runtime for the detector tests: tests/detect/tflite_ref.js
(node + tfjs-tflite's WebAssembly build), one process per inference, with
the outputs cached on disk by content (model bytes + input bytes), so
repeated test runs cost nothing.

    rt = RefRuntime(cache_dir)
    outs = rt.infer('/path/model.tflite', x)   # list of float32 arrays
"""

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RUNNER = HERE / 'tflite_ref.js'
WASM = HERE / 'node_modules' / '@tensorflow' / 'tfjs-tflite' / 'wasm' / 'tflite_web_api_cc.js'


def unavailable_reason():
    """None when the runtime can run, else why not (for pytest.skip)."""
    if not RUNNER.exists():
        return f'{RUNNER} is not in this tree (the TFLite reference runner)'
    if shutil.which('node') is None:
        return 'node is not installed'
    if not WASM.exists():
        return f'{WASM} missing: run (cd tests/detect && npm install --ignore-scripts --legacy-peer-deps)'
    return None


class RefRuntime:
    def __init__(self, cache_dir):
        self.cache = Path(cache_dir)
        self.cache.mkdir(parents=True, exist_ok=True)
        self._model_hash = {}
        self.calls = 0

    def _mhash(self, model):
        model = str(model)
        if model not in self._model_hash:
            self._model_hash[model] = hashlib.sha256(Path(model).read_bytes()).hexdigest()
        return self._model_hash[model]

    def infer(self, model, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        key = hashlib.sha256((self._mhash(model) + str(x.shape)).encode() + x.tobytes()).hexdigest()
        hit = self.cache / (key + '.npz')
        if hit.exists():
            with np.load(hit) as z:
                return [z[f'output_{i}'] for i in range(len(z.files))]
        with tempfile.TemporaryDirectory() as td:
            np.save(os.path.join(td, 'in.npy'), x)
            r = subprocess.run(['node', str(RUNNER), str(model), '--input', os.path.join(td, 'in.npy'),
                                '--out-dir', td], capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise RuntimeError(f'tflite_ref.js failed ({r.returncode}): {r.stderr.strip()}')
            outs = []
            i = 0
            while os.path.exists(os.path.join(td, f'output_{i}.npy')):
                outs.append(np.load(os.path.join(td, f'output_{i}.npy')))
                i += 1
        self.calls += 1
        tmp = hit.with_name(f'.{key}.{os.getpid()}.tmp.npz')     # unique: test processes run side by side
        np.savez(tmp, **{f'output_{i}': o for i, o in enumerate(outs)})
        os.replace(tmp, hit)
        return outs
