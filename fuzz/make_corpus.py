#!/usr/bin/python3
"""Write the seed corpus of every fuzz target under fuzz/corpus/<target>/.

The seeds are small, valid (or nearly valid) inputs of each kind, built the
way the test fixtures are (tests/hamer_fixture.py: torch.save zips with a
Lightning-style pickle, numpy files, JPEG/PNG through Pillow), so each fuzzer
starts from deep inside its parser. Regenerate with

    /usr/bin/python3 fuzz/make_corpus.py          # Debian python3-torch etc.
    /usr/bin/python3 fuzz/make_corpus.py --regression   # hand-built
                                                  # tests/regression inputs
    /usr/bin/python3 fuzz/make_corpus.py --exif   # the EXIF and query seeds alone

Output is deterministic for a given torch / numpy / Pillow version; the
committed seeds need not be regenerated when those change.

The model seed is a complete, loadable HaMeR checkpoint at the smallest
widths the loader accepts (ViT width 80 = 1 head of 80, MLP 16, 1 block;
decoder width 64, inner 64 = 1 head of 64, MLP 16, 1 layer) with MANO
buffers. To keep it small every float tensor is a view into one shared
storage (torch.save writes a storage once), so the file is about the size of
its largest tensor (MANO posedirs, 1.26 MB) rather than the sum.
"""

import collections
import io
import json
import os
import pickle
import struct
import sys
import tempfile
import zipfile

import numpy as np
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
import hamer_fixture as fx  # noqa: E402

OUT = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def torch_bytes(obj, byteorder=True):
    buf = io.BytesIO()
    if byteorder:
        fx._torch_save(obj, buf)
    else:
        torch.save(obj, buf)
    return buf.getvalue()


def member(zbytes, suffix):
    with zipfile.ZipFile(io.BytesIO(zbytes)) as z:
        for n in z.namelist():
            if n.endswith(suffix):
                return z.read(n)
    raise KeyError(suffix)


# ---------------------------------------------------------------------------
# Tiny model
# ---------------------------------------------------------------------------

DIM, MLP, DEPTH = 80, 16, 1
HDIM, HINNER, HMLP, HDEPTH = 64, 64, 16, 1


def tiny_state_dict():
    """Every key and shape hm_model_from_ckpt reads, at the smallest widths."""
    shapes = collections.OrderedDict()
    shapes["backbone.pos_embed"] = (1, fx.VIT_TOKENS + 1, DIM)
    shapes["backbone.patch_embed.proj.weight"] = (DIM, 3, fx.PATCH, fx.PATCH)
    shapes["backbone.patch_embed.proj.bias"] = (DIM,)
    for i in range(DEPTH):
        p = f"backbone.blocks.{i}."
        for n in ("norm1", "norm2"):
            shapes[p + n + ".weight"] = (DIM,)
            shapes[p + n + ".bias"] = (DIM,)
        for n, o, k in (("attn.qkv", 3 * DIM, DIM), ("attn.proj", DIM, DIM),
                        ("mlp.fc1", MLP, DIM), ("mlp.fc2", DIM, MLP)):
            shapes[p + n + ".weight"] = (o, k)
            shapes[p + n + ".bias"] = (o,)
    shapes["backbone.last_norm.weight"] = (DIM,)
    shapes["backbone.last_norm.bias"] = (DIM,)
    t = "mano_head.transformer"
    shapes["mano_head.init_hand_pose"] = (1, 6 * fx.N_JOINTS)
    shapes["mano_head.init_betas"] = (1, fx.N_BETAS)
    shapes["mano_head.init_cam"] = (1, 3)
    shapes[t + ".pos_embedding"] = (1, 1, HDIM)
    shapes[t + ".to_token_embedding.weight"] = (HDIM, 1)
    shapes[t + ".to_token_embedding.bias"] = (HDIM,)
    for j in range(HDEPTH):
        p = f"{t}.transformer.layers.{j}."
        for n in ("0.norm", "1.norm", "2.norm"):
            shapes[p + n + ".weight"] = (HDIM,)
            shapes[p + n + ".bias"] = (HDIM,)
        shapes[p + "0.fn.to_qkv.weight"] = (3 * HINNER, HDIM)
        shapes[p + "0.fn.to_out.0.weight"] = (HDIM, HINNER)
        shapes[p + "0.fn.to_out.0.bias"] = (HDIM,)
        shapes[p + "1.fn.to_kv.weight"] = (2 * HINNER, DIM)
        shapes[p + "1.fn.to_q.weight"] = (HINNER, HDIM)
        shapes[p + "1.fn.to_out.0.weight"] = (HDIM, HINNER)
        shapes[p + "1.fn.to_out.0.bias"] = (HDIM,)
        shapes[p + "2.fn.net.0.weight"] = (HMLP, HDIM)
        shapes[p + "2.fn.net.0.bias"] = (HMLP,)
        shapes[p + "2.fn.net.3.weight"] = (HDIM, HMLP)
        shapes[p + "2.fn.net.3.bias"] = (HDIM,)
    for n, o in (("decpose", 6 * fx.N_JOINTS), ("decshape", fx.N_BETAS), ("deccam", 3)):
        shapes[f"mano_head.{n}.weight"] = (o, HDIM)
        shapes[f"mano_head.{n}.bias"] = (o,)
    return shapes


