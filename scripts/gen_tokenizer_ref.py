#!/usr/bin/env python3
"""Reference tokenizers and encodings for tests/test_text_tokenizer.c.

Trains small tokenizers of the families omptensor reads (no download: the
corpus is tests/data/tokenizers/corpus.txt) with Hugging Face `tokenizers`,
saves each as tokenizer.json (some with a tokenizer_config.json), and
records what the library makes of a set of hard texts: ids with and
without the special tokens, and the decoded text; and the decoding of id
lists that cut characters in half (invalid UTF-8 bytes). Families with a
tokenizer_config.json are recorded as transformers' AutoTokenizer reads
the folder (add_bos_token, clean_up_tokenization_spaces, ...). Run on a
machine with `pip install tokenizers transformers` (no torch needed):

    python3 scripts/gen_tokenizer_ref.py tests/data/tokenizers
"""
import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

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
    "a <mask> b <mask>c  <mask>",
    "<|assistant|>   answer\n<|assistant|>x",
    "[WORD] x[WORD]y [WORD]. _[WORD]",
    "say hello world and hello  world",
    "<raw>x <raw> y",
    "multiple   spaces  here\t\t\ttabs   ",
    "Hello , world . isn't it ? I 'm sure they 're ok !",
    "digits 12345 ١٢٣٤ ²³ 7½ x9y",
    "Ｆｕｌｌｗｉｄｔｈ ﬁ ligature Å Å",
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


QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def qwen2_style():
    """Qwen2's shape: NFC, Split with its pattern (one digit a piece),
    ByteLevel without regex, chat special tokens."""
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=650, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tk, trainer


def digits_style():
    """Digits (individual), Punctuation, NFKC, Replace with a Regex in the
    normalizer and the decoder, ByteLevel with a prefix space."""
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " "),
                                          normalizers.Strip(left=False, right=True)])
    tk.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.Punctuation(),
        pre_tokenizers.ByteLevel(add_prefix_space=True)])
    tk.decoder = decoders.Sequence([decoders.ByteLevel(), decoders.Replace(Regex("^ "), "")])
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    return tk, trainer


# added tokens with every flag (the library's defaults: normalized = not special)
ADDED_FLAGS = [
    AddedToken("<mask>", special=True, lstrip=True),
    AddedToken("<|assistant|>", special=True, rstrip=True),
    AddedToken("[WORD]", special=False, single_word=True),
    AddedToken("hello world", special=False, normalized=True),
    AddedToken("<raw>", special=False, normalized=False),
]


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


# families: (folder, maker, with byte tokens, tokenizer_config.json or None, added tokens)
FAMILIES = [
    ("gpt2_style", gpt2_style, False, None, []),
    ("llama3_style", llama3_style, False, None, []),
    ("sentencepiece_style", sentencepiece_style, True, None, []),
    ("metaspace_style", metaspace_style, True, None, []),
    # Qwen2's shape with its kind of config: no BOS (add_bos_token false), EOS named
    ("qwen2_style", qwen2_style, False,
     dict(tokenizer_class="PreTrainedTokenizerFast", add_bos_token=False, bos_token=None,
          eos_token="<|im_end|>", pad_token="<|endoftext|>", errors="replace", split_special_tokens=False), []),
    ("digits_style", digits_style, False, None, []),
    # Llama 2 shape, added tokens with flags, and transformers' config:
    # add_bos_token + add_eos_token rebuild the template
    ("added_style", sentencepiece_style, True,
     dict(tokenizer_class="PreTrainedTokenizerFast", add_bos_token=True, add_eos_token=True, bos_token="<s>",
          eos_token="</s>", unk_token="<unk>", pad_token=None, clean_up_tokenization_spaces=False,
          chat_template="{{ messages }}", model_max_length=4096), ADDED_FLAGS),
    # GPT-2 with the cleanup forced and special tokens split as text
    ("cleanup_style", gpt2_style, False,
     dict(tokenizer_class="PreTrainedTokenizerFast", bos_token="<|endoftext|>", eos_token="<|endoftext|>",
          clean_up_tokenization_spaces=True,
          clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output=True,
          split_special_tokens=True), []),
]


