#!/usr/bin/env python3
"""Translates a file with a Hugging Face MarianMT folder through transformers itself (MarianTokenizer,
MarianMTModel.generate), the independent side of parla's export tests.

  python translate_with_transformers.py DIR INPUT OUTPUT [--beam N] [--max-new-tokens N]

Ranks beam hypotheses by log-probability (length_penalty 0, as parla-translate --length-penalty 0), stops a
sentence once N hypotheses have finished (early_stopping, as parla), one sentence at a time."""
import argparse

import torch
from transformers import MarianMTModel, MarianTokenizer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input")
    ap.add_argument("output")
    ap.add_argument("--beam", type=int, default=1)
    ap.add_argument("--max-new-tokens", type=int, default=256)
    a = ap.parse_args()
    torch.set_num_threads(2)
    tok = MarianTokenizer.from_pretrained(a.model)
    model = MarianMTModel.from_pretrained(a.model).eval()
    with open(a.input, encoding="utf-8") as f:
        lines = [l.rstrip("\n") for l in f]
    out = []
    with torch.no_grad():
        for line in lines:
            inp = tok(line, return_tensors="pt")
            ids = model.generate(**inp, num_beams=a.beam, do_sample=False, length_penalty=0.0, early_stopping=True,
                                 max_new_tokens=a.max_new_tokens)
            out.append(tok.decode(ids[0], skip_special_tokens=True))
    with open(a.output, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
