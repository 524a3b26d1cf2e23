#!/usr/bin/env python3
"""Makes decodiff's small Gemma 4 text checkpoints (random weights, real Hugging Face format).

Two stages, both reproducible from --seed:

  make_checkpoints.py tokenizer [--out checkpoints/tokenizer]
      Trains a byte-fallback BPE (vocab 1024) on checkpoints/corpus/*.txt with the `tokenizers`
      library and writes tokenizer.json + tokenizer_config.json. Needs only `tokenizers`.

  make_checkpoints.py geometry E2B|E4B|26B-A4B|31B --out DIR [--layout multimodal|text]
      A random-weight bf16 checkpoint of a released Gemma 4 geometry (all layers), for timing and memory runs of
      reference-dumps/make_dumps.py; not committed (31B is 61 GB).

  make_checkpoints.py models [--out checkpoints] [--train-steps N] [--device cuda]
      For each checkpoint: Gemma4TextConfig + Gemma4ForCausalLM (transformers 5.17), well-conditioned
      random init (not transformers' default init), optionally a short training run on the corpus so
      greedy continuations are not degenerate and top-2 margins are larger, then
      save_pretrained(safe_serialization=True) in bfloat16, plus the tokenizer files.
      Prints config.json, every tensor name/shape/dtype and the sha256s (docs/dump-format.md).

  make_checkpoints.py qwen35 [--out checkpoints] [--seed N] [--only NAME ...]
      The two tiny Qwen3.5 checkpoints (random weights, no training; transformers 5.17): qwen35-tiny, a dense
      qwen3_5_text model written by save_pretrained (text layout, weights under `model.`), and qwen35-tiny-moe, a
      qwen3_5_moe_text model written in the released multimodal layout (config model_type qwen3_5_moe with a
      text_config, weights under `model.language_model.`, fused experts.gate_up_proj/down_proj, plus a stand-in
      vision tower and MTP tensor that text engines must ignore). Every norm weight, A_log and dt_bias is randomised
      so that a (1+w)-vs-w or a decay bug cannot hide behind transformers' init values. qwen35-tiny-llamacpp and
      qwen35-tiny-moe-llamacpp are the same two with linear_value_head_dim = linear_key_head_dim, the geometry
      llama.cpp's loader can read.

The tokenizer is committed, so `models` reuses checkpoints/tokenizer/ when it exists.
"""
import argparse
import glob
import hashlib
import json
import math
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SPECIALS = ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>"]  # ids 0..5
BYTE_TOKENS = [f"<0x{b:02X}>" for b in range(256)]  # ids 6..261, used by byte fallback
VOCAB_SIZE = 1024

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'assistant' -%}{%- set role = 'model' -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)


def corpus_files():
    return sorted(glob.glob(os.path.join(HERE, "corpus", "*.txt")))


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def weights_sha256(folder):
    """docs/dump-format.md: sha256 of the *.safetensors files' bytes, concatenated in file-name order."""
    h = hashlib.sha256()
    for p in sorted(glob.glob(os.path.join(folder, "*.safetensors"))):
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


# ----------------------------------------------------------------------------------------------
# Tokenizer
# ----------------------------------------------------------------------------------------------

