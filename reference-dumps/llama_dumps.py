#!/usr/bin/env python3
"""decodiff reference producer for the Llama family (llama, mistral, qwen3): transformers 5.17 -> decodiff dump v1.

The same dump format as make_dumps.py (docs/dump-format.md): one safetensors file per step, float32, batch axis
stripped. The checkpoint is loaded with transformers' own AutoModelForCausalLM.from_pretrained (strict: a missing or
unexpected tensor is refused), in float32 on the CPU, and run step by step through its DynamicCache.

Capture points and how they are taken (hooks on transformers' own modules; nothing is recomputed here):
  embed                          forward hook on model.embed_tokens -> [T, H]
  layers.i.attn.q                registered attention function: the query it is given, after q_norm (qwen3) and
                                 RoPE -> [T, nh, d]
  layers.i.attn.k / .v           the last T rows of the key / value it is given (what entered the cache this step:
                                 k after k_norm (qwen3) and RoPE) -> [T, nkv, d]
  layers.i.attn.k_read / .v_read every key / value it is given, the positions the last query reads (0..p) -> [p+1, nkv, d]
  layers.i.attn.out              forward pre-hook on o_proj: the heads concatenated, before o_proj -> [T, nh*d]
  layers.i.mlp.out               forward hook on layer.mlp (down_proj of silu(gate)*up) -> [T, H]
  layers.i.out                   forward hook on the decoder layer -> [T, H]
  final_norm, logits             forward hook on model.norm; the last position's logits -> [V]

Cases (prompt = <bos> + the text below, with the checkpoint's own tokenizer.json):
  short          a 23-token prompt, then 6 greedy decode steps (7 steps)
  continuation   teacher-forced steps of 12, 1, 1, 5, 1, 1 tokens: multi-token steps on a warm cache

Usage:
  llama_dumps.py all [--checkpoints DIR] [--out DIR] [--only NAME ...]
"""
import argparse
import glob
import json
import math
import os
import sys
import time

import numpy as np
import torch
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import make_dumps as md  # noqa: E402  (StepFile, hashes, manifest writing)

ATTN = "decodiff_llama"
TEXT = "The old lighthouse keeper climbed the stairs every evening at the same hour. There were"
CONTINUATION = [12, 1, 1, 5, 1, 1]
CHECKPOINTS = ["llama-tiny", "qwen3-tiny"]


class Recorder:
    def __init__(self):
        self.active = False
        self.file = None
        self.fired = {}

    def put(self, key, t):
        if self.active:
            self.file.put(key, t.detach().to("cpu", torch.float32).contiguous().clone())
            kind = key.split(".", 2)[-1] if key.startswith("layers.") else key
            self.fired[kind] = self.fired.get(kind, 0) + 1


REC = Recorder()


def install_attention():
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    base = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def recording_attention(module, query, key, value, attention_mask, **kwargs):
        if REC.active:
            i, t = module.layer_idx, query.shape[2]
            REC.put(f"layers.{i}.attn.q", query[0].transpose(0, 1))
            REC.put(f"layers.{i}.attn.k", key[0][:, -t:].transpose(0, 1))
            REC.put(f"layers.{i}.attn.v", value[0][:, -t:].transpose(0, 1))
            REC.put(f"layers.{i}.attn.k_read", key[0].transpose(0, 1))
            REC.put(f"layers.{i}.attn.v_read", value[0].transpose(0, 1))
        return base(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(ATTN, recording_attention)
    AttentionMaskInterface.register(ATTN, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])


def rows(o):
    t = o[0] if isinstance(o, tuple) else o
    return t.reshape(-1, t.shape[-1])


def install_hooks(model):
    inner = model.model
    hooks = [inner.embed_tokens.register_forward_hook(lambda m, a, o: REC.put("embed", rows(o))),
             inner.norm.register_forward_hook(lambda m, a, o: REC.put("final_norm", rows(o)))]
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: REC.put(f"layers.{i}.out", rows(o))))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: REC.put(f"layers.{i}.mlp.out", rows(o))))
        hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(
            lambda m, args, i=i: REC.put(f"layers.{i}.attn.out", args[0][0])))
    return hooks


def load(checkpoint):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        checkpoint, dtype=torch.float32, attn_implementation=ATTN, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        raise md.Refusal(f"{checkpoint}: weights do not match the config's model: {bad}")
    return model.eval()


