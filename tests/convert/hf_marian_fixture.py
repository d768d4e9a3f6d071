#!/usr/bin/env python3
"""Builds a small MarianMT model with random weights, locally (no network), as Hugging Face's transformers saves
one, and what transformers computes with it: the independent reference of tests/convert.

  python hf_marian_fixture.py OUT_DIR [--separate | --joint] [--activation swish|relu] [--seed N] [--marian DIR]
                               [--texts N]

OUT_DIR gets the MarianMT folder (config.json, model.safetensors, source.spm, target.spm, vocab.json, and
target_vocab.json with --separate) and reference.json: for each source sentence its input ids, a forced target
with transformers' log-probability of every token, transformers' greedy output ids and its beam-4 hypotheses with
their scores. Ids are the folder's own (vocab.json's). The vocabulary puts </s> at 0, <unk> at 1, two target
language tokens >>fra<< and >>deu<< next, then the pieces, and <pad> last, as OPUS-MT's vocabularies do.

--joint builds the layout of most OPUS-MT models (opus-mt-en-de among them): two different SentencePiece models
(source.spm over English words, target.spm over German ones) and one joint vocab.json holding both models' pieces,
whose embeddings the two sides share; so the target model lacks the source side's pieces, which a model emits.

--texts N adds "texts" to reference.json: N source lines and, for each, MarianTokenizer's input ids, and the text
that MarianTokenizer.decode(skip_special_tokens=True) gives for transformers' greedy output and for its beam-4 best
(with that hypothesis's log-probability by a forced pass), as a user of transformers would print them.

--bin also writes the weights as torch.save writes them (see write_pickles).

--marian DIR also writes the same model as Marian saves it, as OPUS-MT distributes it: DIR/model.npz under Marian's
parameter names (matrices [in, out], biases and norms [1, n], no <pad> row: the pad row and its logit bias are
zero here, as in every converted OPUS-MT model) with the options in "special:model.yml", DIR/vocab.yml without
<pad>, DIR/decoder.yml and the two SentencePiece models."""
import argparse
import json
import os

import sentencepiece as spm
import torch
from transformers import MarianConfig, MarianMTModel

WORDS = ("the house is small a dog runs fast green tree we see la maison est petite un chien court vite "
         "arbre vert nous voyons das haus ist klein ein hund").split()


ENGLISH = "the house is small a dog runs fast green tree we see".split()
GERMAN = "das haus ist klein ein hund rennt schnell grüner baum wir sehen".split()


def corpus(seed, words=WORDS):
    out = []
    for i in range(400):
        n = 3 + (i * 7 + seed) % 6
        out.append(" ".join(words[(i * 5 + j * 3 + seed) % len(words)] for j in range(n)))
    return out


def train_spm(path_prefix, lines, size):
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=path_prefix, vocab_size=size,
                                   model_type="unigram", character_coverage=1.0, num_threads=1,
                                   minloglevel=2)  # SentencePiece's own ids: unk 0, bos 1, eos 2
    return spm.SentencePieceProcessor(model_file=path_prefix + ".model")


def vocab_of(sp, pad_last=True, also=None):
    pieces = ["</s>", "<unk>", ">>fra<<", ">>deu<<"]
    for model in (sp, also) if also else (sp,):
        pieces += [model.id_to_piece(i) for i in range(model.get_piece_size())
                   if model.id_to_piece(i) not in ("<unk>", "<s>", "</s>") and model.id_to_piece(i) not in pieces]
    # transformers has one pad_token_id for both sides, so separate vocabularies put <pad> at the same id.
    pieces.insert(len(pieces) if pad_last else 2, "<pad>")
    return {p: i for i, p in enumerate(pieces)}


def encode(sp, vocab, text):
    ids = []
    if text.startswith(">>"):
        code, _, text = text.partition(" ")
        ids.append(vocab[code])
    ids += [vocab.get(p, vocab["<unk>"]) for p in sp.encode(text, out_type=str)]
    return ids + [vocab["</s>"]]


