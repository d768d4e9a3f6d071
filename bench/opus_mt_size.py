#!/usr/bin/env python3
"""parla against CTranslate2 on an OPUS-MT-sized model (issue 34, "Measure and record").

  .venv-torch2/bin/python bench/opus_mt_size.py SCRATCH [--bin build-unity/bin] [--rounds 5] [--length 32]
      [--lines 256] [--lines-b1 32] [--converter-rounds 3] [--data ../shared/data/multi30k] [--layout 1x2]

SCRATCH gets a Hugging Face MarianMT folder shaped like OPUS-MT's en-de model (6+6 layers, d_model 512, 8 heads,
ffn 2048, swish, a shared vocabulary of 58,101 entries, tied embeddings, random weights), parla's and
CTranslate2's conversions of that one folder, and the outputs of every run. Printed: wall time and peak RSS of
each converter (rounds alternating between the two), then sentences/s, target tokens/s and peak RSS of
parla-translate fp32 / int8 and CTranslate2 float32 / int8, beam 4 at batch 1 and batch 64, 2 threads, every
configuration run as its own process once per round, the configurations alternating inside each round; and, at
batch 1, both int8 configurations on one thread as side rows.

Why the model is built here rather than downloaded: the benchmark measures speed, which does not depend on what the
weights learnt, and a random model can be forced to decode exactly the same number of tokens in both toolkits
(below), which a trained one cannot. The SentencePiece model is trained on Multi30k's English side so that the
sources tokenize into real pieces, and filled up with filler symbols to OPUS-MT's vocabulary size, because the
output projection (512 x 58,101) is the largest single product of a decoding step and must be there.

Forcing the lengths: the end-of-sentence logit gets a bias of -1e4, so no hypothesis ever ends by itself and both
decoders run to their length limit. parla's limit is floor(a * source + b) pieces followed by a forced </s>
(decode/step_constraints.cpp), so a -> 0 and b = LENGTH gives LENGTH pieces and LENGTH + 1 decoder steps.
CTranslate2's max_decoding_length counts decoder steps, with no </s> forced at the last one, so it gets
LENGTH + 1 and outputs LENGTH + 1 pieces: the same number of decoder steps, hence the same work, with parla's last
step spent on the </s> it forces. The script checks the piece counts rather than trusting this paragraph. Length
penalties are set alike (1.0) though with every hypothesis equally long they cannot change which one wins.

Each measured run is a fresh process, its peak RSS the ru_maxrss that /usr/bin/time reports; wall time is the whole
process (start-up, loading, tokenizing, decoding, writing), what a user of either command line waits for. The
start-up alone (wall time and peak RSS: libraries and model, no decoding) is measured on an empty input for each
configuration and printed beside the rates.

The script runs CTranslate2 by calling itself with --ct2-worker: a child that imports only ctranslate2 and
sentencepiece and translates as CTranslate2's documentation shows for OPUS-MT models, what a user would run."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

VOCAB_SIZE = 58101  # OPUS-MT en-de's (Helsinki-NLP/opus-mt-en-de), <pad> included
EOS_BIAS = -1e4  # far below any logit of this model, yet small enough that fp32 scores keep their precision
BEAM = 4  # OPUS-MT's default, as issue 34 asks
THREADS = 2


def build_model(out, data, seed):
    """The MarianMT folder: config.json, model.safetensors, source.spm = target.spm, vocab.json."""
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(data, "train.en"), encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    prefix = os.path.join(out, "spm")
    # 7,000 pieces learnt (Multi30k's English has too few words for 8,000), the rest of OPUS-MT's 58,101 entries
    # filler symbols. They are user-defined symbols of the SentencePiece model rather than entries of vocab.json
    # alone, so that both toolkits turn every id a random model emits into the same text and the outputs can be
    # compared line by line (parla drops ids its SentencePiece model does not know; CTranslate2's caller does not).
    # No source line contains one, so tokenization is Multi30k's.
    learnt = 7000
    fillers = [f"<filler{i}>" for i in range(VOCAB_SIZE - 3 - learnt)]  # 3 = </s>, <unk>, <pad>
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=VOCAB_SIZE,
                                   user_defined_symbols=fillers, model_type="unigram", character_coverage=1.0,
                                   num_threads=2, minloglevel=2)  # vocab_size counts <unk> <s> </s> and fillers
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    # OPUS-MT's layout: </s> 0, <unk> 1, the pieces, <pad> last (Hugging Face appended it; Marian has none).
    pieces = ["</s>", "<unk>"] + [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                                  if sp.id_to_piece(i) not in ("<unk>", "<s>", "</s>")]
    pieces.append("<pad>")
    assert len(pieces) == VOCAB_SIZE and len(set(pieces)) == VOCAB_SIZE
    vocab = {p: i for i, p in enumerate(pieces)}
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    shutil.move(prefix + ".model", os.path.join(out, "source.spm"))
    shutil.copy(os.path.join(out, "source.spm"), os.path.join(out, "target.spm"))
    os.remove(prefix + ".vocab")

    pad, eos = vocab["<pad>"], vocab["</s>"]
    cfg = MarianConfig(vocab_size=VOCAB_SIZE, decoder_vocab_size=VOCAB_SIZE, d_model=512, encoder_layers=6,
                       decoder_layers=6, encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
                       decoder_ffn_dim=2048, max_position_embeddings=512, activation_function="swish",
                       scale_embedding=True, share_encoder_decoder_embeddings=True, pad_token_id=pad,
                       eos_token_id=eos, decoder_start_token_id=pad, forced_eos_token_id=eos, dropout=0.0,
                       attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():
        # Explicit initialisation (not transformers' own, which may change between versions): std 0.1 makes the
        # output distribution peaked enough (logits of std ~2) that fp32 beam search in the two toolkits should
        # pick the same tokens, a check that both run the same model.
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif "embed_positions" not in name:
                p.normal_(0.0, 0.1)
        model.final_logits_bias.zero_()
        model.final_logits_bias[0, eos] = EOS_BIAS
        # Marian has no pad: converted OPUS-MT models keep a zero row there, which is also the decoder's start
        # (CTranslate2's start_from_zero_embedding relies on it).
        model.model.shared.weight[pad].zero_()
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def run_measured(cmd):
    """Runs cmd as a child; returns (wall seconds, peak RSS in MiB). Fails loudly: a benchmark of a failed run
    is worthless.

    The peak comes from /usr/bin/time rather than from this process's own wait4: Linux carries a process's
    maximum RSS across fork and exec (signal->maxrss), so a child forked straight from this Python would report
    at least this Python's size; /usr/bin/time is small and forks the measured command itself."""
    import tempfile
    with tempfile.NamedTemporaryFile() as rss, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", rss.name, *cmd], stdout=subprocess.DEVNULL,
                           stderr=err)
        wall = time.perf_counter() - t0
        if r.returncode != 0:
            err.seek(0)
            sys.exit(f"failed ({r.returncode}): {' '.join(cmd)}\n{err.read().decode(errors='replace')[-3000:]}")
        with open(rss.name) as f:
            return wall, int(f.read().split()[-1]) / 1024.0


