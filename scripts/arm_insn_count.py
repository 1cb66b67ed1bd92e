#!/usr/bin/env python3
"""Instructions per multiply-add of the AArch64 GEMM inner loops, read from
a cross build's objects (qemu gives no timings; docs/benchmarks.md).

    scripts/arm_insn_count.py [BUILD_DIR]      (default build-arm64)

For each kernel it disassembles the object (aarch64-linux-gnu-objdump),
takes the innermost loop of the full register tile (of the loops with no
branch or call inside, the one with the most multiply-add instructions), counts
its instructions, and divides by the multiply-adds one iteration does.
The ISA's best is one multiply-add instruction per that many MACs (FMLA 4,
SDOT 16, SMMLA 32, BFMMLA 16): the fraction of ideal is the share of the
loop's instructions that are the multiply-add instruction. Then per crop of
the full-size model (ViT-H: 32 blocks x 192 tokens; qkv 1280->3840, proj
1280->1280, fc1 1280->5120, fc2 5120->1280; attention 16 heads of 80; the
patch embedding 768->1280), the GEMM inner-loop instructions at each ISA
level, against the same work done at the ideal rate.
"""
import collections
import re
import subprocess
import sys
from pathlib import Path

BUILD = Path(sys.argv[1] if len(sys.argv) > 1 else "build-arm64")
OBJ = BUILD / "CMakeFiles/hamer_obj.dir/src/kernels/arm"
# kernel: (object, function, MAC instruction, MACs per instruction)
KERNELS = {
    "fp32 fmla (gemm block)": ("gemm_neon.c.o", "hm_gemm_block_neon", "fmla", 4),
    "fp32 fmla (attention)": ("attn_neon.c.o", "hm_attention_head_f32_neon", "fmla", 4),
    "int8 sdot": ("gemm_lowp_dotprod.c.o", "hm_lowp_i8_block_dotprod", "sdot", 16),
    "int8 smmla": ("gemm_lowp_i8mm.c.o", "hm_lowp_i8_block_i8mm", "smmla", 32),
    "bf16 bfmmla": ("gemm_lowp_bf16.c.o", "hm_lowp_bf16_block_bfmmla", "bfmmla", 16),
}


def inner_loop(obj, fn, key):
    out = subprocess.run(["aarch64-linux-gnu-objdump", "-d", "--no-show-raw-insn", str(obj)], capture_output=True,
                         text=True, check=True).stdout
    for f in re.split(r"\n(?=[0-9a-f]+ <)", out):
        m = re.match(r"([0-9a-f]+) <([^>]+)>:", f)
        if not m or m.group(2) != fn:
            continue
        ins = [(int(a, 16), op, args) for a, op, args in re.findall(r"\n[ \t]*([0-9a-f]+):[ \t]+(\S+)[ \t]*([^\n]*)", f)]
        at = {a: i for i, (a, _, _) in enumerate(ins)}
        best = None
        for i, (a, op, args) in enumerate(ins):
            t = re.match(r"([0-9a-f]+)", args)
            if op.startswith("b") and not op.startswith(("bl", "bf", "bi", "bs")) and t and int(t.group(1), 16) in at \
                    and int(t.group(1), 16) <= a:
                body = ins[at[int(t.group(1), 16)]:i + 1]
                c = collections.Counter(o for _, o, _ in body)
                inner = any(o.startswith("b.") or o in ("cbz", "cbnz") for _, o, _ in body[:-1])
                if c["bl"] or c["ret"] or inner:  # innermost loops only
                    continue
                if best is None or c[key] > best[1][key] or (c[key] == best[1][key] and len(body) < best[0]):
                    best = (len(body), c)
        return best
    raise SystemExit(f"{fn} not found in {obj}")


loops = {}
print("| kernel | loop: instructions | of them MAC instructions | MACs per iteration | instructions per MAC "
      "| ISA's best | fraction of ideal |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, (obj, fn, key, per) in KERNELS.items():
    n, c = inner_loop(OBJ / obj, fn, key)
    macs = c[key] * per
    loops[name] = n / macs
    print(f"| {name} | {n} | {c[key]} {key} | {macs} | {n / macs:.4f} | {1 / per:.4f} | {c[key] / n:.1%} |")

M = 192
per_block = {"qkv": M * 1280 * 3840, "proj": M * 1280 * 1280, "fc1": M * 1280 * 5120, "fc2": M * 5120 * 1280}
int8 = 32 * (per_block["qkv"] + per_block["fc1"] + per_block["fc2"])
proj = 32 * per_block["proj"]
attn = 32 * 16 * 2 * M * M * 80
patch = M * 768 * 1280
best = {"fmla": 0.25, "sdot": 1 / 16, "smmla": 1 / 32, "bfmmla": 1 / 16}
levels = [
    ("fp32 (neon)", [(int8 + proj + patch, "fp32 fmla (gemm block)", "fmla"), (attn, "fp32 fmla (attention)", "fmla")]),
    ("fast, dot product (sdot; proj fp32)", [(int8, "int8 sdot", "sdot"), (proj + patch, "fp32 fmla (gemm block)", "fmla"),
                                              (attn, "fp32 fmla (attention)", "fmla")]),
    ("fast, i8mm without BF16 (smmla; proj fp32)", [(int8, "int8 smmla", "smmla"),
                                                     (proj + patch, "fp32 fmla (gemm block)", "fmla"),
                                                     (attn, "fp32 fmla (attention)", "fmla")]),
    ("fast, i8mm + BF16 (smmla; proj bfmmla)", [(int8, "int8 smmla", "smmla"), (proj, "bf16 bfmmla", "bfmmla"),
                                                 (patch, "fp32 fmla (gemm block)", "fmla"),
                                                 (attn, "fp32 fmla (attention)", "fmla")]),
]
print()
print("| level (full-size model, one crop) | GMAC | inner-loop G instructions | at the ISA's best | fraction of ideal |")
print("| --- | ---: | ---: | ---: | ---: |")
for name, parts in levels:
    macs = sum(m for m, _, _ in parts)
    got = sum(m * loops[k] for m, k, _ in parts)
    ideal = sum(m * best[b] for m, _, b in parts)
    print(f"| {name} | {macs / 1e9:.1f} | {got / 1e9:.2f} | {ideal / 1e9:.2f} | {ideal / got:.1%} |")
