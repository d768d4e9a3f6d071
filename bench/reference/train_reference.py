"""Training throughput of the PyTorch reference Transformer on parla's batches: the peer of parla-train's speed.

One update per batch, as parla with update_freq 1: bf16 autocast around forward + loss (CUDA; CPU only when
asked), label-smoothed cross entropy summed over the non-pad target tokens and divided by their count
(lib/train/label_smoothed_cross_entropy.cpp, trainer.cpp), backward, AdamW (betas 0.9/0.98, eps 1e-9 as parla's
defaults; fused=True where this PyTorch has it for the device), learning rate from parla's inverse_sqrt schedule
with linear warm-up. tokens/s counts src + tgt non-pad tokens, as parla's progress line does (Task::batch_tokens),
median over the steps after --warmup (timed one by one, torch.cuda.synchronize() before each clock read).
Model FLOP utilisation: 3 x the forward matmul FLOPs of bench/bench_model.cpp's formula on the padded batch,
against a large bf16 matmul measured in the same run (CUDA).

Commands:
  # parla's dumped batches (PRLBAT01, see batches.py), base model, shared 32k vocabulary, bf16, on the GPU:
  python bench/reference/train_reference.py --batches base_batches.prlbat --preset base --vocab 32000 --steps 200
  # no dump: synthetic batches of parla's shapes (25k padded src+tgt tokens):
  python bench/reference/train_reference.py --synthetic 40 --batch-tokens 25000 --preset base --vocab 32000 --steps 200
  # model section from a parla config instead of a preset:
  python bench/reference/train_reference.py --config configs/some.json --batches b.prlbat --vocab 32000
  # CPU smoke run:
  python bench/reference/train_reference.py --synthetic 4 --batch-tokens 600 --preset tiny --vocab 500 --steps 4 --warmup 1 --device cpu --precision fp32
"""
from __future__ import annotations

import argparse
import inspect
import json
import statistics
import time

import torch
import torch.nn.functional as F

import parla_transformer as pt
from batches import Batch, read_batches, synthetic_batches
from parla_transformer import PAD_ID


def smoothed_loss_sum(logits: torch.Tensor, target: torch.Tensor, epsilon: float) -> torch.Tensor:
    """SUM over non-pad tokens of parla's label-smoothed loss.

    parla (as fairseq) spreads epsilon over the V-1 wrong classes: (1 - eps - eps/(V-1)) nll + eps/(V-1) sum(-log p).
    F.cross_entropy spreads its label_smoothing s over all V classes: (1 - s) nll + s/V sum(-log p). The two are
    equal for s = eps V / (V - 1), so the fused PyTorch loss computes exactly parla's (checked in float64 by
    check_reference.py). Under autocast cross_entropy runs in float32, as parla's .to(kFloat)."""
    V = logits.size(-1)
    s = epsilon * V / (V - 1) if V > 1 else 0.0
    x = logits.reshape(-1, V)
    if x.dtype in (torch.bfloat16, torch.float16):
        x = x.float()
    return F.cross_entropy(x, target.reshape(-1), ignore_index=PAD_ID, reduction="sum",
                           label_smoothing=s)


def parla_loss_sum_reference(logits: torch.Tensor, target: torch.Tensor, epsilon: float) -> torch.Tensor:
    """parla's formula written out (for the check, not for speed)."""
    V = logits.size(-1)
    lp = torch.log_softmax(logits.reshape(-1, V), -1)
    tgt = target.reshape(-1)
    keep = tgt.ne(PAD_ID)
    nll = (-lp.gather(1, tgt.unsqueeze(1)).squeeze(1)).masked_fill(~keep, 0).sum()
    smooth = (-lp.sum(-1)).masked_fill(~keep, 0).sum()
    e_i = epsilon / (V - 1)
    return (1 - epsilon - e_i) * nll + e_i * smooth


def inverse_sqrt_lr(step: int, lr: float, warmup: int) -> float:
    # lib/train/lr_schedule.cpp: linear warm-up to lr, then lr * sqrt(warmup / step).
    step = max(step, 1)
    if warmup > 0 and step < warmup:
        return lr * step / warmup
    return lr * (max(warmup, 1) / step) ** 0.5


def make_optimizer(model, args, device):
    kw = dict(lr=args.lr, betas=(0.9, 0.98), eps=1e-9, weight_decay=args.weight_decay)
    if "fused" in inspect.signature(torch.optim.AdamW).parameters:
        try:
            opt = torch.optim.AdamW(model.parameters(), fused=True, **kw)
            return opt, "fused"
        except (RuntimeError, ValueError) as e:  # fused is CUDA-only in some versions
            print(f"note: AdamW(fused=True) is not available on {device.type} ({str(e)[:100]}); using foreach")
    return torch.optim.AdamW(model.parameters(), foreach=True, **kw), "foreach"


def train_step(model, opt, batch: Batch, tokens: int, epsilon: float, amp_dtype, device_type: str,
               clip_norm: float = 0.0):
    """One update normalised by `tokens` (the update's non-pad target tokens, counted on the host so that the
    step needs no device sync); returns the loss per target token (a tensor, not synchronised)."""
    with torch.autocast(device_type, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
        logits = model(batch.src, batch.tgt_in)
        loss = smoothed_loss_sum(logits, batch.tgt_out, epsilon) / tokens
    loss.backward()
    if clip_norm > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm, foreach=True)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()


