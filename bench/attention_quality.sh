#!/usr/bin/env bash
# Quality of the self-attention variants at an equal budget (issue 14): each variant becomes the ENCODER
# self-attention of a recipe (decoder and cross-attention stay full), trained for the same number of updates
# with the same seed and data, the 4 checkpoints of its second half averaged (one every steps/8 updates), the
# test set translated and scored. Prints one table row per variant (updates, training minutes, source+target
# tokens/s, validation loss of the last weights, BLEU, chrF) and keeps the logs.
#
#   bash bench/attention_quality.sh multi30k [--steps 1500] [--variants full,local,sparse,...] [--out DIR]
#                                            [--set training.warmup_steps=400 ...]
#   bash bench/attention_quality.sh long     [--steps 600]  [--variants ...] [--out DIR] [--set KEY=VALUE ...]
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
sets=()
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --variants) variants=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --set) sets+=(--set "$2"); shift 2 ;;
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
    decode=()
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
    extra=(--set training.max_len=1024 --set training.valid_bleu=false --set training.early_stop_metric=loss)
    # Greedy and at most 1.5 x the source: an undertrained model's beam search runs to the length limit on
    # 600-piece inputs, which would cost more than the training.
    decode=(--beam-size 1 --max-length-factor 1.5)
    ;;
  *) echo "unknown task $task (multi30k or long)" >&2; exit 2 ;;
esac
echo "| encoder self-attention | updates | minutes | tokens/s | valid loss | BLEU | chrF2 |"
echo "|---|---|---|---|---|---|---|"
for v in ${variants//,/ }; do
  run="$out/$v"
  # A variant whose training finished in an earlier call is only translated and scored again.
  if ! grep -q "training done (max_steps): $steps steps" "$run.train.log" 2> /dev/null; then
    $B/parla-train --config $config --data "$out/data" --save-dir "$run" --overwrite --max-steps "$steps" \
      --set training.max_time=0 --set training.save_every=$((steps / 8)) --set training.keep_last=4 \
      --set training.valid_every="$steps" --set model.encoder_attention="$v" "${extra[@]}" "${sets[@]}" \
      2> "$run.train.log"
  fi
  # Training minutes from the trainer's own last line ("... tokens in 1h02m03s"): validation and saving included.
  minutes=$(grep -o 'tokens in [0-9hms.]*' "$run.train.log" | tail -1 | awk '{ t = $3; m = 0
    if (t ~ /h/) { split(t, a, "h"); m += a[1] * 60; t = a[2] }
    if (t ~ /m/) { split(t, a, "m"); m += a[1]; t = a[2] }
    sub("s", "", t); m += t / 60; printf "%.1f", m }')
  rate=$(grep -o '[0-9]* tok/s' "$run.train.log" | awk '{ s += $1; n++ } END { if (n) printf "%.0f", s / n }')
  $B/parla-train average --dir "$run" --last 4 -o "$run/average.pt" 2> "$run.average.log"
  $B/parla-translate -c "$run/config.json" -m "$run/average.pt" -i "$src" -o "$run/test.hyp" "${decode[@]}" 2> "$run.translate.log"
  bleu=$($B/parla-score-bleu "$ref" -i "$run/test.hyp" -m bleu -b 2> /dev/null)
  chrf=$($B/parla-score-bleu "$ref" -i "$run/test.hyp" -m chrf -b 2> /dev/null)
  # Label-smoothed validation loss (nats per target token) of the last weights: a finer signal than BLEU early on.
  vloss=$(sed -n "s/.*valid | step $steps | epoch [0-9]* | loss \([0-9.]*\).*/\1/p" "$run.train.log" | tail -1)
  echo "| $v | $steps | $minutes | $rate | $vloss | $bleu | $chrf |"
done
