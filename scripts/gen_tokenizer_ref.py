#!/usr/bin/env python3
"""Reference tokenizers and encodings for tests/test_text_tokenizer.c.

Trains small tokenizers of the families omptensor reads (no download: the
corpus is tests/data/tokenizers/corpus.txt) with Hugging Face `tokenizers`,
saves each as tokenizer.json, and records what the library makes of a set
of hard texts: ids with and without the special tokens, and the decoded
text. Run on a machine with `pip install tokenizers`:

    python3 scripts/gen_tokenizer_ref.py tests/data/tokenizers
"""
import json
import os
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

TEXTS = [
    "",
    "Hello, world!",
    " leading space and trailing space ",
    "It's we'll they've I'd you're",
    "tabs\tand\t\tspaces    runs\n\n\nnewlines",
    "CRLF line\r\nnext line\r\n",
    "digits 1234567890 3.14159 1e-9 0x1F 2,500",
    "日本語のテキスト 中文文本 한국어",
    "emoji 😀 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 heart ❤️",
    "combining e\u0301 n\u0303 and precomposed é ñ",
    "special <|endoftext|> in the middle<|endoftext|>and at the end <|endoftext|>",
    "café naïve résumé straße São Paulo Æsir",
    "def f(x):\n    return x ** 2  # square\n",
    "unseen words: zyxwvut qqqq jjjj",
    "unseen symbols ∑≠☃𝔘 and a lone one: ⌘",
    "  two leading spaces, special <s> and </s> text",
]

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def gpt2_style():
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tk, trainer


def llama3_style():
    tk = Tokenizer(models.BPE(ignore_merges=True))
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<|begin_of_text|>", "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tk, trainer


def sentencepiece_style():
    """Llama 2 as transformers converts it: Prepend/Replace normalizers, no
    pre-tokenizer, BPE with byte fallback (<0xHH> tokens) and fused unk,
    the decoder chain Replace/ByteFallback/Fuse/Strip."""
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"])
    return tk, trainer


def metaspace_style():
    """Newer Llama/Mistral files: a Metaspace pre-tokenizer (prepend_scheme
    first, split) and decoder instead of the normalizers."""
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tk.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tk.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁",
                                                                                prepend_scheme="first", split=True)])
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<unk>", "<s>", "</s>"])
    return tk, trainer


def with_byte_tokens(tk):
    """The <0x00>..<0xFF> tokens byte fallback needs, appended to the
    vocabulary (sentencepiece conversions have them; the trainer does not)."""
    d = json.loads(tk.to_str())
    vocab = d["model"]["vocab"]
    n = max(vocab.values()) + 1
    for b in range(256):
        key = f"<0x{b:02X}>"
        if key not in vocab:
            vocab[key] = n
            n += 1
    return Tokenizer.from_str(json.dumps(d))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizers"
    corpus = os.path.join(out, "corpus.txt")
    for name, make in (("gpt2_style", gpt2_style), ("llama3_style", llama3_style),
                       ("sentencepiece_style", sentencepiece_style), ("metaspace_style", metaspace_style)):
        tk, trainer = make()
        tk.train([corpus], trainer)
        if name in ("sentencepiece_style", "metaspace_style"):
            tk = with_byte_tokens(tk)
            bos = tk.token_to_id("<s>")
            tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
        if name == "llama3_style":
            bos = tk.token_to_id("<|begin_of_text|>")
            tk.post_processor = processors.TemplateProcessing(
                single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tk.save(os.path.join(d, "tokenizer.json"))
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what a user's file gives
        cases = []
        for t in TEXTS:
            plain = tk.encode(t, add_special_tokens=False).ids
            special = tk.encode(t, add_special_tokens=True).ids
            cases.append(dict(text=t, ids=plain, ids_special=special,
                              decoded=tk.decode(special, skip_special_tokens=True),
                              decoded_keep=tk.decode(special, skip_special_tokens=False)))
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(dict(generator="scripts/gen_tokenizer_ref.py", cases=cases), f, ensure_ascii=False, indent=1)
        print(name, len(cases), "cases", tk.get_vocab_size(), "tokens")


if __name__ == "__main__":
    main()
