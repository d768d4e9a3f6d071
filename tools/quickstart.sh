#!/usr/bin/env bash
# parla's first command: on a fresh Debian machine, install the dependencies, build, and run the whole job
# (corpus -> parla-preprocess -> parla-train -> parla-translate on held-out sentences -> parla-score-bleu).
#
#   bash tools/quickstart.sh                                  built-in synthetic toy corpus (tools/toy-corpus.py)
#   bash tools/quickstart.sh --data corpus/europarl-v7.de-en --src de --tgt en --config configs/europarl-de-en-base.json
#
# Results go to out/quickstart/ (gitignored): corpus/, data/ (preprocessed), model/ (checkpoints), logs/,
# test.hyp.<tgt> and bleu.txt. Run `bash tools/quickstart.sh --help` for every option.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  cat <<EOF
Usage: bash tools/quickstart.sh [options]

Runs setup, build, preprocess, train, translate and BLEU scoring end to end and prints the test BLEU,
a few source/reference/output triples and where the model and logs are.

Data (default: a synthetic toy corpus, see tools/toy-corpus.py):
  --data PREFIX        use the real parallel corpus PREFIX.SRC / PREFIX.TGT instead (e.g. Europarl from
                       tools/get-europarl.sh); the test set is split off by parla-preprocess
  --src LANG           source language suffix (required with --data; toy corpus: xx)
  --tgt LANG           target language suffix (required with --data; toy corpus: yy)
  --train-size N       toy corpus training pairs (default: 20000)
  --test-size N        toy corpus held-out test pairs (default: 500; validation pairs: the same)
  --seed N             toy corpus seed, i.e. which sentences are drawn (default: 1)

Pipeline:
  --config FILE        parla config for every step (default: configs/quickstart.json)
  --set KEY=VALUE      config override passed to parla-preprocess, parla-train and parla-translate
                       (repeatable), e.g. --set training.max_steps=500
  --out DIR            output folder (default: out/quickstart); an earlier quickstart's is replaced
  --build-dir DIR      CMake build folder (default: build)
  --bin-dir DIR        use the parla-* executables in DIR and skip the build (default: BUILD_DIR/bin)
  --jobs N             build jobs (default: nproc)
  --no-setup           do not run tools/setup.sh (the Debian packages are already installed)
  --no-build           do not configure or build (the executables already exist)
  --triples N          source/reference/output triples to print (default: 5)
  -h, --help           show this help
EOF
}

log() { echo "quickstart: $*" >&2; }
die() { echo "quickstart: error: $*" >&2; exit 2; }

DATA="" SRC="" TGT="" TRAIN_SIZE=20000 TEST_SIZE=500 SEED=1
CONFIG="$ROOT/configs/quickstart.json" OUT="$ROOT/out/quickstart" BUILD_DIR="$ROOT/build" BIN_DIR=""
JOBS=$(nproc 2>/dev/null || echo 2) SETUP=1 BUILD=1 TRIPLES=5
SETS=()

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }
is_count() { [[ "$2" =~ ^[0-9]+$ ]] || die "$1 must be a non-negative integer, got '$2'"; }

while [ $# -gt 0 ]; do
  case "$1" in
    --data) need_value "$@"; DATA=$2; shift 2 ;;
    --src) need_value "$@"; SRC=$2; shift 2 ;;
    --tgt) need_value "$@"; TGT=$2; shift 2 ;;
    --train-size) need_value "$@"; is_count "$1" "$2"; TRAIN_SIZE=$2; shift 2 ;;
    --test-size) need_value "$@"; is_count "$1" "$2"; TEST_SIZE=$2; shift 2 ;;
    --seed) need_value "$@"; is_count "$1" "$2"; SEED=$2; shift 2 ;;
    --config) need_value "$@"; CONFIG=$2; shift 2 ;;
    --set) need_value "$@"; [[ "$2" == *=* ]] || die "--set expects KEY=VALUE, got '$2'"; SETS+=(--set "$2"); shift 2 ;;
    --out) need_value "$@"; OUT=$2; shift 2 ;;
    --build-dir) need_value "$@"; BUILD_DIR=$2; shift 2 ;;
    --bin-dir) need_value "$@"; BIN_DIR=$2; BUILD=0; shift 2 ;;
    --jobs) need_value "$@"; is_count "$1" "$2"; JOBS=$2; shift 2 ;;
    --no-setup) SETUP=0; shift ;;
    --no-build) BUILD=0; shift ;;
    --triples) need_value "$@"; is_count "$1" "$2"; TRIPLES=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