def train_tokenizer(out_dir):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from tokenizers import Regex

    # Gemma-like: spaces become U+2581 by a normalizer, byte fallback for anything unseen.
    # For training, split before each U+2581 so merges stay inside words.
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("\u2581"), behavior="merged_with_next")
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIALS + BYTE_TOKENS,
        show_progress=False,
    )
    tok.train(corpus_files(), trainer)
    doc = json.loads(tok.to_str())

    # Byte tokens belong to the model vocabulary (as in Gemma's tokenizer.json), not to added_tokens:
    # a literal "<0x41>" in text must not be matched as a special token.
    doc["added_tokens"] = [a for a in doc["added_tokens"] if a["content"] in SPECIALS]
    for a in doc["added_tokens"]:
        a["special"] = True
        a["normalized"] = False
    assert [a["id"] for a in doc["added_tokens"]] == list(range(len(SPECIALS)))
    vocab = doc["model"]["vocab"]
    for i, t in enumerate(SPECIALS + BYTE_TOKENS):
        assert vocab[t] == i, (t, vocab.get(t), i)
    doc["model"]["byte_fallback"] = True
    doc["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
        {"type": "ByteFallback"},
        {"type": "Fuse"},
    ]}
    doc["post_processor"] = None  # add_bos_token is false (Gemma 4 style): the prompt carries <bos> itself

    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    tok2 = Tokenizer.from_file(os.path.join(out_dir, "tokenizer.json"))
    cfg = {
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "spaces_between_special_tokens": False,
        "model_max_length": 4096,
        "padding_side": "left",
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, ensure_ascii=False, indent=2)
        f.write("\n")
    print(f"tokenizer: vocab {tok2.get_vocab_size()} written to {out_dir}")
    for s in ["<bos>The old lighthouse keeper climbed the stairs.", "Crème 🙂 x", "<start_of_turn>user\nhi<end_of_turn>"]:
        e = tok2.encode(s, add_special_tokens=False)
        print(f"  {s!r} -> {e.ids} {e.tokens}")
    return tok2


# ----------------------------------------------------------------------------------------------
# Models
# ----------------------------------------------------------------------------------------------

S, F = "sliding_attention", "full_attention"
ROPE = {
    S: {"rope_type": "default", "rope_theta": 10000.0},
    F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0},
}


def base_config(vocab):
    return dict(
        vocab_size=vocab,
        vocab_size_per_layer_input=vocab,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=6,
        layer_types=[S, S, F, S, S, F],
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        global_head_dim=64,
        sliding_window=8,
        final_logit_softcapping=30.0,
        hidden_size_per_layer_input=0,
        rope_parameters=ROPE,
        max_position_embeddings=4096,
        rms_norm_eps=1e-6,
        hidden_activation="gelu_pytorch_tanh",
        tie_word_embeddings=True,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )


def checkpoint_specs(vocab):
    tiny = base_config(vocab) | dict(attention_k_eq_v=True, num_global_key_value_heads=1)
    ple = base_config(vocab) | dict(
        attention_k_eq_v=False, hidden_size_per_layer_input=16, num_kv_shared_layers=2, use_double_wide_mlp=True)
    moe = base_config(vocab) | dict(
        attention_k_eq_v=True, num_global_key_value_heads=1,
        enable_moe_block=True, num_experts=4, top_k_experts=2, moe_intermediate_size=64)
    # E2B in miniature: [S,S,S,S,F] x 2 with the last 5 layers sharing KV, so the non-shared layers end in
    # [sliding, full] as E2B's do (llama.cpp's Gemma 4 can take its cache sources only from such a layout).
    ple_e2b = base_config(vocab) | dict(
        num_hidden_layers=10, layer_types=[S, S, S, S, F] * 2,
        attention_k_eq_v=False, hidden_size_per_layer_input=16, num_kv_shared_layers=5, use_double_wide_mlp=True)
    # (name, config kwargs, seed offset)
    return [("gemma4-tiny", tiny, 0), ("gemma4-tiny-ple", ple, 1), ("gemma4-tiny-moe", moe, 2),
            ("gemma4-tiny-ple-e2b", ple_e2b, 3)]


