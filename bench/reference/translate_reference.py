"""Batched greedy and beam search with the PyTorch reference Transformer: the peer of parla-translate's speed.

Same search as parla (lib/decode/beam_search.cpp, single_path_search.cpp): 2K candidates per sentence from the
K live rows, EOS candidates among the first K finish a hypothesis scored log P / ((5 + |Y|) / 6)^alpha (GNMT,
|Y| counts EOS), a sentence stops when it has K finished hypotheses, no live one, passes its length limit, or its
best live hypothesis at the limit cannot beat the n-th finished one; PAD and BOS are never produced; output
length limit floor(a * source pieces + b) after which EOS is forced with its own log-probability. Incremental
decoder: self-attention K/V cache per hypothesis, cross-attention K/V once per sentence (shared by its beams).
Batches of --batch-size sentences cut from length-sorted windows of 20 batches (parla's maxi-batch); output in
input order.

Input: one sentence per line as space-separated SentencePiece ids (EOS is appended, as parla does), or with
--spm MODEL (or a checkpoint carrying one) raw text encoded with python sentencepiece (not needed for ids).

Commands (on the GPU machine; CPU works with small inputs):
  # trained parla checkpoint, beam 4 and greedy, batch 64, newstest2013 as ids:
  python bench/reference/translate_reference.py --checkpoint model.pt --input newstest2013.ids --beam 4 --batch-size 64
  python bench/reference/translate_reference.py --checkpoint model.pt --input newstest2013.ids --beam 1 --batch-size 64
  # random base weights (shared 32k vocab), outputs forced to the lengths parla produced (one int per line):
  python bench/reference/translate_reference.py --preset base --vocab 32000 --input newstest2013.ids \
      --force-lengths parla_out_lengths.txt --beam 4 --batch-size 64 --precision bf16
  # text in, text out, with the SentencePiece model carried by the checkpoint:
  python bench/reference/translate_reference.py --checkpoint model.pt --input test.en --text --output out.de
Prints sentences/s and generated tokens/s (EOS included: one decoder step each) over the timed translation,
after one untimed warm-up batch; on CUDA the clock stops after torch.cuda.synchronize().
"""
from __future__ import annotations

import argparse
import math
import struct
import time

import torch

import parla_transformer as pt
from parla_transformer import BOS_ID, EOS_ID, PAD_ID

NINF = float("-inf")
_F32 = struct.Struct("f")


def f32(x: float) -> float:
    # Round to float32: parla keeps scores in float, and ties/orders should fall the same way.
    return _F32.unpack(_F32.pack(x))[0]


def length_penalty(length: int, alpha: float) -> float:
    # GNMT (Wu et al. 2016, eq. 14), lib/decode/length_penalty.cpp; computed in double, score rounded to float32.
    return 1.0 if alpha == 0 else ((5.0 + length) / 6.0) ** alpha


def normalized(log_prob: float, length: int, alpha: float) -> float:
    return f32(log_prob / length_penalty(length, alpha))


def max_output_length(source_pieces: int, a: float, b: int, max_positions: int) -> int:
    n = math.floor(a * source_pieces + b)
    if max_positions < 2 ** 62:
        n = min(n, max_positions - 1)
    return max(n, 1)


def constrain(logp: torch.Tensor, step: int, limits: torch.Tensor, min_lens: torch.Tensor | None) -> None:
    """parla's constrain_step, vectorised: no PAD/BOS; EOS forbidden before the row's minimum; rows at their
    limit may only end, keeping EOS's own log-probability (0 if it was -inf so the hypothesis survives)."""
    logp[:, PAD_ID] = NINF
    logp[:, BOS_ID] = NINF
    if min_lens is not None:
        logp[:, EOS_ID] = torch.where(step < min_lens, torch.full_like(logp[:, EOS_ID], NINF), logp[:, EOS_ID])
    forced = step >= limits
    eos = logp[:, EOS_ID].clone()
    eos = torch.where(torch.isfinite(eos), eos, torch.zeros_like(eos))
    logp.masked_fill_(forced.unsqueeze(1), NINF)
    logp[:, EOS_ID] = torch.where(forced, eos, logp[:, EOS_ID])


def greedy(model, src, limits, min_lens=None):
    """-> per sentence [(tokens, log_prob, score)] with alpha applied by the caller (parla prints the same)."""
    B = src.size(0)
    state = model.start(src)
    prev = torch.full((B,), BOS_ID, dtype=torch.long, device=src.device)
    active = list(range(B))
    lim, mins = limits, min_lens
    log_prob = [0.0] * B
    tokens = [[] for _ in range(B)]
    out = [None] * B
    step = 0
    while active:
        logp = model.step(prev, state)
        constrain(logp, step, lim, mins)
        v, tok = logp.max(1)
        v_l, tok_l = v.tolist(), tok.tolist()
        keep = []
        for r, sent in enumerate(active):
            # float32 running sum, the arithmetic of parla (beam 1 equals greedy there)
            log_prob[sent] = f32(log_prob[sent] + v_l[r])
            if tok_l[r] == EOS_ID:
                out[sent] = (tokens[sent], log_prob[sent])
            else:
                tokens[sent].append(tok_l[r])
                keep.append(r)
        step += 1
        if not keep:
            break
        if len(keep) != len(active):
            idx = torch.tensor(keep, dtype=torch.long, device=src.device)
            state.select_sentences(idx)
            state.reorder_hypotheses(idx)
            lim = lim.index_select(0, idx)
            mins = mins.index_select(0, idx) if mins is not None else None
            tok = tok.index_select(0, idx)
            active = [active[r] for r in keep]
        prev = tok
    return out


