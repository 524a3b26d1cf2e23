#!/usr/bin/env python3
"""The Qwen3.5 foreign-candidate corpus: random tiny Qwen3.5 checkpoints (dense and MoE), fp32 transformers
references, and candidates made by transformers itself as a third-party engine, clean and with porting bugs planted
in its Gated DeltaNet / gated attention / MoE at run time (reference-dumps/qwen35_dumps.py's BUGS).

It measures whether `decodiff compare` tells a clean lower-precision Qwen3.5 engine (no false alarm) from a buggy one
(no false pass) on checkpoints it was never tuned on. Runs on the GPU machine (torch 2.11, transformers 5.17,
safetensors, NumPy; no network):

  make_qwen_corpus.py build --out DIR [--configs 15] [--seed 20260601] [--workers 15] [--deadline S]
  make_qwen_corpus.py plan  [--configs 15] [--seed 20260601]          # the configurations, no torch needed

Deterministic from --seed. For each configuration qNN, under DIR/configs/qNN/:
  checkpoint/          bf16 random well-conditioned weights (checkpoints/make_checkpoints.py's qwen35_init); dense
                       configurations in the text layout (save_pretrained), MoE ones in the released multimodal
                       layout with fused experts (as make_checkpoints.py writes qwen35-tiny-moe)
  dumps/ref            the fp32 reference: transformers on the CPU in float32, a prompt of 65-72 tokens (two chunks of
                       the chunked delta rule) then 6-8 greedy decode steps, verified as qwen35_dumps.py verifies
  dumps/cand-P         clean candidates teacher-forced on the reference's tokens, P = bf16-cpu, fp16-cpu, bf16-cuda
  dumps/cand-P-BUG     a candidate with a planted porting bug, P rotating over fp32-cpu, bf16-cpu, fp16-cpu, bf16-cuda
                       (the fp32 one is the fp32 bug run itself)
  dumps/ref-BUG        an fp32 reference made with the bug (two or three bugs per configuration), compared against
                       decodiff's live engine (and the clean bf16 candidate): the reference disagrees with the model
and DIR/corpus.json (format decodiff-corpus, as reference-dumps/corpus/make_corpus.py writes it), one entry per
comparison with its expected class: clean -> match/precision; bug -> divergence; reference-bug -> neither
match nor precision. Each bug's size is measured in fp32 (its fp32 run against the clean reference: the first cell it
changes and its rel L2 there -> "effect"); a bug that changes nothing is an error, never a silent clean run.
"""
import argparse
import glob
import json
import multiprocessing as mp
import os
import random
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, HERE)
import make_corpus as gemma_corpus  # noqa: E402  (the repository's paths, and a bug's measured fp32 effect)

REPO = gemma_corpus.REPO
effect = gemma_corpus.effect

LIN, FULL = "linear_attention", "full_attention"
BUG_NAMES = ["state-kept-in-bf16", "gated-norm-no-gate", "decay-after-update", "beta-not-sigmoided",
             "conv-state-zeroed", "attn-gate-missing", "shared-expert-gate-missing",
             # added after the first seven were measured, never tuned on
             "l2norm-mean-form", "decode-q-unscaled", "conv-taps-reversed", "dt-bias-missing", "norm-eps-1e-5"]
BUG_SIZE = {"state-kept-in-bf16": "small", "gated-norm-no-gate": "large", "decay-after-update": "large",
            "beta-not-sigmoided": "large", "conv-state-zeroed": "large", "attn-gate-missing": "large",
            "shared-expert-gate-missing": "large", "l2norm-mean-form": "large", "decode-q-unscaled": "large",
            "conv-taps-reversed": "large", "dt-bias-missing": "large", "norm-eps-1e-5": "small"}
CAND_CLASSES = ["fp32-cpu", "bf16-cpu", "fp16-cpu", "bf16-cuda"]
CLASS_DTYPE = {"fp32-cpu": ("float32", "cpu"), "bf16-cpu": ("bfloat16", "cpu"), "fp16-cpu": ("float16", "cpu"),
               "bf16-cuda": ("bfloat16", "cuda")}
REF_BUGS_PER_CONFIG = 2


def applies(bug, spec):
    return bug != "shared-expert-gate-missing" or spec["kind"] == "moe"


# ------------------------------------------------------------------------------------------------------------------
# Configurations
# ------------------------------------------------------------------------------------------------------------------

