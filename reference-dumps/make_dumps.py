#!/usr/bin/env python3
"""decodiff reference producer: Hugging Face transformers (5.17) -> decodiff dump v1 (docs/dump-format.md).

One dump = a folder with manifest.json and step-NNNN.safetensors (float32, keys = capture-point names, batch
dimension stripped). Step 0 prefills the whole prompt in one forward; every later step feeds one token through
transformers' own DynamicCache (sliding layers keep their window). Greedy by default; --teacher-tokens feeds a
given token list instead (the producer's own greedy choice is still recorded as next_token).

Checkpoints: a text-only Gemma4ForCausalLM folder (weights under `model.`) or the released multimodal
Gemma4ForConditionalGeneration layout (weights under `model.language_model.`): only the text model is built
and loaded; the vision and audio towers' tensors are never read. bf16 or fp32 weights; --dtype is the precision
the model computes in.

Devices: the CPU (default without a GPU), one GPU, or several through accelerate's device_map: the decoder
layers are split across the GPUs in order (a pipeline split), --max-memory caps each device, and a `cpu` entry
keeps what does not fit in host memory (its layers still compute on the first GPU). Every captured tensor is
moved to the CPU and written to the step file as it is captured, so neither a device nor the host ever holds a
whole step of captures.

Capture points and how they are taken (transformers 5.17 module structure, Gemma4ForCausalLM):
  embed                forward hook on model.embed_tokens (Gemma4TextScaledWordEmbedding: output includes sqrt(H))
  ple                  forward pre-hook on each decoder layer: its per_layer_input argument, stacked to [T, L, P]
  layers.i.attn.q      registered AttentionInterface function: query [B,nh,T,d] (after q_norm + RoPE) -> [T,nh,d]
  layers.i.attn.k/v    wrapper around DynamicCache.update: key/value states entering the cache -> [T,nkv,d]
                       (absent on KV-shared layers, which never call update)
  layers.i.attn.k_read/v_read
                       the attention function's key/value [B,nkv,Tk,d] restricted to the keys the mask allows for the
                       LAST query of the step, in position order -> [C,nkv,d]; checked: C = min(W, p+1) on sliding
                       layers, p+1 on full layers. KV-shared layers get their source layer's tensors here.
                       --read-rows last:N keeps only the last N of those rows (declared in the manifest).
  layers.i.attn.out    forward pre-hook on self_attn.o_proj: its input [T, nh*d]
  layers.i.mlp.out     forward hook on layer.mlp (dense MLP output, before post_feedforward_layernorm[_1])
  layers.i.moe.out     forward hook on layer.experts (Gemma4TextExperts output, before post_feedforward_layernorm_2)
  layers.i.out         forward hook on the decoder layer (after layer_scalar)
  final_norm           forward hook on model.norm
  logits               model output logits at the last position of the step (after final soft-capping) -> [V]

Usage:
  make_dumps.py all [--checkpoints DIR] [--out DIR]      # every standard case (see CASES) + self-checks
  make_dumps.py one CHECKPOINT_DIR OUT_DIR PROMPT [options]
      PROMPT: --prompt-text TEXT | --prompt-file FILE | --prompt-ids 2,.. | --prompt-chat MESSAGES.json
              | --prompt-random N[:SEED]
      options: [--steps N] [--teacher-tokens 2,...] [--dtype float32|bfloat16] [--attention sdpa|eager]
               [--device cpu|cuda] [--max-memory 0=70GiB,1=70GiB,cpu=200GiB] [--offload-folder DIR] [--threads N]
               [--points 'layers.5.*,logits'] [--read-rows last:N] [--no-verify] [--weights-hash full|skip]
               [--force]
  make_dumps.py same DUMP_A DUMP_B                       # every tensor of two dumps compared bit for bit
  make_dumps.py qwen35 [--only qwen35-tiny ...]          # the Qwen3.5 checkpoints' cases (qwen35_dumps.py)
"""
import argparse
import gc
import glob
import hashlib
import json
import math
import os
import re
import resource
import shutil
import struct
import sys
import time

import torch
import transformers
from safetensors import safe_open

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ATTN_NAME = "decodiff_recording"

PROMPTS = {
    # ~6 tokens with the checkpoints' tokenizer, plus <bos>
    "short": "The garden was quiet",
    # ~20 tokens: longer than the sliding window (8)
    "long": "The old lighthouse keeper climbed the stairs every evening at the same hour. There were",
}
# (checkpoint, case, prompt key, decode steps, dtype)
CASES = [
    ("gemma4-tiny", "short", "short", 8, "float32"),
    ("gemma4-tiny", "long", "long", 20, "float32"),
    ("gemma4-tiny", "long-bf16", "long", 20, "bfloat16"),
    ("gemma4-tiny-ple", "short", "short", 8, "float32"),
    ("gemma4-tiny-ple", "long", "long", 20, "float32"),
    ("gemma4-tiny-moe", "short", "short", 8, "float32"),
    ("gemma4-tiny-moe", "long", "long", 20, "float32"),
    ("gemma4-tiny-ple-e2b", "short", "short", 8, "float32"),
    ("gemma4-tiny-ple-e2b", "long", "long", 20, "float32"),
]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
# Above this many prompt tokens only the last position's logits are computed (logits_to_keep=1): all positions' logits
# of a 32k-token prompt are 34 GB in fp32. Below it the whole [T, V] product is computed, as the bundled dumps were.
ALL_LOGITS_MAX_TOKENS = 2048


class Refusal(Exception):
    """Bad input or a run that cannot fit: one line naming the file and the fix, exit 2."""


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 24), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_sha256(folder):
    """docs/dump-format.md: sha256 of the *.safetensors files' bytes, concatenated in file-name order."""
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not files:
        return None
    h = hashlib.sha256()
    for p in files:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 24), b""):
                h.update(chunk)
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# The checkpoint: which layout, how big, where it goes
# ----------------------------------------------------------------------------------------------

