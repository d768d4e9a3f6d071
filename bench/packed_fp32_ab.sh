#!/usr/bin/env bash
# parla-translate with LibTorch's fp32 products (runtime.packed_fp32 off) against the packed ones (on), alternating,
# per thread layout; prints target tokens/s min / median / max of each and whether the outputs were identical.
#   bash bench/packed_fp32_ab.sh [BIN] [CHECKPOINT] [INPUT] [ROUNDS]
# Defaults: build-unity/bin, the shared Multi30k model, test_2016_flickr.en (batch 1 on its first 200 lines), 3.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-build-unity/bin}
MODEL=${2:-../shared/models/multi30k-en-de-small/average.pt}
INPUT=${3:-../shared/data/multi30k/test_2016_flickr.en}
ROUNDS=${4:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -200 "$INPUT" > "$work/b1.txt"
# name input beam batch threads workers
settings=("b5-batch1-1x1 $work/b1.txt 5 1 1 1" "b5-batch1-1x2 $work/b1.txt 5 1 1 2" "b5-batch1-2x1 $work/b1.txt 5 1 2 1"
          "b5-batch64-1x1 $INPUT 5 64 1 1" "b5-batch64-1x2 $INPUT 5 64 1 2" "b5-batch64-2x1 $INPUT 5 64 2 1"
          "greedy-batch64-1x2 $INPUT 1 64 1 2" "greedy-batch64-2x1 $INPUT 1 64 2 1")
for ((r = 1; r <= ROUNDS; r++)); do
  for s in "${settings[@]}"; do
    read -r name in beam batch threads workers <<< "$s"
    for v in 0 1; do
      choice=off; [ "$v" = 1 ] && choice=on
      rate=$("$BIN/parla-translate" -m "$MODEL" -i "$in" -o "$work/$name.$v" -b "$beam" \
             --batch-size "$batch" --threads "$threads" --inter-threads "$workers" \
             --set runtime.packed_fp32=$choice 2>&1 |
             grep -o '[0-9]* target tokens/s' | cut -d' ' -f1)
      echo "$name $v $rate" >> "$work/rates"
    done
    cmp -s "$work/$name.0" "$work/$name.1" && echo "$name same" >> "$work/rates" || echo "$name differ" >> "$work/rates"
  done
done
python3 bench/ab_summary.py "$work/rates" "$ROUNDS" 0 "LibTorch products" 1 packed
