#include "models/bert.h"

#include <cmath>

#include <torch/torch.h>

#include "core/error.h"
#include "models/transformer.h"

namespace parla::models {

BertModel::BertModel(const ModelConfig& cfg, int64_t vocab) : cfg_(cfg), vocab_(vocab) {
  if (vocab < 5) throw ConfigError("BERT vocabulary of " + std::to_string(vocab) + " entries is too small");
  const int64_t d = cfg.d_model;
  token_embed = register_module("token_embed", nn::Embedding(vocab, d, false, kPadId));
  segment_embed = register_module("segment_embed", nn::Embedding(cfg.segments, d, false, -1));
  positions = register_module("positions", nn::PositionalEncoding(PositionEncoding::kLearned, cfg.max_positions, d));
  embed_norm = register_module("embed_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  encoder = register_module("encoder", TransformerEncoder(cfg));
  mlm_dense = register_module("mlm_dense", torch::nn::Linear(d, d));
  mlm_norm = register_module("mlm_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
  mlm_bias = register_parameter("mlm_bias", torch::zeros({vocab}));
  pooler = register_module("pooler", torch::nn::Linear(d, d));
  nsp = register_module("nsp", torch::nn::Linear(d, 2));
  for (auto* l : {&mlm_dense, &pooler, &nsp}) {
    torch::nn::init::xavier_uniform_((*l)->weight);
    torch::nn::init::zeros_((*l)->bias);
  }
}

torch::Tensor BertModel::encode(const torch::Tensor& tokens, const torch::Tensor& segments) {
  TORCH_CHECK(tokens.dim() == 2, "tokens must be [B, T]");
  auto seg = segments.defined() ? segments : torch::zeros_like(tokens);
  auto x = token_embed(tokens) + segment_embed(seg) + positions(tokens.size(1), 0, token_embed->weight.options());
  x = embed_norm(x);
  if (cfg_.dropout > 0 && is_training()) x = torch::dropout(x, cfg_.dropout, true);
  return encoder(x, tokens.ne(kPadId));
}

BertOutput BertModel::forward(const torch::Tensor& tokens, const torch::Tensor& segments,
                              const torch::Tensor& mlm_positions) {
  auto h = encode(tokens, segments);
  auto at = mlm_positions.defined() ? h.reshape({-1, h.size(-1)}).index_select(0, mlm_positions) : h;
  auto t = mlm_norm(torch::gelu(mlm_dense(at)));
  BertOutput out;
  out.mlm_logits = torch::matmul(t, token_embed->weight.t()) + mlm_bias;
  out.nsp_logits = nsp(torch::tanh(pooler(h.select(1, 0))));
  return out;
}

void init_encoder_from_bert(Seq2SeqModel& model, const BertModel& bert) {
  auto* transformer = dynamic_cast<TransformerModel*>(&model);
  if (!transformer) throw ConfigError("key 'model.type': only a transformer encoder can be initialised from BERT");
  const auto& a = transformer->config();
  const auto& b = bert.config();
  if (a.d_model != b.d_model || a.ffn_dim != b.ffn_dim || a.heads != b.heads ||
      a.encoder_layers != b.encoder_layers || a.norm != b.norm)
    throw ConfigError("key 'model': the BERT encoder (d_model " + std::to_string(b.d_model) + ", ffn_dim " +
                      std::to_string(b.ffn_dim) + ", heads " + std::to_string(b.heads) + ", " +
                      std::to_string(b.encoder_layers) + " layers, " + config::name_of(b.norm) + "-norm) does not match the model's (" +
                      std::to_string(a.d_model) + ", " + std::to_string(a.ffn_dim) + ", " + std::to_string(a.heads) +
                      ", " + std::to_string(a.encoder_layers) + ", " + config::name_of(a.norm) + ")");
  torch::NoGradGuard no_grad;
  auto from = bert.encoder->named_parameters(true);
  for (auto& p : transformer->encoder->named_parameters(true)) {
    const torch::Tensor* src = from.find(p.key());
    if (!src || src->sizes() != p.value().sizes())
      throw ConfigError("key 'model': BERT encoder has no parameter matching '" + p.key() + "'");
    p.value().copy_(*src);
  }
  if (transformer->src_embed->weight.sizes() == bert.token_embed->weight.sizes())
    transformer->src_embed->weight.copy_(bert.token_embed->weight);
  if (transformer->src_positions->learned() &&
      transformer->src_positions->weight.sizes() == bert.positions->weight.sizes())
    transformer->src_positions->weight.copy_(bert.positions->weight);
}

}  // namespace parla::models
