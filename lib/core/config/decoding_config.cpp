#include "core/config/decoding_config.h"

namespace parla {

const config::SectionSchema<DecodingConfig>& DecodingConfig::schema() {
  using namespace config;
  static const SectionSchema<DecodingConfig> s = [] {
    SectionSchema<DecodingConfig> s("decoding", "Search settings (parla-translate, validation BLEU in parla-train).");
    s.add("beam_size", &DecodingConfig::beam_size, "Beam size; 1 is greedy search.", at_least(1))
        .flag("-b,--beam-size");
    s.add("n_best", &DecodingConfig::n_best,
          "Hypotheses printed per sentence as 'i ||| translation ||| score' when > 1 (at most beam_size).",
          at_least(1)).flag("-n,--n-best");
    s.add("length_penalty", &DecodingConfig::length_penalty,
          "GNMT length penalty alpha: hypotheses are ranked by log P / ((5 + |Y|) / 6)^alpha, |Y| counting EOS; "
          "0 ranks by log-probability.",
          at_least(0)).flag("--normalize,--length-penalty,--lenpen");
    s.add("max_length_factor", &DecodingConfig::max_length_factor,
          "Output length limit a in a * source_tokens + b (EOS is forced there; also capped by the model's "
          "positions). The default 3 never cuts normal translations.",
          greater_than(0)).flag("--max-length-factor");
    s.add("max_length_offset", &DecodingConfig::max_length_offset,
          "Output length limit b in a * source_tokens + b.", at_least(0)).flag("--max-length-offset");
    s.add("min_length", &DecodingConfig::min_length, "Minimum output tokens before EOS is allowed.", at_least(0))
        .flag("--min-length");
    s.add("max_input_length", &DecodingConfig::max_input_length,
          "Source tokens kept per line; longer lines are truncated with a warning naming the line. 0 = the "
          "model's limit (its positions minus one for EOS; 1023 for a model without one: sinusoidal positions, "
          "RNNs).",
          at_least(0)).flag("--max-input-length");
    s.add("max_input_chars", &DecodingConfig::max_input_chars,
          "Characters kept per line before it is sanitised and tokenized; the rest of a longer line is read "
          "and dropped with a warning naming the line, so a huge line costs no more memory than this budget. "
          "Characters are code points (bytes that do not continue a UTF-8 sequence), with at most 4 bytes each. "
          "0 = 32 per piece of the source limit (max_input_length or the model's): twice SentencePiece's longest "
          "piece (16 characters), so a line that fits the piece limit is never cut by it unless it fits only "
          "because long runs of spaces or unknown characters collapse.",
          at_least(0)).flag("--max-input-chars");
    s.add("batch_size", &DecodingConfig::batch_size,
          "Sentences per batch (when batch_tokens is 0), and at most batch_size x 128 padded source tokens, so "
          "that long lines form smaller batches (decoding memory grows with rows x source length).",
          at_least(1))
        .flag("--batch-size,--mini-batch");
    s.add("batch_tokens", &DecodingConfig::batch_tokens,
          "Padded source tokens per batch; 0 batches by batch_size sentences.", at_least(0))
        .flag("--batch-tokens,--max-tokens");
    s.add("maxi_batch", &DecodingConfig::maxi_batch,
          "Batches read ahead and sorted by length together; output order is restored.", at_least(1))
        .flag("--maxi-batch");
    s.add("line_buffered", &DecodingConfig::line_buffered,
          "Translate each line as soon as it is read and flush the output (interactive use; parla-translate "
          "turns it on when stdin is a terminal).")
        .flag("--line-buffered");
    s.add("alignment", &DecodingConfig::alignment,
          "Append the attention alignment: 'hard' = Moses pairs src-tgt of each target piece's most attended "
          "source piece, 'soft' = the full attention matrix; '' = off.").flag("--alignment");
    s.add("sampling", &DecodingConfig::sampling,
          "Sample each token from the model's distribution instead of searching (back-translation).")
        .flag("--sampling");
    s.add("temperature", &DecodingConfig::temperature, "Softmax temperature when sampling.", greater_than(0))
        .flag("--temperature");
    s.add("top_k", &DecodingConfig::top_k, "Sample among the k most likely tokens; 0 = all.", at_least(0))
        .flag("--top-k");
    s.add("shortlist", &DecodingConfig::shortlist,
          "Lexical shortlist: a file made by parla-shortlist (or any CTranslate2 vocabulary map: lines 'SOURCE<TAB>"
          "TARGET ...', SOURCE a piece or n-gram of pieces, empty for pieces always allowed). Each sentence's output "
          "is restricted to the targets of its source pieces, the always-allowed pieces, EOS and UNK, and the output "
          "layer and softmax are computed over that set only (faster; scores renormalised over it). Per sentence, "
          "so a translation does not depend on its batch. '' = the whole vocabulary.")
        .flag("--shortlist");
    s.add("source_lang", &DecodingConfig::source_lang,
          "Source language of a multilingual model (imported M2M-100 or NLLB), in the model's own codes (en, de "
          "for M2M-100; eng_Latn, deu_Latn for NLLB): its token goes before the source's pieces, as the model's "
          "tokenizer places it. '' = the language the model's tokenizer was saved with. An unknown code is an "
          "error listing the valid ones.")
        .flag("--source-lang,--src-lang");
    s.add("target_lang", &DecodingConfig::target_lang,
          "Target language of a multilingual model, in its own codes: decoding starts from </s> and its token is "
          "forced next (transformers' forced_bos_token_id), then left out of the printed text. '' = the language "
          "the model's tokenizer was saved with.")
        .flag("--target-lang,--tgt-lang");
    s.add("target_prefix", &DecodingConfig::target_prefix,
          "Text every translation starts with (CTranslate2's target_prefix): its pieces are forced, after the "
          "target language's token where there is one, and scored 0, and decoding continues from them; the printed "
          "translation includes it. '' = none.")
        .flag("--target-prefix");
    s.add("precision", &DecodingConfig::precision,
          "Arithmetic of the decoder: fp32, or bf16 / fp16 autocast (matrix products in 16 bits, softmax and "
          "scores in fp32), or int8 (CPU only: weights of the linear layers, embeddings and output projection in 8 "
          "bits per output channel, activations quantized per row at run time; an int8 checkpoint from "
          "`parla-train quantize` always decodes this way). fp16 needs a CUDA device; bf16 runs on CPUs and GPUs "
          "with compute capability >= 8.0.").flag("--precision");
    s.on_finalize([](DecodingConfig& d, const std::set<std::string>&) {
      if (d.n_best > d.beam_size)
        throw ConfigError("key 'decoding.n_best' (" + std::to_string(d.n_best) + ") must not exceed "
                          "'decoding.beam_size' (" + std::to_string(d.beam_size) + ")");
    });
    return s;
  }();
  return s;
}

}  // namespace parla
