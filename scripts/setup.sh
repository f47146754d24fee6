#!/usr/bin/env bash
# setup.sh [--gpu] [--amdgcn] — install what omptensor needs on Debian 12 (bookworm), as root.
#
#   scripts/setup.sh          clang-19 + OpenMP offload runtime, cmake, ninja,
#                             cmocka, jansson (JSON), libyaml, PCRE2 (tokenizer regexes), utf8proc
#                             (tokenizer NFC/NFKC), librsvg (trace plot -o FILE.png; headers at build
#                             time); make and binutils
#                             (readelf) for scripts/check_install.sh; Open MPI
#                             (libopenmpi-dev, openmpi-bin) for the OT_MPI=ON
#                             build that scripts/test.sh makes of offload-host
#   scripts/setup.sh --gpu    also fetch CUDA 11.8's ptxas, nvlink, nvdisasm and libdevice
#                             into toolchain/cuda-11.8 (see docs/gpu.md:
#                             LLVM 19 cannot load cubins from CUDA 13's ptxas)
#   scripts/setup.sh --amdgcn also install ROCm's device libraries (Debian
#                             rocm-device-libs 5.2.3) and make toolchain/amdgcn-bitcode:
#                             links to them plus oclc_isa_version_942.bc, which
#                             5.2.3 predates (see docs/gpu.md, AMD GPUs)
#
# Idempotent: packages already installed and a toolchain folder already
# complete are left alone, so a second run takes a second or two.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
want_gpu=0 want_amdgcn=0
for a in "$@"; do
  case "$a" in
    --gpu) want_gpu=1 ;;
    --amdgcn) want_amdgcn=1 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "setup.sh: unknown option '$a' (use --gpu, --amdgcn or --help)" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup.sh: run as root (or install sudo)" >&2; exit 1; }
  SUDO=sudo
fi

pkgs=(clang-19 clang-tools-19 llvm-19 libomp-19-dev libclang-rt-19-dev lld-19 cmake ninja-build pkg-config
      libcmocka-dev libjansson-dev libyaml-dev libpcre2-dev librsvg2-dev libutf8proc-dev make binutils
      libopenmpi-dev openmpi-bin)
[ "$want_amdgcn" -eq 0 ] || pkgs+=(rocm-device-libs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "setup.sh: Debian packages already installed"
fi

# --- ROCm device libraries for the amdgcn build ---
if [ "$want_amdgcn" -eq 1 ]; then
  # clang takes one folder of device libraries (--rocm-device-lib-path):
  # Debian's, linked file by file, plus the ISA-version file of gfx942.
  # Debian's 5.2.3 stops at gfx940; that file defines only
  # __oclc_ISA_version, and ocml/ockl 5.2.3 compare it with nothing between
  # 9400 and 9402 (docs/gpu.md), so gfx940's file with 9402 is what a
  # gfx942 one would do.
  deb=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode
  amd="$here/toolchain/amdgcn-bitcode"
  if [ -f "$amd/ocml.bc" ] && [ -f "$amd/oclc_isa_version_942.bc" ]; then
    echo "setup.sh: $amd already complete"
  else
    mkdir -p "$amd"
    for f in "$deb"/*.bc; do ln -sf "$f" "$amd/"; done
    llvm-dis-19 "$deb/oclc_isa_version_940.bc" -o - |
      sed 's/constant i32 9400,/constant i32 9402,/; s/oclc_isa_version_940/oclc_isa_version_942/' |
      llvm-as-19 -o "$amd/oclc_isa_version_942.bc"
    llvm-dis-19 "$amd/oclc_isa_version_942.bc" -o - | grep -q 'constant i32 9402,' ||
      { echo "setup.sh: could not make $amd/oclc_isa_version_942.bc" >&2; exit 1; }
    echo "setup.sh: ROCm device libraries (rocm-device-libs $(dpkg-query -W -f='${Version}' rocm-device-libs)) in $amd"
  fi
fi

[ "$want_gpu" -eq 1 ] || exit 0

# --- CUDA 11.8 device tools from Debian non-free, without its dependencies ---
tc="$here/toolchain/cuda-11.8"
if [ -x "$tc/bin/ptxas" ] && [ -x "$tc/bin/nvlink" ] && [ -x "$tc/bin/nvdisasm" ] \
   && [ -f "$tc/nvvm/libdevice/libdevice.10.bc" ] && [ -f "$tc/include/cuda.h" ]; then
  echo "setup.sh: $tc already complete"
  exit 0
fi
src=/etc/apt/sources.list.d/omptensor-non-free.sources
if [ ! -f "$src" ]; then
  # Same mirror and keyring as the main entry; only the non-free component.
  uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=http://deb.debian.org/debian
  printf 'Types: deb\nURIs: %s\nSuites: bookworm\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" | $SUDO tee "$src" >/dev/null
  $SUDO apt-get update -qq
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
( cd "$work" && apt-get download -qq -o APT::Sandbox::User=root nvidia-cuda-toolkit )
deb=$(ls "$work"/nvidia-cuda-toolkit_*.deb)
dpkg -x "$deb" "$work/x"
mkdir -p "$tc/bin" "$tc/nvvm/libdevice" "$tc/include"
# nvdisasm: SASS on the CPU machine (scripts/step_sass.sh); it reads the
# cubins of this ptxas, not CUDA 13's
cp "$work/x/usr/bin/ptxas" "$work/x/usr/bin/nvlink" "$work/x/usr/bin/nvdisasm" "$tc/bin/"
cp "$work/x/usr/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc" "$tc/nvvm/libdevice/"
# clang reads the CUDA version from include/cuda.h; without it clang emits a
# PTX version that ptxas 11.8 rejects.
echo '#define CUDA_VERSION 11080' > "$tc/include/cuda.h"
echo "setup.sh: CUDA 11.8 ptxas/nvlink/nvdisasm/libdevice in $tc ($(basename "$deb"))"
