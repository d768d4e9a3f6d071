#!/usr/bin/env bash
# Start-up of parla-translate on a checkpoint, old loader against new: wall time and peak resident memory of a
# whole run that translates one line, so loading dominates. Three configurations, rounds alternating:
#   old     an earlier parla-translate (LibTorch's TorchScript loader) on the format-1 checkpoint given
#   strict  this parla-translate on the same file (the strict reader: zip, pickle, storages copied out)
#   mapped  this parla-translate on its format-2 copy (safetensors, mapped), made here with parla-train upgrade
# Prints min/median/max per configuration. The old binary is optional (build an earlier commit for it, e.g.
# `git worktree add /tmp/old d923015 && cmake -S /tmp/old -B /tmp/old/build -G Ninja && cmake --build
# /tmp/old/build --target parla-translate`).
#   bash bench/checkpoint_load.sh CHECKPOINT [OLD_PARLA_TRANSLATE] [ROUNDS=7]
set -euo pipefail
cd "$(dirname "$0")/.."
ckpt=$1
old=${2:-}
rounds=${3:-7}
bin=${BUILD_DIR:-build}/bin
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "A man is riding a bike." > "$tmp/in.txt"
PARLA_NO_REEXEC=0 "$bin/parla-train" -q upgrade -o "$tmp/st.pt" "$ckpt"
configs=(strict mapped)
[ -n "$old" ] && configs=(old "${configs[@]}")
declare -A wall rss
for ((r = 0; r < rounds; ++r)); do
  for c in "${configs[@]}"; do
    case $c in
      old) exe=$old; file=$ckpt ;;
      strict) exe=$bin/parla-translate; file=$ckpt ;;
      mapped) exe=$bin/parla-translate; file=$tmp/st.pt ;;
    esac
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$exe" -q -m "$file" -i "$tmp/in.txt" --threads 1 > "$tmp/out.$c"
    read -r w m < "$tmp/time"
    wall[$c]+="$w "
    rss[$c]+="$m "
  done
done
stats() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {printf "%s / %s / %s", v[1], v[int((NR+1)/2)], v[NR]}'; }
printf "%-8s %-24s %-30s\n" config "wall s (min/median/max)" "peak RSS MiB (min/median/max)"
for c in "${configs[@]}"; do
  w=$(echo "${wall[$c]}" | stats)
  m=$(echo "${rss[$c]}" | tr ' ' '\n' | grep . | awk '{printf "%.0f\n", $1 / 1024}' | tr '\n' ' ' | stats)
  printf "%-8s %-24s %-30s\n" "$c" "$w" "$m"
done
for c in "${configs[@]}"; do cmp -s "$tmp/out.${configs[0]}" "$tmp/out.$c" || echo "output of $c differs from ${configs[0]}"; done
echo "checkpoint: $ckpt ($(du -m "$ckpt" | cut -f1) MiB); rounds: $rounds; CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
