"""Operators per update of the PyTorch reference's training step: the peer of `bench_train --count-ops`.

The reference model (bench/reference/parla_transformer.py) trains on bench_train's batch shape (128 pairs of 31
tokens + EOS/BOS per side, vocabulary 8,000) with bench/reference/train_reference.py's step: autocast, the fused
label-smoothed loss, backward, clip_grad_norm_(foreach=True) when --clip-norm > 0, AdamW(fused=True) where this
PyTorch has it for the device (else foreach), zero_grad(set_to_none=True). torch.profiler records updates 2..5
(the first makes AdamW's state); an operator counts when it is called at the top level of a phase, as parla's
runtime/operator_counter.h counts: the children of the forward and update scopes and of each autograd backward
function. Host syncs: .item()/nonzero inside a phase. Prints the same line as parla:

  count-ops MODEL: operators per update T (forward F, backward B, update U, other O), host syncs per update H,
  distinct batch shapes S

Usage: python bench/peers/pytorch_ops.py MODEL [--layers 3,6,12] [--device cpu] [--precision fp32]
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference"))
import parla_transformer as pt  # noqa: E402
from batches import Batch  # noqa: E402
from train_reference import make_optimizer, smoothed_loss_sum  # noqa: E402

VOCAB, LEN, ROWS, COUNTED = 8000, 31, 128, 4
SYNCS = {"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero", "aten::nonzero"}
PHASES = {"parla::forward": "forward", "parla::update": "update"}


def batch(step: int, device) -> Batch:
    g = torch.Generator().manual_seed(step)
    ids = lambda: torch.randint(4, VOCAB, (ROWS, LEN + 1), generator=g)  # noqa: E731
    return Batch(ids(), ids(), ids()).to(device)


def phase_of(event) -> str | None:
    """The phase whose top level `event` is at, or None (nested inside another operator)."""
    parent = event.cpu_parent
    if parent is None:
        return None
    if parent.name in PHASES:
        return PHASES[parent.name]
    if parent.name.startswith("autograd::engine::evaluate_function"):
        return "backward"
    return None


def count(model, opt, device, amp, clip_norm: float, steps: int) -> collections.Counter:
    counts = collections.Counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for step in range(steps):
            b = batch(step, device)
            tokens = ROWS * (LEN + 1)
            with torch.profiler.record_function("parla::forward"):
                with torch.autocast(device.type, dtype=amp or torch.float32, enabled=amp is not None):
                    loss = smoothed_loss_sum(model(b.src, b.tgt_in), b.tgt_out, 0.1) / tokens
            loss.backward()
            with torch.profiler.record_function("parla::update"):
                if clip_norm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm, foreach=True)
                opt.step()
                opt.zero_grad(set_to_none=True)
    for e in prof.events():
        phase = phase_of(e)
        if phase is None:
            continue
        counts[phase] += 1
        if e.name in SYNCS:
            counts["host_syncs"] += 1
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(pt.PRESETS))
    ap.add_argument("--layers", default="", help="comma list of layers per stack (default: the preset's)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    ap.add_argument("--clip-norm", type=float, default=0.0, help="parla's training.clip_norm (default 0: off)")
    args = ap.parse_args()
    device = torch.device(args.device)
    amp = torch.bfloat16 if args.precision == "bf16" else None
    d, ff, h, le, ld, drop = pt.PRESETS[args.model]
    for layers in (args.layers.split(",") if args.layers else [""]):
        n = int(layers) if layers else le
        torch.manual_seed(1)
        cfg = pt.ModelConfig(d_model=d, ffn_dim=ff, heads=h, encoder_layers=n, decoder_layers=n, dropout=drop,
                             share_embeddings=True)
        model = pt.Transformer(cfg, VOCAB, VOCAB).to(device).train()
        opt, kind = make_optimizer(model, argparse.Namespace(lr=7e-4, weight_decay=0.0), device)
        count(model, opt, device, amp, args.clip_norm, 1)  # the first update makes AdamW's state
        total = count(model, opt, device, amp, args.clip_norm, COUNTED)  # updates 2..5
        per = {k: total[k] / COUNTED for k in ("forward", "backward", "update", "host_syncs")}
        ops = per["forward"] + per["backward"] + per["update"]
        print(f"count-ops {args.model}{'@' + layers if layers else ''}: operators per update {ops:.0f} "
              f"(forward {per['forward']:.0f}, backward {per['backward']:.0f}, update {per['update']:.0f}, other 0), "
              f"host syncs per update {per['host_syncs']:.2f}, distinct batch shapes 1  "
              f"[PyTorch {torch.__version__} {args.device} {args.precision}, AdamW {kind}, {n}+{n} layers]")


if __name__ == "__main__":
    main()
