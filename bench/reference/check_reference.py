"""CPU checks of the PyTorch reference (tiny shapes, about a minute on 2 cores):

  1. a batch dump written by batches.write_batches reads back identically (PRLBAT01 format);
  2. 3 training steps on the replayed batches: every loss is finite, equals a float64 recomputation with parla's
     loss formula written out, and falls; F.cross_entropy's smoothing equals parla's formula (float64);
  3. the incremental decoder (KV cache) gives the teacher-forced log-probabilities, post- and pre-norm, odd
     d_model, and the beam search's scores equal a teacher-forced rescoring of its outputs;
  4. checkpoint equivalence with parla: the trained multi30k model translated by parla-translate (beam 5,
     2-best, no length penalty, so the printed score is log P(Y|X) with EOS) and by the reference: the texts
     must be equal and the scores within 1e-4 (plus the rounding of parla's 6 printed digits); also the
     reference's teacher-forced score of its own best output vs parla's printed score. Needs parla-translate
     (PARLA_TRANSLATE, or /work/main/build-torch2/bin, /work/main/build/bin) and python sentencepiece (only for
     this check; e.g. pip install --target /tmp/spm-pkgs sentencepiece and PYTHONPATH=/tmp/spm-pkgs); skipped
     with a note otherwise.

Command:  bench/reference/check_reference.sh   (or: python bench/reference/check_reference.py [--sentences N])
"""
from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import parla_transformer as pt  # noqa: E402
import translate_reference as tr  # noqa: E402
from batches import read_batches, synthetic_batches, write_batches  # noqa: E402
from train_reference import (make_optimizer, parla_loss_sum_reference, smoothed_loss_sum,  # noqa: E402
                             train_step)

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKPOINT = "/work/shared/models/multi30k-en-de-small/average.pt"
TEST_EN = "/work/shared/data/multi30k/test_2016_flickr.en"
failures = []


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures.append(what)


def tiny_model(vocab=60, norm="post", d=32, heads=4, dropout=0.0):
    cfg = pt.ModelConfig(d_model=d, ffn_dim=64, heads=heads, encoder_layers=2, decoder_layers=2, dropout=dropout,
                         norm=norm, share_embeddings=True)
    return pt.Transformer(cfg, vocab, vocab)


def check_replay_and_training(tmp: str) -> None:
    V = 60
    batches = synthetic_batches(3, 200, V, seed=3, mean_len=6)
    path = os.path.join(tmp, "tiny.prlbat")
    write_batches(path, batches)
    back = read_batches(path)
    same = len(back) == len(batches) and all(
        x.src.equal(y.src) and x.tgt_in.equal(y.tgt_in) and x.tgt_out.equal(y.tgt_out) for x, y in zip(batches, back))
    check(same, f"batch dump round trip: {len(back)} batches, shapes {[tuple(b.src.shape) for b in back]}")
    with open(path, "rb") as f:
        raw = f.read()
    check(raw[:8] == b"PRLBAT01" and int.from_bytes(raw[8:16], "little") == back[0].src.size(0),
          "dump starts with PRLBAT01 and little-endian int64 B")

    # Smoothing: F.cross_entropy(label_smoothing = eps V/(V-1)) == parla's formula, float64.
    torch.manual_seed(0)
    logits = torch.randn(2, 5, V, dtype=torch.float64)
    target = back[0].tgt_out[:2, :5].clone()
    target[0, -1] = pt.PAD_ID
    a, b = smoothed_loss_sum(logits, target, 0.1), parla_loss_sum_reference(logits, target, 0.1)
    check(abs(float(a - b)) < 1e-10 * abs(float(b)), f"smoothed loss: F.cross_entropy {float(a):.12f} == parla formula {float(b):.12f}")

    torch.manual_seed(1)
    model = tiny_model(V).train()  # dropout 0: the float64 recomputation sees the same function
    args = argparse.Namespace(lr=3e-3, weight_decay=0.0)
    opt, kind = make_optimizer(model, args, torch.device("cpu"))
    batch = back[0]
    losses = []
    for step in range(3):
        ref = copy.deepcopy(model).double()
        with torch.no_grad():
            want = float(parla_loss_sum_reference(ref(batch.src, batch.tgt_in), batch.tgt_out, 0.1)) / batch.tgt_tokens
        got = float(train_step(model, opt, batch, batch.tgt_tokens, 0.1, None, "cpu"))
        losses.append(got)
        check(torch.isfinite(torch.tensor(got)).item() and abs(got - want) < 1e-5 * abs(want),
              f"train step {step + 1} (AdamW {kind}): loss {got:.7f} == float64 recomputation {want:.7f}")
    check(losses[2] < losses[1] < losses[0], f"loss falls over 3 steps: {losses}")
    # bf16 autocast on the CPU runs too (the CUDA path's code).
    got = float(train_step(model, opt, back[1], back[1].tgt_tokens, 0.1, torch.bfloat16, "cpu"))
    check(torch.isfinite(torch.tensor(got)).item(), f"bf16 autocast step (CPU) loss {got:.4f} finite")


