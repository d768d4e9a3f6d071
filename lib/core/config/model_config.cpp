#include "core/config/model_config.h"

namespace parla {

namespace {

// Sizes of one preset; only the keys the user did not give are overwritten.
struct Preset {
  int d_model, ffn_dim, heads, encoder_layers, decoder_layers;
  double dropout;
  int rnn_hidden, embed_dim;
};

// base and big are Table 3 of Vaswani et al. (2017); tiny trains in minutes on 2 CPU cores.
Preset preset_sizes(const std::string& name) {
  if (name == "tiny") return {256, 1024, 4, 3, 3, 0.1, 256, 256};
  if (name == "big") return {1024, 4096, 16, 6, 6, 0.3, 1024, 1024};
  return {512, 2048, 8, 6, 6, 0.1, 512, 512};  // base
}

void apply_preset(ModelConfig& m, const std::set<std::string>& given) {
  if (m.preset.empty()) return;
  Preset p = preset_sizes(m.preset);
  auto fill = [&](const char* key, auto& member, auto value) {
    if (!given.count(key)) member = value;
  };
  fill("d_model", m.d_model, p.d_model);
  fill("ffn_dim", m.ffn_dim, p.ffn_dim);
  fill("heads", m.heads, p.heads);
  fill("encoder_layers", m.encoder_layers, p.encoder_layers);
  fill("decoder_layers", m.decoder_layers, p.decoder_layers);
  fill("dropout", m.dropout, p.dropout);
  fill("rnn_hidden", m.rnn_hidden, p.rnn_hidden);
  fill("embed_dim", m.embed_dim, p.embed_dim);
}

}  // namespace

const config::SectionSchema<ModelConfig>& ModelConfig::schema() {
  using namespace config;
  static const SectionSchema<ModelConfig> s = [] {
    SectionSchema<ModelConfig> s("model", "Architecture and sizes of the model.");
    s.add("type", &ModelConfig::type,
          "Architecture: transformer (Vaswani et al. 2017), rnn (attentional encoder-decoder, Bahdanau et al. "
          "2015) or bert (masked-LM encoder, Devlin et al. 2019).",
          one_of({"transformer", "rnn", "bert"}));
    s.add("preset", &ModelConfig::preset,
          "Size preset filling every size key not set explicitly: tiny (d_model 256, ffn 1024, 4 heads, 3+3 "
          "layers), base (512, 2048, 8, 6+6, dropout 0.1) or big (1024, 4096, 16, 6+6, dropout 0.3), the last two "
          "from Table 3 of Vaswani et al. (2017). Empty: the defaults below (the base sizes).",
          one_of({"", "tiny", "base", "big"}));
    s.add("d_model", &ModelConfig::d_model, "Model width d_model (embeddings and every sublayer output).", at_least(1));
    s.add("ffn_dim", &ModelConfig::ffn_dim, "Inner width d_ff of the position-wise feed-forward network.", at_least(1));
    s.add("heads", &ModelConfig::heads, "Attention heads h; d_model must be divisible by h.", at_least(1));
    s.add("encoder_layers", &ModelConfig::encoder_layers, "Encoder layers N (also the BERT depth).", at_least(1));
    s.add("decoder_layers", &ModelConfig::decoder_layers, "Decoder layers N.", at_least(1));
    s.add("dropout", &ModelConfig::dropout, "Dropout P_drop on embeddings and sublayer outputs.", between(0, 0.99));
    s.add("attention_dropout", &ModelConfig::attention_dropout, "Dropout on the attention weights.",
          between(0, 0.99));
    s.add("activation_dropout", &ModelConfig::activation_dropout,
          "Dropout after the feed-forward activation.", between(0, 0.99));
    s.add("activation", &ModelConfig::activation, "Feed-forward activation.", one_of({"relu", "gelu"}));
    s.add("norm", &ModelConfig::norm,
          "Layer norm placement: post (after the residual sum, as in the paper) or pre (before each sublayer, "
          "with a final norm; Wang et al. 2019).",
          one_of({"post", "pre"}));
    s.add("positions", &ModelConfig::positions, "Position encodings: sinusoidal (fixed) or learned.",
          one_of({"sinusoidal", "learned"}));
    s.add("max_positions", &ModelConfig::max_positions,
          "Longest sequence (tokens) for learned positions and BERT; sinusoidal positions are unlimited.",
          at_least(1));
    s.add("share_embeddings", &ModelConfig::share_embeddings,
          "One embedding table for source and target; requires a joint vocabulary (equal sizes).");
    s.add("tie_output", &ModelConfig::tie_output,
          "Use the decoder input embedding as the output projection (Press & Wolf 2017).");
    s.add("attention", &ModelConfig::attention,
          "Self-attention variant in encoder and decoder: full, local (restricted to local_window positions on "
          "each side; causal in the decoder) or linear (elu+1 feature map, Katharopoulos et al. 2020; causal in "
          "the decoder). Cross-attention is always full.",
          one_of({"full", "local", "linear"}));
    s.add("local_window", &ModelConfig::local_window,
          "Window K of local attention: position i attends to j with |i - j| <= K.", at_least(1));
    s.add("rnn_cell", &ModelConfig::rnn_cell, "Recurrent cell of the rnn model.", one_of({"gru", "lstm"}));
    s.add("rnn_attention", &ModelConfig::rnn_attention,
          "Attention of the rnn model: bahdanau (additive, v^T tanh(W1 h + W2 s), on the previous decoder "
          "state) or luong (general, s^T W h, on the current state).",
          one_of({"bahdanau", "luong"}));
    s.add("rnn_hidden", &ModelConfig::rnn_hidden,
          "Hidden size of each direction of the bidirectional encoder and of the decoder.", at_least(1));
    s.add("rnn_layers", &ModelConfig::rnn_layers, "Stacked recurrent layers in encoder and decoder.", at_least(1));
    s.add("embed_dim", &ModelConfig::embed_dim, "Word embedding size of the rnn model.", at_least(1));
    s.add("input_feeding", &ModelConfig::input_feeding,
          "Feed the previous attentional vector into the decoder input (Luong et al. 2015).");
    s.add("segments", &ModelConfig::segments, "BERT segment (token type) vocabulary size.", at_least(1));
    s.on_finalize([](ModelConfig& m, const std::set<std::string>& given) {
      apply_preset(m, given);
      if (m.type != "rnn" && m.d_model % m.heads != 0)
        throw ConfigError("key 'model.d_model': " + std::to_string(m.d_model) +
                          " is not divisible by model.heads = " + std::to_string(m.heads));
    });
    return s;
  }();
  return s;
}

}  // namespace parla
