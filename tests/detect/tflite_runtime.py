"""The real TFLite runtime for the detector tests: tests/detect/tflite_ref.js
(node + tfjs-tflite's WebAssembly build), one `--serve` process per
RefRuntime for all its inferences (starting node and compiling the runtime
cost more than a palm inference), with the outputs cached on disk by content
(model bytes + input bytes), so repeated test runs cost nothing.

    rt = RefRuntime(cache_dir)
    outs = rt.infer('/path/model.tflite', x)   # list of float32 arrays
"""

import atexit
import hashlib
import json
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
        self._proc = None

    def _server(self):
        """The runner process, started on first use; one that died is
        replaced (its error was raised to the request that saw it)."""
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(['node', str(RUNNER), '--serve'], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True)
            atexit.register(self.close)
        return self._proc

    def close(self):
        p, self._proc = self._proc, None
        if p is not None and p.poll() is None:
            p.stdin.close()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def _run(self, model, in_path, out_dir):
        p = self._server()
        p.stdin.write(json.dumps({'model': str(model), 'inputs': [in_path], 'out_dir': out_dir}) + '\n')
        p.stdin.flush()
        line = p.stdout.readline()
        if not line:
            raise RuntimeError(f'tflite_ref.js --serve exited ({p.wait()}) while running {model}')
        reply = json.loads(line)
        if 'error' in reply:
            raise RuntimeError(f"tflite_ref.js failed: {reply['error']}")

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
            self._run(model, os.path.join(td, 'in.npy'), td)
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
