#!/usr/bin/env bash
# Quality of the self-attention variants at an equal budget (issue 14): each variant becomes the ENCODER
# self-attention of a recipe (decoder and cross-attention stay full), trained for the same number of updates
# with the same seed and data, its last checkpoints averaged, the test set translated and scored. Prints one
# table row per variant (updates, training minutes, source+target tokens/s, BLEU, chrF) and keeps the logs.
#
#   bash bench/attention_quality.sh multi30k [--steps 1500] [--variants full,local,sparse,...] [--out DIR]
#   bash bench/attention_quality.sh long     [--steps 600]  [--variants ...] [--out DIR]
#
# multi30k: configs/multi30k-en-de-small.json on ../shared/data/multi30k (test_2016_flickr).
# long:     ../shared/data/europarl-comtrans-de-en with runs of contiguous lines joined into inputs of 400+ words
#           (tools/concat-lines.py; 550-650 pieces each), its last 100 runs held out (50 valid, 50 test),
#           the same small model with training.max_len 1024 and no length cleaning.
# Run it on an otherwise idle machine: the tokens/s column is a speed measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
task=${1:?usage: bench/attention_quality.sh multi30k|long [--steps N] [--variants a,b] [--out DIR]}
shift
steps=""
variants="full,local,sparse,linear,performer,routing,nystrom"
out=""
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
B=${BUILD_DIR:-build}/bin
S=../shared/data
config=configs/multi30k-en-de-small.json
case $task in
  multi30k)
    steps=${steps:-1500}; out=${out:-out/attention-quality-multi30k}
    mkdir -p "$out"
    [ -f "$out/data/meta.json" ] || $B/parla-preprocess --config $config --prefix $S/multi30k/train \
      --valid-prefix $S/multi30k/val --test-prefix $S/multi30k/test_2016_flickr --src-lang en --tgt-lang de \
      -o "$out/data" 2> "$out/preprocess.log"
    src=$S/multi30k/test_2016_flickr.en; ref=$S/multi30k/test_2016_flickr.de
    extra=()
    ;;
  long)
    steps=${steps:-600}; out=${out:-out/attention-quality-long}
    mkdir -p "$out"
    if [ ! -f "$out/data/meta.json" ]; then
      python3 tools/concat-lines.py --prefix $S/europarl-comtrans-de-en/comtrans --src de --tgt en \
        --min-words 400 --out "$out/long/long"
      $B/parla-preprocess --config $config --prefix "$out/long/long" --src-lang de --tgt-lang en \
        --set data.held_out=last --set data.valid_size=50 --set data.test_size=50 --set data.clean.max_tokens=0 \
        --set data.clean.max_length_ratio=0 -o "$out/data" 2> "$out/preprocess.log"
    fi
    src=$out/data/test.de; ref=$out/data/test.en
    extra=(--set training.max_len=1024 --set training.valid_bleu=false)
    ;;
  *) echo "unknown task $task (multi30k or long)" >&2; exit 2 ;;
esac
echo "| encoder self-attention | updates | minutes | tokens/s | BLEU | chrF2 |"
echo "|---|---|---|---|---|---|"
for v in ${variants//,/ }; do
  run="$out/$v"
  start=$(date +%s)
  $B/parla-train --config $config --data "$out/data" --save-dir "$run" --overwrite --max-steps "$steps" \
    --set training.max_time=0 --set training.save_every=$((steps / 4)) --set training.keep_last=4 \
    --set training.valid_every="$steps" --set model.encoder_attention="$v" "${extra[@]}" 2> "$run.train.log"
  minutes=$(awk -v s="$start" -v e="$(date +%s)" 'BEGIN { printf "%.1f", (e - s) / 60 }')
  rate=$(grep -o '[0-9]* tok/s' "$run.train.log" | awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }')
  $B/parla-train average --dir "$run" --last 4 -o "$run/average.pt" 2> "$run.average.log"
  $B/parla-translate -c "$run/config.json" -m "$run/average.pt" -i "$src" -o "$run/test.hyp" 2> "$run.translate.log"
  bleu=$($B/parla-score-bleu "$ref" -i "$run/test.hyp" -m bleu -b 2> /dev/null)
  chrf=$($B/parla-score-bleu "$ref" -i "$run/test.hyp" -m chrf -b 2> /dev/null)
  echo "| $v | $steps | $minutes | $rate | $bleu | $chrf |"
done
