"""The published quantized-checkpoint formats, read (and, for the tests' malformed folders,
written) with numpy from their descriptions, not from gpuopt's code: used by test_llm_quant.py.

  GPTQ  qweight int32 [K*b/32, N]: input row k = i*(32/b) + j sits in bits b*j of qweight[i];
        qzeros int32 [G, N*b/32] packed the same way along N, holding zero - 1 (checkpoint_format
        "gptq"); scales [G, N]; W[n, k] = scales[g, n] * (q[k, n] - zero[g, n]), g = g_idx[k].
  AWQ   qweight int32 [K, N/8], qzeros [G, N/8]: the 8 nibbles of a word hold the columns
        0 2 4 6 1 3 5 7 of its group of 8; W = scales * (q - zero), g = k // group_size.
  FP8   weight e4m3 [N, K] (sign, 4 exponent bits biased by 7, 3 mantissa bits, no infinities),
        weight_scale [N, 1] or [1]: W = e4m3 * scale.
"""
import json
import struct

import numpy as np

ST_DTYPES = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "F8_E4M3": np.uint8, "I64": np.int64}


# ---- safetensors, read and written by hand (numpy has no fp8 dtype) -------------------------------

def st_read(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out, dtypes = {}, {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = np.frombuffer(data[base + b:base + end], dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"]).copy()
        dtypes[name] = e["dtype"]
    return out, dtypes


def st_write(path, tensors, dtypes):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        b = np.ascontiguousarray(tensors[name]).tobytes()
        header[name] = {"dtype": dtypes[name], "shape": list(tensors[name].shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


# ---- the formats, from their descriptions --------------------------------------------------------

def unpack_rows(w, bits):  # [R, C] int32 -> [R * 32/bits, C], value j of word i at row i*p + j
    p, mask = 32 // bits, (1 << bits) - 1
    u = w.view(np.uint32)
    return np.stack([(u >> (bits * j)) & mask for j in range(p)], axis=1).reshape(-1, w.shape[1]).astype(np.int64)


def unpack_cols(w, bits):  # [R, C] int32 -> [R, C * 32/bits], value j of word c at column c*p + j
    p, mask = 32 // bits, (1 << bits) - 1
    u = w.view(np.uint32)
    return np.stack([(u >> (bits * j)) & mask for j in range(p)], axis=2).reshape(w.shape[0], -1).astype(np.int64)


def gptq_weight(T, base, bits, zero_minus_one=True):
    q = unpack_rows(T[base + ".qweight"], bits)  # [K, N]
    z = unpack_cols(T[base + ".qzeros"], bits)   # [G, N]
    if zero_minus_one:
        z = (z + 1) & ((1 << bits) - 1)
    s = T[base + ".scales"].astype(np.float32)
    g = T[base + ".g_idx"]
    w = s[g] * (q - z[g]).astype(np.float32)      # [K, N], f32 as the loaders compute it
    return w.T


AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble j holds column AWQ_ORDER[j] of its 8


def awq_unpack(w):
    nib = unpack_cols(w, 4).reshape(w.shape[0], -1, 8)  # [R, C, nibble]
    out = np.empty_like(nib)
    out[:, :, AWQ_ORDER] = nib
    return out.reshape(w.shape[0], -1)


def awq_weight(T, base, group):
    q, z = awq_unpack(T[base + ".qweight"]), awq_unpack(T[base + ".qzeros"])  # [K, N], [G, N]
    g = np.arange(q.shape[0]) // group
    s = T[base + ".scales"].astype(np.float32)
    return (s[g] * (q - z[g]).astype(np.float32)).T


def e4m3_table():
    v = np.zeros(256)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        x = m / 8 * 2.0 ** -6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        v[b] = np.nan if (e == 15 and m == 7) else (-x if s else x)
    return v


E4M3 = e4m3_table()


def fp8_weight(T, base):
    return (E4M3[T[base + ".weight"]].astype(np.float32) * T[base + ".weight_scale"].astype(np.float32).reshape(-1, 1))


def rtn_gptq(w, bits, group, sym):
    """AutoGPTQ's round-to-nearest (Quantizer.find_params), scales rounded to f16 first."""
    N, K = w.shape
    group = K if group == -1 else group
    maxq = 2 ** bits - 1
    g = w.reshape(N, K // group, group).astype(np.float32)
    lo, hi = np.minimum(g.min(-1), 0), np.maximum(g.max(-1), 0)
    if sym:
        hi = np.maximum(-lo, hi)
        lo = -hi
    both0 = (lo == 0) & (hi == 0)
    lo, hi = np.where(both0, -1, lo), np.where(both0, 1, hi)
    scale = ((hi - lo) / maxq).astype(np.float32).astype(np.float16).astype(np.float32)
    zero = np.full_like(scale, (maxq + 1) / 2) if sym else np.clip(np.round(-lo / scale), 0, maxq)
    q = np.clip(np.round(g / scale[..., None]) + zero[..., None], 0, maxq)
    return (scale[..., None] * (q - zero[..., None])).astype(np.float32).reshape(N, K)