@torch.no_grad()
def run_steps(model, feeds, greedy_after=None, out_dir=None, on_step=None):
    cache = None
    tokens, steps, all_logits = [], [], []
    n_steps = len(feeds) if feeds is not None else greedy_after[1] + 1
    feed = feeds[0] if feeds is not None else list(greedy_after[0])
    start = 0
    for s in range(n_steps):
        tokens += feed
        sf = None
        if out_dir is not None:
            sf = md.StepFile(os.path.join(out_dir, f"step-{s:04d}.safetensors"), 8 * model.config.num_hidden_layers + 4)
            REC.file, REC.active = sf, True
        try:
            out = model(input_ids=torch.tensor([feed]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[0, -1].detach().to(torch.float32).clone()
            if sf is not None:
                REC.active = False
                sf.put("logits", logits)
        except BaseException:
            REC.active = False
            if sf is not None:
                sf.abort()
            raise
        nt, margin = md.top2(logits)
        st = {"index": s, "start": start, "length": len(feed), "next_token": nt, "top2_margin": margin}
        if sf is not None:
            st["file"] = os.path.basename(sf.path)
            sf.close()
            st["shapes"] = {k: v["shape"] for k, v in sf.entries.items()}
        steps.append(st)
        all_logits.append(logits)
        if on_step:
            on_step(st, tokens)
        start += len(feed)
        if s + 1 < n_steps:
            feed = feeds[s + 1] if feeds is not None else [nt]
    return tokens, steps, all_logits


@torch.no_grad()
def verify(model, tokens, steps, logits):
    """(a) the same steps with every hook removed: bit-identical logits; (b) one full forward without a cache: ~1e-6."""
    feeds = [tokens[st["start"]:st["start"] + st["length"]] for st in steps]
    _, _, plain = run_steps(model, feeds)
    inc = max(float((a - b).abs().max()) for a, b in zip(plain, logits))
    pos = [st["start"] + st["length"] - 1 for st in steps]
    full = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0].float()[pos]
    rel_full = max(md.rel_l2(r, full[k]) for k, r in enumerate(logits))
    ver = {"incremental_unhooked_max_abs_logit_diff": inc, "full_forward_max_rel_l2_logits": rel_full}
    ver["ok"] = bool(inc == 0.0 and rel_full < 2e-5)
    print(f"verify: unhooked {inc:.3e}, full forward {rel_full:.3e} -> {'OK' if ver['ok'] else 'FAIL'}")
    return ver


def llama3_inv_freq_numpy(cfg):
    """The llama3 rope_scaling formula written out in NumPy (float32), to check what transformers computed."""
    rs = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    theta = cfg.get("rope_theta", rs.get("rope_theta", 10000.0))
    d = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    inv = (1.0 / (np.float32(theta) ** (np.arange(0, d, 2).astype(np.float32) / np.float32(d)))).astype(np.float32)
    if rs.get("rope_type", rs.get("type")) != "llama3":
        return inv
    factor, lo, hi, old = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    wavelen = (2 * math.pi / inv).astype(np.float32)
    inv_l = np.where(wavelen > old / lo, inv / np.float32(factor), inv).astype(np.float32)
    smooth = ((old / wavelen - lo) / (hi - lo)).astype(np.float32)
    smoothed = ((1 - smooth) * inv_l / np.float32(factor) + smooth * inv_l).astype(np.float32)
    medium = ~(wavelen < old / hi) & ~(wavelen > old / lo)
    return np.where(medium, smoothed, inv_l).astype(np.float32)


def make_dump(checkpoint, out_dir, case, feeds=None, greedy=None, prompt_text=None):
    t0 = time.time()
    ck = os.path.basename(os.path.normpath(checkpoint))
    cfg = json.load(open(os.path.join(checkpoint, "config.json")))
    model = load(checkpoint)
    if os.path.exists(out_dir):
        import shutil
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    inv = model.model.rotary_emb.inv_freq.detach().float()
    mine = torch.tensor(llama3_inv_freq_numpy(cfg))
    inv_rel = float(((inv - mine).abs() / inv.abs()).max())
    print(f"{ck}: inv_freq {inv.tolist()}; NumPy formula max rel diff {inv_rel:.3e}; "
          f"attention_scaling {getattr(model.model.rotary_emb, 'attention_scaling', None)}")
    manifest = {
        "format": "decodiff-dump", "version": 1,
        "producer": {"name": "transformers", "version": transformers.__version__, "dtype": "float32", "attention": "sdpa",
                     "torch": torch.__version__, "device": "cpu", "script": "reference-dumps/llama_dumps.py"},
        "model": {"model_type": cfg["model_type"], "num_hidden_layers": cfg["num_hidden_layers"],
                  "config_sha256": md.sha256_file(os.path.join(checkpoint, "config.json")),
                  "weights_sha256": md.weights_sha256(checkpoint), "checkpoint": ck},
        "tokens": [], "prompt_length": len(feeds[0]) if feeds else len(greedy[0]),
        "mode": "teacher_forced" if feeds else "greedy", "case": case, "steps": [],
        "rope": {"inv_freq": inv.tolist(), "numpy_formula_max_rel_diff": inv_rel,
                 "rope_parameters": json.loads(json.dumps(getattr(model.config, "rope_parameters", None), default=str))},
    }
    if prompt_text:
        manifest["prompt_text"] = prompt_text

    def on_step(st, fed):
        manifest["steps"].append({k: st[k] for k in ("index", "start", "length", "file", "next_token", "top2_margin")})
        manifest["tokens"] = list(fed)
        md.write_manifest(out_dir, manifest)

    hooks = install_hooks(model)
    REC.fired = {}
    try:
        tokens, steps, logits = run_steps(model, feeds, greedy, out_dir, on_step)
    finally:
        for h in hooks:
            h.remove()
    L = cfg["num_hidden_layers"]
    for kind in ("attn.q", "attn.k", "attn.v", "attn.k_read", "attn.v_read", "attn.out", "mlp.out", "out"):
        if REC.fired.get(kind, 0) != L * len(steps):
            raise RuntimeError(f"{ck}/{case}: capture point kind {kind} recorded {REC.fired.get(kind, 0)} times, "
                               f"expected {L * len(steps)} ({REC.fired})")
    manifest["verification"] = verify(model, tokens, steps, logits)
    manifest["tokens"] = tokens
    manifest["complete"] = True
    md.write_manifest(out_dir, manifest)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out_dir, "*")))
    print(f"=== {ck}/{case}: {len(tokens)} tokens, steps {[s['length'] for s in steps]}, {size} bytes, "
          f"{time.time() - t0:.1f}s; next tokens {[s['next_token'] for s in steps]}, "
          f"min margin {min(s['top2_margin'] for s in steps):.3f}")
    print("points step 0: " + json.dumps({k: v for k, v in steps[0]["shapes"].items()
                                          if not k.startswith("layers.") or k.startswith("layers.0.")}))
    return manifest


