#!/usr/bin/env python3
"""Runs the porting-bug suite: each patch of manifest.tsv built into llama.cpp (scripts/llamacpp-native.sh --patch,
an incremental rebuild of libllama), then judged on each bundled checkpoint it applies to, twice:

  against transformers   `decodiff compare reference-dumps/<checkpoint>/long --engine llama.cpp` with the patched
                         library: the verdict a user gets, its first divergent cell and the variant it names;
  against clean llama.cpp  the patched build's dump compared with the clean native build's dump of the same case: both
                         share llama.cpp's precision, so the first divergence is the patch's own effect;
  local (bisect)         `decodiff bisect ... --engine llama.cpp`: every op fed transformers' own inputs and cache
                         history through the eval callback; the first cell whose local error is over one fp16 step,
                         and the variant bisect's detectors name for it.

Prints a table bug x checkpoint and, first, clean llama.cpp's verdicts on each checkpoint. Exit 0 when every patch
comes out at its expected cell all three ways, and clean llama.cpp has no local error over the floor and does not
diverge from itself; 1 otherwise.

  llamacpp/porting-bugs/run.py [--only NAME[,NAME...]] [--checkpoints CK[,CK...]] [--case long|short] [--work DIR] [--json FILE]

The Qwen3.5 patches (15-26) run on qwen35-tiny-llamacpp and qwen35-tiny-moe-llamacpp, e.g.
  llamacpp/porting-bugs/run.py --checkpoints qwen35-tiny-llamacpp,qwen35-tiny-moe-llamacpp

Python 3 standard library only; the first run builds llama.cpp natively (about 10 minutes on two cores).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DECODIFF = ROOT / "decodiff"
NATIVE = ROOT / "scripts" / "llamacpp-native.sh"


def manifest():
    """The patches in file order, each with its expected cell per checkpoint (a patch may have several rows: one per
    checkpoint where the cell differs between them, as a Qwen3.5 full-attention layer's index does)."""
    bugs = {}
    for line in (HERE / "manifest.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, checkpoints, step, point, variant = line.split("\t")
        bug = bugs.setdefault(name, dict(name=name, checkpoints=[], cells={}, variant=None if variant == "-" else variant))
        for ck in checkpoints.split(","):
            bug["checkpoints"].append(ck)
            bug["cells"][ck] = (int(step), point)
    return list(bugs.values())


def library(patch=None):
    cmd = [str(NATIVE)] + (["--patch", str(patch)] if patch else [])
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"run.py: {' '.join(cmd)} failed:\n{r.stderr.strip()}")
    return r.stdout.strip().splitlines()[-1]


def decodiff(lib, *args):
    """Runs ./decodiff with llama.cpp from `lib`; returns (exit code, parsed --json or None, stderr)."""
    env = dict(os.environ, DECODIFF_LLAMACPP_LIB=lib)
    r = subprocess.run([str(DECODIFF), *args], capture_output=True, text=True, env=env, cwd=ROOT)
    data = None
    if "--json" in args and r.stdout.strip():
        try:
            data = json.loads(r.stdout)
        except json.JSONDecodeError:
            data = None
    return r.returncode, data, r.stderr.strip()


def first_line(text):
    lines = [l for l in text.splitlines() if l.strip() and not l.startswith("decodiff: building")]
    return lines[-1] if lines else ""


def judged(code, data, err):
    """verdict, first divergent cell as (step, point) or None, the named variant or None, a note, the cell's rel L2."""
    if data is None:
        return "refused" if code == 2 else f"exit {code}", None, None, first_line(err), None
    fd = data.get("first_divergence") or None
    cell = (fd["step"], fd["point"]) if fd else None
    rel = fd.get("rel_l2") if fd else None
    variant = None
    for key in ("variant", "named_variant", "bisect"):
        v = data.get(key) or (fd or {}).get(key)
        if isinstance(v, dict):
            v = v.get("name") or v.get("id")
        if isinstance(v, str):
            variant = v
            break
    return data.get("verdict"), cell, variant, "", rel


def bisected(lib, ref):
    """`decodiff bisect REF --engine llama.cpp --json`: (verdict, culprit cell or None, its variant, its local rel L2)."""
    code, data, err = decodiff(lib, "bisect", str(ref), "--engine", "llama.cpp", "--json")
    if data is None:
        return (f"exit {code}: {first_line(err)}", None, None, None)
    c = data.get("culprit")
    v = (c or {}).get("variant")
    return (data.get("verdict"), (c["step"], c["point"]) if c else None, f"{v['op']}: {v['name']}" if v else None,
            (c or {}).get("local_rel_l2"))


def num(x):
    return "-" if x is None else f"{x:.2e}"


def cell_text(cell):
    return "-" if cell is None else f"step {cell[0]} {cell[1]}"


def main():
    ap = argparse.ArgumentParser(description="the llama.cpp porting-bug suite")
    ap.add_argument("--only", help="comma-separated patch names (default: all of manifest.tsv)")
    ap.add_argument("--checkpoints", help="comma-separated checkpoints (default: every one a chosen patch applies to)")
    ap.add_argument("--case", default="long", help="the bundled reference case (default long: the expected cells are for it)")
    ap.add_argument("--work", help="folder for the dumps (default: a temporary one)")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()

    bugs = manifest()
    if a.only:
        wanted = set(a.only.split(","))
        unknown = wanted - {b["name"] for b in bugs}
        if unknown:
            sys.exit(f"run.py: no patch named {', '.join(sorted(unknown))} in {HERE / 'manifest.tsv'}")
        bugs = [b for b in bugs if b["name"] in wanted]
    if a.checkpoints:
        keep = set(a.checkpoints.split(","))
        for b in bugs:
            b["checkpoints"] = [c for c in b["checkpoints"] if c in keep]
        bugs = [b for b in bugs if b["checkpoints"]]
    work = pathlib.Path(a.work or tempfile.mkdtemp(prefix="decodiff-porting-bugs-"))
    work.mkdir(parents=True, exist_ok=True)

    clean = library()
    print(f"clean llama.cpp: {clean}", file=sys.stderr)
    checkpoints = sorted({c for b in bugs for c in b["checkpoints"]})
    baseline = {}
    for ck in checkpoints:
        ref = ROOT / "reference-dumps" / ck / a.case
        out = work / f"clean-{ck}"
        code, data, err = decodiff(clean, "compare", str(ref), "--engine", "llama.cpp", "--json")
        verdict, cell, _, note, _ = judged(code, data, err)
        dumped = None
        if verdict not in ("refused",) and not verdict.startswith("exit"):
            dcode, _, derr = decodiff(clean, "dump", "--engine", "llama.cpp", "--model", str(ROOT / "checkpoints" / ck),
                                      "--reference", str(ref), "--out", str(out), "--force")
            dumped = out if dcode == 0 else None
            if dumped:
                # clean against itself: the suite's own floor (must be a match)
                scode, sdata, serr = decodiff(clean, "compare", str(out), str(out), "--json")
                self_verdict = judged(scode, sdata, serr)[0]
                local = bisected(clean, ref)[:2]
            else:
                note, self_verdict, local = first_line(derr), None, None
        else:
            self_verdict, local = None, None
        baseline[ck] = dict(verdict=verdict, cell=cell, note=note, dump=dumped, self=self_verdict, local=local)
        print(f"  {ck}/{a.case}: {verdict} {cell_text(cell)} {note}", file=sys.stderr)

    rows, ok = [], all(b["self"] in (None, "match", "precision") and (b["local"] is None or b["local"][0] == "match") for b in baseline.values())
    for bug in bugs:
        patch = HERE / f"{bug['name']}.patch"
        lib = library(patch)
        for ck in bug["checkpoints"]:
            base = baseline[ck]
            row = dict(bug=bug["name"], checkpoint=ck, expected=bug["cells"][ck], variant_expected=bug["variant"])
            if base["dump"] is None:
                row.update(verdict="not run", note=f"llama.cpp {base['verdict']} {ck} (see above)")
                rows.append(row)
                print(f"  {bug['name']} on {ck}: not run ({base['note']})", file=sys.stderr)
                continue
            ref = ROOT / "reference-dumps" / ck / a.case
            verdict, cell, variant, note, rel = judged(*decodiff(lib, "compare", str(ref), "--engine", "llama.cpp", "--json"))
            out = work / f"{bug['name']}-{ck}"
            dcode, _, derr = decodiff(lib, "dump", "--engine", "llama.cpp", "--model", str(ROOT / "checkpoints" / ck),
                                      "--reference", str(ref), "--out", str(out), "--force")
            if dcode == 0:
                v2, cell2, _, note2, rel2 = judged(*decodiff(lib, "compare", str(base["dump"]), str(out), "--json"))
            else:
                v2, cell2, note2, rel2 = "refused", None, first_line(derr), None
            lv, lcell, lvariant, lrel = bisected(lib, ref)
            hit = cell == row["expected"] and cell2 == row["expected"] and lcell == row["expected"]
            ok = ok and hit
            row.update(verdict=verdict, cell=cell, rel_l2=rel, variant=variant, note=note, vs_clean=v2, vs_clean_cell=cell2,
                       vs_clean_rel_l2=rel2, vs_clean_note=note2, local=lv, local_cell=lcell, local_rel_l2=lrel,
                       local_variant=lvariant, at_expected_cell=hit)
            rows.append(row)
            print(f"  {bug['name']} on {ck}: {verdict} {cell_text(cell)} | vs clean: {v2} {cell_text(cell2)} | local: {cell_text(lcell)}"
                  f"{'' if hit else '  <- expected ' + cell_text(row['expected'])}", file=sys.stderr)

    print()
    print(f"Clean llama.cpp (native build) against transformers, case {a.case}:")
    for ck, b in baseline.items():
        print(f"  {ck}: {b['verdict']}" + (f", first divergent cell {cell_text(b['cell'])}" if b["cell"] else "")
              + (f"; local errors: {b['local'][0]} {cell_text(b['local'][1])}" if b["local"] else "")
              + (f"; against itself: {b['self']}" if b["self"] else "") + (f"\n    {b['note']}" if b["note"] else ""))
    print()
    head = ("bug", "checkpoint", "expected cell", "verdict vs transformers", "first divergent cell", "rel L2", "named variant",
            "vs clean llama.cpp", "rel L2", "local error over the floor (bisect)", "local rel L2", "bisect's variant", "")
    table = [head]
    for r in rows:
        if r["verdict"] == "not run":
            table.append((r["bug"], r["checkpoint"], cell_text(r["expected"]), "not run", "-", "-", "-", r["note"], "-", "-", "-", "-", ""))
            continue
        table.append((r["bug"], r["checkpoint"], cell_text(r["expected"]), r["verdict"], cell_text(r["cell"]), num(r["rel_l2"]),
                      r["variant"] or "-", f"{r['vs_clean']} {cell_text(r['vs_clean_cell'])}".strip(), num(r["vs_clean_rel_l2"]),
                      cell_text(r["local_cell"]), num(r["local_rel_l2"]), r["local_variant"] or "-",
                      "ok" if r["at_expected_cell"] else "MISSED"))
    widths = [max(len(str(row[i])) for row in table) for i in range(len(head))]
    for i, row in enumerate(table):
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths).rstrip())
    if a.json:
        pathlib.Path(a.json).write_text(json.dumps(dict(baseline={k: {**v, "dump": str(v["dump"])} for k, v in baseline.items()},
                                                        rows=rows), indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
