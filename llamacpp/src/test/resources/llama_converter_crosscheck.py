"""Runs llama.cpp's own Llama-family conversion code (conversion/llama.py LlamaModel, conversion/qwen.py Qwen3Model:
set_gguf_parameters, modify_tensors with its q/k permute, generate_extra_tensors with the llama3 rope factors) on a
checkpoint's config.json and safetensors, and compares what it would write with a GGUF written by decodiff: the
metadata key by key (order, type, value) and every tensor (name and values, bit for bit in f32).

torch is replaced by numpy stand-ins (the code path only reshapes, swaps axes and does float32 arithmetic), and the
token list (which needs transformers' AutoTokenizer) is not compared.

usage: llama_converter_crosscheck.py LLAMA_SOURCES CHECKPOINT_DIR GGUF_FILE
prints one line: RESULT keys=N differences=N order=True|False tensors=N tensor_differences=N, after one line per difference
"""
import json
import logging
import re
import struct
import sys
import types
from pathlib import Path

import numpy as np

src, ck, path = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
sys.path.insert(0, str(src / 'gguf-py'))
sys.path.insert(0, str(src))
logging.disable(logging.WARNING)

torch = types.ModuleType('torch')


class _Tensor:
    pass


torch.Tensor = _Tensor
torch.float32, torch.float16, torch.bfloat16 = np.float32, np.float16, 'bfloat16'
torch.tensor = lambda values, dtype=None: np.array([np.float32(v) for v in values], dtype=np.float32)
torch.arange = lambda start, end, step=1, dtype=None: np.arange(start, end, step, dtype=np.float32)
torch.__getattr__ = lambda name: _Tensor
sys.modules['torch'] = torch
transformers = types.ModuleType('transformers')
transformers.AutoConfig = object
sys.modules['transformers'] = transformers

import gguf  # noqa: E402
from conversion.llama import LlamaModel  # noqa: E402
from conversion.qwen import Qwen3Model  # noqa: E402

hparams = json.load(open(ck / 'config.json'))
cls = Qwen3Model if hparams['model_type'] == 'qwen3' else LlamaModel
# What ModelBase.__init__ and TextModel.__init__ set up, without indexing tensors (read below instead).
m = cls.__new__(cls)
m.dir_model, m.ftype, m.is_mistral_format = ck, gguf.LlamaFileType.ALL_F32, False
m.hparams = hparams
m.hf_arch = hparams['architectures'][0]
m.origin_hf_arch = m.hf_arch
m.fuse_gate_up_exps = False
m.fuse_qkv = False  # the converter's default (no --fuse-qkv)
m.block_count = hparams['num_hidden_layers']
m.tensor_map = gguf.get_tensor_name_map(m.model_arch, m.block_count)
m.rope_parameters = hparams.get('rope_parameters', hparams.get('rope_scaling')) or {}
if 'rope_theta' not in m.rope_parameters and 'rope_theta' in hparams:
    m.rope_parameters['rope_theta'] = hparams['rope_theta']
if 'rope_type' not in m.rope_parameters and 'type' in m.rope_parameters:
    m.rope_parameters['rope_type'] = m.rope_parameters['type']
m.gguf_writer = gguf.GGUFWriter(path=None, arch=gguf.MODEL_ARCH_NAMES[m.model_arch])
# ModelBase.prepare_metadata: type, model-card name (the folder's), parameters, quantization version
m.gguf_writer.add_type('model')
m.gguf_writer.add_name(ck.name)
m.set_gguf_parameters()
m.gguf_writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

theirs = m.gguf_writer.kv_data[0]
reader = gguf.GGUFReader(path)
mine = {k: f for k, f in reader.fields.items() if not k.startswith('GGUF.')}
arch = gguf.MODEL_ARCH_NAMES[m.model_arch]
# written by set_vocab's token list (needs transformers), or by decodiff's no-vocabulary form
not_compared = {'tokenizer.ggml.model', 'tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type'}
if arch == 'qwen3':
    not_compared.add('qwen3.vocab_size')
order = [k for k in theirs] == [k for k in mine if k not in not_compared]
differences = 0
for key, v in theirs.items():
    if key not in mine:
        print('missing', key)
        differences += 1
        continue
    f = mine[key]
    if f.types[0] != v.type:
        print('type', key, f.types[0].name, 'expected', v.type.name)
        differences += 1
        continue
    got, want = f.contents(), v.value
    same = np.float32(got) == np.float32(want) if isinstance(want, float) else got == want
    if not same:
        print('value', key, str(got)[:100], 'expected', str(want)[:100])
        differences += 1

# The tensors: the converter's extra tensors, then modify_tensors on each checkpoint tensor.
raw = open(ck / 'model.safetensors', 'rb').read()
n = struct.unpack('<Q', raw[:8])[0]
header = json.loads(raw[8:8 + n])
expected = {name: np.asarray(t, dtype=np.float32) for name, t in m.generate_extra_tensors()}
for name in sorted(k for k in header if k != '__metadata__'):
    info = header[name]
    if info['dtype'] != 'F32':
        raise SystemExit('this check reads F32 checkpoints only: ' + name + ' is ' + info['dtype'])
    a, b = info['data_offsets']
    data = np.frombuffer(raw[8 + n + a:8 + n + b], dtype='<f4').reshape(info['shape'])
    bid = re.match(r'model\.layers\.(\d+)\.', name)
    for new_name, t in m.modify_tensors(data, name, int(bid.group(1)) if bid else None):
        expected[new_name] = np.asarray(t, dtype=np.float32)
written = {t.name: np.array(t.data, dtype=np.float32).reshape(-1) for t in reader.tensors}
tensor_differences = 0
for name in sorted(set(expected) | set(written)):
    if name not in written or name not in expected:
        print('tensor only in', 'the converter' if name in expected else 'decodiff', name)
        tensor_differences += 1
    elif not np.array_equal(written[name], expected[name].reshape(-1)):
        print('tensor values', name)
        tensor_differences += 1
print(f'RESULT keys={len(theirs)} differences={differences} order={order} tensors={len(expected)} tensor_differences={tensor_differences}')