def read_config(checkpoint):
    path = os.path.join(checkpoint, "config.json")
    if not os.path.isfile(path):
        raise Refusal(f"{path}: missing; pass a Hugging Face checkpoint folder (config.json + *.safetensors)")
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    mt = cfg.get("model_type")
    if mt == "gemma4_text":
        return cfg, cfg, "model."
    if mt == "gemma4":
        if not isinstance(cfg.get("text_config"), dict):
            raise Refusal(f"{path}: model_type 'gemma4' without a text_config object; not a Gemma 4 checkpoint")
        return cfg, cfg["text_config"], "model.language_model."
    arch = ",".join(cfg.get("architectures") or []) or "?"
    if mt in ("qwen3_5_text", "qwen3_5_moe_text", "qwen3_5", "qwen3_5_moe"):
        raise Refusal(f"{path}: model_type '{mt}' is Qwen3.5; record it with `make_dumps.py qwen35` "
                      f"(reference-dumps/qwen35_dumps.py)")
    raise Refusal(f"{path}: model_type '{mt}' ({arch}) is not Gemma 4; this producer records Gemma 4 checkpoints "
                  f"only (Gemma4ForCausalLM, model_type 'gemma4_text', or Gemma4ForConditionalGeneration, 'gemma4'); "
                  f"Qwen3.5 has `make_dumps.py qwen35`")


def weight_files(checkpoint):
    files = sorted(glob.glob(os.path.join(checkpoint, "*.safetensors")))
    if not files:
        raise Refusal(f"{checkpoint}: no *.safetensors files; the producer reads safetensors checkpoints only")
    return files


def text_tensors(checkpoint, prefix):
    """{stripped name: (file, shape, dtype)} of the text model's tensors; the towers' entries are skipped unread."""
    out = {}
    for p in weight_files(checkpoint):
        with safe_open(p, "pt") as f:
            for k in f.keys():
                if k.startswith(prefix):
                    s = f.get_slice(k)
                    out["model." + k[len(prefix):]] = (p, tuple(s.get_shape()), s.get_dtype())
                elif k.startswith("lm_head."):
                    s = f.get_slice(k)
                    out[k] = (p, tuple(s.get_shape()), s.get_dtype())
    if not out:
        raise Refusal(f"{checkpoint}: no tensor under '{prefix}' in its *.safetensors files; config.json and the "
                      f"weights do not describe the same layout")
    return out


def parse_size(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([KMGT]i?B|B)?\s*", text, re.IGNORECASE)
    if not m:
        raise Refusal(f"--max-memory: '{text}' is not a size (use e.g. 70GiB, 500MB)")
    unit = (m.group(2) or "B").upper()
    mult = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
            "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}[unit]
    return int(float(m.group(1)) * mult)


def parse_max_memory(text):
    """'0=70GiB,1=70GiB,cpu=200GiB' -> {0: bytes, 1: bytes, 'cpu': bytes}"""
    out = {}
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise Refusal(f"--max-memory: '{part}' is not DEVICE=SIZE (e.g. 0=70GiB or cpu=200GiB)")
        dev, size = part.split("=", 1)
        dev = dev.strip()
        key = "cpu" if dev == "cpu" else int(dev) if dev.isdigit() else None
        if key is None:
            raise Refusal(f"--max-memory: device '{dev}' is neither a GPU index nor 'cpu'")
        out[key] = parse_size(size)
    return out


def gib(n):
    return f"{n / 2**30:.1f} GiB"


def plan_devices(checkpoint, prefix, dtype, device, max_memory, offload_folder=None):
    """The device_map argument for from_pretrained (None = plain CPU load), after checking the model fits."""
    tensors = text_tensors(checkpoint, prefix)
    elem = torch.finfo(DTYPES[dtype]).bits // 8
    need = sum(math.prod(shape) for _, shape, _ in tensors.values()) * elem
    spill = " or --offload-folder DIR (the rest waits on disk)"
    if device == "cpu":
        if max_memory:
            if set(max_memory) - {"cpu"}:
                raise Refusal("--max-memory names a GPU but --device is cpu")
            if need > max_memory["cpu"] and not offload_folder:
                raise Refusal(f"{checkpoint}: the text weights need {gib(need)} in {dtype} but --max-memory allows "
                              f"{gib(max_memory['cpu'])}; raise it, use --dtype bfloat16{spill}")
            return "auto", need
        avail = host_available()
        if avail is not None and need > avail:
            raise Refusal(f"{checkpoint}: the text weights need {gib(need)} in {dtype} but the host has {gib(avail)} "
                          f"available; use a GPU (--device cuda), --dtype bfloat16, --max-memory cpu=SIZE{spill}")
        return None, need
    if not torch.cuda.is_available():
        raise Refusal("--device cuda: torch sees no GPU here; run with --device cpu")
    n = torch.cuda.device_count()
    if max_memory:
        bad = [d for d in max_memory if d != "cpu" and d >= n]
        if bad:
            raise Refusal(f"--max-memory names GPU {bad[0]} but torch sees {n} GPU(s) (0..{n - 1})")
        budget = sum(max_memory.values())
        if need > budget and not offload_folder:
            caps = ", ".join(f"{d}: {gib(v)}" for d, v in max_memory.items())
            raise Refusal(f"{checkpoint}: the text weights need {gib(need)} in {dtype} but --max-memory allows "
                          f"{gib(budget)} ({caps}); raise --max-memory, add a cpu=SIZE entry, use --dtype bfloat16{spill}")
        return "auto", need
    if n == 1:
        total = torch.cuda.get_device_properties(0).total_memory
        if need > total * 0.97:
            raise Refusal(f"{checkpoint}: the text weights need {gib(need)} in {dtype} but GPU 0 has {gib(total)}; "
                          f"split it with --max-memory 0=SIZE,cpu=SIZE (layers that do not fit wait in host memory), "
                          f"add GPUs, or use --dtype bfloat16")
        return {"": 0}, need
    return "auto", need


def host_available():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def load(checkpoint, dtype, attn, device_map=None, max_memory=None, offload_folder=None):
    from transformers import AutoConfig, Gemma4ForCausalLM
    raw, text, prefix = read_config(checkpoint)
    kw = dict(attn_implementation=attn)
    if text.get("enable_moe_block"):
        kw["experts_implementation"] = "eager"  # the plain per-expert loop, as written in modeling_gemma4.py
    if prefix != "model.":
        # The multimodal layout: build only the text model and rename its tensors; the towers' are never read.
        kw["config"] = AutoConfig.from_pretrained(checkpoint).get_text_config()
        kw["key_mapping"] = {r"^model\.language_model\.": "model."}
    if device_map is not None:
        kw["device_map"] = device_map
        if max_memory:
            kw["max_memory"] = max_memory
        if offload_folder:
            kw["offload_folder"] = offload_folder
    model = Gemma4ForCausalLM.from_pretrained(checkpoint, dtype=DTYPES[dtype], **kw)
    model.eval()
    placed = getattr(model, "hf_device_map", None) or {}
    if any(v == "disk" for v in placed.values()) and not offload_folder:
        raise Refusal(f"{checkpoint}: the model does not fit in the given memory (accelerate wanted to offload to disk); "
                      f"raise --max-memory or add a cpu=SIZE entry")
    return model


def input_device(model):
    placed = getattr(model, "hf_device_map", None)
    if placed:
        gpus = sorted(v for v in placed.values() if isinstance(v, int))
        return torch.device("cuda", gpus[0]) if gpus else torch.device("cpu")
    return next(model.parameters()).device


def device_summary(model):
    """Which devices hold which decoder layers, e.g. {'cuda:0': '0-33', 'cpu': '34-59'} ('cpu' in a GPU map: the
    weights wait in host memory and the layer computes on the first GPU)."""
    placed = getattr(model, "hf_device_map", None)
    if not placed:
        return {str(next(model.parameters()).device): "all"}

    def where(name):  # the longest entry of the map that contains the module
        best = None
        for k, v in placed.items():
            if k == "" or name == k or name.startswith(k + "."):
                if best is None or len(k) > len(best[0]):
                    best = (k, v)
        return best[1] if best else "?"

    out = {}
    for i in range(model.config.num_hidden_layers):
        v = where(f"model.layers.{i}")
        out.setdefault(f"cuda:{v}" if isinstance(v, int) else str(v), []).append(i)
    return {d: ranges(ix) for d, ix in out.items()}


def ranges(ix):
    runs, s, prev = [], ix[0], ix[0]
    for v in ix[1:]:
        if v != prev + 1:
            runs.append((s, prev))
            s = v
        prev = v
    runs.append((s, prev))
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


# ----------------------------------------------------------------------------------------------
# Streaming step files
# ----------------------------------------------------------------------------------------------

class StepFile:
    """One safetensors step file written tensor by tensor as captured: the header's room is reserved at the start,
    the data follows in capture order, and at the end the header (padded with spaces, as the format allows) goes into
    that room. Written as NAME.partial and renamed into place when complete."""

    def __init__(self, path, n_points_hint):
        self.path = path
        self.tmp = path + ".partial"
        self.reserve = ((200 * max(n_points_hint, 8) + 1024) + 7) // 8 * 8
        self.f = open(self.tmp, "wb")
        self.f.write(b"\0" * (8 + self.reserve))
        self.entries = {}
        self.offset = 0

    def put(self, name, t):
        if name in self.entries:
            raise RuntimeError(f"capture point recorded twice in one step: {name}")
        arr = t.numpy().reshape(-1)
        if arr.size:
            self.f.write(memoryview(arr).cast("B"))
        n = arr.size * 4
        self.entries[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [self.offset, self.offset + n]}
        self.offset += n

    def close(self):
        header = json.dumps(self.entries, separators=(",", ":")).encode("utf-8")
        if len(header) > self.reserve:  # more points than foreseen: rewrite with a larger header (chunked copy)
            self._rewrite(header)
        else:
            self.f.seek(0)
            self.f.write(struct.pack("<Q", self.reserve))
            self.f.write(header + b" " * (self.reserve - len(header)))
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
        os.replace(self.tmp, self.path)
        return os.path.getsize(self.path)

    def _rewrite(self, header):
        self.f.close()
        pad = (8 - len(header) % 8) % 8
        header += b" " * pad
        tmp2 = self.tmp + "2"
        with open(self.tmp, "rb") as src, open(tmp2, "wb") as dst:
            dst.write(struct.pack("<Q", len(header)))
            dst.write(header)
            src.seek(8 + self.reserve)
            shutil.copyfileobj(src, dst, 1 << 24)
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp2, self.tmp)

    def abort(self):
        try:
            self.f.close()
        finally:
            if os.path.exists(self.tmp):
                os.remove(self.tmp)


