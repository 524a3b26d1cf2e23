#!/usr/bin/env python3
"""Picks the Qwen3.5 corpus's CI sample (tests/src/test/resources/qwen-corpus-sample) from a built corpus.

  scripts/qwen-corpus-sample.py CORPUS_DIR [--out DIR] [--config qNN] [--max-bytes N]

One configuration (the smallest whose runs give every class, unless --config names one): a clean bf16 and a clean
fp16 candidate, three candidate bugs, and a reference made with a bug against decodiff's live engine; copied with
their checkpoint and dumps, and a corpus.json of those runs. Python 3.11, standard library only.
"""
import argparse
import json
import os
import shutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PREFER_BUGS = ["beta-not-sigmoided", "attn-gate-missing", "state-kept-in-bf16", "gated-norm-no-gate", "conv-state-zeroed",
               "decay-after-update", "shared-expert-gate-missing"]


def size(folder, paths):
    seen, n = set(), 0
    for p in paths:
        d = os.path.join(folder, p)
        if p is None or d in seen:
            continue
        seen.add(d)
        for dp, _, fs in os.walk(d):
            n += sum(os.path.getsize(os.path.join(dp, f)) for f in fs)
    return n


def pick(runs):
    clean = {e["precision"]: e for e in runs if e["expected"] == "clean"}
    if "bf16-cpu" not in clean or "fp16-cpu" not in clean:
        return None
    bugs = [e for e in runs if e["expected"] == "bug"]
    bugs.sort(key=lambda e: (PREFER_BUGS.index(e["bug"]), e["precision"] != "fp32-cpu"))
    chosen_bugs, classes = [], set()
    for e in bugs:  # three bugs in distinct precision classes where possible
        if e["precision"] not in classes and len(chosen_bugs) < 3:
            chosen_bugs.append(e)
            classes.add(e["precision"])
    live = [e for e in runs if e["expected"] == "reference-bug" and e.get("engine") == "decodiff"]
    if len(chosen_bugs) < 3 or not live:
        return None
    # a reference bug whose dump a candidate run already carries costs nothing more
    have = {e["candidate"] for e in chosen_bugs}
    live.sort(key=lambda e: e["reference"] not in have)
    return [clean["bf16-cpu"], clean["fp16-cpu"]] + chosen_bugs + [live[0]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--out", default=os.path.join(REPO, "tests/src/test/resources/qwen-corpus-sample"))
    ap.add_argument("--config")
    ap.add_argument("--max-bytes", type=int, default=4_500_000)
    args = ap.parse_args()
    doc = json.load(open(os.path.join(args.corpus, "corpus.json"), encoding="utf-8"))
    by_cfg = {}
    for e in doc["runs"]:
        by_cfg.setdefault(e["config"], []).append(e)
    options = []
    for cid, runs in by_cfg.items():
        if args.config and cid != args.config:
            continue
        p = pick(runs)
        if p:
            paths = {x for e in p for x in (e["checkpoint"], e["reference"], e["candidate"]) if x}
            options.append((size(args.corpus, paths), cid, p))
    if not options:
        sys.exit("qwen-corpus-sample: no configuration gives every class")
    options.sort(key=lambda o: o[0])
    n, cid, chosen = options[0]
    print(f"{cid}: {len(chosen)} runs, {n} bytes")
    if n > args.max_bytes:
        sys.exit(f"qwen-corpus-sample: the smallest sample is {n} bytes, over {args.max_bytes}")
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    for e in chosen:
        for key in ("checkpoint", "reference", "candidate"):
            if e.get(key) and not os.path.exists(os.path.join(args.out, e[key])):
                shutil.copytree(os.path.join(args.corpus, e[key]), os.path.join(args.out, e[key]))
    with open(os.path.join(args.out, "corpus.json"), "w", encoding="utf-8") as f:
        json.dump({"format": "decodiff-corpus", "version": 1, "family": "qwen3.5", "seed": doc.get("seed"),
                   "made_with": doc.get("made_with"), "bugs": doc.get("bugs"),
                   "sample_of": "the corpus of reference-dumps/corpus/make_qwen_corpus.py", "runs": chosen}, f, indent=1)
        f.write("\n")
    for e in chosen:
        print(f"  {e['id']} {e['expected']:13s} {e['precision']:14s} {e['bug'] or '-'}")


if __name__ == "__main__":
    main()
