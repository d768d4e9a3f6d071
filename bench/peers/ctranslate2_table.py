#!/usr/bin/env python3
"""parla-translate against CTranslate2 on the same weights, every thread layout each one offers (issue 37's table).

  .venv-torch2/bin/python bench/peers/ctranslate2_table.py SCRATCH [--bin build-unity/bin] [--rounds 3]
      [--checkpoint ../shared/models/multi30k-en-de-small/average.pt]
      [--input ../shared/data/multi30k/test_2016_flickr.en] [--lines-b1 200] [--threads 2]
      [--shortlist FILE] [--isa avx2] [--only NAME,NAME] [--settings greedy]

The checkpoint is exported once with the project's own exporter (tools/export-ctranslate2.py) into SCRATCH/ct2.
Then, for each setting (beam 5 batch 64, beam 5 batch 1, greedy batch 64) and each configuration (parla fp32 /
int8 and CTranslate2 float32 / int8, each with all threads on one batch, "2x1", and with one thread on each of
two batches at once, "1x2": CTranslate2's intra_threads x inter_threads, parla's runtime.threads x
runtime.inter_threads), one fresh process per configuration and round, the configurations alternating inside each
round. Printed per cell: target tokens/s of the translation (min / median / max over the rounds) and the median
peak RSS (MiB, /usr/bin/time's, the whole process).

What is timed: parla's own summary line (reading, tokenizing, searching, detokenizing and writing the input: its
translate_stream), CTranslate2's translate_batch alone (timed in the child; its tokenizing is outside), so the
comparison leans towards CTranslate2 slightly. Target tokens: the pieces of each best translation, </s> not
counted, in both. Both search alike: no length penalty, CTranslate2 never producing <pad> or <s> (parla never
does), so the outputs agree on almost every line; the number of identical lines is printed per setting.

The batch-1 setting translates the first --lines-b1 lines (a stream of single-sentence requests); the others the
whole input.

--shortlist FILE: both toolkits decode with the same lexical shortlist (parla-shortlist's output, which is a
CTranslate2 vocabulary map): parla with decoding.shortlist, CTranslate2 with the file as vmap.txt in a copy of its
model folder and use_vmap=True. (CTranslate2 takes the union of a batch's vocabularies, parla each sentence's own, so
at batch 64 CTranslate2's softmax runs over more tokens; identical-line counts show what that changes.)
--isa avx2: both forced to their AVX2 code: ONEDNN_MAX_CPU_ISA=AVX2 for parla's oneDNN int8 products and its
packed fp32 products, which honour it, ATEN_CPU_CAPABILITY=avx2 for LibTorch's own kernels and
OPENBLAS_CORETYPE=Haswell for its BLAS; CT2_FORCE_CPU_ISA=AVX2 for CTranslate2's kernels and
MKL_ENABLE_INSTRUCTIONS=AVX2 for the oneMKL inside it."""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

SETTINGS = [("beam 5, batch 64", 5, 64, "all"), ("beam 5, batch 1", 5, 1, "b1"), ("greedy, batch 64", 1, 64, "all")]


def configs(threads):
    """(name, toolkit, precision, intra threads, inter threads)"""
    out = []
    for kit, precisions in (("parla", ("fp32", "int8")), ("ct2", ("float32", "int8"))):
        for p in precisions:
            out.append((f"{kit} {p} {threads}x1", kit, p, threads, 1))
            if threads > 1:
                out.append((f"{kit} {p} 1x{threads}", kit, p, 1, threads))
    return out


def ct2_worker(a):
    """Child process: translate a file with CTranslate2; prints 'TIMED seconds target_tokens'."""
    import time

    import ctranslate2
    import sentencepiece as spm

    sp_src = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "target.spm"))
    translator = ctranslate2.Translator(a.model, device="cpu", compute_type=a.compute_type,
                                       intra_threads=a.intra, inter_threads=a.inter)
    use_vmap = os.path.exists(os.path.join(a.model, "vmap.txt"))
    with open(a.input, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    sources = [sp_src.encode(l, out_type=str) for l in lines]
    keep = [i for i, s in enumerate(sources) if s]
    start = time.perf_counter()
    results = translator.translate_batch([sources[i] for i in keep], beam_size=a.beam, length_penalty=0.0,
                                         max_batch_size=a.batch, batch_type="examples", max_decoding_length=256,
                                         suppress_sequences=[["<pad>"], ["<s>"]], use_vmap=use_vmap) if keep else []
    seconds = time.perf_counter() - start
    out = [""] * len(lines)
    tokens = 0
    for i, r in zip(keep, results):
        hyp = [p for p in r.hypotheses[0] if p != "</s>"]
        tokens += len(hyp)
        out[i] = sp_tgt.decode_pieces(hyp)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in out))
    print(f"TIMED {seconds} {tokens}")


