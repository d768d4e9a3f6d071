"""Training batches for the PyTorch reference: parla's batch dump format (read and write) and a synthetic
generator of batches shaped like parla's, for runs without a dump.

Dump format (little-endian), as parla writes it:
    8 bytes magic b"PRLBAT01", then per batch: int64 B, int64 S, int64 T,
    src int64[B*S], tgt_in int64[B*T], tgt_out int64[B*T]
src ends with EOS and is PAD-padded; tgt_in = BOS y, tgt_out = y EOS (lib/data/batch.h), PAD = 0.

Write a synthetic dump (e.g. to hand to both sides):
    python bench/reference/batches.py --out /tmp/base.prlbat --batches 50 --batch-tokens 25000 --vocab 32000
Import-only otherwise (train_reference.py reads dumps with read_batches).
"""
from __future__ import annotations

import argparse
import random
import struct
import sys
from dataclasses import dataclass

import torch

from parla_transformer import BOS_ID, EOS_ID, PAD_ID

MAGIC = b"PRLBAT01"
_HEADER = struct.Struct("<qqq")


@dataclass
class Batch:
    src: torch.Tensor      # int64 [B, S]
    tgt_in: torch.Tensor   # int64 [B, T]
    tgt_out: torch.Tensor  # int64 [B, T]

    @property
    def src_tokens(self) -> int:  # non-pad, EOS included (parla's Batch::src_tokens)
        return int(self.src.ne(PAD_ID).sum())

    @property
    def tgt_tokens(self) -> int:  # non-pad tgt_out tokens = tokens predicted (parla's Batch::tgt_tokens)
        return int(self.tgt_out.ne(PAD_ID).sum())

    def to(self, device) -> "Batch":
        return Batch(*(t.to(device, non_blocking=True) for t in (self.src, self.tgt_in, self.tgt_out)))


def _le_int64(raw: bytes, n: int) -> torch.Tensor:
    t = torch.frombuffer(bytearray(raw), dtype=torch.int64, count=n) if n else torch.zeros(0, dtype=torch.int64)
    # The file is little-endian whatever the host; torch.frombuffer reads host order.
    return t.byteswap() if sys.byteorder == "big" and hasattr(t, "byteswap") else t


def read_batches(path: str) -> list[Batch]:
    """All batches of a dump (errors name the file and the batch)."""
    out = []
    with open(path, "rb") as f:
        if f.read(8) != MAGIC:
            raise ValueError(f"{path}: not a parla batch dump (magic {MAGIC!r} expected)")
        while True:
            head = f.read(_HEADER.size)
            if not head:
                return out
            if len(head) != _HEADER.size:
                raise ValueError(f"{path}: truncated header of batch {len(out)}")
            B, S, T = _HEADER.unpack(head)
            if min(B, S, T) < 0:
                raise ValueError(f"{path}: batch {len(out)} has negative shape {(B, S, T)}")
            parts = []
            for n, shape in ((B * S, (B, S)), (B * T, (B, T)), (B * T, (B, T))):
                raw = f.read(8 * n)
                if len(raw) != 8 * n:
                    raise ValueError(f"{path}: batch {len(out)} is truncated")
                parts.append(_le_int64(raw, n).view(shape).clone())
            out.append(Batch(*parts))


def write_batches(path: str, batches) -> None:
    with open(path, "wb") as f:
        f.write(MAGIC)
        for b in batches:
            B, S = b.src.shape
            T = b.tgt_in.size(1)
            assert b.tgt_out.shape == (B, T) and b.tgt_in.size(0) == B
            f.write(_HEADER.pack(B, S, T))
            for t in (b.src, b.tgt_in, b.tgt_out):
                f.write(struct.pack(f"<{t.numel()}q", *t.reshape(-1).tolist()))


def collate(pairs) -> Batch:
    """pairs of (source ids, target ids) without EOS/BOS -> a padded Batch as parla's collate_parallel."""
    B = len(pairs)
    S = max(len(s) for s, _ in pairs) + 1
    T = max(len(t) for _, t in pairs) + 1
    src = torch.full((B, S), PAD_ID, dtype=torch.int64)
    tgt_in = torch.full((B, T), PAD_ID, dtype=torch.int64)
    tgt_out = torch.full((B, T), PAD_ID, dtype=torch.int64)
    for i, (s, t) in enumerate(pairs):
        src[i, :len(s) + 1] = torch.tensor(list(s) + [EOS_ID])
        tgt_in[i, :len(t) + 1] = torch.tensor([BOS_ID] + list(t))
        tgt_out[i, :len(t) + 1] = torch.tensor(list(t) + [EOS_ID])
    return Batch(src, tgt_in, tgt_out)


def synthetic_batches(n_batches: int, batch_tokens: int, vocab: int, seed: int = 1, mean_len: float = 27.0,
                      max_len: int = 256) -> list[Batch]:
    """Batches as parla's plan_epoch cuts them: pairs sorted by (target, source) length and cut greedily so that
    sentences x (max source + max target length, with EOS/BOS) <= batch_tokens, then shuffled. Lengths are
    log-normal around mean_len (roughly WMT14 en-de with a 32k joint vocabulary), ids uniform over real pieces."""
    rng = random.Random(seed)
    pairs = []
    want = int(n_batches * batch_tokens / 2 / mean_len * 1.3) + 64
    for _ in range(want):
        ls = min(max_len - 1, max(1, int(rng.lognormvariate(0, 0.55) * mean_len * 0.87)))
        lt = min(max_len - 1, max(1, int(ls * rng.uniform(0.8, 1.25))))
        pairs.append((ls, lt))
    pairs.sort(key=lambda p: (p[1], p[0]))
    plans, cur, ms, mt = [], [], 0, 0
    for ls, lt in pairs:
        s2, t2 = max(ms, ls + 1), max(mt, lt + 1)
        if cur and (len(cur) + 1) * (s2 + t2) > batch_tokens:
            plans.append(cur)
            cur, s2, t2 = [], ls + 1, lt + 1
        cur.append((ls, lt))
        ms, mt = s2, t2
    if cur:
        plans.append(cur)
    rng.shuffle(plans)
    out = []
    for plan in plans[:n_batches]:
        out.append(collate([([rng.randrange(4, vocab) for _ in range(ls)], [rng.randrange(4, vocab) for _ in range(lt)])
                            for ls, lt in plan]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", type=int, default=50)
    ap.add_argument("--batch-tokens", type=int, default=25000)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    bs = synthetic_batches(a.batches, a.batch_tokens, a.vocab, a.seed)
    write_batches(a.out, bs)
    print(f"wrote {len(bs)} batches to {a.out}: {sum(b.src_tokens + b.tgt_tokens for b in bs)} src+tgt tokens")


if __name__ == "__main__":
    main()
