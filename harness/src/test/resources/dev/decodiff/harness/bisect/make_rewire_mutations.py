"""Synthetic mutations for bisect's rewiring tests, computed with NumPy alone (no decodiff code).

From a transformers reference dump's step 0 and the checkpoint's weights, recomputes one layer-0 cell under a
porting bug — the MoE block's routing and scales, the per-layer inputs' scales, the per-layer input branch — and
writes each mutated tensor, named by the bug, to rewire-mutations-<checkpoint>.safetensors beside this script.
Run from the repository root: python3 <this script>
"""
import json
import os
import struct

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        raw = data[s:e]
        if v["dtype"] == "F32":
            a = np.frombuffer(raw, dtype=np.float32)
        elif v["dtype"] == "BF16":
            a = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(v["dtype"])
        out[k] = a.reshape(v["shape"]).astype(np.float64)
    return out


def write_safetensors(path, tensors):
    header, blobs, off = {}, [], 0
    for k, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms(x, w=None, eps=1e-6):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y if w is None else y * w


def gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def load(ck):
    root = os.getcwd()
    w = read_safetensors(os.path.join(root, "checkpoints", ck, "model.safetensors"))
    cfg = json.load(open(os.path.join(root, "checkpoints", ck, "config.json")))
    cfg = cfg.get("text_config", cfg)
    case = os.path.join(root, "reference-dumps", ck, "short")
    m = json.load(open(os.path.join(case, "manifest.json")))
    st = m["steps"][0]
    d = read_safetensors(os.path.join(case, st["file"]))
    tokens = np.array(m["tokens"][st["start"]:st["start"] + st["length"]])
    return w, cfg, d, tokens


def residual_after_attention(w, cfg, d):
    eps = cfg["rms_norm_eps"]
    x = d["embed"]
    a = d["layers.0.attn.out"].reshape(x.shape[0], -1) @ w["model.layers.0.self_attn.o_proj.weight"].T
    return x + rms(a, w["model.layers.0.post_attention_layernorm.weight"], eps)


def moe(w, cfg, r, renormalise=True, scale="id", router_normed=True):
    eps, H, K = cfg["rms_norm_eps"], cfg["hidden_size"], cfg["top_k_experts"]
    p = "model.layers.0."
    z = (rms(r, None, eps) if router_normed else r) * w[p + "router.scale"] * H ** -0.5
    probs = softmax(z @ w[p + "router.proj.weight"].T)
    u = rms(r, w[p + "pre_feedforward_layernorm_2.weight"], eps)
    pes = w[p + "router.per_expert_scale"]
    gate_up, down = w[p + "experts.gate_up_proj"], w[p + "experts.down_proj"]
    Im = down.shape[2]
    out = np.zeros_like(r)
    for t in range(r.shape[0]):
        top = sorted(range(len(probs[t])), key=lambda e: (-probs[t][e], e))[:K]
        total = sum(probs[t][e] for e in top) if renormalise else 1.0
        for rank, e in enumerate(top):
            s = {"id": pes[e], "rank": pes[rank], "none": 1.0, "twice": pes[e] ** 2}[scale]
            gu = gate_up[e] @ u[t]
            y = down[e] @ (gelu_tanh(gu[:Im]) * gu[Im:])
            out[t] += probs[t][e] / total * s * y
    return out


def ple(w, cfg, d, tokens, table_scale=True, proj_scale=True, combine=True):
    H, P, L, eps = cfg["hidden_size"], cfg["hidden_size_per_layer_input"], cfg["num_hidden_layers"], cfg["rms_norm_eps"]
    T = len(tokens)
    tok = w["model.embed_tokens_per_layer.weight"][tokens].reshape(T, L, P) * (np.sqrt(P) if table_scale else 1.0)
    proj = (d["embed"] @ w["model.per_layer_model_projection.weight"].T).reshape(T, L, P) * (H ** -0.5 if proj_scale else 1.0)
    proj = rms(proj, w["model.per_layer_projection_norm.weight"], eps)
    return (proj + tok) * (2 ** -0.5 if combine else 1.0)


def layer0_out(w, cfg, d, scalar_first=False, slice_layer_major=False, branch_before_mlp=False):
    eps = cfg["rms_norm_eps"]
    p = "model.layers.0."
    r = residual_after_attention(w, cfg, d)
    x = r + rms(d["layers.0.mlp.out"], w[p + "post_feedforward_layernorm.weight"], eps)
    s = w[p + "layer_scalar"][0]
    if scalar_first:
        x = x * s
    T, L, P = d["ple"].shape
    pl = d["ple"].reshape(T * L, P)[0:T] if slice_layer_major else d["ple"][:, 0, :]
    g = gelu_tanh((r if branch_before_mlp else x) @ w[p + "per_layer_input_gate.weight"].T) * pl
    x = x + rms(g @ w[p + "per_layer_projection.weight"].T, w[p + "post_per_layer_input_norm.weight"], eps)
    return x if scalar_first else x * s


def main():
    w, cfg, d, tokens = load("gemma4-tiny-moe")
    r = residual_after_attention(w, cfg, d)
    standard = moe(w, cfg, r)
    rel = np.linalg.norm(standard - d["layers.0.moe.out"]) / np.linalg.norm(d["layers.0.moe.out"])
    assert rel < 1e-4, f"the standard MoE does not reproduce the reference (rel L2 {rel:.2e})"
    write_safetensors(os.path.join(HERE, "rewire-mutations-gemma4-tiny-moe.safetensors"), {
        "layers.0.moe.out/routing-not-renormalised": moe(w, cfg, r, renormalise=False),
        "layers.0.moe.out/expert-scale-by-rank": moe(w, cfg, r, scale="rank"),
        "layers.0.moe.out/expert-scale-missing": moe(w, cfg, r, scale="none"),
        "layers.0.moe.out/expert-scale-twice": moe(w, cfg, r, scale="twice"),
        "layers.0.moe.out/router-unnormed": moe(w, cfg, r, router_normed=False),
    })
    w, cfg, d, tokens = load("gemma4-tiny-ple")
    rel = np.linalg.norm(ple(w, cfg, d, tokens) - d["ple"]) / np.linalg.norm(d["ple"])
    assert rel < 1e-4, f"the standard per-layer inputs do not reproduce the reference (rel L2 {rel:.2e})"
    rel = np.linalg.norm(layer0_out(w, cfg, d) - d["layers.0.out"]) / np.linalg.norm(d["layers.0.out"])
    assert rel < 1e-4, f"the standard layer out does not reproduce the reference (rel L2 {rel:.2e})"
    write_safetensors(os.path.join(HERE, "rewire-mutations-gemma4-tiny-ple.safetensors"), {
        "ple/table-scale-missing": ple(w, cfg, d, tokens, table_scale=False),
        "ple/projection-scale-missing": ple(w, cfg, d, tokens, proj_scale=False),
        "ple/combine-missing": ple(w, cfg, d, tokens, combine=False),
        "layers.0.out/layer-scalar-before-ple": layer0_out(w, cfg, d, scalar_first=True),
        "layers.0.out/slice-layer-major": layer0_out(w, cfg, d, slice_layer_major=True),
        "layers.0.out/branch-before-mlp": layer0_out(w, cfg, d, branch_before_mlp=True),
    })


if __name__ == "__main__":
    main()
