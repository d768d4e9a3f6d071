#!/usr/bin/env python3
"""Joins runs of contiguous lines of a parallel corpus into long lines: a long-input task for attention variants.

Both sides are joined at the same line boundaries, so line i of the output on one side still translates line i
on the other. A run grows until its source side holds at least --min-words whitespace-separated words (with a
joint BPE vocabulary of 8,000 pieces, 400 German words are about 550-650 pieces); a last run shorter than that
is dropped. Runs never cross an empty line on either side.

    python3 tools/concat-lines.py --prefix ../shared/data/europarl-comtrans-de-en/comtrans --src de --tgt en \
        --min-words 400 --out data/comtrans-long/long

writes data/comtrans-long/long.de and .en (through temporary files renamed into place) and prints the number
of runs and their mean length in words on stderr.
"""
import argparse
import os
import sys


def read_lines(path):
    with open(path, encoding="utf-8", newline="\n") as f:
        return [line.rstrip("\n").rstrip("\r") for line in f]


def join_runs(src_lines, tgt_lines, min_words):
    """Yields (source, target) runs of contiguous non-empty lines with at least min_words source words."""
    run_src, run_tgt, words = [], [], 0
    for s, t in zip(src_lines, tgt_lines):
        if not s.strip() or not t.strip():
            run_src, run_tgt, words = [], [], 0  # a run never crosses a gap
            continue
        run_src.append(s.strip())
        run_tgt.append(t.strip())
        words += len(s.split())
        if words >= min_words:
            yield " ".join(run_src), " ".join(run_tgt)
            run_src, run_tgt, words = [], [], 0


def write_atomically(path, lines):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in lines:
            f.write(line + "\n")
    return tmp


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prefix", required=True, help="corpus prefix: reads PREFIX.SRC and PREFIX.TGT")
    ap.add_argument("--src", required=True, help="source language suffix")
    ap.add_argument("--tgt", required=True, help="target language suffix")
    ap.add_argument("--min-words", type=int, default=400, help="source words per joined line (default 400)")
    ap.add_argument("--out", required=True, help="output prefix: writes OUT.SRC and OUT.TGT")
    args = ap.parse_args()
    if args.min_words < 1:
        ap.error("--min-words must be at least 1")
    paths = [f"{args.prefix}.{args.src}", f"{args.prefix}.{args.tgt}"]
    try:
        src_lines, tgt_lines = (read_lines(p) for p in paths)
    except (OSError, UnicodeDecodeError) as e:
        print(f"concat-lines: {e}", file=sys.stderr)
        return 1
    if len(src_lines) != len(tgt_lines):
        print(f"concat-lines: {paths[0]} has {len(src_lines)} lines, {paths[1]} has {len(tgt_lines)}",
              file=sys.stderr)
        return 1
    runs = list(join_runs(src_lines, tgt_lines, args.min_words))
    if not runs:
        print(f"concat-lines: no run of {args.min_words} source words in {paths[0]}", file=sys.stderr)
        return 1
    out_dir = os.path.dirname(args.out)
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    outs = [f"{args.out}.{args.src}", f"{args.out}.{args.tgt}"]
    tmps = [write_atomically(outs[0], [r[0] for r in runs]), write_atomically(outs[1], [r[1] for r in runs])]
    for tmp, out in zip(tmps, outs):
        os.replace(tmp, out)
    mean = sum(len(r[0].split()) for r in runs) / len(runs)
    print(f"concat-lines: {len(runs)} runs, {mean:.0f} source words on average -> {outs[0]}, {outs[1]}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