def init_weights(model, cfg, gen):
    """Well-conditioned random init; every tensor is set explicitly (no transformers default init)."""
    import torch

    H = cfg.hidden_size
    # Logits = final_norm(h) . E^T with |final_norm(h)| ~ sqrt(H): std(E) = 3/sqrt(H) gives logits of a few units,
    # so the soft-cap (30) bends only the largest ones a little.
    emb_std = 3.0 / math.sqrt(H)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen) * std + mean

    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shp = tuple(p.shape)
            if name.endswith("embed_tokens.weight"):
                v = normal(shp, emb_std)
            elif name.endswith("embed_tokens_per_layer.weight"):
                v = normal(shp, 1.0 / math.sqrt(cfg.hidden_size_per_layer_input))
            elif name.endswith("norm.weight") or name.endswith("layernorm.weight") or ".post_feedforward_layernorm_" in name \
                    or ".pre_feedforward_layernorm_" in name:
                v = normal(shp, 0.1, 1.0)
            elif name.endswith("router.scale"):
                v = normal(shp, 0.1, 1.0)
            elif name.endswith("router.per_expert_scale"):
                v = torch.rand(shp, generator=gen) * 0.6 + 0.7
            elif name.endswith("experts.gate_up_proj"):  # [E, 2*Im, H]
                v = normal(shp, 1.0 / math.sqrt(shp[2]))
            elif name.endswith("experts.down_proj"):  # [E, H, Im]
                v = normal(shp, 1.0 / math.sqrt(shp[2]))
            elif name.endswith(".weight") and p.dim() == 2:  # nn.Linear [out, in]: N(0, 1/fan_in)
                v = normal(shp, 1.0 / math.sqrt(shp[1]))
            elif name.endswith(".bias"):
                v = torch.zeros(shp)
            else:
                raise SystemExit(f"init: no rule for parameter {name} {shp}")
            p.copy_(v.to(p.dtype))
        set_layer_scalars(model, gen)


def set_layer_scalars(model, gen):
    import torch
    with torch.no_grad():
        for i, layer in enumerate(model.model.layers):
            v = torch.rand(1, generator=gen) * 0.8 + 0.6  # U(0.6, 1.4), away from 1
            # store a bf16-exact value so the saved checkpoint holds exactly what the model trained with
            layer.layer_scalar.copy_(v.to(torch.bfloat16).to(layer.layer_scalar.dtype))


def train(model, ids, steps, device, seed, seq=64, batch=32, lr=3e-3):
    import torch
    if steps <= 0:
        return []
    g = torch.Generator().manual_seed(seed + 1000)
    data = torch.tensor(ids, dtype=torch.long)
    model.to(device).train()
    scalars = [l.layer_scalar.detach().clone() for l in model.model.layers]
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * 0.5 * (1 + math.cos(math.pi * min(s, steps) / steps)))
    losses = []
    t0 = time.time()
    for step in range(steps):
        starts = torch.randint(0, len(data) - seq, (batch,), generator=g)
        x = torch.stack([data[s:s + seq] for s in starts])
        x[:, 0] = 2  # every window starts with <bos>, like the prompts
        x = x.to(device)
        out = model(input_ids=x, labels=x, use_cache=False)
        opt.zero_grad(set_to_none=True)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(out.loss.item())
        if step % 100 == 0 or step == steps - 1:
            print(f"    step {step:4d} loss {out.loss.item():.4f} ({time.time() - t0:.1f}s)")
    model.eval().to("cpu")
    for l, s in zip(model.model.layers, scalars):  # buffers are not trained; make sure nothing touched them
        assert torch.equal(l.layer_scalar.cpu(), s.cpu())
    return losses


