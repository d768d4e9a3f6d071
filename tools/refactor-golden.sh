#!/usr/bin/env bash
# Outputs that a change of shape (issue 38) must leave byte-identical, from the executables in BIN:
#   bash tools/refactor-golden.sh BIN OUT          writes them to OUT (about 1 minute on 2 cores)
#   bash tools/refactor-golden.sh --diff OLD NEW   compares two such folders; prints "golden: identical"
# Preprocesses 6,000 Multi30k pairs, trains a transformer (120 updates) and an rnn (60) with validation, translates
# with both and with the shared model (beam 5, greedy, int8, n-best 3, batch 1 and 64), averages two checkpoints and
# scores BLEU and chrF. Checkpoints, raw metrics.jsonl and data/meta.json carry times and paths, so --diff leaves them
# out and compares the metrics records without their time fields instead.
set -euo pipefail
if [ "${1:-}" = "--diff" ]; then
  diff -r -x '*.log' -x '*.pt' -x metrics.jsonl -x meta.json -x data.sha "$2" "$3" &&
    diff <(grep -v meta.json "$2/data.sha") <(grep -v meta.json "$3/data.sha") && echo "golden: identical"
  exit
fi
B=$(realpath "$1"); O=$2; ROOT=$(cd "$(dirname "$0")/.." && pwd); S=$ROOT/../shared
rm -rf "$O"; mkdir -p "$O"; cd "$O"
export OMP_NUM_THREADS=1
head -n 6000 $S/data/multi30k/train.en > c.en; head -n 6000 $S/data/multi30k/train.de > c.de
$B/parla-preprocess --prefix c --src-lang en --tgt-lang de -o data --vocab-size 600 --valid-size 200 --test-size 200 --seed 3 2> pre.log >/dev/null
(cd data && find . -type f | sort | xargs sha256sum) > data.sha
python3 - "$ROOT" <<'PY'
import json, sys
c=json.load(open(sys.argv[1]+'/configs/quickstart.json'))
c['training'].update(max_time=0, max_steps=120, valid_every=60, log_every=20, valid_max_sentences=50)
c['training'].pop('max_time')
json.dump(c,open('t.json','w'))
r=json.load(open(sys.argv[1]+'/configs/multi30k-en-de-rnn.json'))
r['model'].update(d_model=64, hidden_size=64) if 'hidden_size' in r['model'] else r['model'].update(d_model=64)
r['training'].update(max_steps=60, valid_every=30, log_every=10, valid_max_sentences=30, batch_tokens=1024)
r['training'].pop('max_time',None); r['training'].pop('max_epochs',None)
json.dump(r,open('r.json','w'))
PY
$B/parla-train --config t.json --data data --save-dir mt --seed 7 2> mt.log
$B/parla-train --config r.json --data data --save-dir mr --seed 5 2> mr.log
for m in mt mr; do
  python3 -c "
import json,sys
for l in open('$m/metrics.jsonl'):
  d=json.loads(l)
  for k in list(d):
    if any(s in k for s in ('time','sec','rate','wps','ups','elapsed','date','wall','eta')): d.pop(k)
  print(json.dumps(d,sort_keys=True))" > $m.metrics 2>/dev/null || ls $m > $m.metrics
  $B/parla-translate -m $m/checkpoint_last.pt -i data/test.en -o $m.out 2>/dev/null
  $B/parla-translate -m $m/checkpoint_best.pt -i data/test.en -o $m.best.out -b 1 2>/dev/null
done
M=$S/models/multi30k-en-de-small/average.pt; T=$S/data/multi30k/test_2016_flickr
head -n 300 $T.en > t.en; head -n 300 $T.de > t.de
$B/parla-translate -m $M -i t.en -o beam5.out 2>/dev/null
$B/parla-translate -m $M -i t.en -o greedy.out -b 1 2>/dev/null
$B/parla-translate -m $M -i t.en -o int8.out --precision int8 2>/dev/null
$B/parla-translate -m $M -i t.en -o nbest.out --n-best 3 -b 4 2>/dev/null
$B/parla-translate -m $M -i t.en -o b1.out --batch-size 1 2>/dev/null
$B/parla-translate -m $M -i t.en -o b64.out --batch-size 64 2>/dev/null
cmp b1.out b64.out && cmp b1.out beam5.out
$B/parla-train average -o avg.pt mt/checkpoint_60.pt mt/checkpoint_120.pt 2> avg.log && $B/parla-translate -m avg.pt -i data/test.en -o avg.out 2>/dev/null
$B/parla-score-bleu t.de -i beam5.out -m bleu chrf > score.txt
$B/parla-score-bleu t.de -i greedy.out int8.out -m bleu > score2.txt 2>&1 || true
echo done
