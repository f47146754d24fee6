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
mkdir -p "$c"/{fuzz_safetensors,fuzz_st_index,fuzz_hfconfig,fuzz_yaml_settings,fuzz_size,fuzz_npy}

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
du -sh "$c"
