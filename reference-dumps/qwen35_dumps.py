#!/usr/bin/env python3
"""decodiff reference producer for Qwen3.5 (qwen3_5_text, qwen3_5_moe_text): transformers 5.17 -> decodiff dump v1.

The same dump format as make_dumps.py (docs/dump-format.md): one safetensors file per step, float32, batch axis
stripped. Steps run through transformers' own DynamicCache (LinearAttentionLayer for the Gated DeltaNet layers), so a
step longer than one token goes through torch_chunk_gated_delta_rule (64-token chunks) and a one-token step after
the first through torch_recurrent_gated_delta_rule and causal_conv1d_update: the prefill -> decode hand-over of the
conv and recurrent states is what the dumps pin down. A step may feed several tokens after the first (a continuation).

Checkpoints: Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM folders (weights under `model.`), or the released multimodal
layout (model_type qwen3_5 / qwen3_5_moe with a text_config, weights under `model.language_model.`; the vision tower
and the MTP head are never read). MoE experts may be fused (experts.gate_up_proj [E, 2I, H], experts.down_proj) or
per expert (experts.N.{gate,up,down}_proj.weight, as save_pretrained writes them); gate comes before up when fusing.
The text model is built from the text config and its state dict filled from the files by name (strict).

Capture points (docs/dump-format.md) and how they are taken:
  embed                               forward hook on model.embed_tokens -> [T, H]
  layers.i.linear.conv_state_read     the cache's conv state before the layer runs, its last K-1 columns (the
                                      oldest of transformers' K columns only ever feeds discarded outputs) -> [K-1, C],
                                      time-major, oldest first; absent on the first step (there is no state yet)
  layers.i.linear.conv_state          the same after the layer ran
  layers.i.linear.q / .k              torch_*_gated_delta_rule's q and k after transformers' l2norm (module-level
                                      function, wrapped), after the head repeat, before the 1/sqrt(dk) scale -> [T, Hv, dk]
  layers.i.linear.v                   the kernel's value argument (conv output after SiLU) -> [T, Hv, dv]
  layers.i.linear.beta / .decay       the kernel's beta and g (log decay) arguments -> [T, Hv]
  layers.i.linear.state_read          the kernel's initial_state -> [Hv, dk, dv], float32; absent on the first step
  layers.i.linear.core_out            the kernel's output, before the gated norm -> [T, Hv, dv]
  layers.i.linear.state               the kernel's final state, what the cache stores -> [Hv, dk, dv]
  layers.i.linear.out                 forward hook on linear_attn (out_proj output) -> [T, H]
  layers.i.attn.q                     registered attention function: query after q_norm + partial RoPE -> [T, nh, d]
  layers.i.attn.gate                  sigmoid of the gate half of q_proj (per head: [query | gate]) -> [T, nh*d]
  layers.i.attn.k / .v                the last T rows of the key/value the attention function gets (what entered
                                      the cache this step: k after k_norm + RoPE) -> [T, nkv, d]
  layers.i.attn.k_read / .v_read      all keys/values the last query reads (positions 0..p) -> [p+1, nkv, d]
  layers.i.attn.out                   forward pre-hook on o_proj: attention output times sigmoid(gate) -> [T, nh*d]
  layers.i.mlp.out / .moe.out         forward hook on layer.mlp (dense MLP, or the whole sparse MoE block with its
                                      gated shared expert) -> [T, H]
  layers.i.out                        forward hook on the decoder layer -> [T, H]
  final_norm, logits                  forward hook on model.norm; last-position logits -> [V]

Usage:
  qwen35_dumps.py all [--checkpoints DIR] [--out DIR] [--only NAME ...]
  qwen35_dumps.py candidate --checkpoint DIR --reference DUMP --out DIR [--dtype bfloat16|float16|float32]
                            [--device cpu|cuda] [--bug NAME]
      a candidate: the checkpoint in that dtype on that device, teacher-forced on the reference dump's tokens and
      step lengths; the manifest states producer.dtype and producer.device. --bug plants one porting bug (BUGS) in
      transformers for the run (the recording sees what the buggy engine computes); with --dtype float32 that is a
      reference made with the bug.
  (make_dumps.py qwen35 ... is the same)
"""
import argparse
import gc
import glob
import inspect
import json
import os
import shutil
import sys
import time

import torch
import transformers
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import make_dumps as md  # noqa: E402  (StepFile, hashes, manifest writing)

ATTN = "decodiff_qwen35"
MODULES = ["transformers.models.qwen3_5.modeling_qwen3_5", "transformers.models.qwen3_5_moe.modeling_qwen3_5_moe"]
TEXT_TYPES = {"qwen3_5_text": "dense", "qwen3_5_moe_text": "moe"}
WRAPPER_TYPES = {"qwen3_5": "qwen3_5_text", "qwen3_5_moe": "qwen3_5_moe_text"}

# Prompt text: crosses a 64-token chunk boundary with this repository's tokenizer (vocab 1024).
TEXT = ("The old lighthouse keeper climbed the stairs every evening at the same hour. There were ninety steps, and "
        "he counted each of them aloud, because his father had done the same and his grandfather before that. At the "
        "top he trimmed the wick, polished the great lens with a soft cloth, and watched the ships far out on the grey "
        "water. Some nights the fog came in so thick that the beam seemed to stop a few yards from the glass, and on "
        "those nights he rang the bell by hand until his arms ached and the first light of morning showed in the east.")
# (case, step lengths or None for greedy, prompt tokens, decode steps)
CASES = [
    ("long", None, 70, 8),           # two chunks in prefill (64 + 6, padded), then 8 decodes: the conv window rolls over
    ("short", None, 2, 6),           # a prompt shorter than K-1: the conv state is left-padded with zeros
    ("continuation", [67, 1, 1, 1, 1, 1, 9, 1, 1], None, None),  # a multi-token step on a warm cache (chunk kernel)
]


