#!/usr/bin/env python3
"""Draws training and validation curves from parla's metrics JSON-lines file as an SVG (standard library only).

Each line of metrics.jsonl is one JSON object. Training records carry "loss" (and optionally "ppl", "lr");
validation records carry "valid_loss" / "valid_bleu" / "valid_ppl". Records may also say
"type": "train" | "valid", in which case a valid record's plain "loss"/"bleu"/"ppl" keys are its validation
figures. Every record needs "step". Several files (e.g. several runs) may be given; each becomes its own series.

    tools/plot-curves.py model/metrics.jsonl -o curves.svg
    tools/plot-curves.py run-a/metrics.jsonl run-b/metrics.jsonl -o compare.svg --title "a vs b"

The picture has one panel per quantity present: loss (training and validation), validation BLEU, and
learning rate. Exit codes follow parla's: 0 ok, 1 bad input data, 2 bad usage.
"""
import argparse
import json
import math
import os
import sys
import tempfile
from xml.sax.saxutils import escape

# Series colours (Okabe-Ito, readable by colour-blind readers).
COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]

PANEL_W, PANEL_H = 720, 260
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 80, 180, 40, 50


class DataError(Exception):
    pass


def number(value, where, key):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where}: key '{key}' must be a number, not {json.dumps(value)}")
    value = float(value)
    return value if math.isfinite(value) else None  # a diverged (inf/nan) point is left out, not plotted


def read_metrics(path):
    """Returns {"train_loss": [(step, v)], "valid_loss": [...], "valid_bleu": [...], "lr": [...]}."""
    series = {"train_loss": [], "valid_loss": [], "valid_bleu": [], "lr": []}
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise DataError(f"{path}: cannot open: {e.strerror}")
    with f:
        for lineno, line in enumerate(f, 1):
            where = f"{path}:{lineno}"
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{where}: not valid JSON: {e.msg}")
            if not isinstance(rec, dict):
                raise DataError(f"{where}: expected a JSON object")
            if "step" not in rec:
                raise DataError(f"{where}: record has no 'step'")
            step = number(rec["step"], where, "step")
            if step is None:
                raise DataError(f"{where}: 'step' must be finite")
            kind = rec.get("type")
            if kind not in (None, "train", "valid"):
                continue  # other record types (e.g. "info") are not curves
            pairs = []
            if kind == "valid":
                pairs += [("valid_loss", k) for k in ("valid_loss", "loss") if k in rec][:1]
                pairs += [("valid_bleu", k) for k in ("valid_bleu", "bleu") if k in rec][:1]
            else:
                if "loss" in rec:
                    pairs.append(("train_loss", "loss"))
                if "lr" in rec:
                    pairs.append(("lr", "lr"))
                for k in ("valid_loss", "valid_bleu"):
                    if k in rec:
                        pairs.append((k, k))
            for name, key in pairs:
                v = number(rec[key], where, key)
                if v is not None:
                    series[name].append((step, v))
    for points in series.values():
        points.sort(key=lambda p: p[0])
    return series


def nice_ticks(lo, hi, count=5):
    """Round tick values covering [lo, hi] (Heckbert, "Nice numbers for graph labels", Graphics Gems 1990)."""
    if hi <= lo:
        pad = abs(lo) * 0.1 or 1.0
        lo, hi = lo - pad, hi + pad

    def nice(x, round_):
        e = math.floor(math.log10(x))
        f = x / 10 ** e
        if round_:
            n = 1 if f < 1.5 else 2 if f < 3 else 5 if f < 7 else 10
        else:
            n = 1 if f <= 1 else 2 if f <= 2 else 5 if f <= 5 else 10
        return n * 10 ** e

    step = nice(nice(hi - lo, False) / (count - 1), True)
    start = math.floor(lo / step) * step
    end = math.ceil(hi / step) * step
    ticks, t = [], start
    while t <= end + step * 0.5:
        ticks.append(round(t, 12))
        t += step
    return ticks, step


def fmt(v, step):
    if v == 0:
        return "0"
    if abs(v) >= 1e5 or abs(v) < 1e-3:
        return f"{v:.1e}"
    decimals = max(0, -int(math.floor(math.log10(step)))) if step < 1 else 0
    return f"{v:.{decimals}f}"


