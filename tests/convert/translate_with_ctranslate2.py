#!/usr/bin/env python3
"""Translates a file with a CTranslate2 model folder written by tools/export-ctranslate2.py, through CTranslate2
itself, the independent side of parla's export tests.

  python translate_with_ctranslate2.py DIR INPUT OUTPUT [--beam N]
  python translate_with_ctranslate2.py DIR INPUT OUTPUT --score TARGETS

--score writes, for each line of INPUT and TARGETS, CTranslate2's log-probability of every target token (</s>
included) as a JSON list, one line each: a forced comparison that no search rule can blur.

Tokenizes with DIR/source.spm, decodes with DIR/target.spm, ranks hypotheses by log-probability (length_penalty 0,
as parla-translate --length-penalty 0), never outputs pad or the start token (as parla), 256 tokens at most."""
import argparse

import ctranslate2
import sentencepiece as spm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--score")
    a = ap.parse_args()
    src = spm.SentencePieceProcessor(model_file=a.model + "/source.spm")
    tgt = spm.SentencePieceProcessor(model_file=a.model + "/target.spm")
    translator = ctranslate2.Translator(a.model, device="cpu", intra_threads=2)
    with open(a.input, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    if a.score:
        import json
        with open(a.score, encoding="utf-8") as f:
            targets = [l.rstrip("\n") for l in f]
        scored = translator.score_batch([src.encode(l, out_type=str) for l in lines],
                                        [tgt.encode(t, out_type=str) for t in targets])
        with open(a.output, "w", encoding="utf-8") as f:
            for r in scored:
                f.write(json.dumps(r.log_probs) + "\n")
        return
    results = translator.translate_batch([src.encode(l, out_type=str) for l in lines], beam_size=a.beam,
                                         length_penalty=0.0, max_decoding_length=256, max_batch_size=32,
                                         suppress_sequences=[["<pad>"], ["<s>"]])
    with open(a.output, "w", encoding="utf-8") as f:
        for r in results:
            f.write(tgt.decode_pieces(r.hypotheses[0]) + "\n")


if __name__ == "__main__":
    main()
