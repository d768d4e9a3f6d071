#!/usr/bin/env bash
# Crafted SentencePiece models (issue 59, item 6): SentencePiece trusts its proto, so before the check in
# lib/text/sentencepiece_model_check.cpp these crashed parla with SIGSEGV. Cases (one row each: exit status, time,
# and the message's first line; 139 = SIGSEGV, 1 = parla's DataError):
#   hf-valid          a Hugging Face MarianMT folder (random weights, a SentencePiece model trained with nmt_nfkc):
#                     parla-convert, then parla-translate of a line with characters NFKC rewrites: must work;
#   hf-ff, hf-random, hf-sparse   the same folder with the charsmap's trie (NormalizerSpec.precompiled_charsmap)
#                     all 0xff, random bytes (seed 59), or 64 bytes changed at random (seed 7);
#   hf-long-piece     the same folder with one piece of 1 MB;
#   ckpt-ff           a checkpoint whose SentencePiece model carries an all-0xff charsmap, of the same byte length
#                     as the original (the shared Multi30k model's, scores dropped to make room): parla-translate.
# The folder's crafted models are written by hand (protobuf wire format, no generated code); needs spm_train
# (Debian's sentencepiece package) and python3.
#
#   bash bench/hostile_spm_model.sh [--bin build/bin] [--model ../shared/models/multi30k-en-de-small]
#                                   [--seconds 120] [--cases hf-valid,hf-ff,...]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=build/bin
model=../shared/models/multi30k-en-de-small
seconds=120
cases=hf-valid,hf-ff,hf-random,hf-sparse,hf-long-piece,ckpt-ff
while [ $# -gt 0 ]; do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --cases) cases=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v spm_train >/dev/null || { echo "needs spm_train: apt-get install sentencepiece" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -c "
import random
r = random.Random(59)
w = 'the house is small a dog runs fast caf\u00e9 na\u00efve \uff21\uff22 \ufb01ne \u2460 \u337b stra\u00dfe'.split()
open('$work/corpus.txt', 'w').write('\n'.join(' '.join(r.choice(w) for _ in range(6)) for _ in range(300)) + '\n')"
spm_train --input="$work/corpus.txt" --model_prefix="$work/nfkc" --vocab_size=40 --character_coverage=1.0 \
  --normalization_rule_name=nmt_nfkc --pad_id=-1 --unk_id=1 --bos_id=-1 --eos_id=0 --minloglevel=2 >/dev/null 2>&1
python3 - "$work" "$model/average.pt" <<'EOF'
import json, os, random, shutil, struct, sys, zipfile
work, ckpt = sys.argv[1], sys.argv[2]

def varint(b, i):
    r = s = 0
    while True:
        c = b[i]; i += 1; r |= (c & 0x7f) << s; s += 7
        if c < 0x80: return r, i

def enc(v):
    out = bytearray()
    while True:
        c = v & 0x7f; v >>= 7
        if not v: out.append(c); return bytes(out)
        out.append(c | 0x80)

def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i); f, wt = key >> 3, key & 7
        if wt == 0: _, j = varint(b, i)
        elif wt == 1: j = i + 8
        elif wt == 5: j = i + 4
        elif wt == 2: n, i = varint(b, i); j = i + n
        else: raise ValueError(wt)
        out.append((f, wt, b[i:j])); i = j
    return out

def emit(fs):
    return b''.join(enc(f << 3 | wt) + (enc(len(v)) if wt == 2 else b'') + v for f, wt, v in fs)

def edit_charsmap(model, fn):
    return emit([(f, wt, emit([(g, w, fn(x) if (g, w) == (2, 2) else x) for g, w, x in fields(v)]) if (f, wt) == (3, 2)
                  else v) for f, wt, v in fields(model)])

def long_piece(model, n):
    out, done = [], False
    for f, wt, v in fields(model):
        if (f, wt) == (1, 2) and not done and not any(g == 3 for g, _, _ in fields(v)):
            v = emit([(g, w, b'a' * n if g == 1 else x) for g, w, x in fields(v)]); done = True
        out.append((f, wt, v))
    return emit(out)

def pieces(model):
    return [[x for g, _, x in fields(v) if g == 1][0].decode() for f, wt, v in fields(model) if (f, wt) == (1, 2)]

def ff(c): return c[:4] + b'\xff' * (struct.unpack('<I', c[:4])[0]) + c[4 + struct.unpack('<I', c[:4])[0]:]
def rnd(c):
    r = random.Random(59); t = struct.unpack('<I', c[:4])[0]
    return c[:4] + bytes(r.randrange(256) for _ in range(t)) + c[4 + t:]
def sparse(c):
    c = bytearray(c); r = random.Random(7); t = struct.unpack('<I', c[:4])[0]
    for _ in range(64): c[4 + r.randrange(t)] = r.randrange(256)
    return bytes(c)

model = open(work + '/nfkc.model', 'rb').read()
# A MarianMT folder: </s> 0, <unk> 1, the pieces, <pad> last; d_model 8, one layer a side, random weights.
vocab = {'</s>': 0, '<unk>': 1}
for p in pieces(model)[2:]: vocab[p] = len(vocab)
v, d, f = len(vocab) + 1, 8, 16
vocab['<pad>'] = v - 1
r = random.Random(2)
tensors = {'model.shared.weight': [v, d], 'final_logits_bias': [1, v]}
for side, dec in (('encoder', False), ('decoder', True)):
    p = 'model.%s.layers.0' % side
    for a in (['self_attn', 'encoder_attn'] if dec else ['self_attn']):
        for proj in ('q_proj', 'k_proj', 'v_proj', 'out_proj'):
            tensors['%s.%s.%s.weight' % (p, a, proj)] = [d, d]; tensors['%s.%s.%s.bias' % (p, a, proj)] = [d]
        tensors['%s.%s_layer_norm.weight' % (p, a)] = [d]; tensors['%s.%s_layer_norm.bias' % (p, a)] = [d]
    for n, shape in (('fc1.weight', [f, d]), ('fc1.bias', [f]), ('fc2.weight', [d, f]), ('fc2.bias', [d]),
                     ('final_layer_norm.weight', [d]), ('final_layer_norm.bias', [d])):
        tensors[p + '.' + n] = shape