def panel(out, y0, title, ylabel, lines, x_range):
    """Draws one panel at vertical offset y0. lines = [(label, colour, dashed, [(x, y)])]."""
    xs_ticks, xstep = nice_ticks(*x_range)
    ys = [p[1] for _, _, _, pts in lines for p in pts]
    ys_ticks, ystep = nice_ticks(min(ys), max(ys))
    x_lo, x_hi = xs_ticks[0], xs_ticks[-1]
    y_lo, y_hi = ys_ticks[0], ys_ticks[-1]
    left, top = MARGIN_L, y0 + MARGIN_T
    w, h = PANEL_W - MARGIN_L - MARGIN_R, PANEL_H - MARGIN_T - MARGIN_B

    def px(x):
        return left + (x - x_lo) / (x_hi - x_lo) * w

    def py(y):
        return top + h - (y - y_lo) / (y_hi - y_lo) * h

    out.append(f'<g class="panel" id="{escape(ylabel.lower().replace(" ", "-"))}">')
    out.append(f'<text x="{left + w / 2:.1f}" y="{y0 + 24}" text-anchor="middle" font-size="15" '
               f'font-weight="bold">{escape(title)}</text>')
    for t in ys_ticks:
        out.append(f'<line x1="{left}" y1="{py(t):.1f}" x2="{left + w}" y2="{py(t):.1f}" stroke="#e5e5e5"/>')
        out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end" font-size="11">'
                   f'{fmt(t, ystep)}</text>')
    for t in xs_ticks:
        out.append(f'<line x1="{px(t):.1f}" y1="{top + h}" x2="{px(t):.1f}" y2="{top + h + 5}" stroke="#333"/>')
        out.append(f'<text x="{px(t):.1f}" y="{top + h + 18}" text-anchor="middle" font-size="11">'
                   f'{fmt(t, xstep)}</text>')
    out.append(f'<rect class="axes" x="{left}" y="{top}" width="{w}" height="{h}" fill="none" stroke="#333"/>')
    out.append(f'<text x="{left + w / 2:.1f}" y="{top + h + 38}" text-anchor="middle" font-size="12">step</text>')
    out.append(f'<text transform="translate({left - 55},{top + h / 2:.1f}) rotate(-90)" text-anchor="middle" '
               f'font-size="12">{escape(ylabel)}</text>')
    for i, (label, colour, dashed, pts) in enumerate(lines):
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        dash = ' stroke-dasharray="6,3"' if dashed else ""
        out.append(f'<polyline data-series="{escape(label)}" points="{coords}" fill="none" stroke="{colour}" '
                   f'stroke-width="1.6"{dash}/>')
        if len(pts) == 1 or dashed:  # validation points are sparse: mark them
            for x, y in pts:
                out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="2.5" fill="{colour}"/>')
        ly = top + 10 + 18 * i
        out.append(f'<line x1="{left + w + 12}" y1="{ly}" x2="{left + w + 36}" y2="{ly}" stroke="{colour}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{left + w + 42}" y="{ly + 4}" font-size="11">{escape(label)}</text>')
    out.append("</g>")


def render(runs, title):
    """runs = [(name, series)] -> SVG text."""
    panels = []
    many = len(runs) > 1
    loss_lines, bleu_lines, lr_lines = [], [], []
    for i, (name, s) in enumerate(runs):
        c = COLOURS[(2 * i) % len(COLOURS)]
        c2 = COLOURS[(2 * i + 1) % len(COLOURS)]
        prefix = f"{name}: " if many else ""
        if s["train_loss"]:
            loss_lines.append((prefix + "train loss", c, False, s["train_loss"]))
        if s["valid_loss"]:
            loss_lines.append((prefix + "valid loss", c2, True, s["valid_loss"]))
        if s["valid_bleu"]:
            bleu_lines.append((prefix + "valid BLEU", c2, True, s["valid_bleu"]))
        if s["lr"]:
            lr_lines.append((prefix + "learning rate", c, False, s["lr"]))
    if loss_lines:
        panels.append(("Loss", "loss (nats/token)", loss_lines))
    if bleu_lines:
        panels.append(("Validation BLEU", "BLEU", bleu_lines))
    if lr_lines:
        panels.append(("Learning rate", "learning rate", lr_lines))
    if not panels:
        raise DataError("no curves: the metrics have no 'loss', 'valid_loss', 'valid_bleu' or 'lr' values")
    all_x = [p[0] for _, _, lines in panels for _, _, _, pts in lines for p in pts]
    x_range = (min(all_x), max(all_x))
    head = 40 if title else 0
    height = head + PANEL_H * len(panels)
    out = [f'<?xml version="1.0" encoding="UTF-8"?>',
           f'<svg xmlns="http://www.w3.org/2000/svg" width="{PANEL_W}" height="{height}" '
           f'viewBox="0 0 {PANEL_W} {height}" font-family="sans-serif">',
           f'<rect width="{PANEL_W}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="{PANEL_W / 2}" y="26" text-anchor="middle" font-size="18">{escape(title)}</text>')
    for k, (ptitle, ylabel, lines) in enumerate(panels):
        panel(out, head + k * PANEL_H, ptitle, ylabel, lines, x_range)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_atomic(path, text):
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".plot-curves-", suffix=".svg", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the permissions open() would
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", nargs="+", help="metrics JSON-lines file(s) written by parla-train")
    ap.add_argument("-o", "--output", required=True, help="SVG file to write (written atomically)")
    ap.add_argument("--title", default="", help="title drawn above the panels")
    ap.add_argument("--version", action="version", version="plot-curves 0.1.0")
    args = ap.parse_args(argv)
    if not args.output.endswith(".svg"):
        ap.error(f"--output {args.output}: only SVG is written; name the file *.svg "
                 "(convert with rsvg-convert for PNG)")
    try:
        runs = [(os.path.basename(os.path.dirname(os.path.abspath(p))) or p, read_metrics(p)) for p in args.metrics]
        if len(runs) > 1 and len({n for n, _ in runs}) < len(runs):
            runs = [(p, s) for p, (_, s) in zip(args.metrics, runs)]
        svg = render(runs, args.title)
        write_atomic(args.output, svg)
    except DataError as e:
        print(f"plot-curves: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"plot-curves: error: cannot write {args.output}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"plot-curves: wrote {args.output} ({sum(len(v) for _, s in runs for v in s.values())} points)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