def ct2_worker(a):
    """Child process: translate a file with CTranslate2 as its documentation shows for OPUS-MT, writing one line
    per source and, to a side file, the pieces of each output."""
    import ctranslate2
    import sentencepiece as spm

    sp_src = spm.SentencePieceProcessor(model_file=os.path.join(a.hf, "source.spm"))
    sp_tgt = spm.SentencePieceProcessor(model_file=os.path.join(a.hf, "target.spm"))
    translator = ctranslate2.Translator(a.model, device="cpu", compute_type=a.compute_type,
                                       intra_threads=a.threads, inter_threads=a.inter)
    with open(a.input, encoding="utf-8") as f:
        # MarianTokenizer appends </s> to the source; CTranslate2 leaves that to its caller.
        sources = [sp_src.encode(l.rstrip("\n"), out_type=str) + ["</s>"] for l in f]
    results = translator.translate_batch(sources, beam_size=BEAM, length_penalty=1.0, max_batch_size=a.batch,
                                         batch_type="examples", max_decoding_length=a.max_steps) if sources else []
    with open(a.output, "w", encoding="utf-8") as f, open(a.output + ".pieces", "w") as g:
        for r in results:
            hyp = r.hypotheses[0]
            f.write(sp_tgt.decode_pieces(hyp) + "\n")
            g.write(" ".join(hyp) + "\n")


