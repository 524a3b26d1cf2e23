#!/usr/bin/env python3
"""Asserts that splitting a model across devices changes no arithmetic: the dump of a split run is bit-identical to
the unsplit run's (every tensor of every step, the tokens and the greedy choices).

  check_split.py gpu CHECKPOINT WORKDIR [--gpu-share 0.5] [dump options]
      unsplit: the whole model on GPU 0; split: --max-memory lets GPU 0 hold about gpu-share of the text weights
      and keeps the other layers in host memory (accelerate computes them on GPU 0 too). Needs one GPU.
  check_split.py gpus CHECKPOINT WORKDIR [dump options]
      unsplit: GPU 0 (+ host memory when it does not fit); split: a pipeline split over every visible GPU.
  check_split.py cpu CHECKPOINT WORKDIR [--gpu-share 0.5] [dump options]
      CPU only: unsplit in host memory; split: --max-memory cpu=... and --offload-folder, so the layers that do not
      fit are read from disk as they run. Runs anywhere torch does (a tiny checkpoint takes seconds).
  check_split.py layout CHECKPOINT WORKDIR [dump options]
      the same text-only checkpoint rewritten in the multimodal Gemma4ForConditionalGeneration layout (weights under
      model.language_model., one vision-tower tensor added): both layouts must give the same dump.

Dump options are passed to make_dumps.py one (default: --prompt-random 64 --steps 4). Exit 0 identical, 1 not.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_dumps  # noqa: E402


def dump(checkpoint, out, extra, dump_args, results):
    cmd = [sys.executable, os.path.join(HERE, "make_dumps.py"), "one", checkpoint, out, "--force",
           "--results", results] + dump_args + extra
    print("+ " + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return json.load(open(os.path.join(out, "manifest.json")))


def text_bytes(checkpoint, dtype):
    _, _, prefix = make_dumps.read_config(checkpoint)
    elem = 4 if dtype == "float32" else 2
    return sum(math.prod(s) for _, s, _ in make_dumps.text_tensors(checkpoint, prefix).values()) * elem


def multimodal_copy(checkpoint, out):
    """checkpoint (text-only) rewritten in the released multimodal layout."""
    from safetensors.torch import load_file, save_file
    import torch
    os.makedirs(out, exist_ok=True)
    text = json.load(open(os.path.join(checkpoint, "config.json")))
    cfg = {"architectures": ["Gemma4ForConditionalGeneration"], "model_type": "gemma4", "text_config": text,
           "vision_config": None, "audio_config": None, "dtype": text.get("dtype", "bfloat16"),
           "tie_word_embeddings": text.get("tie_word_embeddings", True), "transformers_version": text.get("transformers_version")}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tensors = {}
    for p in sorted(os.listdir(checkpoint)):
        if p.endswith(".safetensors"):
            for k, v in load_file(os.path.join(checkpoint, p)).items():
                tensors["model.language_model." + k[len("model."):] if k.startswith("model.") else k] = v
        elif p.startswith("tokenizer") or p == "generation_config.json":
            shutil.copy(os.path.join(checkpoint, p), os.path.join(out, p))
    tensors["model.vision_tower.patch_embedder.input_proj.weight"] = torch.full((64, 64), float("nan"), dtype=torch.bfloat16)
    save_file(tensors, os.path.join(out, "model.safetensors"), metadata={"format": "pt"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["gpu", "gpus", "cpu", "layout"])
    ap.add_argument("checkpoint")
    ap.add_argument("workdir")
    ap.add_argument("--gpu-share", type=float, default=0.5, help="share of the text weights the first device holds")
    ap.add_argument("--keep", action="store_true", help="keep the two dumps")
    args, dump_args = ap.parse_known_args()
    if not any(a.startswith("--prompt") for a in dump_args):
        dump_args += ["--prompt-random", "64"]
    if "--steps" not in dump_args:
        dump_args += ["--steps", "4"]
    dtype = dump_args[dump_args.index("--dtype") + 1] if "--dtype" in dump_args else "float32"
    os.makedirs(args.workdir, exist_ok=True)
    a, b = os.path.join(args.workdir, "unsplit"), os.path.join(args.workdir, "split")
    results = os.path.join(args.workdir, "results.jsonl")
    need = text_bytes(args.checkpoint, dtype)
    if args.mode == "gpu":
        dump(args.checkpoint, a, ["--device", "cuda"], dump_args, results)
        cap = int(need * args.gpu_share)
        mb = dump(args.checkpoint, b, ["--device", "cuda", "--max-memory", f"0={cap}B,cpu={2 * need}B"], dump_args, results)
        want = "cpu"
    elif args.mode == "gpus":
        import torch
        n = torch.cuda.device_count()
        if n < 2:
            print(f"check_split.py gpus: needs 2 or more GPUs, torch sees {n}")
            sys.exit(2)
        dump(args.checkpoint, a, ["--device", "cuda", "--max-memory", f"0={int(need * 1.02)}B,cpu={2 * need}B"],
             dump_args, results)
        per = int(need / n * 1.15)
        caps = ",".join(f"{d}={per}B" for d in range(n))
        mb = dump(args.checkpoint, b, ["--device", "cuda", "--max-memory", caps], dump_args, results)
        want = "cuda:1"
    elif args.mode == "cpu":
        dump(args.checkpoint, a, ["--device", "cpu"], dump_args, results)
        off = os.path.join(args.workdir, "offload")
        mb = dump(args.checkpoint, b, ["--device", "cpu", "--max-memory", f"cpu={int(need * args.gpu_share)}B",
                                       "--offload-folder", off], dump_args, results)
        want = "disk"
    else:
        mm = os.path.join(args.workdir, "multimodal-" + os.path.basename(os.path.normpath(args.checkpoint)))
        multimodal_copy(args.checkpoint, mm)
        dump(args.checkpoint, a, [], dump_args, results)
        mb = dump(mm, b, [], dump_args, results)
        want = None
    placement = mb["producer"].get("placement", {})
    if want and want not in placement:
        print(f"NOT A SPLIT: the split run placed the layers as {placement}, nothing on {want}")
        sys.exit(1)
    ok, why = make_dumps.same_dumps(a, b)
    print(f"{args.mode} split check on {args.checkpoint}: placement {json.dumps(placement)}: "
          f"{'IDENTICAL' if ok else 'DIFFERENT'}: {why}", flush=True)
    if not args.keep:
        shutil.rmtree(a)
        shutil.rmtree(b)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
