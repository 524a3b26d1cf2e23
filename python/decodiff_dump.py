"""decodiff_dump: write a decodiff dump v1 from any Python engine. NumPy is its only dependency.

A dump is a folder: one safetensors file per step (tensor keys = capture-point names), manifest.json, and the
completeness mark ("complete": true) written last (docs/dump-format.md). This module writes all of it — the
safetensors files by hand, every file renamed into place only once whole — and checks each tensor, as it is put,
against the capture plan that `decodiff plan --json` prints: a tensor of the wrong shape raises PlanError naming
the point and the shape the plan expects, before anything of it reaches the disk.

    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("decodiff_dump", "/path/to/decodiff/python/decodiff_dump.py")
    dd = importlib.util.module_from_spec(spec); spec.loader.exec_module(dd)

    plan = dd.Plan.load("plan.json")                  # decodiff plan REFERENCE --json > plan.json
    with dd.DumpWriter("out/my-dump", plan, producer={"name": "my-engine", "version": "0.1"}) as w:
        for step in plan.steps:                       # step 0: the prompt; then one token per step
            w.begin_step()
            ...                                       # your engine runs step["start"] .. + step["length"]
            w.put("layers.0.attn.q", q)               # [T, heads, head_dim], float32 (other floats are cast)
            w.end_step(next_token=argmax, top2_margin=margin)
    # leaving the `with` block normally writes the completeness mark; an exception leaves the dump unmarked

The writer keeps one step's tensors on disk, not in memory: each put() appends to the step's data file at once.
"""
import json
import os
import struct

import numpy as np

__all__ = ["Plan", "PlanError", "DumpWriter", "read_safetensors", "write_safetensors"]

FORMAT, VERSION = "decodiff-dump", 1
PLAN_FORMAT = "decodiff-capture-plan"


class PlanError(ValueError):
    """A tensor, step or dump that breaks the capture plan or the dump format."""


# ------------------------------------------------------------------------------------------------------------
# The plan
# ------------------------------------------------------------------------------------------------------------

class Plan:
    """The capture plan of `decodiff plan --json`: the points in causal order, their shapes per step, the steps."""

    def __init__(self, doc):
        if not isinstance(doc, dict) or doc.get("format") != PLAN_FORMAT:
            raise PlanError(f"not a capture plan (format {doc.get('format') if isinstance(doc, dict) else doc!r}); "
                            f"make one with `decodiff plan REFERENCE --json > plan.json`")
        if doc.get("version") != 1:
            raise PlanError(f"capture plan version {doc.get('version')} is not 1; use the decodiff that wrote this module")
        self.doc = doc
        self.model = doc["model"]
        self.steps = doc["steps"]
        self.tokens = doc.get("tokens")
        self.prompt_length = doc["prompt_length"]
        self.points = {p["name"]: p for p in doc["points"]}
        self.order = [p["name"] for p in doc["points"]]
        rows = doc.get("read_rows")
        self.read_rows = int(rows.split(":")[1]) if rows else 0

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls(json.load(f))

    def expected_shape(self, name, start, length):
        """The shape `name` has at the step that feeds positions [start, start+length); None for an unsized axis."""
        point = self.points.get(name)
        if point is None:
            return None
        p = start + length - 1
        out = []
        for d in point["shape"]:
            if isinstance(d, int):
                out.append(d)
            elif d == "T":
                out.append(length)
            elif d == "C":
                window = point["read"]["window"]
                c = min(window, p + 1) if window else p + 1
                out.append(min(self.read_rows, c) if self.read_rows else c)
            else:
                out.append(None)  # an axis the plan does not size (any size >= 1)
        return tuple(out)

    def check(self, name, shape, start, length):
        """Raises PlanError when `shape` is not the plan's for this point at this step."""
        expected = self.expected_shape(name, start, length)
        if expected is None:
            raise PlanError(f"{name}: not a point of this plan (a typo, or a point this model does not have); "
                            f"`decodiff plan` lists the points, or pass allow_extra=True to keep producer-specific tensors")
        ok = len(shape) == len(expected) and all(e is None or e == s for e, s in zip(expected, shape))
        if not ok:
            form = self.points[name]["form"]
            want = "[" + ", ".join("?" if e is None else str(e) for e in expected) + "]"
            raise PlanError(f"{name}: shape {list(shape)}, but the plan expects {form} = {want} at the step feeding positions "
                            f"{start}..{start + length - 1} (T = {length}, p = {start + length - 1})" + _hint(self.points[name], shape, length))


