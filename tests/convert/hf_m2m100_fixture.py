#!/usr/bin/env python3
"""Builds a small M2M-100 or NLLB-200 model with random weights, locally (no network), as Hugging Face's transformers
saves one, and what transformers computes with it: the independent reference of the M2M-100 / NLLB import.

  python hf_m2m100_fixture.py OUT_DIR --kind m2m100|nllb [--seed N] [--texts N]

OUT_DIR gets the model folder: config.json (model_type "m2m_100"), generation_config.json, model.safetensors (from
save_pretrained), the tokenizer files that the tokenizer's own save_pretrained writes, and reference.json. Ids are
the tokenizer's own throughout. Both kinds train a tiny SentencePiece BPE model (as the real sentencepiece.bpe.model
files are BPE), whose own ids are <unk> 0, <s> 1, </s> 2, then its pieces.

--kind m2m100 (src_lang "en", tgt_lang "de"): vocab.json in fairseq's order, <s> 0, <pad> 1, </s> 2, <unk> 3, then
the SentencePiece pieces (so a piece's id is its SentencePiece id + 1), and transformers' M2M100Tokenizer (the slow,
sentencepiece one) over it with language_codes "m2m100": the 100 tokens __af__ ... __zu__ take the ids after vocab.json.
They are passed as additional_special_tokens, as the real folders' special_tokens_map.json / tokenizer_config.json
list them (M2M100Tokenizer's own loop never adds them: without them they are not special, so decode would keep
"__de__"). transformers 5 adds no <madeupwordN> tokens; the model's embedding has, as in facebook/m2m100_418M,
8 rows after the language tokens for them (vocab_size = len(tokenizer) + 8), scaled small so they are not emitted.
The folder: vocab.json, sentencepiece.bpe.model, tokenizer_config.json, added_tokens.json.

--kind nllb (src_lang "eng_Latn", tgt_lang "deu_Latn"): NllbTokenizer, which in transformers 5 is the tokenizers
(fast) one only. It is built as transformers' converter builds it from sentencepiece.bpe.model (its
SentencePieceExtractor needs protobuf, absent here, so this file reads the model's precompiled normalisation charsmap
itself and calls NllbConverter.convert_from_spm): <s> 0, <pad> 1, </s> 2, <unk> 3, the pieces at SentencePiece id + 1,
then the 202 language codes (ace_Arab ... zul_Latn, FAIRSEQ_LANGUAGE_CODES' order) and <mask> last, the layout of
facebook/nllb-200-*'s tokenizer.json (given through added_tokens_decoder: NllbTokenizer built bare would put <mask>
before the codes). Non-legacy behaviour: a source is [src_lang code] pieces [</s>]. The folder: tokenizer.json,
tokenizer_config.json (from save_pretrained) and sentencepiece.bpe.model (copied, as the hub folders have it; the
tokenizer reads tokenizer.json). vocab_size = len(tokenizer).

Either tokenizer is saved, reloaded with from_pretrained(OUT_DIR) and only the reloaded one is used.

The model: M2M100ForConditionalGeneration, d_model 16, 2 + 2 layers, 4 heads, ffn 32, relu, scale_embedding, pad 1,
bos 0, eos = decoder_start 2, every weight random (see randomise: the decoder's final layer norm is scaled and
centred so that the tied output embedding gives varied outputs, with a push towards </s>; the pad row is zero; rows
that are not SentencePiece pieces or </s> are scaled down, so they are rarely emitted).

reference.json: "kind", "src_lang", "tgt_lang", "files" (the folder's files, reference.json and sources.txt
aside), "tokenizer" (class, len, vocab_size of the model, id_to_token = convert_ids_to_tokens(range(len)),
language_codes {code: id}, bos/pad/eos/unk(/mask) ids, spm_to_id: the tokenizer id of each SentencePiece id), and
"cases": for each source sentence "src_ids" (the tokenizer's input ids, src_lang set), "spm_pieces" (SentencePiece's
own pieces of the text), a forced target "tgt_ids" = [tgt_lang id] + 5 random piece ids + [</s>] with
"forced_logprobs": log_softmax (float64) of the logits at each position, taken at tgt_ids[t], when the decoder input
is [decoder_start_token_id (2)] + tgt_ids[:-1]; "greedy_ids": generate(forced_bos_token_id=tgt_lang id, num_beams=1,
max_new_tokens=20), the whole output: decoder start 2, the forced language id, the generated tokens, </s> if
generated (the pad after it stripped); "beam": generate(num_beams=4, num_return_sequences=4, length_penalty=0,
early_stopping=True, max_new_tokens=20, forced_bos_token_id), each hypothesis's "ids" (as greedy_ids), "score"
(transformers' sequences_scores) and "logprob": by a teacher-forced pass with decoder input ids[:-1], the sum of
log_softmax(logits)[t, ids[t + 1]] over every token AFTER the forced language token, i.e. over ids[2:] (</s>
included): the language token's own log-probability is not counted (forced_bos gives it log 1 in transformers'
scores); with length_penalty 0 this equals "score" up to float error.

--texts N adds "texts": N source lines (random.Random(seed), training words and a few unknown ones) with "source",
"src_ids", "greedy_ids", "greedy_text" = tokenizer.decode(greedy_ids, skip_special_tokens=True), and of the beam-4
hypotheses the best by "logprob": "beam_text" and "beam_logprob"; "target", the source's words reversed, and
"target_ids", the tokenizer's labels for it (tok(text_target=target): the target language's token, the pieces,
</s>); and OUT_DIR/sources.txt, the sources one a line."""
import argparse
import io
import json
import math
import os
import random
import shutil
import tempfile