def run_measured(cmd):
    """(stdout + stderr, peak RSS in MiB) of one fresh process; /usr/bin/time forks it, so the peak is its own."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as rss:
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{r.stderr[-2000:]}")
        return r.stdout + r.stderr, int(open(rss.name).read().split()[-1]) / 1024.0


RATE = re.compile(r"translated .* in ([0-9.]+)(ms|s|m)\b.*?(\d[\d.]*) target tokens/s")


def one_run(a, cfg, setting, inp, out):
    name, kit, prec, intra, inter = cfg
    _, beam, batch, _ = setting
    if kit == "parla":
        cmd = [os.path.join(a.bin, "parla-translate"), "-m", a.checkpoint, "-i", inp, "-o", out, "-b", str(beam),
               "--batch-size", str(batch), "--length-penalty", "0", "--precision", prec, "--threads", str(intra),
               "--inter-threads", str(inter)]
        if a.shortlist:
            cmd += ["--shortlist", a.shortlist]
        text, rss = run_measured(cmd)
        m = RATE.search(text)
        if not m:
            sys.exit(f"no rate in parla-translate's log:\n{text[-2000:]}")
        return float(m.group(3)), rss
    cmd = [sys.executable, os.path.abspath(__file__), "--ct2-worker", "--model", a.ct2_model,
           "--compute-type", "int8_float32" if prec == "int8" else prec, "--input", inp, "--output", out,
           "--beam", str(beam), "--batch", str(batch), "--intra", str(intra), "--inter", str(inter)]
    text, rss = run_measured(cmd)
    m = re.search(r"TIMED ([0-9.e-]+) (\d+)", text)
    return int(m.group(2)) / float(m.group(1)), rss


def mmm(values):
    v = sorted(values)
    return " / ".join(f"{x:,.0f}" for x in (v[0], statistics.median(v), v[-1]))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scratch", nargs="?")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-unity", "bin"))
    ap.add_argument("--checkpoint", default=os.path.join(ROOT, "..", "shared", "models", "multi30k-en-de-small",
                                                         "average.pt"))
    ap.add_argument("--input", default=os.path.join(ROOT, "..", "shared", "data", "multi30k", "test_2016_flickr.en"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lines-b1", type=int, default=200)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated configuration names to run (default: all)")
    ap.add_argument("--settings", default="", help="run only the settings whose label contains this text")
    ap.add_argument("--shortlist", default="", help="a vocabulary map both toolkits decode with (see above)")
    ap.add_argument("--isa", choices=["", "avx2"], default="", help="force both toolkits' AVX2 code")
    # child mode
    ap.add_argument("--ct2-worker", action="store_true", help=argparse.SUPPRESS)
    for k in ("--model", "--compute-type", "--output"):
        ap.add_argument(k, help=argparse.SUPPRESS)
    for k in ("--beam", "--batch", "--intra", "--inter"):
        ap.add_argument(k, type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.ct2_worker:
        return ct2_worker(a)
    if not a.scratch:
        ap.error("SCRATCH is required")
    a.checkpoint = os.path.abspath(a.checkpoint)
    os.makedirs(a.scratch, exist_ok=True)
    ct2_dir = os.path.join(a.scratch, "ct2")
    if not os.path.isdir(ct2_dir):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export-ctranslate2.py"), a.checkpoint, ct2_dir],
                       check=True)
    a.ct2_model = ct2_dir
    if a.shortlist:
        a.shortlist = os.path.abspath(a.shortlist)
        a.ct2_model = os.path.join(a.scratch, "ct2-vmap")
        shutil.rmtree(a.ct2_model, ignore_errors=True)
        shutil.copytree(ct2_dir, a.ct2_model)
        shutil.copyfile(a.shortlist, os.path.join(a.ct2_model, "vmap.txt"))
    if a.isa == "avx2":
        os.environ.update(ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2", ATEN_CPU_CAPABILITY="avx2",
                          OPENBLAS_CORETYPE="Haswell", CT2_FORCE_CPU_ISA="AVX2", MKL_ENABLE_INSTRUCTIONS="AVX2")
    b1_input = os.path.join(a.scratch, "input.b1")
    with open(a.input, encoding="utf-8") as f, open(b1_input, "w", encoding="utf-8") as g:
        g.writelines(l for _, l in zip(range(a.lines_b1), f))
    cfgs = configs(a.threads)
    if a.only:
        cfgs = [c for c in cfgs if c[0] in a.only.split(",")]
    with open("/proc/cpuinfo") as f:
        flags = next((l.split(":", 1)[1].split() for l in f if l.startswith("flags")), [])
    wanted = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_int8"]
    print(f"CPU: {os.cpu_count()} cores, flags {' '.join(x for x in wanted if x in flags)}; "
          f"load {open('/proc/loadavg').read().split()[:3]}; rounds {a.rounds}"
          f"{'; shortlist ' + a.shortlist if a.shortlist else ''}{'; forced ' + a.isa if a.isa else ''}", flush=True)
    for setting in SETTINGS:
        label, beam, batch, which = setting
        if a.settings and a.settings not in label:
            continue
        inp = b1_input if which == "b1" else a.input
        rates = {c[0]: [] for c in cfgs}
        rss = {c[0]: [] for c in cfgs}
        outputs = {}
        for _ in range(a.rounds):
            for cfg in cfgs:
                out = os.path.join(a.scratch, cfg[0].replace(" ", "_") + ".out")
                r, m = one_run(a, cfg, setting, inp, out)
                rates[cfg[0]].append(r)
                rss[cfg[0]].append(m)
                with open(out, encoding="utf-8") as f:
                    outputs[cfg[0]] = f.read().splitlines()
        print(f"\n## {label} ({sum(1 for _ in open(inp, encoding='utf-8'))} lines): target tokens/s min / median / max,"
              f" peak RSS MiB (median)")
        for cfg in cfgs:
            print(f"  {cfg[0]:<18} {mmm(rates[cfg[0]]):>28}   {statistics.median(rss[cfg[0]]):7.0f}")
        # The same search on the same weights: every layout of one toolkit and precision must agree exactly;
        # parla and CTranslate2 in fp32 nearly everywhere (int8 quantizes differently in each).
        for i, c in enumerate(cfgs):
            for d in cfgs[i + 1:]:
                same_kit = c[1] == d[1] and c[2] == d[2]
                fp32_pair = c[1] != d[1] and {c[2], d[2]} == {"fp32", "float32"} and c[3:] == d[3:]
                if same_kit or fp32_pair:
                    same = sum(x == y for x, y in zip(outputs[c[0]], outputs[d[0]]))
                    print(f"  identical lines, {c[0]} vs {d[0]}: {same}/{len(outputs[c[0]])}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