def glob_regex(globs):
    """The harness's point globs: '*' any run of characters (dots included), '?' one character, nothing else special."""
    parts = []
    for g in globs:
        parts.append("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in g.strip()))
    return re.compile("^(?:" + "|".join(parts) + ")$")


class Recorder:
    def __init__(self):
        self.active = False
        self.file = None
        self.ple = []
        self.positions = None  # absolute positions of this step's tokens
        self.selection = None  # compiled --points regex, or None for every point
        self.read_last = None  # --read-rows last:N
        self.layers_done = 0
        self.progress = None

    def wants(self, key):
        return self.active and (self.selection is None or self.selection.match(key) is not None)

    def begin(self, positions, step_file):
        self.active, self.file, self.ple, self.positions, self.layers_done = True, step_file, [], positions, 0

    def put(self, key, t):
        if not self.wants(key):
            return
        self.file.put(key, t.detach().to("cpu", torch.float32).contiguous())

    def end(self):
        self.active = False
        if self.ple and self.wants_ple():
            self.file.put("ple", torch.stack(self.ple, dim=1).contiguous())  # [T, L, P]
        self.ple = []
        f, self.file = self.file, None
        return f

    def wants_ple(self):
        return self.selection is None or self.selection.match("ple") is not None

    def layer_done(self):
        self.layers_done += 1
        if self.progress:
            self.progress.layer(self.layers_done)


REC = Recorder()


class Progress:
    """One bar per step on stderr: layers done within the step (redrawn in place on a terminal)."""

    def __init__(self, n_steps, n_layers, enabled=True):
        self.n_steps, self.n_layers, self.enabled = n_steps, n_layers, enabled
        self.tty = sys.stderr.isatty()
        self.t0 = self.step = self.tokens = self.start = None

    def begin(self, step, tokens, start):
        self.step, self.tokens, self.start, self.t0 = step, tokens, start, time.time()
        self.layer(0)

    def line(self, done):
        w = 30
        fill = w * done // max(self.n_layers, 1)
        what = f"prefill {self.tokens} tokens" if self.step == 0 else f"decode at {self.start}"
        return (f"step {self.step}/{self.n_steps} ({what}) [{'#' * fill}{'.' * (w - fill)}] "
                f"{done}/{self.n_layers} layers {time.time() - self.t0:.1f}s")

    def layer(self, done):
        if self.enabled and self.tty:
            sys.stderr.write("\r" + self.line(done))
            sys.stderr.flush()

    def end(self, extra=""):
        if self.enabled:
            sys.stderr.write(("\r" if self.tty else "") + self.line(self.n_layers) + (f" {extra}" if extra else "") + "\n")
            sys.stderr.flush()


def last_query_keep(attention_mask, tk, device):
    """Boolean [tk]: the keys the mask lets the last query of this step read."""
    if attention_mask is None:  # SDPA with is_causal (or no mask needed): the last query reads everything
        return torch.ones(tk, dtype=torch.bool, device=device)
    m = attention_mask
    if m.dim() != 4:
        raise RuntimeError(f"unexpected attention mask shape {tuple(m.shape)}")
    row = m[0, 0, -1, :tk]
    if row.dtype == torch.bool:
        return row
    return row > torch.finfo(row.dtype).min / 2  # additive float mask: 0 = allowed, finfo.min = masked


def install_attention(base):
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if base == "sdpa":
        base_fn = ALL_ATTENTION_FUNCTIONS["sdpa"]
    else:
        from transformers.models.gemma4.modeling_gemma4 import eager_attention_forward as base_fn

    def recording_attention(module, query, key, value, attention_mask, **kwargs):
        if REC.active:
            i = module.layer_idx
            cfg = module.config
            REC.put(f"layers.{i}.attn.q", query[0].transpose(0, 1))  # [T, nh, d]
            if REC.wants(f"layers.{i}.attn.k_read") or REC.wants(f"layers.{i}.attn.v_read"):
                tk = key.shape[-2]
                keep = last_query_keep(attention_mask, tk, key.device)
                c = int(keep.sum())
                p = REC.positions[-1]
                sliding = cfg.layer_types[i] == "sliding_attention"
                expect = min(cfg.sliding_window, p + 1) if sliding else p + 1
                if c != expect or not bool(keep[tk - c:].all()):
                    raise RuntimeError(f"layer {i}: last query reads {c} keys of {tk}, expected the last {expect}")
                kept = c if REC.read_last is None else min(c, REC.read_last)
                REC.put(f"layers.{i}.attn.k_read", key[0][:, tk - kept:, :].transpose(0, 1))  # [C, nkv, d]
                REC.put(f"layers.{i}.attn.v_read", value[0][:, tk - kept:, :].transpose(0, 1))
        return base_fn(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(ATTN_NAME, recording_attention)
    # Without this, masking_utils returns NO mask for an unknown attention name (sliding layers would see everything).
    AttentionMaskInterface.register(ATTN_NAME, ALL_MASK_ATTENTION_FUNCTIONS[base])


def install_hooks(model):
    inner = model.model
    hooks = []
    hooks.append(inner.embed_tokens.register_forward_hook(lambda m, a, o: REC.put("embed", o[0])))
    hooks.append(inner.norm.register_forward_hook(lambda m, a, o: REC.put("final_norm", o[0])))
    for i, layer in enumerate(inner.layers):
        def pre_layer(m, args, kwargs, i=i):
            pli = args[1] if len(args) > 1 else kwargs.get("per_layer_input")
            if REC.active and pli is not None and REC.wants_ple():
                assert len(REC.ple) == i, "PLE inputs out of order"
                REC.ple.append(pli[0].detach().to("cpu", torch.float32).clone())
        hooks.append(layer.register_forward_pre_hook(pre_layer, with_kwargs=True))

        def post_layer(m, a, o, i=i):
            REC.put(f"layers.{i}.out", (o[0] if isinstance(o, tuple) else o)[0])
            if REC.active:
                REC.layer_done()
        hooks.append(layer.register_forward_hook(post_layer))
        hooks.append(layer.self_attn.o_proj.register_forward_pre_hook(
            lambda m, a, i=i: REC.put(f"layers.{i}.attn.out", a[0][0])))
        hooks.append(layer.mlp.register_forward_hook(lambda m, a, o, i=i: REC.put(f"layers.{i}.mlp.out", o[0])))
        if getattr(layer, "enable_moe_block", False):
            # experts get the flattened [B*T, H] tokens; B = 1, so the output is already [T, H]
            hooks.append(layer.experts.register_forward_hook(lambda m, a, o, i=i: REC.put(f"layers.{i}.moe.out", o)))
    return hooks


def recording_cache(model):
    from transformers import DynamicCache
    cache = DynamicCache(config=model.config)
    orig = cache.update

    def update(*args, **kwargs):
        names = ["key_states", "value_states", "layer_idx"]
        vals = dict(zip(names, args))
        vals.update({k: v for k, v in kwargs.items() if k in names})
        if REC.active:
            i = vals["layer_idx"]
            REC.put(f"layers.{i}.attn.k", vals["key_states"][0].transpose(0, 1))  # [T, nkv, d]
            REC.put(f"layers.{i}.attn.v", vals["value_states"][0].transpose(0, 1))
        return orig(*args, **kwargs)

    cache.update = update
    return cache


# ----------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------

def top2(logits):
    v, i = torch.topk(logits.float(), 2)
    return int(i[0]), float(v[0] - v[1])


def logits_kwargs(n_tokens):
    return {} if n_tokens <= ALL_LOGITS_MAX_TOKENS else {"logits_to_keep": 1}


@torch.no_grad()
def run_steps(model, prompt, n_steps, teacher=None, record_dir=None, cache_factory=None, on_step=None, progress=None):
    """Runs prefill + decode. With record_dir, each step's captures stream into record_dir/step-NNNN.safetensors and
    on_step(step entry, StepFile) is called after the file is in place. Returns (tokens, steps, per-step logits)."""
    cache = cache_factory(model) if cache_factory else transformers.DynamicCache(config=model.config)
    dev = input_device(model)
    tokens = list(prompt)
    feed = list(prompt)
    start = 0
    steps, all_logits = [], []
    n_points = 12 * model.config.num_hidden_layers + 8
    for s in range(n_steps + 1):
        positions = list(range(start, start + len(feed)))
        sf = None
        if record_dir is not None:
            sf = StepFile(os.path.join(record_dir, f"step-{s:04d}.safetensors"), n_points)
            REC.begin(positions, sf)
            REC.progress = progress
        if progress:
            progress.begin(s, len(feed), start)
        try:
            out = model(input_ids=torch.tensor([feed], device=dev), position_ids=torch.tensor([positions], device=dev),
                        past_key_values=cache, use_cache=True, **logits_kwargs(len(feed)))
            logits = out.logits[0, -1].detach().to("cpu", torch.float32).clone()
            del out
            if sf is not None:
                REC.end()
                if REC.selection is None or REC.selection.match("logits"):
                    sf.put("logits", logits)
        except BaseException:
            REC.active = False
            if sf is not None:
                sf.abort()
            raise
        nt, margin = top2(logits)
        st = {"index": s, "start": start, "length": len(feed), "next_token": nt, "top2_margin": margin}
        if sf is not None:
            st["file"] = os.path.basename(sf.path)
            st["bytes"] = sf.close()
            st["shapes"] = {k: v["shape"] for k, v in sf.entries.items()}
        if progress:
            progress.end(f"next {nt} (margin {margin:.2f})")
        steps.append(st)
        all_logits.append(logits)
        if on_step:
            on_step(st, tokens)
        if s == n_steps:
            break
        start += len(feed)
        if teacher is not None:
            if start >= len(teacher):
                break
            nxt = teacher[start]
        else:
            nxt = nt
        tokens.append(nxt)
        feed = [nxt]
    return tokens, steps, all_logits


def rel_l2(a, b):
    return float((a.double() - b.double()).norm() / b.double().norm())


def expected_points(cfg, selection):
    L = cfg.num_hidden_layers
    shared_from = L - (cfg.num_kv_shared_layers or 0)
    expected = {"embed", "final_norm", "logits"}
    if cfg.hidden_size_per_layer_input:
        expected.add("ple")
    for i in range(L):
        expected |= {f"layers.{i}.attn.{x}" for x in ("q", "k_read", "v_read", "out")}
        expected |= {f"layers.{i}.mlp.out", f"layers.{i}.out"}
        if i < shared_from:
            expected |= {f"layers.{i}.attn.k", f"layers.{i}.attn.v"}
        if cfg.enable_moe_block:
            expected.add(f"layers.{i}.moe.out")
    if selection is not None:
        expected = {p for p in expected if selection.match(p)}
    return expected


def check_step(cfg, out_dir, st, selection, read_last):
    """The step file holds exactly the expected points in their shapes; cross-checks read lazily from the file."""
    T = st["length"]
    p = st["start"] + T - 1
    shapes = st["shapes"]
    expected = expected_points(cfg, selection)
    s = st["index"]
    if set(shapes) != expected:
        raise RuntimeError(f"step {s}: points missing {sorted(expected - set(shapes))[:8]} "
                           f"extra {sorted(set(shapes) - expected)[:8]}")
    H, L = cfg.hidden_size, cfg.num_hidden_layers
    shared_from = L - (cfg.num_kv_shared_layers or 0)
    if "embed" in shapes:
        assert tuple(shapes["embed"]) == (T, H), shapes["embed"]
    if "logits" in shapes:
        assert tuple(shapes["logits"]) == (cfg.vocab_size,)
    with safe_open(os.path.join(out_dir, st["file"]), "pt") as f:
        if "logits" in shapes:
            assert float(f.get_tensor("logits").abs().max()) <= (cfg.final_logit_softcapping or 1e9)
        for i in range(L):
            sliding = cfg.layer_types[i] == "sliding_attention"
            c = min(cfg.sliding_window, p + 1) if sliding else p + 1
            if read_last is not None:
                c = min(c, read_last)
            q, kr_name = f"layers.{i}.attn.q", f"layers.{i}.attn.k_read"
            if q in shapes:
                assert shapes[q][0] == T
                if f"layers.{i}.attn.out" in shapes:
                    assert tuple(shapes[f"layers.{i}.attn.out"]) == (T, shapes[q][1] * shapes[q][2])
            if kr_name in shapes:
                assert shapes[kr_name][0] == c, (i, shapes[kr_name], c)
            if i < shared_from:
                k_name = f"layers.{i}.attn.k"
                if k_name in shapes:
                    assert shapes[k_name][0] == T
                    if kr_name in shapes:  # the last k entering the cache is the last key read
                        assert torch.equal(f.get_slice(k_name)[T - 1:T], f.get_slice(kr_name)[c - 1:c]), (s, i)
            else:
                # KV-shared layer: reads exactly what its source (last non-shared layer of its type) read
                src = max(j for j in range(shared_from) if cfg.layer_types[j] == cfg.layer_types[i])
                for x in ("k_read", "v_read"):
                    a, b = f"layers.{i}.attn.{x}", f"layers.{src}.attn.{x}"
                    if a in shapes and b in shapes:
                        assert torch.equal(f.get_tensor(a), f.get_tensor(b)), (s, i, src, x)


def point_order(name):
    if name == "embed":
        return (0, 0, 0)
    if name == "ple":
        return (1, 0, 0)
    if name == "final_norm":
        return (3, 0, 0)
    if name == "logits":
        return (4, 0, 0)
    parts = name.split(".")
    i = int(parts[1])
    tail = ".".join(parts[2:])
    seq = ["attn.q", "attn.k", "attn.v", "attn.k_read", "attn.v_read", "attn.out", "mlp.out", "moe.out", "out"]
    return (2, i, seq.index(tail) if tail in seq else 99)


def shapes_table(shapes):
    return {k: v for k, v in sorted(shapes.items(), key=lambda kv: point_order(kv[0]))}


def check_embed(checkpoint, prefix, model, prompt, out_dir, first_file):
    """embed must be the SCALED embedding: weight[ids] * sqrt(H) (fp32 scalar cast to the weight dtype); the rows
    come straight from the checkpoint file, not from the loaded model (which may be split or offloaded)."""
    tensors = text_tensors(checkpoint, prefix)
    path, _, _ = tensors["model.embed_tokens.weight"]
    ids = prompt[:ALL_LOGITS_MAX_TOKENS]
    dt = model.model.embed_tokens.weight.dtype
    scale = torch.tensor(model.config.hidden_size ** 0.5).to(dt)
    with safe_open(path, "pt") as f:
        sl = f.get_slice(prefix + "embed_tokens.weight")
        rows = {i: sl[i:i + 1].to(dt) for i in sorted(set(ids))}
    ref = (torch.cat([rows[i] for i in ids]) * scale).float()
    with safe_open(os.path.join(out_dir, first_file), "pt") as f:
        got = f.get_slice("embed")[0:len(ids)]
    diff = float((got - ref).abs().max())
    assert diff == 0.0, f"embed capture is not weight*sqrt(H): {diff}"


def peak_memory():
    host = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    gpus = {}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for d in range(torch.cuda.device_count()):
            m = torch.cuda.max_memory_allocated(d)
            if m:
                gpus[f"cuda:{d}"] = m
    return host, gpus


def write_manifest(out_dir, manifest):
    tmp = os.path.join(out_dir, "manifest.json.partial")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, ensure_ascii=False, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(out_dir, "manifest.json"))


def make_dump(checkpoint, out_dir, prompt, n_steps, dtype="float32", attn="sdpa", teacher=None, extra=None,
              verify=True, device="cpu", max_memory=None, points=None, read_last=None, weights_hash="full",
              overwrite=True, quiet_progress=False, offload_folder=None):
    t0 = time.time()
    ck_name = os.path.basename(os.path.normpath(checkpoint))
    raw, text_raw, prefix = read_config(checkpoint)
    device_map, weight_bytes = plan_devices(checkpoint, prefix, dtype, device, max_memory or {}, offload_folder)
    print(f"\n=== dump {ck_name} -> {os.path.relpath(out_dir, REPO) if out_dir.startswith(REPO) else out_dir} "
          f"({dtype}, {attn}, prompt {len(prompt)} tokens, {n_steps} decode steps"
          f"{', teacher-forced' if teacher else ''}; text weights {gib(weight_bytes)}) ===", flush=True)
    if os.path.exists(out_dir):
        if not overwrite and os.listdir(out_dir):
            raise Refusal(f"{out_dir}: exists and is not empty; choose a new folder or pass --force to replace it")
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    # A float32 reference computes in float32: no TF32 in the matrix products on a GPU.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for d in range(torch.cuda.device_count()):
            torch.cuda.reset_peak_memory_stats(d)
    t_load = time.time()
    model = load(checkpoint, dtype, ATTN_NAME, device_map, max_memory, offload_folder)
    load_s = time.time() - t_load
    cfg = model.config
    placement = device_summary(model)
    print(f"loaded in {load_s:.1f}s; layers on {json.dumps(placement)}", flush=True)
    hooks = install_hooks(model)
    REC.selection = glob_regex(points) if points else None
    REC.read_last = read_last
    manifest = {
        "format": "decodiff-dump",
        "version": 1,
        "producer": {"name": "transformers", "version": transformers.__version__, "dtype": dtype, "attention": attn,
                     "torch": torch.__version__, "device": device,
                     "experts": "eager" if cfg.enable_moe_block else None,
                     "script": "reference-dumps/make_dumps.py"},
        "model": {"model_type": cfg.model_type, "num_hidden_layers": cfg.num_hidden_layers,
                  "config_sha256": sha256_file(os.path.join(checkpoint, "config.json")),
                  "weights_sha256": weights_sha256(checkpoint) if weights_hash == "full" else None,
                  "checkpoint": ck_name},
        "tokens": list(prompt),
        "prompt_length": len(prompt),
        "mode": "teacher_forced" if teacher else "greedy",
        "steps": [],
    }
    if raw.get("model_type") == "gemma4":
        manifest["model"]["layout"] = "Gemma4ForConditionalGeneration (text model only)"
    if device_map is not None:
        manifest["producer"]["placement"] = placement
    if points:
        manifest["selected_points"] = list(points)
    if read_last is not None:
        manifest["read_rows"] = f"last:{read_last}"
    if extra:
        manifest.update(extra)
    t_run = time.time()

    def on_step(st, fed):
        check_step(cfg, out_dir, st, REC.selection, read_last)
        manifest["steps"].append({k: st[k] for k in ("index", "start", "length", "file", "next_token", "top2_margin")})
        manifest["tokens"] = list(fed)
        write_manifest(out_dir, manifest)  # readable after every step, without the completeness mark

    progress = Progress(n_steps, cfg.num_hidden_layers, enabled=not quiet_progress)
    try:
        tokens, steps, logits = run_steps(model, prompt, n_steps, teacher=teacher, record_dir=out_dir,
                                          cache_factory=recording_cache, on_step=on_step, progress=progress)
    except torch.cuda.OutOfMemoryError as e:
        raise Refusal(f"{checkpoint}: out of GPU memory during the run ({str(e).splitlines()[0][:160]}); "
                      f"lower --max-memory for the GPUs (leaving room for activations) or add a cpu=SIZE entry")
    run_s = time.time() - t_run
    for h in hooks:
        h.remove()
    manifest["tokens"] = tokens
    if "embed" in steps[0]["shapes"]:
        check_embed(checkpoint, prefix, model, prompt, out_dir, steps[0]["file"])
    host_peak, gpu_peak = peak_memory()
    del model
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()

    if verify:
        manifest["verification"] = verify_dump(checkpoint, dtype, attn, prompt, tokens, steps, logits,
                                               device_map, max_memory, offload_folder)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out_dir, "*")))
    manifest["producer"]["memory"] = {"peak_host_rss_bytes": host_peak, "peak_gpu_allocated_bytes": gpu_peak}
    manifest["producer"]["seconds"] = {"load": round(load_s, 2), "run": round(run_s, 2),
                                       "total": round(time.time() - t0, 2)}
    # The completeness mark goes in last, in the manifest that replaces the per-step one by an atomic rename after
    # every step file is in place and checked: a run cut short never carries it (docs/dump-format.md).
    manifest["complete"] = True
    write_manifest(out_dir, manifest)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out_dir, "*")))
    if len(tokens) <= 64:
        print(f"tokens {tokens}")
    print("steps: " + " ".join(f"{s['index']}:{s['next_token']}({s['top2_margin']:.2f})" for s in steps))
    print(f"min top2 margin {min(s['top2_margin'] for s in steps):.4f}; {len(steps)} files, {size} bytes, "
          f"{time.time() - t0:.1f}s (load {load_s:.1f}s, run {run_s:.1f}s); peak host RSS {gib(host_peak)}, "
          f"peak GPU {', '.join(f'{d} {gib(v)}' for d, v in gpu_peak.items()) or '-'}")
    print("points step 0: " + json.dumps(shapes_table(steps[0]["shapes"])))
    print("points step 1: " + json.dumps(shapes_table(steps[1]["shapes"])) if len(steps) > 1 else "")
    RESULTS.append({"checkpoint": ck_name, "out": out_dir, "prompt_tokens": len(prompt), "steps": len(steps),
                    "dtype": dtype, "placement": placement, "load_s": round(load_s, 2), "run_s": round(run_s, 2),
                    "total_s": round(time.time() - t0, 2), "peak_host_rss_bytes": host_peak,
                    "peak_gpu_allocated_bytes": gpu_peak, "dump_bytes": size})
    return manifest