def matmul_ceiling(device, dtype, n=8192, reps=10):
    """Median TFLOP/s of an n x n x n matmul in dtype, measured now."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    rates = []
    for i in range(reps + 2):
        torch.cuda.synchronize() if device.type == "cuda" else None
        t = time.perf_counter()
        a @ b
        torch.cuda.synchronize() if device.type == "cuda" else None
        if i >= 2:
            rates.append(2 * n ** 3 / (time.perf_counter() - t) / 1e12)
    return statistics.median(rates)


def build_model(args, vocab):
    if args.config:
        with open(args.config) as f:
            section = json.load(f).get("model", {})
        cfg = pt.ModelConfig.from_parla(section)
    else:
        d, ff, h, le, ld, drop = pt.PRESETS[args.preset]
        cfg = pt.ModelConfig(d_model=d, ffn_dim=ff, heads=h, encoder_layers=le, decoder_layers=ld, dropout=drop,
                             share_embeddings=not args.no_share)
    if args.dropout is not None:
        cfg.dropout = args.dropout
    return pt.Transformer(cfg, vocab, vocab), cfg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--batches", help="parla batch dump (PRLBAT01)")
    src.add_argument("--synthetic", type=int, metavar="N", help="N synthetic batches of parla's shapes")
    ap.add_argument("--batch-tokens", type=int, default=25000, help="synthetic: padded src+tgt tokens per batch")
    ap.add_argument("--vocab", type=int, default=32000, help="joint vocabulary size (ids must be below it)")
    ap.add_argument("--preset", default="base", choices=sorted(pt.PRESETS))
    ap.add_argument("--config", help="parla config JSON; its model section replaces --preset")
    ap.add_argument("--no-share", action="store_true", help="separate source and target embeddings")
    ap.add_argument("--dropout", type=float, help="override the model's dropout")
    ap.add_argument("--steps", type=int, default=100, help="updates (batches are cycled)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    ap.add_argument("--lr", type=float, default=7e-4)
    ap.add_argument("--lr-warmup", type=int, default=4000, help="schedule warm-up steps (parla's warmup_steps)")
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--label-smoothing", type=float, default=0.1)
    ap.add_argument("--clip-norm", type=float, default=0.0)
    ap.add_argument("--precision", default=None, choices=["bf16", "fp32"], help="default: bf16 on CUDA, fp32 on CPU")
    pt.add_runtime_args(ap)
    args = ap.parse_args()
    device = pt.apply_runtime_args(args)
    precision = args.precision or ("bf16" if device.type == "cuda" else "fp32")
    amp = torch.bfloat16 if precision == "bf16" else None

    batches = read_batches(args.batches) if args.batches else synthetic_batches(args.synthetic, args.batch_tokens, args.vocab, args.seed)
    top = max(int(t.max()) for b in batches for t in (b.src, b.tgt_in, b.tgt_out))
    if top >= args.vocab:
        raise SystemExit(f"token id {top} is outside --vocab {args.vocab}")
    model, cfg = build_model(args, args.vocab)
    model.to(device).train()
    opt, kind = make_optimizer(model, args, device)
    params = sum(p.numel() for p in model.parameters())

    # Counts and FLOPs on the host, batches moved to the device once: the timed loop is model work only.
    dev_batches = []
    for b in batches:
        d = b.to(device)
        d.tgt_tokens_cached = b.tgt_tokens
        d.tokens = b.src_tokens + b.tgt_tokens
        d.flops = 3 * pt.forward_flops(cfg, b.src.numel(), b.tgt_in.numel(), b.src.size(1), b.tgt_in.size(1), args.vocab)
        dev_batches.append(d)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize()

    times, tok_rates, flop_rates, losses = [], [], [], []
    for step in range(1, args.steps + 1):
        b = dev_batches[(step - 1) % len(dev_batches)]
        lr = inverse_sqrt_lr(step, args.lr, args.lr_warmup)
        for g in opt.param_groups:
            g["lr"] = lr
        sync()
        t = time.perf_counter()
        loss = train_step(model, opt, b, b.tgt_tokens_cached, args.label_smoothing, amp, device.type, args.clip_norm)
        sync()
        dt = time.perf_counter() - t
        losses.append(float(loss))
        if step > args.warmup:
            times.append(dt)
            tok_rates.append(b.tokens / dt)
            flop_rates.append(b.flops / dt)
    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"reference train: {dev_name}, torch {torch.__version__}, {precision}, AdamW {kind}, "
          f"d {cfg.d_model} ffn {cfg.ffn_dim} heads {cfg.heads} layers {cfg.encoder_layers}+{cfg.decoder_layers} "
          f"vocab {args.vocab} shared {cfg.share_embeddings}, {params / 1e6:.1f}M params, {len(batches)} batches "
          f"(mean {statistics.mean(b.tokens for b in dev_batches):.0f} src+tgt tokens, "
          f"{statistics.mean(b.src.numel() + b.tgt_in.numel() for b in dev_batches):.0f} padded)")
    print("loss per step: " + " ".join(f"{l:.4f}" for l in losses[:5]) + (" ... " + f"{losses[-1]:.4f}" if len(losses) > 5 else ""))
    if not times:
        print("no timed steps (raise --steps above --warmup)")
        return
    med_tok = statistics.median(tok_rates)
    med_flop = statistics.median(flop_rates)
    line = (f"median over {len(times)} steps: {statistics.median(times) * 1e3:.1f} ms/step, {med_tok:,.0f} src+tgt tokens/s, "
            f"{med_flop / 1e12:.2f} model TFLOP/s")
    if device.type == "cuda":
        ceiling = matmul_ceiling(device, torch.bfloat16 if amp is not None else torch.float32)
        line += f", {100 * med_flop / 1e12 / ceiling:.0f}% of the {ceiling:.0f} TFLOP/s 8192^3 matmul measured now"
    print(line)


if __name__ == "__main__":
    main()