def make_models(args):
    import torch
    import transformers
    from tokenizers import Tokenizer
    from transformers import Gemma4ForCausalLM, Gemma4TextConfig

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True, warn_only=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, device {args.device}")

    tok_dir = os.path.join(HERE, "tokenizer")
    if not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        train_tokenizer(tok_dir)
    tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    ids = []
    for p in corpus_files():
        with open(p, encoding="utf-8") as f:
            ids += [2] + tok.encode(f.read(), add_special_tokens=False).ids
    print(f"corpus: {len(ids)} tokens, vocab {vocab}")

    summary = {}
    for name, kw, off in checkpoint_specs(vocab):
        if args.only and name not in args.only:
            continue
        seed = args.seed + off
        print(f"\n=== {name} (seed {seed}) ===")
        torch.manual_seed(seed)
        cfg = Gemma4TextConfig(**kw)
        model = Gemma4ForCausalLM(cfg).float()
        gen = torch.Generator().manual_seed(seed)
        init_weights(model, cfg, gen)
        losses = train(model, ids, args.train_steps, args.device, seed)
        out = os.path.join(args.out, name)
        if os.path.exists(out):
            shutil.rmtree(out)
        model.to(torch.bfloat16)
        model.config.dtype = torch.bfloat16
        try:
            model.save_pretrained(out, safe_serialization=True)
        except TypeError:
            model.save_pretrained(out)
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, fn), os.path.join(out, fn))
        print(open(os.path.join(out, "config.json")).read())
        from safetensors import safe_open
        total = 0
        for p in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
            with safe_open(p, "pt") as f:
                for k in f.keys():
                    t = f.get_tensor(k)
                    total += t.numel()
                    print(f"  {k:60s} {str(list(t.shape)):18s} {str(t.dtype)}")
        size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "*")))
        info = {
            "config_sha256": sha256_file(os.path.join(out, "config.json")),
            "weights_sha256": weights_sha256(out),
            "parameters": total,
            "folder_bytes": size,
            "train_steps": args.train_steps,
            "final_loss": (sum(losses[-20:]) / len(losses[-20:])) if losses else None,
            "seed": seed,
            "layer_scalars": [float(l.layer_scalar.float()) for l in model.model.layers],
        }
        assert size < 10 * 1024 * 1024, f"{name} is {size} bytes"
        print(json.dumps({name: info}, indent=1))
        summary[name] = info
    path = os.path.join(args.out, "checkpoints-summary.json")
    if args.only and os.path.exists(path):  # keep the other checkpoints' entries
        with open(path) as f:
            summary = json.load(f) | summary
    with open(path, "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


# ----------------------------------------------------------------------------------------------
# Random-weight checkpoints of the released geometries (for timing and memory runs of the producer)
# ----------------------------------------------------------------------------------------------

S5F = [S] * 5 + [F]
# The text configs of the released Gemma 4 models as transformers' own converter builds them
# (src/transformers/models/gemma4/convert_gemma4_weights.py, _VARIANTS); every field not listed is
# Gemma4TextConfig's default (vocab 262144, head_dim 256, global_head_dim 512, sliding_window 512, ...).
GEOMETRIES = {
    "E2B": dict(hidden_size=1536, hidden_size_per_layer_input=256, intermediate_size=4 * 1536, num_hidden_layers=35,
                layer_types=[S, S, S, S, F] * 7, num_attention_heads=8, num_key_value_heads=1,
                num_global_key_value_heads=None, attention_k_eq_v=False, use_bidirectional_attention=None,
                num_kv_shared_layers=20, use_double_wide_mlp=True, final_logit_softcapping=30.0, rope_parameters=ROPE),
    "E4B": dict(hidden_size=2560, hidden_size_per_layer_input=256, intermediate_size=4 * 2560, num_hidden_layers=42,
                layer_types=S5F * 7, num_attention_heads=8, num_key_value_heads=2, num_global_key_value_heads=None,
                global_head_dim=512, attention_k_eq_v=False, use_bidirectional_attention=None, num_kv_shared_layers=18,
                final_logit_softcapping=30.0, rope_parameters=ROPE),
    "31B": dict(hidden_size=5376, hidden_size_per_layer_input=0, intermediate_size=4 * 5376, num_hidden_layers=60,
                layer_types=S5F * 10, num_attention_heads=32, num_key_value_heads=16, num_global_key_value_heads=4,
                attention_k_eq_v=True, use_bidirectional_attention="vision", num_kv_shared_layers=0,
                sliding_window=1024, final_logit_softcapping=30.0, rope_parameters=ROPE, max_position_embeddings=262144),
    "26B-A4B": dict(hidden_size=2816, hidden_size_per_layer_input=0, intermediate_size=2112, num_hidden_layers=30,
                    layer_types=S5F * 5, num_attention_heads=16, num_key_value_heads=8, num_global_key_value_heads=2,
                    attention_k_eq_v=True, use_bidirectional_attention="vision", num_kv_shared_layers=0,
                    enable_moe_block=True, num_experts=128, moe_intermediate_size=704, top_k_experts=8,
                    sliding_window=1024, final_logit_softcapping=30.0, rope_parameters=ROPE,
                    max_position_embeddings=262144),
}


def random_tensor(name, shape, cfg, gen, device):
    """The same well-conditioned rules as init_weights, one tensor at a time on `device`, seeded by its name."""
    import torch
    H = cfg.hidden_size

    def normal(std, mean=0.0):
        return torch.randn(shape, generator=gen, device=device) * std + mean

    if name.endswith("embed_tokens.weight"):
        return normal(3.0 / math.sqrt(H))
    if name.endswith("embed_tokens_per_layer.weight"):
        return normal(1.0 / math.sqrt(cfg.hidden_size_per_layer_input))
    if name.endswith("norm.weight") or name.endswith("layernorm.weight") or ".post_feedforward_layernorm_" in name \
            or ".pre_feedforward_layernorm_" in name or name.endswith("router.scale"):
        return normal(0.1, 1.0)
    if name.endswith("router.per_expert_scale"):
        return torch.rand(shape, generator=gen, device=device) * 0.6 + 0.7
    if name.endswith("experts.gate_up_proj") or name.endswith("experts.down_proj"):  # [E, out, in]
        return normal(1.0 / math.sqrt(shape[2]))
    if name.endswith("layer_scalar"):
        return torch.rand(shape, generator=gen, device=device) * 0.8 + 0.6
    if name.endswith(".weight") and len(shape) == 2:  # nn.Linear [out, in]: N(0, 1/fan_in)
        return normal(1.0 / math.sqrt(shape[1]))
    raise SystemExit(f"geometry: no rule for tensor {name} {shape}")


def make_geometry(args):
    """A random-weight bf16 checkpoint of a released geometry, in the released multimodal layout
    (Gemma4ForConditionalGeneration: text weights under model.language_model., config.json with text_config) or
    the text-only one; written shard by shard, so the host never holds more than one shard."""
    import zlib
    import torch
    from safetensors.torch import save_file
    from transformers import Gemma4Config, Gemma4ForCausalLM, Gemma4TextConfig

    t0 = time.time()
    kw = dict(GEOMETRIES[args.name])
    text_cfg = Gemma4TextConfig(**kw)
    with torch.device("meta"):
        meta = Gemma4ForCausalLM(text_cfg)
    entries = [(k, tuple(v.shape)) for k, v in meta.state_dict().items()
               if not (k == "lm_head.weight" and text_cfg.tie_word_embeddings) and not k.endswith("inv_freq")]
    entries.sort()
    prefix = "model.language_model." if args.layout == "multimodal" else "model."
    names = [(prefix + k[len("model."):] if k.startswith("model.") else k, k, shp) for k, shp in entries]
    if args.layout == "multimodal":  # one tower tensor, so a loader that reads the towers would be caught
        names.append(("model.vision_tower.patch_embedder.input_proj.weight", None, (768, 768)))
    shard_bytes = int(args.shard_gb * 2**30)
    shards, cur, size = [], [], 0
    for n in names:
        b = math.prod(n[2]) * 2
        if cur and size + b > shard_bytes:
            shards.append(cur)
            cur, size = [], 0
        cur.append(n)
        size += b
    shards.append(cur)
    os.makedirs(args.out, exist_ok=True)
    if args.layout == "multimodal":
        cfg = Gemma4Config(text_config=text_cfg.to_dict())
        cfg.architectures = ["Gemma4ForConditionalGeneration"]
    else:
        cfg = text_cfg
        cfg.architectures = ["Gemma4ForCausalLM"]
    cfg.dtype = "bfloat16"
    cfg.save_pretrained(args.out)
    weight_map, total, params = {}, 0, 0
    for si, shard in enumerate(shards):
        fname = f"model-{si + 1:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for stored, key, shp in shard:
            gen = torch.Generator(device=args.device).manual_seed(args.seed * 1000003 + zlib.crc32(stored.encode()))
            t = random_tensor(key or stored, shp, text_cfg, gen, args.device)
            tensors[stored] = t.to(torch.bfloat16).cpu()
            weight_map[stored] = fname
            total += t.numel() * 2
            params += t.numel() if key else 0
            del t
        save_file(tensors, os.path.join(args.out, fname), metadata={"format": "pt"})
        del tensors
    with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=1)
        f.write("\n")
    print(json.dumps({"geometry": args.name, "layout": args.layout, "out": args.out, "text_parameters": params,
                      "bytes": total, "shards": len(shards), "seconds": round(time.time() - t0, 1)}))