RESULTS = []


@torch.no_grad()
def verify_dump(checkpoint, dtype, attn, prompt, tokens, steps, logits, device_map, max_memory, offload_folder):
    """Hooks must not perturb: (a) the same incremental run without any hook or wrapper, (b) one plain full
    forward over all tokens (no cache), compared at each step's last position. The recording model is gone by
    now, so memory never holds two copies."""
    plain = load(checkpoint, dtype, attn, device_map, max_memory, offload_folder)
    n = len(steps) - 1
    _, steps_a, logits_a = run_steps(plain, prompt, n, teacher=tokens)
    inc_abs = max(float((a - b).abs().max()) for a, b in zip(logits_a, logits))
    dev = input_device(plain)
    pos = [st["start"] + st["length"] - 1 for st in steps]
    ids = torch.tensor([tokens], device=dev)
    if len(tokens) <= ALL_LOGITS_MAX_TOKENS:
        full = plain(input_ids=ids, use_cache=False).logits[0].to("cpu", torch.float32)[pos]
    else:
        full = plain(input_ids=ids, use_cache=False, logits_to_keep=torch.tensor(pos, device=dev)).logits[0]
        full = full.to("cpu", torch.float32)
    rels = [rel_l2(r, full[k]) for k, r in enumerate(logits)]
    abss = [float((r - full[k]).abs().max()) for k, r in enumerate(logits)]
    greedy_same = all(int(torch.argmax(full[k])) == st["next_token"] for k, st in enumerate(steps))
    del plain
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    ver = {
        "incremental_unhooked_max_abs_logit_diff": inc_abs,
        "full_forward_max_rel_l2_logits": max(rels),
        "full_forward_max_abs_logit_diff": max(abss),
        "full_forward_same_greedy_tokens": greedy_same,
    }
    ok_inc = inc_abs == 0.0
    # fp32: a full forward differs from prefill + cached decode only by GEMM blocking (~1e-6 relative).
    # bf16: that difference is bf16 rounding noise, so only the unhooked incremental run must match exactly.
    ok_full = max(rels) < 2e-5 if dtype == "float32" else True
    ver["ok"] = bool(ok_inc and ok_full)
    print(f"verify: unhooked incremental max|dlogit| = {inc_abs:.3e} ({'OK' if ok_inc else 'FAIL'}); "
          f"full forward max rel L2 = {max(rels):.3e}, max|dlogit| = {max(abss):.3e} "
          f"({'OK' if ok_full else 'FAIL'}); same greedy tokens: {greedy_same}")
    if not ver["ok"]:
        VERIFY_FAILURES.append(ver)
    return ver


