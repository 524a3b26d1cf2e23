#!/usr/bin/env python3
"""Makes decodiff's small Gemma 4 text checkpoints (random weights, real Hugging Face format).

Two stages, both reproducible from --seed:

  make_checkpoints.py tokenizer [--out checkpoints/tokenizer]
      Trains a byte-fallback BPE (vocab 1024) on checkpoints/corpus/*.txt with the `tokenizers`
      library and writes tokenizer.json + tokenizer_config.json. Needs only `tokenizers`.

  make_checkpoints.py models [--out checkpoints] [--train-steps N] [--device cuda]
      For each checkpoint: Gemma4TextConfig + Gemma4ForCausalLM (transformers 5.17), well-conditioned
      random init (not transformers' default init), optionally a short training run on the corpus so
      greedy continuations are not degenerate and top-2 margins are larger, then
      save_pretrained(safe_serialization=True) in bfloat16, plus the tokenizer files.
      Prints config.json, every tensor name/shape/dtype and the sha256s (docs/dump-format.md).

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
    # (name, config kwargs, seed offset)
    return [("gemma4-tiny", tiny, 0), ("gemma4-tiny-ple", ple, 1), ("gemma4-tiny-moe", moe, 2)]


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
    with open(os.path.join(args.out, "checkpoints-summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")


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
    args = ap.parse_args()
    if args.cmd == "tokenizer":
        train_tokenizer(args.out)
    else:
        make_models(args)


if __name__ == "__main__":
    main()
