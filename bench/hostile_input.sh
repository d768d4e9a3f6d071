#!/usr/bin/env bash
# parla-translate on hostile input (issue 35): peak resident memory and wall time on
#   - a 50 MB single line of words (English words of the Multi30k vocabulary, seed 35),
#   - a 50 MB single line of random bytes (no '\n' but the last),
#   - a 1 MB file of random bytes (about 4,000 lines of garbage, many cut at the piece limit).
# The inputs are generated (seeded, so every run reads the same bytes); each case runs under /usr/bin/time -v
# with a wall-clock limit and a virtual-memory limit, so that the old behaviour (pass
# -- --max-input-chars 2147483647 --max-input-length 2147483647 to read, encode and decode whole lines again)
# cannot take the machine down with it. Prints one row per case: exit status (124 = cut off by the time limit,
# its peak still counts; 1 = parla's "out of memory" at the memory limit), peak RSS, wall time.
#
#   bash bench/hostile_input.sh [--bin build/bin] [--model ../shared/models/multi30k-en-de-small]
#                               [--seconds 300] [--memory-gb 16] [--cases words,random-line,random-file]
#                               [-- EXTRA FLAGS...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
model=../shared/models/multi30k-en-de-small
seconds=300
memory_gb=16
cases=words,random-line,random-file
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --memory-gb) memory_gb=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -x /usr/bin/time ] || { echo "needs GNU time: apt-get install time" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$work" <<'EOF'
import random, sys
d = sys.argv[1]
r = random.Random(35)
words = ("a man is riding a bike two dogs play in the snow woman with red hat walks down the street "
         "children are playing").split()
out, n = [], 0
while n < 50 << 20:
    w = r.choice(words)
    out.append(w)
    n += len(w) + 1
open(d + "/words.txt", "w").write(" ".join(out) + "\n")
line = bytes(b for b in r.randbytes(50 << 20) if b != 10)
open(d + "/random-line.bin", "wb").write(line + b"\n")
open(d + "/random-file.bin", "wb").write(r.randbytes(1 << 20))
EOF
echo "| case | input | exit | peak RSS | wall |"
echo "|---|---|---|---|---|"
IFS=, read -ra wanted <<< "$cases"
for c in "${wanted[@]}"; do
  case $c in
    words) in=$work/words.txt ;;
    random-line) in=$work/random-line.bin ;;
    random-file) in=$work/random-file.bin ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  set +e
  (ulimit -v $((memory_gb * 1024 * 1024))
   /usr/bin/time -v timeout "$seconds" "$bin/parla-translate" -m "$model/average.pt" -c "$model/config.json" \
     -i "$in" -o "$work/out.txt" "$@" 2> "$work/err.txt")
  rc=$?
  set -e
  rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f MB", $2 / 1024}' "$work/err.txt")
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$work/err.txt")
  echo "| $c | $(stat -c %s "$in") bytes | $rc | $rss | $wall |"
  grep -v '^\s' "$work/err.txt" | grep -E 'error|cut before|out of memory' | head -2 | sed 's/^/    /' >&2 || true
done
