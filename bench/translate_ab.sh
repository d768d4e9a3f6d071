#!/usr/bin/env bash
# Two builds of parla-translate against each other (before/after a change), alternating, per precision and thread
# layout; prints target tokens/s min / median / max of each, the ratio of medians and whether outputs were identical.
#   bash bench/translate_ab.sh BIN_BEFORE BIN_AFTER [ROUNDS] [CHECKPOINT] [INPUT]
# e.g. bash bench/translate_ab.sh ../cleanclone/build/bin build-unity/bin 3
# Defaults: 3 rounds, the shared Multi30k model, test_2016_flickr.en (batch 1 on its first 200 lines).
# SETTINGS overrides the list: "name precision beam batch threads workers;..." (input: b1 for batch 1, else all).
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n 2,7p "$0" >&2; exit 2; }
A=$1 B=$2
ROUNDS=${3:-3}
MODEL=${4:-../shared/models/multi30k-en-de-small/average.pt}
INPUT=${5:-../shared/data/multi30k/test_2016_flickr.en}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -200 "$INPUT" > "$work/b1.txt"
default="int8-b5-batch64-2x1 int8 5 64 2 1;int8-b5-batch1-2x1 int8 5 1 2 1;int8-greedy64-2x1 int8 1 64 2 1;\
int8-b5-batch64-1x2 int8 5 64 1 2;int8-b5-batch1-1x2 int8 5 1 1 2;int8-greedy64-1x2 int8 1 64 1 2;\
fp32-b5-batch64-2x1 fp32 5 64 2 1;fp32-b5-batch1-2x1 fp32 5 1 2 1;fp32-greedy64-2x1 fp32 1 64 2 1"
IFS=';' read -r -a settings <<< "${SETTINGS:-$default}"
for ((r = 1; r <= ROUNDS; r++)); do
  for s in "${settings[@]}"; do
    read -r name prec beam batch threads workers <<< "$s"
    in=$INPUT
    [ "$batch" = 1 ] && in=$work/b1.txt
    for v in A B; do
      bin=$A
      [ $v = B ] && bin=$B
      rate=$("$bin/parla-translate" -m "$MODEL" -i "$in" -o "$work/$name.$v" -b "$beam" --batch-size "$batch" \
             --length-penalty 0 --precision "$prec" --threads "$threads" --inter-threads "$workers" 2>&1 |
             grep -o '[0-9]* target tokens/s' | cut -d' ' -f1)
      echo "$name $v $rate" >> "$work/rates"
    done
    cmp -s "$work/$name.A" "$work/$name.B" && echo "$name same" >> "$work/rates" || echo "$name differ" >> "$work/rates"
  done
done
echo "A: $A  B: $B"
python3 bench/ab_summary.py "$work/rates" "$ROUNDS" A A B B
