#pragma once
// A small MarianMT folder as transformers saves one, written here by hand (no Python), in the layout of most OPUS-MT
// models: two different SentencePiece models (source.spm over English-like words, target.spm over German-like ones)
// and one joint vocabulary of both (Marian's numbering: </s> 0, <unk> 1, the pieces, <pad> last) whose embeddings
// the two sides share, so that the target model lacks the source side's pieces; d_model 8, one layer each side,
// random weights. For tests of parla-convert and of what follows an import.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "models/tensor_archive.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"

namespace parla::testing {

// The folder `name` in `dir` (see above); returns its path.
inline std::string write_marian_folder(const TempDir& dir, const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path folder = dir.file(name);
  fs::create_directories(folder);
  auto train = [](const std::vector<std::string>& words) {
    std::vector<std::string> corpus;
    for (int i = 0; i < 200; ++i) {
      std::string line;
      for (int j = 0; j < 4; ++j) line += words[static_cast<size_t>((i * 3 + j * 5) % words.size())] + " ";
      corpus.push_back(line);
    }
    parla::VocabConfig vc;
    vc.vocab_size = 40;
    vc.byte_fallback = false;
    vc.character_coverage = 1.0;
    return parla::text::train_sentencepiece(corpus, vc, 1, 1).model_proto;
  };
  const std::string source_proto = train(toy_words());
  const std::string target_proto = train({"das", "haus", "ist", "klein", "ein", "hund", "rennt", "schnell", "gr\xC3\xBCner",
                                          "baum", "wir", "sehen"});
  nlohmann::json vocab = {{"</s>", 0}, {"<unk>", 1}};
  for (const auto* proto : {&source_proto, &target_proto}) {
    const auto spm = parla::text::SentencePieceVocab::from_serialized(*proto);
    for (int id = 4; id < spm.size(); ++id)
      if (!vocab.contains(spm.id_to_piece(id))) vocab[spm.id_to_piece(id)] = vocab.size();
  }
  const int64_t v = static_cast<int64_t>(vocab.size()) + 1, d = 8, f = 16;
  vocab["<pad>"] = v - 1;
  std::ofstream(folder / "vocab.json") << vocab.dump();
  std::ofstream(folder / "source.spm", std::ios::binary) << source_proto;
  std::ofstream(folder / "target.spm", std::ios::binary) << target_proto;
  nlohmann::json config = {{"model_type", "marian"},        {"vocab_size", v},
                           {"decoder_vocab_size", v},        {"d_model", d},
                           {"encoder_layers", 1},            {"decoder_layers", 1},
                           {"encoder_attention_heads", 2},   {"decoder_attention_heads", 2},
                           {"encoder_ffn_dim", f},           {"decoder_ffn_dim", f},
                           {"activation_function", "swish"}, {"max_position_embeddings", 32},
                           {"scale_embedding", true},        {"pad_token_id", v - 1},
                           {"eos_token_id", 0},              {"decoder_start_token_id", v - 1},
                           {"share_encoder_decoder_embeddings", true}};
  std::ofstream(folder / "config.json") << config.dump(2);
  torch::manual_seed(2);
  parla::models::TensorArchive st;
  st.write("format", std::string("pt"));
  st.write("model.shared.weight", torch::randn({v, d}));
  st.write("final_logits_bias", torch::randn({1, v}));
  auto layer = [&](const std::string& p, bool decoder) {
    std::vector<std::string> attentions = {"self_attn"};
    if (decoder) attentions.push_back("encoder_attn");
    for (const auto& a : attentions) {
      for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
        st.write(p + "." + a + "." + proj + ".weight", torch::randn({d, d}));
        st.write(p + "." + a + "." + proj + ".bias", torch::randn({d}));
      }
      st.write(p + "." + a + "_layer_norm.weight", torch::randn({d}));
      st.write(p + "." + a + "_layer_norm.bias", torch::randn({d}));
    }
    st.write(p + ".fc1.weight", torch::randn({f, d}));
    st.write(p + ".fc1.bias", torch::randn({f}));
    st.write(p + ".fc2.weight", torch::randn({d, f}));
    st.write(p + ".fc2.bias", torch::randn({d}));
    st.write(p + ".final_layer_norm.weight", torch::randn({d}));
    st.write(p + ".final_layer_norm.bias", torch::randn({d}));
  };
  layer("model.encoder.layers.0", false);
  layer("model.decoder.layers.0", true);
  st.save((folder / "model.safetensors").string());
  return folder.string();
}

}  // namespace parla::testing