def tiny_model_ckpt(mano):
    shapes = tiny_state_dict()
    mano_np = fx.mano_buffers(0) if mano else {}
    floats = {k: v for k, v in mano_np.items() if v.dtype.kind == "f"}
    need = max([int(np.prod(s)) for s in shapes.values()] + [v.size for v in floats.values()])
    g = torch.Generator().manual_seed(0)
    base = torch.randn(need, generator=g) * 0.02 + 0.01
    sd = collections.OrderedDict()
    sd["initialized"] = torch.tensor(True)
    for k, s in shapes.items():
        sd[k] = base[: int(np.prod(s))].view(s)
    for k, v in mano_np.items():
        if v.dtype.kind == "f":
            sd["mano." + k] = base[: v.size].view(v.shape)
        else:
            sd["mano." + k] = torch.from_numpy(np.ascontiguousarray(v))
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tiny.ckpt")
        fx.save_checkpoint(sd, path)
        with open(path, "rb") as f:
            return f.read()


def packed_models(ckpts):
    """The tiny checkpoints as packed model files, written by `hamer convert`
    (HAMER_BUILD, default build/). Packed files are tied to the ISA they
    were packed for: these seeds are AVX-512 ones (the fast ones need
    AVX-512 VNNI). Returns {} with a note when the binary is missing."""
    import subprocess
    hamer = os.path.join(os.environ.get("HAMER_BUILD") or os.path.join(HERE, "..", "build"), "hamer")
    if not os.path.exists(hamer):
        print(f"make_corpus: {hamer} not built; packed seeds not written", file=sys.stderr)
        return {}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, data, precisions in ckpts:
            src = os.path.join(tmp, name + ".ckpt")
            with open(src, "wb") as f:
                f.write(data)
            for prec in precisions:
                dst = os.path.join(tmp, f"{name}_{prec}.hpk")
                subprocess.run([hamer, "convert", "--model", src, "--output", dst, "--precision", prec],
                               check=True, env=dict(os.environ, HAMER_ISA="avx512"))
                with open(dst, "rb") as f:
                    out[f"{name}_{prec}.hpk"] = f.read()
    return out


# ---------------------------------------------------------------------------
# Checkpoints, pickles, zips
# ---------------------------------------------------------------------------

