#!/usr/bin/env python3
"""Runs `decodiff compare` over a foreign-candidate corpus and measures its false-alarm and false-pass rates.

  scripts/corpus-rates.py CORPUS_DIR [--json FILE] [--only ID,...] [--decodiff PATH] [--timeout S] [--resume]
                                     [--llamacpp f32,bf16,f16] [--limit N]

CORPUS_DIR holds corpus.json (reference-dumps/corpus/make_corpus.py writes it for Gemma 4, make_qwen_corpus.py for
Qwen3.5; the committed CI samples have one too). A run with "engine": "decodiff" and no candidate compares the
reference against decodiff's own engine, live.
Each run is compared as

  decodiff compare REFERENCE CANDIDATE --model CHECKPOINT --json

(two dumps, local attribution on: the checkpoint is at hand), and its verdict, exit code and first divergent cell
are recorded. Each run's expected class decides what counts as wrong:

  clean          (a clean candidate)        wrong unless the verdict is match or precision (exit 0): a false alarm
  bug            (a bug in the candidate)   wrong if the verdict is match or precision: a false pass
  reference-bug  (a bug in the reference)   wrong if the verdict is match or precision: a false pass

The table: runs per precision class and expected class, the false alarms, and the false passes by bug, side and size
class (with each bug's measured fp32 effect at its first changed cell, so a miss can be set against the detection
floor). --json writes every run's result and the summary. --resume reuses the results already in --json for runs
whose command is unchanged. --llamacpp adds, for every configuration, clean live runs of llama.cpp on the fp32
reference (`compare REF --engine llama.cpp --gguf-type T --model CKPT`), expected clean.

Python 3.11, standard library only. Exit 0 when every run was judged (wrong verdicts included), 2 on bad usage.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASS = ("match", "precision")


def load_corpus(folder):
    path = os.path.join(folder, "corpus.json")
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"corpus-rates: {path}: not a readable corpus index ({e})")
    if doc.get("format") != "decodiff-corpus" or not isinstance(doc.get("runs"), list):
        sys.exit(f"corpus-rates: {path}: not a decodiff corpus index (format 'decodiff-corpus' with a 'runs' list)")
    return doc


def llamacpp_runs(doc, types):
    """Clean live llama.cpp runs on each configuration's fp32 reference."""
    refs = {}
    for e in doc["runs"]:
        if e["bug_side"] == "none" and e["reference"].endswith("/ref"):
            refs.setdefault(e["config"], e)
    out = []
    for cid, e in sorted(refs.items()):
        # llama.cpp's Gemma 4 caps the final logits at 30 when the GGUF has no final_logit_softcapping (its hparams
        # default), and its converter writes the key only when the config's value is set: a model without the cap
        # gets one. That is llama.cpp's own bug, expected to be found at the logits.
        uncapped = not (e.get("features") or {}).get("softcap")
        for t in types:
            out.append({"id": f"{cid}-llamacpp-{t}", "config": cid, "checkpoint": e["checkpoint"],
                        "reference": e["reference"], "candidate": None, "engine": "llama.cpp", "gguf_type": t,
                        "precision": f"llamacpp-{t}", "bug_side": "candidate" if uncapped else "none",
                        "bug": "llamacpp-softcap-default-30" if uncapped else None, "bug_size": "small" if uncapped else None,
                        "expected": "bug" if uncapped else "clean", "features": e.get("features")})
    return out


def command(decodiff, folder, e):
    ref = os.path.join(folder, e["reference"])
    ck = os.path.join(folder, e["checkpoint"])
    if e.get("engine") == "llama.cpp":
        return [decodiff, "compare", ref, "--engine", "llama.cpp", "--gguf-type", e["gguf_type"], "--model", ck,
                "--json"]
    if e.get("engine") == "decodiff":  # decodiff's own engine, live, against the reference
        return [decodiff, "compare", ref, "--model", ck, "--json"]
    return [decodiff, "compare", ref, os.path.join(folder, e["candidate"]), "--model", ck, "--json"]


