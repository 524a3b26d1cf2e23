#!/usr/bin/env python3
"""Rewrites an existing dump through decodiff_dump's writer, checked against a capture plan.

    python3 python/examples/rewrite_dump.py SOURCE_DUMP PLAN_JSON OUT_DIR

It stands in for an engine: each step's tensors are read from SOURCE_DUMP (here `decodiff dump` of the bundled
checkpoint) and put through the writer in the plan's causal order, with the step's next_token and top2_margin.
Replace the reading with your engine's tensors and the rest is what your producer does.
"""
import importlib.util
import json
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("decodiff_dump", os.path.join(here, "..", "decodiff_dump.py"))
dd = importlib.util.module_from_spec(spec)
spec.loader.exec_module(dd)


def main(source, plan_path, out):
    plan = dd.Plan.load(plan_path)
    with open(os.path.join(source, "manifest.json"), encoding="utf-8") as f:
        src = json.load(f)
    producer = {"name": "rewrite_dump.py", "version": "1", "dtype": "float32",
                "rewritten_from": (src.get("producer") or {}).get("name")}
    with dd.DumpWriter(out, plan, producer=producer) as w:
        for st in src["steps"]:
            tensors = dd.read_safetensors(os.path.join(source, st["file"]))
            w.begin_step()
            for name in plan.order:                       # causal order: the plan's
                if name in tensors:
                    w.put(name, tensors[name])
            w.end_step(next_token=st.get("next_token"), top2_margin=st.get("top2_margin"))
    print(f"wrote {out}: {len(src['steps'])} steps, checked against {plan_path}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    try:
        main(*sys.argv[1:])
    except dd.PlanError as e:
        sys.exit(f"rewrite_dump.py: {e}")
