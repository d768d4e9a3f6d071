#!/usr/bin/env python3
"""Hyper-parameter sweeps over parla-train and parla-translate (standard library only).

    tools/sweep.py train --config C --data D --out DIR --grid model.dropout=0.2,0.3 --grid training.lr=5e-4,1e-3
                   [--seeds 1,2,3] [--set KEY=VALUE ...] [--bin build/bin] [--dry-run]
        One parla-train run per combination of the grids (times the seeds) in DIR/<name>. A run that finished in
        an earlier call is kept; one that was interrupted is resumed from its checkpoint_last.pt. Then prints
        the table of `table DIR`.
    tools/sweep.py table DIR [--metric bleu|loss]
        One row per run folder of DIR (each with a metrics.jsonl): its swept settings, updates, the best
        validation value and its step; best first. The metric defaults to bleu when the runs validated BLEU.
    tools/sweep.py decode --model M --src VALID.SRC --ref VALID.REF --beam 4,5,6 --lenpen 0.6,1.0
                   [--out DIR] [--set KEY=VALUE ...] [--bin build/bin]
        Translates the validation source with every (beam, length penalty) and scores BLEU (13a); prints the
        table and the best setting. Choose decoding settings on validation data, never on the test set.

Tables are Markdown on stdout; progress goes to stderr. Exit codes follow parla's: 0 ok, 1 a run failed or a
file is unusable, 2 bad usage.
"""
import argparse
import itertools
import json
import os
import re
import subprocess
import sys


class UsageError(Exception):
    pass


class DataError(Exception):
    pass


def parse_grid(spec):
    """'training.lr=5e-4,1e-3' -> ('training.lr', ['5e-4', '1e-3'])."""
    key, sep, values = spec.partition("=")
    if not sep or not re.fullmatch(r"[a-z_]+\.[a-z_0-9]+", key) or not values:
        raise UsageError(f"--grid '{spec}': expected SECTION.KEY=V1,V2,... (e.g. training.lr=5e-4,1e-3)")
    vals = values.split(",")
    if "" in vals:
        raise UsageError(f"--grid '{spec}': an empty value")
    return key, vals


def run_name(settings):
    """A folder name from the swept settings: 'dropout-0.3_lr-1e-3' (the key's last part and the value)."""
    parts = []
    for key, value in settings:
        short = key.split(".")[-1]
        parts.append(f"{short}-{re.sub(r'[^A-Za-z0-9.+-]', '_', value)}")
    return "_".join(parts) if parts else "base"


def combinations(grids, seeds):
    keys = [k for k, _ in grids]
    for values in itertools.product(*[v for _, v in grids]):
        settings = list(zip(keys, values))
        for seed in seeds or [None]:
            yield settings + ([("runtime.seed", seed)] if seed is not None else [])


def finished(log_path):
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            return "training done (" in f.read()
    except OSError:
        return False


def train(args):
    grids = [parse_grid(g) for g in args.grid]
    seeds = args.seeds.split(",") if args.seeds else []
    if any(not s.isdigit() for s in seeds):
        raise UsageError(f"--seeds '{args.seeds}': expected integers, e.g. 1,2,3")
    for s in args.set:
        if "=" not in s:
            raise UsageError(f"--set '{s}': expected KEY=VALUE")
    exe = os.path.join(args.bin, "parla-train")
    if not args.dry_run:
        os.makedirs(args.out, exist_ok=True)
    failed = []
    runs = list(combinations(grids, seeds))
    for i, settings in enumerate(runs, 1):
        name = run_name(settings)
        run_dir = os.path.join(args.out, name)
        log = run_dir + ".train.log"
        cmd = [exe, "--config", args.config, "--data", args.data, "--save-dir", run_dir]
        for s in args.set:
            cmd += ["--set", s]
        for key, value in settings:
            cmd += ["--set", f"{key}={value}"]
        last = os.path.join(run_dir, "checkpoint_last.pt")
        if finished(log) and os.path.exists(last):
            print(f"sweep: [{i}/{len(runs)}] {name}: finished earlier, kept", file=sys.stderr)
            continue
        cmd += ["--resume", last] if os.path.exists(last) else ["--overwrite"]
        if args.dry_run:
            print(" ".join(cmd))
            continue
        print(f"sweep: [{i}/{len(runs)}] {name}: training (log {log})", file=sys.stderr)
        with open(log, "w", encoding="utf-8") as err:
            rc = subprocess.call(cmd, stdout=subprocess.DEVNULL, stderr=err)
        if os.path.isdir(run_dir):  # the settings for `table`
            with open(os.path.join(run_dir, "sweep.json"), "w") as f:
                json.dump(dict(settings), f)
        if rc != 0:
            print(f"sweep: {name} failed with exit code {rc}; see {log}", file=sys.stderr)
            failed.append(name)
    if args.dry_run:
        return 0
    print_table(args.out, args.metric)
    return 1 if failed else 0


def read_run(run_dir):
    """The validation records of run_dir/metrics.jsonl and its swept settings (sweep.json, when present)."""
    path = os.path.join(run_dir, "metrics.jsonl")
    valid, steps = [], 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not JSON ({e.msg})")
            steps = max(steps, int(rec.get("step", 0)))
            if rec.get("type") == "valid":
                valid.append(rec)
    settings = {}
    sweep = os.path.join(run_dir, "sweep.json")
    if os.path.exists(sweep):
        with open(sweep, encoding="utf-8") as f:
            settings = json.load(f)
    return valid, steps, settings