def random_config(i, seed):
    r = random.Random(seed * 1000 + i)
    kind = "moe" if i % 2 == 1 else "dense"
    L = r.choice([2, 3, 3, 4, 4])
    types_ = [FULL if r.random() < 0.35 else LIN for _ in range(L)]
    if LIN not in types_:
        types_[0] = LIN
    if FULL not in types_:
        types_[r.randrange(1, L)] = FULL
    nh = r.choice([2, 3, 4])
    nkv = r.choice([d for d in (1, 2, 3, 4) if nh % d == 0])
    hd = r.choice([16, 24, 32])
    prf = r.choice([0.25, 0.5, 1.0]) if hd != 24 else r.choice([0.25, 0.5, 1.0])
    rot = int(hd * prf)
    half = rot // 2
    sec = [half - 2 * (half // 3), half // 3, half // 3]
    lk = r.choice([1, 2, 2, 3])
    lv = lk * r.choice([1, 2, 3])
    dk = r.choice([8, 12, 16])
    dv = r.choice([8, 12, 16])
    H = r.choice([32, 32, 48])
    vocab = r.choice([256, 384, 512])
    kw = dict(vocab_size=vocab, hidden_size=H, head_dim=hd, num_attention_heads=nh, num_key_value_heads=nkv,
              linear_num_key_heads=lk, linear_num_value_heads=lv, linear_key_head_dim=dk, linear_value_head_dim=dv,
              linear_conv_kernel_dim=4, rms_norm_eps=1e-6, tie_word_embeddings=r.random() < 0.3,
              max_position_embeddings=4096, num_hidden_layers=L, layer_types=types_, hidden_act="silu",
              attention_bias=False, bos_token_id=2, eos_token_id=1, pad_token_id=0, partial_rotary_factor=prf,
              rope_parameters={"rope_type": "default", "rope_theta": r.choice([10000.0, 1000000.0]),
                               "partial_rotary_factor": prf, "mrope_section": sec, "mrope_interleaved": True})
    if kind == "dense":
        kw["intermediate_size"] = r.choice([32, 48, 64])
    else:
        ne = r.choice([4, 6, 8])
        kw.update(num_experts=ne, num_experts_per_tok=r.choice([1, 2, 2, 3]), moe_intermediate_size=r.choice([16, 24]),
                  shared_expert_intermediate_size=r.choice([16, 32]))
    prompt_len = r.randint(65, 72)
    pr = random.Random(seed * 31 + i)
    spec = {"id": f"q{i:02d}", "kind": kind, "kw": kw, "prompt_length": prompt_len, "steps": r.randint(6, 8),
            "init_seed": seed * 7919 + i, "prompt": [2] + [pr.randrange(3, vocab) for _ in range(prompt_len - 1)]}
    return spec


def assign(specs, seed):
    """Every applicable bug in every configuration as a candidate, its precision class rotating over CAND_CLASSES;
    REF_BUGS_PER_CONFIG bugs per configuration (least used first) also on the reference side."""
    r = random.Random(seed + 17)
    ref_n = {b: 0 for b in BUG_NAMES}
    cand_n = {}
    for k, spec in enumerate(specs):
        ok = [b for b in BUG_NAMES if applies(b, spec)]
        # the five bugs added later step through the classes by the configuration's rank within its kind (k // 2: dense
        # and MoE alternate): k + j would give each of them two classes only; the first seven keep k + j, so the corpora
        # measured before they were added rebuild the same
        spec["cand_bugs"] = [(b, CAND_CLASSES[((k if j < 7 else k // 2) + j) % len(CAND_CLASSES)]) for j, b in enumerate(ok)]
        for b, c in spec["cand_bugs"]:
            cand_n[(b, c)] = cand_n.get((b, c), 0) + 1
        r.shuffle(ok)
        refs = sorted(ok, key=lambda b: ref_n[b])[:REF_BUGS_PER_CONFIG]
        for b in refs:
            ref_n[b] += 1
        spec["ref_bugs"] = refs
    return cand_n, ref_n


def features(spec):
    kw = spec["kw"]
    f = {"kind": spec["kind"], "layers": kw["num_hidden_layers"], "layer_types": "".join("L" if t == LIN else "F" for t in kw["layer_types"]),
         "hidden": kw["hidden_size"], "heads": kw["num_attention_heads"], "kv_heads": kw["num_key_value_heads"],
         "head_dim": kw["head_dim"], "linear_k_heads": kw["linear_num_key_heads"], "linear_v_heads": kw["linear_num_value_heads"],
         "dk": kw["linear_key_head_dim"], "dv": kw["linear_value_head_dim"], "partial_rotary_factor": kw["partial_rotary_factor"],
         "tie": kw["tie_word_embeddings"], "vocab": kw["vocab_size"], "prompt_length": spec["prompt_length"], "steps": spec["steps"],
         "moe": spec["kind"] == "moe"}
    if spec["kind"] == "moe":
        f.update(experts=kw["num_experts"], top_k=kw["num_experts_per_tok"])
    return f


# ------------------------------------------------------------------------------------------------------------------
# Building
# ------------------------------------------------------------------------------------------------------------------

def make_checkpoint(spec, out):
    import torch
    import make_checkpoints as mc
    from safetensors.torch import save_file
    ConfigCls, ModelCls = mc.qwen35_classes(spec["kind"])
    cfg = ConfigCls(**spec["kw"])
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(spec["init_seed"])
    model = ModelCls(cfg).eval()
    gen = torch.Generator().manual_seed(spec["init_seed"])
    mc.qwen35_init(model, gen)
    model = model.to(torch.bfloat16)
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    if spec["kind"] == "dense":
        model.save_pretrained(out, safe_serialization=True)
        for extra in glob.glob(os.path.join(out, "*")):
            if not (os.path.basename(extra) == "config.json" or extra.endswith(".safetensors")):
                os.remove(extra)
        return
    tensors = {}
    for k, v in model.state_dict().items():
        if spec["kw"]["tie_word_embeddings"] and k == "lm_head.weight":
            continue
        key = "model.language_model." + k[len("model."):] if k.startswith("model.") else k
        tensors[key] = v.contiguous().clone()
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})
    text = cfg.to_dict()
    text.pop("_attn_implementation", None)
    text.pop("architectures", None)
    text["layer_types"] = list(cfg.layer_types)
    H = spec["kw"]["hidden_size"]
    wrapper = {"architectures": ["Qwen3_5MoeForConditionalGeneration"], "model_type": "qwen3_5_moe", "text_config": text,
               "vision_config": {"model_type": "qwen3_5_moe", "depth": 1, "hidden_size": 16, "num_heads": 2,
                                 "intermediate_size": 32, "out_hidden_size": H, "patch_size": 4, "spatial_merge_size": 2,
                                 "temporal_patch_size": 2, "in_channels": 3},
               "tie_word_embeddings": spec["kw"]["tie_word_embeddings"],
               "transformers_version": __import__("transformers").__version__}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(wrapper, f, indent=2)
        f.write("\n")


def dump(ck, out, feeds=None, greedy=None, dtype="float32", device="cpu", bug=None):
    import qwen35_dumps as qd
    return qd.make_dump(ck, out, "corpus" if bug is None else f"corpus-{bug}", feeds=feeds, greedy=greedy, dtype=dtype,
                        device=device, bug=bug, hf_check=False)


def rel(root, p):
    return os.path.relpath(p, root) if p else None


def entry(root, spec, ck, ref, cand, precision, side, bug, expected, eff=None, engine=None):
    e = {"id": None, "config": spec["id"], "checkpoint": rel(root, ck), "reference": rel(root, ref),
         "candidate": rel(root, cand), "precision": precision, "bug_side": side, "bug": bug,
         "bug_size": BUG_SIZE.get(bug), "expected": expected, "features": features(spec)}
    if engine:
        e["engine"] = engine
    if eff is not None:
        e["effect"] = eff
    return e


def setup_process(threads):
    import torch
    torch.set_num_threads(threads)
    import qwen35_dumps as qd
    qd.install_attention()


def build_cpu(spec, base, root):
    import qwen35_dumps as qd
    ck = os.path.join(base, "checkpoint")
    d = os.path.join(base, "dumps")
    os.makedirs(d, exist_ok=True)
    make_checkpoint(spec, ck)
    ref = os.path.join(d, "ref")
    m = dump(ck, ref, greedy=(spec["prompt"], spec["steps"]))
    if not m["verification"]["ok"]:  # kept, and said: the runs carry it in their features
        print(f"WARNING {spec['id']}: the fp32 reference failed its verification {m['verification']}")
    spec["verification_ok"] = bool(m["verification"]["ok"])
    feeds = qd.teacher_feeds(ref)
    out = []
    for cls in ("bf16-cpu", "fp16-cpu"):
        dt, dev = CLASS_DTYPE[cls]
        c = os.path.join(d, f"cand-{cls}")
        dump(ck, c, feeds=feeds, dtype=dt, device=dev)
        out.append(entry(root, spec, ck, ref, c, cls, "none", None, "clean"))
    effects, errors = {}, []
    for bug, cls in spec["cand_bugs"]:
        try:
            out += one_bug(spec, root, ck, d, ref, feeds, bug, cls, effects)
        except Exception:  # one bug's patch failing loses that bug's runs, not the configuration's
            traceback.print_exc()
            errors.append(f"{spec['id']} {bug}: {traceback.format_exc().splitlines()[-1]}")
    with open(os.path.join(base, "effects.json"), "w") as f:
        json.dump(effects, f, indent=1)
    return out, errors


def one_bug(spec, root, ck, d, ref, feeds, bug, cls, effects):
    """One planted bug: its fp32 run (its size, and the buggy reference), its candidate in its precision class (the
    bf16-cuda one comes in the GPU phase). Returns its runs; a failure raises before any of them is listed."""
    runs = []
    r = os.path.join(d, f"ref-{bug}")
    dump(ck, r, feeds=feeds, bug=bug)
    eff = effect(ref, r)
    if eff["first"] is None:
        raise RuntimeError(f"{spec['id']}: bug {bug} changed nothing (the patch missed)")
    if bug in spec["ref_bugs"]:
        runs.append(entry(root, spec, ck, r, None, "live-decodiff", "reference", bug, "reference-bug", eff, engine="decodiff"))
        runs.append(entry(root, spec, ck, r, os.path.join(d, "cand-bf16-cpu"), "bf16-cpu", "reference", bug, "reference-bug", eff))
    if cls == "fp32-cpu":
        runs.append(entry(root, spec, ck, ref, r, cls, "candidate", bug, "bug", eff))
    elif cls != "bf16-cuda":
        dt, dev = CLASS_DTYPE[cls]
        c = os.path.join(d, f"cand-{cls}-{bug}")
        dump(ck, c, feeds=feeds, dtype=dt, device=dev, bug=bug)
        runs.append(entry(root, spec, ck, ref, c, cls, "candidate", bug, "bug", eff))
    if cls != "fp32-cpu" and bug not in spec["ref_bugs"]:
        shutil.rmtree(r)  # measured; not kept (the corpus stays small)
    effects[bug] = eff
    return runs


def cpu_jobs(args):
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
            out, errors = build_cpu(spec, base, root)
            return cid, out, "\n".join(errors) or None, time.time() - t0
        except Exception:
            traceback.print_exc()
            return cid, [], traceback.format_exc(), time.time() - t0
        finally:
            sys.stdout, sys.stderr = old


def gpu_worker(specs, root, deadline):
    out, errors = [], []
    with open(os.path.join(root, "logs", "gpu.log"), "w") as log:
        old = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = log
        try:
            import qwen35_dumps as qd
            setup_process(4)
            for spec in specs:
                if time.time() > deadline:
                    errors.append(f"{spec['id']}: GPU phase out of time")
                    continue
                try:
                    base = os.path.join(root, "configs", spec["id"])
                    ck = os.path.join(base, "checkpoint")
                    ref = os.path.join(base, "dumps", "ref")
                    feeds = qd.teacher_feeds(ref)
                    effects = json.load(open(os.path.join(base, "effects.json")))
                    c = os.path.join(base, "dumps", "cand-bf16-cuda")
                    dump(ck, c, feeds=feeds, dtype="bfloat16", device="cuda")
                    out.append(entry(root, spec, ck, ref, c, "bf16-cuda", "none", None, "clean"))
                    for bug, cls in spec["cand_bugs"]:
                        if cls != "bf16-cuda" or bug not in effects:  # not in effects: its fp32 run failed
                            continue
                        try:
                            c = os.path.join(base, "dumps", f"cand-bf16-cuda-{bug}")
                            dump(ck, c, feeds=feeds, dtype="bfloat16", device="cuda", bug=bug)
                            out.append(entry(root, spec, ck, ref, c, cls, "candidate", bug, "bug", effects.get(bug)))
                        except Exception:
                            traceback.print_exc()
                            errors.append(f"{spec['id']} {bug} (bf16-cuda): {traceback.format_exc().splitlines()[-1]}")
                except Exception:
                    traceback.print_exc()
                    errors.append(f"{spec['id']}: {traceback.format_exc().splitlines()[-1]}")
        finally:
            sys.stdout, sys.stderr = old
    with open(os.path.join(root, "logs", "gpu-result.json"), "w") as f:
        json.dump({"entries": out, "errors": errors}, f)


def versions():
    import torch
    import transformers
    return {"torch": torch.__version__, "transformers": transformers.__version__, "python": sys.version.split()[0],
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def write_index(root, args, specs, entries, errors):
    order = {s["id"]: k for k, s in enumerate(specs)}
    entries = sorted(entries, key=lambda e: (order[e["config"]], e["bug_side"], e["precision"], e["bug"] or "", e["candidate"] or ""))
    for k, e in enumerate(entries):
        e["id"] = f"q{k:03d}"
    doc = {"format": "decodiff-corpus", "version": 1, "family": "qwen3.5", "seed": args.seed, "made_with": versions(),
           "bugs": {b: BUG_SIZE[b] for b in BUG_NAMES}, "errors": errors,
           "configs": {s["id"]: {"kind": s["kind"], "config": s["kw"], "prompt": s["prompt"], "steps": s["steps"],
                                 "cand_bugs": s["cand_bugs"], "ref_bugs": s["ref_bugs"]} for s in specs},
           "runs": entries}
    with open(os.path.join(root, "corpus.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return doc


def build(args):
    t_start = time.time()
    root = os.path.abspath(args.out)
    if os.path.exists(root):
        shutil.rmtree(root)
    os.makedirs(os.path.join(root, "logs"))
    specs = [random_config(i, args.seed) for i in range(args.configs)]
    cand_n, ref_n = assign(specs, args.seed)
    print(f"{len(specs)} configurations; reference bugs {ref_n}", flush=True)
    ctx = mp.get_context("spawn")
    entries, errors = [], []
    with ctx.Pool(args.workers) as pool:
        for cid, es, err, secs in pool.imap_unordered(cpu_jobs, [(s, root) for s in specs]):
            print(f"  {cid}: {len(es)} runs, {secs:.0f}s{' ERROR ' + err.splitlines()[-1] if err else ''}", flush=True)
            entries += es
            if err:
                errors += [e if e.startswith(cid) else f"{cid}: {e}" for e in err.splitlines()[-12:] if e.strip()]
            write_index(root, args, specs, entries, errors)  # as it goes: a cut-off build keeps what is done
    print(f"CPU phase {time.time() - t_start:.0f}s", flush=True)
    write_index(root, args, specs, entries, errors)
    done = {e["config"] for e in entries}
    t1 = time.time()
    g = ctx.Process(target=gpu_worker, args=([s for s in specs if s["id"] in done], root, t_start + args.deadline))
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
    write_index(root, args, specs, entries, errors)
    from collections import Counter
    c = Counter((e["expected"], e["precision"]) for e in entries)
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(root, "**"), recursive=True) if os.path.isfile(p))
    print(f"{len(entries)} runs, {size / 2**20:.1f} MiB, {time.time() - t_start:.0f}s")
    for k, v in sorted(c.items()):
        print(f"  {k[0]:14s} {k[1]:18s} {v}")
    for e in errors:
        print("ERROR " + e)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", required=True)
    b.add_argument("--configs", type=int, default=15)
    b.add_argument("--seed", type=int, default=20260601)
    b.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    b.add_argument("--deadline", type=float, default=250, help="seconds after which the GPU phase skips what is left")
    p = sub.add_parser("plan")
    p.add_argument("--configs", type=int, default=15)
    p.add_argument("--seed", type=int, default=20260601)
    for q in (b, p):
        q.add_argument("--bugs", help="comma-separated bugs (default: all; the first seven reproduce the corpora measured "
                                      "before the other five were added)")
    args = ap.parse_args()
    if args.bugs:
        unknown = [x for x in args.bugs.split(",") if x not in BUG_SIZE]
        if unknown:
            sys.exit(f"make_qwen_corpus.py: --bugs: unknown {unknown}; known: {', '.join(BUG_NAMES)}")
        BUG_NAMES[:] = [x for x in BUG_NAMES if x in args.bugs.split(",")]
    if args.cmd == "plan":
        specs = [random_config(i, args.seed) for i in range(args.configs)]
        cand_n, ref_n = assign(specs, args.seed)
        for s in specs:
            print(s["id"], json.dumps(features(s)), s["cand_bugs"], s["ref_bugs"])
        print("candidate bugs (bug, class):", {f"{b}/{c}": n for (b, c), n in sorted(cand_n.items())})
        print("reference bugs", ref_n)
        return
    build(args)


if __name__ == "__main__":
    main()