def beam_search(model, src, limits, K, alpha, n_best=1, min_lens=None):
    """-> per sentence the n best [(tokens, log_prob, score)], best first."""
    B, dev = src.size(0), src.device
    n_best = max(1, min(n_best, K))
    limit_l = limits.tolist()
    state = model.start(src)  # memory rows = sentences; the K rows of a sentence share them
    prev = torch.full((B * K,), BOS_ID, dtype=torch.long, device=dev)
    # Only the first row of a sentence is live at the start, so step 0 does not expand K copies of one prefix.
    row_score = torch.full((B, K), NINF, device=dev)
    row_score[:, 0] = 0
    rows_tokens = [[] for _ in range(B * K)]
    active = list(range(B))
    finished = [[] for _ in range(B)]
    V = model.tgt_vocab
    n_cand = min(2 * K, K * V)
    row_lim = limits.repeat_interleave(K)
    row_min = min_lens.repeat_interleave(K) if min_lens is not None else None
    step = 0
    while active:
        A = len(active)
        logp = model.step(prev, state)
        constrain(logp, step, row_lim, row_min)
        cand = (row_score.view(-1, 1) + logp).view(A, K * V)  # float32 sums, as parla
        top_v, top_i = cand.topk(n_cand, 1)
        top_v, top_i = top_v.tolist(), top_i.tolist()
        next_active, groups, reorder, next_prev, next_scores, next_tokens = [], [], [], [], [], []
        for a, sent in enumerate(active):
            fin = finished[sent]
            live = []  # (parent row, token, score)
            for j in range(n_cand):
                value = top_v[a][j]
                if value == NINF or len(live) >= K:  # candidates are sorted: -inf ones are no candidates
                    break
                beam, token = divmod(top_i[a][j], V)
                parent = a * K + beam
                if token == EOS_ID:
                    if j < K:
                        toks = rows_tokens[parent]
                        fin.append((toks, value, normalized(value, len(toks) + 1, alpha)))
                    continue
                live.append((parent, token, value))
            fin.sort(key=lambda h: (-h[2], h[0]))
            done = not live or step + 1 > limit_l[sent] or len(fin) >= K
            if not done and len(fin) >= n_best:
                done = normalized(live[0][2], limit_l[sent] + 1, alpha) <= fin[n_best - 1][2]
            if done:
                del fin[n_best:]
                continue
            next_active.append(sent)
            groups.append(a)
            for k in range(K):
                if k < len(live):
                    parent, token, value = live[k]
                    reorder.append(parent)
                    next_prev.append(token)
                    next_scores.append(value)
                    next_tokens.append(rows_tokens[parent] + [token])
                else:  # fewer live candidates than the beam (tiny vocabularies): a dead row
                    reorder.append(a * K)
                    next_prev.append(EOS_ID)
                    next_scores.append(NINF)
                    next_tokens.append([])
        step += 1
        if not next_active:
            break
        if len(next_active) != A:  # a sentence left: its memory rows go
            g = torch.tensor(groups, dtype=torch.long, device=dev)
            state.select_sentences(g)
            row_lim = row_lim.view(A, K).index_select(0, g).view(-1)
            row_min = row_min.view(A, K).index_select(0, g).view(-1) if row_min is not None else None
        state.reorder_hypotheses(torch.tensor(reorder, dtype=torch.long, device=dev))
        prev = torch.tensor(next_prev, dtype=torch.long, device=dev)
        row_score = torch.tensor(next_scores, dtype=torch.float32, device=dev).view(-1, K)
        rows_tokens = next_tokens
        active = next_active
    for fin in finished:
        fin.sort(key=lambda h: (-h[2], h[0]))
        del fin[n_best:]
    return finished


def collate_source(seqs, device):
    S = max(len(s) for s in seqs) + 1
    src = torch.full((len(seqs), S), PAD_ID, dtype=torch.long)
    for i, s in enumerate(seqs):
        src[i, :len(s) + 1] = torch.tensor(list(s) + [EOS_ID], dtype=torch.long)
    return src.to(device)


def plan_batches(lengths, batch_size, maxi_batch=20):
    """parla's maxi-batch: windows of maxi_batch x batch_size sentences, sorted longest first (ties by position)."""
    window = batch_size * maxi_batch
    out = []
    for w0 in range(0, len(lengths), window):
        idx = sorted(range(w0, min(w0 + window, len(lengths))), key=lambda i: (-lengths[i], i))
        out += [idx[i:i + batch_size] for i in range(0, len(idx), batch_size)]
    return out


