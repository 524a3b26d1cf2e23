#!/usr/bin/env python3
"""MLX-layout quantized checkpoints from the bundled ones, with NumPy only (no MLX, no torch).

What MLX (mlx-lm / mlx-vlm) writes for a Gemma 4 model, reproduced from its documented behaviour:
  * tensors under "language_model.model." (the multimodal class's layout; media towers would sit at the root);
  * config.json of model_type "gemma4" with the text model's config as "text_config", stub "vision_config" /
    "audio_config", and "quantization" (also copied to "quantization_config"): {"group_size", "bits", "mode",
    "<module path>": {"group_size", "bits"}} -- the per-module entries are the per-tensor overrides;
  * every Linear / Embedding weight whose row length the group size divides is quantized (affine): per group of
    group_size consecutive columns a scale and a bias (stored in the model's dtype, bf16), codes q in [0, 2^bits-1]
    with w = scale * q + bias, packed into uint32 as one little-endian bit stream per row (code j at bits
    [j*bits, (j+1)*bits) of the row's bytes; 3-, 5- and 6-bit codes cross byte and word boundaries);
    "M.weight" becomes the packed uint32 tensor [rows, cols*bits/32], "M.scales" and "M.biases" [rows, cols/group].
  * other tensors (norms, layer_scalar, rows the group does not divide) stay bf16.
  * MoE experts in mlx-lm's SwitchGLU layout: Hugging Face's fused "experts.gate_up_proj" [E, 2*I, H] split into
    "experts.switch_glu.gate_proj.weight" and "...up_proj.weight" [E, I, H] (the first and second half of each
    expert's rows), "experts.down_proj" [E, H, I] renamed "experts.switch_glu.down_proj.weight"; these 3-D weights
    are quantized like the 2-D ones (per expert row), codes [E, rows, cols*bits/32], scales/biases [E, rows, cols/group].

What mlx-lm writes for a Qwen3.5 model (its qwen3_5 / qwen3_5_moe sanitize, applied before saving):
  * the causal conv's kernel as [C, K, 1] (transformers: [C, 1, K]); mlx-lm tells a converted file by this shape;
  * the +1 of the zero-centred RMSNorms folded into their weights (input_layernorm, post_attention_layernorm, the final
    norm, q_norm, k_norm; not linear_attn.norm), computed in the stored dtype, because MLX's RMSNorm multiplies by w;
  * MoE experts stacked as "mlp.switch_mlp.{gate,up,down}_proj.weight" [E, I, H] / [E, H, I]; with quantization the
    router ("mlp.gate") and "mlp.shared_expert_gate" in 8 bits, group 64, where 64 divides their rows;
  * media towers dropped.

Usage:
  make_mlx_checkpoints.py models          # writes checkpoints/gemma4-tiny-mlx4, -mlx8, gemma4-tiny-ple-mlx4,
                                          # gemma4-tiny-moe-mlx4, qwen35-tiny-mlx-lm, qwen35-tiny-moe-mlx-lm
  make_mlx_checkpoints.py convert SRC OUT [--bits 4] [--group-size 64] [--dtype float32]
                                          # any float Gemma 4 or Qwen3.5 folder in the MLX layout (--bits 0: not
                                          # quantized, as mlx_lm.convert without -q; --dtype float32: every float
                                          # tensor stored in fp32, so the folded norms lose nothing)
  make_mlx_checkpoints.py packing OUT     # a fixture of every bits x group size: packed, scales, biases, codes,
                                          # dequantized (for the engine's unit test)
  make_mlx_checkpoints.py dequantize MLX_DIR OUT_DIR
                                          # the plain fp32 Gemma4ForCausalLM checkpoint of MLX_DIR's weights
  make_mlx_checkpoints.py references MLX_DIR... --out DIR
                                          # (needs torch + transformers: the device) dequantize, then
                                          # reference-dumps/make_dumps.py on the fp32 weights; the manifests name
                                          # the MLX checkpoint (its hashes) and record its quantization
"""
import argparse
import hashlib
import json
import mmap
import os
import shutil
import struct
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

