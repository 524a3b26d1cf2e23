"""Writes what llama.cpp's pinned converter (convert_hf_to_gguf.py, Qwen3_5TextModel / Qwen3_5MoeTextModel) puts in
a GGUF: one line per metadata key (key, type, value; floats as float32 bit patterns) and per tensor (name, ggml ne,
type, sha256 of its bytes), in file order. Qwen35GgufExpectationsTest checks decodiff's GGUFs against the committed
output (llamacpp/src/test/resources/qwen35-converter/), since the converter needs torch, which CI has not.

The converter refuses the tiny checkpoints' toy BPE tokenizer and, without MTP layers, needs --no-mtp; it is run with
its vocabulary step replaced by the "none" vocabulary decodiff writes (token ids only). general.name and
general.size_label (made up from the folder name) are left out.

usage: python qwen35-converter-expectations.py LLAMA_SOURCES CHECKPOINT_DIR f32|bf16|f16 OUT.txt   (needs torch)
"""
import hashlib, runpy, struct, sys, tempfile, os

src, ck, outtype, out = sys.argv[1:5]
sys.path[:0] = [src + "/gguf-py", src]
import conversion.qwen as q  # noqa: E402
import gguf  # noqa: E402


def no_vocab(self):
    self.gguf_writer.add_tokenizer_model("none")
    self.gguf_writer.add_vocab_size(self.hparams["vocab_size"])


for c in (q.Qwen3_5TextModel, q.Qwen3_5MoeTextModel):
    c.set_vocab = no_vocab
tmp = tempfile.mkdtemp()
gg = os.path.join(tmp, "out.gguf")
sys.argv = [src + "/convert_hf_to_gguf.py", ck, "--no-mtp", "--outtype", outtype, "--outfile", gg]
try:
    runpy.run_path(src + "/convert_hf_to_gguf.py", run_name="__main__")
except SystemExit:
    pass


def fmt(types, v):
    if types[-1] == gguf.GGUFValueType.FLOAT32:
        vs = v if isinstance(v, list) else [v]
        return ",".join("%08x" % struct.unpack("<I", struct.pack("<f", x))[0] for x in vs)
    if isinstance(v, list):
        return ",".join(str(x).lower() for x in v)
    return str(v).lower() if isinstance(v, bool) else str(v)


r = gguf.GGUFReader(gg)
with open(out, "w") as f:
    for k, fld in r.fields.items():
        if k.startswith("GGUF.") or k in ("general.name", "general.size_label"):
            continue
        f.write("KV %s %s %s\n" % (k, "/".join(t.name for t in fld.types), fmt(fld.types, fld.contents())))
    for t in r.tensors:
        f.write("T %s %s %s %s\n" % (t.name, ",".join(str(int(x)) for x in t.shape), t.tensor_type.name,
                                     hashlib.sha256(bytes(t.data.tobytes())).hexdigest()))
