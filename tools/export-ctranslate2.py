#!/usr/bin/env python3
"""Exports a parla Transformer checkpoint as a CTranslate2 model folder, through CTranslate2's own specification
API (its format belongs to its Python package: `pip install ctranslate2`, which tools/setup-libtorch2.sh installs
into .venv-torch2).

  .venv-torch2/bin/python tools/export-ctranslate2.py CHECKPOINT OUT_DIR [--quantization int8]

Pre- and post-norm, shared or separate vocabularies, tied or separate output projection, sinusoidal (either
layout: the table itself is written) or learned positions, relu, gelu or swish, a logit bias, models imported from
Marian (which start from pad), and M2M-100 / NLLB (fairseq's sinusoids; they start from </s> and take the target
language in CTranslate2's target_prefix: translate_batch(..., target_prefix=[["deu_Latn"]]), the source language
token first in the source: ["eng_Latn"] + pieces). OUT_DIR must not exist; it is written whole through a temporary folder, with
source.spm and target.spm beside the model, so that a user tokenizes as parla does:

  translator = ctranslate2.Translator(OUT_DIR)
  sp = sentencepiece.SentencePieceProcessor(model_file=OUT_DIR + "/source.spm")
  translator.translate_batch([sp.encode(line, out_type=str)], suppress_sequences=[["<pad>"], ["<s>"]])

Every vocabulary row is kept (pad and the start token included), so CTranslate2 normalises over the same tokens
parla does; parla never outputs pad or the start token, hence suppress_sequences. The checkpoint is read by
bench/reference/parla_transformer.py (format 2 as data)."""
import argparse
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "reference"))
import parla_transformer as pt  # noqa: E402

import ctranslate2  # noqa: E402
from ctranslate2.specs import common_spec, transformer_spec  # noqa: E402

ACTIVATIONS = {"relu": common_spec.Activation.RELU, "gelu": common_spec.Activation.GELU,
               "swish": common_spec.Activation.SWISH}


def fail(message):
    print(f"export-ctranslate2: error: {message}", file=sys.stderr)
    sys.exit(1)