def write_marian(model, cfg, vocab, a):
    import numpy as np
    assert not a.separate and list(vocab)[-1] == "<pad>", "the Marian form is written for a shared vocabulary"
    os.makedirs(a.marian, exist_ok=True)
    sd = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    arrays = {"Wemb": sd["model.shared.weight"][:-1], "decoder_ff_logit_out_b": sd["final_logits_bias"][:, :-1]}
    row = lambda v: v[None, :]

    def attention(to, hf):
        for p in "qkvo":
            name = "out_proj" if p == "o" else p + "_proj"
            arrays[f"{to}_W{p}"] = np.ascontiguousarray(sd[f"{hf}.{name}.weight"].T)  # C order, as Marian
            arrays[f"{to}_b{p}"] = row(sd[f"{hf}.{name}.bias"])

    def layer_norm(to, hf):
        arrays[to + "_ln_scale"] = row(sd[hf + ".weight"])
        arrays[to + "_ln_bias"] = row(sd[hf + ".bias"])

    def ffn(to, hf):
        arrays[to + "_ffn_W1"] = np.ascontiguousarray(sd[hf + ".fc1.weight"].T)
        arrays[to + "_ffn_b1"] = row(sd[hf + ".fc1.bias"])
        arrays[to + "_ffn_W2"] = np.ascontiguousarray(sd[hf + ".fc2.weight"].T)
        arrays[to + "_ffn_b2"] = row(sd[hf + ".fc2.bias"])
        layer_norm(to + "_ffn_ffn", hf + ".final_layer_norm")

    for i in range(cfg.encoder_layers):
        to, hf = f"encoder_l{i + 1}", f"model.encoder.layers.{i}"
        attention(to + "_self", hf + ".self_attn")
        layer_norm(to + "_self_Wo", hf + ".self_attn_layer_norm")
        ffn(to, hf)
    for i in range(cfg.decoder_layers):
        to, hf = f"decoder_l{i + 1}", f"model.decoder.layers.{i}"
        attention(to + "_self", hf + ".self_attn")
        layer_norm(to + "_self_Wo", hf + ".self_attn_layer_norm")
        attention(to + "_context", hf + ".encoder_attn")
        layer_norm(to + "_context_Wo", hf + ".encoder_attn_layer_norm")
        ffn(to, hf)
    options = "\n".join([
        "type: transformer", f"dim-emb: {cfg.d_model}", f"enc-depth: {cfg.encoder_layers}",
        f"dec-depth: {cfg.decoder_layers}", f"transformer-heads: {cfg.encoder_attention_heads}",
        f"transformer-dim-ffn: {cfg.encoder_ffn_dim}", f"transformer-ffn-activation: {a.activation}",
        'transformer-preprocess: ""', "transformer-postprocess: dan", "transformer-postprocess-emb: d",
        "transformer-decoder-autoreg: self-attention", "transformer-ffn-depth: 2", "tied-embeddings-all: true",
        "transformer-dropout: 0", "transformer-dropout-attention: 0", "transformer-dropout-ffn: 0",
        f"dim-vocabs: [{len(vocab) - 1}, {len(vocab) - 1}]", "max-length: 100", ""])
    arrays["special:model.yml"] = np.frombuffer(options.encode() + b"\0", dtype=np.int8)
    np.savez(os.path.join(a.marian, "model.npz"), **arrays)
    with open(os.path.join(a.marian, "vocab.yml"), "w") as f:
        for piece, i in vocab.items():
            if piece != "<pad>":
                f.write(json.dumps(piece, ensure_ascii=False) + f": {i}\n")
    with open(os.path.join(a.marian, "decoder.yml"), "w") as f:
        f.write("models:\n  - model.npz\nvocabs:\n  - vocab.yml\n  - vocab.yml\nbeam-size: 4\n")
    for name in ("source.spm", "target.spm"):
        with open(os.path.join(a.out, name), "rb") as src, open(os.path.join(a.marian, name), "wb") as dst:
            dst.write(src.read())


class RunsCode:
    """What a hostile pytorch_model.bin holds: unpickling it calls os.system."""
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, ("touch " + self.marker,))