# (source checkpoint, output name, default bits, group size, {module below the text prefix: (bits, group)})
MODELS = [
    ("gemma4-tiny", "gemma4-tiny-mlx4", 4, 64, {"layers.0.mlp.down_proj": (8, 64)}),
    ("gemma4-tiny", "gemma4-tiny-mlx8", 8, 64, {"layers.2.self_attn.q_proj": (4, 32)}),
    ("gemma4-tiny-ple", "gemma4-tiny-ple-mlx4", 4, 64, {"layers.4.mlp.gate_proj": (8, 128)}),
    # the router in 8 bits, as mixed-precision MoE conversions keep it
    ("gemma4-tiny-moe", "gemma4-tiny-moe-mlx4", 4, 64, {"layers.1.router.proj": (8, 64)}),
    # mlx-lm's Qwen3.5 layout, unquantized and in fp32 (the folded norms exact): the same models as their sources
    ("qwen35-tiny", "qwen35-tiny-mlx-lm", 0, 64, {}, "float32"),
    ("qwen35-tiny-moe", "qwen35-tiny-moe-mlx-lm", 0, 64, {}, "float32"),
]
GLU = ".experts.switch_glu."

PREFIX = "language_model.model."

# ------------------------------------------------------------------------------------------------------------------
# safetensors, bf16
# ------------------------------------------------------------------------------------------------------------------

NP = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "U32": np.uint32, "I32": np.int32, "I64": np.int64}


def read_safetensors(path):
    """The tensors as read-only views of the file, mapped (a 9 GB checkpoint is not read into memory at once)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        b, e = t["data_offsets"]
        count = (e - b) // np.dtype(NP[t["dtype"]]).itemsize
        out[name] = (t["dtype"], np.frombuffer(data, dtype=NP[t["dtype"]], count=count, offset=8 + n + b).reshape(t["shape"]))
    return out


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dtype, a = tensors[name]
        raw = np.ascontiguousarray(a, dtype=NP[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x):
    """Round to nearest even, as torch's cast does (no NaNs here)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)


def as_f32(dtype, a):
    if dtype == "BF16":
        return bf16_to_f32(a)
    if dtype in ("F32", "F16"):
        return a.astype(np.float32)
    raise ValueError(dtype)


# ------------------------------------------------------------------------------------------------------------------
# affine quantization
# ------------------------------------------------------------------------------------------------------------------

