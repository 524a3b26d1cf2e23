#!/usr/bin/env python3
"""Expected token ids for the Java tokenizer tests, computed with the Hugging Face `tokenizers` library.

For each string: `ids` = encode(s, add_special_tokens=False).ids and
`ids_with_special` = encode(s, add_special_tokens=True).ids.

Usage:
  make_tokenizer_expected.py gemma3 RESOURCES_DIR
      reads RESOURCES_DIR/gemma3-tokenizer/{tokenizer.json.gz,hard-strings.json},
      writes RESOURCES_DIR/gemma3-tokenizer/expected-ids.json
  make_tokenizer_expected.py checkpoint CHECKPOINT_DIR OUT_JSON
      uses CHECKPOINT_DIR/tokenizer.json on the built-in CHECKPOINT_STRINGS below followed by the
      strings of gemma3-tokenizer/hard-strings.json (found beside OUT_JSON)
"""
import gzip
import json
import os
import sys

import tokenizers
from tokenizers import Tokenizer

CHECKPOINT_STRINGS = [
    "",
    " ",
    "Hello, world!",
    "The old lighthouse keeper climbed the stairs.",
    "<bos>The garden was quiet.",
    "<start_of_turn>user\nWhat is the sea?<end_of_turn>\n<start_of_turn>model\n",
    "Numbers 12345 and 3.14, tabs\tand  double  spaces\n\nnewlines",
    "Crème brûlée, Straße, Ωmega, Привет, 你好, 🙂👍🏽",
    "code: def f(x):\n    return x * 2",
    "a <eos> in the middle, <pad> and <unk> too",
]


def load(path):
    if path.endswith(".gz"):
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return Tokenizer.from_str(f.read())
    return Tokenizer.from_file(path)


def expected(tok, strings):
    out = []
    for s in strings:
        ids = tok.encode(s, add_special_tokens=False).ids
        row = {"text": s, "ids": ids, "ids_with_special": tok.encode(s, add_special_tokens=True).ids}
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != s:  # only where the round trip is not the identity
            row["decoded"] = decoded
        out.append(row)
    return out


def write(path, rows, source):
    # A plain list [{"text", "ids", "ids_with_special"}], as the Java test reads it.
    with open(path, "w", encoding="utf-8") as f:
        json.dump(rows, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}: {len(rows)} strings from {source}, tokenizers {tokenizers.__version__}")


def main():
    if sys.argv[1] == "gemma3":
        d = os.path.join(sys.argv[2], "gemma3-tokenizer")
        tok = load(os.path.join(d, "tokenizer.json.gz"))
        strings = [r["text"] for r in json.load(open(os.path.join(d, "hard-strings.json"), encoding="utf-8"))]
        write(os.path.join(d, "expected-ids.json"), expected(tok, strings), "gemma3-tokenizer/tokenizer.json.gz")
    elif sys.argv[1] == "checkpoint":
        ck, out = sys.argv[2], sys.argv[3]
        tok = load(os.path.join(ck, "tokenizer.json"))
        # the checkpoint strings, then the Gemma 3 hard strings too (byte fallback gets a real workout there)
        hard = os.path.join(os.path.dirname(os.path.abspath(out)), "gemma3-tokenizer", "hard-strings.json")
        strings = CHECKPOINT_STRINGS + [r["text"] for r in json.load(open(hard, encoding="utf-8"))
                                        if r["text"] not in CHECKPOINT_STRINGS]
        write(out, expected(tok, strings), os.path.basename(os.path.normpath(ck)) + "/tokenizer.json")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
