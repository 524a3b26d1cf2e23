#!/usr/bin/env python3
"""Reference dumps of a GGUF's own weights: llama.cpp's gguf-py (its GGUFReader and quants.dequantize, NumPy) turns
every tensor into float32, the tensors get their Hugging Face names back, and make_dumps.py records transformers in
float32 on that checkpoint (the config.json is the source checkpoint's, the one the GGUF was converted from).

The manifests then name the checkpoint decodiff makes of the same GGUF (`--model FILE.gguf`: its config_sha256 and
weights_sha256, given on the command line) and record the GGUF's matrix types in producer.quantization, so
`decodiff compare DUMP --model FILE.gguf` runs decodiff's engine on the GGUF and judges it against transformers on
ggml's dequantization of the same blocks.

Usage (torch + transformers: the GPU machine):
  make_gguf_dumps.py --gguf-py DIR --source CHECKPOINT_DIR --out DIR  FILE.gguf:NAME:CONFIG_SHA256:WEIGHTS_SHA256 ...
"""
import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

GLOBAL = {
    "token_embd.weight": "embed_tokens.weight", "output_norm.weight": "norm.weight",
    "per_layer_token_embd.weight": "embed_tokens_per_layer.weight",
    "per_layer_model_proj.weight": "per_layer_model_projection.weight",
    "per_layer_proj_norm.weight": "per_layer_projection_norm.weight",
}
PER_LAYER = {
    "attn_norm.weight": "input_layernorm.weight", "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ffn_norm.weight": "pre_feedforward_layernorm.weight", "post_ffw_norm.weight": "post_feedforward_layernorm.weight",
    "pre_ffw_norm_2.weight": "pre_feedforward_layernorm_2.weight", "post_ffw_norm_1.weight": "post_feedforward_layernorm_1.weight",
    "post_ffw_norm_2.weight": "post_feedforward_layernorm_2.weight", "layer_output_scale.weight": "layer_scalar",
    "attn_q.weight": "self_attn.q_proj.weight", "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight", "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q_norm.weight": "self_attn.q_norm.weight", "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight", "ffn_up.weight": "mlp.up_proj.weight", "ffn_down.weight": "mlp.down_proj.weight",
    "inp_gate.weight": "per_layer_input_gate.weight", "proj.weight": "per_layer_projection.weight",
    "post_norm.weight": "post_per_layer_input_norm.weight", "ffn_gate_inp.weight": "router.proj.weight",
    "ffn_gate_inp.scale": "router.scale", "ffn_down_exps.scale": "router.per_expert_scale",
    "ffn_gate_up_exps.weight": "experts.gate_up_proj", "ffn_down_exps.weight": "experts.down_proj",
}


def hf_name(g):
    if g == "output.weight":
        return "lm_head.weight"
    if g in GLOBAL:
        return "model." + GLOBAL[g]
    if g.startswith("blk."):
        _, i, rest = g.split(".", 2)
        return f"model.layers.{int(i)}." + PER_LAYER[rest]
    raise KeyError(g)


def plain_checkpoint(gguf_path, source, out_dir):
    from gguf import GGUFReader
    from gguf.quants import dequantize
    from make_mlx_checkpoints import write_safetensors
    r = GGUFReader(gguf_path)
    tensors, types = {}, {}
    for t in r.tensors:
        if t.name == "rope_freqs.weight":
            continue
        w = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
        shape = [int(d) for d in reversed(list(t.shape))]
        tensors[hf_name(t.name)] = ("F32", w.reshape(shape))
        if len(t.shape) >= 2:
            types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    os.makedirs(out_dir, exist_ok=True)
    write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors, {"format": "pt"})
    for f in ("config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if os.path.exists(os.path.join(source, f)):
            shutil.copy(os.path.join(source, f), os.path.join(out_dir, f))
    return dict(sorted(types.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("ggufs", nargs="+")
    args = ap.parse_args()
    sys.path.insert(0, args.gguf_py)
    sys.path.insert(0, os.path.join(REPO, "checkpoints"))
    sys.path.insert(0, HERE)
    import make_dumps as md
    import torch
    md.install_attention("sdpa")
    torch.set_num_threads(1)
    for spec in args.ggufs:
        path, name, config_sha, weights_sha = spec.split(":")
        with tempfile.TemporaryDirectory() as tmp:
            plain = os.path.join(tmp, name)
            types = plain_checkpoint(path, args.source, plain)
            print(f"{name}: matrix types {types}")
            for case, pkey, n in (("short", "short", 8), ("long", "long", 20)):
                prompt = md.encode_prompt(args.source, md.PROMPTS[pkey])
                out = os.path.join(args.out, name, case)
                md.make_dump(plain, out, prompt, n, dtype="float32", attn="sdpa",
                             extra={"case": case, "prompt_text": "<bos>" + md.PROMPTS[pkey]})
                mf = os.path.join(out, "manifest.json")
                m = json.load(open(mf))
                m["model"]["config_sha256"] = config_sha
                m["model"]["weights_sha256"] = weights_sha
                m["model"]["checkpoint"] = name
                m["producer"]["quantization"] = {"format": "gguf", "mode": "+".join(types),
                                                 "overrides": {k: f"{v} matrices" for k, v in types.items()}}
                m["producer"]["weights"] = (f"{os.path.basename(path)} dequantized to fp32 by llama.cpp's gguf-py "
                                            "(quants.dequantize), config.json of the source checkpoint")
                with open(mf, "w", encoding="utf-8") as f:
                    json.dump(m, f, ensure_ascii=False, indent=1)
                    f.write("\n")
    if md.VERIFY_FAILURES:
        print(f"VERIFICATION FAILURES: {md.VERIFY_FAILURES}")
        sys.exit(1)


if __name__ == "__main__":
    main()