def pack(q, bits):
    """codes [..., cols] (< 2^bits) -> uint32 [..., cols*bits/32]: one little-endian bit stream per row."""
    lead, cols = q.shape[:-1], q.shape[-1]
    assert cols * bits % 32 == 0
    bitplanes = ((q[..., :, None].astype(np.uint32) >> np.arange(bits, dtype=np.uint32)) & 1).astype(np.uint8)
    packed = np.packbits(bitplanes.reshape(*lead, cols * bits), axis=-1, bitorder="little")
    return packed.view("<u4").reshape(*lead, cols * bits // 32)


def unpack(packed, bits, cols):
    lead = packed.shape[:-1]
    by = np.ascontiguousarray(packed).astype("<u4").view(np.uint8).reshape(*lead, -1)
    bitplanes = np.unpackbits(by, axis=-1, bitorder="little")[..., : cols * bits].reshape(*lead, cols, bits)
    return (bitplanes.astype(np.uint32) << np.arange(bits, dtype=np.uint32)).sum(axis=-1).astype(np.uint32)


def quantize(w, bits, group):
    """w fp32 [..., cols] -> (packed uint32, scales bf16, biases bf16, codes): min/max per group."""
    lead, cols = w.shape[:-1], w.shape[-1]
    g = w.reshape(*lead, cols // group, group)
    lo, hi = g.min(axis=-1), g.max(axis=-1)
    n = (1 << bits) - 1
    scale = f32_to_bf16(np.maximum((hi - lo) / n, 1e-7).astype(np.float32))
    bias = f32_to_bf16(lo)
    s, b = bf16_to_f32(scale)[..., None], bf16_to_f32(bias)[..., None]
    q = np.clip(np.rint((g - b) / s), 0, n).astype(np.uint32).reshape(*lead, cols)
    return pack(q, bits), scale, bias, q


def quantize_rows(dtype, a, bits, group, rows=16384):
    """quantize() of the stored tensor a (dtype) as fp32, a 2-D one a block of rows at a time (groups are independent:
    the same result, a fraction of the temporaries; a 262,144-row embedding otherwise needs several GB of them, and
    E2B's per-layer table 9 GB as fp32)."""
    if a.ndim != 2 or a.shape[0] <= rows:
        return quantize(as_f32(dtype, a), bits, group)[:3]
    parts = [quantize(as_f32(dtype, a[r:r + rows]), bits, group)[:3] for r in range(0, a.shape[0], rows)]
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(3))


def dequantize(packed, scales, biases, bits, group):
    """fp32: scale*q + bias per group (the product exact, one rounding in the sum)."""
    cols = packed.shape[-1] * 32 // bits
    q = unpack(packed, bits, cols).astype(np.float32)
    lead = q.shape[:-1]
    q = q.reshape(*lead, cols // group, group)
    s = scales.astype(np.float32)[..., None]
    b = biases.astype(np.float32)[..., None]
    return (s * q + b).astype(np.float32).reshape(*lead, cols)


def mlx_extract_bits(byts, bits):
    """MLX's byte formulas for the codes that cross bytes (3 bits: 8 codes in 3 bytes; 5: 8 in 5; 6: 4 in 3)."""
    b = [int(x) for x in byts]
    if bits == 3:
        return [b[0] & 7, (b[0] >> 3) & 7, (b[0] >> 6) | ((b[1] & 1) << 2), (b[1] >> 1) & 7, (b[1] >> 4) & 7,
                (b[1] >> 7) | ((b[2] & 3) << 1), (b[2] >> 2) & 7, b[2] >> 5]
    if bits == 5:
        return [b[0] & 31, (b[0] >> 5) | ((b[1] & 3) << 3), (b[1] >> 2) & 31, (b[1] >> 7) | ((b[2] & 15) << 1),
                (b[2] >> 4) | ((b[3] & 1) << 4), (b[3] >> 1) & 31, (b[3] >> 6) | ((b[4] & 7) << 2), b[4] >> 3]
    if bits == 6:
        return [b[0] & 63, (b[0] >> 6) | ((b[1] & 15) << 2), (b[1] >> 4) | ((b[2] & 3) << 4), b[2] >> 2]
    raise ValueError(bits)


def self_check():
    rng = np.random.default_rng(7)
    for bits in (2, 3, 4, 5, 6, 8):
        q = rng.integers(0, 1 << bits, size=(3, 128), dtype=np.uint32)
        p = pack(q, bits)
        assert p.dtype == np.dtype("<u4") and p.shape == (3, 128 * bits // 32)
        assert (unpack(p, bits, 128) == q).all(), bits
        if bits in (3, 5, 6):
            per, nbytes = (8, bits) if bits != 6 else (4, 3)
            by = p.view(np.uint8).reshape(3, -1)
            for r in range(3):
                for k in range(128 // per):
                    assert mlx_extract_bits(by[r, k * nbytes:(k + 1) * nbytes], bits) == list(q[r, k * per:(k + 1) * per]), bits
        elif bits in (2, 4, 8):
            first = p[0, 0]
            assert all(((int(first) >> (j * bits)) & ((1 << bits) - 1)) == q[0, j] for j in range(32 // bits))
        w = rng.normal(size=(4, 256)).astype(np.float32)
        pk, s, b, _ = quantize(w, bits, 64)
        err = np.abs(dequantize(pk, bf16_to_f32(s), bf16_to_f32(b), bits, 64) - w).max()
        assert err <= 1.01 * (bf16_to_f32(s).max() / 2 + np.abs(w).max() * 2 ** -8), (bits, err)


# ------------------------------------------------------------------------------------------------------------------
# commands
# ------------------------------------------------------------------------------------------------------------------

def sha256_file(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def quantizable(name, dtype, a):
    """Linear and Embedding weights: 2-D ".weight" tensors (norm weights are 1-D), and SwitchGLU's 3-D expert stacks."""
    return name.endswith(".weight") and (a.ndim == 2 or (a.ndim == 3 and (GLU in name or QWEN_SWITCH in name))) and dtype in ("BF16", "F32", "F16")


QWEN_SWITCH = ".mlp.switch_mlp."
QWEN_FOLDED_NORMS = (".input_layernorm.weight", ".post_attention_layernorm.weight", "model.norm.weight", ".q_norm.weight", ".k_norm.weight")


def qwen35_mlx_lm_layout(tensors):
    """transformers' Qwen3.5 tensors (under "model.") -> what mlx-lm's sanitize makes of them before it saves."""
    out = {}
    for key, (dtype, a) in tensors.items():
        if key.startswith("model.visual.") or ".mtp." in key or key.startswith("mtp."):
            continue
        if "conv1d.weight" in key and a.ndim == 3 and a.shape[-1] != 1:
            out[key] = (dtype, np.ascontiguousarray(np.swapaxes(a, 1, 2)))
        elif key.endswith(QWEN_FOLDED_NORMS) and a.ndim == 1:
            w = as_f32(dtype, a) + np.float32(1.0)  # one rounding to the stored dtype, as MLX's v + 1.0 does
            out[key] = (dtype, f32_to_bf16(w) if dtype == "BF16" else w.astype(NP[dtype]))
        elif key.endswith(".mlp.experts.gate_up_proj"):
            base = key[: -len(".mlp.experts.gate_up_proj")]
            half = a.shape[-2] // 2
            out[base + QWEN_SWITCH + "gate_proj.weight"] = (dtype, np.ascontiguousarray(a[..., :half, :]))
            out[base + QWEN_SWITCH + "up_proj.weight"] = (dtype, np.ascontiguousarray(a[..., half:, :]))
        elif key.endswith(".mlp.experts.down_proj"):
            out[key[: -len(".mlp.experts.down_proj")] + QWEN_SWITCH + "down_proj.weight"] = (dtype, a)
        else:
            out[key] = (dtype, a)
    return out


def to_switch_glu(tensors):
    """Hugging Face's fused experts -> mlx-lm's SwitchGLU names (gate and up: the halves of each expert's rows)."""
    out = {}
    for key, (dtype, a) in tensors.items():
        if key.endswith(".experts.gate_up_proj"):
            base = key[: -len(".experts.gate_up_proj")]
            half = a.shape[-2] // 2
            out[base + GLU + "gate_proj.weight"] = (dtype, np.ascontiguousarray(a[..., :half, :]))
            out[base + GLU + "up_proj.weight"] = (dtype, np.ascontiguousarray(a[..., half:, :]))
        elif key.endswith(".experts.down_proj"):
            out[key[: -len(".experts.down_proj")] + GLU + "down_proj.weight"] = (dtype, a)
        else:
            out[key] = (dtype, a)
    return out


def from_switch_glu(tensors):
    """The inverse, for a plain Gemma4ForCausalLM folder: gate and up concatenated back along the rows."""
    out = {}
    for key, v in tensors.items():
        if GLU in key:
            base = key[: key.index(GLU)]
            if key.endswith("gate_proj.weight"):
                g, u = v[1], tensors[base + GLU + "up_proj.weight"][1]
                out[base + ".experts.gate_up_proj"] = (v[0], np.concatenate([g, u], axis=-2))
            elif key.endswith("down_proj.weight"):
                out[base + ".experts.down_proj"] = v
        else:
            out[key] = v
    return out


def make_model(src, name, bits, group, overrides, dtype=None):
    convert(os.path.join(HERE, src), os.path.join(HERE, name), bits, group, overrides, dtype)


def convert(sdir, odir, bits, group, overrides, dtype=None):
    name = os.path.basename(os.path.normpath(odir))
    text_cfg = json.load(open(os.path.join(sdir, "config.json")))
    qwen = text_cfg.get("model_type", "").startswith("qwen3_5") or text_cfg.get("text_config", {}).get("model_type", "").startswith("qwen3_5")
    if "text_config" in text_cfg:  # a multimodal folder: its text model's config
        text_cfg = dict(text_cfg["text_config"], tie_word_embeddings=text_cfg.get("tie_word_embeddings", text_cfg["text_config"].get("tie_word_embeddings", False)))
    tensors = {}
    for f in sorted(os.listdir(sdir)):
        if f.endswith(".safetensors"):
            for k, v in read_safetensors(os.path.join(sdir, f)).items():
                tensors["model." + k[len("model.language_model."):] if k.startswith("model.language_model.") else k] = v
    if dtype == "float32":
        tensors = {k: (("F32", as_f32(d, a)) if d in ("BF16", "F16", "F32") else (d, a)) for k, (d, a) in tensors.items()}
    if qwen:
        tensors = qwen35_mlx_lm_layout(tensors)
        if bits and text_cfg.get("num_experts"):
            for key, (d, a) in tensors.items():  # mlx-lm's quant_predicate: router and shared-expert gate in 8 bits
                if key.endswith((".mlp.gate.weight", ".mlp.shared_expert_gate.weight")) and a.shape[-1] % 64 == 0:
                    overrides = dict(overrides, **{key[len("model."):-len(".weight")]: (8, 64)})
    else:
        tensors = to_switch_glu(tensors)
    quant = {"group_size": group, "bits": bits, "mode": "affine"}
    for m, (b, g) in overrides.items():
        quant[PREFIX + m] = {"group_size": g, "bits": b}
    out, n_q, n_float = {}, 0, 0
    for key, (dtype, a) in tensors.items():
        if key == "lm_head.weight":  # beside the text model, as mlx-lm names it; kept float here
            out["language_model.lm_head.weight"] = (dtype, a)
            n_float += 1
            continue
        assert key.startswith("model."), key
        mod = key[len("model."):]
        full = PREFIX + mod
        m = mod[: -len(".weight")] if mod.endswith(".weight") else None
        b, g = overrides.get(m, (bits, group))
        if bits and quantizable(key, dtype, a) and a.shape[-1] % g == 0:
            pk, s, bi = quantize_rows(dtype, a, b, g)
            out[full] = ("U32", pk)
            out[PREFIX + m + ".scales"] = ("BF16", s)
            out[PREFIX + m + ".biases"] = ("BF16", bi)
            n_q += 1
        else:
            assert m not in overrides, f"override {m} names a tensor that is not quantized"
            out[full] = (dtype, a)
            n_float += 1
    for m in overrides:
        assert "model." + m + ".weight" in tensors, f"override {m} names no tensor"
    if os.path.exists(odir):
        shutil.rmtree(odir)
    os.makedirs(odir)
    write_safetensors(os.path.join(odir, "model.safetensors"), out, {"format": "mlx"})
    if text_cfg.get("model_type", "").startswith("qwen3_5"):
        # Qwen3.5's multimodal wrapper (the text model under "language_model"), the tensors in mlx-lm's layout
        wrapper = text_cfg["model_type"][: -len("_text")] if text_cfg["model_type"].endswith("_text") else text_cfg["model_type"]
        cfg = {
            "architectures": ["Qwen3_5MoeForConditionalGeneration" if "moe" in wrapper else "Qwen3_5ForConditionalGeneration"],
            "model_type": wrapper,
            "text_config": text_cfg,
            "vision_config": {"model_type": wrapper},
            "tie_word_embeddings": text_cfg.get("tie_word_embeddings", False),
        }
        if bits:
            cfg["quantization"] = cfg["quantization_config"] = quant
    else:
        cfg = {
            "architectures": ["Gemma4ForConditionalGeneration"],
            "model_type": "gemma4",
            "text_config": text_cfg,
            "vision_config": {"model_type": "gemma4_vision"},
            "audio_config": {"model_type": "gemma4_audio"},
            "tie_word_embeddings": text_cfg.get("tie_word_embeddings", True),
            "quantization": quant,
            "quantization_config": quant,
        }
    with open(os.path.join(odir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(sdir, extra)):
            shutil.copy(os.path.join(sdir, extra), os.path.join(odir, extra))
    size = os.path.getsize(os.path.join(odir, "model.safetensors"))
    print(f"{name}: {n_q} tensors quantized ({bits}-bit, group {group}, overrides {overrides}), {n_float} kept, {size} bytes; "
          f"config_sha256 {sha256_file(os.path.join(odir, 'config.json'))}, weights_sha256 {sha256_file(os.path.join(odir, 'model.safetensors'))}")


def cmd_models(_):
    self_check()
    for m in MODELS:
        make_model(*m)


def cmd_convert(args):
    """Any float Gemma4ForCausalLM or Qwen3_5ForCausalLM folder (weights under "model.") -> the MLX layout at --bits / --group-size."""
    convert(args.src, args.out, args.bits, args.group_size, {}, args.dtype)


def cmd_packing(args):
    self_check()
    rng = np.random.default_rng(20260402)
    out = {}
    for bits in (2, 3, 4, 5, 6, 8):
        for group in (32, 64, 128):
            w = rng.normal(size=(3, 256)).astype(np.float32)
            pk, s, b, q = quantize(w, bits, group)
            k = f"b{bits}g{group}"
            out[k + ".weight"] = ("U32", pk)
            out[k + ".scales"] = ("BF16", s)
            out[k + ".biases"] = ("BF16", b)
            out[k + ".codes"] = ("I32", q.astype(np.int32))
            out[k + ".dequantized"] = ("F32", dequantize(pk, bf16_to_f32(s), bf16_to_f32(b), bits, group))
    write_safetensors(args.out, out)
    print(f"{args.out}: {len(out)} tensors")


def read_mlx(mlx_dir):
    cfg = json.load(open(os.path.join(mlx_dir, "config.json")))
    tensors = {}
    for f in sorted(os.listdir(mlx_dir)):
        if f.endswith(".safetensors"):
            tensors.update(read_safetensors(os.path.join(mlx_dir, f)))
    return cfg, tensors


def dequantized_tensors(cfg, tensors):
    q = cfg["quantization"]
    default = (q["bits"], q["group_size"])
    out = {}
    for key, (dtype, a) in tensors.items():
        if key.endswith(".scales") or key.endswith(".biases"):
            continue
        assert key.startswith(PREFIX), key
        m = key[: -len(".weight")] if key.endswith(".weight") else None
        if m is not None and m + ".scales" in tensors:
            o = q.get(m)
            bits, group = (o["bits"], o["group_size"]) if isinstance(o, dict) else default
            s = as_f32(*tensors[m + ".scales"])
            b = as_f32(*tensors[m + ".biases"])
            w = dequantize(a, s, b, bits, group)
        else:
            w = as_f32(dtype, a)
        out["model." + key[len(PREFIX):]] = ("F32", w)
    return from_switch_glu(out)


def cmd_dequantize(args):
    cfg, tensors = read_mlx(args.mlx_dir)
    write_plain(cfg, tensors, args.mlx_dir, args.out)


def write_plain(cfg, tensors, mlx_dir, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), dequantized_tensors(cfg, tensors), {"format": "pt"})
    text = dict(cfg["text_config"])
    text["architectures"] = ["Gemma4ForCausalLM"]
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(text, f, indent=2)
    for extra in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(mlx_dir, extra)):
            shutil.copy(os.path.join(mlx_dir, extra), os.path.join(out_dir, extra))


def cmd_references(args):
    sys.path.insert(0, os.path.join(REPO, "reference-dumps"))
    import make_dumps as md
    import torch
    md.install_attention("sdpa")
    torch.set_num_threads(1)
    cases = [("short", "short", 8), ("long", "long", 20)]
    for mlx_dir in args.mlx_dirs:
        mlx_dir = os.path.abspath(mlx_dir)
        name = os.path.basename(os.path.normpath(mlx_dir))
        cfg, tensors = read_mlx(mlx_dir)
        q = cfg["quantization"]
        overrides = {k: v for k, v in q.items() if k not in ("bits", "group_size", "mode")}
        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, name)
            write_plain(cfg, tensors, mlx_dir, plain)
            for case, pkey, n in cases:
                prompt = md.encode_prompt(mlx_dir, md.PROMPTS[pkey])
                out = os.path.join(args.out, name, case)
                md.make_dump(plain, out, prompt, n, dtype="float32", attn="sdpa",
                             extra={"case": case, "prompt_text": "<bos>" + md.PROMPTS[pkey]})
                mf = os.path.join(out, "manifest.json")
                manifest = json.load(open(mf))
                manifest["model"]["config_sha256"] = sha256_file(os.path.join(mlx_dir, "config.json"))
                manifest["model"]["weights_sha256"] = md.weights_sha256(mlx_dir)
                manifest["model"]["checkpoint"] = name
                manifest["producer"]["quantization"] = {
                    "format": "mlx", "mode": q.get("mode", "affine"), "bits": q["bits"], "group_size": q["group_size"],
                    "overrides": {k: (f"{v['bits']}-bit, group {v['group_size']}" if isinstance(v, dict) else
                                      ("not quantized" if v is False else "default")) for k, v in overrides.items()},
                }
                manifest["producer"]["weights"] = ("the MLX checkpoint's weights dequantized to fp32 (scale*q + bias) by "
                                                   "checkpoints/make_mlx_checkpoints.py with NumPy")
                with open(mf, "w", encoding="utf-8") as f:
                    json.dump(manifest, f, ensure_ascii=False, indent=1)
                    f.write("\n")
    if md.VERIFY_FAILURES:
        print(f"VERIFICATION FAILURES: {md.VERIFY_FAILURES}")
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("models")
    c = sub.add_parser("convert")
    c.add_argument("src")
    c.add_argument("out")
    c.add_argument("--bits", type=int, default=4, choices=[0, 2, 3, 4, 5, 6, 8])
    c.add_argument("--group-size", type=int, default=64, choices=[32, 64, 128])
    c.add_argument("--dtype", choices=["float32"], help="store every float tensor in fp32 (default: as the source)")
    p = sub.add_parser("packing")
    p.add_argument("out")
    d = sub.add_parser("dequantize")
    d.add_argument("mlx_dir")
    d.add_argument("out")
    r = sub.add_parser("references")
    r.add_argument("mlx_dirs", nargs="+")
    r.add_argument("--out", default=os.path.join(REPO, "reference-dumps"))
    args = ap.parse_args()
    {"models": cmd_models, "convert": cmd_convert, "packing": cmd_packing, "dequantize": cmd_dequantize, "references": cmd_references}[args.cmd](args)


if __name__ == "__main__":
    main()
