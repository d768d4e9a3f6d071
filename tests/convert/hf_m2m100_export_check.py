#!/usr/bin/env python3
"""Loads an M2M-100 / NLLB-200 folder that parla-convert to-hf wrote, with transformers' Auto classes (as a user
would), beside the original folder transformers saved (tests/convert/hf_m2m100_fixture.py), and records what the
export computes: the independent side of the M2M-100 / NLLB export test.

  python hf_m2m100_export_check.py ORIGINAL EXPORTED OUT.json

OUT.json: "tokenizer_class", "model_class", "src_lang", "tgt_lang" (the exported tokenizer's), "len" (len of the
exported tokenizer), "original_len"; for each of the original reference.json's "texts": "src_ids" (the exported
tokenizer's input ids, src_lang set), "greedy_ids" (generate with the exported tokenizer's tgt_lang forced, greedy,
max_new_tokens=20), "greedy_text" (decode, skip_special_tokens); "max_logit_difference": the largest absolute
difference between the two models' logits over the reference's forced cases; "merges_equal" (NLLB: whether the two
tokenizer.json files hold the same BPE merges, in order), else null."""
import json
import os
import sys

import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer


def main():
    original, exported, out = sys.argv[1:4]
    ref = json.load(open(os.path.join(original, "reference.json"), encoding="utf-8"))
    tok = AutoTokenizer.from_pretrained(exported)
    model = AutoModelForSeq2SeqLM.from_pretrained(exported).eval()
    base = AutoModelForSeq2SeqLM.from_pretrained(original).eval()
    base_tok = AutoTokenizer.from_pretrained(original)
    result = {"tokenizer_class": type(tok).__name__, "model_class": type(model).__name__, "src_lang": tok.src_lang,
              "tgt_lang": tok.tgt_lang, "len": len(tok), "original_len": len(base_tok), "texts": []}
    # M2M100Tokenizer numbers its language tokens itself; NLLB's codes are tokens.
    forced = tok.get_lang_id(tok.tgt_lang) if hasattr(tok, "get_lang_id") else tok.convert_tokens_to_ids(tok.tgt_lang)
    with torch.no_grad():
        for t in ref["texts"]:
            ids = tok(t["source"]).input_ids
            greedy = model.generate(torch.tensor([ids]), forced_bos_token_id=forced, num_beams=1, do_sample=False,
                                    max_new_tokens=20)[0].tolist()
            while greedy and greedy[-1] == tok.pad_token_id:
                greedy.pop()
            result["texts"].append({"src_ids": ids, "greedy_ids": greedy,
                                    "greedy_text": tok.decode(greedy, skip_special_tokens=True)})
        worst = 0.0
        for c in ref["cases"]:
            src = torch.tensor([c["src_ids"]])
            tgt_in = torch.tensor([[2] + c["tgt_ids"][:-1]])
            a = model(input_ids=src, decoder_input_ids=tgt_in).logits
            b = base(input_ids=src, decoder_input_ids=tgt_in).logits
            worst = max(worst, (a - b).abs().max().item())
        result["max_logit_difference"] = worst
    merges = None
    if os.path.exists(os.path.join(exported, "tokenizer.json")):
        load = lambda d: json.load(open(os.path.join(d, "tokenizer.json"), encoding="utf-8"))["model"]["merges"]
        merges = load(original) == load(exported)
    result["merges_equal"] = merges
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)


if __name__ == "__main__":
    main()