# Absolute paths: the steps below run from different folders.
abspath() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
CONFIG=$(abspath "$CONFIG") OUT=$(abspath "$OUT") BUILD_DIR=$(abspath "$BUILD_DIR")
[ -n "$BIN_DIR" ] && BIN_DIR=$(abspath "$BIN_DIR")
[ -z "$BIN_DIR" ] && BIN_DIR="$BUILD_DIR/bin"
[ -f "$CONFIG" ] || die "config file '$CONFIG' does not exist"

if [ -n "$DATA" ]; then
  [ -n "$SRC" ] && [ -n "$TGT" ] || die "--data needs --src and --tgt (e.g. --data europarl-v7.de-en --src de --tgt en)"
  [ "$SRC" != "$TGT" ] || die "--src and --tgt must differ"
  DATA=$(abspath "$DATA")
  for lang in "$SRC" "$TGT"; do
    [ -f "$DATA.$lang" ] || [ -f "$DATA.$lang.gz" ] || die "corpus file '$DATA.$lang' does not exist"
  done
else
  [ -z "$SRC" ] && SRC=xx
  [ -z "$TGT" ] && TGT=yy
  [ "$SRC" != "$TGT" ] || die "--src and --tgt must differ"
  [ "$TRAIN_SIZE" -gt 0 ] && [ "$TEST_SIZE" -gt 0 ] || die "--train-size and --test-size must be positive"
fi

START=$(date +%s)
elapsed() { echo "$(( $(date +%s) - START ))s"; }

# 1. Dependencies (Debian packages; needs root or sudo the first time).
if [ "$SETUP" = 1 ]; then
  log "[1/7] installing dependencies (tools/setup.sh)"
  bash "$ROOT/tools/setup.sh"
fi

# 2. Build only the four executables (the tests and benchmarks are not needed to run the pipeline).
APPS=(parla-preprocess parla-train parla-translate parla-score-bleu)
if [ "$BUILD" = 1 ]; then
  log "[2/7] building ${APPS[*]} in $BUILD_DIR (-j $JOBS)"
  # A unity build, as tools/test.sh does: about half the time of a fresh build (docs/BENCHMARKS.md).
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_UNITY_BUILD="${PARLA_UNITY:-ON}" >&2
  targets=("${APPS[@]}")
  # The SentencePiece module the executables load at run time (lib/CMakeLists.txt), when the build has one.
  if cmake --build "$BUILD_DIR" --target help 2>/dev/null | grep -q '^parla_sentencepiece'; then
    targets+=(parla_sentencepiece)
  fi
  cmake --build "$BUILD_DIR" -j "$JOBS" --target "${targets[@]}" >&2
fi
for app in "${APPS[@]}"; do
  [ -x "$BIN_DIR/$app" ] || die "$BIN_DIR/$app is missing (build it, or pass --bin-dir)"
done

# Output folder: an earlier quickstart's is replaced as a whole, so that none of its results is mistaken for
# this run's; any other non-empty folder is left alone.
if [ -d "$OUT" ] && [ -n "$(ls -A "$OUT")" ]; then
  [ -f "$OUT/.parla-quickstart" ] || die "'$OUT' exists and was not made by the quickstart; pick another --out"
  rm -rf "$OUT"
fi
mkdir -p "$OUT/logs"
touch "$OUT/.parla-quickstart"

# Runs one step with its stderr (the logs) on the terminal and in logs/NAME.log, its stdout unchanged; on
# failure, exits with the step's code and says which log to read.
step() {
  local name=$1; shift
  set +e
  { "$@" 2>&1 1>&3 3>&- | tee "$OUT/logs/$name.log" >&2; } 3>&1
  local status=${PIPESTATUS[0]}
  set -e
  if [ "$status" -ne 0 ]; then
    echo "quickstart: error: $name failed (exit $status); see $OUT/logs/$name.log" >&2
    exit "$status"
  fi
}