# ----------------------------------------------------------------------------------------------
# Qwen3.5 (Gated DeltaNet + gated attention): two tiny random-weight checkpoints
# ----------------------------------------------------------------------------------------------

QWEN35_COMMON = dict(
    vocab_size=VOCAB_SIZE, hidden_size=48, head_dim=32, num_attention_heads=4, num_key_value_heads=2,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=12,
    linear_conv_kernel_dim=4, rms_norm_eps=1e-6, tie_word_embeddings=False, max_position_embeddings=4096, num_hidden_layers=4,
    hidden_act="silu", attention_bias=False, bos_token_id=2, eos_token_id=1, pad_token_id=0,
    rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [11, 11, 10], "mrope_interleaved": True},
)
QWEN35_SPECS = {
    # dense: GDN after full attention and two GDN layers apart; layer_types disagrees with an "every 4th" guess
    "qwen35-tiny": dict(kind="dense", layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                        intermediate_size=40),
    # MoE: three GDN layers in a row, then full attention; 8 experts, top-2, a shared expert
    "qwen35-tiny-moe": dict(kind="moe", layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                            num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                            shared_expert_intermediate_size=24),
    # llama.cpp's Qwen3.5 loader sizes the value heads with linear_key_head_dim (as every released Qwen3.5 has
    # dk = dv), so it cannot load the two above (dv 12 ≠ dk 8); these have dv = dk and otherwise the same shapes
    "qwen35-tiny-llamacpp": dict(kind="dense", layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
                                 intermediate_size=40, linear_value_head_dim=8),
    "qwen35-tiny-moe-llamacpp": dict(kind="moe", layer_types=["linear_attention", "linear_attention", "linear_attention", "full_attention"],
                                     num_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                                     shared_expert_intermediate_size=24, linear_value_head_dim=8),
}