def translate(model, sentences, args, device, force=None):
    """-> list of (tokens, log_prob, score) n-best lists in input order, and generated tokens (EOS included)."""
    results = [None] * len(sentences)
    steps = 0
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    for ids in plan_batches([len(s) for s in sentences], args.batch_size):
        src = collate_source([sentences[i] for i in ids], device)
        limits = torch.tensor([max_output_length(len(sentences[i]), args.max_length_factor, args.max_length_offset,
                                                 model.max_positions()) for i in ids], device=device)
        mins = None
        if force is not None:  # random weights: EOS exactly at the forced length
            limits = torch.tensor([force[i] for i in ids], device=device)
            mins = limits
        with torch.inference_mode(), torch.autocast(device.type, dtype=amp, enabled=amp is not None):
            if args.beam == 1:
                hyps = [[(t, lp, normalized(lp, len(t) + 1, args.length_penalty))] for t, lp in greedy(model, src, limits, mins)]
            else:
                hyps = beam_search(model, src, limits, args.beam, args.length_penalty, args.n_best, mins)
        for i, h in zip(ids, hyps):
            results[i] = h
            steps += len(h[0][0]) + 1
    return results, steps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", help="parla checkpoint (otherwise random weights from --preset/--vocab)")
    ap.add_argument("--preset", default="base", choices=sorted(pt.PRESETS))
    ap.add_argument("--vocab", type=int, default=32000, help="joint vocabulary of random weights (shared embeddings)")
    ap.add_argument("--input", required=True)
    ap.add_argument("--text", action="store_true", help="input is raw text: encode with the checkpoint's (or --spm) model")
    ap.add_argument("--spm", help="SentencePiece model file for --text")
    ap.add_argument("--output", help="write translations (ids, or text with --text); n-best as 'i ||| hyp ||| score'")
    ap.add_argument("--limit", type=int, default=0, help="translate only the first N lines")
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--n-best", type=int, default=1)
    ap.add_argument("--length-penalty", type=float, default=0.6)
    ap.add_argument("--max-length-factor", type=float, default=3.0)
    ap.add_argument("--max-length-offset", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--force-lengths", help="file: output tokens (without EOS) per input line; EOS is forced there")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"], help="autocast dtype")
    pt.add_runtime_args(ap)
    args = ap.parse_args()
    device = pt.apply_runtime_args(args)

    meta = {}
    if args.checkpoint:
        model, meta = pt.load_parla_checkpoint(args.checkpoint, device)
    else:
        d, f, h, le, ld, _ = pt.PRESETS[args.preset]
        cfg = pt.ModelConfig(d_model=d, ffn_dim=f, heads=h, encoder_layers=le, decoder_layers=ld, share_embeddings=True)
        model = pt.Transformer(cfg, args.vocab, args.vocab).to(device).eval()
    sp = None
    with open(args.input, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if args.limit:
        lines = lines[:args.limit]
    if args.text:
        import sentencepiece as spm  # only for text input
        sp = spm.SentencePieceProcessor()
        if args.spm:
            sp.Load(args.spm)
        else:
            sp.LoadFromSerializedProto(meta["src_spm"])
        sentences = [sp.EncodeAsIds(l) for l in lines]
    else:
        sentences = [[int(x) for x in l.split()] for l in lines]
    force = None
    if args.force_lengths:
        with open(args.force_lengths) as fh:
            force = [int(x) for x in fh.read().split()][:len(sentences)]
        if len(force) != len(sentences):
            raise SystemExit(f"{args.force_lengths}: {len(force)} lengths for {len(sentences)} sentences")

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    # Warm-up (kernel selection, allocator): the first batch's worth, untimed.
    warm = sentences[:args.batch_size]
    translate(model, warm, args, device, force[:len(warm)] if force else None)
    sync()
    t0 = time.perf_counter()
    results, steps = translate(model, sentences, args, device, force)
    sync()
    secs = time.perf_counter() - t0
    n = len(sentences)
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"reference translate: {n} sentences, beam {args.beam}, batch {args.batch_size}, {args.precision}, "
          f"{dev_name}, torch {torch.__version__}: {secs:.3f} s, {n / secs:.1f} sentences/s, "
          f"{steps / secs:.0f} generated tokens/s (EOS included), {sum(map(len, sentences)) / secs:.0f} source tokens/s")
    if args.output:
        tgt_sp = None
        if args.text and not args.spm:
            import sentencepiece as spm
            tgt_sp = spm.SentencePieceProcessor()
            tgt_sp.LoadFromSerializedProto(meta["tgt_spm"] or meta["src_spm"])
        elif args.text:
            tgt_sp = sp
        with open(args.output, "w", encoding="utf-8") as fh:
            for i, nbest in enumerate(results):
                for toks, lp, score in nbest:
                    hyp = tgt_sp.DecodeIds(toks) if tgt_sp else " ".join(map(str, toks))
                    fh.write(f"{i} ||| {hyp} ||| {score:.6g}\n" if args.n_best > 1 else hyp + "\n")


if __name__ == "__main__":
    main()
