#!/usr/bin/env bash
# Hostile model files (issue 59 items 7 and 8), replayed at full size: each case runs under /usr/bin/time -v with
# a wall-clock limit and an 8 GB address-space cap (`ulimit -v`), and prints its exit status, peak RSS and wall
# time. The floor: a clear error (exit 1) or a normal answer, never a signal (135 = SIGBUS, 124 = cut off), and a
# peak of at most 4x the file plus 256 MiB (plus the ~100 MB a parla process has before it reads anything).
#   fifo      a FIFO as -m (blocked for ever in open())
#   layers    a ~300-byte checkpoint asking for 100,000 layers of d_model 1 (4.5 GB before)
#   rnn-layers  a ~300-byte RNN checkpoint asking for 12,000 rnn_layers (within the budget's layer overhead)
#   pickle    an old-format checkpoint whose 10 MB data.pkl is EMPTY_LIST instructions (2.8-3 GB before)
#   int8      a 100 MB int8 checkpoint storing a matrix one column wide (1.6 GB before)
#   truncate  20 loads of a checkpoint truncated in place at a random moment while it loads (SIGBUS before);
#             needs --model, prints one row per exit status
#
#   bash bench/hostile_model_files.sh [--bin build/bin] [--model ../shared/models/multi30k-en-de-small/average.pt]
#                                     [--seconds 120] [--cases fifo,layers,pickle,int8,truncate]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
model=../shared/models/multi30k-en-de-small/average.pt
seconds=120
cases=fifo,layers,pickle,int8,truncate
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
bin=$(cd "$bin" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'PY'
import json, struct, sys, zipfile
d = sys.argv[1]
def safetensors(path, meta, tensors=()):
    header = {"__metadata__": {"format": "pt", "parla_format": "2", "parla_meta": json.dumps(meta)}}
    off, data = 0, []
    for name, dtype, shape, body in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(body)]}
        off += len(body)
        data.append(body)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for body in data:
            f.write(body)
layers = {"type": "transformer", "d_model": 1, "ffn_dim": 1, "heads": 1, "encoder_layers": 100000,
          "decoder_layers": 100000}
safetensors(d + "/layers.pt", {"config": {"model": layers}, "info": {}, "src_vocab_size": 8, "tgt_vocab_size": 8})
rnn = {"type": "rnn", "d_model": 1, "rnn_hidden": 1, "rnn_layers": 12000, "tie_output": False}
safetensors(d + "/rnn-layers.pt", {"config": {"model": rnn}, "info": {}, "src_vocab_size": 8, "tgt_vocab_size": 8})
with zipfile.ZipFile(d + "/pickle.pt", "w", zipfile.ZIP_STORED) as z:
    z.writestr("archive/data.pkl", b"\x80\x02(" + b"]" * (10 << 20) + b"l.")
    z.writestr("archive/version", "3\n")
name, n = "encoder.layers.0.ffn.fc1.weight", 20000000
small = {"type": "transformer", "d_model": 64, "ffn_dim": 64, "heads": 1, "encoder_layers": 1, "decoder_layers": 1}
safetensors(d + "/int8.pt", {"config": {"model": small}, "info": {}, "src_vocab_size": 8, "tgt_vocab_size": 8,
                             "int8": [name]},
            [("int8." + name + ".scales", "F32", [n], b"\x00\x00\x80\x3f" * n),
             ("int8." + name + ".values", "I8", [n, 1], b"\x01" * n)])
PY
mkfifo "$work/fifo.pt"
row() {  # case, command...
  local c=$1; shift
  local rc=0
  /usr/bin/time -v -o "$work/time" bash -c "ulimit -v 8388608; timeout $seconds $*" >/dev/null 2>"$work/err" || rc=$?
  local rss wall
  rss=$(awk -F': ' '/Maximum resident/ {printf "%.0f MB", $2 / 1024}' "$work/time")
  wall=$(awk -F': ' '/Elapsed/ {print $2}' "$work/time")
  echo "| $c | $rc | $rss | $wall | $(grep -v '^Command' "$work/err" | tail -1 | cut -c1-150) |"
}
echo "| case | exit | peak RSS | wall | message |"
echo "|---|---|---|---|---|"
IFS=, read -ra wanted <<< "$cases"
for c in "${wanted[@]}"; do
  case $c in
    fifo) row fifo "$bin/parla-translate -m $work/fifo.pt </dev/null" ;;
    layers) row layers "$bin/parla-train quantize $work/layers.pt -o $work/out.pt" ;;
    rnn-layers) row rnn-layers "$bin/parla-train quantize $work/rnn-layers.pt -o $work/out.pt"
                row rnn-layers "$bin/parla-translate -m $work/rnn-layers.pt </dev/null" ;;
    pickle) row pickle "$bin/parla-train quantize $work/pickle.pt -o $work/out.pt" ;;
    int8) row int8 "$bin/parla-train quantize $work/int8.pt -o $work/out.pt" ;;
    truncate)
      [ -f "$model" ] || { echo "| truncate | needs --model |"; continue; }
      declare -A seen=()
      # how long a whole run takes on this machine now: each load is cut at a random moment within it
      start=$(date +%s%N)
      echo hello | "$bin/parla-translate" -m "$model" >/dev/null 2>&1
      run_ms=$(( ($(date +%s%N) - start) / 1000000 ))
      for i in $(seq 1 20); do
        cp "$model" "$work/race.pt"; chmod u+w "$work/race.pt"
        rm -f "$work/race.rc"
        (r=0; echo hello | "$bin/parla-translate" -m "$work/race.pt" >/dev/null 2>"$work/race.err" || r=$?
         echo $r >"$work/race.rc") &
        job=$!
        cut=$(( RANDOM % run_ms ))
        sleep "$((cut / 1000)).$(printf %03d $((cut % 1000)))"
        truncate -s 1M "$work/race.pt"
        wait "$job" 2>/dev/null || true
        rc=$(cat "$work/race.rc"); seen[$rc]=$(( ${seen[$rc]:-0} + 1 ))
      done
      for k in "${!seen[@]}"; do echo "| truncate: exit $k | ${seen[$k]} of 20 (cut within ${run_ms} ms) | | | |"; done ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
done
