#!/usr/bin/env python3
"""Reference GGUF tokenizers for tests/test_text_gguf_tokenizer.c.

A GGUF file carries no tokenizer.json, only llama.cpp's tokenizer metadata
(tokenizer.ggml.*); omptensor rebuilds a tokenizer from it
(src/text/tokenizer_gguf.c). This script trains small tokenizers (no
download: the text is tests/data/tokenizers/corpus.txt plus a paragraph
below), writes each as a GGUF file holding only that metadata, and records
what the reference library makes of a set of texts:

  tok-spm.gguf        tokenizer.ggml.model "llama": a sentencepiece BPE
                      model trained as Llama 2's was (byte_fallback, identity
                      normalization, no whitespace squeezing, dummy prefix,
                      split digits), with one user-defined piece; tokens,
                      scores, token_type. Reference: sentencepiece itself
                      (what llama.cpp's SPM tokenizer reproduces), bos added
                      as add_bos_token (true) says.
  tok-gpt2.gguf       "gpt2", pre "gpt2": a byte-level BPE trained by the
                      tokenizers library (GPT-2's pre-tokenizer); tokens,
                      merges, token_type. Reference: that tokenizer.
  tok-llama-bpe.gguf  "gpt2", pre "llama-bpe": Llama 3's Split regex then
                      ByteLevel without its regex, add_bos_token true.
                      Reference: that tokenizer with bos $A and
                      ignore_merges (llama.cpp's, and Llama 3's own file's).
  tok-qwen2.gguf      "gpt2", pre "qwen2": the llama-bpe vocabulary under
                      Qwen2's regex (no NFC: llama.cpp and transformers'
                      GGUF reader leave Qwen2's normalizer out). Reference:
                      the tokenizers library with that pipeline.
  tok-ties.gguf       "llama": a made-up vocabulary of tied scores and
                      repeated tokens, to pin the merges' order (ties_family).
  tok-bad-*.gguf      tiny files with one defect each (BAD below) that the
                      reader must refuse naming the key.

Each tok-NAME.json holds {"cases": [{"text", "ids", "ids_special",
"decoded", "decoded_keep"}], "roles": {"bos": id, ...}}: ids without and
with the special tokens the file asks for, and the decoding of ids_special
with special tokens skipped and kept.

Where the reference library and a tokenizer.json built from the metadata
(as transformers' GGUF integration builds one) are known to disagree, the
case carries "known_difference" (a sentence) and the ids that construction
gives ("ids_hf", from hf_from_spm); the test checks those instead and
prints the reason.

Checked once by hand against transformers 5.24 (not needed to run this):
its GGUF reader (integrations/gguf/gguf_tokenizer_mapping.py) makes the
same merges (generate_merges; omptensor's are identical, ties included,
on tok-spm and tok-ties) but writes a Metaspace(prepend_scheme "first")
pre-tokenizer instead of the Prepend normalizer, so on a text that starts
with a space it gives one \u2581 fewer than sentencepiece and llama.cpp
(" leading space": \u2581 + leading there, \u2581\u2581 + leading here; the
two such texts of tok-spm and three of tok-ties), and on every other text
the ids here; omptensor follows sentencepiece. Its byte-level reader sets
no ignore_merges for Llama 3 (llama.cpp does, and so does omptensor; no
text of tok-llama-bpe tells the two apart). Run:

    python3 -m venv /tmp/gt && /tmp/gt/bin/pip install gguf numpy tokenizers sentencepiece protobuf
    /tmp/gt/bin/python scripts/gen_gguf_tokenizer_ref.py tests/data/gguf
"""
import io
import json
import os
import sys

import gguf
import sentencepiece as spm
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/gguf"
here = os.path.dirname(os.path.abspath(__file__))
corpus_path = os.path.join(here, "..", "tests", "data", "tokenizers", "corpus.txt")
with open(corpus_path, encoding="utf-8") as f:
    CORPUS = f.read()
CORPUS += """
A tokenizer turns text into numbers and back again. The numbers are ids into
a vocabulary of pieces: whole words for the common ones, parts of words for
the rest, and single bytes for anything never seen. Spaces matter, digits
are split one by one, and a newline is a character like any other.
Tokenizers, tokenize, tokenized; token, tokens; the the the; and and and.
"""
LINES = [l for l in CORPUS.split("\n") if l.strip()]