def sinusoids(n, d, layout):
    """parla's table (lib/nn/positional_encoding.cpp), in float64 rounded once to float32."""
    if layout == "fairseq":  # M2M-100 and NLLB: positions from 2, frequencies 10000^(-i/(d/2-1))
        half = d // 2
        angle = np.arange(2, n + 2, dtype=np.float64)[:, None] * np.exp(
            np.arange(half) * (-np.log(10000.0) / (half - 1)))[None, :]
        table = np.concatenate([np.sin(angle), np.cos(angle)] + ([np.zeros((n, 1))] if d % 2 else []), axis=1)
        return table.astype(np.float32)
    concatenated = layout == "concatenated"
    angle = np.arange(n, dtype=np.float64)[:, None] * np.exp(np.arange(0, d, 2) * (-np.log(10000.0) / d))[None, :]
    if concatenated:
        table = np.concatenate([np.sin(angle), np.cos(angle)[:, : d // 2]], axis=1)
    else:
        table = np.zeros((n, d))
        table[:, 0::2] = np.sin(angle)
        table[:, 1::2] = np.cos(angle)[:, : d // 2]
    return table.astype(np.float32)


def pieces(spm_bytes, table, start_is_bos):
    if table:
        out = list(table)
    else:
        import sentencepiece as spm
        sp = spm.SentencePieceProcessor(model_proto=spm_bytes)
        out = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    out[0], out[1], out[3] = "<pad>", "<unk>", "</s>"
    if start_is_bos:
        out[2] = "<s>"
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checkpoint")
    ap.add_argument("output")
    ap.add_argument("--quantization", default=None,
                    help="CTranslate2's weight type (int8, int8_float32, float16, ...); default: float32")
    a = ap.parse_args()
    if os.path.exists(a.output):
        print(f"export-ctranslate2: error: {a.output}: exists; give a folder that does not exist yet", file=sys.stderr)
        sys.exit(2)
    try:
        state, meta = pt.read_parla_checkpoint(a.checkpoint)
    except (OSError, ValueError, KeyError) as e:
        fail(f"{a.checkpoint}: {e}")
    m = pt.ModelConfig.from_parla(meta["config"]["model"])
    raw = meta["config"]["model"]
    if raw.get("type", "transformer") != "transformer":
        fail(f"{a.checkpoint}: model.type '{raw.get('type')}' has no CTranslate2 Transformer equivalent")
    if m.attention != "full":
        fail(f"{a.checkpoint}: self-attention '{m.attention}' has no CTranslate2 equivalent")
    if m.activation not in ACTIVATIONS:
        fail(f"{a.checkpoint}: activation '{m.activation}' has no CTranslate2 equivalent")
    pre = m.norm == "pre"
    spec = transformer_spec.TransformerSpec.from_config((m.encoder_layers, m.decoder_layers), m.heads,
                                                        pre_norm=pre, activation=ACTIVATIONS[m.activation])
    spec.config.layer_norm_epsilon = 1e-5  # torch's LayerNorm, which parla uses
    f32 = lambda t: t.detach().float().numpy().copy()
    d = m.d_model
    scale = raw.get("scale_embeddings", True)
    tgt_embed = f32(state["tgt_embed.weight"])
    src_embed = f32(state["src_embed.weight"]) if "src_embed.weight" in state else tgt_embed
    spec.encoder.embeddings[0].weight = src_embed
    spec.decoder.embeddings.weight = tgt_embed
    spec.encoder.scale_embeddings = scale
    spec.decoder.scale_embeddings = scale
    if m.positions == "learned":
        spec.encoder.position_encodings.encodings = f32(state["src_positions.weight"])
        spec.decoder.position_encodings.encodings = f32(state["tgt_positions.weight"])
    else:
        table = sinusoids(max(1024, raw.get("max_positions", 1024)), d, raw.get("sinusoidal_layout", "interleaved"))
        spec.encoder.position_encodings.encodings = table
        spec.decoder.position_encodings.encodings = table

    def linear(s, name):
        s.weight = f32(state[name + ".weight"])
        if name + ".bias" in state:
            s.bias = f32(state[name + ".bias"])

    def norm(s, name):
        s.gamma = f32(state[name + ".weight"])
        s.beta = f32(state[name + ".bias"])

    for i, layer in enumerate(spec.encoder.layer):
        p = f"encoder.layers.{i}"
        linear(layer.self_attention.linear[0], p + ".self_attn.qkv_proj")  # rows Q; K; V, as CTranslate2's fused
        linear(layer.self_attention.linear[1], p + ".self_attn.out_proj")
        norm(layer.self_attention.layer_norm, p + ".self_attn_norm")
        linear(layer.ffn.linear_0, p + ".ffn.fc1")
        linear(layer.ffn.linear_1, p + ".ffn.fc2")
        norm(layer.ffn.layer_norm, p + ".ffn_norm")
    for i, layer in enumerate(spec.decoder.layer):
        p = f"decoder.layers.{i}"
        linear(layer.self_attention.linear[0], p + ".self_attn.qkv_proj")
        linear(layer.self_attention.linear[1], p + ".self_attn.out_proj")
        norm(layer.self_attention.layer_norm, p + ".self_attn_norm")
        linear(layer.attention.linear[0], p + ".cross_attn.q_proj")
        linear(layer.attention.linear[1], p + ".cross_attn.kv_proj")  # rows K; V
        linear(layer.attention.linear[2], p + ".cross_attn.out_proj")
        norm(layer.attention.layer_norm, p + ".cross_attn_norm")
        linear(layer.ffn.linear_0, p + ".ffn.fc1")
        linear(layer.ffn.linear_1, p + ".ffn.fc2")
        norm(layer.ffn.layer_norm, p + ".ffn_norm")
    if pre:
        norm(spec.encoder.layer_norm, "encoder.final_norm")
        norm(spec.decoder.layer_norm, "decoder.final_norm")
    spec.decoder.projection.weight = f32(state["output_weight"]) if "output_weight" in state else tgt_embed
    if "output_bias" in state:
        spec.decoder.projection.bias = f32(state["output_bias"])

    start = raw.get("decoder_start", "bos")
    start_is_bos = start == "bos"
    src = pieces(meta["src_spm"], meta.get("src_pieces"), start_is_bos)
    tgt = pieces(meta["tgt_spm"], meta.get("tgt_pieces"), start_is_bos)
    spec.register_source_vocabulary(src)
    spec.register_target_vocabulary(tgt)
    spec.config.add_source_eos = True
    spec.config.bos_token = tgt[2] if start_is_bos else "<s>"
    # M2M-100 and NLLB start from </s>; their target language then goes in CTranslate2's target_prefix.
    spec.config.decoder_start_token = {"bos": "<s>", "pad": "<pad>", "eos": "</s>"}[start]
    spec.config.eos_token = "</s>"
    spec.config.unk_token = "<unk>"
    spec.validate()
    spec.optimize(quantization=a.quantization)

    tmp = f"{a.output}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    try:
        spec.save(tmp)
        for name, data in (("source.spm", meta["src_spm"]), ("target.spm", meta["tgt_spm"])):
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(data)
        os.rename(tmp, a.output)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"export-ctranslate2: wrote {a.output} from {a.checkpoint}", file=sys.stderr)


if __name__ == "__main__":
    main()