VERIFY_FAILURES = []


# ----------------------------------------------------------------------------------------------
# Comparing two dumps bit for bit
# ----------------------------------------------------------------------------------------------

def same_dumps(a, b):
    """Every tensor of two dumps equal bit for bit, same steps, same points, same tokens. Returns (ok, message);
    reads one tensor pair at a time."""
    ma = json.load(open(os.path.join(a, "manifest.json")))
    mb = json.load(open(os.path.join(b, "manifest.json")))
    if ma["tokens"] != mb["tokens"]:
        return False, "tokens differ"
    if len(ma["steps"]) != len(mb["steps"]):
        return False, f"step counts differ ({len(ma['steps'])} vs {len(mb['steps'])})"
    n = nbytes = 0
    for sa, sb in zip(ma["steps"], mb["steps"]):
        for k in ("start", "length", "next_token", "top2_margin"):
            if sa.get(k) != sb.get(k):
                return False, f"step {sa['index']}: {k} differs ({sa.get(k)} vs {sb.get(k)})"
        with safe_open(os.path.join(a, sa["file"]), "pt") as fa, safe_open(os.path.join(b, sb["file"]), "pt") as fb:
            ka, kb = set(fa.keys()), set(fb.keys())
            if ka != kb:
                return False, f"step {sa['index']}: points differ: {sorted(ka ^ kb)[:6]}"
            for k in sorted(ka, key=point_order):
                ta, tb = fa.get_tensor(k), fb.get_tensor(k)
                if ta.shape != tb.shape or ta.dtype != tb.dtype or not torch.equal(ta.view(torch.int32), tb.view(torch.int32)):
                    diff = float((ta - tb).abs().max()) if ta.shape == tb.shape else float("nan")
                    return False, f"step {sa['index']} {k}: differs (shape {tuple(ta.shape)} vs {tuple(tb.shape)}, max|d| {diff:.3e})"
                n += 1
                nbytes += ta.numel() * 4
    return True, f"{n} tensors ({nbytes / 1e9:.2f} GB) in {len(ma['steps'])} steps identical bit for bit"