def small_ckpts():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4, 6, generator=g)
    dtypes = {k: x.to(dt) for k, dt in (
        ("f32", torch.float32), ("f64", torch.float64), ("f16", torch.float16), ("bf16", torch.bfloat16),
        ("i64", torch.int64), ("i32", torch.int32), ("i16", torch.int16), ("i8", torch.int8),
        ("u8", torch.uint8), ("bool", torch.bool))}
    out = {}
    out["dtypes.ckpt"] = torch_bytes(collections.OrderedDict(dtypes))
    big = torch.arange(60, dtype=torch.float32)
    out["views.ckpt"] = torch_bytes({"state_dict": collections.OrderedDict([
        ("t", x.t()),                       # non-contiguous strides
        ("slice", big[7:19].view(3, 4)),    # storage offset
        ("step", big[::5]),                 # stride 5
        ("scalar", torch.tensor(2.5)),      # 0-d
        ("empty", torch.zeros(0, 3)),       # no elements
        ("param", torch.nn.Parameter(torch.ones(3))),
        ("dup", big[:4]), ("dup", big[4:8]),
    ]), "epoch": 1, "meta": {"k": [1, 2, (3, "x")]}})
    out["plain.ckpt"] = torch_bytes({"a.weight": torch.ones(2, 2), "b": torch.zeros(3)}, byteorder=False)
    # The release's container: Lightning dict, opaque hyper-parameter objects
    # with reference cycles, cuda:0 storage tags, a non-'archive' prefix.
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.ckpt")
        fx.save_checkpoint(collections.OrderedDict([("initialized", torch.tensor(True)), ("w", x)]), path,
                           cuda_tag=True, zip_prefix="hamer_release")
        with open(path, "rb") as f:
            out["lightning.ckpt"] = f.read()
    return out


def pickles(model_ckpt):
    out = {"model_data.pkl": member(model_ckpt, "data.pkl")}
    objs = {
        "mixed": {"none": None, "t": True, "f": False, "i": -5, "k": 255, "m": 65535, "j": 2 ** 31 - 1,
                  "big": 2 ** 70, "neg": -2 ** 65, "fl": 1.5, "s": "caf\u00e9", "b": b"\x00\xff",
                  "ba": bytearray(b"ab"), "l": [1, [2, [3]]], "tu": (1,), "t2": (1, 2), "t3": (1, 2, 3),
                  "t4": (1, 2, 3, 4), "set": {1, 2}, "fs": frozenset({3}),
                  "od": collections.OrderedDict([("a", 1)])},
    }
    shared = [1, 2]
    objs["shared"] = {"a": shared, "b": shared, "c": (shared, shared)}
    for name, obj in objs.items():
        for proto in range(6):
            try:
                out[f"{name}_p{proto}.pkl"] = pickle.dumps(obj, protocol=proto)
            except (pickle.PicklingError, TypeError):
                pass
    out["sd_p2.pkl"] = member(torch_bytes({"w": torch.ones(2, 3)}), "data.pkl")
    return out


