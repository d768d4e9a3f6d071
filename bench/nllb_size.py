#!/usr/bin/env python3
"""parla against CTranslate2 at NLLB-200-distilled-600M's shape (issue 57, "Speed at NLLB-200-distilled-600M's shape").

  .venv-torch2/bin/python bench/nllb_size.py SCRATCH [--bin build/bin] [--rounds 3] [--length 24]
      [--lines 32] [--lines-b1 8] [--batch 32] [--data ../shared/data/multi30k] [--layout 2x1|1x2]

SCRATCH gets a Hugging Face M2M-100 folder shaped like facebook/nllb-200-distilled-600M (d_model 1024, 12 + 12
pre-norm layers, 16 heads, ffn 4096, relu, 256,206 shared entries, tied embeddings, random weights), with the
tokenizer files parla's import reads written here by hand (vocab.json in fairseq's order over a SentencePiece model
learnt on Multi30k's English and filled up with filler symbols to NLLB's size, then 202 language codes and <mask> in
tokenizer_config.json's added_tokens_decoder). parla imports it (parla-convert hf; parla-train quantize for int8);
CTranslate2 gets the same weights through tools/export-ctranslate2.py (its specification API; int8 by its own
quantization), which gives transformers' text on the NLLB test fixture.

Forcing the lengths: both decoders are held to exactly LENGTH pieces after the forced target language token (parla:
--min-length and --max-length-offset LENGTH + 1, then the </s> it forces; CTranslate2: min_decoding_length =
max_decoding_length = LENGTH + 2 steps counting the language token). The script prints the piece counts of the first
lines of each configuration rather than trusting this paragraph.

Printed: sentences/s, target tokens/s and peak RSS (/usr/bin/time) of parla-translate fp32 / int8 and CTranslate2
float32 / int8, beam 4, at batch 1 and batch --batch, every configuration a fresh process, alternating within each
round (min / median / max over rounds), with the start-up (an empty input) beside it."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from opus_mt_size import load_average, mmm, run_measured  # noqa: E402

VOCAB_SIZE = 256206  # facebook/nllb-200-distilled-600M's config.json
CODES = 202
BEAM = 4


def build_model(out, data, seed):
    import sentencepiece as spm
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration

    os.makedirs(out, exist_ok=True)
    with open(os.path.join(data, "train.en"), encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    learnt = 7000
    pieces_total = VOCAB_SIZE - 4 - CODES - 1  # <s> <pad> </s> <unk>, the codes, <mask>
    fillers = [f"<filler{i}>" for i in range(pieces_total + 3 - learnt)]  # + 3: the model's own <unk> <s> </s>
    prefix = os.path.join(out, "spm")
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=pieces_total + 3,
                                   user_defined_symbols=fillers, model_type="unigram", character_coverage=1.0,
                                   num_threads=2, minloglevel=2)
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + [sp.id_to_piece(i) for i in range(sp.get_piece_size())
                                                  if sp.id_to_piece(i) not in ("<unk>", "<s>", "</s>")]
    assert len(pieces) == VOCAB_SIZE - CODES - 1, len(pieces)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(pieces)}, f, ensure_ascii=False)
    os.replace(prefix + ".model", os.path.join(out, "sentencepiece.bpe.model"))
    os.remove(prefix + ".vocab")
    codes = ["eng_Latn", "deu_Latn"] + [f"x{i:02d}_Latn" for i in range(CODES - 2)]
    added = {str(len(pieces) + i): {"content": c, "special": True} for i, c in enumerate(codes)}
    added[str(VOCAB_SIZE - 1)] = {"content": "<mask>", "special": True}
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"added_tokens_decoder": added, "extra_special_tokens": codes, "src_lang": "eng_Latn",
                   "tgt_lang": "deu_Latn", "tokenizer_class": "NllbTokenizer"}, f)

    cfg = M2M100Config(vocab_size=VOCAB_SIZE, d_model=1024, encoder_layers=12, decoder_layers=12,
                       encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                       decoder_ffn_dim=4096, max_position_embeddings=1024, activation_function="relu",
                       scale_embedding=True, pad_token_id=1, bos_token_id=0, eos_token_id=2,
                       decoder_start_token_id=2, dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)
    torch.manual_seed(seed)
    model = M2M100ForConditionalGeneration(cfg).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            else:
                p.normal_(0.0, 0.05)
        model.model.shared.weight[1].zero_()
    model.save_pretrained(out, safe_serialization=True)
    return sum(p.numel() for p in model.parameters())


def ct2_worker(a):
    """Child: CTranslate2 as its documentation shows for NLLB (source language token first, target in target_prefix)."""
    import ctranslate2
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=os.path.join(a.model, "source.spm"))
    translator = ctranslate2.Translator(a.model, device="cpu", compute_type=a.compute_type,
                                       intra_threads=a.threads, inter_threads=a.inter)
    with open(a.input, encoding="utf-8") as f:
        sources = [["eng_Latn"] + sp.encode(l.rstrip("\n"), out_type=str) + ["</s>"] for l in f]
    results = translator.translate_batch(
        sources, target_prefix=[["deu_Latn"]] * len(sources), beam_size=BEAM, length_penalty=1.0,
        max_batch_size=a.batch, batch_type="examples", max_decoding_length=a.steps, min_decoding_length=a.steps,
        suppress_sequences=[["<pad>"], ["<s>"]]) if sources else []
    with open(a.output, "w", encoding="utf-8") as f, open(a.output + ".pieces", "w") as g:
        for r in results:
            hyp = r.hypotheses[0][1:]
            f.write(sp.decode_pieces(hyp) + "\n")
            g.write(" ".join(hyp) + "\n")


def main():
    if sys.argv[1:2] == ["--build-worker"]:
        n = build_model(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        print(f"built {sys.argv[2]}: {n / 1e6:.1f}M parameters", flush=True)
        return
    if "--ct2-worker" in sys.argv:
        ap = argparse.ArgumentParser()
        ap.add_argument("--ct2-worker", action="store_true")
        for k in ("--model", "--compute-type", "--input", "--output"):
            ap.add_argument(k, required=True)
        for k in ("--batch", "--steps", "--threads", "--inter"):
            ap.add_argument(k, type=int, required=True)
        return ct2_worker(ap.parse_args())

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scratch")
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    ap.add_argument("--data", default=os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--length", type=int, default=24, help="target pieces per sentence after the language, forced")
    ap.add_argument("--lines", type=int, default=32)
    ap.add_argument("--lines-b1", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--layout", choices=["2x1", "1x2"], default="2x1")
    a = ap.parse_args()
    threads, inter = (1, 2) if a.layout == "1x2" else (2, 1)
    s = os.path.abspath(a.scratch)
    hf = os.path.join(s, "hf")
    bin_dir = os.path.abspath(a.bin)
    from importlib.metadata import version
    print(f"load average at start: {load_average()}; CTranslate2 {version('ctranslate2')}; {os.cpu_count()} CPUs",
          flush=True)
    if not os.path.exists(os.path.join(hf, "model.safetensors")):
        subprocess.run([sys.executable, os.path.abspath(__file__), "--build-worker", hf, a.data, str(a.seed)],
                       check=True)
    fp32, int8 = os.path.join(s, "parla-fp32.pt"), os.path.join(s, "parla-int8.pt")
    ct2_f32, ct2_i8 = os.path.join(s, "ct2-float32"), os.path.join(s, "ct2-int8")
    export = os.path.join(ROOT, "tools", "export-ctranslate2.py")
    steps = [
        (fp32, [os.path.join(bin_dir, "parla-convert"), "-q", "hf", hf, "-o", fp32]),
        (int8, [os.path.join(bin_dir, "parla-train"), "-q", "quantize", "-o", int8, fp32]),
        (ct2_f32, [sys.executable, export, fp32, ct2_f32]),
        (ct2_i8, [sys.executable, export, fp32, ct2_i8, "--quantization", "int8"]),
    ]
    for path, cmd in steps:
        if not os.path.exists(path):
            w, m = run_measured(cmd)
            print(f"{os.path.basename(path)}: {w:.1f} s, peak {m:.0f} MiB", flush=True)

    with open(os.path.join(a.data, "test_2016_flickr.en"), encoding="utf-8") as f:
        test = [l.rstrip("\n") for l in f]
    inputs = {}
    for b, n in ((a.batch, a.lines), (1, a.lines_b1)):
        inputs[b] = os.path.join(s, f"in{n}.en")
        with open(inputs[b], "w", encoding="utf-8") as f:
            f.write("".join(l + "\n" for l in test[:n]))
    empty = os.path.join(s, "empty.en")
    open(empty, "w").close()

    def parla(model):
        return lambda i, o, b: [os.path.join(bin_dir, "parla-translate"), "-q", "-m", model, "-i", i, "-o", o,
                                "-b", str(BEAM), "--batch-size", str(b), "--threads", str(threads),
                                "--inter-threads", str(inter), "--length-penalty", "1.0", "--target-lang",
                                "deu_Latn", "--max-length-factor", "1e-6", "--max-length-offset", str(a.length + 1),
                                "--min-length", str(a.length + 1)]

    def ct2(model, ct):
        return lambda i, o, b: [sys.executable, os.path.abspath(__file__), "--ct2-worker", "--model", model,
                                "--compute-type", ct, "--input", i, "--output", o, "--batch", str(b),
                                "--steps", str(a.length + 2), "--threads", str(threads), "--inter", str(inter)]

    configs = {"parla fp32": parla(fp32), "parla int8": parla(int8), "CT2 float32": ct2(ct2_f32, "float32"),
               "CT2 int8": ct2(ct2_i8, "int8")}
    out = lambda c, b: os.path.join(s, "out." + c.replace(" ", "-") + f".b{b}")
    check = os.path.join(s, "check.en")
    with open(check, "w", encoding="utf-8") as f:
        f.write("".join(l + "\n" for l in test[:4]))
    for c, cmd in configs.items():
        o = out(c, "check")
        if c.startswith("parla"):
            run_measured(cmd(check, o, 4) + ["--alignment", "hard"])
            with open(o, encoding="utf-8") as f:
                counts = [len(l.rstrip("\n").split(" ||| ")[1].split()) for l in f]  # language token included
        else:
            run_measured(cmd(check, o, 4))
            with open(o + ".pieces") as f:
                counts = [len(l.split()) + 1 for l in f]  # the language token was cut
        print(f"output tokens per sentence (language token included), {c}, first 4 lines: {counts}", flush=True)

    startup = {c: [] for c in configs}
    runs = {(c, b): ([], []) for b in (1, a.batch) for c in configs}
    for r in range(a.rounds):
        print(f"round {r + 1}/{a.rounds}, load average {load_average()}", flush=True)
        order = list(configs)[r % len(configs):] + list(configs)[:r % len(configs)]
        for c in order:
            startup[c].append(run_measured(configs[c](empty, out(c, "empty"), 1)))
        for b in (a.batch, 1):
            for c in order:
                w, m = run_measured(configs[c](inputs[b], out(c, b), b))
                runs[(c, b)][0].append(w)
                runs[(c, b)][1].append(m)
                print(f"  {c:12} batch {b:2}: {w:7.2f} s, {m:6.0f} MiB", flush=True)
    print(f"load average at end: {load_average()}")
    tokens = a.length + 1
    print(f"\nbeam {BEAM}, layout {a.layout}, {a.rounds} rounds (min / median / max); target tokens = sentences x "
          f"{tokens} (the language token and {a.length} pieces)")
    print("| toolkit | batch | sentences | sentences/s | target tokens/s | peak RSS MiB | start-up s, MiB (median) |")
    print("|---|---|---|---|---|---|---|")
    for b in (1, a.batch):
        n = a.lines if b == a.batch else a.lines_b1
        for c in configs:
            w, m = runs[(c, b)]
            up = startup[c]
            print(f"| {c} | {b} | {n} | {mmm([n / x for x in w])} | {mmm([n * tokens / x for x in w], '{:.0f}')} "
                  f"| {mmm(m, '{:.0f}')} | {statistics.median(x[0] for x in up):.2f}, "
                  f"{statistics.median(x[1] for x in up):.0f} |")


if __name__ == "__main__":
    main()
