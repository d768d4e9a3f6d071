#!/usr/bin/env python3
"""Renders the attention of one translated sentence as an SVG heatmap (python3 standard library only).

Input: parla-translate output made with `--alignment soft`, i.e. lines `translation ||| w,w,... w,w,...` (one
comma-separated group per target piece including EOS, one weight per source piece including EOS), or n-best
lines `i ||| translation ||| score ||| w,w ...`.

    parla-translate -m model.pt --alignment soft < in.de > out.soft
    tools/attention-heatmap.py out.soft --line 3 --source "das Haus ist klein" -o attention.svg

Rows are target positions, columns source positions; darker = more attention. Labels default to positions;
--source / --target give space-separated labels (e.g. the SentencePiece pieces, from spm_encode).
"""
import argparse
import html
import sys


def parse_matrix(line):
    fields = [f.strip() for f in line.rstrip("\n").split("|||")]
    if len(fields) < 2:
        raise ValueError("no ' ||| ' alignment field: was the file made with --alignment soft?")
    text, soft = fields[-3] if len(fields) >= 4 else fields[0], fields[-1]
    rows = []
    for group in soft.split():
        rows.append([float(x) for x in group.split(",")])
    if not rows:
        raise ValueError("empty attention matrix (empty input line?)")
    width = len(rows[0])
    if any(len(r) != width for r in rows):
        raise ValueError("rows of different lengths: not a soft alignment")
    return text, rows


def render(rows, src_labels, tgt_labels, title):
    cell, left, top = 28, 120, 120
    n_tgt, n_src = len(rows), len(rows[0])
    w, h = left + cell * n_src + 20, top + cell * n_tgt + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<text x="4" y="14" font-size="12">{html.escape(title)}</text>']
    for s in range(n_src):
        x = left + s * cell + cell / 2
        label = html.escape(src_labels[s] if s < len(src_labels) else ("</s>" if s == n_src - 1 else str(s)))
        out.append(f'<text transform="translate({x},{top - 6}) rotate(-60)">{label}</text>')
    for t in range(n_tgt):
        y = top + t * cell
        label = html.escape(tgt_labels[t] if t < len(tgt_labels) else ("</s>" if t == n_tgt - 1 else str(t)))
        out.append(f'<text x="{left - 6}" y="{y + cell * 0.65}" text-anchor="end">{label}</text>')
        for s, v in enumerate(rows[t]):
            v = min(max(v, 0.0), 1.0)
            shade = int(round(255 * (1 - v)))
            out.append(f'<rect x="{left + s * cell}" y="{y}" width="{cell}" height="{cell}" '
                       f'fill="rgb({shade},{shade},255)" stroke="#ddd"><title>{v:.3f}</title></rect>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("input", help="parla-translate output made with --alignment soft ('-' = stdin)")
    p.add_argument("--line", type=int, default=1, help="1-based line of the input to render (default 1)")
    p.add_argument("--source", default="", help="space-separated source labels (default: positions)")
    p.add_argument("--target", default="", help="space-separated target labels (default: positions)")
    p.add_argument("-o", "--output", default="-", help="SVG file to write ('-' = stdout)")
    a = p.parse_args(argv)
    stream = sys.stdin if a.input == "-" else open(a.input, encoding="utf-8", errors="replace")
    with stream:
        lines = stream.readlines()
    if not 1 <= a.line <= len(lines):
        p.error(f"--line {a.line} is outside the file ({len(lines)} lines)")
    try:
        text, rows = parse_matrix(lines[a.line - 1])
    except ValueError as e:
        print(f"attention-heatmap: line {a.line}: {e}", file=sys.stderr)
        return 1
    svg = render(rows, a.source.split(), a.target.split(), text)
    if a.output == "-":
        sys.stdout.write(svg)
    else:
        tmp = a.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(svg)
        import os
        os.replace(tmp, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
