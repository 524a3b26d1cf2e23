#!/usr/bin/env python3
"""The foreign-candidate corpus: random Gemma 4 text checkpoints, fp32 transformers references, and candidates made by
transformers itself as a third-party engine, clean and with porting bugs patched into its modules at run time.

It measures whether `decodiff compare` tells a clean lower-precision engine (no false alarm) from a buggy one (no false
pass) on checkpoints and engines it was never tuned on. Runs on the GPU machine (Python 3.12, torch 2.11,
transformers 5.17, safetensors, NumPy; no network):

  make_corpus.py build --out DIR [--configs 30] [--seed 20260501] [--workers 15] [--sample DIR]

Deterministic from --seed. For each configuration cNN it writes, under DIR/configs/cNN/:
  checkpoint/        config.json + model.safetensors (bf16), random well-conditioned weights (no training);
                     reuses checkpoints/make_checkpoints.py's init_weights
  mlx/               (every third configuration) the checkpoint quantized MLX-style, affine 4-bit
                     (checkpoints/make_mlx_checkpoints.py's convert)
  dumps/ref          the fp32 reference: transformers on the CPU in float32, greedy (make_dumps.py's make_dump)
  dumps/cand-P       clean candidates, teacher-forced on the reference's tokens, P = bf16-cpu, fp16-cpu, bf16-cuda
  dumps/cand-P-BUG   a candidate with a porting bug (BUG below) in precision class P
  dumps/ref-BUG      an fp32 reference made with the bug (teacher-forced on the clean reference's tokens); compared
                     against a clean candidate (the clean fp32 reference itself or the clean bf16-cpu candidate)
  dumps/mlx-*        the MLX runs (below)
and DIR/corpus.json, one entry per comparison (see `entry()`), with the expected verdict class:
  clean          -> must be match or precision (exit 0)
  bug            -> must be divergence (exit 1)
  reference-bug  -> must not be match/precision: the reference's producer computed another model

The bugs are patched into transformers' Gemma 4 modules after loading (instances, buffers, the attention function
registered for the recording): see BUGS. Each bug's size is measured in fp32 (the buggy fp32 run against the clean
reference): the first cell it changes, its rel L2 there, and the logits' worst rel L2 -> corpus.json "effect". A bug
that changes nothing is an error (the patch missed), not a corpus entry.

MLX runs (every third configuration): the reference is fp32 transformers on the exact fp32 dequantization
(w = scale*q + bias), its manifest naming the MLX folder and its quantization (as make_mlx_checkpoints.py's
`references` does). A candidate that dequantizes MLX-style (the product and the sum rounded to the scales' bf16) and
computes in fp32 is a clean lower-precision engine; so is bf16 compute on the exact weights. A *reference* made on
the bf16-rounded weights, stating fp32, is a reference bug: it computed other weights than the checkpoint says.

MoE configurations record `moe.out` or not (half of them, by the seed: a producer's fair choice to record only
`mlp.out`); then no dump of that configuration holds `moe.out`, and none declares `selected_points`.
"""
import argparse
import glob
import hashlib
import json
import math
import multiprocessing as mp
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))


def find_repo(start):
    """The checkout holding reference-dumps/make_dumps.py: this file's folder or one above it (the script also runs
    from a copy beside the repository's root)."""
    d = start
    while True:
        if os.path.isfile(os.path.join(d, "reference-dumps", "make_dumps.py")):
            return d
        if os.path.dirname(d) == d:
            sys.exit("make_corpus.py: no reference-dumps/make_dumps.py in this folder or above it")
        d = os.path.dirname(d)


REPO = os.environ.get("DECODIFF_REPO") or find_repo(HERE)
sys.path.insert(0, os.path.join(REPO, "reference-dumps"))
sys.path.insert(0, os.path.join(REPO, "checkpoints"))

S, F = "sliding_attention", "full_attention"