def qwen35_classes(kind):
    import transformers
    if kind == "dense":
        return transformers.Qwen3_5TextConfig, transformers.Qwen3_5ForCausalLM
    return transformers.Qwen3_5MoeTextConfig, transformers.Qwen3_5MoeForCausalLM


def qwen35_init(model, gen):
    """Well-conditioned random weights: every matrix ~N(0, 1/fan_in), norms and decay parameters randomised."""
    import torch
    with torch.no_grad():
        for name, p in model.named_parameters():
            def normal(std, mean=0.0):
                return torch.randn(p.shape, generator=gen) * std + mean
            if name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=gen) * 2.95 + 0.05))  # log U(0.05, 3)
            elif name.endswith("dt_bias"):
                p.copy_(normal(0.5))
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)  # plain weight, used as is
            elif "norm" in name:
                p.copy_(normal(0.3))  # offsets of the (1+w) norms
            elif name.endswith("conv1d.weight"):
                p.copy_(normal(0.5))
            elif name.endswith("embed_tokens.weight"):
                p.copy_(normal(1.0))
            elif name.endswith("lm_head.weight"):
                p.copy_(normal(3.0 / math.sqrt(p.shape[-1])))
            else:  # a linear map or a stack of expert maps: [.., out, in]
                p.copy_(normal(1.0 / math.sqrt(p.shape[-1])))


