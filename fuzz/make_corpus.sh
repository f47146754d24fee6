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