class Refusal(md.Refusal):
    pass


# ----------------------------------------------------------------------------------------------
# Loading
# ----------------------------------------------------------------------------------------------

def read_config(checkpoint):
    path = os.path.join(checkpoint, "config.json")
    if not os.path.isfile(path):
        raise Refusal(f"{path}: missing; pass a Hugging Face checkpoint folder (config.json + *.safetensors)")
    raw = json.load(open(path, encoding="utf-8"))
    mt = raw.get("model_type")
    if mt in TEXT_TYPES:
        return raw, dict(raw), "model."
    if mt in WRAPPER_TYPES:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise Refusal(f"{path}: model_type '{mt}' without a text_config object; add the text model's config as text_config")
        text = dict(text)
        text.setdefault("model_type", WRAPPER_TYPES[mt])
        return raw, text, "model.language_model."
    raise Refusal(f"{path}: model_type '{mt}' is not Qwen3.5 (expected qwen3_5_text, qwen3_5_moe_text, or qwen3_5 / "
                  f"qwen3_5_moe with a text_config)")


def classes(text_type):
    if text_type == "qwen3_5_text":
        return transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM
    if text_type == "qwen3_5_moe_text":
        return transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM
    raise Refusal(f"text model_type '{text_type}' is not qwen3_5_text or qwen3_5_moe_text")


def file_tensors(checkpoint, prefix):
    """The text model's tensors by their ForCausalLM names, float32; names of everything skipped."""
    out, skipped = {}, []
    for p in sorted(glob.glob(os.path.join(checkpoint, "*.safetensors"))):
        with safe_open(p, "pt") as f:
            for k in f.keys():
                if k.startswith(prefix):
                    out["model." + k[len(prefix):]] = f.get_tensor(k).to(torch.float32)
                elif k == "lm_head.weight":
                    out[k] = f.get_tensor(k).to(torch.float32)
                else:
                    skipped.append(k)
    return out, skipped