def zips():
    out = {}
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    buf = io.BytesIO()
    np.savez(buf, a=a, b=np.array([1, 2, 3], np.int64))
    out["stored.npz"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez_compressed(buf, a=a, faces=np.arange(9, dtype=np.int32).reshape(3, 3))
    out["deflated.npz"] = buf.getvalue()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        with z.open("archive/data.pkl", "w", force_zip64=True) as f:
            f.write(b"\x80\x02}q\x00.")
        z.writestr("archive/data/0", b"\x00" * 16)
    out["zip64.zip"] = buf.getvalue()
    out["small.ckpt"] = torch_bytes({"w": torch.ones(2, 3)})
    return out


# ---------------------------------------------------------------------------
# .npy
# ---------------------------------------------------------------------------

def npys():
    out = {}
    arrays = {
        "f4": np.arange(6, dtype="<f4").reshape(2, 3), "f8": np.array([1.5, -2.0]),
        "u1": np.arange(5, dtype=np.uint8), "i8": np.array([[-1, 2]], np.int64),
        "i4": np.array([7], np.int32), "b1": np.array([True, False]), "scalar": np.array(3.0, np.float32),
        "empty": np.zeros((0, 4), np.float32), "f2": np.array([1, 2], np.float16),
        "i2": np.array([1, 2], np.int16), "i1": np.array([-1], np.int8),
    }
    for k, v in arrays.items():
        buf = io.BytesIO()
        np.save(buf, v)
        out[k + ".npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.arange(3, dtype="<f4"), version=(2, 0))
    out["v2.npy"] = buf.getvalue()
    buf = io.BytesIO()
    np.savez_compressed(buf, v_template=np.zeros((4, 3)), parents=np.array([-1, 0], np.int64))
    out["mano_like.npz"] = buf.getvalue()
    return out


# ---------------------------------------------------------------------------
# Boxes
# ---------------------------------------------------------------------------

def boxes():
    out = {}
    out["one.json"] = json.dumps([{"bbox": [10, 20, 110, 220], "is_right": True}]).encode()
    out["two.json"] = json.dumps([{"bbox": [0.5, 1e-3, 300.25, 400]},
                                  {"bbox": [-5, -5, 5, 5], "is_right": False}]).encode()
    out["nested.json"] = b'[{"bbox": [1, 2, 3, 4], "extra": {"a": [[[]]]}}]'
    out["lines.txt"] = b"10,20,110,220\n1.5,2.5,30,40:left\n-1e3,0,5e2,1e2:right\n"
    return out


# ---------------------------------------------------------------------------
# Images (18-byte header, then the file; see fuzz_image.c)
# ---------------------------------------------------------------------------

def header(mode, left, rescale_byte, box):
    return bytes([mode | (2 if left else 0), rescale_byte]) + struct.pack("<4f", *box)


def avif(img):
    """A still AVIF of img (ffmpeg with libaom: Pillow has no AVIF writer)."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "s.png"), os.path.join(d, "s.avif")
        img.save(src)
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-i", src, "-c:v", "libaom-av1",
                        "-still-picture", "1", "-crf", "40", "-cpu-used", "8", dst], check=True)
        return open(dst, "rb").read()


def images():
    out = {}
    rng = np.random.RandomState(3)
    rgb = Image.fromarray(rng.randint(0, 256, (24, 32, 3), np.uint8))
    grey = rgb.convert("L")

    def enc(img, fmt, **kw):
        buf = io.BytesIO()
        img.save(buf, fmt, **kw)
        return buf.getvalue()

    exif = Image.Exif()
    exif[0x0112] = 6
    files = {
        "baseline.jpg": enc(rgb, "JPEG", quality=80),
        "progressive.jpg": enc(rgb, "JPEG", quality=80, progressive=True),
        "grey.jpg": enc(grey, "JPEG"),
        "cmyk.jpg": enc(rgb.convert("CMYK"), "JPEG"),
        "exif6.jpg": enc(rgb, "JPEG", exif=exif.tobytes()),
        "rgb.png": enc(rgb, "PNG"),
        "rgba.png": enc(rgb.convert("RGBA"), "PNG"),
        "palette.png": enc(rgb.convert("P"), "PNG"),
        "grey.png": enc(grey, "PNG"),
        "grey1.png": enc(grey.convert("1"), "PNG"),
        "optimized.png": enc(rgb, "PNG", optimize=True),
    }
    g16 = io.BytesIO()
    Image.fromarray((rng.randint(0, 65536, (8, 8))).astype(np.uint16)).save(g16, "PNG")
    files["grey16.png"] = g16.getvalue()
    # the formats read through libwebp and FFmpeg (format/image_ext.c)
    small = rgb.resize((16, 12))
    ext = {
        "lossy.webp": enc(small, "WEBP", quality=60),
        "lossless_alpha.webp": enc(small.convert("RGBA"), "WEBP", lossless=True),
        "rgb.bmp": enc(small, "BMP"),
        "palette.bmp": enc(small.convert("P"), "BMP"),
        "rgb.tiff": enc(small, "TIFF"),
        "grey_lzw.tiff": enc(small.convert("L"), "TIFF", compression="tiff_lzw"),
        "frames.gif": enc(small.convert("P"), "GIF", save_all=True, append_images=[small.rotate(90).convert("P")]),
        "still.avif": avif(small),
    }
    boxes = [(0, 0, header(0, False, 31, (4, 3, 20, 18))),      # warp, rescale 2
             (1, 1, header(1, True, 31, (4, 3, 20, 18))),       # pad, left hand
             (2, 0, header(0, False, 255, (-40, -40, 100, 90))),  # big box: blur path
             (3, 0, header(1, False, 0, (30, 20, 31, 21)))]     # tiny box, rescale 1/16
    for i, (name, data) in enumerate(sorted(files.items()) + sorted(ext.items())):
        _, _, h = boxes[i % len(boxes)]
        out[name] = h + data
    return out


# ---------------------------------------------------------------------------
# Regression inputs (tests/regression/, run by tests/c/test_regression.c)
# ---------------------------------------------------------------------------

def regression_inputs():
    """Findings that were built by hand rather than saved by a fuzzer."""
    reg = os.path.join(HERE, "..", "tests", "regression")
    os.makedirs(reg, exist_ok=True)
    # The decoder's inner width read off a zero-stride to_q (no bytes behind
    # it) and 64 layers counted from their norm weights alone: the loader
    # sized its stacked K/V buffer, 64 x 2 x 65472 x 80 floats = 2.7 GB, from
    # those shapes before checking any layer's to_kv. 280 KB of file.
    shapes = tiny_state_dict()
    base = torch.randn(max(int(np.prod(s)) for s in shapes.values()), generator=torch.Generator().manual_seed(0))
    sd = collections.OrderedDict((k, base[: int(np.prod(s))].view(s)) for k, s in shapes.items())
    t = "mano_head.transformer.transformer.layers."
    sd[t + "0.1.fn.to_q.weight"] = torch.as_strided(base, (65472, HDIM), (0, 0))
    for j in range(1, 64):
        sd[t + f"{j}.0.norm.weight"] = base[:HDIM]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "x.ckpt")
        fx.save_checkpoint(sd, path)
        with open(path, "rb") as f, open(os.path.join(reg, "model-kv-alloc.ckpt"), "wb") as g:
            g.write(f.read())
    # The query parser quoted decoded client bytes (%0A, %0D, %E9) into its
    # error messages; fuzz_query found it through a key, these are the
    # values and a box (see fuzz_query.c for the layout).
    for name, data in [("query-rescale-newline-in-error.txt", b"\x00boxes=1,2,30,40&rescale=%0a"),
                       ("query-box-cr-in-error.txt", b"\x01boxes=1,2,30,40:%0dleft&crop_mode=pad"),
                       ("query-crop-mode-latin1-in-error.txt", b"\x01boxes=1,2,30,40&crop_mode=%e9")]:
        with open(os.path.join(reg, name), "wb") as f:
            f.write(data)


# ---------------------------------------------------------------------------
# Server request bodies (Content-Type line, then the body; see fuzz_server.c)
# ---------------------------------------------------------------------------

def server_requests(imgs):
    out = {}
    hands = json.dumps([{"bbox": [4, 3, 20, 18], "is_right": False}]).encode()
    jpg = imgs["baseline.jpg"][18:]

    def form(boundary, parts, preamble=b"", epilogue=b""):
        body = preamble
        for name, data, extra in parts:
            body += b"--" + boundary + b"\r\n"
            body += b'Content-Disposition: form-data; name="' + name + b'"' + extra + b"\r\n\r\n"
            body += data + b"\r\n"
        return body + b"--" + boundary + b"--\r\n" + epilogue

    b = b"hamerBOUNDARY0123"
    out["predict.txt"] = b"multipart/form-data; boundary=" + b + b"\n" + form(
        b, [(b"image", jpg, b'; filename="x.jpg"\r\nContent-Type: image/jpeg'),
            (b"hands", hands, b"\r\nContent-Type: application/json")])
    b = b"'()+_,-./:=? x"
    out["quoted_boundary.txt"] = b'multipart/form-data; charset=utf-8; boundary="' + b + b'"\n' + form(
        b, [(b"hands", hands, b""), (b"image", b"\x89PNG", b"\r\nContent-Transfer-Encoding: binary")],
        preamble=b"preamble\r\n", epilogue=b"epilogue")
    out["no_parts.txt"] = b"multipart/form-data; boundary=z\n--z--\r\n"
    return out


# ---------------------------------------------------------------------------
# EXIF camera tags (a 4-byte header: the decoded image's width - 1 and
# height - 1, little-endian 16-bit; then the file; see fuzz_exif.c)
# ---------------------------------------------------------------------------

def tiff_block(le, ifd0, exif_ifd):
    """A TIFF-structured EXIF block written by hand: IFD0 (with the Exif IFD
    pointer added) then the Exif IFD; entries (tag, type, values) with
    RATIONAL values given as (num, den) pairs."""
    e = "<" if le else ">"
    sizes = {3: 2, 4: 4, 5: 8}

    def ifd(entries, at, extra):
        head = struct.pack(e + "H", len(entries))
        data_at = at + 2 + 12 * len(entries) + 4
        body, blob = b"", b""
        for tag, typ, vals in entries:
            raw = b"".join(struct.pack(e + "II", *v) if typ == 5 else struct.pack(e + ("H" if typ == 3 else "I"), v)
                           for v in vals)
            if len(raw) <= 4:
                body += struct.pack(e + "HHI", tag, typ, len(vals)) + raw.ljust(4, b"\0")
            else:
                body += struct.pack(e + "HHII", tag, typ, len(vals), data_at + len(blob))
                blob += raw
        return head + body + struct.pack(e + "I", extra) + blob

    first = ifd(ifd0 + [(0x8769, 4, [0])], 8, 0)  # the pointer's value, once the size is known
    exif_at = 8 + len(first)
    first = ifd(ifd0 + [(0x8769, 4, [exif_at])], 8, 0)
    return (b"II*\0" if le else b"MM\0*") + struct.pack(e + "I", 8) + first + ifd(exif_ifd, exif_at, 0)


def exifs():
    out = {}
    rgb = Image.fromarray(np.random.RandomState(5).randint(0, 256, (30, 40, 3), np.uint8))

    def enc(fmt, block):
        buf = io.BytesIO()
        rgb.save(buf, fmt, exif=b"Exif\0\0" + block)
        return buf.getvalue()

    hdr = struct.pack("<HH", 40 - 1, 30 - 1)
    camera = [(0x920A, 5, [(425, 100)]), (0xA20E, 5, [(4000, 6)]), (0xA20F, 5, [(4000, 6)]), (0xA210, 3, [4]),
              (0xA002, 4, [4000]), (0xA003, 4, [3000])]
    out["f35_le.jpg"] = hdr + enc("JPEG", tiff_block(True, [(0x0112, 3, [1])], [(0xA405, 3, [28])]))
    out["plane_be.jpg"] = hdr + enc("JPEG", tiff_block(False, [], camera))
    out["plane_le.png"] = hdr + enc("PNG", tiff_block(True, [], camera))
    out["rotated.jpg"] = struct.pack("<HH", 30 - 1, 40 - 1) + enc("JPEG", tiff_block(True, [(0x0112, 3, [6])], camera))
    loop = bytearray(tiff_block(True, [], [(0xA405, 3, [50])]))
    loop[4:8] = struct.pack("<I", 8)  # fine; then point the Exif IFD back at IFD0
    out["exif_is_ifd0.jpg"] = hdr + enc("JPEG", bytes(loop).replace(struct.pack("<HHII", 0x8769, 4, 1, 26),
                                                                     struct.pack("<HHII", 0x8769, 4, 1, 8)))
    out["truncated.jpg"] = hdr + enc("JPEG", tiff_block(False, [], camera))[:60]  # inside the APP1
    out["huge_count.jpg"] = hdr + enc("JPEG", b"MM\0*\0\0\0\x08\xff\xff" + bytes(40))
    return out


# ---------------------------------------------------------------------------
# Server query strings (a request-shape byte, then what follows '?'; see
# fuzz_query.c)
# ---------------------------------------------------------------------------

PREDICT_IMAGE, RENDER_IMAGE, PREDICT_MULTIPART, RENDER_MULTIPART = b"\x00", b"\x01", b"\x02", b"\x03"


def queries():
    out = {}
    out["predict.txt"] = PREDICT_IMAGE + b"boxes=10,20,110,220;1.5,2.5,30,40:left&vertices=1&rescale=2.5&crop_mode=pad"
    out["render.txt"] = RENDER_IMAGE + b"boxes=10,20,110,220:right;&side_view=true&crop_mode=warp"
    out["multipart_predict.txt"] = PREDICT_MULTIPART + b"vertices=false&rescale=1e0"
    out["multipart_render.txt"] = RENDER_MULTIPART + b"side_view=0"
    out["escaped.txt"] = PREDICT_IMAGE + b"boxes=1%2C2%2C30%2C40%3Aleft%3B-5,-5,5,5&rescale=+2"
    out["max_boxes.txt"] = PREDICT_IMAGE + b"boxes=" + b";".join([b"1,2,30,40"] * 64)
    out["unknown_key.txt"] = PREDICT_IMAGE + b"boxes=1,2,30,40&side_view=1"
    out["repeated_key.txt"] = RENDER_IMAGE + b"boxes=1,2,30,40&boxes=1,2,30,40"
    out["valueless_key.txt"] = PREDICT_MULTIPART + b"vertices&rescale="
    out["bad_box.txt"] = PREDICT_IMAGE + b"boxes=1,2,30,40;;nan,1,2,3:up"
    out["camera.txt"] = PREDICT_IMAGE + b"boxes=1,2,30,40&focal=1500.5&format=bvh"
    out["fov.txt"] = PREDICT_MULTIPART + b"fov=65&focal=1e7"
    return out


def main():
    if sys.argv[1:] == ["--regression"]:
        regression_inputs()
        return
    for k, v in exifs().items():
        put("exif", k, v)
    if sys.argv[1:] == ["--exif"]:  # these seeds alone
        for k, v in queries().items():
            put("query", k, v)
        return
    model = tiny_model_ckpt(mano=True)
    put("model", "tiny_mano.ckpt", model)
    tiny = tiny_model_ckpt(mano=False)
    put("model", "tiny.ckpt", tiny)  # also tests/c/test_limits.c's model
    # fuzz_packed's control byte: 1 = reseal checksums, 2 = also run a crop.
    for k, v in packed_models([("tiny", tiny, ("fp32", "fast")), ("tiny_mano", model, ("fp32",))]).items():
        put("packed", k, (b"\x01" if k.startswith("tiny_mano") else b"\x03") + v)
    for k, v in small_ckpts().items():
        put("ckpt", k, v)
        put("zip", k, v)
    for k, v in pickles(model).items():
        put("pickle", k, v)
    for k, v in zips().items():
        put("zip", k, v)
    for k, v in npys().items():
        put("npy", k, v)
    for k, v in boxes().items():
        put("boxes", k, v)
    imgs = images()
    for k, v in imgs.items():
        put("image", k, v)
    for k, v in server_requests(imgs).items():
        put("server", k, v)
    for k, v in queries().items():
        put("query", k, v)


if __name__ == "__main__":
    main()