# 3. The corpus.
if [ -z "$DATA" ]; then
  log "[3/7] generating the synthetic toy corpus ($TRAIN_SIZE train, $TEST_SIZE valid, $TEST_SIZE test pairs, seed $SEED)"
  step corpus python3 "$ROOT/tools/toy-corpus.py" --out-dir "$OUT/corpus" --train "$TRAIN_SIZE" \
    --valid "$TEST_SIZE" --test "$TEST_SIZE" --seed "$SEED" --src-lang "$SRC" --tgt-lang "$TGT"
  PREFIX="$OUT/corpus/train"
  # Held-out sets come from the generator (never seen in train), not from a split of the training corpus.
  DATA_SETS=(--valid-prefix "$OUT/corpus/valid" --test-prefix "$OUT/corpus/test")
  TEST_SRC="$OUT/corpus/test.$SRC" TEST_REF="$OUT/corpus/test.$TGT"
else
  log "[3/7] using the corpus $DATA.{$SRC,$TGT}"
  PREFIX="$DATA"
  DATA_SETS=()
  # parla-preprocess splits a seeded test set off the corpus (data.test_size) and writes it as raw text.
  TEST_SRC="$OUT/data/test.$SRC" TEST_REF="$OUT/data/test.$TGT"
fi

# 4. Preprocess: clean, split, train SentencePiece, binarize.
log "[4/7] parla-preprocess -> $OUT/data"
step preprocess "$BIN_DIR/parla-preprocess" --config "$CONFIG" --prefix "$PREFIX" --src-lang "$SRC" \
  --tgt-lang "$TGT" -o "$OUT/data" "${DATA_SETS[@]}" "${SETS[@]}"
[ -f "$TEST_SRC" ] && [ -f "$TEST_REF" ] || die "the test set $TEST_SRC / $TEST_REF was not written"

# 5. Train.
log "[5/7] parla-train -> $OUT/model"
step train "$BIN_DIR/parla-train" --config "$CONFIG" --data "$OUT/data" --save-dir "$OUT/model" "${SETS[@]}"
CKPT=""
for name in checkpoint_best.pt checkpoint_last.pt; do
  if [ -f "$OUT/model/$name" ]; then CKPT="$OUT/model/$name"; break; fi
done
[ -n "$CKPT" ] || die "parla-train wrote no checkpoint in $OUT/model"

# 6. Translate the held-out test sentences.
HYP="$OUT/test.hyp.$TGT"
log "[6/7] parla-translate $(basename "$CKPT") on $(wc -l < "$TEST_SRC") test sentences -> $HYP"
step translate "$BIN_DIR/parla-translate" --config "$CONFIG" -m "$CKPT" -i "$TEST_SRC" -o "$HYP" "${SETS[@]}"

# 7. Score.
log "[7/7] parla-score-bleu"
step score-bleu "$BIN_DIR/parla-score-bleu" "$TEST_REF" -i "$HYP" -f text > "$OUT/bleu.txt"
BLEU=$(grep -oE 'BLEU[^=]*= *[0-9.]+' "$OUT/bleu.txt" | head -1 | grep -oE '[0-9.]+$' || true)
[ -n "$BLEU" ] || die "no BLEU score in $OUT/bleu.txt"

# Results on stdout.
echo
echo "== parla quickstart: $SRC -> $TGT, $(wc -l < "$TEST_SRC") held-out test sentences, $(elapsed) =="
echo "BLEU = $BLEU"
echo "$(head -1 "$OUT/bleu.txt")"
echo
if [ "$TRIPLES" -gt 0 ]; then
  echo "Examples (source / reference / output):"
  # head on each input, not on paste's output: under pipefail, paste killed by SIGPIPE would fail the run.
  paste -d '\t' <(head -n "$TRIPLES" "$TEST_SRC") <(head -n "$TRIPLES" "$TEST_REF") <(head -n "$TRIPLES" "$HYP") | while IFS=$'\t' read -r s r h; do
    echo "  src: $s"
    echo "  ref: $r"
    echo "  out: $h"
    echo
  done
fi
echo "Model:       $CKPT"
echo "Data:        $OUT/data"
echo "Output:      $HYP"
echo "Logs:        $OUT/logs/{preprocess,train,translate,score-bleu}.log"
echo "Translate more: $BIN_DIR/parla-translate --config $CONFIG -m $CKPT -i FILE -o OUT"