# name: (size class, applies to config?)  -- the size classes are the issue's; the measured effect is in corpus.json
BUGS = {
    "values-are-keys": "large",        # on attention_k_eq_v full layers the values read back are the keys (post norm, rotated)
    "attn-scale-inv-sqrt-d": "large",  # attention scores scaled by 1/sqrt(d) instead of Gemma 4's 1.0
    "v-norm-missing": "large",         # the scale-free RMSNorm of the values left out
    "layer-scalar-ignored": "large",   # each layer's layer_scalar taken as 1
    "gelu-erf": "small",               # exact (erf) GELU instead of the tanh approximation, everywhere it is used
    "softcap-dropped": "small",        # final logit soft-capping left out
    "norm-eps-1e-5": "small",          # every RMSNorm with eps 1e-5 instead of the config's
    "rope-other-theta": "small",       # each layer type's RoPE with the other type's theta
    "moe-not-renormalised": "small",   # the top-k router weights not renormalised to sum 1
}
CAND_BUGS_PER_CONFIG = 4
REF_BUGS_PER_CONFIG = 3
CAND_CLASSES = ["bf16-cpu", "fp16-cpu", "bf16-cuda"]
CLASS_DTYPE = {"fp32-cpu": ("float32", "cpu"), "bf16-cpu": ("bfloat16", "cpu"), "fp16-cpu": ("float16", "cpu"),
               "bf16-cuda": ("bfloat16", "cuda")}


def applies(bug, spec):
    if bug == "values-are-keys":
        return spec["kw"].get("attention_k_eq_v", False)
    if bug == "softcap-dropped":
        return spec["kw"].get("final_logit_softcapping") is not None
    if bug == "moe-not-renormalised":
        return spec["kw"].get("enable_moe_block", False) and spec["kw"]["top_k_experts"] > 1
    return True


# ------------------------------------------------------------------------------------------------------------------
# Configurations
# ------------------------------------------------------------------------------------------------------------------

def random_config(i, seed):
    r = random.Random(seed * 1000 + i)
    L = r.choice([2, 3, 3, 5, 5, 5, 7, 7, 9, 9, 4, 6])
    types_ = [F if r.random() < 0.3 else S for _ in range(L)]
    types_[-1] = F
    if L >= 2 and S not in types_:
        types_[0] = S
    nh = r.choice([3, 3, 5, 2, 4, 6])
    divs = [d for d in (1, 2, 3) if nh % d == 0]
    nkv = r.choice(divs)
    hd = r.choice([16, 24, 32, 48])
    ghd = r.choice([32, 48, 64])
    H = r.choice([32, 48, 64, 64, 96])
    vocab = r.choice([512, 640, 768, 1024])
    prompt_len = r.randint(12, 20)
    steps = r.randint(4, 7)
    window = r.randint(3, min(8, prompt_len - 2))
    kw = dict(
        vocab_size=vocab, vocab_size_per_layer_input=vocab, hidden_size=H,
        intermediate_size=r.choice([64, 96, 128]), num_hidden_layers=L, layer_types=types_,
        num_attention_heads=nh, num_key_value_heads=nkv, head_dim=hd, global_head_dim=ghd,
        sliding_window=window, hidden_size_per_layer_input=0,
        rope_parameters={S: {"rope_type": "default", "rope_theta": 10000.0},
                         F: {"rope_type": "proportional", "partial_rotary_factor": r.choice([0.25, 0.5]),
                             "rope_theta": 1000000.0}},
        max_position_embeddings=4096, rms_norm_eps=1e-6, hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True, pad_token_id=0, eos_token_id=1, bos_token_id=2,
        final_logit_softcapping=r.choice([30.0, 15.0, 10.0]) if i % 7 else None,
        attention_k_eq_v=r.random() < 0.6,
    )
    if kw["attention_k_eq_v"]:
        kw["num_global_key_value_heads"] = r.choice(divs)
    else:
        kw["num_global_key_value_heads"] = None
    if r.random() < 0.5:
        kw.update(enable_moe_block=True, num_experts=r.choice([3, 4, 5]), top_k_experts=r.choice([1, 2, 2, 3]),
                  moe_intermediate_size=r.choice([32, 64]))
    if r.random() < 0.4:
        kw["hidden_size_per_layer_input"] = r.choice([8, 16])
    if L >= 3 and r.random() < 0.4:
        # the last N layers share KV; every shared layer's type needs a non-shared layer of that type before them
        for n in range(r.randint(1, L - 2), 0, -1):
            f = L - n
            if set(types_[f:]) <= set(types_[:f]):
                kw["num_kv_shared_layers"] = n
                kw["use_double_wide_mlp"] = r.random() < 0.5
                break
    spec = {"id": f"c{i:02d}", "kw": kw, "prompt_length": prompt_len, "steps": steps,
            "init_seed": seed * 7919 + i,
            "record_moe_out": (not kw.get("enable_moe_block")) or r.random() < 0.5,
            "mlx": i % 3 == 2, "mlx_group": 64 if H % 64 == 0 else 32}
    pr = random.Random(seed * 31 + i)
    spec["prompt"] = [2] + [pr.randrange(262, vocab) for _ in range(prompt_len - 1)]
    return spec


