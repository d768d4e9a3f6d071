#!/usr/bin/env bash
# Fills .device/ (ignored by git) with what tools/gpu-check.sh needs on a GPU machine without apt or network:
# Debian's packages for the build (../shared/device/fetch-debs.sh) and the small shared data its phases read
# (Multi30k en/de, newstest, the Europarl samples some tests read, the trained Multi30k model): about 45 MB,
# inside the 64 MiB that travels with a device call.
set -euo pipefail
cd "$(dirname "$0")/.."
S=../shared
# Beyond fetch-debs.sh's list: oneDNN (+ the OpenCL loader its CMake config asks for), cpp-httplib, libzip, yaml-cpp
# and the libraries they link (a Debian 12 prefix, so OpenSSL 3.0 and friends travel too), tcmalloc.
export EXTRA_DEBS="libdnnl-dev libdnnl2 ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers libcpp-httplib-dev
  libcpp-httplib0.11 libzip-dev libzip4 libyaml-cpp-dev libyaml-cpp0.7 libssl-dev libssl3 libbrotli-dev libbrotli1
  libbz2-dev libbz2-1.0 libgoogle-perftools-dev libtcmalloc-minimal4"
ls .device/debs/libdnnl-dev_*.deb >/dev/null 2>&1 ||
  bash $S/device/fetch-debs.sh .device/debs
rm -rf .device/shared && mkdir -p .device/shared/data/multi30k .device/shared/models
cp $S/data/multi30k/*.en $S/data/multi30k/*.de .device/shared/data/multi30k/
cp -r $S/data/newstest-de-en $S/data/europarl-v7-sample $S/data/europarl-raw-release-en-fr .device/shared/data/
cp -r $S/models/multi30k-en-de-small .device/shared/models/
grep -qx '/.device/' .git/info/exclude 2>/dev/null || echo '/.device/' >> .git/info/exclude
du -sh .device
