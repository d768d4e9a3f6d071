#include "convert/hf_marian_import.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include <torch/torch.h>

#include "convert/hf_folder.h"
#include "convert/hf_marian_layout.h"
#include "convert/marian_import.h"
#include "core/error.h"
#include "formats/bounded_file.h"
#include "formats/json_file.h"
#include "nn/positional_encoding.h"
#include "text/sentencepiece_model_check.h"

namespace parla::convert {

namespace fs = std::filesystem;
using formats::JsonFields;
using formats::read_json_file;

ImportedModel read_hf_marian(const std::string& dir) {
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const JsonFields c(config_path, read_json_file(config_path, 1u << 20));
  const std::string type = c.string("model_type");
  if (type != "marian")
    throw DataError(config_path + ": model_type '" + type + "' is not 'marian' (parla imports MarianMT models)");
  for (const char* key : {"normalize_before", "normalize_embedding", "add_final_layer_norm"})
    if (c.has(key) && c.boolean(key))
      throw DataError(config_path + ": " + key + " = true is not Marian's layout (post-norm, no embedding norm), "
                      "which parla imports");
  ImportedModel m;
  m.model = read_bart_config(c, config_path, "gelu");  // MarianConfig's default
  ModelConfig& cfg = m.model;
  const int64_t d = cfg.d_model;
  cfg.norm = LayerNormPlacement::kPost;
  cfg.sinusoidal_layout = SinusoidalLayout::kConcatenated;
  cfg.output_bias = true;
  const bool shared = !c.has("share_encoder_decoder_embeddings") || c.boolean("share_encoder_decoder_embeddings");
  cfg.share_embeddings = shared;

  // Vocabularies: vocab.json, and target_vocab.json when the two sides have their own.
  const std::string vocab_path = (fs::path(dir) / "vocab.json").string();
  const std::string target_vocab_path = (fs::path(dir) / "target_vocab.json").string();
  const auto src_vocab = read_hf_vocab(vocab_path);
  const bool separate = !shared && fs::exists(target_vocab_path);
  const auto tgt_vocab = separate ? read_hf_vocab(target_vocab_path) : src_vocab;
  const std::string& tgt_vocab_path = separate ? target_vocab_path : vocab_path;
  const int64_t vs = static_cast<int64_t>(src_vocab.size()), vt = static_cast<int64_t>(tgt_vocab.size());
  if (c.integer("vocab_size") != vs)
    throw DataError(config_path + ": vocab_size " + std::to_string(c.integer("vocab_size")) + ", but " + vocab_path +
                    " has " + std::to_string(vs) + " pieces");
  if (c.has("decoder_vocab_size") && c.integer("decoder_vocab_size") != vt)
    throw DataError(config_path + ": decoder_vocab_size " + std::to_string(c.integer("decoder_vocab_size")) + ", but " +
                    tgt_vocab_path + " has " + std::to_string(vt) + " pieces");
  const int64_t pad_s = hf_piece_id(src_vocab, "<pad>", vocab_path), unk_s = hf_piece_id(src_vocab, "<unk>", vocab_path),
                eos_s = hf_piece_id(src_vocab, "</s>", vocab_path);
  const int64_t pad_t = hf_piece_id(tgt_vocab, "<pad>", tgt_vocab_path), unk_t = hf_piece_id(tgt_vocab, "<unk>", tgt_vocab_path),
                eos_t = hf_piece_id(tgt_vocab, "</s>", tgt_vocab_path);
  if (c.integer("pad_token_id") != pad_s)
    throw DataError(config_path + ": pad_token_id " + std::to_string(c.integer("pad_token_id")) + " is not the id of '<pad>' in " +
                    vocab_path + " (" + std::to_string(pad_s) + ")");
  if (c.integer("eos_token_id") != eos_t)
    throw DataError(config_path + ": eos_token_id " + std::to_string(c.integer("eos_token_id")) + " is not the id of '</s>' in " +
                    tgt_vocab_path + " (" + std::to_string(eos_t) + ")");
  // Decoding starts from pad (OPUS-MT), or from <s> (a folder parla exported from one of its own models).
  const int64_t start = c.has("decoder_start_token_id") ? c.integer("decoder_start_token_id") : pad_t;
  const bool bos_start = start != pad_t;
  if (bos_start && (start < 0 || start >= vt || tgt_vocab[static_cast<size_t>(start)] != "<s>"))
    throw DataError(config_path + ": decoder_start_token_id " + std::to_string(start) +
                    " is neither the target's <pad> nor its <s>; parla's model.decoder_start is bos or pad");
  cfg.decoder_start = bos_start ? DecoderStart::kBos : DecoderStart::kPad;
  auto bos_of = [&](const std::vector<std::string>& v, const std::string& path) {
    return bos_start ? hf_piece_id(v, "<s>", path) : int64_t{-1};
  };
  const auto order_s = parla_order(vs, pad_s, unk_s, eos_s, vocab_path, bos_of(src_vocab, vocab_path));
  const auto order_t = parla_order(vt, pad_t, unk_t, eos_t, tgt_vocab_path, bos_of(tgt_vocab, tgt_vocab_path));
  for (int64_t id : order_s) m.src_pieces.push_back(src_vocab[static_cast<size_t>(id)]);
  for (int64_t id : order_t) m.tgt_pieces.push_back(tgt_vocab[static_cast<size_t>(id)]);
  m.src_spm = formats::read_bounded_file((fs::path(dir) / "source.spm").string(), 64u << 20);
  m.tgt_spm = formats::read_bounded_file((fs::path(dir) / "target.spm").string(), 64u << 20);
  text::check_sentencepiece_model(m.src_spm, (fs::path(dir) / "source.spm").string());
  text::check_sentencepiece_model(m.tgt_spm, (fs::path(dir) / "target.spm").string());

  HfWeights w(dir, "MarianMTModel");
  const std::string& st = w.path();
  auto permuted = [](const torch::Tensor& t, const std::vector<int64_t>& order) {
    return t.index_select(0, torch::tensor(order, torch::kLong));
  };
  const std::string enc_embed = w.has("model.encoder.embed_tokens.weight") ? "model.encoder.embed_tokens.weight" : "model.shared.weight";
  const std::string dec_embed = w.has("model.decoder.embed_tokens.weight") ? "model.decoder.embed_tokens.weight" : "model.shared.weight";
  auto tgt_table = w.get(dec_embed, {vt, d});
  m.weights["tgt_embed.weight"] = permuted(tgt_table, order_t);
  if (!shared) m.weights["src_embed.weight"] = permuted(w.get(enc_embed, {vs, d}), order_s);
  for (const char* alias : {"model.shared.weight", "model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"})
    if (w.has(alias)) w.ignore(alias);  // copies of the tables read above (tied)
  if (!cfg.tie_output) {
    m.weights["output_weight"] = permuted(w.get("lm_head.weight", {vt, d}), order_t);
  } else if (w.has("lm_head.weight")) {
    if (!w.get("lm_head.weight", {vt, d}).equal(tgt_table))
      throw DataError(st + ": lm_head.weight differs from the decoder's embeddings, but config.json ties them");
  }
  m.weights["output_bias"] = permuted(w.get("final_logits_bias", {1, vt}).view({vt}), order_t);
  // Older saves carry the sinusoid tables; they must be Marian's, which parla computes itself.
  for (const char* side : {"encoder", "decoder"}) {
    const std::string name = std::string("model.") + side + ".embed_positions.weight";
    if (!w.has(name)) continue;
    auto table = w.get(name, {cfg.max_positions, d});
    auto expected = nn::sinusoidal_table(cfg.max_positions, d, 0, SinusoidalLayout::kConcatenated);
    if ((table - expected).abs().max().item<double>() > 1e-4)
      throw DataError(st + ": " + name + " is not the table of concatenated sinusoids that MarianMT computes");
  }
  read_hf_layers(w, m);
  w.check_all_used("Marian model");
  m.info = {{"imported_from", dir}, {"format", "huggingface-marian"}};
  return m;
}

}  // namespace parla::convert
