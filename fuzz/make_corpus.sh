#!/usr/bin/env bash
# make_corpus.sh — (re)generates the seed corpora fuzz/corpus/<target>/ from
# the committed reference models and fixtures. Seeds stay small: a
# safetensors seed is its 8-byte length + JSON header + at most 64 data
# bytes (so most real seeds are *truncated* files: the error path), plus a
# few tiny complete files written here; an .npy seed is its header + 16
# bytes. Run from anywhere; rewrites the corpus folders.
set -euo pipefail
cd "$(dirname "$0")/.."
c=fuzz/corpus
rm -rf "$c"
mkdir -p "$c"/{fuzz_safetensors,fuzz_st_index,fuzz_hfconfig,fuzz_yaml_settings,fuzz_size,fuzz_npy,fuzz_trace,fuzz_args,fuzz_batch}
mkdir -p "$c"/{fuzz_gguf,fuzz_genconfig}

# safetensors: real headers (truncated data) ...
for f in tests/data/models/*/*.safetensors tests/data/train/*/*.safetensors; do
  n=$(head -c8 "$f" | od -An -tu8 | tr -d ' ')
  name=$(echo "${f#tests/data/}" | tr '/' '_')
  head -c $((8 + n + 64)) "$f" >"$c/fuzz_safetensors/$name"