header, data = {'__metadata__': {'format': 'pt'}}, bytearray()
for name, shape in tensors.items():
    count = 1
    for s in shape: count *= s
    header[name] = {'dtype': 'F32', 'shape': shape, 'data_offsets': [len(data), len(data) + 4 * count]}
    data += struct.pack('<%df' % count, *(r.gauss(0, 1) for _ in range(count)))
h = json.dumps(header).encode(); h += b' ' * (-len(h) % 8)
config = {'model_type': 'marian', 'vocab_size': v, 'decoder_vocab_size': v, 'd_model': d, 'encoder_layers': 1,
          'decoder_layers': 1, 'encoder_attention_heads': 2, 'decoder_attention_heads': 2, 'encoder_ffn_dim': f,
          'decoder_ffn_dim': f, 'activation_function': 'swish', 'max_position_embeddings': 32,
          'scale_embedding': True, 'pad_token_id': v - 1, 'eos_token_id': 0, 'decoder_start_token_id': v - 1,
          'share_encoder_decoder_embeddings': True}
for case, spm in (('hf-valid', model), ('hf-ff', edit_charsmap(model, ff)), ('hf-random', edit_charsmap(model, rnd)),
                  ('hf-sparse', edit_charsmap(model, sparse)), ('hf-long-piece', long_piece(model, 1 << 20))):
    folder = os.path.join(work, case); os.makedirs(folder)
    json.dump(vocab, open(folder + '/vocab.json', 'w'))
    json.dump(config, open(folder + '/config.json', 'w'))
    open(folder + '/model.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + data)
    for side in ('source.spm', 'target.spm'): open(os.path.join(folder, side), 'wb').write(spm)

# The checkpoint: its SentencePiece model (stored as a byte tensor in data/0 and data/1) with an all-0xff charsmap
# of 1 KB, at the original length: the scores of the last pieces are dropped (ids unchanged) and an unknown field
# pads the rest.
z = zipfile.ZipFile(ckpt)
names = [i.filename for i in z.infolist()]
spm_name = [n for n in names if n.endswith('/data/0')][0]
orig = z.read(spm_name)
fs = [x for x in fields(orig) if x[0] != 3]
charsmap = struct.pack('<I', 1024) + b'\xff' * 1024 + b'\0'
spec = emit([(1, 2, b'crafted'), (2, 2, charsmap)])
need = len(emit([(3, 2, spec)])) + 8
for k in range(len(fs) - 1, -1, -1):
    if need <= 0: break
    f, wt, v = fs[k]
    if (f, wt) == (1, 2):
        sub = [x for x in fields(v) if x[0] != 2]
        need -= len(emit([fs[k]])) - len(emit([(1, 2, emit(sub))])); fs[k] = (1, 2, emit(sub))
crafted = emit(fs + [(3, 2, spec)])
pad = len(orig) - len(crafted)
for n in range(pad, 0, -1):  # an unknown field (number 100) of exactly the remaining bytes
    if len(emit([(100, 2, b'\0' * n)])) == pad: crafted += emit([(100, 2, b'\0' * n)]); break
assert len(crafted) == len(orig), (len(crafted), len(orig))
out = zipfile.ZipFile(work + '/ckpt-ff.pt', 'w', zipfile.ZIP_STORED)
for n in names:
    b = z.read(n)
    if n.endswith('/data/0') or (n.endswith('/data/1') and b == orig): b = crafted
    out.writestr(n, b)
out.close()
EOF
cp "$model/config.json" "$work/ckpt-config.json"
printf 'the caf\xc3\xa9 \xef\xbc\xa1\xef\xbc\xa2 is small\n' > "$work/line.txt"
row() {  # case, exit, seconds, log
  local msg; msg=$(grep -v '^\s*$' "$4" | grep -m1 -i -E 'error|refused|segmentation|signal|cannot' || true)
  printf '| %s | %s | %s s | %s |\n' "$1" "$2" "$3" "${msg:0:200}"
}
echo "| case | exit | wall | message |"
echo "|---|---|---|---|"
IFS=, read -ra wanted <<< "$cases"
for c in "${wanted[@]}"; do
  log=$work/$c.log
  start=$(date +%s.%N)
  set +e
  case $c in
    hf-*)
      timeout "$seconds" "$bin/parla-convert" hf "$work/$c" -o "$work/$c.pt" >"$log" 2>&1
      rc=$?
      if [ $rc -eq 0 ]; then
        timeout "$seconds" "$bin/parla-translate" -m "$work/$c.pt" -i "$work/line.txt" >>"$log" 2>&1
        rc=$?
      fi ;;
    ckpt-ff)
      timeout "$seconds" "$bin/parla-translate" -c "$work/ckpt-config.json" -m "$work/ckpt-ff.pt" \
        -i "$work/line.txt" >"$log" 2>&1
      rc=$? ;;
    *) echo "unknown case $c" >&2; exit 2 ;;
  esac
  set -e
  end=$(date +%s.%N)
  row "$c" "$rc" "$(python3 -c "print(round($end - $start, 2))")" "$log"
done
