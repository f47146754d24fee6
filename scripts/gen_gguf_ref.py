#!/usr/bin/env python3
"""Reference GGUF files for tests/test_io_gguf.c (issue 21), from the `gguf`
package (PyPI, llama.cpp's own gguf-py):

    python3 -m venv /tmp/gv && /tmp/gv/bin/pip install gguf numpy
    /tmp/gv/bin/python scripts/gen_gguf_ref.py tests/data/gguf

writes
  tiny.gguf   written by gguf.GGUFWriter: metadata of every scalar type, a
              string, arrays of strings and of i32, a non-default alignment
              (64); tensors F32, F16, BF16, Q8_0 and Q4_0 from a fixed seed
              (quantized by gguf.quants);
  tiny.json   what the test expects: the metadata values, each tensor's
              name, shape (outermost first), type and the float values that
              gguf.quants.dequantize gives for it;
  bad-*.gguf  hand-written files with one defect each (see BAD below), each
              of which the reader must refuse naming the file and the field.
"""
import json
import os
import struct
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import quants

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(20261203)

TENSORS = [  # name, shape (outermost first), type
    ("t.f32", (3, 5), T.F32),
    ("t.f16", (2, 64), T.F16),
    ("t.bf16", (2, 32), T.BF16),
    ("t.q8_0", (3, 64), T.Q8_0),
    ("blk.0.attn_q.weight", (4, 64), T.Q4_0),
]

w = gguf.GGUFWriter(os.path.join(out, "tiny.gguf"), "llama")
w.data_alignment = 64
w.add_uint32("general.alignment", 64)
w.add_name("omptensor-tiny")
w.add_uint8("t.u8", 200)
w.add_int8("t.i8", -5)
w.add_uint16("t.u16", 60000)
w.add_int16("t.i16", -30000)
w.add_uint32("llama.context_length", 128)
w.add_int32("t.i32", -123456)
w.add_float32("llama.rope.freq_base", 10000.0)
w.add_bool("t.bool", True)
w.add_uint64("t.u64", 1 << 40)
w.add_int64("t.i64", -(1 << 40))
w.add_float64("t.f64", 0.1)
w.add_array("tokenizer.ggml.tokens", ["<s>", "</s>", "hello", "▁wor", "ld"])
w.add_array("t.ints", [3, 1, 4, 1, 5])
expect = {"metadata": {"general.architecture": "llama", "general.name": "omptensor-tiny", "general.alignment": 64,
                       "t.u8": 200, "t.i8": -5, "t.u16": 60000, "t.i16": -30000, "llama.context_length": 128,
                       "t.i32": -123456, "llama.rope.freq_base": 10000.0, "t.bool": 1, "t.u64": 1 << 40,
                       "t.i64": -(1 << 40), "t.f64": 0.1,
                       "tokenizer.ggml.tokens": ["<s>", "</s>", "hello", "▁wor", "ld"]},
          "tensors": []}
for name, shape, t in TENSORS:
    x = rng.standard_normal(shape).astype(np.float32)
    if t == T.F32:
        data, deq = x, x
    elif t == T.F16:
        data = x.astype(np.float16)
        deq = data.astype(np.float32)
    else:
        data = quants.quantize(x, t)
        deq = quants.dequantize(data, t)
    w.add_tensor(name, data, raw_dtype=t)
    expect["tensors"].append({"name": name, "shape": list(shape), "type": t.name,
                              "values": [float(v) for v in np.asarray(deq, dtype=np.float32).reshape(-1)]})
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
with open(os.path.join(out, "tiny.json"), "w") as f:
    json.dump(expect, f, indent=1)


# ---- hand-written files with one defect each ---------------------------------------
def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def kv_u32(k, v):
    return s(k) + struct.pack("<II", 4, v)


def write(name, kvs, tinfos, data=b"", align=32, version=3, magic=b"GGUF", cut=None):
    h = magic + struct.pack("<IQQ", version, len(tinfos), len(kvs)) + b"".join(kvs)
    for tn, dims, typ, off in tinfos:
        h += s(tn) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        h += struct.pack("<IQ", typ, off)
    h += b"\0" * ((-len(h)) % align)
    b = h + data
    if cut is not None:
        b = b[:cut]
    with open(os.path.join(out, name), "wb") as f:
        f.write(b)


ok_t = [("w", [32, 2], 0, 0)]          # F32 [2, 32]: 256 bytes
ok_d = b"\0" * 256
BAD = {
    "bad-magic.gguf": dict(kvs=[], tinfos=ok_t, data=ok_d, magic=b"GGUG"),
    "bad-version.gguf": dict(kvs=[], tinfos=ok_t, data=ok_d, version=7),
    "bad-alignment.gguf": dict(kvs=[kv_u32("general.alignment", 48)], tinfos=ok_t, data=ok_d),
    "bad-offset.gguf": dict(kvs=[], tinfos=[("w", [32, 2], 0, 4096)], data=ok_d),
    "bad-unaligned.gguf": dict(kvs=[], tinfos=[("w", [32, 2], 0, 8)], data=ok_d + b"\0" * 8),
    "bad-type.gguf": dict(kvs=[], tinfos=[("w", [32, 2], 99, 0)], data=ok_d),
    "bad-blocks.gguf": dict(kvs=[], tinfos=[("w", [48, 2], 2, 0)], data=ok_d),      # Q4_0, 48 not whole blocks
    "bad-dup.gguf": dict(kvs=[], tinfos=[("w", [32, 2], 0, 0), ("w", [32, 2], 0, 256)], data=ok_d * 2),
    "bad-truncated.gguf": dict(kvs=[], tinfos=ok_t, data=ok_d, cut=200),
    "bad-dims.gguf": dict(kvs=[], tinfos=[("w", [32, 0], 0, 0)], data=ok_d),
}
for n, a in BAD.items():
    write(n, **a)
print(f"wrote {out}: tiny.gguf, tiny.json, " + ", ".join(BAD))


# ---- random blocks of each type, dequantized by gguf.quants (blocks.json) ----------
def f16_bytes(vals):
    return np.asarray(vals, dtype=np.float16).view(np.uint8)


BLOCKS = [(T.Q8_0, 34, 32, [(0, 2)]), (T.Q4_0, 18, 32, [(0, 2)]),
          (T.Q4_K, 144, 256, [(0, 2), (2, 4)]), (T.Q6_K, 210, 256, [(208, 210)])]
blocks = []
for t, size, per, f16_at in BLOCKS:
    nb = 6
    raw = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    for a, b in f16_at:        # scales: finite f16 values of either sign
        raw[:, a:b] = f16_bytes(rng.standard_normal(nb) * 0.05).reshape(nb, 2)
    deq = quants.dequantize(raw, t).astype(np.float32).reshape(-1)
    blocks.append({"type": t.name, "ggml_type": int(t), "n": nb * per, "hex": raw.tobytes().hex(),
                   "values": [float(v) for v in deq]})
with open(os.path.join(out, "blocks.json"), "w") as f:
    json.dump(blocks, f)
print("wrote blocks.json:", ", ".join(b["type"] for b in blocks))