# ----------------------------------------------------------------------------------------------
# Prompts
# ----------------------------------------------------------------------------------------------

def encode_prompt(checkpoint, text, bos=2):
    from tokenizers import Tokenizer
    path = os.path.join(checkpoint, "tokenizer.json")
    if not os.path.isfile(path):
        raise Refusal(f"{path}: missing; --prompt-text needs the checkpoint's tokenizer (or pass --prompt-ids)")
    tok = Tokenizer.from_file(path)
    return [bos] + tok.encode(text, add_special_tokens=False).ids


def chat_prompt(checkpoint, messages_file):
    """Messages through the checkpoint's own chat template (tokenizer_config.json or chat_template.jinja)."""
    from transformers import AutoTokenizer
    try:
        with open(messages_file, encoding="utf-8") as f:
            messages = json.load(f)
    except (OSError, ValueError) as e:
        raise Refusal(f"{messages_file}: not a readable JSON file ({e}); expected [{{\"role\": \"user\", \"content\": \"...\"}}, ...]")
    if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m and "content" in m for m in messages):
        raise Refusal(f"{messages_file}: expected a JSON list of {{\"role\", \"content\"}} objects")
    tok = AutoTokenizer.from_pretrained(checkpoint)
    if not getattr(tok, "chat_template", None):
        raise Refusal(f"{checkpoint}: no chat template (tokenizer_config.json 'chat_template' or chat_template.jinja); "
                      f"pass the formatted prompt with --prompt-text or --prompt-ids")
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    ids = tok(text, add_special_tokens=False)["input_ids"]
    return ids, text


