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

// Cross-key rules of the self-attention variants (the per-key ranges are checked by the schema).
void validate_attention_keys(const ModelConfig& m) {
  const AttentionKind enc = m.self_attention(false), dec = m.self_attention(true);
  const char* dec_key = m.decoder_attention == AttentionKind::kInherit ? "model.attention" : "model.decoder_attention";
  if (!attention_kind_is_causal(dec))
    throw ConfigError(std::string("key '") + dec_key +
                      "': nystrom attention cannot run causally (its landmarks average over future positions); "
                      "choose it for model.encoder_attention only");
  if ((enc == AttentionKind::kSparse || dec == AttentionKind::kSparse) && m.sparse_pattern.empty())
    throw ConfigError("key 'model.sparse_pattern': empty (list at least one of: " +
                      config::names_joined<AtomicSparsePattern>() + ")");
  if (m.routing_decay <= 0 || m.routing_decay >= 1)
    throw ConfigError("key 'model.routing_decay': " + std::to_string(m.routing_decay) +
                      " is outside (0, 1)");
  if (m.nystrom_conv_kernel % 2 == 0 && m.nystrom_conv_kernel != 0)
    throw ConfigError("key 'model.nystrom_conv_kernel': " + std::to_string(m.nystrom_conv_kernel) +
                      " is even (the skip must be centred: use an odd kernel, or 0 for none)");
  // Longer than any sequence the model is built for: more landmarks or clusters than positions.
  if (enc == AttentionKind::kNystrom && m.nystrom_landmarks > m.max_positions)
    throw ConfigError("key 'model.nystrom_landmarks': " + std::to_string(m.nystrom_landmarks) +
                      " landmarks exceed model.max_positions = " + std::to_string(m.max_positions));
  if ((enc == AttentionKind::kRouting || dec == AttentionKind::kRouting) && m.routing_clusters > m.max_positions)
    throw ConfigError("key 'model.routing_clusters': " + std::to_string(m.routing_clusters) +
                      " clusters exceed model.max_positions = " + std::to_string(m.max_positions));
}

}  // namespace

