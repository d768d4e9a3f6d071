#!/usr/bin/env bash
# Model files that bring hostile JSON and YAML (issue 59, items 5, 7 and 9), each read by the programs that read it,
# under a wall-clock limit and an 8 GB address-space cap. One row per case and reader: exit status (1 = parla's
# DataError, the wanted answer; 139/SIGSEGV = the old crash; 124 = cut off), wall time, peak RSS, and the first line
# of the error. Cases:
#   deep-meta      a safetensors checkpoint whose parla_meta nests 150,000 objects (crashed every reader)
#   deep-config    the same with the config key nested 1,000,000 arrays deep
#   header-50k     a safetensors header of 50,000 tensors, 3.3 MB (29.6 s of JSON parse before; now linear)
#   header-97mb    a safetensors header of 1,450,000 empty tensors, 97 MB (under the 100 MB cap): peak memory
#   hf-deep        a MarianMT folder whose config.json nests 100,000 deep
#   hf-layers      a MarianMT folder whose config.json says encoder_layers 4294967298 (read as 2 before)
#   decoder-paths  decoder.yml naming ../, an absolute path, a symbolic link, a 4-letter vocabulary
# The vocab.yml memory case (item 8) is bench_json_parse --vocab-yml-mb 250.
#
#   bash bench/hostile_files.sh [--bin build/bin] [--model ../shared/models/multi30k-en-de-small/average.pt]
#                               [--seconds 120] [--cases deep-meta,deep-config,...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
model=../shared/models/multi30k-en-de-small/average.pt
seconds=120
cases=deep-meta,deep-config,header-50k,hf-deep,hf-layers,decoder-paths
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
bin=$(realpath "$bin")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "hello" > "$work/in.txt"

row() {  # row CASE READER COMMAND...
  local name=$1 reader=$2; shift 2
  set +e
  /usr/bin/time -f "%x %e %M" -o "$work/time" bash -c 'ulimit -v 8388608; exec timeout '"$seconds"' "$@"' _ "$@" \
    < "$work/in.txt" > /dev/null 2> "$work/err"
  local rc=$?
  set -e
  local t; t=$(tail -1 "$work/time")
  printf "%-14s %-12s rc=%-4s %6ss %8s KB  %s\n" "$name" "$reader" "$rc" "$(echo "$t" | cut -d' ' -f2)" \
    "$(echo "$t" | cut -d' ' -f3)" "$(grep -v '^Command' "$work/err" | head -1 | cut -c1-110)"
  rm -rf "$work/out"
}

readers() {  # readers CASE CHECKPOINT: every program that reads a checkpoint
  row "$1" translate "$bin/parla-translate" -q -m "$2"
  row "$1" quantize "$bin/parla-train" -q quantize -o "$work/out" "$2"
  row "$1" upgrade "$bin/parla-train" -q upgrade -o "$work/out" "$2"
  row "$1" to-hf "$bin/parla-convert" -q to-hf "$2" -o "$work/out"
  row "$1" preprocess "$bin/parla-preprocess" -q --vocab-from "$2"
  row "$1" serve "$bin/parla-serve" -q -m "$2" --port 0
}

has() { [[ ",$cases," == *",$1,"* ]]; }

if has deep-meta || has deep-config; then
  "$bin/parla-train" -q upgrade "$model" -o "$work/base.pt"
fi
CASES=$cases python3 - "$work" <<'PY'
import json, os, struct, sys
d = sys.argv[1]
def write(name, header):
    hb = json.dumps(header).encode()
    open(os.path.join(d, name), "wb").write(struct.pack("<Q", len(hb)) + hb + data)
data = b""
base = os.path.join(d, "base.pt")
if os.path.exists(base):
    b = open(base, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h, data = json.loads(b[8:8 + n]), b[8 + n:]
    meta = h["__metadata__"]["parla_meta"]
    D = 150000
    h["__metadata__"]["parla_meta"] = '{"config":' + '{"a":' * D + '1' + '}' * D + '}'
    write("deep-meta.pt", h)
    D = 1000000
    h["__metadata__"]["parla_meta"] = '{"config":' + '[' * D + ']' * D + meta[meta.index(',"info"'):]
    write("deep-config.pt", h)
data = b""
h = {"__metadata__": {"format": "pt"}}
for i in range(50000):
    h["t%d" % i] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
write("header-50k.pt", h)
if "header-97mb" in os.environ.get("CASES", ""):
    h = {"__metadata__": {"format": "pt"}}
    for i in range(1450000):
        h["t%d" % i] = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    write("header-97mb.pt", h)
os.makedirs(os.path.join(d, "hf-deep"))
open(os.path.join(d, "hf-deep", "config.json"), "w").write('{"a":' * 100000 + "1" + "}" * 100000)
os.makedirs(os.path.join(d, "hf-layers"))
json.dump({"model_type": "marian", "d_model": 8, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
           "encoder_ffn_dim": 16, "decoder_ffn_dim": 16, "activation_function": "swish",
           "encoder_layers": 4294967298, "decoder_layers": 1, "max_position_embeddings": 512},
          open(os.path.join(d, "hf-layers", "config.json"), "w"))
m = os.path.join(d, "marian")
os.makedirs(m)
open(os.path.join(d, "outside.npz"), "w").write("x")
os.symlink(os.path.join(d, "outside.npz"), os.path.join(m, "link.npz"))
PY

has deep-meta && readers deep-meta "$work/deep-meta.pt"
has deep-config && readers deep-config "$work/deep-config.pt"
has header-50k && row header-50k translate "$bin/parla-translate" -q -m "$work/header-50k.pt"
if has header-97mb; then
  ls -l "$work/header-97mb.pt" | awk '{printf "header-97mb: %d bytes (4x + 256 MiB = %d KB)\n", $5, (4 * $5 + 268435456) / 1024}'
  readers header-97mb "$work/header-97mb.pt"
fi
has hf-deep && row hf-deep convert-hf "$bin/parla-convert" -q hf "$work/hf-deep" -o "$work/out"
has hf-layers && row hf-layers convert-hf "$bin/parla-convert" -q hf "$work/hf-layers" -o "$work/out"
if has decoder-paths; then
  for names in "../outside.npz vocab.yml" "$work/outside.npz vocab.yml" "link.npz vocab.yml" "model.npz a.ym"; do
    set -- $names
    printf 'models:\n  - %s\nvocabs:\n  - %s\n  - %s\n' "$1" "$2" "$2" > "$work/marian/decoder.yml"
    row decoder-paths "$1,$2" "$bin/parla-convert" -q marian "$work/marian" -o "$work/out"
  done
fi
