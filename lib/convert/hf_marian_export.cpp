#include "convert/hf_marian_export.h"

#include <filesystem>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "convert/hf_marian_layout.h"
#include "convert/hf_folder.h"
#include "convert/hf_folder_writer.h"
#include "core/config.h"
#include "core/error.h"
#include "models/checkpoint.h"
#include "models/tensor_archive.h"
#include "models/transformer.h"

namespace parla::convert {

namespace {

// The residual-stream permutation that turns interleaved sinusoids into concatenated ones: new dimension k is old
// dimension order[k] (the sines' columns 0, 2, 4, ..., then the cosines' 1, 3, 5, ...).
torch::Tensor concatenating_order(int64_t d) {
  std::vector<int64_t> order;
  for (int64_t k = 0; k < d; k += 2) order.push_back(k);
  for (int64_t k = 1; k < d; k += 2) order.push_back(k);
  return torch::tensor(order, torch::kLong);
}

// The pieces of every id, as MarianMT's vocab.json names them: the table of an imported model, else the
// SentencePiece model's own pieces; the specials get MarianMT's names.
std::vector<std::string> pieces_of(const text::SentencePieceVocab& v, bool start_is_bos) {
  std::vector<std::string> out = v.pieces();
  if (out.empty())
    for (int id = 0; id < v.size(); ++id) out.push_back(v.id_to_piece(id));
  out[0] = "<pad>";
  out[1] = "<unk>";
  out[3] = "</s>";
  if (start_is_bos) out[2] = "<s>";
  return out;
}

nlohmann::json vocab_json(const std::vector<std::string>& pieces, const std::string& what) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (j.contains(pieces[i])) throw DataError(what + ": the piece '" + pieces[i] + "' names two ids");
    j[pieces[i]] = i;
  }
  return j;
}

}  // namespace

void export_hf_marian(const std::string& checkpoint, const std::string& out) {
  if (std::filesystem::exists(out)) throw UsageError(out + ": exists; give a folder that does not exist yet");
  auto loaded = models::load_seq2seq(checkpoint);
  const auto& meta = loaded.meta;
  if (!meta.int8.empty())
    throw DataError(checkpoint + ": is an int8 checkpoint; export the float checkpoint it was quantized from");
  const ModelConfig cfg = models::model_config(meta, checkpoint);
  auto refuse = [&](const std::string& what) {
    throw DataError(checkpoint + ": " + what + ", which a MarianMT model cannot represent; export it for "
                    "CTranslate2 instead (tools/export-ctranslate2.py), which can");
  };
  auto* model = dynamic_cast<models::TransformerModel*>(loaded.model.get());
  if (!model) refuse("model.type is '" + std::string(config::name_of(cfg.type)) + "'");
  if (cfg.norm != LayerNormPlacement::kPost) refuse("model.norm is '" + std::string(config::name_of(cfg.norm)) + "' (MarianMT is post-norm)");
  if (cfg.positions != PositionEncoding::kSinusoidal) refuse("model.positions is '" + std::string(config::name_of(cfg.positions)) + "'");
  for (const bool decoder : {false, true})
    if (cfg.self_attention(decoder) != AttentionKind::kFull)
      refuse("self-attention is '" + std::string(config::name_of(cfg.self_attention(decoder))) + "'");

  const int64_t d = cfg.d_model;
  const auto order = cfg.sinusoidal_layout == SinusoidalLayout::kInterleaved ? concatenating_order(d) : torch::arange(d);
  auto params = model->named_parameters(true);
  auto p = [&](const std::string& name) { return params[name].detach().to(torch::kFloat); };
  auto cols = [&](const torch::Tensor& w) { return w.index_select(1, order).contiguous(); };

  models::TensorArchive st;
  st.write("format", std::string("pt"));
  const auto tgt_vocab = models::target_vocab(meta, checkpoint), src_vocab = models::source_vocab(meta, checkpoint);
  const int64_t vt = model->vocab_size(), vs = model->source_vocab_size();
  if (cfg.share_embeddings) {
    st.write("model.shared.weight", cols(p("tgt_embed.weight")));
  } else {
    st.write("model.encoder.embed_tokens.weight", cols(p("src_embed.weight")));
    st.write("model.decoder.embed_tokens.weight", cols(p("tgt_embed.weight")));
  }
  if (!cfg.tie_output) st.write("lm_head.weight", cols(p("output_weight")));
  st.write("final_logits_bias", (cfg.output_bias ? p("output_bias") : torch::zeros({vt})).view({1, vt}));
  write_hf_layers(st, params, cfg, order);

  const bool bos_start = model->start_id() == parla::kBosId;
  const auto src_pieces = pieces_of(src_vocab, bos_start), tgt_pieces = pieces_of(tgt_vocab, bos_start);
  const bool separate_vocabs = src_pieces != tgt_pieces || meta.src_spm != meta.tgt_spm;
  const int max_positions = std::max(cfg.max_positions, 1024);
  nlohmann::json config = {
      {"architectures", {"MarianMTModel"}},
      {"model_type", "marian"},
      {"vocab_size", vs},
      {"decoder_vocab_size", vt},
      {"share_encoder_decoder_embeddings", cfg.share_embeddings},
      {"tie_word_embeddings", cfg.tie_output},
      {"pad_token_id", parla::kPadId},
      {"eos_token_id", parla::kEosId},
      {"forced_eos_token_id", parla::kEosId},
      {"decoder_start_token_id", model->start_id()}};
  config.update(bart_config_json(cfg, max_positions));
  nlohmann::json bad_words = nlohmann::json::array({nlohmann::json::array({parla::kPadId})});
  if (bos_start) bad_words.push_back(nlohmann::json::array({parla::kBosId}));
  nlohmann::json generation = {{"decoder_start_token_id", model->start_id()},
                               {"eos_token_id", parla::kEosId},
                               {"forced_eos_token_id", parla::kEosId},
                               {"pad_token_id", parla::kPadId},
                               {"bad_words_ids", bad_words},
                               {"max_length", max_positions}};
  nlohmann::json tokenizer = {{"tokenizer_class", "MarianTokenizer"}, {"separate_vocabs", separate_vocabs},
                              {"model_max_length", max_positions}, {"eos_token", "</s>"},
                              {"unk_token", "<unk>"}, {"pad_token", "<pad>"}};

  HfFolderWriter folder(out);
  st.save(folder.file("model.safetensors"));
  folder.text("config.json", config.dump(2) + "\n");
  folder.text("generation_config.json", generation.dump(2) + "\n");
  folder.text("tokenizer_config.json", tokenizer.dump(2) + "\n");
  folder.text("vocab.json", vocab_json(src_pieces, checkpoint).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (separate_vocabs)
    folder.text("target_vocab.json",
                vocab_json(tgt_pieces, checkpoint).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  folder.text("source.spm", meta.src_spm);
  folder.text("target.spm", meta.tgt_spm);
  folder.commit();
}

}  // namespace parla::convert
