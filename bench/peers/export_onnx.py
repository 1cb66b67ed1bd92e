"""Export a HaMeR checkpoint to ONNX (backbone + head + MANO, batch 1, opset 13).

    /usr/bin/python3 bench/peers/export_onnx.py --ckpt X.ckpt --out DIR/hamer.onnx

The full model's weights (~2.7 GB) exceed protobuf's 2 GB limit, so torch
writes them as external data files next to the .onnx (one per initializer);
keep the directory together. Input "crops" [1,3,256,192]; outputs "params"
[1,157] and "vertices" [1,778,3].
"""

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hamer_torch  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True, help="path of the .onnx (its directory receives the weights)")
    ap.add_argument("--opset", type=int, default=13)
    args = ap.parse_args(argv)
    torch.set_num_threads(2)
    t0 = time.time()
    model = hamer_torch.from_checkpoint(args.ckpt)
    out_names = ["params", "vertices"] if model.mano is not None else ["params"]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    x = torch.zeros(1, 3, 256, 192)
    with torch.no_grad():
        torch.onnx.export(model, (x,), args.out, opset_version=args.opset, input_names=["crops"],
                          output_names=out_names, do_constant_folding=True)
    print(f"exported {args.out} ({', '.join(out_names)}) in {time.time() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
