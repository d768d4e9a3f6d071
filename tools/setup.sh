#!/usr/bin/env bash
# Installs parla's build and runtime dependencies from Debian's packages. Idempotent: packages already
# present are skipped, so a second run costs one dpkg query.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ccache
  libtorch-dev libopenblas0-pthread          # LibTorch; OpenBLAS is 40x faster than reference BLAS (PLATFORM.md)
  libsentencepiece-dev sentencepiece libprotobuf-dev
  libcli11-dev libspdlog-dev nlohmann-json3-dev catch2
  libgloo-dev                                # torch.distributed's Gloo backend headers
  zlib1g-dev
  libzip-dev                                 # zip archives: reading legacy checkpoints and .npz files without running their code
  libyaml-cpp-dev                            # Marian's YAML (decoder.yml, vocab.yml, model options) for parla-convert
  libboost-dev                               # parla-serve's HTTP/1.1 server: Boost.Beast over Asio (header-only)
  libcpp-httplib-dev                         # the HTTP client of parla-serve's tests and bench_serve
  libdnnl-dev                                # oneDNN: the int8 products of decoding.precision int8
  libgoogle-perftools-dev                    # tcmalloc: the heap of the LibTorch executables (cmake/HeapAllocator.cmake)
  ocl-icd-opencl-dev                         # only a Recommends of libdnnl-dev, but its CMake config requires OpenCL
  clang libclang-rt-14-dev                   # libFuzzer for the bounded fuzz test of parla-translate's input path
  python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed" >&2
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