def run_one(decodiff, folder, e, timeout):
    cmd = command(decodiff, folder, e)
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        rc, out, err = None, "", f"timed out after {timeout}s"
    return result(e, cmd, rc, out, err, time.time() - t0)


def result(e, cmd, rc, out, err, seconds):
    res = {"id": e["id"], "command": cmd, "exit": rc, "seconds": round(seconds, 1)}
    try:
        doc = json.loads(out) if out.strip() else None
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        res["verdict"] = doc.get("verdict")
        fd = doc.get("first_divergence")
        if isinstance(fd, dict):
            res["first_divergence"] = {k: fd.get(k) for k in ("step", "layer", "point", "rel_l2", "tolerance", "kind")}
        res["verdict_text"] = (doc.get("verdict_text") or "")[:400]
        at = doc.get("attribution")
        if isinstance(at, dict) and isinstance(at.get("detection_floor"), dict):
            res["detection_floor"] = at["detection_floor"]
        for k in ("reference_disagreement", "reference"):
            v = doc.get(k)
            if isinstance(v, dict):  # a finding about the reference, when the verdict logic reports one
                res[k] = v
    else:
        res["verdict"] = {0: "?", 1: "divergence", 2: "bad-input", 3: "incomplete"}.get(rc, "error")
        res["stderr"] = (err or "").strip().splitlines()[-3:] if err else []
    return res