def random_prompt(spec, vocab, bos):
    n, _, seed = spec.partition(":")
    n, seed = int(n), int(seed or 0)
    g = torch.Generator().manual_seed(seed)
    # ids from 262 up: above the special and byte-fallback tokens of every Gemma vocabulary
    return [bos] + torch.randint(262, vocab, (n - 1,), generator=g).tolist()


def run_all(args):
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}")
    summary = {}
    for ck, case, pkey, n, dtype in CASES:
        if args.only and ck not in args.only:
            continue
        ckdir = os.path.join(args.checkpoints, ck)
        prompt = encode_prompt(ckdir, PROMPTS[pkey])
        out = os.path.join(args.out, ck, case)
        manifest = make_dump(ckdir, out, prompt, n, dtype=dtype, attn=args.attention,
                             extra={"case": case, "prompt_text": "<bos>" + PROMPTS[pkey]}, quiet_progress=True)
        summary[f"{ck}/{case}"] = {
            "prompt_length": len(prompt), "steps": len(manifest["steps"]), "tokens": manifest["tokens"],
            "min_top2_margin": min(s["top2_margin"] for s in manifest["steps"]),
            "verification": manifest.get("verification"),
            "config_sha256": manifest["model"]["config_sha256"],
            "weights_sha256": manifest["model"]["weights_sha256"],
        }
        if ck == "gemma4-tiny" and case == "long":
            # self-check of the teacher-forcing path: forcing the greedy tokens must reproduce the dump bit for bit
            tmp = os.path.join(args.out, ".tf-check")
            make_dump(ckdir, tmp, prompt, n, dtype=dtype, attn=args.attention, teacher=manifest["tokens"],
                      verify=False, quiet_progress=True)
            same, why = same_dumps(out, tmp)
            print(f"teacher-forcing self-check: identical = {same} ({why})")
            shutil.rmtree(tmp)
            if not same:
                VERIFY_FAILURES.append("teacher-forcing self-check")
    path = os.path.join(args.out, "dumps-summary.json")
    if args.only and os.path.exists(path):  # keep the other checkpoints' entries
        old = json.load(open(path))
        old.update(summary)
        summary = old
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk != "tokens"} for k, v in summary.items()}, indent=1))
    if VERIFY_FAILURES:
        print(f"VERIFICATION FAILURES: {VERIFY_FAILURES}")
        sys.exit(1)