const config::SectionSchema<ModelConfig>& ModelConfig::schema() {
  using namespace config;
  static const SectionSchema<ModelConfig> s = [] {
    SectionSchema<ModelConfig> s("model", "Architecture and sizes of the model.");
    s.add("type", &ModelConfig::type,
          "Architecture: transformer (Vaswani et al. 2017), rnn (attentional encoder-decoder, Bahdanau et al. "
          "2015) or bert (masked-LM encoder, Devlin et al. 2019).");
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
    s.add("source_word_dropout", &ModelConfig::source_word_dropout,
          "Word dropout on the source: in training each source token's whole embedding is zeroed with this "
          "probability and the kept ones scaled by 1/(1-p) (Sennrich et al. 2016; Marian's --dropout-src). "
          "Transformer and rnn models.",
          between(0, 0.99));
    s.add("target_word_dropout", &ModelConfig::target_word_dropout,
          "Word dropout on the decoder's input tokens (the shifted target), as source_word_dropout (Marian's "
          "--dropout-trg).",
          between(0, 0.99));
    s.add("activation", &ModelConfig::activation,
          "Feed-forward activation: relu (the paper), gelu (Hendrycks & Gimpel 2016; BERT) or swish (x sigmoid(x), "
          "Ramachandran et al. 2017; Marian's OPUS-MT models).");
    s.add("norm", &ModelConfig::norm,
          "Layer norm placement: post (after the residual sum, as in the paper) or pre (before each sublayer, "
          "with a final norm; Wang et al. 2019).");
    s.add("positions", &ModelConfig::positions, "Position encodings: sinusoidal (fixed) or learned.");
    s.add("sinusoidal_layout", &ModelConfig::sinusoidal_layout,
          "Layout of sinusoidal positions: interleaved (PE(pos, 2i) = sin, PE(pos, 2i+1) = cos, as Vaswani et al. "
          "write it), concatenated (the d/2 sines, then the d/2 cosines of the same frequencies: tensor2tensor, "
          "Marian and Hugging Face's MarianMT) or fairseq (fairseq's table, which M2M-100 and NLLB use: the sines "
          "then the cosines of the frequencies 10000^(-i/(d/2-1)), positions counted from 2, padding_idx + 1).");
    s.add("scale_embeddings", &ModelConfig::scale_embeddings,
          "Multiply token embeddings by sqrt(d_model) before adding positions (Vaswani et al. 2017, Sec. 3.4). "
          "Transformer models.");
    s.add("output_bias", &ModelConfig::output_bias,
          "A learned bias on the output logits (Marian's decoder_ff_logit_out_b, Hugging Face's final_logits_bias). "
          "Transformer models.");
    s.add("decoder_start", &ModelConfig::decoder_start,
          "The token the decoder starts from: bos (id 2, parla's own models), pad (id 0, as Marian and Hugging "
          "Face's MarianMT start; id 2 is then an ordinary token of the imported vocabulary) or eos (id 3, as "
          "M2M-100 and NLLB start). The start token is never output (but eos ends a sentence as ever). Transformer "
          "models.");
    s.add("max_positions", &ModelConfig::max_positions,
          "Longest sequence (tokens) for learned positions and BERT; sinusoidal positions are unlimited.",
          at_least(1));
    s.add("share_embeddings", &ModelConfig::share_embeddings,
          "One embedding table for source and target; requires a joint vocabulary (equal sizes).");
    s.add("tie_output", &ModelConfig::tie_output,
          "Use the decoder input embedding as the output projection (Press & Wolf 2017).");
    s.add("attention", &ModelConfig::attention,
          "Self-attention variant of encoder and decoder (each can be overridden by encoder_attention / "
          "decoder_attention): full; local (restricted to local_window positions on each side, causal in the "
          "decoder); linear (elu+1 feature map, Katharopoulos et al. 2020); sparse (position-based patterns, "
          "sparse_pattern); routing (Routing Transformer, Roy et al. 2021); performer (FAVOR+ random features, "
          "Choromanski et al. 2021). Cross-attention is always full.",
          one_of({"full", "local", "linear", "sparse", "routing", "performer"}));
    s.add("encoder_attention", &ModelConfig::encoder_attention,
          "Encoder self-attention; empty = `attention`. The values of `attention`, or nystrom (Nystrom "
          "low-rank attention, Xiong et al. 2021; encoder only).");
    s.add("decoder_attention", &ModelConfig::decoder_attention,
          "Decoder self-attention (causal); empty = `attention`. The values of `attention`.");
    s.add("local_window", &ModelConfig::local_window,
          "Window K of local attention and of the sparse band: position i attends to j with |i - j| <= K.",
          at_least(1));
    s.add("sparse_pattern", &ModelConfig::sparse_pattern,
          "Atomic patterns whose union is sparse attention (seed 002, Fig. 4): band (|i - j| <= local_window), "
          "global (the first sparse_global_tokens positions see and are seen by all), dilated (j = i +- k * "
          "sparse_dilation, k = 1..sparse_dilated_window), random (sparse_random_blocks key blocks per query "
          "block, a fixed function of the positions and attention_seed), block (i and j in the same block). "
          "band + global + random is BigBird's (Zaheer et al. 2020).");
    s.add("sparse_block_size", &ModelConfig::sparse_block_size,
          "Block size of sparse attention's blockwise computation, of its block-local and random patterns.",
          at_least(1));
    s.add("sparse_global_tokens", &ModelConfig::sparse_global_tokens,
          "Global tokens of the sparse `global` pattern.", at_least(1));
    s.add("sparse_random_blocks", &ModelConfig::sparse_random_blocks,
          "Random key blocks per query block of the sparse `random` pattern.", at_least(1));
    s.add("sparse_dilation", &ModelConfig::sparse_dilation, "Gap of the sparse `dilated` pattern.", at_least(1));
    s.add("sparse_dilated_window", &ModelConfig::sparse_dilated_window,
          "Keys on each side of the sparse `dilated` pattern.", at_least(1));
    s.add("routing_clusters", &ModelConfig::routing_clusters,
          "Centroids K per head of routing attention (about sqrt(T) in Roy et al. 2021); 1 = full attention.",
          at_least(1));
    s.add("routing_decay", &ModelConfig::routing_decay,
          "Decay lambda of routing attention's centroid moving averages (seed 002, eqs. 8-10).",
          between(0, 1));
    s.add("performer_features", &ModelConfig::performer_features,
          "Random features m per head of performer attention.", at_least(1));
    s.add("performer_redraw_every", &ModelConfig::performer_redraw_every,
          "Redraw performer's random features every this many training forward passes (0 = never); fixed at "
          "inference and saved in checkpoints.",
          at_least(0));
    s.add("nystrom_landmarks", &ModelConfig::nystrom_landmarks,
          "Landmarks m of Nystrom attention (segment means of the real positions).", at_least(1));
    s.add("nystrom_pinv_iterations", &ModelConfig::nystrom_pinv_iterations,
          "Iterations of Nystrom attention's Moore-Penrose pseudo-inverse (Xiong et al. 2021, eq. 7).",
          at_least(1));
    s.add("nystrom_conv_kernel", &ModelConfig::nystrom_conv_kernel,
          "Kernel of Nystrom attention's depthwise convolution skip over the values (odd; 0 = none).",
          at_least(0));
    s.add("attention_seed", &ModelConfig::attention_seed,
          "Seed of sparse attention's random connections, performer's random features and routing's initial "
          "centroids (part of the model: saved with it).",
          at_least(0));
    s.add("rnn_cell", &ModelConfig::rnn_cell, "Recurrent cell of the rnn model.");
    s.add("rnn_attention", &ModelConfig::rnn_attention,
          "Attention of the rnn model: bahdanau (additive, v^T tanh(W1 h + W2 s), on the previous decoder "
          "state) or luong (general, s^T W h, on the current state).");
    s.add("rnn_hidden", &ModelConfig::rnn_hidden,
          "Hidden size of each direction of the bidirectional encoder and of the decoder.", at_least(1));
    s.add("rnn_layers", &ModelConfig::rnn_layers,
          "Stacked recurrent layers in encoder and decoder (at most 128: LibTorch builds a stack of N in time "
          "quadratic in N, 21 s for 1,000, and a checkpoint's config is input).",
          between(1, 128));
    s.add("embed_dim", &ModelConfig::embed_dim, "Word embedding size of the rnn model.", at_least(1));
    s.add("input_feeding", &ModelConfig::input_feeding,
          "Feed the previous attentional vector into the decoder input (Luong et al. 2015).");
    s.add("segments", &ModelConfig::segments, "BERT segment (token type) vocabulary size.", at_least(1));
    s.on_finalize([](ModelConfig& m, const std::set<std::string>& given) {
      apply_preset(m, given);
      validate_attention_keys(m);
      if (m.type == ModelType::kBert && (m.source_word_dropout > 0 || m.target_word_dropout > 0))
        throw ConfigError(std::string("key 'model.") +
                          (m.source_word_dropout > 0 ? "source_word_dropout" : "target_word_dropout") +
                          "': word dropout is for translation models (transformer, rnn); BERT masks tokens "
                          "with training.mlm_prob instead");
      if (m.type != ModelType::kRnn && m.d_model % m.heads != 0)
        throw ConfigError("key 'model.d_model': " + std::to_string(m.d_model) +
                          " is not divisible by model.heads = " + std::to_string(m.heads));
    });
    return s;
  }();
  return s;
}

}  // namespace parla
