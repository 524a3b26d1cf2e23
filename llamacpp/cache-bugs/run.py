#!/usr/bin/env python3
"""Runs the cache-bug suite: each patch of manifest.tsv built into llama.cpp (scripts/llamacpp-native.sh --patch, an
incremental rebuild of libllama), then `decodiff sweep --engine llama.cpp --json --repro DIR` on a bundled checkpoint
with the patched library. For each bug: the family that fails first, its boundary, the minimized schedule (operations,
and the length it was shrunk to), the first cell that differs, the time the sweep took; then the repro folder's C
program is built with gcc against the patched library and run on its own: it must print the disagreement (DISAGREE).

Prints the table bug -> family, boundary, minimized schedule, first cell, time, repro; exit 0 when every bug is found in
its expected family at its expected boundary, its minimized first cell is manifest.tsv's and its repro disagrees, and the clean library passes every family; 1
otherwise.

  llamacpp/cache-bugs/run.py [--only NAME[,NAME...]] [--model DIR] [--no-clean] [--work DIR] [--json FILE]

Python 3 standard library only; the first run builds llama.cpp natively (about 10 minutes on two cores).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DECODIFF = ROOT / "decodiff"
NATIVE = ROOT / "scripts" / "llamacpp-native.sh"


def manifest():
    bugs = []
    for line in (HERE / "manifest.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, setting, family, boundary, cell = line.split("\t")
        bugs.append(dict(name=name, setting=setting, family=family, boundary=int(boundary), cell=cell))
    return bugs


def library(patch=None):
    cmd = [str(NATIVE)] + (["--patch", str(patch)] if patch else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return pathlib.Path(r.stdout.strip().splitlines()[-1])


def sweep(lib, model, repro):
    """`decodiff sweep --engine llama.cpp --json --repro DIR` with llama.cpp from `lib`: (parsed JSON or None, seconds, stderr)."""
    env = dict(os.environ, DECODIFF_LLAMACPP_LIB=str(lib))
    args = [str(DECODIFF), "sweep", "--engine", "llama.cpp", "--json"]
    if model:
        args += ["--model", str(model)]
    if repro:
        args += ["--repro", str(repro)]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT)
    took = time.monotonic() - t0
    try:
        return json.loads(r.stdout), took, r.stderr
    except json.JSONDecodeError:
        return None, took, r.stderr


def cell_text(c):
    return f"step {c['step']}, sequence {c['sequence']}, position {c['position']}, {c['point']}"


def replay(lib, repro):
    """Builds repro.c with gcc against the library (its folder's parent holds lib/ and src/include) and runs it."""
    env = dict(os.environ, LLAMA=str(lib.parent))
    b = subprocess.run(["sh", str(repro / "build.sh")], capture_output=True, text=True, env=env)
    if b.returncode != 0:
        return f"build failed: {b.stderr.strip().splitlines()[-1] if b.stderr.strip() else b.returncode}"
    model = json.loads((repro / "cell.json").read_text())["model_file"]
    r = subprocess.run([str(repro / "repro"), model], capture_output=True, text=True)
    line = next((l for l in r.stdout.splitlines() if l.startswith(("DISAGREE", "agree"))), r.stdout.strip()[-200:])
    return line


def main():
    ap = argparse.ArgumentParser(description="the llama.cpp cache-bug suite")
    ap.add_argument("--only", help="comma-separated patch names (default: all of manifest.tsv)")
    ap.add_argument("--model", help="checkpoint folder (default: the bundled checkpoints/gemma4-tiny; the expected cells are for it)")
    ap.add_argument("--no-clean", action="store_true", help="skip the clean library's sweep")
    ap.add_argument("--work", help="folder for the repro folders (default: a temporary one)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()

    bugs = manifest()
    if a.only:
        wanted = set(a.only.split(","))
        unknown = wanted - {b["name"] for b in bugs}
        if unknown:
            sys.exit(f"run.py: no patch named {', '.join(sorted(unknown))} in {HERE / 'manifest.tsv'}")
        bugs = [b for b in bugs if b["name"] in wanted]
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="decodiff-cache-bugs-"))
    work.mkdir(parents=True, exist_ok=True)

    ok = True
    clean = library()
    if not a.no_clean:
        data, took, err = sweep(clean, a.model, None)
        passed = data is not None and data["passed"]
        ok = ok and passed
        print(f"clean llama.cpp: {'every family passes' if passed else 'FAILS'} ({took:.0f}s)"
              + ("" if data else f": {err.strip().splitlines()[-1] if err.strip() else 'no output'}"), file=sys.stderr)

    rows = []
    for bug in bugs:
        lib = library(HERE / f"{bug['name']}.patch")
        repro = work / bug["name"]
        data, took, err = sweep(lib, a.model, repro)
        row = dict(bug=bug["name"], expected=f"{bug['family']} @ {bug['boundary']}", expected_cell=bug["cell"], seconds=took)
        ff = data and data.get("first_failing")
        if not ff:
            row.update(found=False, note="not found" if data else (err.strip().splitlines() or ["no output"])[-1])
            ok = False
            rows.append(row)
            print(f"  {bug['name']}: {row['note']}", file=sys.stderr)
            continue
        fam = next(f for f in data["families"] if f["family"] == ff["family"] and f["settings"] == ff["settings"])
        m = fam.get("minimized") or {}
        scen = m.get("scenario") or {}
        first = m.get("first_cell") or next(b for b in fam["boundaries"] if b["outcome"] == "fail")
        replayed = replay(lib, repro) if (repro / "repro.c").exists() else "no repro.c"
        hit = ff["family"] == bug["family"] and ff["boundary"] == bug["boundary"] and ff["settings"] == bug["setting"]
        disagrees = replayed.startswith("DISAGREE")
        cell_ok = cell_text(first) == bug["cell"]
        ok = ok and hit and disagrees and cell_ok
        row.update(found=True, family=ff["family"], settings=ff["settings"], boundary=f"{ff['boundary']} ({ff['label']})",
                   operations=m.get("operations"), schedules=[" ".join(f"{o['op']}" for o in s) for s in scen.get("schedules", [])],
                   cell=cell_text(first), rel_l2=first.get("rel_l2"), repro=replayed, at_expected=hit, family_seconds=ff["seconds"],
                   cell_as_expected=cell_ok)
        rows.append(row)
        print(f"  {bug['name']}: {ff['family']} @ {ff['boundary']} ({took:.0f}s){'' if hit else '  <- expected ' + row['expected']}", file=sys.stderr)

    head = ("bug", "failing family (setting)", "boundary", "minimized", "first cell", "time", "repro.c", "")
    table = [head]
    for r in rows:
        if not r["found"]:
            table.append((r["bug"], "-", "-", "-", "-", f"{r['seconds']:.0f}s", "-", "MISSED: " + r["note"]))
            continue
        table.append((r["bug"], f"{r['family']} ({r['settings']})", r["boundary"], f"{r['operations']} ops",
                      r["cell"] + (f" (rel L2 {r['rel_l2']:.3g})" if r.get("rel_l2") is not None else ""),
                      f"{r['family_seconds']:.1f}s of {r['seconds']:.0f}s", r["repro"][:60],
                      "ok" if r["at_expected"] and r["repro"].startswith("DISAGREE") and r["cell_as_expected"]
                      else "MISSED: expected " + r["expected"] if not r["at_expected"]
                      else "cell expected: " + r["expected_cell"] if not r["cell_as_expected"] else "repro agrees"))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    for i, row in enumerate(table):
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(rows, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