def assign_bugs(specs, seed):
    """Balanced: each configuration takes the applicable bugs used least so far (ties broken by the seed)."""
    r = random.Random(seed + 17)
    cand_n = {b: 0 for b in BUGS}
    ref_n = {b: 0 for b in BUGS}
    for k, spec in enumerate(specs):
        ok = [b for b in BUGS if applies(b, spec)]
        r.shuffle(ok)
        cands = sorted(ok, key=lambda b: cand_n[b])[:CAND_BUGS_PER_CONFIG]
        for j, b in enumerate(cands):
            cand_n[b] += 1
        # precision class per candidate bug: rotate over the three classes
        spec["cand_bugs"] = [(b, CAND_CLASSES[(k + j) % 3]) for j, b in enumerate(cands)]
        r.shuffle(ok)
        refs = sorted(ok, key=lambda b: ref_n[b])[:REF_BUGS_PER_CONFIG]
        for b in refs:
            ref_n[b] += 1
        spec["ref_bugs"] = [(b, "fp32-cpu" if (k + j) % 2 == 0 else "bf16-cpu") for j, b in enumerate(refs)]
    return cand_n, ref_n


# ------------------------------------------------------------------------------------------------------------------
# Bugs, patched into the loaded model
# ------------------------------------------------------------------------------------------------------------------

BUG = {"name": None}  # the bug of the job in progress (one job at a time per process)


