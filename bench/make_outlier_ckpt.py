"""Synthetic full-size HaMeR checkpoint with activation outlier channels.

Real ViTs have a few LayerNorm channels with a large gain, so the inputs of
qkv and fc1 carry a handful of channels ~20x larger than the rest; that is
what breaks naive per-token int8. This writes the synthetic checkpoint of
tests/hamer_fixture.py (same generator, same seed: weights identical to
build/test-fixtures/full.ckpt except the gains) with the weight of a few
channels of every backbone.blocks.*.norm1 / norm2 multiplied by --gain.
Used to check the --precision fast accuracy gate; not part of the tests.

    /usr/bin/python3 bench/make_outlier_ckpt.py --out /tmp/full_outliers.ckpt
    build/hamer regress --model /tmp/full_outliers.ckpt --input crops.npy \
        --output fp32.npz --precision fp32      (and again with fast)

Writes ~2.7 GB; needs python3-torch and python3-numpy.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import hamer_fixture  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output checkpoint (put it outside the repository)")
    ap.add_argument("--depth", type=int, default=32)
    ap.add_argument("--head-depth", type=int, default=6)
    ap.add_argument("--seed", type=int, default=1234, help="full.ckpt uses 1234")
    ap.add_argument("--gain", type=float, default=20.0)
    ap.add_argument("--channels", default="17,348,679,1010",
                    help="comma-separated channel indices (same in every block, as in real ViTs)")
    a = ap.parse_args()
    chans = [int(c) for c in a.channels.split(",") if c]
    sd = hamer_fixture.build_state_dict(a.depth, a.head_depth, a.seed, mano=True)
    n = 0
    for key, t in sd.items():
        if key.startswith("backbone.blocks.") and key.endswith((".norm1.weight", ".norm2.weight")):
            t[chans] *= a.gain
            n += 1
    hamer_fixture.save_checkpoint(sd, a.out)
    print(f"{a.out}: x{a.gain:g} on channels {chans} of {n} LayerNorm weights")


if __name__ == "__main__":
    main()