def fuse_experts(sd, wanted):
    """Per-expert gate/up/down tensors -> the fused [E, 2I, H] / [E, H, I] the model holds (gate before up)."""
    for name in list(wanted):
        if name in sd or not (name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj")):
            continue
        base = name.rsplit(".", 1)[0]
        n = 0
        while f"{base}.{n}.down_proj.weight" in sd:
            n += 1
        if n == 0:
            continue
        if name.endswith("gate_up_proj"):
            sd[name] = torch.stack([torch.cat([sd.pop(f"{base}.{e}.gate_proj.weight"), sd.pop(f"{base}.{e}.up_proj.weight")], 0)
                                    for e in range(n)])
        else:
            sd[name] = torch.stack([sd.pop(f"{base}.{e}.down_proj.weight") for e in range(n)])


DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def build(checkpoint, attn, dtype="float32", device="cpu"):
    """The text model in fp32 from the files; for a candidate, then cast to dtype (the modules the class keeps in fp32
    stay fp32, as from_pretrained(dtype=...) keeps them) and moved to device."""
    raw, text, prefix = read_config(checkpoint)
    ConfigCls, ModelCls = classes(text["model_type"])
    cfg = ConfigCls.from_dict({k: v for k, v in text.items() if k not in ("architectures", "transformers_version")})
    model = None
    if text["model_type"] == "qwen3_5_moe_text":
        try:  # the plain per-expert loop, as written in the modeling file
            model = ModelCls._from_config(cfg, attn_implementation=attn, experts_implementation="eager", dtype=torch.float32)
        except (TypeError, ValueError) as e:
            print(f"experts_implementation=eager not accepted ({e}); transformers' default experts path")
    if model is None:
        model = ModelCls._from_config(cfg, attn_implementation=attn, dtype=torch.float32)
    model.eval()
    sd, skipped = file_tensors(checkpoint, prefix)
    wanted = set(model.state_dict().keys())
    fuse_experts(sd, wanted)
    if cfg.tie_word_embeddings and "lm_head.weight" not in sd:
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
    missing, extra = sorted(wanted - set(sd)), sorted(set(sd) - wanted)
    if missing or extra:
        raise Refusal(f"{checkpoint}: weights do not match the config's model: missing {missing[:6]}, unexpected {extra[:6]}")
    model.load_state_dict(sd, strict=True)
    kept = []
    if dtype != "float32":
        model.to(DTYPES[dtype])
        keep = list(getattr(model, "_keep_in_fp32_modules", None) or []) + list(getattr(model, "_keep_in_fp32_modules_strict", None) or [])
        for name, p in model.named_parameters():
            if any(k in name for k in keep):
                p.data = p.data.to(torch.float32)
                kept.append(name)
    model.to(device)
    model._decodiff_kept_fp32 = kept
    return raw, text, prefix, model, skipped


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


# ----------------------------------------------------------------------------------------------
# Recording
# ----------------------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.active = False
        self.file = None
        self.layer = None  # the linear-attention layer running now
        self.fired = {}

    def put(self, key, t):
        if self.active:
            self.file.put(key, t.detach().to("cpu", torch.float32).contiguous().clone())
            kind = key.split(".", 2)[-1] if key.startswith("layers.") else key
            self.fired[kind] = self.fired.get(kind, 0) + 1


REC = Recorder()
KERNEL = {"src": None, "l2": []}


def bound(orig, args, kwargs):
    try:
        ba = inspect.signature(orig).bind(*args, **kwargs)
        a = dict(ba.arguments)
        a.update(a.pop("kwargs", {}) or {})
        return a
    except (TypeError, ValueError):
        a = dict(zip(["query", "key", "value", "g", "beta"], args))
        a.update(kwargs)
        return a


def normed_heads(x, y, src, hv):
    """transformers' l2norm output y (of input x) as [T, Hv, dk], whatever layout the kernel normalised in."""
    t, heads = src.shape[1], src.shape[2]
    s = src.float()
    if x.shape == s.shape and torch.equal(x, s):
        r = y
    elif x.shape == s.transpose(1, 2).shape and torch.equal(x, s.transpose(1, 2)):
        r = y.transpose(1, 2)
    else:
        rep = s.repeat_interleave(hv // heads, dim=2)
        if x.shape == rep.shape and torch.equal(x, rep):
            r = y
        elif x.shape == rep.transpose(1, 2).shape and torch.equal(x, rep.transpose(1, 2)):
            r = y.transpose(1, 2)
        else:
            raise RuntimeError(f"l2norm input {tuple(x.shape)} is not the kernel's q/k {tuple(src.shape)} in any layout")
    if r.shape[2] != hv:
        r = r.repeat_interleave(hv // r.shape[2], dim=2)
    return r[0]


def wrap_kernel(orig):
    def kernel(*args, **kwargs):
        if not REC.active or REC.layer is None:
            return orig(*args, **kwargs)
        a = bound(orig, args, kwargs)
        q, k, v = a["query"], a["key"], a["value"]
        KERNEL["src"], KERNEL["l2"] = (q, k), []
        try:
            out, state = orig(*args, **kwargs)
        finally:
            KERNEL["src"] = None
        i, hv = REC.layer, v.shape[2]
        l2 = KERNEL["l2"]
        if len(l2) != 2:
            raise RuntimeError(f"layer {i}: the kernel called l2norm {len(l2)} times, expected 2 (q, k)")
        REC.put(f"layers.{i}.linear.q", normed_heads(*l2[0], q, hv))
        REC.put(f"layers.{i}.linear.k", normed_heads(*l2[1], k, hv))
        REC.put(f"layers.{i}.linear.v", v[0])
        REC.put(f"layers.{i}.linear.beta", a["beta"][0])
        REC.put(f"layers.{i}.linear.decay", a["g"][0])
        s0 = a.get("initial_state")
        dk, dv = k.shape[-1], v.shape[-1]
        if s0 is not None:  # absent on the layer's first call, which starts from zeros
            REC.put(f"layers.{i}.linear.state_read", s0[0])
        REC.put(f"layers.{i}.linear.core_out", out[0])
        if state is None:
            raise RuntimeError(f"layer {i}: the kernel returned no final state")
        REC.put(f"layers.{i}.linear.state", state[0])
        return out, state
    kernel.__wrapped_original__ = orig
    return kernel


def wrap_l2norm(orig):
    def l2norm(x, *args, **kwargs):
        y = orig(x, *args, **kwargs)
        if KERNEL["src"] is not None:
            KERNEL["l2"].append((x.detach().clone(), y.detach().clone()))
        return y
    l2norm.__wrapped_original__ = orig
    return l2norm


def install_wrappers():
    """Wraps the module-level kernel functions the Gated DeltaNet forward looks up in its module's globals."""
    undo = []
    for name in MODULES:
        mod = __import__(name, fromlist=["_"])
        for fn, wrap in (("torch_chunk_gated_delta_rule", wrap_kernel), ("torch_recurrent_gated_delta_rule", wrap_kernel),
                         ("l2norm", wrap_l2norm)):
            orig = getattr(mod, fn)
            setattr(mod, fn, wrap(orig))
            undo.append((mod, fn, orig))
    return undo


def conv_state(cache, i):
    layer = cache.layers[i]
    cs = getattr(layer, "conv_states", None)
    if isinstance(cs, (list, tuple, dict)):  # 5.17: a dict {state index: tensor}
        cs = cs[0] if len(cs) else None
    return cs if isinstance(cs, torch.Tensor) else None


def has_state(cache, i):
    """Whether the layer's cache holds state from an earlier call (the flag transformers itself consults)."""
    if cache is None:
        return False
    f = getattr(cache, "has_previous_state", None)
    if callable(f):
        for call in (lambda: f(i, state_idx=0), lambda: f(i), lambda: f()):
            try:
                return bool(call())
            except TypeError:
                continue
    h = getattr(cache.layers[i], "has_previous_state", None)
    if isinstance(h, (list, tuple)):
        return bool(h[0])
    if h is not None and not callable(h):
        return bool(h)
    return conv_state(cache, i) is not None


def rows(o):
    """A module's [B, T, H] output (or the first of a tuple) as [T, H] (B = 1)."""
    t = o[0] if isinstance(o, tuple) else o
    return t.reshape(-1, t.shape[-1])


def install_hooks(model, kind):
    inner = model.model
    cfg = model.config
    km1 = cfg.linear_conv_kernel_dim - 1
    conv_dim = 2 * cfg.linear_num_key_heads * cfg.linear_key_head_dim + cfg.linear_num_value_heads * cfg.linear_value_head_dim
    hooks = [inner.embed_tokens.register_forward_hook(lambda m, a, o: REC.put("embed", rows(o))),
             inner.norm.register_forward_hook(lambda m, a, o: REC.put("final_norm", rows(o)))]
    for i, layer in enumerate(inner.layers):
        hooks.append(layer.register_forward_hook(lambda m, a, o, i=i: REC.put(f"layers.{i}.out", rows(o))))
        hooks.append(layer.mlp.register_forward_hook(
            lambda m, a, o, i=i: REC.put(f"layers.{i}.{'moe' if kind == 'moe' else 'mlp'}.out", rows(o))))
        if cfg.layer_types[i] == "linear_attention":
            def pre(m, args, kwargs, i=i):
                if not REC.active:
                    return
                REC.layer = i
                cache = kwargs.get("cache_params")
                # on the layer's first call there is no state to read: the point is absent (all zeros by definition)
                if has_state(cache, i):
                    REC.put(f"layers.{i}.linear.conv_state_read", conv_state(cache, i)[0, :, -km1:].transpose(0, 1))

            def post(m, args, kwargs, out, i=i):
                if not REC.active:
                    return
                REC.layer = None
                cs = conv_state(kwargs.get("cache_params"), i)
                if cs is None:
                    raise RuntimeError(f"layer {i}: no conv state in the cache after the layer ran")
                REC.put(f"layers.{i}.linear.conv_state", cs[0, :, -km1:].transpose(0, 1))
                REC.put(f"layers.{i}.linear.out", rows(out))
            hooks.append(layer.linear_attn.register_forward_pre_hook(pre, with_kwargs=True))
            hooks.append(layer.linear_attn.register_forward_hook(post, with_kwargs=True))
        else:
            a = layer.self_attn
            hd, nh = a.head_dim, cfg.num_attention_heads

            def gate(m, args, out, hd=hd, i=i):
                # the module's own split: view (T, H, 2·hd), chunk in two along the last axis, gate = second half
                g = torch.chunk(out.view(*out.shape[:-1], -1, hd * 2), 2, dim=-1)[1]
                REC.put(f"layers.{i}.attn.gate", torch.sigmoid(g.reshape(*out.shape[:-1], -1))[0])
            hooks.append(a.q_proj.register_forward_hook(gate))
            hooks.append(a.o_proj.register_forward_pre_hook(lambda m, args, i=i: REC.put(f"layers.{i}.attn.out", args[0][0])))
    return hooks



# ----------------------------------------------------------------------------------------------
# Porting bugs, planted in transformers for one run (the corpus: reference-dumps/corpus/make_qwen_corpus.py)
# ----------------------------------------------------------------------------------------------

BUGS = {
    # name: (where it acts, what a porter got wrong)
    "state-kept-in-bf16": "the recurrent state rounded to bf16 at every write (the cache stores the model's dtype)",
    "gated-norm-no-gate": "the gated RMSNorm before out_proj without its silu(z) gate",
    "decay-after-update": "the recurrent (decode) kernel applies the decay after the delta update instead of before",
    "beta-not-sigmoided": "beta taken as in_proj_b's raw output, without the sigmoid",
    "conv-state-zeroed": "the conv state zeroed at the prefill -> decode hand-over (the prefill's window lost)",
    "attn-gate-missing": "the gated attention's output not multiplied by sigmoid(gate)",
    "shared-expert-gate-missing": "the MoE shared expert added without its sigmoid(shared_expert_gate) weight",
    "l2norm-mean-form": "the Gated DeltaNet's q/k l2 norm as x·rsqrt(mean(x²)+eps) (an RMSNorm) instead of the sum",
    "decode-q-unscaled": "the recurrent (decode) kernel without the query's dk^-1/2 scale (prefill's chunked one keeps it)",
    "conv-taps-reversed": "the causal conv's kernel taps applied in reverse order (prefill and decode)",
    "dt-bias-missing": "the decay's softplus(a + dt_bias) without dt_bias",
    "norm-eps-1e-5": "every RMSNorm (input, post-attention, q/k, gated, final) with eps 1e-5 instead of the config's 1e-6",
}


def bug_applies(bug, moe):
    return bug != "shared-expert-gate-missing" or moe


class _Undo:
    """One undo callable and the phase its patch was installed in (outer patches come off before the recording's)."""

    def __init__(self, fn, phase):
        self.fn, self.phase = fn, phase

    def __call__(self):
        self.fn()


def _undo(fn, phase):
    return _Undo(fn, phase)


def _set_global(name, fn, phase):
    """Replaces a module-level function of both Qwen3.5 modeling modules; returns the undo callables."""
    out = []
    for mname in MODULES:
        mod = __import__(mname, fromlist=["_"])
        orig = getattr(mod, name)
        setattr(mod, name, fn(orig, mod))
        out.append(_undo(lambda mod=mod, orig=orig: setattr(mod, name, orig), phase))
    return out


def _recurrent_decay_after(orig, mod):
    """transformers' torch_recurrent_gated_delta_rule with the decay applied after the delta update."""
    return _recurrent_variant(mod, decay_after=True, scale_q=True)


def _recurrent_q_unscaled(orig, mod):
    """transformers' torch_recurrent_gated_delta_rule without the query's dk^-1/2 scale."""
    return _recurrent_variant(mod, decay_after=False, scale_q=False)


def _l2norm_mean(orig, mod):
    def l2norm(x, dim=-1, eps=1e-6):
        return x * torch.rsqrt((x * x).mean(dim=dim, keepdim=True) + eps)  # BUG: the mean, not the sum
    return l2norm


def _recurrent_variant(mod, decay_after, scale_q):
    """transformers 5.17's torch_recurrent_gated_delta_rule (the decode kernel), with one porting bug switched on."""
    def torch_recurrent_gated_delta_rule(query, key, value, g, beta, initial_state=None, output_final_state=False,
                                         use_qk_l2norm_in_kernel=False, **kwargs):
        initial_dtype = query.dtype
        batch_size, sequence_length, _, k_head_dim = key.shape
        num_v_heads, v_head_dim = value.shape[-2:]
        if key.shape[2] != num_v_heads:
            query, key = (x.repeat_interleave(num_v_heads // x.shape[2], dim=2) for x in (query, key))
        query, key, value, beta, decay = [x.transpose(1, 2).to(torch.float32, memory_format=torch.contiguous_format)
                                          for x in (query, key, value, beta, g)]
        if use_qk_l2norm_in_kernel:
            query = mod.l2norm(query, dim=-1, eps=1e-6)
            key = mod.l2norm(key, dim=-1, eps=1e-6)
        if scale_q:
            query = query / (query.shape[-1] ** 0.5)
        if initial_state is None:
            state = torch.zeros((batch_size, num_v_heads, k_head_dim, v_head_dim), dtype=value.dtype, device=value.device)
        else:
            state = initial_state.to(value)
        out = torch.zeros_like(value)
        for i in range(sequence_length):
            q_t, k_t, v_t = query[:, :, i], key[:, :, i], value[:, :, i]
            beta_t = beta[:, :, i].unsqueeze(-1)
            if not decay_after:
                state = state * decay[:, :, i].exp()[..., None, None]
            kv_mem = (state * k_t.unsqueeze(-1)).sum(dim=-2)
            delta = (v_t - kv_mem) * beta_t
            state = state + k_t.unsqueeze(-1) * delta.unsqueeze(-2)
            if decay_after:
                state = state * decay[:, :, i].exp()[..., None, None]  # BUG: the decay after the update
            out[:, :, i] = (state * q_t.unsqueeze(-1)).sum(dim=-2)
        state = state if output_final_state else None
        return out.transpose(1, 2).contiguous().to(initial_dtype), state
    return torch_recurrent_gated_delta_rule


def _state_rounded(orig, mod):
    def kernel(*args, **kwargs):
        out, state = orig(*args, **kwargs)
        if state is not None:
            state = state.to(torch.bfloat16).to(state.dtype)  # BUG: what the cache keeps is bf16
        return out, state
    kernel.__name__ = getattr(orig, "__name__", "kernel")
    try:
        kernel.__signature__ = inspect.signature(orig)
    except (TypeError, ValueError):
        pass
    return kernel


BETA_SRC = {}


def _beta_raw(orig, mod):
    def kernel(*args, **kwargs):
        m, hs = BETA_SRC.get("module"), BETA_SRC.get("hidden")
        if m is not None:
            raw = m.in_proj_b(hs)  # BUG: b, never sigmoided
            if "beta" in kwargs:
                if raw.shape != kwargs["beta"].shape:
                    raise RuntimeError(f"beta bug: raw b {tuple(raw.shape)} vs beta {tuple(kwargs['beta'].shape)}")
                kwargs["beta"] = raw.to(kwargs["beta"].dtype)
            else:
                args = list(args)
                if raw.shape != args[4].shape:
                    raise RuntimeError(f"beta bug: raw b {tuple(raw.shape)} vs beta {tuple(args[4].shape)}")
                args[4] = raw.to(args[4].dtype)
        return orig(*args, **kwargs)
    try:
        kernel.__signature__ = inspect.signature(orig)
    except (TypeError, ValueError):
        pass
    return kernel


def install_bug(model, name, phase):
    """Plants the bug; phase "inner" (before the recording wrappers: inside the kernels) or "outer" (after them).
    Returns undo callables. A bug that finds nothing to patch is an error, never a silent clean run."""
    cfg = model.config
    inner_model = model.model
    undo, n = [], 0
    if name == "state-kept-in-bf16" and phase == "inner":
        for fn in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"):
            undo += _set_global(fn, _state_rounded, phase)
        n = len(undo)
    elif name == "decay-after-update" and phase == "inner":
        undo += _set_global("torch_recurrent_gated_delta_rule", _recurrent_decay_after, phase)
        n = len(undo)
    elif name == "beta-not-sigmoided" and phase == "outer":
        for i, layer in enumerate(inner_model.layers):
            if cfg.layer_types[i] != "linear_attention":
                continue

            def pre(m, args, kwargs):
                BETA_SRC["module"] = m
                BETA_SRC["hidden"] = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
            h = layer.linear_attn.register_forward_pre_hook(pre, with_kwargs=True)
            undo.append(_undo(h.remove, phase))
            n += 1
        for fn in ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule"):
            undo += _set_global(fn, _beta_raw, phase)
    elif name == "gated-norm-no-gate" and phase == "outer":
        def fwd(self, hidden_states, gate=None, **kwargs):
            input_dtype = hidden_states.dtype
            h = hidden_states.to(torch.float32)
            variance = h.pow(2).mean(-1, keepdim=True)
            h = h * torch.rsqrt(variance + getattr(self, "variance_epsilon", getattr(self, "eps", 1e-6)))
            h = self.weight * h.to(input_dtype)
            return h.to(input_dtype)  # BUG: no * silu(gate)
        import types as _types
        for m in model.modules():
            if type(m).__name__.endswith("RMSNormGated"):
                m.forward = _types.MethodType(fwd, m)
                undo.append(_undo(lambda m=m: m.__dict__.pop("forward", None), phase))
                n += 1
    elif name == "conv-state-zeroed" and phase == "outer":
        last = {}
        for i, layer in enumerate(inner_model.layers):
            if cfg.layer_types[i] != "linear_attention":
                continue

            def pre(m, args, kwargs, i=i):
                hs = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
                t = hs.shape[1]
                cache = kwargs.get("cache_params")
                if t == 1 and last.get(i, 1) > 1 and has_state(cache, i):
                    conv_state(cache, i).zero_()  # BUG: the prefill's conv window not handed to decode
                last[i] = t
            # prepended: the recording's pre-hook (conv_state_read) sees what the buggy engine reads
            h = layer.linear_attn.register_forward_pre_hook(pre, with_kwargs=True, prepend=True)
            undo.append(_undo(h.remove, phase))
            n += 1
    elif name == "attn-gate-missing" and phase == "outer":
        for i, layer in enumerate(inner_model.layers):
            if cfg.layer_types[i] == "linear_attention":
                continue
            hd = layer.self_attn.head_dim

            def post(m, args, out, hd=hd):
                o = out.view(*out.shape[:-1], -1, hd * 2).clone()
                o[..., hd:] = 1e4  # BUG: sigmoid(gate) == 1: the output gate left out (after attn.gate was recorded)
                return o.view(out.shape)
            h = layer.self_attn.q_proj.register_forward_hook(post)
            undo.append(_undo(h.remove, phase))
            n += 1
    elif name == "shared-expert-gate-missing" and phase == "outer":
        for layer in inner_model.layers:
            g = getattr(layer.mlp, "shared_expert_gate", None)
            if g is None:
                continue
            h = g.register_forward_hook(lambda m, a, out: torch.full_like(out, 1e4))  # BUG: weight 1
            undo.append(_undo(h.remove, phase))
            n += 1
    elif name == "decode-q-unscaled" and phase == "inner":
        undo += _set_global("torch_recurrent_gated_delta_rule", _recurrent_q_unscaled, phase)
        n = len(undo)
    elif name == "l2norm-mean-form" and phase == "inner":
        undo += _set_global("l2norm", _l2norm_mean, phase)
        n = len(undo)
    elif name in ("conv-taps-reversed", "dt-bias-missing") and phase == "outer":
        for i, layer in enumerate(inner_model.layers):
            if cfg.layer_types[i] != "linear_attention":
                continue
            la = layer.linear_attn
            target = (la.conv1d, "weight") if name == "conv-taps-reversed" else (la, "dt_bias")
            saved = {}

            def pre(m, args, kwargs, target=target, saved=saved, name=name):
                mod_, attr = target
                t = getattr(mod_, attr)
                saved["data"] = t.data
                t.data = t.data.flip(-1).contiguous() if name == "conv-taps-reversed" else torch.zeros_like(t.data)

            def post(m, args, kwargs, out, target=target, saved=saved):
                mod_, attr = target
                getattr(mod_, attr).data = saved.pop("data")
            h1 = la.register_forward_pre_hook(pre, with_kwargs=True, prepend=True)
            h2 = la.register_forward_hook(post, with_kwargs=True)
            undo.append(_undo(h1.remove, phase))
            undo.append(_undo(h2.remove, phase))
            n += 1
    elif name == "norm-eps-1e-5" and phase == "outer":
        for m in model.modules():
            cls = type(m).__name__
            if not (cls.endswith("RMSNorm") or cls.endswith("RMSNormGated")):
                continue
            for attr in ("eps", "variance_epsilon"):
                if isinstance(getattr(m, attr, None), float):
                    old_eps = getattr(m, attr)
                    setattr(m, attr, 1e-5)  # BUG: not the config's rms_norm_eps
                    undo.append(_undo(lambda m=m, attr=attr, old_eps=old_eps: setattr(m, attr, old_eps), phase))
                    n += 1
    else:
        return []
    if n == 0:
        raise RuntimeError(f"bug {name}: nothing to patch in this model")
    return undo


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------

@torch.no_grad()
def run_steps(model, feeds, greedy_after=None, out_dir=None, on_step=None):
    """feeds: the token lists of the steps (teacher-forced); greedy_after=(prompt, n): prompt then n greedy decodes.
    Returns (tokens, steps, logits)."""
    cache = None
    tokens, steps, all_logits = [], [], []
    n_steps = len(feeds) if feeds is not None else greedy_after[1] + 1
    feed = feeds[0] if feeds is not None else list(greedy_after[0])
    start = 0
    for s in range(n_steps):
        tokens += feed
        sf = None
        if out_dir is not None:
            sf = md.StepFile(os.path.join(out_dir, f"step-{s:04d}.safetensors"), 40 * model.config.num_hidden_layers + 8)
            REC.file, REC.active = sf, True
        try:
            out = model(input_ids=torch.tensor([feed], device=model.device), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits = out.logits[0, -1].detach().to("cpu", torch.float32).clone()
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
    """(a) the same steps with every hook and wrapper removed: bit-identical logits; (b) one full forward without a
    cache (chunked kernel over everything): ~1e-6; (c) every token fed alone from an empty cache (recurrent kernel and
    causal_conv1d_update from the second token on): ~1e-6, the chunked = token-by-token property in transformers."""
    feeds = [tokens[st["start"]:st["start"] + st["length"]] for st in steps]
    _, _, plain = run_steps(model, feeds)
    inc = max(float((a - b).abs().max()) for a, b in zip(plain, logits))
    pos = [st["start"] + st["length"] - 1 for st in steps]
    full = model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0].float()[pos]
    rel_full = max(md.rel_l2(r, full[k]) for k, r in enumerate(logits))
    _, _, single = run_steps(model, [[t] for t in tokens])
    rel_single = max(md.rel_l2(r, single[p]) for r, p in zip(logits, pos))
    ver = {"incremental_unhooked_max_abs_logit_diff": inc, "full_forward_max_rel_l2_logits": rel_full,
           "token_by_token_max_rel_l2_logits": rel_single}
    ver["ok"] = bool(inc == 0.0 and rel_full < 2e-5 and rel_single < 2e-5)
    print(f"verify: unhooked {inc:.3e}, full forward {rel_full:.3e}, token by token {rel_single:.3e} -> {'OK' if ver['ok'] else 'FAIL'}")
    return ver


def hf_loader_check(checkpoint, model, prefix):
    """transformers' own from_pretrained on the same folder gives the same logits (key mapping, expert fusion)."""
    try:
        raw, text, _ = read_config(checkpoint)
        ConfigCls, ModelCls = classes(text["model_type"])
        kw = {"dtype": torch.float32, "attn_implementation": "sdpa"}
        if prefix != "model.":
            kw["config"] = transformers.AutoConfig.from_pretrained(checkpoint).get_text_config()
            kw["key_mapping"] = {r"^model\.language_model\.": "model."}
        hf = ModelCls.from_pretrained(checkpoint, **kw).eval()
        ids = torch.tensor([list(range(3, 40))])
        with torch.no_grad():
            a = hf(input_ids=ids, use_cache=False).logits
            model.config._attn_implementation = "sdpa"
            b = model(input_ids=ids, use_cache=False).logits
            model.config._attn_implementation = ATTN
        d = float((a - b).abs().max())
        print(f"from_pretrained check: max|dlogit| {d:.3e}")
        return d
    except Exception as e:  # reported, not fatal: the dump's own loader is strict
        print(f"from_pretrained check failed: {type(e).__name__}: {str(e)[:300]}")
        return f"{type(e).__name__}: {str(e)[:200]}"


def make_dump(checkpoint, out_dir, case, feeds=None, greedy=None, prompt_text=None, dtype="float32", device="cpu",
              bug=None, verify_run=None, hf_check=True):
    """A dump of the checkpoint run by transformers. dtype/device other than float32/cpu: a candidate (a third-party
    engine in that precision class), its manifest stating the dtype and device truthfully. bug: a porting bug from
    BUGS planted in transformers for this run (the manifest says nothing of it: a producer never knows its bug).
    verify_run (default: only for a clean fp32 CPU run): the incremental / full / token-by-token checks."""
    t0 = time.time()
    ck = os.path.basename(os.path.normpath(checkpoint))
    if bug is not None and bug not in BUGS:
        raise Refusal(f"--bug {bug}: not one of {', '.join(BUGS)}")
    if verify_run is None:
        verify_run = dtype == "float32" and device == "cpu" and bug is None
    raw, text, prefix, model, skipped = build(checkpoint, ATTN, dtype, device)
    kind = TEXT_TYPES[text["model_type"]]
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    manifest = {
        "format": "decodiff-dump", "version": 1,
        "producer": {"name": "transformers", "version": transformers.__version__, "dtype": dtype, "attention": "sdpa",
                     "torch": torch.__version__, "device": device, "experts": "eager" if kind == "moe" else None,
                     "linear_attention_kernels": "torch_chunk_gated_delta_rule / torch_recurrent_gated_delta_rule",
                     "script": "reference-dumps/qwen35_dumps.py"},
        "model": {"model_type": text["model_type"], "num_hidden_layers": text["num_hidden_layers"],
                  "config_sha256": md.sha256_file(os.path.join(checkpoint, "config.json")),
                  "weights_sha256": md.weights_sha256(checkpoint), "checkpoint": ck},
        "tokens": [], "prompt_length": len(feeds[0]) if feeds else len(greedy[0]),
        "mode": "teacher_forced" if feeds else "greedy", "case": case, "steps": [],
    }
    if prefix != "model.":
        manifest["model"]["layout"] = f"{raw.get('architectures', ['?'])[0]} (text model only; {len(skipped)} other tensors not read)"
    if prompt_text:
        manifest["prompt_text"] = prompt_text
    if getattr(model, "_decodiff_kept_fp32", None):
        manifest["producer"]["kept_in_float32"] = model._decodiff_kept_fp32

    def on_step(st, fed):
        manifest["steps"].append({k: st[k] for k in ("index", "start", "length", "file", "next_token", "top2_margin")})
        manifest["tokens"] = list(fed)
        md.write_manifest(out_dir, manifest)

    bug_undo = []
    try:
        # a bug inside the kernels acts under the recording (the kernel's own arguments are recorded, its results are
        # the buggy ones); a bug in what reaches the kernels acts over it (the recorded arguments are the buggy ones)
        if bug:
            bug_undo += install_bug(model, bug, "inner")
        hooks = install_hooks(model, kind)
        undo = install_wrappers()
        if bug:
            bug_undo += install_bug(model, bug, "outer")
        REC.fired = {}
        try:
            tokens, steps, logits = run_steps(model, feeds, greedy, out_dir, on_step)
        finally:
            for h in hooks:
                h.remove()
            outer = [u for u in bug_undo if getattr(u, "phase", None) == "outer"]
            for u in reversed(outer):
                u()
            for mod, fn, orig in undo:
                setattr(mod, fn, orig)
    finally:
        for u in reversed(bug_undo):
            if getattr(u, "phase", None) != "outer":
                u()
    L = text["num_hidden_layers"]
    for kind_name in ("linear.q", "linear.state", "linear.state_read", "linear.conv_state_read", "attn.q", "attn.gate", "out"):
        if REC.fired.get(kind_name, 0) == 0:
            raise RuntimeError(f"{ck}/{case}: capture point kind {kind_name} never recorded ({REC.fired})")
    if verify_run:
        manifest["verification"] = verify(model, tokens, steps, logits)
        if hf_check:
            manifest["verification"]["from_pretrained_max_abs_logit_diff"] = hf_loader_check(checkpoint, model, prefix)
    manifest["tokens"] = tokens
    manifest["complete"] = True
    md.write_manifest(out_dir, manifest)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out_dir, "*")))
    print(f"=== {ck}/{case}: {len(tokens)} tokens, steps {[s['length'] for s in steps]}, {size} bytes, "
          f"{time.time() - t0:.1f}s; next tokens {[s['next_token'] for s in steps]}, "
          f"min margin {min(s['top2_margin'] for s in steps):.3f}")
    print("points step 0: " + json.dumps({k: v for k, v in steps[0]["shapes"].items() if not k.startswith("layers.") or k.startswith("layers.0.") or k.startswith(f"layers.{L - 1}.")}))
    if len(steps) > 1:
        print("points step 1 (layer 0): " + json.dumps({k: v for k, v in steps[1]["shapes"].items() if k.startswith("layers.0.")}))
    del model
    gc.collect()
    return manifest


def encode(checkpoint):
    try:
        from tokenizers import Tokenizer
        ids = Tokenizer.from_file(os.path.join(checkpoint, "tokenizer.json")).encode(TEXT, add_special_tokens=False).ids
        return [2] + ids, "<bos>" + TEXT
    except Exception as e:  # no tokenizers: fixed pseudo-random ids (only ids matter to a dump)
        print(f"tokenizer unavailable ({e}); using pseudo-random ids")
        g = torch.Generator().manual_seed(7)
        return [2] + torch.randint(10, 1000, (120,), generator=g).tolist(), None


def run_all(args):
    torch.set_num_threads(1)
    torch.manual_seed(0)
    install_attention()
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    for mod in ("fla", "causal_conv1d"):
        try:
            __import__(mod)
            raise Refusal(f"the package '{mod}' is importable: transformers would use its kernels instead of the torch "
                          f"reference ones; run in an environment without it")
        except ImportError:
            pass
    summary = {}
    for ck in args.only or ["qwen35-tiny", "qwen35-tiny-moe", "qwen35-tiny-llamacpp", "qwen35-tiny-moe-llamacpp"]:
        ckdir = os.path.join(args.checkpoints, ck)
        ids, text = encode(ckdir)
        for case, lengths, n_prompt, n_dec in CASES:
            out = os.path.join(args.out, ck, case)
            if lengths:
                total = sum(lengths)
                if len(ids) < total:
                    raise Refusal(f"the prompt text gives {len(ids)} tokens, the case needs {total}")
                feeds, pos = [], 0
                for n in lengths:
                    feeds.append(ids[pos:pos + n])
                    pos += n
                m = make_dump(ckdir, out, case, feeds=feeds)
            else:
                m = make_dump(ckdir, out, case, greedy=(ids[:n_prompt], n_dec))
            summary[f"{ck}/{case}"] = {"prompt_length": m["prompt_length"], "steps": len(m["steps"]),
                                       "step_lengths": [s["length"] for s in m["steps"]], "tokens": m["tokens"],
                                       "min_top2_margin": min(s["top2_margin"] for s in m["steps"]),
                                       "verification": m["verification"],
                                       "config_sha256": m["model"]["config_sha256"],
                                       "weights_sha256": m["model"]["weights_sha256"]}
    path = os.path.join(args.out, "dumps-summary.json")
    old = json.load(open(path)) if os.path.exists(path) else {}
    old.update(summary)
    with open(path, "w") as f:
        json.dump(old, f, indent=1)
        f.write("\n")
    bad = [k for k, v in summary.items() if not v["verification"]["ok"]]
    if bad:
        print(f"VERIFICATION FAILURES: {bad}")
        sys.exit(1)


def add_arguments(sub):
    q = sub.add_parser("qwen35", help="the Qwen3.5 checkpoints' dumps (reference-dumps/qwen35_dumps.py)")
    q.add_argument("--checkpoints", default=os.path.join(REPO, "checkpoints"))
    q.add_argument("--out", default=HERE)
    q.add_argument("--only", nargs="*")
    return q


def teacher_feeds(ref_dir):
    """A reference dump's steps as the token lists to feed (its tokens cut at its step lengths)."""
    m = json.load(open(os.path.join(ref_dir, "manifest.json"), encoding="utf-8"))
    toks = m["tokens"]
    return [toks[st["start"]:st["start"] + st["length"]] for st in m["steps"]]


def run_candidate(args):
    """One dump teacher-forced on a reference dump's tokens and step lengths, in a dtype on a device, with an
    optional planted bug: a third-party candidate (or, in float32 with a bug, a buggy reference)."""
    torch.manual_seed(0)
    install_attention()
    feeds = teacher_feeds(args.reference)
    case = args.case or ("candidate" if not args.bug else f"candidate-{args.bug}")
    m = make_dump(args.checkpoint, args.out, case, feeds=feeds, dtype=args.dtype, device=args.device, bug=args.bug,
                  hf_check=False)
    print(f"wrote {args.out}: producer dtype {m['producer']['dtype']} on {m['producer']['device']}"
          f"{', bug ' + args.bug if args.bug else ''}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all")
    a.add_argument("--checkpoints", default=os.path.join(REPO, "checkpoints"))
    a.add_argument("--out", default=HERE)
    a.add_argument("--only", nargs="*")
    c = sub.add_parser("candidate", help="a dump teacher-forced on a reference's steps, in a dtype, optionally with a bug")
    c.add_argument("--checkpoint", required=True)
    c.add_argument("--reference", required=True, help="the reference dump whose tokens and step lengths are fed")
    c.add_argument("--out", required=True)
    c.add_argument("--dtype", default="bfloat16", choices=list(DTYPES))
    c.add_argument("--device", default="cpu", help="cpu or cuda")
    c.add_argument("--bug", choices=list(BUGS), help="plant this porting bug in transformers for the run")
    c.add_argument("--case", help="the manifest's case name (default: candidate[-BUG])")
    main_from(ap.parse_args())


def main_from(args):
    try:
        if getattr(args, "cmd", None) == "candidate":
            run_candidate(args)
        else:
            run_all(args)
    except md.Refusal as e:
        print(f"qwen35_dumps.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