def byte_ids(tk, byte_fallback, seq):
    """Ids of the single-byte tokens for the bytes of seq."""
    if byte_fallback:
        return [tk.token_to_id(f"<0x{b:02X}>") for b in seq]
    table = {b: c for c, b in byte_table().items()}
    return [tk.token_to_id(table[b]) for b in seq]


def byte_table():
    """GPT-2's printable character -> byte."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


# invalid and partial UTF-8: a lone lead byte, a cut 4-byte emoji, a
# surrogate, overlong forms, out-of-range, stray continuations, and a
# valid character between bad bytes
BAD_BYTES = [b"\xf0\x9f", b"\xf0\x9f\x98", b"\xe2\x82", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe0\x80\xaf",
             b"\xf4\x90\x80\x80", b"\xff", b"\x80\x80", b"a\xf0\x9f\x98b\xe2\x82\xacc\xc3", b"\xf8\x88\x80\x80\x80"]


def decode_cases(tk, dec, byte_fallback):
    """Decoding id lists that end or break inside a character: every
    prefix of the emoji text's ids, and runs of single-byte tokens."""
    lists = []
    emoji = tk.encode("emoji 😀 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷 heart ❤️", add_special_tokens=False).ids
    lists += [emoji[:k] for k in range(1, len(emoji) + 1)]
    lists += [emoji[k:] for k in range(1, min(len(emoji), 12))]
    for seq in BAD_BYTES:
        ids = byte_ids(tk, byte_fallback, seq)
        if None not in ids:
            lists.append(ids)
            lists.append(emoji[:3] + ids + emoji[3:6])
    out = []
    for ids in lists:
        out.append(dict(ids=ids, decoded=dec(ids, True), decoded_keep=dec(ids, False)))
    return out


def compact(ref):
    """JSON with one case a line (small, and a diff shows which case changed)."""
    one = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"))
    parts = []
    for k, v in ref.items():
        if isinstance(v, list):
            parts.append(one(k) + ":[\n" + ",\n".join(one(x) for x in v) + "]")
        else:
            parts.append(one(k) + ":" + one(v))
    return "{" + ",\n".join(parts) + "}\n"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/tokenizers"
    corpus = os.path.join(out, "corpus.txt")
    for name, make, byte_tokens, config, added in FAMILIES:
        tk, trainer = make()
        tk.train([corpus], trainer)
        if byte_tokens:
            tk = with_byte_tokens(tk)
            bos = tk.token_to_id("<s>")
            tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
        if make is llama3_style:
            bos = tk.token_to_id("<|begin_of_text|>")
            tk.post_processor = processors.TemplateProcessing(
                single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", bos)])
        if added:
            tk.add_tokens(added)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        tk.save(os.path.join(d, "tokenizer.json"))
        tk = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what a user's file gives
        encode = lambda t, special: tk.encode(t, add_special_tokens=special).ids
        dec = lambda ids, skip: tk.decode(ids, skip_special_tokens=skip)
        generator = f"scripts/gen_tokenizer_ref.py, tokenizers {tokenizers.__version__}"
        roles = None
        if config is not None:
            with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                json.dump(config, f, ensure_ascii=False, indent=1)
            import transformers
            from transformers import AutoTokenizer
            at = AutoTokenizer.from_pretrained(d)
            encode = lambda t, special: at(t, add_special_tokens=special)["input_ids"]
            dec = lambda ids, skip: at.decode(ids, skip_special_tokens=skip)
            generator += f", transformers {transformers.__version__} AutoTokenizer"
            roles = {r: (at.convert_tokens_to_ids(getattr(at, r + "_token"))
                         if getattr(at, r + "_token", None) is not None else -1) for r in ("bos", "eos", "pad", "unk")}
        cases = []
        for t in TEXTS:
            plain = encode(t, False)
            special = encode(t, True)
            cases.append(dict(text=t, ids=plain, ids_special=special, decoded=dec(special, True),
                              decoded_keep=dec(special, False)))
        ref = dict(generator=generator, cases=cases, decode_cases=decode_cases(tk, dec, byte_tokens))
        if roles is not None:
            ref["roles"] = roles
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            f.write(compact(ref))
        print(name, len(cases), "cases", len(ref["decode_cases"]), "decode cases", tk.get_vocab_size(), "tokens")


if __name__ == "__main__":
    main()