def make_qwen35(args):
    import torch
    from safetensors.torch import save_file
    tok_dir = os.path.join(HERE, "tokenizer")
    summary = {}
    for i, (name, spec) in enumerate(QWEN35_SPECS.items()):
        spec = dict(spec)
        kind = spec.pop("kind")
        ConfigCls, ModelCls = qwen35_classes(kind)
        if args.only and name not in args.only:
            continue
        cfg = ConfigCls(**{**QWEN35_COMMON, **spec})
        cfg._attn_implementation = "sdpa"
        torch.manual_seed(args.seed + i)
        model = ModelCls(cfg).eval()
        gen = torch.Generator().manual_seed(args.seed + i)
        qwen35_init(model, gen)
        model = model.to(torch.bfloat16)
        out = os.path.join(args.out, name)
        if os.path.exists(out):
            shutil.rmtree(out)
        os.makedirs(out)
        if kind == "dense":
            model.save_pretrained(out, safe_serialization=True)
        else:
            # The released layout: a multimodal config around the text config, text weights under
            # model.language_model., fused experts (as the Hub checkpoints store them), towers the text model ignores.
            tensors = {}
            for k, v in model.state_dict().items():
                key = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
                tensors[key] = v.contiguous()
            tensors["model.visual.patch_embed.proj.weight"] = torch.randn(16, 3, 2, 4, 4, generator=gen).to(torch.bfloat16)
            tensors["mtp.fc.weight"] = torch.randn(48, 96, generator=gen).to(torch.bfloat16)
            save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
            text = cfg.to_dict()
            text.pop("_attn_implementation", None)
            text.pop("architectures", None)
            text["layer_types"] = list(cfg.layer_types)
            wrapper = {
                "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                "model_type": "qwen3_5_moe",
                "text_config": text,
                "vision_config": {"model_type": "qwen3_5_moe", "depth": 1, "hidden_size": 16, "num_heads": 2,
                                  "intermediate_size": 32, "out_hidden_size": 48, "patch_size": 4,
                                  "spatial_merge_size": 2, "temporal_patch_size": 2, "in_channels": 3},
                "image_token_id": 1020, "video_token_id": 1021, "vision_start_token_id": 1022,
                "vision_end_token_id": 1023, "tie_word_embeddings": False,
                "transformers_version": __import__("transformers").__version__,
            }
            with open(os.path.join(out, "config.json"), "w") as f:
                json.dump(wrapper, f, indent=2)
                f.write("\n")
        for fn in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(tok_dir, fn), os.path.join(out, fn))
        names = []
        from safetensors import safe_open
        for p in sorted(glob.glob(os.path.join(out, "*.safetensors"))):
            with safe_open(p, "pt") as f:
                for k in f.keys():
                    t = f.get_slice(k)
                    names.append(f"{k} {t.get_shape()} {t.get_dtype()}")
        print(f"== {name} ==\n" + open(os.path.join(out, "config.json")).read() + "\n".join(names))
        summary[name] = {"config_sha256": sha256_file(os.path.join(out, "config.json")),
                         "weights_sha256": weights_sha256(out),
                         "parameters": sum(p.numel() for p in model.parameters())}
    print(json.dumps(summary, indent=1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tokenizer")
    t.add_argument("--out", default=os.path.join(HERE, "tokenizer"))
    m = sub.add_parser("models")
    m.add_argument("--out", default=HERE)
    m.add_argument("--seed", type=int, default=20260401)
    m.add_argument("--train-steps", type=int, default=200)
    m.add_argument("--device", default="cuda")
    m.add_argument("--only", nargs="*")
    r = sub.add_parser("geometry", help="random-weight checkpoint of a released geometry (timing and memory runs)")
    r.add_argument("name", choices=list(GEOMETRIES))
    r.add_argument("--out", required=True)
    r.add_argument("--layout", default="multimodal", choices=["multimodal", "text"])
    r.add_argument("--seed", type=int, default=20260401)
    r.add_argument("--device", default="cuda")
    r.add_argument("--shard-gb", type=float, default=4.0)
    q = sub.add_parser("qwen35", help="the two tiny Qwen3.5 checkpoints (dense text layout, MoE multimodal layout)")
    q.add_argument("--out", default=HERE)
    q.add_argument("--seed", type=int, default=20260501)
    q.add_argument("--only", nargs="*")
    args = ap.parse_args()
    if args.cmd == "qwen35":
        make_qwen35(args)
    elif args.cmd == "tokenizer":
        train_tokenizer(args.out)
    elif args.cmd == "geometry":
        make_geometry(args)
    else:
        make_models(args)


if __name__ == "__main__":
    main()