def parla_cmd(bin_dir, model, inp, out, batch, length, extra=(), threads=THREADS, inter=1):
    # --max-length-factor must be > 0: 1e-6 x (fewer than a million source pieces) floors to nothing.
    return [os.path.join(bin_dir, "parla-translate"), "-q", "-m", model, "-i", inp, "-o", out, "-b", str(BEAM),
            "--batch-size", str(batch), "--threads", str(threads), "--inter-threads", str(inter),
            "--length-penalty", "1.0", "--max-length-factor", "1e-6", "--max-length-offset", str(length), *extra]


def ct2_cmd(hf, model, compute_type, inp, out, batch, length, threads=THREADS, inter=1):
    return [sys.executable, os.path.abspath(__file__), "--ct2-worker", "--hf", hf, "--model", model,
            "--compute-type", compute_type, "--input", inp, "--output", out, "--batch", str(batch),
            "--max-steps", str(length + 1), "--threads", str(threads), "--inter", str(inter)]


def mmm(values, fmt="{:.2f}"):
    v = sorted(values)
    return " / ".join(fmt.format(x) for x in (v[0], statistics.median(v), v[-1]))


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    if sys.argv[1:2] == ["--build-worker"]:
        n = build_model(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        print(f"built {sys.argv[2]}: {n / 1e6:.1f}M parameters", flush=True)
        return
    if "--ct2-worker" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--ct2-worker", action="store_true")
        for k in ("--hf", "--model", "--compute-type", "--input", "--output"):
            ap.add_argument(k, required=True)
        ap.add_argument("--batch", type=int, required=True)
        ap.add_argument("--max-steps", type=int, required=True)
        ap.add_argument("--threads", type=int, default=THREADS)
        ap.add_argument("--inter", type=int, default=1)
        return ct2_worker(ap.parse_args())

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scratch")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build-unity", "bin"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--converter-rounds", type=int, default=3)
    ap.add_argument("--length", type=int, default=32, help="target pieces per sentence, forced")
    ap.add_argument("--lines", type=int, default=256, help="sentences per run at batch 64")
    ap.add_argument("--lines-b1", type=int, default=32, help="sentences per run at batch 1")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--skip-converters", action="store_true", help="reuse the conversions of an earlier run")
    ap.add_argument("--layout", choices=["2x1", "1x2"], default="2x1",
                    help="2x1: both threads on one batch, with 1-thread side rows at batch 1 (the default); 1x2: one "
                         "thread on each of two batches at once (parla's --inter-threads 2, CTranslate2's "
                         "inter_threads=2), no side rows")
    a = ap.parse_args()
    threads, inter = (1, 2) if a.layout == "1x2" else (THREADS, 1)

    s = os.path.abspath(a.scratch)
    hf = os.path.join(s, "hf")
    bin_dir = os.path.abspath(a.bin)
    ct2_conv = os.path.join(os.path.dirname(sys.executable), "ct2-transformers-converter")
    from importlib.metadata import version  # not `import ctranslate2`: this process stays small
    print(f"load average at start: {load_average()}; CTranslate2 {version('ctranslate2')}; "
          f"{os.cpu_count()} CPUs; parla binaries: {bin_dir}", flush=True)

    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        # In a child, so that torch and the model's 1.2 GB are gone before anything is measured.
        subprocess.run([sys.executable, os.path.abspath(__file__), "--build-worker", hf, a.data, str(a.seed)],
                       check=True)

    # Converters: each round converts the same folder anew with each tool, alternating, so that both see the
    # same page cache and the same neighbours. The last round's outputs are the models measured below.
    fp32, int8 = os.path.join(s, "parla-fp32.pt"), os.path.join(s, "parla-int8.pt")
    ct2_f32, ct2_i8 = os.path.join(s, "ct2-float32"), os.path.join(s, "ct2-int8")
    conv = {k: ([], []) for k in ("parla-convert hf", "parla-train quantize", "ct2-transformers-converter",
                                  "ct2-transformers-converter --quantization int8")}
    if not a.skip_converters:
        for _ in range(a.converter_rounds):
            for name in conv:
                if name == "parla-convert hf":
                    if os.path.exists(fp32):
                        os.remove(fp32)
                    cmd = [os.path.join(bin_dir, "parla-convert"), "-q", "hf", hf, "-o", fp32]
                elif name == "parla-train quantize":
                    if os.path.exists(int8):
                        os.remove(int8)
                    cmd = [os.path.join(bin_dir, "parla-train"), "-q", "quantize", "-o", int8, fp32]
                else:
                    q = name.endswith("int8")
                    cmd = [ct2_conv, "--model", hf, "--output_dir", ct2_i8 if q else ct2_f32, "--force"]
                    cmd += ["--quantization", "int8"] if q else []
                w, m = run_measured(cmd)
                conv[name][0].append(w)
                conv[name][1].append(m)
        print(f"\nconverters, {a.converter_rounds} rounds alternating (min / median / max):")
        print(f"| converter | wall s | peak RSS MiB | output MiB |\n|---|---|---|---|")
        size = lambda p: (sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)) if os.path.isdir(p)
                          else os.path.getsize(p)) / 2**20
        outs = [fp32, int8, ct2_f32, ct2_i8]
        for (name, (w, m)), o in zip(conv.items(), outs):
            print(f"| {name} | {mmm(w)} | {mmm(m, '{:.0f}')} | {size(o):.0f} |", flush=True)

    # Inputs: the first lines of the Multi30k test set, and an empty file for the start-up.
    with open(os.path.join(a.data, "test_2016_flickr.en"), encoding="utf-8") as f:
        test = [l.rstrip("\n") for l in f]
    inputs = {64: os.path.join(s, f"in{a.lines}.en"), 1: os.path.join(s, f"in{a.lines_b1}.en")}
    for batch, n in ((64, a.lines), (1, a.lines_b1)):
        with open(inputs[batch], "w", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in test[:n]))
    empty = os.path.join(s, "empty.en")
    open(empty, "w").close()
    configs = {
        "parla fp32": lambda i, o, b: parla_cmd(bin_dir, fp32, i, o, b, a.length, threads=threads, inter=inter),
        "parla int8": lambda i, o, b: parla_cmd(bin_dir, int8, i, o, b, a.length, threads=threads, inter=inter),
        "CT2 float32": lambda i, o, b: ct2_cmd(hf, ct2_f32, "float32", i, o, b, a.length, threads, inter),
        "CT2 int8": lambda i, o, b: ct2_cmd(hf, ct2_i8, "int8", i, o, b, a.length, threads, inter),
    }
    # Side rows, batch 1 only: int8 on one thread. A first run found CTranslate2's int8 at batch 1 2.7x faster on
    # one thread than on two (tiny products, where waking a second thread costs more than it saves; parla runs
    # such products on one thread itself, kernels/int8_gemm.cpp), so the two-thread rows alone would mislead.
    side = {
        "parla int8, 1 thread": lambda i, o, b: parla_cmd(bin_dir, int8, i, o, b, a.length, threads=1),
        "CT2 int8, 1 thread": lambda i, o, b: ct2_cmd(hf, ct2_i8, "int8", i, o, b, a.length, threads=1),
    } if a.layout == "2x1" else {}
    out = lambda c, b: os.path.join(s, "out." + c.replace(" ", "-") + f".b{b}")

    # The lengths, checked before anything is timed: parla's hard alignment has one pair per output piece
    # (apps' documentation: "src-tgt of each target piece"), CTranslate2's worker writes its counts.
    check = os.path.join(s, "check.en")
    with open(check, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in test[:8]))
    for c in configs:
        o = out(c, "check")
        if c.startswith("parla"):
            model = fp32 if c.endswith("fp32") else int8
            run_measured(parla_cmd(bin_dir, model, check, o, 8, a.length, ("--alignment", "hard")))
            with open(o, encoding="utf-8") as f:
                counts = [len(l.rstrip("\n").split(" ||| ")[1].split()) for l in f]
        else:
            run_measured(configs[c](check, o, 8))
            with open(o + ".pieces") as f:
                counts = [len(l.split()) for l in f]
        print(f"pieces per sentence, {c}, first 8 lines: {counts}", flush=True)

    startup = {c: [] for c in configs}
    runs = {(c, b): ([], []) for b in (1, 64) for c in configs}
    runs.update({(c, 1): ([], []) for c in side})
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}, load average {load_average()}", flush=True)
        # Rotating the order every round, so that no configuration always follows the same neighbour.
        order = list(configs)[r % len(configs):] + list(configs)[:r % len(configs)]
        for c in order:
            startup[c].append(run_measured(configs[c](empty, out(c, "empty"), 1)))
        for b in (64, 1):
            for c in order + (list(side) if r % 2 == 0 else list(side)[::-1]) * (b == 1):
                w, m = run_measured({**configs, **side}[c](inputs[b], out(c, b), b))
                runs[(c, b)][0].append(w)
                runs[(c, b)][1].append(m)
                print(f"  {c:20} batch {b:2}: {w:7.2f} s, {m:6.0f} MiB", flush=True)
    print(f"load average at end: {load_average()}")

    steps = a.length + 1
    print(f"\nbeam {BEAM}, layout {a.layout} (threads x batches at once), {a.rounds} rounds (min / median / max); target tokens = sentences x "
          f"{steps} decoder steps (parla: {a.length} pieces and the </s> it forces; CTranslate2: {steps} pieces)")
    print("| toolkit | batch | sentences | sentences/s | target tokens/s | peak RSS MiB | start-up s, MiB (median) |")
    print("|---|---|---|---|---|---|---|")
    for b in (1, 64):
        n = a.lines if b == 64 else a.lines_b1
        for c in list(configs) + list(side) * (b == 1):
            w, m = runs[(c, b)]
            up = startup[c.split(",")[0]]  # a side row starts as its two-thread configuration does
            print(f"| {c} | {b} | {n} | {mmm([n / x for x in w])} | {mmm([n * steps / x for x in w], '{:.0f}')} "
                  f"| {mmm(m, '{:.0f}')} | {statistics.median(x[0] for x in up):.2f}, "
                  f"{statistics.median(x[1] for x in up):.0f} |")

    # The outputs: equal lengths are what the timing needs; equal text says that both ran the same model. The
    # comparison takes CTranslate2's first LENGTH pieces (its last one stands where parla forces </s>), so the
    # two can still differ where the best of the final beam depends on that last token.
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=os.path.join(hf, "target.spm"))
    for b in (1, 64):
        texts, lens = {}, {}
        for c in list(configs) + list(side) * (b == 1):
            with open(out(c, b), encoding="utf-8") as f:
                texts[c] = f.read().splitlines()
            if c.startswith("CT2"):
                with open(out(c, b) + ".pieces", encoding="utf-8") as f:
                    hyps = [l.split() for l in f]
                lens[c] = sorted({len(h) for h in hyps})
                texts[c + " cut"] = [sp.decode_pieces(h[:a.length]) for h in hyps]
        print(f"batch {b}: CTranslate2 output lengths (pieces): {lens}")
        pairs = [("parla fp32", "parla int8"), ("CT2 float32", "CT2 int8"), ("parla fp32", "CT2 float32 cut"),
                 ("parla int8", "CT2 int8 cut")]
        pairs += [("parla int8", "parla int8, 1 thread"), ("CT2 int8", "CT2 int8, 1 thread")] * (b == 1 and bool(side))
        for x, y in pairs:
            same = sum(u == v for u, v in zip(texts[x], texts[y]))
            print(f"batch {b}: {x} and {y} identical on {same}/{len(texts[x])} lines")


if __name__ == "__main__":
    main()