def run_batch(decodiff, folder, entries, timeout):
    """Every comparison in one JVM (`decodiff batch`): hundreds of small comparisons cost a JVM start each otherwise."""
    cmds = [command(decodiff, folder, e) for e in entries]
    with tempfile.TemporaryDirectory() as tmp:
        cf, rf = os.path.join(tmp, "commands.jsonl"), os.path.join(tmp, "results.jsonl")
        with open(cf, "w", encoding="utf-8") as f:
            for c in cmds:
                f.write(json.dumps(c[1:]) + "\n")
        t0 = time.time()
        p = subprocess.Popen([decodiff, "batch", cf, "--out", rf], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        done = 0
        while p.poll() is None or done < len(cmds):
            time.sleep(1)
            if os.path.exists(rf):
                with open(rf, encoding="utf-8") as f:
                    lines = f.read().splitlines()
                for line in lines[done:]:
                    try:
                        r = json.loads(line)
                    except ValueError:
                        break
                    e = entries[r["index"]]
                    res = result(e, cmds[r["index"]], r["exit"], r["stdout"], r["stderr"], time.time() - t0)
                    t0 = time.time()
                    done += 1
                    yield e, res
            if p.poll() is not None and done < len(cmds):
                if os.path.exists(rf) and done < len(open(rf, encoding="utf-8").read().splitlines()):
                    continue
                err = (p.stderr.read() or "").strip().splitlines()[-3:]
                sys.exit(f"corpus-rates: decodiff batch stopped after {done} of {len(cmds)} comparisons: {' '.join(err)}")


def judge(e, res):
    passed = res.get("exit") == 0 and res.get("verdict") in PASS
    if e["expected"] == "clean":
        return "ok" if passed else "false-alarm"
    return "false-pass" if passed else "ok"


FP32_TOLERANCE = {"embed": 1e-5}


def kind_of(point):
    parts = (point or "").split(".")
    return ".".join(parts[2:]) if len(parts) > 2 and parts[0] == "layers" else (point or "")


def floor_of(e, res):
    """The smallest local error this run could tell from rounding at the bug's first cell: the detection floor the
    report states for that op kind (an envelope was used there), else the fp32 tolerance of the kind."""
    eff = (e.get("effect") or {}).get("first") or {}
    kind = kind_of(eff.get("point"))
    return max((res.get("detection_floor") or {}).get(kind, 0.0), FP32_TOLERANCE.get(kind, 1e-4))


def above_floor(e, res):
    eff = (e.get("effect") or {}).get("first") or {}
    return eff.get("rel_l2") is not None and eff["rel_l2"] > floor_of(e, res)


def rate(n, d):
    return f"{n}/{d} ({100.0 * n / d:.1f}%)" if d else "0/0"


def summarise(entries, results):
    by_id = {r["id"]: r for r in results}
    rows = []
    for e in entries:
        r = by_id.get(e["id"])
        if r is None:
            continue
        rows.append((e, r, judge(e, r)))
    s = {}
    cls = Counter((e["precision"], e["expected"]) for e, _, _ in rows)
    s["runs"] = {f"{p} / {x}": n for (p, x), n in sorted(cls.items())}
    clean = [(e, r, j) for e, r, j in rows if e["expected"] == "clean"]
    fa = [(e, r) for e, r, j in clean if j == "false-alarm"]
    s["false_alarms"] = {"count": len(fa), "of": len(clean),
                         "by_precision": {p: {"false_alarms": sum(1 for e, _ in fa if e["precision"] == p),
                                              "of": sum(1 for e, _, _ in clean if e["precision"] == p)}
                                          for p in sorted({e["precision"] for e, _, _ in clean})},
                         "runs": [{"id": e["id"], "config": e["config"], "precision": e["precision"],
                                   "verdict": r.get("verdict"), "exit": r.get("exit"),
                                   "first_divergence": r.get("first_divergence")} for e, r in fa]}
    bugs = [(e, r, j) for e, r, j in rows if e["expected"] in ("bug", "reference-bug")]
    fp = defaultdict(lambda: {"false_passes": 0, "of": 0, "runs": []})
    for e, r, j in bugs:
        key = f"{e['bug_side']} / {e['bug']} ({e.get('bug_size') or '?'})"
        fp[key]["of"] += 1
        if j == "false-pass":
            fp[key]["false_passes"] += 1
            eff = (e.get("effect") or {}).get("first") or {}
            fp[key]["runs"].append({"id": e["id"], "config": e["config"], "precision": e["precision"],
                                    "verdict": r.get("verdict"), "effect_first": eff, "floor": floor_of(e, r)})
    s["false_passes"] = {"count": sum(v["false_passes"] for v in fp.values()), "of": len(bugs),
                         "by_bug": dict(sorted(fp.items()))}
    size = defaultdict(lambda: [0, 0])
    for e, r, j in bugs:
        k = f"{e['bug_side']} / {e.get('bug_size') or '?'}"
        size[k][1] += 1
        size[k][0] += j == "false-pass"
    s["false_passes_by_size"] = {k: {"false_passes": v[0], "of": v[1]} for k, v in sorted(size.items())}
    floors = defaultdict(lambda: [0, 0])
    for e, r, j in bugs:
        k = "above the floor" if above_floor(e, r) else "below the floor"
        floors[k][1] += 1
        floors[k][0] += j == "false-pass"
    s["false_passes_by_floor"] = {k: {"false_passes": v[0], "of": v[1]} for k, v in sorted(floors.items())}
    verdicts = Counter((e["expected"], r.get("verdict")) for e, r, _ in rows)
    s["verdicts"] = {f"{x} -> {v}": n for (x, v), n in sorted(verdicts.items(), key=lambda kv: str(kv[0]))}
    return s, rows


def print_table(s, rows, out=sys.stdout):
    p = lambda *a: print(*a, file=out)
    p(f"\nruns judged: {len(rows)}")
    p("\nruns per class (precision / expected):")
    for k, v in s["runs"].items():
        p(f"  {k:40s} {v:4d}")
    fa = s["false_alarms"]
    p(f"\nfalse alarms (clean -> not match/precision): {rate(fa['count'], fa['of'])}")
    for k, v in fa["by_precision"].items():
        p(f"  {k:24s} {rate(v['false_alarms'], v['of'])}")
    for r in fa["runs"]:
        cell = r.get("first_divergence") or {}
        p(f"    {r['id']} {r['config']} {r['precision']:18s} {r['verdict']} (exit {r['exit']})"
          f"{' at step %s %s rel %.3g' % (cell.get('step'), cell.get('point'), cell.get('rel_l2') or 0) if cell else ''}")
    fp = s["false_passes"]
    p(f"\nfalse passes (bug -> match/precision): {rate(fp['count'], fp['of'])}")
    for k, v in s["false_passes_by_size"].items():
        p(f"  {k:30s} {rate(v['false_passes'], v['of'])}")
    p("  by the bug's first fp32 effect against the run's detection floor at that op:")
    for k, v in s["false_passes_by_floor"].items():
        p(f"    {k:28s} {rate(v['false_passes'], v['of'])}")
    p("  by bug:")
    for k, v in fp["by_bug"].items():
        p(f"    {k:48s} {rate(v['false_passes'], v['of'])}")
        for r in v["runs"]:
            eff = r.get("effect_first") or {}
            p(f"      {r['id']} {r['config']} {r['precision']:18s} {r['verdict']}; the bug's first fp32 effect: "
              f"step {eff.get('step')} {eff.get('point')} rel {eff.get('rel_l2', 0):.3g} (floor {r.get('floor', 0):.3g})")
    p("\nverdicts (expected -> verdict):")
    for k, v in s["verdicts"].items():
        p(f"  {k:40s} {v:4d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus", help="the folder holding corpus.json")
    ap.add_argument("--json", help="write every run's result and the summary here")
    ap.add_argument("--only", help="comma-separated run ids")
    ap.add_argument("--limit", type=int, help="the first N runs only")
    ap.add_argument("--decodiff", default=os.path.join(REPO, "decodiff"))
    ap.add_argument("--timeout", type=int, default=600, help="seconds per comparison (default 600)")
    ap.add_argument("--resume", action="store_true", help="reuse results in --json whose command is unchanged")
    ap.add_argument("--llamacpp", help="also clean live llama.cpp runs, GGUF types e.g. f32,bf16,f16")
    ap.add_argument("--one-process-each", dest="batch", action="store_false",
                    help="run each comparison as its own decodiff process (default: all in one, through decodiff batch)")
    args = ap.parse_args()
    folder = os.path.abspath(args.corpus)
    doc = load_corpus(folder)
    entries = list(doc["runs"])
    if args.llamacpp:
        entries += llamacpp_runs(doc, [t.strip() for t in args.llamacpp.split(",") if t.strip()])
    if args.only:
        want = set(args.only.split(","))
        entries = [e for e in entries if e["id"] in want]
    if args.limit:
        entries = entries[: args.limit]
    old = {}
    if args.resume and args.json and os.path.exists(args.json):
        with open(args.json, encoding="utf-8") as f:
            old = {r["id"]: r for r in json.load(f).get("results", [])}
    results = {}
    t0 = time.time()
    todo = []
    for e in entries:
        r = old.get(e["id"])
        if r is None or r.get("command") != command(args.decodiff, folder, e) or r.get("exit") is None:
            todo.append(e)
        else:
            results[e["id"]] = r
    fresh = run_batch(args.decodiff, folder, todo, args.timeout) if args.batch else \
        ((e, run_one(args.decodiff, folder, e, args.timeout)) for e in todo)
    for k, (e, r) in enumerate(fresh):
        results[e["id"]] = r
        j = judge(e, r)
        cell = r.get("first_divergence") or {}
        print(f"[{k + 1}/{len(todo)}] {e['id']} {e['config']} {e['precision']:18s} {e['expected']:13s} "
              f"{(e['bug'] or '-'):22s} -> {r.get('verdict')} (exit {r.get('exit')})"
              f"{' at %s/%s' % (cell.get('step'), cell.get('point')) if cell else ''}"
              f"{'  <- ' + j.upper() if j != 'ok' else ''}", flush=True)
        if args.json:  # written as it goes, so --resume picks up after an interruption
            write_json(args.json, doc, entries, [results[x["id"]] for x in entries if x["id"] in results], None)
    results = [results[e["id"]] for e in entries if e["id"] in results]
    s, rows = summarise(entries, results)
    print_table(s, rows)
    print(f"\n{len(results)} comparisons in {time.time() - t0:.0f}s")
    if args.json:
        write_json(args.json, doc, entries, results, s)
        print(f"wrote {args.json}")


def write_json(path, doc, entries, results, summary):
    tmp = path + ".partial"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"corpus_seed": doc.get("seed"), "made_with": doc.get("made_with"), "summary": summary,
                   "entries": entries, "results": results}, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