def encode(checkpoint, text):
    from tokenizers import Tokenizer
    ids = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json")).encode(text, add_special_tokens=False).ids
    return [2] + ids


def run_all(args):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    install_attention()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    summary = {}
    for ck in args.only or CHECKPOINTS:
        ckdir = os.path.join(args.checkpoints, ck)
        ids = encode(ckdir, TEXT)
        m1 = make_dump(ckdir, os.path.join(args.out, ck, "short"), "short", greedy=(ids, 6), prompt_text="<bos>" + TEXT)
        if len(ids) < sum(CONTINUATION):
            raise md.Refusal(f"the prompt text gives {len(ids)} tokens, the continuation case needs {sum(CONTINUATION)}")
        feeds, pos = [], 0
        for n in CONTINUATION:
            feeds.append(ids[pos:pos + n])
            pos += n
        m2 = make_dump(ckdir, os.path.join(args.out, ck, "continuation"), "continuation", feeds=feeds)
        for case, m in (("short", m1), ("continuation", m2)):
            summary[f"{ck}/{case}"] = {"prompt_length": m["prompt_length"], "step_lengths": [s["length"] for s in m["steps"]],
                                       "tokens": m["tokens"], "next_tokens": [s["next_token"] for s in m["steps"]],
                                       "min_top2_margin": min(s["top2_margin"] for s in m["steps"]),
                                       "verification": m["verification"], "config_sha256": m["model"]["config_sha256"],
                                       "weights_sha256": m["model"]["weights_sha256"]}
    with open(os.path.join(args.out, "llama-dumps-summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    bad = [k for k, v in summary.items() if not v["verification"]["ok"]]
    if bad:
        print(f"VERIFICATION FAILURES: {bad}")
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all")
    a.add_argument("--checkpoints", default=os.path.join(REPO, "checkpoints"))
    a.add_argument("--out", default=HERE)
    a.add_argument("--only", nargs="*")
    args = ap.parse_args()
    try:
        run_all(args)
    except md.Refusal as e:
        print(f"llama_dumps.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
