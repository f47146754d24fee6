#!/usr/bin/env bash
# demo.sh — set up, build and run omptensor's main job on its built-in default.
#
# On a machine with an NVIDIA GPU it builds the nvptx preset (with CUDA 11.8's
# ptxas, see the README's GPU notes); elsewhere the offload-host preset, whose
# emulated device really copies data, so the offloading is real either way.
# Extra arguments go to `omptensor demo` (try --help).
set -euo pipefail
cd "$(dirname "$0")/.."

preset=offload-host
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then preset=nvptx; fi
if [ "$preset" = nvptx ]; then scripts/setup.sh --gpu; else scripts/setup.sh; fi
cmake --preset "$preset" >/dev/null
# omptensor_installable: the command and both libraries, what `cmake --install
# build/$preset` copies (the command alone left the install without libomptensor.a)
cmake --build "build/$preset" -j"$(nproc 2>/dev/null || echo 2)" --target omptensor_installable
if build/"$preset"/omptensor --help | grep -q '^  demo '; then
  exec build/"$preset"/omptensor demo "$@"
fi
exec build/"$preset"/omptensor info