import sentencepiece as spm
import torch
import transformers
from transformers import M2M100Config, M2M100ForConditionalGeneration

WORDS = ("the house is small a dog runs fast green tree we see "
         "das haus ist klein ein hund rennt schnell grüner baum wir sehen "
         "la maison est petite un chien court vite très été où").split()
UNKNOWN = ["zebra", "quokka", "Xylophon", "naïve", "Ökonom"]


def corpus(seed, words=WORDS):
    out = []
    for i in range(400):
        n = 3 + (i * 7 + seed) % 6
        out.append(" ".join(words[(i * 5 + j * 3 + seed) % len(words)] for j in range(n)))
    return out


def train_spm(path, lines, size):
    """Writes the model to path (through model_writer, so that no temporary path is recorded in it)."""
    writer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=writer, vocab_size=size,
                                   model_type="bpe", character_coverage=1.0, num_threads=1,
                                   minloglevel=2)  # SentencePiece's own ids: unk 0, bos 1, eos 2
    with open(path, "wb") as f:
        f.write(writer.getvalue())
    return spm.SentencePieceProcessor(model_file=path)


def proto_fields(buf):
    """(field number, value) of a protobuf message: enough of the wire format to read a SentencePiece model."""
    i = 0

    def varint():
        nonlocal i
        v, s = 0, 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << s
            s += 7
            if b < 0x80:
                return v
    while i < len(buf):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            yield field, varint()
        elif wire == 2:
            n = varint()
            yield field, buf[i:i + n]
            i += n
        elif wire in (1, 5):
            n = 8 if wire == 1 else 4
            yield field, buf[i:i + n]
            i += n
        else:
            raise ValueError(f"wire type {wire}")


def precompiled_charsmap(model_file):
    """ModelProto.normalizer_spec (3) .precompiled_charsmap (2), as SentencePieceExtractor reads it."""
    with open(model_file, "rb") as f:
        proto = f.read()
    for field, spec in proto_fields(proto):
        if field == 3:
            for f2, value in proto_fields(spec):
                if f2 == 2 and value:
                    return bytes(value)
    return None