done
# ... and complete tiny files (valid, metadata, empty tensor, every dtype; and
# a few that break one rule).
st() { # st NAME JSON DATA_BYTES
  local len=${#2}
  { printf "$(printf '\\x%02x' $((len & 255)) $(((len >> 8) & 255)) 0 0 0 0 0 0)"; printf '%s' "$2"
    head -c "$3" /dev/zero; } >"$c/fuzz_safetensors/$1"
}
st tiny_f32 '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 8
st tiny_meta '{"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F16","shape":[1],"data_offsets":[8,10]}}' 10
st tiny_empty '{"e":{"dtype":"F32","shape":[0,4],"data_offsets":[0,0]},"i":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}' 4
st tiny_overlap '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}' 12
st tiny_none '{}' 0
# the ranges must tile the data section (issue 14): a hole, bytes after the last tensor
st tiny_gap '{"a":{"dtype":"I8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"I8","shape":[2],"data_offsets":[6,8]}}' 8
st tiny_trailing '{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}' 11

# index files
for f in tests/data/models/*/*.index.json; do cp "$f" "$c/fuzz_st_index/$(basename "$(dirname "$f")").json"; done
printf '%s' '{"metadata":{"total_size":8},"weight_map":{"a":"m-1.safetensors","b":"m-2.safetensors","c":"m-1.safetensors"}}' \
  >"$c/fuzz_st_index/small.json"

# config.json
for f in tests/data/models/*/config.json tests/data/io/*/config.json; do
  cp "$f" "$c/fuzz_hfconfig/$(echo "${f#tests/data/}" | tr '/' '_')"
done

# hostile sizes and fields (issue 14): every range's edge, a field refused by name
h=$c/fuzz_hfconfig
printf '%s' '{"model_type":"gpt2","n_embd":64,"n_layer":4294967297,"n_head":4,"vocab_size":256,"n_positions":128}' >"$h/hostile_n_layer.json"
printf '%s' '{"model_type":"gpt2","n_embd":1048576,"n_layer":65536,"n_head":4096,"vocab_size":2147483647,"n_positions":2147483647,"n_inner":4194304}' >"$h/hostile_edges.json"
printf '%s' '{"model_type":"llama","hidden_size":9007199254740992,"intermediate_size":64,"num_hidden_layers":2147483648,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":256,"vocab_size":100,"max_position_embeddings":16}' >"$h/hostile_2p53.json"
printf '%s' '{"model_type":"llama","architectures":["LlamaForCausalLM"],"hidden_size":32,"intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":100,"max_position_embeddings":16,"hidden_act":"gelu_new","attention_bias":true,"sliding_window":4096,"rope_parameters":{"rope_type":"default","partial_rotary_factor":0.5},"quantization_config":{"bits":4}}' >"$h/refused_fields.json"
printf '%s' '{"model_type":"gpt2","n_embd":8,"n_layer":1,"n_head":2,"vocab_size":10,"n_positions":4,"tie_word_embeddings":false,"resid_pdrop":0.1,"initializer_range":0.01,"activation_function":"gelu_fast","reorder_and_upcast_attn":true,"add_cross_attention":false}' >"$h/gpt2_fields.json"

# YAML settings
y=$c/fuzz_yaml_settings
printf 'memory:\n  offload_strategy: balanced\n  max_gpu_memory: 3GB\n' >"$y/basic.yaml"
printf 'memory:\n  offload_strategy: aggressive   # comment\n  max_gpu_memory: "0:20GB,1:30GB"\nbackend: map\ndevice: 1\ntrace: run.trace.json\ndtype: bf16\njson: true\n' >"$y/all.yaml"
printf 'memory: {offload_strategy: minimal, max_gpu_memory: 40%%}\nbackend: usm\n' >"$y/flow.yaml"
printf -- '---\nmemory:\n  max_gpu_memory: 3XB\n...\n' >"$y/bad_size.yaml"
printf 'memory:\n  - a\n  - b\nunknown: 1\n' >"$y/bad_shape.yaml"
printf 'a: &x 1\nb: *x\n' >"$y/alias.yaml"
printf '' >"$y/empty.yaml"

# size strings and per-device limits
z=$c/fuzz_size
i=0
for s in 3.5GB 3GiB 40% 123456789 1.5TB 512KiB 0 -1 1e9 3XB 100% 100.5% "0:20GB,1:30GB" "0:1GiB" "3:50%,0:1MB" \
         18446744073709551615 18446744073709551616 "" GB 0.0000001% 1.5 " 1GB"; do
  printf '%s' "$s" >"$z/s$i"; i=$((i + 1))
done

# npy: header + 16 bytes of data
for f in tests/data/models/llama_gqa/logits.npy tests/data/models/llama_bf16/logits_bfloat16_forward.npy \
         tests/data/train/gpt2_small/logits.npy; do
  h=$(head -c 10 "$f" | tail -c 2 | od -An -tu2 | tr -d ' ')
  head -c $((10 + h + 16)) "$f" >"$c/fuzz_npy/$(echo "${f#tests/data/}" | tr '/' '_')"
done
# traces (omptensor trace summarize|plot): small ones as ot_trace_write_chrome
# writes them (a run with an upload, kernel, write-back and free; two devices
# with a pipeline stage, evictions and dropped copies; unlimited budgets, new
# and old spelling; no events) and a few hostile ones (the reader's errors).
t=$c/fuzz_trace
ev() { # ev CAT TS DUR PID TENSOR BYTES OP RUN DEVICE_BYTES BLOCK_DELTA FLAGS
  printf '{"name":"%s %s","cat":"%s","ph":"X","ts":%s,"dur":%s,"pid":%s,"tid":1,"args":{"tensor":"%s","bytes":%s,"op":%s,"run":%s,"device_bytes":%s,"block_delta":%s,"flags":%s}}' \
    "$1" "$5" "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$9" "${10}" "${11}"
}
meta() { printf '{"name":"process_name","ph":"M","pid":%s,"tid":0,"args":{"name":"device %s"}}' "$1" "$1"; }
ctr() { printf '{"name":"device bytes","ph":"C","ts":%s,"pid":%s,"args":{"bytes":%s}}' "$1" "$2" "$3"; }
trace() { # trace NAME BUDGET EVENTS...
  local name=$1 budget=$2; shift 2
  { printf '{"traceEvents":['; local IFS=,; printf '%s' "$*"; printf '],"displayTimeUnit":"ms","otherData":{"producer":"omptensor","budget_bytes":%s}}' "$budget"; } >"$t/$name"
}
trace basic.json 1024 "$(meta 0)" "$(ev run 0.0 0.0 0 "" 0 0 0 0 0 0)" "$(ev upload 1.5 2.0 0 w0 512 0 0 512 512 16)" \
  "$(ctr 1.5 0 512)" "$(ev kernel 4.0 3.25 0 op0 0 0 0 512 0 1)" "$(ev download 8.0 1.0 0 w0 512 0 0 512 0 0)" \
  "$(ev alloc 9.0 0.0 0 t1 256 1 0 768 256 0)" "$(ev free 9.5 0.0 0 w0 512 -1 0 256 -512 4)" \
  "$(ev free 9.75 0.0 0 t1 256 -1 0 0 -256 34)"
trace two_devices.json 2048 "$(meta 0)" "$(meta 1)" "$(ev run 0 0 0 "" 0 0 1 256 0 0)" \
  "$(ev upload 1 1 0 w0 256 0 1 512 256 16)" "$(ev kernel 2 5 0 op0 0 0 1 512 0 1)" \
  "$(ev free 7 0 0 w0 256 1 1 256 -256 8)" "$(ev run 8 0 1 "" 0 1 1 0 0 64)" \
  "$(ev upload 8 2 1 w1 1024 1 1 1024 1024 0)" "$(ev kernel 10 1 1 op1 0 1 1 1024 0 1)" \
  "$(ev free 11 0 1 w1 1024 -1 1 0 -1024 2)"
trace unlimited.json null "$(ev run 0 0 2 "" 0 0 0 0 0 0)" "$(ev kernel 0 1 2 op0 0 0 0 0 0 1)"
trace legacy_unlimited.json -1 "$(ev run 0 0 2 "" 0 0 0 0 0 0)"
trace empty.json 0
trace bad_ts.json 1024 "$(ev run 0 0 0 "" 0 0 0 0 0 0)" "$(ev upload 1e300 1 0 w 256 0 0 256 256 0)"
trace bad_bytes.json 1024 "$(ev run 0 0 0 "" 0 0 0 0 0 0)" "$(ev upload 1 1 0 w '"256"' 0 0 256 256 0)"
trace bad_negative.json 1024 "$(ev upload 1 1 0 w -256 0 0 256 256 0)"
trace bad_sum.json 1024 "$(ev upload 1 1 0 w 9223372036854775807 0 0 0 0 0)" \
  "$(ev upload 2 1 0 w 9223372036854775807 0 0 0 0 0)" "$(ev upload 3 1 0 w 9223372036854775807 0 0 0 0 0)"
printf '{"traceEvents":[{"cat":"kernel","ph":"X","ts":1,"dur":1,"pid":0,"args":{}}],"otherData":{"producer":"omptensor","budget_bytes":0}}' \
  >"$t/bad_missing.json"

# command lines (fuzz_args): byte 0 picks the callback that fails (0: none;
# 0x80 + k: its call k + 1), then argv[1..] separated by NUL bytes
a=$c/fuzz_args
args() { # args NAME MODE_HEX ARG...
  local name=$1 mode=$2; shift 2
  { printf "\\x$mode"; printf '%s' "$1"; shift; [ $# -eq 0 ] || printf '\0%s' "$@"; } >"$a/$name"
}
args run 00 MODEL --prompt-ids 1,2,3 -n 4 --gpu-memory-limit 3GB --offload=aggressive --trace t.json -v
args settings 00 --backend map --device 1 --devices 2 --dtype bf16 --json --config c.yaml
args equals 00 --gpu-memory-limit=40% --backend=host --json=yes --trace= MODEL
args train 00 --data d.bin -b 4 --steps 10 --dry-run --save out -- --not-an-option
args unknown 00 --frobnicate MODEL
args missing_value 00 MODEL --prompt-ids
args switch_value 00 --verbose=1 -h
args bad_size 00 --gpu-memory-limit 3XB --device -1
args dash 00 - -- -x -nn -n
args fail_third 82 MODEL --prompt-ids 1 -n 2 --json
# batch jobs (fuzz_batch): the prompts file, a NUL byte, the results file of
# an earlier run (whole lines, a line cut by a kill, U+0000 in a text, a
# repeated id, another job's results, a binary file, nothing)
b=$c/fuzz_batch
job() { # job NAME IN OUT (OUT "-": no results file)
  if [ "$3" = - ]; then printf '%b' "$2" >"$b/$1"; else { printf '%b' "$2"; printf '\0'; printf '%b' "$3"; } >"$b/$1"; fi
}
IN='{"id": "a", "prompt_ids": [1, 2]}\n{"id": 7, "prompt_ids": [3], "max_new_tokens": 2}\n\n{"prompt_ids": [4, 5, 6]}\n'
R1='{"id":"a","prompt_tokens":2,"tokens":[9,10],"text":"x\\u0000y","stopped":"length","tokens_per_second":1.5,"prefill_ms":0.25,"decode_ms":0.5}\n'
job fresh "$IN" -
job empty_out "$IN" ''
job resumed "$IN" "$R1"'{"id":7,"prompt_tokens":1,"tok'
job cut_first "$IN" '{"id":4,"prompt_tokens":3,"tokens":[1'
job other_job "$IN" '{"id":"zz","tokens":[1]}\n'
job binary "$IN" '\x93NUMPY\x01\x00v\x00{}\n\x00\x00\x80?'
job no_line "$IN" 'hello'
job bad_lines '{"id": "a", "prompt_ids": [1]}\n{"id": "a", "prompt_ids": [2]}\n{"id": 1.5}\n[1]\n{"prompt": "text"}\n{"id": "m", "prompt_ids": [1], "max_new_tokens": 64}\n{"id": "u", "prompt_ids": [300]}\n{"id":"x","prompt_ids":[1],"k":0}\n' -
du -sh "$c"

# tokenizer (fuzz_tokenizer): first byte even = a tokenizer.json (the
# reference families, and their first kilobytes: truncated), odd = text for
# the target's fixed byte-level tokenizer.
k=$c/fuzz_tokenizer
mkdir -p "$k"
for f in tests/data/tokenizers/*/tokenizer.json; do
  name=$(basename "$(dirname "$f")")
  { printf '\x00'; cat "$f"; } >"$k/json_$name"
  { printf '\x00'; head -c 2048 "$f"; } >"$k/json_${name}_truncated"
done
# small complete files (a sentencepiece-style BPE with byte fallback,
# Metaspace, ByteLevel) and each with one field as the tokenizers library
# refuses it (issue 43): the mutations reach every typed check from these
python3 - "$k" <<'PY'
import json, sys, copy
k = sys.argv[1]
def tok(**kw):
    t = {"id": 0, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
    t.update(kw); return t
vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, "\u2581": 3, "a": 4, "b": 5, "ab": 6, "\u2581ab": 7}
vocab.update({"<0x%02X>" % b: 8 + b for b in range(256)})
base = {"version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [tok(id=0, content="<unk>"), tok(id=1), tok(id=2, content="</s>")],
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
                                                          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                                     {"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                                                     {"type": "ByteFallback"}, {"type": "Fuse"},
                                                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": [["a", "b"], ["\u2581", "ab"]]}}
def put(name, edit):
    d = copy.deepcopy(base); edit(d)
    open(f"{k}/json_tiny_{name}", "wb").write(b"\x00" + json.dumps(d, ensure_ascii=False).encode())
put("ok", lambda d: None)
put("metaspace", lambda d: (d.__setitem__("normalizer", None),
    d.__setitem__("pre_tokenizer", {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True}),
    d.__setitem__("decoder", {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True})))
put("bytelevel", lambda d: (d.__setitem__("normalizer", None),
    d.__setitem__("pre_tokenizer", {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}),
    d.__setitem__("decoder", {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True})))
put("byte_fallback_str", lambda d: d["model"].__setitem__("byte_fallback", "yes"))
put("lstrip_null", lambda d: d["added_tokens"][1].__setitem__("lstrip", None))
put("strip_two_chars", lambda d: d["decoder"]["decoders"][3].__setitem__("content", "ab"))
put("merge_oov", lambda d: d["model"]["merges"].append(["b", "a"]))
put("merges_legacy", lambda d: d["model"].__setitem__("merges", ["#version: 0.2", "a b", "\u2581 ab"]))
put("sparse_id", lambda d: d["model"]["vocab"].__setitem__("far", 2147483640))
put("added_ids_ignored", lambda d: d["added_tokens"].append(tok(id=99999, content="<new>", special=False)))
put("unk_number", lambda d: d["model"].__setitem__("unk_token", 7))
PY
python3 - "$k" <<'PY'
import json, sys
cases = json.load(open("tests/data/tokenizers/llama3_style/expected.json"))["cases"]
for i, c in enumerate(cases):
    open(f"{sys.argv[1]}/text_{i:02d}", "wb").write(b"\x01" + c["text"].encode())
PY

# generation_config.json (fuzz_genconfig): the reference model's, and Qwen2's
# sampling defaults with keys that are not applied
cp tests/data/models/llama_text/generation_config.json "$c/fuzz_genconfig/llama_text.json"
printf '%s' '{"do_sample": true, "repetition_penalty": 1.05, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "eos_token_id": [151645, 151643], "max_length": 4096, "num_beams": 1, "bad_words_ids": [[1]]}' \
  >"$c/fuzz_genconfig/qwen2.json"

# GGUF (fuzz_gguf): the reader's test files (the model's cut to its first
# 8 KiB, the fuzzer's -max_len), and files written here: one with every
# metadata key the config and the tokenizer read (gguf_config.c,
# tokenizer_gguf.c) at the type llama.cpp reads it as; then, for each of
# those keys and each other value type, the smallest file the reader gets
# to that key in with the key at that type (the config stops at its first
# bad key); the floats not finite; a key twice; two tensors on one offset.
g=$c/fuzz_gguf
for f in tiny bad-dup tok-bad-bos tok-bad-types bad-model-q5k; do cp "tests/data/gguf/$f.gguf" "$g/"; done
head -c 8192 tests/data/gguf/llama-mixed.gguf >"$g/llama-mixed-head.gguf"
python3 - "$g" <<'PY'
import math, struct, sys
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}
NAMES = {U8: "u8", I8: "i8", U16: "u16", I16: "i16", U32: "u32", I32: "i32", F32: "f32", BOOL: "bool", STR: "string",
         ARR: "array", U64: "u64", I64: "i64", F64: "f64"}
def s(x): b = x.encode(); return struct.pack("<Q", len(b)) + b
def val(t, v):
    if t == STR: return s(str(v))
    if t == ARR: return struct.pack("<IQ", U32, 2) + struct.pack("<2I", 16, 16)
    if t == BOOL: return struct.pack("<?", bool(v))
    if t in (F32, F64): return struct.pack("<" + FMT[t], float(v))
    return struct.pack("<" + FMT[t], int(v))
def kv(k, t, v): return s(k) + struct.pack("<I", t) + val(t, v)
A = "llama."
# what a llama needs, then every other key read: (key, llama.cpp's type, value)
NEED = [("general.architecture", STR, "llama"), (A + "embedding_length", U32, 16), (A + "feed_forward_length", U32, 32),
        (A + "block_count", U32, 1), (A + "attention.head_count", U32, 2), (A + "context_length", U32, 16),
        (A + "attention.layer_norm_rms_epsilon", F32, 1e-5)]
MORE = [(A + "attention.head_count_kv", U32, 1), (A + "vocab_size", U32, 8), (A + "rope.dimension_count", U32, 8),
        (A + "attention.key_length", U32, 8), (A + "attention.value_length", U32, 8), (A + "expert_count", U32, 0),
        (A + "rope.freq_base", F32, 10000.0), (A + "rope.scaling.type", STR, "linear"),
        (A + "rope.scaling.factor", F32, 2.0), (A + "rope.scale_linear", F32, 2.0),
        (A + "rope.scaling.original_context_length", U32, 16), ("general.alignment", U32, 32),
        ("tokenizer.ggml.bos_token_id", U32, 1), ("tokenizer.ggml.eos_token_id", U32, 2)]
TOK = [("tokenizer.ggml.model", STR, "llama"), ("tokenizer.ggml.pre", STR, "default"),
       ("tokenizer.ggml.unknown_token_id", U32, 0), ("tokenizer.ggml.padding_token_id", U32, 2),
       ("tokenizer.ggml.add_bos_token", BOOL, 1), ("tokenizer.ggml.add_eos_token", BOOL, 0),
       ("tokenizer.ggml.add_space_prefix", BOOL, 1)]
TOKS = ["<unk>", "<s>", "</s>", "\u2581", "a", "b", "\u2581a", "ab"]
VOCAB = (s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARR, STR, len(TOKS)) + b"".join(s(x) for x in TOKS) +
         s("tokenizer.ggml.scores") + struct.pack("<IIQ", ARR, F32, len(TOKS)) + struct.pack("<8f", 0, 0, 0, -1, -2, -3, -4, -5) +
         s("tokenizer.ggml.token_type") + struct.pack("<IIQ", ARR, I32, len(TOKS)) + struct.pack("<8i", 2, 3, 3, 1, 1, 1, 1, 1))
def gguf(kvs, vocab=False, tensors=(), extra=b"", n_extra=0):
    body = b"".join(kv(*x) for x in kvs) + (VOCAB if vocab else b"") + extra
    for name, off in tensors: body += s(name) + struct.pack("<IQQIQ", 2, 16, 8, 0, off)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs) + 3 * vocab + n_extra) + body
    return head + b"\0" * (-len(head) % 32) + b"\0" * (512 if tensors else 0)
