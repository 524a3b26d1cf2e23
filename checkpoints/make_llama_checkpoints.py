#!/usr/bin/env python3
"""Makes decodiff's two tiny Llama-family checkpoints with nothing but Python 3 and NumPy (no torch, no transformers).

  make_llama_checkpoints.py [--out checkpoints] [--seed N]

  llama-tiny   model_type llama (Llama 3.x geometry in miniature): GQA (4 query heads, 2 KV heads, head_dim 16),
               3 layers, attention_bias and mlp_bias on (so the bias paths are exercised), an untied lm_head, and
               the legacy Hub form of RoPE that released Llama 3.x configs use: top-level rope_theta plus a
               rope_scaling block of rope_type "llama3" whose original_max_position_embeddings (64) puts the 8
               frequencies of a head in all three of its bands: wavelength under 16 kept (1), between 16 and 64
               smoothed (2), over 64 divided by factor (5).
  qwen3-tiny   model_type qwen3: per-head q_norm / k_norm RMSNorm before RoPE, head_dim 24 (not hidden/heads = 16,
               so head_dim must come from the config), 2 layers, tied embeddings (no lm_head.weight in the file),
               RoPE in transformers 5's form (rope_parameters with rope_type "default").

Weights are float32 (safetensors written by hand, sorted keys, header padded to 8 bytes, as the other make scripts
do), random but well conditioned: every matrix N(0, 1/fan_in), embeddings N(0, 1), the head N(0, (3/sqrt(H))^2)
so logits are a few units, biases N(0, 0.1^2), every RMSNorm weight U(0.5, 1.5) (Llama's norms multiply by w
itself, so a 1+w bug cannot hide behind weights of 1). The bundled tokenizer (checkpoints/tokenizer, vocab 1024)
is copied in, as qwen35-tiny has it.
"""
import argparse
import hashlib
import json
import os
import shutil
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB = 1024

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
    "hidden_act": "silu", "rms_norm_eps": 1e-5, "max_position_embeddings": 256,
    "attention_bias": True, "attention_dropout": 0.0, "mlp_bias": True, "pretraining_tp": 1,
    "rope_theta": 10000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 64},
    "tie_word_embeddings": False, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    "initializer_range": 0.02, "use_cache": True, "dtype": "float32", "transformers_version": "5.17.0",
}

QWEN3 = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 80, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 24,
    "hidden_act": "silu", "rms_norm_eps": 1e-6, "max_position_embeddings": 512,
    "attention_bias": False, "attention_dropout": 0.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "use_sliding_window": False, "sliding_window": None, "max_window_layers": 2,
    "layer_types": ["full_attention", "full_attention"],
    "tie_word_embeddings": True, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0,
    "initializer_range": 0.02, "use_cache": True, "dtype": "float32", "transformers_version": "5.17.0",
}


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def tensors_of(cfg, rng):
    H, I, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    nh, nkv, d, V = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["vocab_size"]
    qwen3 = cfg["model_type"] == "qwen3"

    def linear(out, inp):
        return rng.standard_normal((out, inp)) / np.sqrt(inp)

    def norm(n):
        return rng.uniform(0.5, 1.5, n)

    def bias(n):
        return rng.standard_normal(n) * 0.1

    t = {"model.embed_tokens.weight": rng.standard_normal((V, H)), "model.norm.weight": norm(H)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = norm(H)
        t[p + "post_attention_layernorm.weight"] = norm(H)
        a = p + "self_attn."
        for name, out in (("q_proj", nh * d), ("k_proj", nkv * d), ("v_proj", nkv * d)):
            t[a + name + ".weight"] = linear(out, H)
            if cfg.get("attention_bias"):
                t[a + name + ".bias"] = bias(out)
        t[a + "o_proj.weight"] = linear(H, nh * d)
        if cfg.get("attention_bias"):
            t[a + "o_proj.bias"] = bias(H)
        if qwen3:
            t[a + "q_norm.weight"] = norm(d)
            t[a + "k_norm.weight"] = norm(d)
        m = p + "mlp."
        for name, out, inp in (("gate_proj", I, H), ("up_proj", I, H), ("down_proj", H, I)):
            t[m + name + ".weight"] = linear(out, inp)
            if cfg.get("mlp_bias"):
                t[m + name + ".bias"] = bias(out)
    if not cfg["tie_word_embeddings"]:
        t["lm_head.weight"] = rng.standard_normal((V, H)) * (3.0 / np.sqrt(H))
    else:  # the tied head is the embedding: scale it so logits are a few units, as an untied head's are
        t["model.embed_tokens.weight"] *= 3.0 / np.sqrt(H)
    return {k: v.astype(np.float32) for k, v in t.items()}


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=HERE)
    ap.add_argument("--seed", type=int, default=20260601)
    args = ap.parse_args()
    for k, (name, cfg) in enumerate((("llama-tiny", LLAMA), ("qwen3-tiny", QWEN3))):
        out = os.path.join(args.out, name)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.makedirs(out)
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(cfg, f, indent=2)
            f.write("\n")
        tensors = tensors_of(cfg, np.random.default_rng(args.seed + k))
        write_safetensors(os.path.join(out, "model.safetensors"), tensors)
        gen = {"bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0, "transformers_version": "5.17.0"}
        with open(os.path.join(out, "generation_config.json"), "w") as f:
            json.dump(gen, f, indent=2)
            f.write("\n")
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(HERE, "tokenizer", fn), os.path.join(out, fn))
        n = sum(v.size for v in tensors.values())
        print(f"{name}: {len(tensors)} tensors, {n} parameters, config {sha256(os.path.join(out, 'config.json'))}, "
              f"weights {sha256(os.path.join(out, 'model.safetensors'))}")


if __name__ == "__main__":
    main()