def check_incremental() -> None:
    torch.manual_seed(2)
    V = 40
    for norm, d, heads in (("post", 32, 4), ("pre", 33, 3)):
        model = tiny_model(V, norm, d, heads).eval()
        src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0]])
        tgt = torch.tensor([[2, 11, 12, 13, 14], [2, 15, 16, 17, 18]])
        with torch.no_grad():
            full = torch.log_softmax(model(src, tgt), -1)
            state = model.start(src)
            steps = torch.stack([model.step(tgt[:, t], state) for t in range(tgt.size(1))], 1)
        diff = (full - steps).abs().max().item()
        check(diff < 1e-5, f"incremental decoder == teacher forcing ({norm}-norm, d_model {d}): max |diff| {diff:.2e}")
    # Beam search scores == teacher-forced rescoring of its outputs (cache reorders, shared memory rows).
    model = tiny_model(V, "post").eval()
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 0, 0], [20, 3, 0, 0, 0]])
    limits = torch.tensor([6, 6, 6])
    with torch.no_grad():
        nbest = tr.beam_search(model, src, limits, 4, 0.0, n_best=2)
        worst = 0.0
        for i, hyps in enumerate(nbest):
            for toks, lp, _ in hyps:
                ids = torch.tensor([[pt.BOS_ID] + toks])
                out = torch.tensor([toks + [pt.EOS_ID]])
                s = src[i:i + 1, :int(src[i].ne(0).sum())]
                lps = torch.log_softmax(model(s, ids), -1).gather(2, out.unsqueeze(2)).sum().item()
                worst = max(worst, abs(lps - lp))
        greedy = tr.greedy(model, src, limits)
        g_ok = all(g[0] == nb[0][0] or g[1] <= nb[0][1] + 1e-5 for g, nb in zip(greedy, tr.beam_search(model, src, limits, 4, 0.0)))
    check(worst < 1e-4, f"beam search log-probs == teacher-forced rescoring: max |diff| {worst:.2e}")
    check(g_ok, "beam 4 never scores below greedy")


def find_parla() -> str | None:
    for p in (os.environ.get("PARLA_TRANSLATE"), "/work/main/build-torch2/bin/parla-translate",
              "/work/main/build/bin/parla-translate"):
        if p and os.path.exists(p):
            return p
    return None


def check_checkpoint(n: int, tmp: str) -> None:
    parla = find_parla()
    try:
        import sentencepiece as spm
    except ImportError:
        spm = None
    if not (parla and spm and os.path.exists(CHECKPOINT)):
        print(f"skip  checkpoint equivalence (parla-translate {parla}, sentencepiece {spm is not None}, "
              f"checkpoint {os.path.exists(CHECKPOINT)})")
        return
    model, meta = pt.load_parla_checkpoint(CHECKPOINT)
    check(True, f"loaded {CHECKPOINT} into the reference ({sum(p.numel() for p in model.parameters())} parameters)")
    sp = spm.SentencePieceProcessor()
    sp.LoadFromSerializedProto(meta["src_spm"])
    with open(TEST_EN, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f][:n]
    inp = os.path.join(tmp, "in.en")
    with open(inp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    out = subprocess.run([parla, "-q", "-m", CHECKPOINT, "-b", "5", "-n", "2", "--lenpen", "0", "--threads", "1",
                          "-i", inp], capture_output=True, text=True)
    if out.returncode != 0:
        check(False, f"parla-translate failed ({out.returncode}): {out.stderr[-300:]}")
        return
    parla_nbest = [[] for _ in lines]
    for row in out.stdout.splitlines():
        i, text, score = row.split(" ||| ")
        parla_nbest[int(i)].append((text, score))
    sentences = [sp.EncodeAsIds(l) for l in lines]
    args = argparse.Namespace(precision="fp32", batch_size=64, beam=5, length_penalty=0.0, n_best=2,
                              max_length_factor=3.0, max_length_offset=10)
    with torch.no_grad():
        ours, _ = tr.translate(model, sentences, args, torch.device("cpu"))
    same_text, worst, worst_excess, worst_tf, count = 0, 0.0, 0.0, 0.0, 0
    for i, (mine, theirs) in enumerate(zip(ours, parla_nbest)):
        for k, ((toks, lp, score), (text, printed)) in enumerate(zip(mine, theirs)):
            same_text += sp.DecodeIds(toks) == text
            count += 1
            p = float(printed)
            digits = printed.lstrip("-").split("e")[0]
            ulp = 10.0 ** (-(len(digits.split(".")[1]) if "." in digits else 0)) / 2  # printed to 6 digits
            diff = abs(score - p)
            worst = max(worst, diff)
            worst_excess = max(worst_excess, diff - ulp)
            if k == 0:  # teacher-forced score of the same tokens with the full (training) forward pass
                s = torch.tensor([sentences[i] + [pt.EOS_ID]])
                ids, target = torch.tensor([[pt.BOS_ID] + toks]), torch.tensor([toks + [pt.EOS_ID]])
                with torch.no_grad():
                    tf = torch.log_softmax(model(s, ids), -1).gather(2, target.unsqueeze(2)).sum().item()
                worst_tf = max(worst_tf, abs(tf - p) - ulp)
    check(same_text == count, f"checkpoint: {same_text}/{count} n-best translations of {len(lines)} sentences "
          f"identical to parla-translate's (beam 5, 2-best)")
    check(worst_excess < 1e-4, f"checkpoint: |reference log P - parla log P| max {worst:.2e} over {count} hypotheses "
          f"(beyond the rounding of parla's printed digits: {max(worst_excess, 0):.2e}) < 1e-4")
    check(worst_tf < 1e-4, f"checkpoint: teacher-forced reference score of the best outputs vs parla's: max excess "
          f"over print rounding {max(worst_tf, 0):.2e} < 1e-4")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sentences", type=int, default=30, help="multi30k test sentences for the checkpoint check")
    a = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        check_replay_and_training(tmp)
        check_incremental()
        check_checkpoint(a.sentences, tmp)
    print("all checks passed" if not failures else f"{len(failures)} check(s) FAILED")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
