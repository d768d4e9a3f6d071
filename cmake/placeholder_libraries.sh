#!/bin/bash
# Builds empty stand-ins for the libraries that Debian's libtorch_cpu names (DT_NEEDED) but never calls, so that the
# dynamic loader finds them first (the executables' DT_RPATH points at OUT_DIR: cmake/PlaceholderLibraries.cmake)
# and does not load the real ones. Debian builds LibTorch without --as-needed, so libtorch_cpu names OpenCV, FFmpeg,
# LevelDB, LMDB, ZeroMQ, ... for Caffe2 operators that use none of them through this library: it imports no symbol
# from them, yet loading them and what they name is ~250 of a translating process's ~290 libraries, ~70 MB of its
# resident memory and half its start-up (docs/BENCHMARKS.md, "The libraries LibTorch names but never calls").
#
# A library becomes a placeholder only if libtorch_cpu imports none of the symbols it defines and no library that
# stays (the closure of EXE and of the ROOTS without the placeholders) names it. The result is then checked by
# starting EXE with every symbol bound at once (LD_BIND_NOW=1): a symbol that some library still needed from a
# placeholder would stop it there, and then no placeholder is kept.
#
# usage: placeholder_libraries.sh OUT_DIR CXX EXE [ROOT...]   (ROOTs: libraries EXE loads later with dlopen)
set -euo pipefail
out=$1 cxx=$2 exe=$3
shift 3
roots=("$@")

rm -rf "$out" "$out.tmp"  # ldd must see the real libraries, not the last build's placeholders
mkdir -p "$out.tmp"

declare -A path_of
resolve() {  # records soname -> path for the closure of each argument (as the loader resolves it)
  local f line name p
  for f in "$@"; do
    while read -r line; do
      if [[ $line =~ ^([^[:space:]]+)\ =\>\ (/[^[:space:]]+) ]]; then
        name=${BASH_REMATCH[1]} p=${BASH_REMATCH[2]}
        path_of[$name]=$p
      fi
    done < <(ldd "$f" 2>/dev/null)
  done
}
needed() { readelf -d "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }
defined() { nm -D --defined-only "$1" 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | sort -u; }

resolve "$exe" "${roots[@]}"
torch_cpu=""
for name in "${!path_of[@]}"; do
  [[ $name == libtorch_cpu.so* ]] && torch_cpu=${path_of[$name]}
done
if [[ -z $torch_cpu ]]; then
  echo "placeholder_libraries: $exe does not load libtorch_cpu; no placeholders" >&2
  mv "$out.tmp" "$out"
  exit 0
fi

imports=$(mktemp)
trap 'rm -f "$imports"' EXIT
nm -D --undefined-only "$torch_cpu" | awk '{print $NF}' | sed 's/@.*//' | sort -u > "$imports"

# Candidates: what libtorch_cpu names and imports nothing from. The C and C++ runtimes never are, whatever nm says.
declare -A placeholder
for name in $(needed "$torch_cpu"); do
  p=${path_of[$name]:-}
  [[ -z $p ]] && continue
  case $name in
    libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++.so* | libgcc_s.so* | \
      libgomp.so*) continue ;;
  esac
  if [[ -z $(defined "$p" | comm -12 - "$imports" | head -1) ]]; then placeholder[$name]=1; fi
done

# Drop any candidate that a library staying in the process names; repeat until none does.
while :; do
  declare -A kept=()
  stack=($(needed "$exe") "${roots[@]}")
  while ((${#stack[@]})); do
    n=${stack[-1]}
    unset 'stack[-1]'
    if [[ $n == /* ]]; then p=$n; else p=${path_of[$n]:-}; fi
    [[ -z $p || -n ${placeholder[$n]:-} || -n ${kept[$p]:-} ]] && continue
    kept[$p]=1
    stack+=($(needed "$p"))
  done
  dropped=0
  for p in "${!kept[@]}"; do
    [[ $p == "$torch_cpu" ]] && continue
    for n in $(needed "$p"); do
      if [[ -n ${placeholder[$n]:-} ]]; then unset "placeholder[$n]"; dropped=1; fi
    done
  done
  ((dropped)) || break
done

empty=$out.tmp/empty.cpp
: > "$empty"
for name in "${!placeholder[@]}"; do
  "$cxx" -shared -nostdlib -fPIC -Wl,-soname,"$name" -o "$out.tmp/$name" "$empty"
done
rm -f "$empty"
mv "$out.tmp" "$out"

# Every symbol bound at start-up: a library that needed one from a placeholder fails here, not at its first call.
if ! log=$(LD_BIND_NOW=1 PARLA_NO_REEXEC=1 "$exe" --version 2>&1 >/dev/null); then
  echo "placeholder_libraries: $exe does not start with the placeholders, so none are used:" >&2
  echo "$log" >&2
  rm -rf "$out"
  mkdir -p "$out"
  exit 0
fi
echo "placeholder_libraries: ${#placeholder[@]} libraries LibTorch names but never calls are left unloaded:" \
     "$(ls "$out" | sort | tr '\n' ' ')"