def run_one(args):
    if args.threads:
        torch.set_num_threads(args.threads)
    raw, text, _ = read_config(args.checkpoint)
    bos = text.get("bos_token_id", 2)
    prompt_text = None
    if args.prompt_ids:
        try:
            prompt = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
        except ValueError:
            raise Refusal(f"--prompt-ids: '{args.prompt_ids[:40]}' is not a comma-separated list of token ids")
    elif args.prompt_chat:
        prompt, prompt_text = chat_prompt(args.checkpoint, args.prompt_chat)
    elif args.prompt_random:
        prompt = random_prompt(args.prompt_random, text["vocab_size"], bos)
    else:
        if args.prompt_file:
            with open(args.prompt_file, encoding="utf-8") as f:
                prompt_text = f.read()
        else:
            prompt_text = args.prompt_text
        prompt = encode_prompt(args.checkpoint, prompt_text, bos)
        prompt_text = "<bos>" + prompt_text
    if not prompt:
        raise Refusal("the prompt is empty")
    if max(prompt) >= text["vocab_size"] or min(prompt) < 0:
        raise Refusal(f"prompt token {max(prompt)} is outside the vocabulary (0..{text['vocab_size'] - 1})")
    teacher = [int(x) for x in args.teacher_tokens.split(",")] if args.teacher_tokens else None
    if teacher is not None and teacher[:len(prompt)] != prompt:
        raise Refusal("--teacher-tokens must start with the prompt's tokens")
    read_last = None
    if args.read_rows:
        m = re.fullmatch(r"last:([1-9][0-9]*)", args.read_rows)
        if not m:
            raise Refusal(f"--read-rows: '{args.read_rows}' is not last:N (N ≥ 1)")
        read_last = int(m.group(1))
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    extra = {"prompt_text": prompt_text} if prompt_text is not None and len(prompt_text) <= 4096 else None
    make_dump(args.checkpoint, args.out, prompt, args.steps, dtype=args.dtype, attn=args.attention, teacher=teacher,
              verify=not args.no_verify, device=device, max_memory=parse_max_memory(args.max_memory) if args.max_memory else None,
              points=[p for p in args.points.split(",") if p.strip()] if args.points else None, read_last=read_last,
              weights_hash=args.weights_hash, overwrite=args.force, extra=extra, offload_folder=args.offload_folder)
    if args.results:
        with open(args.results, "a") as f:
            for r in RESULTS:
                f.write(json.dumps(r) + "\n")
    if VERIFY_FAILURES:
        sys.exit(1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("all")
    a.add_argument("--checkpoints", default=os.path.join(REPO, "checkpoints"))
    a.add_argument("--out", default=HERE)
    a.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    a.add_argument("--only", nargs="*")
    o = sub.add_parser("one")
    o.add_argument("checkpoint")
    o.add_argument("out")
    g = o.add_mutually_exclusive_group(required=True)
    g.add_argument("--prompt-text", help="text after <bos>; encoded with the checkpoint's tokenizer.json")
    g.add_argument("--prompt-file", help="a UTF-8 text file, encoded like --prompt-text (for long prompts)")
    g.add_argument("--prompt-ids", help="comma-separated token ids (include <bos>=2 yourself)")
    g.add_argument("--prompt-chat", help="a JSON file of chat messages, formatted by the checkpoint's chat template")
    g.add_argument("--prompt-random", help="N[:SEED]: <bos> and N-1 pseudo-random token ids (for timing runs)")
    o.add_argument("--steps", type=int, default=8)
    o.add_argument("--teacher-tokens", help="comma-separated ids: prompt + continuation to feed instead of greedy")
    o.add_argument("--dtype", default="float32", choices=list(DTYPES))
    o.add_argument("--attention", default="sdpa", choices=["sdpa", "eager"])
    o.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when a GPU is visible, else cpu")
    o.add_argument("--max-memory", help="per-device caps, e.g. 0=70GiB,1=70GiB,cpu=200GiB (accelerate device_map)")
    o.add_argument("--offload-folder", help="with --max-memory: what fits nowhere waits here on disk (slow, exact)")
    o.add_argument("--threads", type=int, default=1, help="CPU threads (default 1, as the bundled dumps)")
    o.add_argument("--points", help="comma-separated point globs to record (declared as selected_points)")
    o.add_argument("--read-rows", help="last:N: keep only the last N rows of each k_read/v_read (declared as read_rows)")
    o.add_argument("--no-verify", action="store_true", help="skip the unhooked re-run and the full-forward check")
    o.add_argument("--weights-hash", default="full", choices=["full", "skip"],
                   help="skip: write weights_sha256 null instead of hashing every weight file")
    o.add_argument("--force", action="store_true", help="replace OUT if it exists")
    o.add_argument("--results", help="append one JSON line of timings and memory to this file")
    c = sub.add_parser("same")
    c.add_argument("a")
    c.add_argument("b")
    import qwen35_dumps
    qwen35_dumps.add_arguments(sub)
    args = ap.parse_args()
    if args.cmd == "qwen35":
        qwen35_dumps.main_from(args)
        return
    try:
        if args.cmd == "same":
            ok, why = same_dumps(args.a, args.b)
            print(("IDENTICAL: " if ok else "DIFFERENT: ") + why)
            sys.exit(0 if ok else 1)
        install_attention(args.attention)
        if args.cmd == "all":
            run_all(args)
        else:
            run_one(args)
    except Refusal as e:
        print(f"make_dumps.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