TEXTS = [
    "Hello, world!",
    "hello world and hello  world",
    " leading space",
    "trailing space ",
    "  two leading, three trailing   ",
    "digits 1234567890 and 3.14",
    "line one\nline two\n\nline four",
    "tabs\tand spaces",
    "café naïve straße",
    "emoji 😀 and 🦙 need bytes",
    "日本語 and 한국어",
    "It's we'll they've",
    "unseen zyxwvut qqqq",
]

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")

T_NORMAL, T_UNKNOWN, T_CONTROL, T_USER, T_UNUSED, T_BYTE = 1, 2, 3, 4, 5, 6


def writer(name):
    w = gguf.GGUFWriter(os.path.join(out, name), "llama")
    w.add_name("omptensor-" + name)
    return w


def finish(w):
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def save(name, cases, roles):
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump({"cases": cases, "roles": roles}, f, ensure_ascii=False, indent=1)
        f.write("\n")


# ---- (1) sentencepiece (tokenizer.ggml.model "llama") ---------------------------

def generate_merges(tokens, scores):
    """transformers' tokenization_utils_base.generate_merges as its GGUF
    reader calls it (vocab {token: index}, vocab_scores {token: score})."""
    vocab = {t: i for i, t in enumerate(tokens)}
    vocab_scores = dict(zip(tokens, scores))
    merges = []
    for merge, piece_score in vocab_scores.items():
        local = [(merge[:k], merge[k:], piece_score) for k in range(1, len(merge))
                 if merge[:k] in vocab and merge[k:] in vocab]
        local.sort(key=lambda x: (vocab[x[0]], vocab[x[1]]))
        merges.extend(local)
    merges.sort(key=lambda v: (v[2], len(v[0]), len(v[1])), reverse=True)
    return vocab, [(a, b) for a, b, _ in merges]


def hf_from_spm(tokens, scores, types, bos):
    """What omptensor builds from the metadata, in the tokenizers library:
    transformers' GGUF construction (BPE over the vocabulary with the
    merges generate_merges makes from the scores, byte_fallback, fuse_unk,
    control tokens special, user-defined ones added) with the Prepend +
    Replace normalizers llama.cpp's prefix space matches and the Llama
    decoders. Used only to explain where it and sentencepiece differ."""
    from tokenizers import AddedToken
    vocab, merges = generate_merges(tokens, scores)
    tk = Tokenizer(models.BPE(vocab, merges, unk_token=tokens[0], fuse_unk=True, byte_fallback=True))
    tk.add_special_tokens([AddedToken(t, normalized=False, special=True) for t, y in zip(tokens, types)
                           if y in (T_CONTROL, T_UNKNOWN)])
    tk.add_tokens([AddedToken(t, normalized=False, special=False) for t, y in zip(tokens, types) if y == T_USER])
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    tk.post_processor = processors.TemplateProcessing(single=f"{tokens[bos]} $A", special_tokens=[(tokens[bos], bos)])
    return tk


def spm_family():
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(LINES), model_writer=buf, model_type="bpe", vocab_size=640, byte_fallback=True,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        split_digits=True, allow_whitespace_only_pieces=True, character_coverage=1.0, hard_vocab_limit=False,
        user_defined_symbols=["<tool>"], unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    n = sp.get_piece_size()
    tokens = [sp.id_to_piece(i) for i in range(n)]
    scores = [sp.get_score(i) for i in range(n)]
    types = []
    for i in range(n):
        types.append(T_UNKNOWN if sp.is_unknown(i) else T_CONTROL if sp.is_control(i) else
                     T_BYTE if sp.is_byte(i) else T_UNUSED if sp.is_unused(i) else
                     T_USER if tokens[i] == "<tool>" else T_NORMAL)
    w = writer("tok-spm.gguf")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    finish(w)
    hf = hf_from_spm(tokens, scores, types, 1)
    cases = []
    for text in TEXTS + ["use <tool> here", "x<tool>y"]:
        ids = sp.encode(text)
        # sentencepiece's decode always drops control pieces (<s>): the
        # text kept with them is the tokenizers library's decode of the
        # same ids through the Llama decoders
        c = {"text": text, "ids": ids, "ids_special": [1] + ids, "decoded": sp.decode([1] + ids),
             "decoded_keep": hf.decode([1] + ids, skip_special_tokens=False)}
        hf_ids = hf.encode(text, add_special_tokens=False).ids
        if hf_ids != ids:
            c["ids_hf"] = hf_ids
            c["ids_special_hf"] = [1] + hf_ids
            c["known_difference"] = None  # filled in by hand below
        cases.append(c)
    return cases, {"bos": 1, "eos": 2, "unk": 0}, hf