def _hint(point, shape, length):
    """The usual mix-ups, said plainly (the same ones `decodiff validate` names)."""
    form = point["form"]
    if len(shape) == len(point["shape"]) + 1 and shape[0] == 1:
        return "; it looks like a leading batch axis: drop it (x[0])"
    if len(point["shape"]) == 3 and len(shape) == 3 and point["shape"][0] == "T" and shape[1] == length and shape[0] != length:
        return f"; it looks like [heads, T, head_dim]: swap the first two axes to {form} (x.transpose(1, 0, 2))"
    if len(point["shape"]) == 3 and len(shape) == 2:
        return f"; it looks like the heads flattened into one axis: reshape to {form}"
    return ""


# ------------------------------------------------------------------------------------------------------------
# safetensors, by hand
# ------------------------------------------------------------------------------------------------------------

_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "F64": np.dtype("<f8")}


def _header_bytes(entries, metadata):
    """The safetensors header: JSON padded with spaces to a multiple of 8 bytes (the format's alignment)."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    header.update(entries)
    raw = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    return raw


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: float32 array} as one safetensors file, atomically (a .partial renamed into place)."""
    entries, offset, blobs = {}, 0, []
    for name, array in tensors.items():
        a = np.ascontiguousarray(array, dtype="<f4")
        entries[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a)
    header = _header_bytes(entries, metadata)
    tmp = str(path) + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for a in blobs:
            f.write(a.tobytes())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def read_safetensors(path):
    """{name: array} of a safetensors file of F32/F16/F64 tensors (BF16 comes back widened to float32)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        if e["dtype"] == "BF16":
            bits = np.frombuffer(data[lo:hi], dtype="<u2").astype(np.uint32) << 16
            out[name] = bits.view(np.float32).reshape(e["shape"])
        elif e["dtype"] in _DTYPES:
            out[name] = np.frombuffer(data[lo:hi], dtype=_DTYPES[e["dtype"]]).reshape(e["shape"])
        else:
            raise PlanError(f"{path}: tensor {name} has dtype {e['dtype']}; a dump holds float tensors only")
    return out


# ------------------------------------------------------------------------------------------------------------
# The writer
# ------------------------------------------------------------------------------------------------------------

class DumpWriter:
    """Writes one dump, step by step (see the module's docstring).

    out_dir   a new or empty folder (force=True replaces the dump files of an earlier run there, nothing else)
    plan      a Plan (or a path to a plan JSON): every put() is checked against it; None checks the format only
    producer  manifest "producer": name, version, dtype ("float32" if absent), and anything that says how your
              engine computed (attention, kv_cache, device, …; docs/dump-format.md §5)
    model     manifest "model" (num_hidden_layers, config_sha256, weights_sha256); default: the plan's
    tokens, prompt_length
              every token the steps feed, the prompt first; default: the plan's (a reference's plan has them:
              feed those tokens, whatever your engine would pick)
    allow_extra
              keep tensors the plan does not list (decodiff lists them as not compared)
    """

    def __init__(self, out_dir, plan=None, producer=None, model=None, tokens=None, prompt_length=None,
                 selected_points=None, allow_extra=False, force=False):
        self.dir = str(out_dir)
        self.plan = Plan.load(plan) if isinstance(plan, (str, os.PathLike)) else plan
        self.allow_extra = allow_extra
        model = model or (self.plan.model if self.plan else None)
        tokens = tokens if tokens is not None else (self.plan.tokens if self.plan else None)
        if prompt_length is None:
            prompt_length = self.plan.prompt_length if self.plan else None
        if model is None or tokens is None or prompt_length is None:
            raise PlanError("the manifest needs model, tokens and prompt_length: give them, or a plan that has them "
                            "(`decodiff plan REFERENCE --json`)")
        self._prepare(force)
        producer = dict(producer or {"name": "unnamed"})
        producer.setdefault("dtype", "float32")
        self.manifest = {"format": FORMAT, "version": VERSION, "producer": producer,
                         "model": {k: model.get(k) for k in ("model_type", "num_hidden_layers", "config_sha256", "weights_sha256")},
                         "tokens": [int(t) for t in tokens], "prompt_length": int(prompt_length)}
        if selected_points is not None:
            self.manifest["selected_points"] = list(selected_points)
        if self.plan and self.plan.read_rows:
            self.manifest["read_rows"] = f"last:{self.plan.read_rows}"
        self.manifest["steps"] = []
        self._step = None
        self._first_points = None
        self._finished = False
        self._write_manifest()

    def _prepare(self, force):
        if os.path.exists(self.dir) and not os.path.isdir(self.dir):
            raise PlanError(f"{self.dir}: is a file; the dump needs a folder (new or empty)")
        os.makedirs(self.dir, exist_ok=True)
        present = os.listdir(self.dir)
        if present and not force:
            raise PlanError(f"{self.dir}: is not empty ({len(present)} entries); choose a new folder or pass force=True")
        for n in present:
            if n == "manifest.json" or n.endswith(".partial") or (n.startswith("step-") and n.endswith(".safetensors")):
                os.remove(os.path.join(self.dir, n))

    # -- steps ------------------------------------------------------------------------------------------------

    def begin_step(self, start=None, length=None):
        """Opens the next step. start/length default to the plan's step, else to contiguous steps (the prompt, then 1)."""
        if self._step is not None:
            raise PlanError(f"step {self._step['index']} is still open; end_step() it first")
        index = len(self.manifest["steps"])
        fed = self.manifest["steps"][-1]["start"] + self.manifest["steps"][-1]["length"] if index else 0
        if self.plan and index < len(self.plan.steps):
            planned = self.plan.steps[index]
            start = planned["start"] if start is None else start
            length = planned["length"] if length is None else length
            if (start, length) != (planned["start"], planned["length"]):
                raise PlanError(f"step {index}: feeds [{start}, {start + length}) but the plan's step {index} feeds "
                                f"[{planned['start']}, {planned['start'] + planned['length']})")
        elif self.plan and self.plan.steps:
            raise PlanError(f"step {index}: the plan has {len(self.plan.steps)} steps (0–{len(self.plan.steps) - 1})")
        start = fed if start is None else start
        length = (self.manifest["prompt_length"] if index == 0 else 1) if length is None else length
        if start != fed:
            raise PlanError(f"step {index}: starts at {start} but the steps so far end at {fed}; steps are contiguous")
        if index == 0 and length != self.manifest["prompt_length"]:
            raise PlanError(f"step 0 feeds {length} tokens but prompt_length is {self.manifest['prompt_length']}; "
                            f"step 0 prefills the whole prompt in one forward call")
        if start + length > len(self.manifest["tokens"]):
            raise PlanError(f"step {index}: feeds positions up to {start + length - 1} but tokens has {len(self.manifest['tokens'])}")
        name = f"step-{index:04d}.safetensors"
        data_path = os.path.join(self.dir, name + ".data.partial")
        self._step = {"index": index, "start": start, "length": length, "file": name,
                      "entries": {}, "offset": 0, "data_path": data_path, "data": open(data_path, "wb")}
        return self._step["index"]

    def put(self, name, array):
        """Records one capture point of the open step: checked against the plan, then appended to the step's data."""
        st = self._step
        if st is None:
            raise PlanError(f"{name}: no step is open; call begin_step() first")
        if name in st["entries"]:
            raise PlanError(f"{name}: already recorded at step {st['index']}")
        a = np.asarray(array)
        if not np.issubdtype(a.dtype, np.floating):
            raise PlanError(f"{name}: dtype {a.dtype}; a dump holds floating-point tensors (written as float32)")
        if a.ndim == 0 or 0 in a.shape:
            raise PlanError(f"{name}: shape {list(a.shape)}; every tensor holds at least one value, with at least one axis")
        if self.plan and not (self.allow_extra and name not in self.plan.points):
            self.plan.check(name, a.shape, st["start"], st["length"])
        a = np.ascontiguousarray(a, dtype="<f4")
        st["data"].write(a.tobytes())
        st["entries"][name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [st["offset"], st["offset"] + a.nbytes]}
        st["offset"] += a.nbytes

    def end_step(self, next_token=None, top2_margin=None):
        """Writes the step file (renamed into place once whole), then the manifest that lists it."""
        st = self._step
        if st is None:
            raise PlanError("end_step(): no step is open")
        st["data"].close()
        points = set(st["entries"])
        if not points:
            self.abort_step()
            raise PlanError(f"step {st['index']}: no tensor was put; a step file holds at least one")
        if self._first_points is None:
            self._first_points = points
        elif points != self._first_points:
            lacking, more = sorted(self._first_points - points), sorted(points - self._first_points)
            self.abort_step()
            raise PlanError(f"step {st['index']}: every step holds the same points; this one lacks {lacking[:6]} and adds {more[:6]}")
        path = os.path.join(self.dir, st["file"])
        header = _header_bytes(st["entries"], {"format": FORMAT, "step": st["index"]})
        tmp = path + ".partial"
        with open(tmp, "wb") as out, open(st["data_path"], "rb") as data:
            out.write(struct.pack("<Q", len(header)))
            out.write(header)
            while True:
                chunk = data.read(1 << 22)
                if not chunk:
                    break
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        os.remove(st["data_path"])
        entry = {"index": st["index"], "start": st["start"], "length": st["length"], "file": st["file"]}
        if next_token is not None:
            entry["next_token"] = int(next_token)
        if top2_margin is not None and np.isfinite(top2_margin):
            entry["top2_margin"] = float(top2_margin)
        self.manifest["steps"].append(entry)
        self._step = None
        self._write_manifest()  # readable after every step; a crash keeps the steps so far, unmarked

    def abort_step(self):
        """Drops the open step (its data file); the dump keeps the steps written before it."""
        st, self._step = self._step, None
        if st is None:
            return
        if not st["data"].closed:
            st["data"].close()
        if os.path.exists(st["data_path"]):
            os.remove(st["data_path"])

    def write_step(self, tensors, next_token=None, top2_margin=None, start=None, length=None):
        """One whole step at once: {point: array}, in causal order when the plan gives one."""
        self.begin_step(start, length)
        try:
            names = list(tensors)
            if self.plan:
                rank = {n: i for i, n in enumerate(self.plan.order)}
                names.sort(key=lambda n: rank.get(n, len(rank)))
            for n in names:
                self.put(n, tensors[n])
        except BaseException:
            self.abort_step()
            raise
        self.end_step(next_token, top2_margin)

    # -- the end --------------------------------------------------------------------------------------------

    def finish(self):
        """The completeness mark, written last: only once every planned step is on disk."""
        if self._step is not None:
            raise PlanError(f"step {self._step['index']} is still open; end_step() it before finish()")
        written = len(self.manifest["steps"])
        if written == 0:
            raise PlanError("no step written; a dump holds at least step 0 (the prompt)")
        if self.plan and self.plan.steps and written != len(self.plan.steps):
            raise PlanError(f"{written} steps written but the plan has {len(self.plan.steps)}; not marked complete")
        self.manifest["complete"] = True
        self._write_manifest()
        self._finished = True

    def _write_manifest(self):
        path = os.path.join(self.dir, "manifest.json")
        tmp = path + ".partial"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.manifest, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)

    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        if kind is not None:
            self.abort_step()  # no mark: compare says incomplete, never match
            return False
        if not self._finished:
            self.finish()
        return False
