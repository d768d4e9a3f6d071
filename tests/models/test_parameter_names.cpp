// Parameter and buffer names of whole models with efficient self-attention variants in both stacks: the nesting
// (encoder.layers.N.self_attn..., decoder.layers.N.cross_attn...) that every checkpoint's keys follow.
#include <catch2/catch.hpp>

#include <sstream>
#include <string>

#include <torch/torch.h>

#include "models/bert.h"
#include "models/factory.h"

namespace parla_test_parameter_names {

// named_parameters() then named_buffers(), one "P|B name [shape]" line each.
std::string listing(torch::nn::Module& m) {
  std::ostringstream o;
  o << "\n";
  for (auto& p : m.named_parameters(true)) o << "P " << p.key() << " " << p.value().sizes() << "\n";
  for (auto& b : m.named_buffers(true)) o << "B " << b.key() << " " << b.value().sizes() << "\n";
  return o.str();
}

parla::ModelConfig one_layer_each() {
  parla::ModelConfig c;
  c.d_model = 16;
  c.ffn_dim = 32;
  c.heads = 4;
  c.encoder_layers = 1;
  c.decoder_layers = 1;
  c.routing_clusters = 3;
  c.performer_features = 8;
  c.nystrom_landmarks = 4;
  c.nystrom_conv_kernel = 3;
  return c;
}

// Recorded from the code before issue 38 (commit 1e20905: one MultiHeadAttention holding every variant's state),
// by building these models with that commit's libparla.a and printing listing(). The embeddings come first
// because the model registers them first.
const char* const kNystromEncoderRoutingDecoder = R"(
P tgt_embed.weight [13, 16]
P src_embed.weight [11, 16]
P encoder.layers.0.self_attn.nystrom_conv [4, 1, 3, 1]
P encoder.layers.0.self_attn.qkv_proj.weight [48, 16]
P encoder.layers.0.self_attn.qkv_proj.bias [48]
P encoder.layers.0.self_attn.out_proj.weight [16, 16]
P encoder.layers.0.self_attn.out_proj.bias [16]
P encoder.layers.0.ffn.fc1.weight [32, 16]
P encoder.layers.0.ffn.fc1.bias [32]
P encoder.layers.0.ffn.fc2.weight [16, 32]
P encoder.layers.0.ffn.fc2.bias [16]
P encoder.layers.0.self_attn_norm.weight [16]
P encoder.layers.0.self_attn_norm.bias [16]
P encoder.layers.0.ffn_norm.weight [16]
P encoder.layers.0.ffn_norm.bias [16]
P decoder.layers.0.self_attn.qkv_proj.weight [48, 16]
P decoder.layers.0.self_attn.qkv_proj.bias [48]
P decoder.layers.0.self_attn.out_proj.weight [16, 16]
P decoder.layers.0.self_attn.out_proj.bias [16]
P decoder.layers.0.cross_attn.q_proj.weight [16, 16]
P decoder.layers.0.cross_attn.q_proj.bias [16]
P decoder.layers.0.cross_attn.kv_proj.weight [32, 16]
P decoder.layers.0.cross_attn.kv_proj.bias [32]
P decoder.layers.0.cross_attn.out_proj.weight [16, 16]
P decoder.layers.0.cross_attn.out_proj.bias [16]
P decoder.layers.0.ffn.fc1.weight [32, 16]
P decoder.layers.0.ffn.fc1.bias [32]
P decoder.layers.0.ffn.fc2.weight [16, 32]
P decoder.layers.0.ffn.fc2.bias [16]
P decoder.layers.0.self_attn_norm.weight [16]
P decoder.layers.0.self_attn_norm.bias [16]
P decoder.layers.0.cross_attn_norm.weight [16]
P decoder.layers.0.cross_attn_norm.bias [16]
P decoder.layers.0.ffn_norm.weight [16]
P decoder.layers.0.ffn_norm.bias [16]
B decoder.layers.0.self_attn.routing_centroids [4, 3, 4]
B decoder.layers.0.self_attn.routing_sums [4, 3, 4]
B decoder.layers.0.self_attn.routing_counts [4, 3]
)";

const char* const kBertPerformer = R"(
P mlm_bias [17]
P token_embed.weight [17, 16]
P segment_embed.weight [2, 16]
P positions.weight [1024, 16]
P embed_norm.weight [16]
P embed_norm.bias [16]
P encoder.layers.0.self_attn.qkv_proj.weight [48, 16]
P encoder.layers.0.self_attn.qkv_proj.bias [48]
P encoder.layers.0.self_attn.out_proj.weight [16, 16]
P encoder.layers.0.self_attn.out_proj.bias [16]
P encoder.layers.0.ffn.fc1.weight [32, 16]
P encoder.layers.0.ffn.fc1.bias [32]
P encoder.layers.0.ffn.fc2.weight [16, 32]
P encoder.layers.0.ffn.fc2.bias [16]
P encoder.layers.0.self_attn_norm.weight [16]
P encoder.layers.0.self_attn_norm.bias [16]
P encoder.layers.0.ffn_norm.weight [16]
P encoder.layers.0.ffn_norm.bias [16]
P mlm_dense.weight [16, 16]
P mlm_dense.bias [16]
P mlm_norm.weight [16]
P mlm_norm.bias [16]
P pooler.weight [16, 16]
P pooler.bias [16]
P nsp.weight [2, 16]
P nsp.bias [2]
B encoder.layers.0.self_attn.performer_features [8, 4]
B encoder.layers.0.self_attn.performer_passes []
)";

TEST_CASE("a transformer with nystrom encoder and routing decoder self-attention keeps its checkpoint names") {
  auto c = one_layer_each();
  c.encoder_attention = parla::AttentionKind::kNystrom;
  c.decoder_attention = parla::AttentionKind::kRouting;
  auto model = parla::models::build_seq2seq(c, 11, 13);
  CHECK(listing(*model) == kNystromEncoderRoutingDecoder);
}

TEST_CASE("a BERT encoder with performer self-attention keeps its checkpoint names") {
  auto c = one_layer_each();
  c.type = parla::ModelType::kBert;
  c.attention = parla::AttentionKind::kPerformer;
  auto model = parla::models::build_bert(c, 17);
  CHECK(listing(*model) == kBertPerformer);
}

}  // namespace parla_test_parameter_names