# ---- (2) byte-level BPE (tokenizer.ggml.model "gpt2") ---------------------------

def train_bpe(pre, specials, normalizer=None):
    tk = Tokenizer(models.BPE())
    if normalizer is not None:
        tk.normalizer = normalizer
    tk.pre_tokenizer = pre
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=520, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(LINES * 3, trainer)
    return tk


def write_bpe(name, tk, pre, specials, bos=None, eos=None):
    js = json.loads(tk.to_str())
    vocab = js["model"]["vocab"]
    tokens = [None] * len(vocab)
    for t, i in vocab.items():
        tokens[i] = t
    merges = [m if isinstance(m, str) else " ".join(m) for m in js["model"]["merges"]]
    w = writer(name)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([T_CONTROL if t in specials else T_NORMAL for t in tokens])
    w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(vocab[bos])
        w.add_add_bos_token(True)
    else:
        w.add_add_bos_token(False)
    if eos is not None:
        w.add_eos_token_id(vocab[eos])
    finish(w)
    return vocab


def bpe_cases(tk, with_bos):
    cases = []
    for text in TEXTS:
        ids = tk.encode(text, add_special_tokens=False).ids
        ids_sp = tk.encode(text).ids
        cases.append({"text": text, "ids": ids, "ids_special": ids_sp,
                      "decoded": tk.decode(ids_sp, skip_special_tokens=True),
                      "decoded_keep": tk.decode(ids_sp, skip_special_tokens=False)})
    return cases


def gpt2_family():
    specials = ["<|endoftext|>"]
    tk = train_bpe(pre_tokenizers.ByteLevel(add_prefix_space=False), specials)
    vocab = write_bpe("tok-gpt2.gguf", tk, "gpt2", specials, eos="<|endoftext|>")
    texts_tk = tk
    cases = bpe_cases(texts_tk, False)
    cases.append({"text": "end<|endoftext|>start", **{}})
    c = cases[-1]
    c["ids"] = tk.encode(c["text"], add_special_tokens=False).ids
    c["ids_special"] = tk.encode(c["text"]).ids
    c["decoded"] = tk.decode(c["ids_special"], skip_special_tokens=True)
    c["decoded_keep"] = tk.decode(c["ids_special"], skip_special_tokens=False)
    return cases, {"eos": vocab["<|endoftext|>"]}


def llama_bpe_family():
    specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_PATTERN), "isolated"),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tk = train_bpe(pre, specials)
    vocab = write_bpe("tok-llama-bpe.gguf", tk, "llama-bpe", specials, bos="<|begin_of_text|>",
                      eos="<|end_of_text|>")
    bos = vocab["<|begin_of_text|>"]
    # llama.cpp sets ignore_merges for the Llama 3 pre-tokenizers, as Llama
    # 3's own tokenizer.json does: a piece that is a token is taken whole
    js = json.loads(tk.to_str())
    js["model"]["ignore_merges"] = True
    tk = Tokenizer.from_str(json.dumps(js))
    tk.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                      special_tokens=[("<|begin_of_text|>", bos)])
    roles = {"bos": bos, "eos": vocab["<|end_of_text|>"]}
    llama = (bpe_cases(tk, True), roles)
    # the same vocabulary under Qwen2's pipeline (no bos: add_bos_token
    # false; no ignore_merges). No NFC: Qwen2's tokenizer.json has that
    # normalizer, but neither llama.cpp nor transformers' GGUF reader
    # applies it, so the decomposed e + U+0301 case stays decomposed.
    js["model"]["ignore_merges"] = False
    qw = Tokenizer.from_str(json.dumps(js))
    qw.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_PATTERN), "isolated"),
                                                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    qw.post_processor = processors.ByteLevel(trim_offsets=False)
    write_bpe("tok-qwen2.gguf", qw, "qwen2", specials, eos="<|end_of_text|>")
    qcases = bpe_cases(qw, False)
    qcases.append({"text": "decomposed e\u0301 and 12345"})
    c = qcases[-1]
    c["ids"] = qw.encode(c["text"], add_special_tokens=False).ids
    c["ids_special"] = qw.encode(c["text"]).ids
    c["decoded"] = qw.decode(c["ids_special"], skip_special_tokens=True)
    c["decoded_keep"] = qw.decode(c["ids_special"], skip_special_tokens=False)
    return llama, (qcases, {"eos": vocab["<|end_of_text|>"]})