def print_table(out_dir, metric=None):
    rows = []
    for name in sorted(os.listdir(out_dir)):
        run_dir = os.path.join(out_dir, name)
        if not os.path.isfile(os.path.join(run_dir, "metrics.jsonl")):
            continue
        valid, steps, settings = read_run(run_dir)
        rows.append((name, valid, steps, settings))
    if not rows:
        raise DataError(f"'{out_dir}': no run folder with a metrics.jsonl")
    if metric is None:
        metric = "bleu" if any("bleu" in v for _, valid, _, _ in rows for v in valid) else "loss"
    higher = metric == "bleu"
    table = []
    for name, valid, steps, settings in rows:
        scored = [v for v in valid if metric in v]
        best = (max if higher else min)(scored, key=lambda v: v[metric]) if scored else None
        table.append((name, steps, best, settings))
    def order(row):
        best = row[2]
        if best is None:
            return (1, 0.0)
        return (0, -best[metric] if higher else best[metric])
    table.sort(key=order)
    keys = sorted({k for _, _, _, s in table for k in s})
    print("| run | " + " | ".join(keys) + (" | " if keys else "") + f"updates | best valid {metric} | at step |")
    print("|---" * (len(keys) + 4) + "|")
    for name, steps, best, settings in table:
        cells = [name] + [str(settings.get(k, "")) for k in keys] + [str(steps)]
        cells += [f"{best[metric]:.4f}" if metric == "loss" else f"{best[metric]:.2f}", str(best["step"])] if best \
            else ["-", "-"]
        print("| " + " | ".join(cells) + " |")
    return 0


def decode(args):
    beams = args.beam.split(",")
    lenpens = args.lenpen.split(",")
    if any(not b.isdigit() or int(b) < 1 for b in beams):
        raise UsageError(f"--beam '{args.beam}': expected positive integers, e.g. 4,5,6")
    for p in lenpens:
        try:
            float(p)
        except ValueError:
            raise UsageError(f"--lenpen '{args.lenpen}': expected numbers, e.g. 0.6,1.0")
    for f in (args.model, args.src, args.ref):
        if not os.path.isfile(f):
            raise DataError(f"'{f}': no such file")
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(args.model)), "decode-sweep")
    os.makedirs(out, exist_ok=True)
    results = []
    for beam, lp in itertools.product(beams, lenpens):
        hyp = os.path.join(out, f"valid.beam{beam}.lenpen{lp}.hyp")
        cmd = [os.path.join(args.bin, "parla-translate"), "-m", args.model, "-i", args.src, "-o", hyp,
               "--beam-size", beam, "--length-penalty", lp]
        for s in args.set:
            cmd += ["--set", s]
        print(f"sweep: beam {beam}, length penalty {lp}", file=sys.stderr)
        r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise DataError(f"parla-translate failed (exit {r.returncode}) for beam {beam}, lenpen {lp}:\n"
                            + r.stderr[-2000:])
        s = subprocess.run([os.path.join(args.bin, "parla-score-bleu"), args.ref, "-i", hyp, "-m", "bleu", "-b"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if s.returncode != 0:
            raise DataError(f"parla-score-bleu failed (exit {s.returncode}): {s.stderr.strip()}")
        results.append((int(beam), float(lp), float(s.stdout.strip())))
    print("| beam | length penalty | valid BLEU |")
    print("|---|---|---|")
    for beam, lp, bleu in results:
        print(f"| {beam} | {lp:g} | {bleu:.2f} |")
    # Ties go to the smaller beam (faster), then to the smaller penalty.
    best = max(results, key=lambda r: (r[2], -r[0], -r[1]))
    print(f"\nbest on validation: --beam-size {best[0]} --length-penalty {best[1]:g} (BLEU {best[2]:.2f})")
    return 0


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="train one run per grid point")
    t.add_argument("--config", required=True, help="base config JSON")
    t.add_argument("--data", required=True, help="dataset folder of parla-preprocess")
    t.add_argument("--out", required=True, help="folder of the runs (one subfolder each)")
    t.add_argument("--grid", action="append", default=[], help="SECTION.KEY=V1,V2,... (repeatable)")
    t.add_argument("--seeds", default="", help="runtime.seed values, e.g. 1,2,3 (each grid point with each seed)")
    t.add_argument("--set", action="append", default=[], help="KEY=VALUE for every run (repeatable)")
    t.add_argument("--metric", choices=["bleu", "loss"], default=None, help="metric of the table")
    t.add_argument("--bin", default="build/bin", help="folder of the parla executables (default build/bin)")
    t.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    tb = sub.add_parser("table", help="summarise the runs of a folder")
    tb.add_argument("dir")
    tb.add_argument("--metric", choices=["bleu", "loss"], default=None)
    d = sub.add_parser("decode", help="choose beam size and length penalty on validation data")
    d.add_argument("--model", required=True, help="checkpoint to translate with")
    d.add_argument("--src", required=True, help="validation source (raw text)")
    d.add_argument("--ref", required=True, help="validation reference (raw text)")
    d.add_argument("--beam", default="4,5,6", help="beam sizes (default 4,5,6)")
    d.add_argument("--lenpen", default="0.6,1.0", help="length penalties (default 0.6,1.0)")
    d.add_argument("--set", action="append", default=[], help="KEY=VALUE for parla-translate (repeatable)")
    d.add_argument("--out", default="", help="folder of the hypotheses (default: decode-sweep beside the model)")
    d.add_argument("--bin", default="build/bin", help="folder of the parla executables (default build/bin)")
    args = p.parse_args(argv)
    try:
        if args.command == "train":
            return train(args)
        if args.command == "table":
            if not os.path.isdir(args.dir):
                raise DataError(f"'{args.dir}': no such folder")
            return print_table(args.dir, args.metric)
        return decode(args)
    except UsageError as e:
        print(f"sweep: error: {e}", file=sys.stderr)
        return 2
    except (DataError, OSError, json.JSONDecodeError) as e:
        print(f"sweep: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