def write_pickles(out, model):
    """The weights as torch.save writes them, beside model.safetensors: pytorch_model.bin, the state_dict (an
    OrderedDict with its _metadata, as transformers < 4.30 saved it); plain_dict.bin, a plain dict of the same
    tensors (as later versions saved their shards); legacy.bin, the pre-1.6 format (a bare pickle);
    runs_code.bin, a zip whose pickle would run a command that creates OUT/code_ran."""
    sd = model.state_dict()
    torch.save(sd, os.path.join(out, "pytorch_model.bin"))
    torch.save(dict(sd), os.path.join(out, "plain_dict.bin"))
    torch.save(sd, os.path.join(out, "legacy.bin"), _use_new_zipfile_serialization=False)
    evil = dict(sd)
    evil["model.encoder.layers.0.fc1.weight"] = RunsCode(os.path.join(out, "code_ran"))
    torch.save(evil, os.path.join(out, "runs_code.bin"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--separate", action="store_true")
    ap.add_argument("--joint", action="store_true")
    ap.add_argument("--texts", type=int, default=0)
    ap.add_argument("--bin", action="store_true")
    ap.add_argument("--eos-boost", type=float)
    ap.add_argument("--weight-std", type=float, default=0.5)
    ap.add_argument("--bias-std", type=float, default=0.5)
    ap.add_argument("--d-model", type=int, default=16)
    ap.add_argument("--activation", default="swish")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--marian")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    assert not (a.separate and a.joint)
    if a.joint:
        src_sp = train_spm(os.path.join(a.out, "src"), corpus(1, ENGLISH), 28)
        tgt_sp = train_spm(os.path.join(a.out, "tgt"), corpus(2, GERMAN), 28)
    else:
        src_sp = train_spm(os.path.join(a.out, "src"), corpus(1), 40)
        tgt_sp = train_spm(os.path.join(a.out, "tgt"), corpus(2), 36) if a.separate else src_sp
    src_vocab = vocab_of(src_sp, pad_last=not a.separate, also=tgt_sp if a.joint else None)
    tgt_vocab = vocab_of(tgt_sp, pad_last=False) if a.separate else src_vocab
    os.replace(os.path.join(a.out, "src.model"), os.path.join(a.out, "source.spm"))
    if a.separate or a.joint:
        os.replace(os.path.join(a.out, "tgt.model"), os.path.join(a.out, "target.spm"))
    else:
        with open(os.path.join(a.out, "source.spm"), "rb") as f, open(os.path.join(a.out, "target.spm"), "wb") as g:
            g.write(f.read())
    for name in ("src.vocab", "tgt.vocab", "tgt.model"):
        if os.path.exists(os.path.join(a.out, name)):
            os.remove(os.path.join(a.out, name))
    with open(os.path.join(a.out, "vocab.json"), "w") as f:
        json.dump(src_vocab, f, ensure_ascii=False)
    if a.separate:
        with open(os.path.join(a.out, "target_vocab.json"), "w") as f:
            json.dump(tgt_vocab, f, ensure_ascii=False)

    pad = tgt_vocab["<pad>"]
    cfg = MarianConfig(vocab_size=len(src_vocab), decoder_vocab_size=len(tgt_vocab), d_model=a.d_model, encoder_layers=2,
                       decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=32,
                       decoder_ffn_dim=32, max_position_embeddings=64, pad_token_id=src_vocab["<pad>"],
                       eos_token_id=tgt_vocab["</s>"], decoder_start_token_id=pad, activation_function=a.activation,
                       scale_embedding=True, share_encoder_decoder_embeddings=not a.separate, dropout=0.0,
                       attention_dropout=0.0, activation_dropout=0.0)
    model = MarianMTModel(cfg).eval()
    with torch.no_grad():  # every weight random, layer norms and the logit bias included, so no mapping hides
        for name, p in model.named_parameters():
            if "layer_norm" in name:  # near their usual values, so that outputs depend on the source
                p.normal_(1.0 if name.endswith("weight") else 0.0, 0.1)
            elif "embed_positions" not in name:
                p.normal_(0.0, a.weight_std)
        model.final_logits_bias.normal_(0.0, a.bias_std)
        # Some sentences end before the length limit (the joint vocabulary's wider output needs less help).
        model.final_logits_bias[0, tgt_vocab["</s>"]] += a.eos_boost if a.eos_boost is not None else 3.5
        # As in the models converted from Marian, which has no pad: its embedding row and logit bias are zero.
        model.final_logits_bias[0, pad] = 0.0
        model.model.encoder.embed_tokens.weight[src_vocab["<pad>"]].zero_()  # the shared table when tied
        model.model.decoder.embed_tokens.weight[pad].zero_()
    model.save_pretrained(a.out, safe_serialization=True)
    if a.bin:
        write_pickles(a.out, model)
    if a.marian:
        write_marian(model, cfg, src_vocab, a)

    sources = ["the house is small", "a dog runs fast", "we see the green tree", ">>fra<< the dog is small",
               ">>deu<< we see a house", "zebra qx the"]
    cases = []
    g = torch.Generator().manual_seed(a.seed)
    ordinary = [i for p, i in tgt_vocab.items() if p not in ("<pad>", "</s>", "<unk>") and not p.startswith(">>")]
    for text in sources:
        src = encode(src_sp, src_vocab, text)
        tgt = [ordinary[int(k)] for k in torch.randint(len(ordinary), (5,), generator=g)] + [tgt_vocab["</s>"]]
        with torch.no_grad():
            inp = torch.tensor([src])
            out = model(input_ids=inp, attention_mask=torch.ones_like(inp),
                        decoder_input_ids=torch.tensor([[pad] + tgt[:-1]]))
            logp = torch.log_softmax(out.logits[0].double(), -1)
            forced = [float(logp[t, tok]) for t, tok in enumerate(tgt)]
            greedy = model.generate(inp, num_beams=1, do_sample=False, max_new_tokens=20, min_new_tokens=0,
                                    bad_words_ids=[[pad]])
            beam = model.generate(inp, num_beams=4, num_return_sequences=4, do_sample=False, max_new_tokens=20,
                                  length_penalty=0.0, early_stopping=True, bad_words_ids=[[pad]],
                                  output_scores=True, return_dict_in_generate=True)
        strip = lambda ids: [i for i in ids if i != pad]
        cases.append({"source": text, "src_ids": src, "tgt_ids": tgt, "forced_logprobs": forced,
                      "greedy_ids": strip(greedy[0].tolist()),
                      "beam": [{"ids": strip(s.tolist()), "score": float(v)}
                               for s, v in zip(beam.sequences, beam.sequences_scores)]})
    # The log-probability of a whole sequence (every token, </s> included) by a teacher-forced pass: transformers'
    # beam scores count a </s> forced at the length limit as log 1, which a comparison must not inherit.
    def sequence_logprob(src, ids):
        with torch.no_grad():
            inp = torch.tensor([src])
            out = model(input_ids=inp, attention_mask=torch.ones_like(inp),
                        decoder_input_ids=torch.tensor([[pad] + ids[:-1]]))
            logp = torch.log_softmax(out.logits[0].double(), -1)
            return float(sum(logp[t, tok] for t, tok in enumerate(ids)))
    for c in cases:
        for h in c["beam"]:
            h["logprob"] = sequence_logprob(c["src_ids"], h["ids"])
    reference = {"pad": pad, "cases": cases}
    if a.texts:
        reference["texts"] = texts(a, model, pad, sequence_logprob)
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1, ensure_ascii=False)


def texts(a, model, pad, sequence_logprob):
    """What a user of transformers prints for a.texts source lines: MarianTokenizer in, MarianTokenizer out."""
    import random
    from transformers import MarianTokenizer
    with open(os.path.join(a.out, "tokenizer_config.json"), "w") as f:  # as OPUS-MT folders have one
        json.dump({"source_lang": "en", "target_lang": "de", "separate_vocabs": a.separate,
                   "model_max_length": 512}, f)
    tok = MarianTokenizer.from_pretrained(a.out)
    target = spm.SentencePieceProcessor(model_file=os.path.join(a.out, "target.spm"))
    rng = random.Random(a.seed)
    pool = ENGLISH + GERMAN[:4] + ["zebra", "qx", "Tree", "fast."]
    out = []
    for i in range(a.texts):
        line = " ".join(rng.choice(pool) for _ in range(rng.randint(1, 8)))
        if i % 7 == 3:
            line = ">>fra<< " + line
        inp = tok(line, return_tensors="pt")
        with torch.no_grad():
            greedy = model.generate(**inp, num_beams=1, do_sample=False, max_new_tokens=20, min_new_tokens=0,
                                    bad_words_ids=[[pad]])
            beam = model.generate(**inp, num_beams=4, num_return_sequences=4, do_sample=False, max_new_tokens=20,
                                  length_penalty=0.0, early_stopping=True, bad_words_ids=[[pad]])
        src = inp["input_ids"][0].tolist()
        hyps = [[i for i in s.tolist() if i != pad] for s in beam]
        scored = [(sequence_logprob(src, h), h) for h in hyps]
        best_logprob, best = max(scored, key=lambda x: x[0])
        pieces = tok.convert_ids_to_tokens(greedy[0].tolist(), skip_special_tokens=True)
        out.append({"source": line, "src_ids": src,
                    "greedy_pieces_target_spm_lacks": sum(target.piece_to_id(p) == target.unk_id() for p in pieces),
                    "greedy_ids": [i for i in greedy[0].tolist() if i != pad],
                    "greedy_text": tok.decode(greedy[0], skip_special_tokens=True),
                    "beam_text": tok.decode(best, skip_special_tokens=True), "beam_logprob": best_logprob})
    return out


if __name__ == "__main__":
    main()