os.makedirs(out, exist_ok=True)
spm_cases, spm_roles, _ = spm_family()
AFTER_ADDED = ("sentencepiece puts its dummy-prefix \u2581 before the whole text once; llama.cpp (its SPM "
               "tokenizer prefixes every stretch of text after a special or user-defined token: is_prev_special) "
               "and the Prepend normalizer, which runs on each stretch between added tokens, put one after <tool> "
               "too, so the text after it starts with an extra \u2581")
KNOWN = {"use <tool> here": AFTER_ADDED, "x<tool>y": AFTER_ADDED}
for c in spm_cases:
    if "ids_hf" in c:
        c["known_difference"] = KNOWN.get(c["text"], "UNEXPLAINED")
        print("spm: sentencepiece and the BPE-from-scores construction differ on %r:\n  spm %s\n  hf  %s\n  %s" %
              (c["text"], c["ids"], c["ids_hf"], c["known_difference"]))
save("tok-spm.json", spm_cases, spm_roles)
save("tok-gpt2.json", *gpt2_family())
(lc, lr), (qc, qr) = llama_bpe_family()
save("tok-llama-bpe.json", lc, lr)
save("tok-qwen2.json", qc, qr)

# ---- (3) merge order: a vocabulary of ties and repeats ---------------------------

def ties_family():
    """A made-up "llama" vocabulary whose scores tie often and whose tokens
    repeat, over multi-byte characters: the merges' order then rests on
    every tie rule of transformers' generate_merges (length of the halves,
    file order, a repeat's first place and last score). Reference: the
    tokenizers library running that construction (hf_from_spm), as
    sentencepiece would not load such a model."""
    import random
    rnd = random.Random(5)
    alpha = "ab\u2581\u00e9\u65e5\U0001F600"
    tokens = ["<unk>", "<s>", "</s>"] + list(alpha)
    tokens += ["".join(rnd.choice(alpha) for _ in range(rnd.randint(2, 5))) for _ in range(300)]
    scores = [0.0, 0.0, 0.0] + [float(rnd.randint(-12, 0)) for _ in tokens[3:]]
    types = [T_UNKNOWN, T_CONTROL, T_CONTROL] + [T_NORMAL] * (len(tokens) - 3)
    w = writer("tok-ties.gguf")
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_add_bos_token(False)
    finish(w)
    hf = hf_from_spm(tokens, scores, types, 1)
    cases = []
    for _ in range(12):
        text = "".join(rnd.choice(alpha + " ") for _ in range(rnd.randint(5, 30)))
        ids = hf.encode(text, add_special_tokens=False).ids
        cases.append({"text": text, "ids": ids, "ids_special": ids, "decoded": hf.decode(ids),
                      "decoded_keep": hf.decode(ids, skip_special_tokens=False)})
    return cases, {"bos": 1, "eos": 2, "unk": 0}


save("tok-ties.json", *ties_family())

# ---- files the reader must refuse: (name, what to write, the key the message names)
BAD_TOKENS = ["<unk>", "<s>", "</s>", "\u2581a", "a", "b", "\u2581"]


def bad(name, model="llama", pre=None, tokens=BAD_TOKENS, scores=True, types=True, merges=None, bos=None):
    w = writer("tok-bad-%s.gguf" % name)
    if model is not None:
        w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    if tokens is not None:
        w.add_token_list(tokens)
    n = len(tokens or [])
    if scores:
        w.add_token_scores([-float(i) for i in range(n if scores is True else scores)])
    if types:
        w.add_token_types([2, 3, 3] + [1] * ((n if types is True else types) - 3))
    if merges is not None:
        w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(bos)
    finish(w)


bad("model", model="bert")
bad("pre", model="gpt2", pre="made-up", merges=["\u2581 a"])
bad("scores", scores=len(BAD_TOKENS) - 1)
bad("types", types=len(BAD_TOKENS) + 2)
bad("tokens", tokens=None, scores=False, types=False)
bad("bos", bos=len(BAD_TOKENS))
bad("merge", model="gpt2", pre="gpt2", merges=["\u2581 a", "a c"])

for n in ("spm", "gpt2", "llama-bpe", "qwen2", "ties"):
    for ext in ("gguf", "json"):
        p = os.path.join(out, "tok-%s.%s" % (n, ext))
        print("%-40s %7d bytes" % (p, os.path.getsize(p)))
