#!/usr/bin/env bash
# Set up on a fresh Debian 12 machine (as root), build, and run the main job:
# `hamer regress` on a batch of crops.
#   bash scripts/demo.sh [path/to/hamer.ckpt]
# Without a checkpoint argument a small synthetic checkpoint in the official
# format is generated (no weights can be downloaded by this script).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
mkdir -p build/demo
ckpt=${1:-}
if [ -z "$ckpt" ]; then
    ckpt=build/demo/synthetic.ckpt
    [ -f "$ckpt" ] || /usr/bin/python3 tests/hamer_fixture.py --depth 2 --head-depth 2 --seed 0 --out "$ckpt"
fi
/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(0)
np.save("build/demo/crops.npy", rng.integers(0, 256, (2, 256, 192, 3), dtype=np.uint8))
PY
build/hamer regress --model "$ckpt" --input build/demo/crops.npy --output build/demo/out.npz --timings
/usr/bin/python3 - <<'PY'
import numpy as np
out = np.load("build/demo/out.npz")
for k in out.files:
    print(f"{k:13s} {str(out[k].shape):14s} first values {np.round(out[k].ravel()[:3], 4)}")
PY