def write(name, data): open(f"{sys.argv[1]}/{name}", "wb").write(data)
write("config-valid.gguf", gguf(NEED + MORE + TOK, vocab=True, tensors=(("token_embd.weight", 0),)))
def other(t, v): return v if t == STR and isinstance(v, str) else 1
for k, kt, v in NEED + MORE:  # the config's keys: the others it needs, and this one at each other type
    for t in NAMES:
        if t != kt:
            write(f"key-{k}-{NAMES[t]}.gguf", gguf([x for x in NEED if x[0] != k] + [(k, t, other(t, v))]))
for k, kt, v in TOK[2:]:  # the tokenizer's scalars, beside a vocabulary
    for t in NAMES:
        if t != kt:
            write(f"key-{k}-{NAMES[t]}.gguf", gguf([TOK[0], (k, t, other(t, v))], vocab=True))
for k, kt, v in NEED + MORE:
    if kt == F32:
        for name, x in (("nan", math.nan), ("inf", math.inf), ("-inf", -math.inf)):
            write(f"key-{k}-{name}.gguf", gguf([y for y in NEED if y[0] != k] + [(k, F32, x)]))
write("dup-key.gguf", gguf(NEED, extra=kv(A + "block_count", U32, 40), n_extra=1))
write("overlap.gguf", gguf(NEED, tensors=(("token_embd.weight", 0), ("output.weight", 0))))
PY
du -sh "$g"