def build_m2m100(out, sp, model_file, src_lang, tgt_lang, tmp):
    from transformers import M2M100Tokenizer
    from transformers.models.m2m_100.tokenization_m2m_100 import FAIRSEQ_LANGUAGE_CODES
    pieces = ["<s>", "<pad>", "</s>", "<unk>"]
    pieces += [p for p in map(sp.id_to_piece, range(sp.get_piece_size())) if p not in ("<unk>", "<s>", "</s>")]
    vocab_file = os.path.join(tmp, "vocab.json")
    with open(vocab_file, "w", encoding="utf-8") as f:
        json.dump({p: i for i, p in enumerate(pieces)}, f, ensure_ascii=False)
    lang_tokens = [f"__{c}__" for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]]
    tok = M2M100Tokenizer(vocab_file=vocab_file, spm_file=model_file, src_lang=src_lang, tgt_lang=tgt_lang,
                          language_codes="m2m100", additional_special_tokens=list(lang_tokens))
    tok.save_pretrained(out)
    tok = M2M100Tokenizer.from_pretrained(out)
    codes = {c: tok.get_lang_id(c) for c in FAIRSEQ_LANGUAGE_CODES["m2m100"]}
    return tok, codes, 8  # 8 <madeupword> rows in the model, as in facebook/m2m100_*


def build_nllb(out, sp, model_file, src_lang, tgt_lang):
    from transformers import AddedToken, AutoTokenizer, NllbTokenizer
    from transformers.convert_slow_tokenizer import NllbConverter
    from transformers.models.nllb.tokenization_nllb import FAIRSEQ_LANGUAGE_CODES
    from transformers.tokenization_utils_base import generate_merges
    # What TokenizersBackend._convert_from_sentencepiece does with sentencepiece.bpe.model: vocab {piece: spm id},
    # merges from it, the charsmap; then NllbConverter.convert_from_spm reorders to <s> <pad> </s> <unk> pieces.
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    kw = NllbConverter.convert_from_spm(vocab=vocab, merges=generate_merges(vocab),
                                        _spm_precompiled_charsmap=precompiled_charsmap(model_file))
    n = len(kw["vocab"])
    added = {i: AddedToken(t, special=True, normalized=False) for t, i in kw["vocab"].items() if i < 4}
    added.update({n + k: AddedToken(c, special=True, normalized=False) for k, c in enumerate(FAIRSEQ_LANGUAGE_CODES)})
    added[n + len(FAIRSEQ_LANGUAGE_CODES)] = AddedToken("<mask>", lstrip=True, normalized=True, special=True)
    tok = NllbTokenizer(**kw, added_tokens_decoder=added, src_lang=src_lang, tgt_lang=tgt_lang)
    tok.save_pretrained(out)
    shutil.copyfile(model_file, os.path.join(out, "sentencepiece.bpe.model"))
    tok = AutoTokenizer.from_pretrained(out)
    assert type(tok) is NllbTokenizer and tok.src_lang == src_lang and tok.tgt_lang == tgt_lang
    codes = {c: tok.convert_tokens_to_ids(c) for c in FAIRSEQ_LANGUAGE_CODES}
    return tok, codes, 0


