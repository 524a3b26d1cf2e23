"""Runs llama.cpp's own Gemma 4 conversion code (conversion/gemma.py: Gemma4Model.set_gguf_parameters and
generate_extra_tensors, gguf-py's SpecialVocab) on a checkpoint's config.json and tokenizer files, and compares the
metadata it would write, key by key (order, type, value), and its rope_freqs tensor with a GGUF written by decodiff.

torch and transformers are not needed for that code path and are replaced by stand-ins; the token list itself
(which needs transformers' AutoTokenizer) is not compared.

usage: converter_crosscheck.py LLAMA_SOURCES CHECKPOINT_DIR GGUF_FILE f32|bf16|f16
prints one line: RESULT keys=N differences=N order=True|False rope_freqs=True|False, after one line per difference
"""
import json
import logging
import sys
import types
from pathlib import Path

import numpy as np

src, ck, path, outtype = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, str(src / 'gguf-py'))
sys.path.insert(0, str(src))
logging.disable(logging.WARNING)

torch = types.ModuleType('torch')


class _Tensor:
    pass


torch.Tensor = _Tensor
torch.float32, torch.float16, torch.bfloat16 = np.float32, np.float16, 'bfloat16'
torch.tensor = lambda values, dtype=None: np.array(values, dtype=np.float32)
torch.__getattr__ = lambda name: _Tensor
sys.modules['torch'] = torch
transformers = types.ModuleType('transformers')
transformers.AutoConfig = object
sys.modules['transformers'] = transformers

import gguf  # noqa: E402
from conversion.gemma import Gemma4Model  # noqa: E402

ftype = {'f32': gguf.LlamaFileType.ALL_F32, 'bf16': gguf.LlamaFileType.MOSTLY_BF16, 'f16': gguf.LlamaFileType.MOSTLY_F16}[outtype]
# What ModelBase.__init__ and TextModel.__init__ set up, without indexing tensors (they are not needed here).
m = Gemma4Model.__new__(Gemma4Model)
m.dir_model, m.ftype, m.is_mistral_format = ck, ftype, False
m.hparams = json.load(open(ck / 'config.json'))
if 'text_config' in m.hparams:
    m.hparams = {**m.hparams, **m.hparams['text_config']}
m.block_count = m.hparams['num_hidden_layers']
m.tensor_map = gguf.get_tensor_name_map(m.model_arch, m.block_count)
m.rope_parameters = m.hparams.get('rope_parameters') or {}
m.gguf_writer = gguf.GGUFWriter(path=None, arch='gemma4')
# ModelBase.prepare_metadata: type, model-card name (the folder's), parameters, quantization version, then set_vocab
m.gguf_writer.add_type('model')
m.gguf_writer.add_name(ck.name)
m.set_gguf_parameters()
m.gguf_writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
if (ck / 'tokenizer.json').exists():
    gguf.SpecialVocab(ck, load_merges=True).add_to_gguf(m.gguf_writer, quiet=True)
    m.gguf_writer.add_add_space_prefix(False)
    m.gguf_writer.add_add_bos_token(True)
extra = {name: t for name, t in m.generate_extra_tensors()}

theirs = m.gguf_writer.kv_data[0]
reader = gguf.GGUFReader(path)
mine = {k: f for k, f in reader.fields.items() if not k.startswith('GGUF.')}
# written by set_vocab's token list (needs transformers) or by decodiff's no-vocabulary form
not_compared = {'tokenizer.ggml.model', 'tokenizer.ggml.tokens', 'tokenizer.ggml.scores', 'tokenizer.ggml.token_type', 'gemma4.vocab_size'}
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
    if v.type == gguf.GGUFValueType.ARRAY:
        sub = v.sub_type or gguf.GGUFValueType.get_type(v.value[0])
        if f.types[1] != sub:
            print('item type', key, f.types[1].name, 'expected', sub.name)
            differences += 1
    got, want = f.contents(), v.value
    same = np.float32(got) == np.float32(want) if isinstance(want, float) else (list(got) == list(want) if isinstance(want, list) else got == want)
    if not same:
        print('value', key, str(got)[:100], 'expected', str(want)[:100])
        differences += 1
rope = [t for t in reader.tensors if t.name == 'rope_freqs.weight']
rope_ok = len(rope) == 1 and np.array_equal(np.array(rope[0].data), extra['rope_freqs.weight'])
print(f'RESULT keys={len(theirs)} differences={differences} order={order} rope_freqs={rope_ok}')
