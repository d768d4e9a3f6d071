#!/usr/bin/env bash
# parla's checks on a CUDA machine, in phases, so that one call of a short-lived GPU lease runs several:
#   bash tools/gpu-check.sh [--out DIR] PHASE...
# Phases (in the order given):
#   build       configure and build against the LibTorch of the machine's python3 (PyTorch 2.x with CUDA)
#   test        the CTest suite with CUDA visible ([cuda] tests run instead of skipping), minus tests that need
#               shared data not carried along
#   quickstart  tools/quickstart.sh on the GPU in bf16 (toy corpus), BLEU
#   multi30k    the Multi30k small recipe for $M30K_MINUTES (default 5) minutes in bf16 on the GPU, test BLEU
#   bench       bench_train (tiny, base; fp32 and bf16) and translation speed with the shared Multi30k model
#   decode      the shared Multi30k model on CPU and GPU (fp32, TF32 off): identical lines, score gaps
#   serve       continuous against static batching on the GPU (bench_continuous; issue 16's open measurement)
#   countops    issue 55's counts, parla and the PyTorch reference on the same machine: bench_train --count-ops and
#               bench/peers/pytorch_ops.py for $COUNT_MODELS (default tiny,base) at $COUNT_LAYERS (default 3,6,12)
#               layers, on $COUNT_DEVICE (default cuda) in $COUNT_PRECISION (default bf16). Dry run on a CPU:
#               GPU_BUILD_DIR=build COUNT_DEVICE=cpu COUNT_PRECISION=fp32 COUNT_MODELS=tiny COUNT_LAYERS=1
#               PYTHON=.venv-torch2/bin/python
#   search      issue 19's recipe search: the Multi30k variants of search_variants below, $SEARCH_JOBS (default 8)
#               at a time on the one GPU (a 7.6 M-parameter model leaves most of an H100 idle), each for
#               $SEARCH_STEPS (default 4000) updates in bf16 (capped at $SEARCH_MINUTES, default 7); then each
#               run's last 4 checkpoints averaged and decoded on *validation* with beam 5 and length penalties
#               0.6, 1.0, 1.4 (tools/sweep.py decode). For a dry run on a CPU: SEARCH_DEVICE=cpu, few steps, and
#               $SEARCH_VALID_LINES (validation and the decode sweep on the first N validation pairs only).
# Machines without apt (the project's GPU machine): Debian packages fetched on the CPU machine with
# ../shared/device/fetch-debs.sh .device/debs are unpacked under /opt/deps; small shared data travels in
# .device/shared (tools/gpu-prepare.sh makes both). Results go to DIR (default out/gpu-check): one log per phase.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT_DIR="$ROOT/out/gpu-check"
if [ "${1:-}" = "--out" ]; then OUT_DIR=$2; shift 2; fi
[ $# -gt 0 ] || { awk 'NR > 1 && !/^#/ {exit} NR > 1' "$0" >&2; exit 2; }
mkdir -p "$OUT_DIR"
BUILD=${GPU_BUILD_DIR:-$ROOT/build-gpu}
SHARED=$ROOT/.device/shared
[ -d "$SHARED" ] || SHARED=$(cd "$ROOT/.." && pwd)/shared
JOBS=$(nproc)
log() { echo "gpu-check: $*" >&2; }

# --- environment: Debian packages under /opt/deps when the machine has no apt ---
if [ -d "$ROOT/.device/debs" ] && [ ! -f /usr/lib/x86_64-linux-gnu/cmake/dnnl/dnnl-config.cmake ]; then
  if [ ! -f /opt/deps/.unpacked ]; then
    mkdir -p /opt/deps
    for f in "$ROOT"/.device/debs/*.deb; do dpkg -x "$f" /opt/deps; done
    touch /opt/deps/.unpacked
  fi
  D=/opt/deps/usr
  export PATH="$D/bin:$PATH"
  export PKG_CONFIG_PATH="$D/lib/x86_64-linux-gnu/pkgconfig:$D/share/pkgconfig" PKG_CONFIG_SYSROOT_DIR=/opt/deps
  # Some Debian 12 packages (libbz2) still put their libraries under /lib.
  # GPU_DEPS_LD=0 leaves the run-time search to the image (and to LD_PRELOAD) when its own copies must win.
  [ "${GPU_DEPS_LD:-1}" = 0 ] ||
    export LD_LIBRARY_PATH="$D/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export LIBRARY_PATH="$D/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu${LIBRARY_PATH:+:$LIBRARY_PATH}"
  EXTRA_PREFIX=";$D"
fi
TORCH_PREFIX=$(python3 -W ignore -c 'import os, torch; print(torch.utils.cmake_prefix_path + ";" + os.path.dirname(torch.__file__))' 2>/dev/null) || true  # none on a CPU machine (dry runs with an existing build)
BIN=$BUILD/bin

phase_build() {
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX${EXTRA_PREFIX:-}" \
    -DPARLA_SHARED_DIR="$SHARED" ${GPU_CMAKE_ARGS:-}
  # GPU_BUILD_TARGETS: a subset (space-separated) when a short lease has no time for the whole tree.
  time cmake --build "$BUILD" -j "$JOBS" ${GPU_BUILD_TARGETS:+--target $GPU_BUILD_TARGETS} -- -k "${KEEP_GOING:-1}"
}

phase_test() {
  cd "$BUILD"
  # BLEU fixtures and the 65 MB it-en corpus stay behind (carry limit); those tests are CPU text code anyway.
  ctest -j "$JOBS" --timeout 900 -E '^metrics: |it-en' || true
  cd "$ROOT"
  log "[cuda]-tagged tests, run directly (a skip would print PARLA-SKIP):"
  for t in "$BUILD"/tests/parla_tests_*; do
    "$t" "[cuda]" --durations yes 2>&1 | tail -n 40 || true
  done
}

phase_quickstart() {
  time bash tools/quickstart.sh --no-setup --no-build --bin-dir "$BIN" --out "$ROOT/out/qs-gpu" \
    --set runtime.device=cuda --set training.precision=bf16
}

phase_multi30k() {
  local D="$SHARED/data/multi30k" W="$ROOT/out/m30k-gpu" C=configs/multi30k-en-de-small.json
  rm -rf "$W" && mkdir -p "$W"
  "$BIN/parla-preprocess" --config $C --prefix "$D/train" --valid-prefix "$D/val" --test-prefix "$D/test_2016_flickr" \
    --src-lang en --tgt-lang de -o "$W/data"
  time "$BIN/parla-train" --config $C --data "$W/data" --save-dir "$W/model" --set runtime.device=cuda \
    --set training.precision=bf16 --set training.max_time="${M30K_MINUTES:-5}" --set training.log_every=500
  "$BIN/parla-train" average --dir "$W/model" --last 6 -o "$W/model/average.pt" || cp "$W/model/checkpoint_last.pt" "$W/model/average.pt"
  for m in checkpoint_best average; do
    "$BIN/parla-translate" --config $C -m "$W/model/$m.pt" --device cuda -i "$D/test_2016_flickr.en" -o "$W/$m.hyp.de"
    echo "$m: $("$BIN/parla-score-bleu" "$D/test_2016_flickr.de" -i "$W/$m.hyp.de" -m bleu chrf)"
  done
}

phase_bench() {
  "$BUILD/bench/bench_train" 20 tiny,base cuda fp32,bf16 || true
  local M="$SHARED/models/multi30k-en-de-small" D="$SHARED/data/multi30k"
  for prec in fp32 bf16; do
    for b in 1 64; do
      log "translate test_2016_flickr on cuda, $prec, beam 5, batch $b"
      "$BIN/parla-translate" -c "$M/config.json" -m "$M/average.pt" --device cuda --precision $prec -b 5 \
        --batch-size $b -i "$D/test_2016_flickr.en" -o "$OUT_DIR/hyp.cuda.$prec.b$b" 2>&1 | grep -E "translated|error" || true
    done
    log "greedy, $prec, batch 64"
    "$BIN/parla-translate" -c "$M/config.json" -m "$M/average.pt" --device cuda --precision $prec -b 1 \
      --batch-size 64 -i "$D/test_2016_flickr.en" -o /dev/null 2>&1 | grep -E "translated|error" || true
  done
  log "the same on this machine's CPU ($JOBS threads), fp32, beam 5, batch 64"
  "$BIN/parla-translate" -c "$M/config.json" -m "$M/average.pt" --device cpu -b 5 --batch-size 64 \
    -i "$D/test_2016_flickr.en" -o /dev/null 2>&1 | grep -E "translated|error" || true
  for f in "$OUT_DIR"/hyp.cuda.*; do
    echo "$(basename "$f"): $("$BIN/parla-score-bleu" "$D/test_2016_flickr.de" -i "$f" -m bleu)"
  done
  rm -f "$OUT_DIR"/hyp.cuda.*
}

phase_countops() {
  local dev=${COUNT_DEVICE:-cuda} prec=${COUNT_PRECISION:-bf16} layers=${COUNT_LAYERS:-3,6,12}
  "$BUILD/bench/bench_train" --count-ops "${COUNT_MODELS:-tiny,base}" "$dev" "$prec" "$layers" || true
  local IFS=,
  for m in ${COUNT_MODELS:-tiny,base}; do
    "${PYTHON:-python3}" "$ROOT/bench/peers/pytorch_ops.py" "$m" --layers "$layers" --device "$dev" --precision "$prec" || true
  done
}

phase_decode() {
  local M="$SHARED/models/multi30k-en-de-small" D="$SHARED/data/multi30k" W="$ROOT/out/decode-gpu"
  mkdir -p "$W"
  # fp32 on both sides, TF32 off (parla never enables it for fp32); 2-best lists carry each best hypothesis's score.
  for dev in cpu cuda; do
    "$BIN/parla-translate" -c "$M/config.json" -m "$M/average.pt" --device $dev -b 5 -n 2 --batch-size 64 \
      -i "$D/test_2016_flickr.en" -o "$W/$dev.nbest"
  done
  python3 - "$W/cpu.nbest" "$W/cuda.nbest" <<'EOF'
import sys
def best(path):
    out = {}
    for line in open(path, encoding="utf-8"):
        i, text, score = line.rstrip("\n").split(" ||| ")
        out.setdefault(int(i), (text, float(score)))
    return out
a, b = best(sys.argv[1]), best(sys.argv[2])
n = max(len(a), len(b))
diff = [i for i in range(n) if a.get(i, ("", 0))[0] != b.get(i, ("", 0))[0]]
print(f"decode cpu vs cuda (fp32, beam 5, batch 64): {n - len(diff)}/{n} best translations identical "
      f"({100.0 * (n - len(diff)) / max(n, 1):.2f}%)")
gaps = [abs(a[i][1] - b[i][1]) for i in range(n) if i in a and i in b and i not in diff]
print(f"  max score difference on identical lines: {max(gaps) if gaps else 0:.2e}")
for i in diff:
    print(f"  line {i + 1}: score gap {b[i][1] - a[i][1]:+.5f} (cpu {a[i][1]:.5f}, cuda {b[i][1]:.5f})\n"
          f"    cpu:  {a[i][0]}\n    cuda: {b[i][0]}")
EOF
}

phase_serve() {
  local M="$SHARED/models/multi30k-en-de-small" D="$SHARED/data/multi30k"
  "$BUILD/bench/bench_continuous" "$M/average.pt" "$D/test_2016_flickr.en" 1000 16,64,256 5 1,8 cuda
}

# Issue 19's search grid: one line per run, NAME then --set overrides of configs/multi30k-en-de-small.json.
# The base recipe, its regularisers one at a time, and model shapes at about equal or lower cost.
search_variants() {
  cat <<'LIST'
base
wdrop0.1 model.source_word_dropout=0.1 model.target_word_dropout=0.1
ema0.9995 training.ema_decay=0.9995
drop0.4 model.dropout=0.4 model.activation_dropout=0.1
prenorm-lr1.5e-3 model.norm=pre training.lr=0.0015
lr1e-3-warm1000 training.lr=0.001 training.warmup_steps=1000
tiny4x128 model.d_model=128 model.ffn_dim=512 model.encoder_layers=4 model.decoder_layers=4 training.lr=0.002
deep6x256 model.encoder_layers=6 model.decoder_layers=6
LIST
}

phase_search() {
  local D="$SHARED/data/multi30k" W="$ROOT/out/search-gpu" C=configs/multi30k-en-de-small.json
  local dev=${SEARCH_DEVICE:-cuda} steps=${SEARCH_STEPS:-4000} jobs=${SEARCH_JOBS:-8}
  local prec=bf16 lines=${SEARCH_VALID_LINES:-0}
  [ "$dev" = cuda ] || prec=fp32
  mkdir -p "$W/runs"
  [ -f "$W/data/meta.json" ] || "$BIN/parla-preprocess" --config $C --prefix "$D/train" --valid-prefix "$D/val" \
    --test-prefix "$D/test_2016_flickr" --src-lang en --tgt-lang de -o "$W/data" 2> "$W/preprocess.log"
  # The decode sweep's validation text: all of it, or its first $lines pairs.
  local l
  for l in en de; do
    if [ "$lines" -gt 0 ]; then head -n "$lines" "$D/val.$l" > "$W/val.$l"; else cp "$D/val.$l" "$W/val.$l"; fi
  done
  local name sets running=0
  while read -r name sets; do
    [ -n "$name" ] || continue
    local args=()
    for kv in $sets; do args+=(--set "$kv"); done
    log "search: $name ($sets)"
    "$BIN/parla-train" --config $C --data "$W/data" --save-dir "$W/runs/$name" --overwrite --max-steps "$steps" \
      --set runtime.device="$dev" --set training.precision=$prec --set runtime.threads=2 \
      --set training.max_time="${SEARCH_MINUTES:-7}" --set training.valid_every=$((steps / 4)) \
      --set training.save_every=$((steps / 8)) --set training.keep_last=4 --set training.patience=0 \
      --set training.valid_max_sentences="$lines" "${args[@]}" 2> "$W/runs/$name.train.log" &
    running=$((running + 1))
    if [ $running -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
  done < <(search_variants)
  wait || true
  python3 tools/sweep.py table "$W/runs" || true
  for dir in "$W"/runs/*/; do
    name=$(basename "$dir")
    grep -h "training done" "$W/runs/$name.train.log" | sed "s/^/$name: /" || echo "$name: no 'training done' line"
    # A run cut short by SEARCH_MINUTES before its fourth save is decoded from its last weights, as in multi30k.
    "$BIN/parla-train" average --dir "$dir" --last 4 -o "$dir/average.pt" 2> /dev/null ||
      cp "$dir/checkpoint_last.pt" "$dir/average.pt" || continue
    echo "## $name (average of the last 4 checkpoints, else the last weights; validation)"
    python3 tools/sweep.py decode --model "$dir/average.pt" --src "$W/val.en" --ref "$W/val.de" --beam 5 \
      --lenpen 0.6,1.0,1.4 --bin "$BIN" --set runtime.device="$dev" || true
  done
}

status=0
for phase in "$@"; do
  case "$phase" in
    build|test|quickstart|multi30k|bench|countops|decode|serve|search) ;;
    *) echo "gpu-check: unknown phase '$phase'" >&2; exit 2 ;;
  esac
  log "=== $phase ==="
  start=$(date +%s)
  set +e
  ( set -o pipefail; "phase_$phase" 2>&1 | tee "$OUT_DIR/$phase.log" )
  rc=$?
  set -e
  log "=== $phase: exit $rc in $(( $(date +%s) - start )) s ==="
  echo "$phase: exit $rc, $(( $(date +%s) - start )) s" >> "$OUT_DIR/summary.txt"
  [ $rc -eq 0 ] || status=$rc
done
exit $status