def randomise(model, a, not_pieces, calibration, tgt_id, ordinary):
    """Every weight random (the lm_head is the shared embedding, tied), so that no mapping hides, and chosen so that
    greedy outputs vary with the source and along the output, and some end before the length limit."""
    cfg = model.config
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "layer_norm" in name:  # near their usual values
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1, generator=g)
            elif name == "model.shared.weight":
                # Small against the sinusoidal positions (each of norm ~2.8 at d_model 16, while a token's input is
                # sqrt(d_model) * its row), so that the decoder's state moves along the output.
                p.normal_(0.0, a.embed_std, generator=g)
            elif name.endswith("bias"):
                p.normal_(0.0, a.bias_std, generator=g)
            elif "q_proj" in name or "k_proj" in name:
                p.normal_(0.0, a.qk_std, generator=g)
            else:
                p.normal_(0.0, a.weight_std, generator=g)
                if name.endswith("fc2.weight"):  # no common offset from the ReLU outputs' positive mean
                    p -= p.mean(dim=1, keepdim=True)
        emb = model.model.shared.weight
        emb[cfg.pad_token_id].zero_()  # as fairseq
        emb[not_pieces] *= 0.3  # <s>, <unk>, language codes, <mask>, madeup rows: rarely emitted, as when trained
        # The decoder's final layer norm gives the vectors that the tied embedding turns into logits: scaled so that
        # logits spread by about logit_std, its bias centring them over some source sentences and random prefixes
        # (no one direction, and so no one token, dominates everywhere), plus a push along the </s> row (M2M-100 has
        # no final_logits_bias) that adds eos_boost to the logit of </s> and little to the others.
        norm = model.model.decoder.layer_norm
        norm.weight *= a.logit_std / (math.sqrt(cfg.d_model) * a.embed_std)
        norm.bias.zero_()
        states = []
        for src in calibration:
            prefix = [cfg.decoder_start_token_id, tgt_id]
            prefix += [ordinary[int(k)] for k in torch.randint(len(ordinary), (12,), generator=g)]
            states.append(model.model(input_ids=torch.tensor([src]), decoder_input_ids=torch.tensor([prefix]))
                          .last_hidden_state[0])
        norm.bias.copy_(-torch.cat(states).mean(0) + 0.1 * torch.randn(cfg.d_model, generator=g))
        e = emb[cfg.eos_token_id]
        norm.bias += a.eos_boost * e / e.dot(e)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--kind", choices=("m2m100", "nllb"), required=True)
    ap.add_argument("--texts", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--spm-size", type=int, default=80)
    ap.add_argument("--weight-std", type=float, default=1.0)
    ap.add_argument("--qk-std", type=float, default=1.0, help="of the attention query and key projections")
    ap.add_argument("--bias-std", type=float, default=0.05)
    ap.add_argument("--embed-std", type=float, default=0.1)
    ap.add_argument("--logit-std", type=float, default=2.5)
    ap.add_argument("--eos-boost", type=float, default=2.0, help="added to the logit of </s>, on average")
    a = ap.parse_args()
    transformers.logging.set_verbosity_error()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    src_lang, tgt_lang = ("en", "de") if a.kind == "m2m100" else ("eng_Latn", "deu_Latn")

    with tempfile.TemporaryDirectory() as tmp:
        model_file = os.path.join(tmp, "sentencepiece.bpe.model")
        sp = train_spm(model_file, corpus(a.seed), a.spm_size)
        if a.kind == "m2m100":
            tok, codes, madeup = build_m2m100(a.out, sp, model_file, src_lang, tgt_lang, tmp)
        else:
            tok, codes, madeup = build_nllb(a.out, sp, model_file, src_lang, tgt_lang)
    tok.src_lang = src_lang
    pad, eos, unk, bos = tok.pad_token_id, tok.eos_token_id, tok.unk_token_id, tok.bos_token_id
    assert (bos, pad, eos, unk) == (0, 1, 2, 3)
    ids_of = {tok.convert_ids_to_tokens(i): i for i in range(len(tok))}
    spm_to_id = [ids_of.get(sp.id_to_piece(i), unk) if i > 2 else [unk, bos, eos][i]
                 for i in range(sp.get_piece_size())]
    vocab_size = len(tok) + madeup
    assert max(codes.values()) < vocab_size

    cfg_extra = {"tokenizer_class": "NllbTokenizer"} if a.kind == "nllb" else {}
    cfg = M2M100Config(vocab_size=vocab_size, d_model=16, encoder_layers=2, decoder_layers=2,
                       encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32, decoder_ffn_dim=32,
                       max_position_embeddings=64, activation_function="relu", scale_embedding=True,
                       pad_token_id=pad, bos_token_id=bos, eos_token_id=eos, decoder_start_token_id=eos,
                       dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, encoder_layerdrop=0.0,
                       decoder_layerdrop=0.0, **cfg_extra)
    model = M2M100ForConditionalGeneration(cfg).eval()
    tgt_id = codes[tgt_lang]
    ordinary = sorted(set(spm_to_id[3:]) - {unk})
    not_pieces = [i for i in range(vocab_size) if i not in ordinary and i not in (pad, eos)]
    randomise(model, a, not_pieces, [tok(line).input_ids for line in corpus(a.seed)[:40]], tgt_id, ordinary)
    model.save_pretrained(a.out, safe_serialization=True)

    def run(src):
        inp = {"input_ids": torch.tensor([src]), "attention_mask": torch.ones(1, len(src), dtype=torch.long)}
        with torch.no_grad():
            greedy = model.generate(**inp, forced_bos_token_id=tgt_id, num_beams=1, do_sample=False,
                                    max_new_tokens=20)
            beam = model.generate(**inp, forced_bos_token_id=tgt_id, num_beams=4, num_return_sequences=4,
                                  do_sample=False, length_penalty=0.0, early_stopping=True, max_new_tokens=20,
                                  output_scores=True, return_dict_in_generate=True)
        return strip(greedy[0].tolist()), [(strip(s.tolist()), float(v))
                                           for s, v in zip(beam.sequences, beam.sequences_scores)]

    def strip(ids):  # [decoder start] ... up to the first </s> after it; only pad may follow
        end = ids.index(eos, 1) + 1 if eos in ids[1:] else len(ids)
        assert all(i == pad for i in ids[end:]), ids
        return ids[:end]

    def log_probs(src, dec_in):
        with torch.no_grad():
            out = model(input_ids=torch.tensor([src]), attention_mask=torch.ones(1, len(src), dtype=torch.long),
                        decoder_input_ids=torch.tensor([dec_in]))
        return torch.log_softmax(out.logits[0].double(), -1)

    def sequence_logprob(src, ids):  # ids = [start, lang, ..., </s>]: the tokens after the language token
        logp = log_probs(src, ids[:-1])
        return float(sum(logp[t, ids[t + 1]] for t in range(1, len(ids) - 1)))

    sources = ["the house is small", "a dog runs fast", "das haus ist klein, très petite",
               "la maison où we see a zebra", "Quokka Xylophon naïve", "a"]
    g = torch.Generator().manual_seed(a.seed)
    cases = []
    for text in sources:
        src = tok(text).input_ids
        tgt = [tgt_id] + [ordinary[int(k)] for k in torch.randint(len(ordinary), (5,), generator=g)] + [eos]
        logp = log_probs(src, [cfg.decoder_start_token_id] + tgt[:-1])
        greedy, beam = run(src)
        cases.append({"source": text, "src_ids": src, "spm_pieces": sp.encode(text, out_type=str), "tgt_ids": tgt,
                      "forced_logprobs": [float(logp[t, i]) for t, i in enumerate(tgt)], "greedy_ids": greedy,
                      "beam": [{"ids": h, "score": s, "logprob": sequence_logprob(src, h)} for h, s in beam]})

    tokenizer = {"class": type(tok).__name__, "len": len(tok), "model_vocab_size": vocab_size,
                 "bos_id": bos, "pad_id": pad, "eos_id": eos, "unk_id": unk,
                 "id_to_token": tok.convert_ids_to_tokens(list(range(len(tok)))), "language_codes": codes,
                 "spm_piece_size": sp.get_piece_size(), "spm_to_id": spm_to_id}
    if a.kind == "m2m100":
        tokenizer["language_token"] = "__{code}__"
        tokenizer["madeup_rows"] = list(range(len(tok), vocab_size))
    else:
        tokenizer["mask_id"] = tok.mask_token_id
    files = sorted(f for f in os.listdir(a.out) if f not in ("reference.json", "sources.txt"))
    reference = {"kind": a.kind, "src_lang": src_lang, "tgt_lang": tgt_lang, "tgt_lang_id": tgt_id, "files": files,
                 "tokenizer": tokenizer, "cases": cases}
    if a.texts:
        rng = random.Random(a.seed)
        pool = WORDS + UNKNOWN + ["Tree", "fast."]
        texts = []
        for _ in range(a.texts):
            line = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
            src = tok(line).input_ids
            greedy, beam = run(src)
            best_logprob, best = max((sequence_logprob(src, h), h) for h, _ in beam)
            target = " ".join(reversed(line.split()))
            texts.append({"source": line, "src_ids": src, "target": target,
                          "target_ids": tok(text_target=target).input_ids, "greedy_ids": greedy,
                          "greedy_text": tok.decode(greedy, skip_special_tokens=True),
                          "beam_text": tok.decode(best, skip_special_tokens=True), "beam_logprob": best_logprob})
        reference["texts"] = texts
        with open(os.path.join(a.out, "sources.txt"), "w", encoding="utf-8") as f:
            f.write("".join(t["source"] + "\n" for t in texts))
    with open(os.path.join(a.out, "reference.json"), "w", encoding="utf-8") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    main()