def install_bug_attention():
    """Wrap the recording attention function make_dumps.py registered: the attention-level bugs act *before* the
    recording, so k_read/v_read show what the buggy attention read."""
    import make_dumps as md
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    recording = ALL_ATTENTION_FUNCTIONS[md.ATTN_NAME]

    def buggy(module, query, key, value, attention_mask, **kwargs):
        name = BUG["name"]
        if name == "values-are-keys":
            cfg = module.config
            if cfg.attention_k_eq_v and cfg.layer_types[module.layer_idx] == F:
                value = key
        elif name == "attn-scale-inv-sqrt-d":
            kwargs["scaling"] = query.shape[-1] ** -0.5
        return recording(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(md.ATTN_NAME, buggy)


def patch_model(model, name):
    """Instance-level patches after loading (nothing leaks into the next job)."""
    import torch
    from torch import nn
    if name is None:
        return
    inner = model.model
    n = 0
    if name in ("values-are-keys", "attn-scale-inv-sqrt-d"):
        n = 1  # in the attention function (install_bug_attention)
    elif name == "v-norm-missing":
        for layer in inner.layers:
            if getattr(layer.self_attn, "v_norm", None) is not None:
                layer.self_attn.v_norm = nn.Identity()
                n += 1
    elif name == "layer-scalar-ignored":
        with torch.no_grad():
            for layer in inner.layers:
                layer.layer_scalar.fill_(1.0)
                n += 1
    elif name == "gelu-erf":
        erf = nn.GELU(approximate="none")
        for m in list(model.modules()):
            if hasattr(m, "act_fn"):
                m.act_fn = erf
                n += 1
    elif name == "softcap-dropped":
        model.config.final_logit_softcapping = None
        n = 1
    elif name == "norm-eps-1e-5":
        for m in model.modules():
            if type(m).__name__ == "Gemma4RMSNorm":
                m.eps = 1e-5
                n += 1
    elif name == "rope-other-theta":
        rope = model.config.rope_parameters
        rot = inner.rotary_emb
        with torch.no_grad():
            for lt, other in ((S, F), (F, S)):
                if lt not in rope or other not in rope:
                    continue
                ratio = math.log(rope[other]["rope_theta"]) / math.log(rope[lt]["rope_theta"])
                for buf, t in list(rot.named_buffers()):
                    if buf.startswith(lt) and "inv_freq" in buf:
                        # inv = theta^(-2j/d) -> theta'^(-2j/d); zeros (the unrotated dims) stay zero
                        t.copy_((t.double() ** ratio).to(t.dtype))
                        n += 1
    elif name == "moe-not-renormalised":
        for layer in inner.layers:
            router = getattr(layer, "router", None)
            if router is None:
                continue
            orig = router.forward

            def fwd(self, hidden_states, orig=orig):
                probs, w, idx = orig(hidden_states)
                p = probs.float()
                if not torch.allclose(p.sum(-1), torch.ones_like(p.sum(-1)), atol=1e-2):
                    p = p.softmax(-1)  # a router that returns its scores rather than probabilities
                # undo the renormalisation: the top-k probabilities' sum, back in
                s = p.gather(-1, idx).sum(dim=-1, keepdim=True).to(w.dtype)
                return probs, w * s, idx
            router.forward = types.MethodType(fwd, router)
            n += 1
    else:
        raise ValueError(name)
    if n == 0:
        raise RuntimeError(f"bug {name}: nothing to patch in this model")


# ------------------------------------------------------------------------------------------------------------------
# Jobs
# ------------------------------------------------------------------------------------------------------------------

SETUP = {"done": False}


def setup_process(threads=1):
    """Once per process (a pool worker takes several configurations): the patches wrap make_dumps.py's functions,
    and wrapping twice would apply a bug twice."""
    import torch
    import make_dumps as md
    torch.set_num_threads(threads)
    if SETUP["done"]:
        return
    SETUP["done"] = True
    md.DTYPES["float16"] = torch.float16
    md.install_attention("sdpa")
    install_bug_attention()
    orig_load = md.load
    orig_put = md.Recorder.put
    orig_expected = md.expected_points

    def load(*a, **k):
        model = orig_load(*a, **k)
        patch_model(model, BUG["name"])
        return model

    def put(self, key, t):
        if BUG.get("drop_moe") and key.endswith(".moe.out"):
            return
        return orig_put(self, key, t)

    def expected(cfg, selection):
        e = orig_expected(cfg, selection)
        return {p for p in e if not p.endswith(".moe.out")} if BUG.get("drop_moe") else e

    md.load = load
    md.Recorder.put = put
    md.expected_points = expected


def make_checkpoint(spec, out):
    import torch
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig
    import make_checkpoints as mc
    torch.manual_seed(spec["init_seed"])
    cfg = Gemma4TextConfig(**spec["kw"])
    model = Gemma4ForCausalLM(cfg).float()
    gen = torch.Generator().manual_seed(spec["init_seed"])
    mc.init_weights(model, cfg, gen)
    model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.save_pretrained(out, safe_serialization=True)
    for extra in glob.glob(os.path.join(out, "*")):
        if not (extra.endswith("config.json") or extra.endswith(".safetensors")):
            os.remove(extra)  # generation_config.json etc.: not needed


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def dump(spec, ck, out, dtype="float32", device="cpu", teacher=None, bug=None, verify=False):
    import make_dumps as md
    BUG["name"] = bug
    BUG["drop_moe"] = not spec["record_moe_out"]
    try:
        return md.make_dump(ck, out, spec["prompt"], spec["steps"], dtype=dtype, attn="sdpa", teacher=teacher,
                            verify=verify, device=device, quiet_progress=True, extra={"case": "corpus"})
    finally:
        BUG["name"] = None


def effect(ref_dir, other_dir):
    """How a bug shows in fp32: the first cell (causal order) that differs from the clean reference at all, its rel L2,
    the worst cell and the logits' worst rel L2."""
    import torch
    import make_dumps as md
    from safetensors import safe_open
    ma = json.load(open(os.path.join(ref_dir, "manifest.json")))
    mb = json.load(open(os.path.join(other_dir, "manifest.json")))
    first = worst = None
    logits = 0.0
    for sa, sb in zip(ma["steps"], mb["steps"]):
        with safe_open(os.path.join(ref_dir, sa["file"]), "pt") as fa, \
                safe_open(os.path.join(other_dir, sb["file"]), "pt") as fb:
            for k in sorted(set(fa.keys()) & set(fb.keys()), key=md.point_order):
                a, b = fa.get_tensor(k).double(), fb.get_tensor(k).double()
                if a.shape != b.shape:
                    rel = float("inf")
                else:
                    rel = float((a - b).norm() / max(float(a.norm()), 1e-30))
                if rel > 0 and first is None:
                    first = {"step": sa["index"], "point": k, "rel_l2": rel}
                if worst is None or rel > worst["rel_l2"]:
                    worst = {"step": sa["index"], "point": k, "rel_l2": rel}
                if k == "logits":
                    logits = max(logits, rel)
    return {"first": first, "worst": worst, "logits_rel_l2": logits}


def write_plain_bf16_dequant(mm, mlx_dir, out_dir):
    """The MLX checkpoint dequantized MLX-style: scale*q rounded to bf16, + bias rounded to bf16 (the scales' dtype)."""
    import numpy as np
    cfg, tensors = mm.read_mlx(mlx_dir)
    orig = mm.dequantize

    def deq_bf16(packed, scales, biases, bits, group):
        cols = packed.shape[-1] * 32 // bits
        q = mm.unpack(packed, bits, cols).astype(np.float32)
        lead = q.shape[:-1]
        q = q.reshape(*lead, cols // group, group)
        s = scales.astype(np.float32)[..., None]
        b = biases.astype(np.float32)[..., None]
        prod = mm.bf16_to_f32(mm.f32_to_bf16(s * q))
        w = mm.bf16_to_f32(mm.f32_to_bf16(prod + b))
        return w.astype(np.float32).reshape(*lead, cols)

    mm.dequantize = deq_bf16
    try:
        mm.write_plain(cfg, tensors, mlx_dir, out_dir)
    finally:
        mm.dequantize = orig


def rename_to_mlx(mm, dump_dir, mlx_dir, weights_note):
    import make_dumps as md
    mf = os.path.join(dump_dir, "manifest.json")
    manifest = json.load(open(mf))
    cfg = json.load(open(os.path.join(mlx_dir, "config.json")))
    q = cfg["quantization"]
    manifest["model"]["config_sha256"] = sha256_file(os.path.join(mlx_dir, "config.json"))
    manifest["model"]["weights_sha256"] = md.weights_sha256(mlx_dir)
    manifest["model"]["checkpoint"] = os.path.basename(os.path.dirname(mlx_dir.rstrip("/"))) + "-mlx"
    manifest["producer"]["quantization"] = {"format": "mlx", "mode": q.get("mode", "affine"), "bits": q["bits"],
                                            "group_size": q["group_size"], "overrides": {}}
    manifest["producer"]["weights"] = weights_note
    complete = manifest.pop("complete", None)
    if complete:
        manifest["complete"] = True  # the mark stays the last field
    md.write_manifest(dump_dir, manifest)


def cpu_jobs(args):
    """Everything of one configuration that runs on the CPU. Returns (spec id, entries, log)."""
    spec, root = args
    cid = spec["id"]
    base = os.path.join(root, "configs", cid)
    log_path = os.path.join(root, "logs", f"{cid}.log")
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    t0 = time.time()
    with open(log_path, "w") as log:
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            setup_process(1)
            return cid, build_cpu(spec, base, root), None, time.time() - t0
        except Exception:
            traceback.print_exc()
            return cid, [], traceback.format_exc(), time.time() - t0
        finally:
            sys.stdout, sys.stderr = old


def rel(root, p):
    return os.path.relpath(p, root)


def entry(root, spec, ck, ref, cand, precision, side, bug, expected, eff=None, extra=None):
    e = {"id": None, "config": spec["id"], "checkpoint": rel(root, ck), "reference": rel(root, ref),
         "candidate": rel(root, cand), "precision": precision, "bug_side": side, "bug": bug,
         "bug_size": BUGS.get(bug) if bug in BUGS else ("large" if bug and bug.startswith("mlx") else None),
         "expected": expected, "features": features(spec)}
    if eff is not None:
        e["effect"] = eff
    if extra:
        e.update(extra)
    return e


def features(spec):
    kw = spec["kw"]
    return {"layers": kw["num_hidden_layers"], "heads": kw["num_attention_heads"], "kv_heads": kw["num_key_value_heads"],
            "head_dim": kw["head_dim"], "global_head_dim": kw["global_head_dim"], "hidden": kw["hidden_size"],
            "vocab": kw["vocab_size"], "window": kw["sliding_window"], "k_eq_v": kw["attention_k_eq_v"],
            "moe": bool(kw.get("enable_moe_block")), "moe_out_recorded": spec["record_moe_out"] if kw.get("enable_moe_block") else None,
            "ple": kw["hidden_size_per_layer_input"] > 0, "kv_shared": kw.get("num_kv_shared_layers", 0),
            "softcap": kw["final_logit_softcapping"], "prompt_length": spec["prompt_length"], "steps": spec["steps"]}


def build_cpu(spec, base, root):
    import make_mlx_checkpoints as mm
    ck = os.path.join(base, "checkpoint")
    d = os.path.join(base, "dumps")
    os.makedirs(d, exist_ok=True)
    make_checkpoint(spec, ck)
    ref = os.path.join(d, "ref")
    m = dump(spec, ck, ref, verify=True)
    tokens = m["tokens"]
    spec["tokens"] = tokens
    out = []
    # clean candidates on the CPU
    for cls in ("bf16-cpu", "fp16-cpu"):
        dt, dev = CLASS_DTYPE[cls]
        c = os.path.join(d, f"cand-{cls}")
        dump(spec, ck, c, dtype=dt, device=dev, teacher=tokens)
        out.append(entry(root, spec, ck, ref, c, cls, "none", None, "clean"))
    tmp = tempfile.mkdtemp(prefix="eff-", dir=base)
    effects = {}

    def bug_effect(bug):
        if bug not in effects:
            e = os.path.join(tmp, bug)
            dump(spec, ck, e, teacher=tokens, bug=bug)
            effects[bug] = effect(ref, e)
            if effects[bug]["first"] is None:
                raise RuntimeError(f"{spec['id']}: bug {bug} changed nothing (the patch missed)")
        return effects[bug]

    # candidate bugs on the CPU (the CUDA ones run later in the GPU process; their effect is measured here)
    for bug, cls in spec["cand_bugs"]:
        eff = bug_effect(bug)
        if cls == "bf16-cuda":
            continue
        dt, dev = CLASS_DTYPE[cls]
        c = os.path.join(d, f"cand-{cls}-{bug}")
        dump(spec, ck, c, dtype=dt, device=dev, teacher=tokens, bug=bug)
        out.append(entry(root, spec, ck, ref, c, cls, "candidate", bug, "bug", eff))
    # reference bugs: fp32, teacher-forced on the clean reference's tokens, against a clean candidate
    for bug, cls in spec["ref_bugs"]:
        r = os.path.join(d, f"ref-{bug}")
        dump(spec, ck, r, teacher=tokens, bug=bug)
        eff = effect(ref, r)
        if eff["first"] is None:
            raise RuntimeError(f"{spec['id']}: bug {bug} changed nothing (the patch missed)")
        cand = ref if cls == "fp32-cpu" else os.path.join(d, "cand-bf16-cpu")
        out.append(entry(root, spec, ck, r, cand, cls, "reference", bug, "reference-bug", eff))
    shutil.rmtree(tmp)
    with open(os.path.join(base, "effects.json"), "w") as f:  # the CUDA candidates' effects, for the GPU phase
        json.dump(effects, f, indent=1)
    if spec["mlx"]:
        out += build_mlx(spec, base, root, mm)
    return out


def build_mlx(spec, base, root, mm):
    mlx = os.path.join(base, "mlx")
    mm.convert(os.path.join(base, "checkpoint"), mlx, 4, spec["mlx_group"], {})
    d = os.path.join(base, "dumps")
    out = []
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        exact = os.path.join(tmp, "exact")
        rounded = os.path.join(tmp, "bf16")
        cfg, tensors = mm.read_mlx(mlx)
        mm.write_plain(cfg, tensors, mlx, exact)
        write_plain_bf16_dequant(mm, mlx, rounded)
        exact_note = "the MLX checkpoint's weights dequantized to fp32 (scale*q + bias, exact)"
        bf16_note = "the MLX checkpoint's weights dequantized as MLX does, scale*q + bias rounded to bf16"
        ref = os.path.join(d, "mlx-ref")
        m = dump(spec, exact, ref, verify=True)
        rename_to_mlx(mm, ref, mlx, exact_note)
        tokens = m["tokens"]
        c1 = os.path.join(d, "mlx-cand-fp32-bf16dequant")
        dump(spec, rounded, c1, teacher=tokens)
        rename_to_mlx(mm, c1, mlx, bf16_note)
        out.append(entry(root, spec, mlx, ref, c1, "mlx-bf16-dequant", "none", "mlx-bf16-dequant", "clean",
                         extra={"bug_size": None, "note": "candidate dequantizes MLX-style in bf16: a clean lower-precision engine"}))
        c2 = os.path.join(d, "mlx-cand-bf16-cpu")
        dump(spec, exact, c2, dtype="bfloat16", teacher=tokens)
        rename_to_mlx(mm, c2, mlx, exact_note)
        out.append(entry(root, spec, mlx, ref, c2, "bf16-cpu", "none", None, "clean"))
        r = os.path.join(d, "mlx-ref-bf16dequant")
        dump(spec, rounded, r, teacher=tokens)
        eff = effect(ref, r)
        rename_to_mlx(mm, r, mlx, bf16_note)
        out.append(entry(root, spec, mlx, r, ref, "fp32-cpu", "reference", "mlx-bf16-dequant", "reference-bug", eff,
                         extra={"bug_size": "small", "note": "reference states fp32 but ran bf16-rounded dequantized weights"}))
    return out


def gpu_jobs(specs, root, log_path):
    """The bf16-cuda candidates, one process, sequentially."""
    with open(log_path, "w") as log:
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        out, errors = [], []
        try:
            setup_process(4)
            for spec in specs:
                try:
                    base = os.path.join(root, "configs", spec["id"])
                    ck = os.path.join(base, "checkpoint")
                    ref = os.path.join(base, "dumps", "ref")
                    tokens = json.load(open(os.path.join(ref, "manifest.json")))["tokens"]
                    c = os.path.join(base, "dumps", "cand-bf16-cuda")
                    dump(spec, ck, c, dtype="bfloat16", device="cuda", teacher=tokens)
                    out.append(entry(root, spec, ck, ref, c, "bf16-cuda", "none", None, "clean"))
                    for bug, cls in spec["cand_bugs"]:
                        if cls != "bf16-cuda":
                            continue
                        c = os.path.join(base, "dumps", f"cand-{cls}-{bug}")
                        dump(spec, ck, c, dtype="bfloat16", device="cuda", teacher=tokens, bug=bug)
                        out.append(entry(root, spec, ck, ref, c, cls, "candidate", bug, "bug",
                                         spec.get("effects", {}).get(bug)))
                except Exception:
                    traceback.print_exc()
                    errors.append(f"{spec['id']}: {traceback.format_exc().splitlines()[-1]}")
        finally:
            sys.stdout, sys.stderr = old
    return out, errors


def build(args):
    root = os.path.abspath(args.out)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(os.path.join(root, "logs"))
    specs = [random_config(i, args.seed) for i in range(args.configs)]
    cand_n, ref_n = assign_bugs(specs, args.seed)
    print(f"{len(specs)} configurations; candidate bugs {cand_n}; reference bugs {ref_n}", flush=True)
    t0 = time.time()
    ctx = mp.get_context("spawn")
    entries, errors = [], []
    with ctx.Pool(args.workers) as pool:
        for cid, es, err, secs in pool.imap_unordered(cpu_jobs, [(s, root) for s in specs]):
            print(f"  {cid}: {len(es)} runs, {secs:.0f}s{' ERROR ' + err.splitlines()[-1] if err else ''}", flush=True)
            entries += es
            if err:
                errors.append(f"{cid}: {err.splitlines()[-1]}")
            # the effects measured in the worker travel back through the entries
    done = {e["config"] for e in entries}
    for s in specs:
        s["effects"] = {e["bug"]: e.get("effect") for e in entries
                        if e["config"] == s["id"] and e["bug_side"] == "candidate"}
    print(f"CPU phase {time.time() - t0:.0f}s", flush=True)
    gpu_specs = [s for s in specs if s["id"] in done]
    # effects of CUDA-only bugs: measured by the worker but not carried by any CPU entry; read them back
    for s in gpu_specs:
        p = os.path.join(root, "configs", s["id"], "effects.json")
        if os.path.exists(p):
            s["effects"].update(json.load(open(p)))
    t1 = time.time()
    g = ctx.Process(target=gpu_worker, args=(gpu_specs, root))
    g.start()
    g.join()
    res = os.path.join(root, "logs", "gpu-result.json")
    if os.path.exists(res):
        gr = json.load(open(res))
        entries += gr["entries"]
        errors += gr["errors"]
        os.remove(res)
    else:
        errors.append("GPU phase: no result")
    print(f"GPU phase {time.time() - t1:.0f}s", flush=True)
    order = {s["id"]: k for k, s in enumerate(specs)}
    entries.sort(key=lambda e: (order[e["config"]], e["bug_side"], e["precision"], e["bug"] or "", e["candidate"]))
    for k, e in enumerate(entries):
        e["id"] = f"r{k:03d}"
    doc = {"format": "decodiff-corpus", "version": 1, "seed": args.seed,
           "made_with": versions(), "bugs": BUGS, "errors": errors,
           "configs": {s["id"]: {"config": s["kw"], "prompt": s["prompt"], "steps": s["steps"],
                                 "record_moe_out": s["record_moe_out"], "mlx": s["mlx"]} for s in specs},
           "runs": entries}
    with open(os.path.join(root, "corpus.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    summary(entries, errors, root)
    if args.sample:
        make_sample(doc, root, args.sample)


def gpu_worker(specs, root):
    out, errors = gpu_jobs(specs, root, os.path.join(root, "logs", "gpu.log"))
    with open(os.path.join(root, "logs", "gpu-result.json"), "w") as f:
        json.dump({"entries": out, "errors": errors}, f)


def versions():
    import torch
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0]}


def summary(entries, errors, root):
    from collections import Counter
    c = Counter((e["expected"], e["precision"]) for e in entries)
    b = Counter((e["bug_side"], e["bug"]) for e in entries if e["bug"])
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(root, "**"), recursive=True) if os.path.isfile(p))
    print(f"{len(entries)} runs, {size / 2**20:.1f} MiB")
    for k, v in sorted(c.items()):
        print(f"  {k[0]:14s} {k[1]:18s} {v}")
    for k, v in sorted(b.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        print(f"  {k[0]:10s} {k[1]:24s} {v}")
    for e in errors:
        print("ERROR " + e)


# The CI sample: a clean bf16 and a clean fp16 candidate, a large and a small candidate bug, a reference bug, and a
# clean MoE run without moe.out.
def make_sample(doc, root, out):
    runs = doc["runs"]

    def pick(pred):
        best = None
        for e in runs:
            if pred(e):
                n = e["features"]["layers"] * e["features"]["hidden"]
                if best is None or n < best[0]:
                    best = (n, e)
        return best[1] if best else None

    chosen = [
        pick(lambda e: e["expected"] == "clean" and e["precision"] == "bf16-cpu" and not e["features"]["moe"]
             and e["bug"] is None),
        pick(lambda e: e["expected"] == "clean" and e["precision"] == "fp16-cpu" and e["bug"] is None),
        pick(lambda e: e["expected"] == "bug" and e["bug_size"] == "large" and e["precision"] != "bf16-cuda"),
        pick(lambda e: e["expected"] == "bug" and e["bug"] == "softcap-dropped"),
        pick(lambda e: e["expected"] == "reference-bug" and e["bug"] == "values-are-keys"),
        pick(lambda e: e["expected"] == "clean" and e["features"]["moe"] and e["features"]["moe_out_recorded"] is False
             and e["precision"] == "bf16-cpu"),
    ]
    chosen = [e for e in chosen if e is not None]
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    sample = []
    for e in chosen:
        e = dict(e)
        for key in ("checkpoint", "reference", "candidate"):
            dst = os.path.join(out, e[key])
            if not os.path.exists(dst):
                shutil.copytree(os.path.join(root, e[key]), dst)
        sample.append(e)
    with open(os.path.join(out, "corpus.json"), "w") as f:
        json.dump({"format": "decodiff-corpus", "version": 1, "seed": doc["seed"], "made_with": doc["made_with"],
                   "bugs": doc["bugs"], "sample_of": "the corpus of reference-dumps/corpus/make_corpus.py",
                   "runs": sample}, f, indent=1)
        f.write("\n")
    print(f"sample: {len(sample)} runs in {out}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--configs", type=int, default=30)
    b.add_argument("--seed", type=int, default=20260501)
    b.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    b.add_argument("--sample", help="also copy the CI sample's runs (6) with their checkpoints and dumps here")
    p = sub.add_parser("plan", help="print the configurations and bug assignment only (no torch needed)")
    p.add_argument("--configs", type=int, default=30)
    p.add_argument("--seed", type=int, default=20260501)
    args = ap.parse_args()
    if args.cmd == "plan":
        specs = [random_config(i, args.seed) for i in range(args.configs)]
        cand_n, ref_n = assign_bugs(specs, args.seed)
        for s in specs:
            print(s["id"], json.dumps(features(s)), s["cand_bugs"], s["ref_bugs"], "mlx" if s["mlx"] else "")
        print("candidate bugs", cand_n)
        print("reference bugs", ref_n)
        return
    build(args)


if __name__ == "__main__":
    main()
