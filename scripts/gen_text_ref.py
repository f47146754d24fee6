#!/usr/bin/env python3
"""gen_text_ref.py — text-in, text-out reference: small models that carry a
tokenizer, and what transformers' greedy generate() + decode() make of
text prompts.

Python makes these files only; omptensor and its tests are C and never run
this script. Needs torch and transformers (the GPU machine has them; it runs
on its CPU):

    python3 scripts/gen_text_ref.py OUT_DIR      # then copy OUT_DIR/* to tests/data/models/

For each model it writes OUT_DIR/<name>/: config.json, model.safetensors,
generation_config.json (eos_token_id: the tokenizer's EOS and one token the
model greedily makes early, so that stopping at EOS shows within a few tokens;
max_new_tokens), tokenizer.json + tokenizer_config.json (save_pretrained of
the tokenizer in tests/data/tokenizers/<family>, made by gen_tokenizer_ref.py),
and expected.json: per prompt its text, its ids (tokenizer(text)), the
continuation generate() makes with the model's generation_config (stopping at
EOS), the same with eos_token_id=None run to max_new_tokens ("ignore EOS"),
each as ids and as decode(skip_special_tokens=True), and each step's top-1 /
top-2 logit margin (a near tie would make the comparison fragile).

Deterministic: fixed seeds, one CPU thread, eager attention, fp32.
"""

import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file  # noqa: F401  (save_pretrained uses it)
from transformers import (GenerationConfig, GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM,
                          PreTrainedTokenizerFast)

HERE = os.path.dirname(os.path.abspath(__file__))
TOK_DIR = os.path.join(HERE, "..", "tests", "data", "tokenizers")
GENERATOR = "scripts/gen_text_ref.py"
FORMAT_VERSION = 1
MAX_NEW = 20
SEED = 20261202

PROMPTS = [
    "Hello world",
    "The café ☕ opened at 9:30 — 東京 🎉",
    "  spaces  and\ttabs\r\nnew line",
    "👨‍👩‍👧 family, naïve résumé",
    "12345 + 678 = ?",
]

MODELS = [
    dict(name="llama_text", family="sentencepiece_style", cls="llama",
         special=dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>"), cleanup=False,
         config=dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                     num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                     tie_word_embeddings=False, hidden_act="silu")),
    dict(name="gpt2_text", family="gpt2_style", cls="gpt2",
         special=dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>"), cleanup=False,
         config=dict(n_embd=64, n_layer=2, n_head=4, n_positions=256, activation_function="gelu_new",
                     layer_norm_epsilon=1e-5, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)),
]


@torch.no_grad()
def init_weights(model, seed):
    # std 0.2 (HF's 0.02 makes near-uniform logits, and near ties)
    g = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        is_norm = "norm" in name or ".ln_" in name or name.startswith("transformer.ln_f")
        if is_norm and leaf == "weight":
            v = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
        elif leaf == "bias":
            v = 0.1 * torch.randn(p.shape, generator=g)
        else:
            v = 0.2 * torch.randn(p.shape, generator=g)
        p.copy_(v)


@torch.no_grad()
def run(model, tok, ids, gen_kw):
    x = torch.tensor([ids])
    out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), do_sample=False, num_beams=1,
                         output_scores=True, return_dict_in_generate=True, **gen_kw)
    new = out.sequences[0, len(ids):].tolist()
    margins = [float(torch.topk(s[0].float(), 2).values.diff().abs()) for s in out.scores]
    return new, tok.decode(new, skip_special_tokens=True), min(margins) if margins else 0.0


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_root = sys.argv[1]
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    for k, spec in enumerate(MODELS):
        d = os.path.join(out_root, spec["name"])
        os.makedirs(d, exist_ok=True)
        tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOK_DIR, spec["family"], "tokenizer.json"),
                                      clean_up_tokenization_spaces=spec["cleanup"], **spec["special"])
        vocab = len(tok)
        eos = tok.convert_tokens_to_ids(spec["special"]["eos_token"])
        bos = tok.convert_tokens_to_ids(spec["special"]["bos_token"])
        if spec["cls"] == "llama":
            cfg = LlamaConfig(vocab_size=vocab, bos_token_id=bos, eos_token_id=eos, pad_token_id=None,
                              **spec["config"])
            cls = LlamaForCausalLM
        else:
            cfg = GPT2Config(vocab_size=vocab, bos_token_id=bos, eos_token_id=eos, **spec["config"])
            cls = GPT2LMHeadModel
        cfg._attn_implementation = "eager"
        torch.manual_seed(SEED + k)
        model = cls(cfg).float().eval()
        init_weights(model, SEED + k)
        # An early greedy token of the first prompt becomes a second EOS id,
        # so that stopping shows (a random model never makes </s>).
        ids0 = tok(PROMPTS[0])["input_ids"]
        free, _, _ = run(model, tok, ids0, dict(max_new_tokens=MAX_NEW, eos_token_id=None, pad_token_id=eos))
        stop = next(t for t in free[3:] if t != eos and t not in free[:3])
        model.generation_config = GenerationConfig(bos_token_id=bos, eos_token_id=[eos, stop], pad_token_id=eos,
                                                   max_new_tokens=MAX_NEW, do_sample=False)
        model.save_pretrained(d, safe_serialization=True)
        tok.save_pretrained(d)
        cases = []
        for p in PROMPTS:
            ids = tok(p)["input_ids"]
            new, text, m1 = run(model, tok, ids, dict(max_new_tokens=MAX_NEW, eos_token_id=[eos, stop],
                                                      pad_token_id=eos))
            full, full_text, m2 = run(model, tok, ids, dict(max_new_tokens=MAX_NEW, eos_token_id=None,
                                                            pad_token_id=eos))
            cases.append(dict(prompt=p, prompt_ids=ids, ids=new, text=text, stopped="eos" if new[-1] in (eos, stop)
                              else "length", ids_ignore_eos=full, text_ignore_eos=full_text,
                              min_margin=min(m1, m2)))
        meta = dict(generator=GENERATOR, format_version=FORMAT_VERSION, torch=torch.__version__,
                    transformers=transformers.__version__, seed=SEED + k, vocab_size=vocab,
                    eos_token_id=[eos, stop], max_new_tokens=MAX_NEW, tokenizer_family=spec["family"], cases=cases)
        with open(os.path.join(d, "expected.json"), "w", encoding="utf-8") as f:
            json.dump(meta, f, ensure_ascii=False, indent=1)
            f.write("\n")
        print(spec["name"], [(c["stopped"], len(c["ids"]), round(c["min_margin"], 4)) for c in cases])


if __name__ == "__main__":
    main()
