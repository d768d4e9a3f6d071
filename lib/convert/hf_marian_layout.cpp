#include "convert/hf_marian_layout.h"

namespace parla::convert {

const std::vector<LayerWeight>& hf_marian_layer(bool decoder) {
  using W = LayerWeight;
  static const std::vector<LayerWeight> encoder = {
      {W::kStacked, "self_attn", "self_attn.qkv_proj", false, {"q", "k", "v"}},
      {W::kWritesResidual, "self_attn.out_proj", "self_attn.out_proj"},
      {W::kNorm, "self_attn_layer_norm", "self_attn_norm"},
      {W::kReadsResidual, "fc1", "ffn.fc1", true},
      {W::kWritesResidual, "fc2", "ffn.fc2", true},
      {W::kNorm, "final_layer_norm", "ffn_norm"},
  };
  static const std::vector<LayerWeight> decoder_layer = {
      {W::kStacked, "self_attn", "self_attn.qkv_proj", false, {"q", "k", "v"}},
      {W::kWritesResidual, "self_attn.out_proj", "self_attn.out_proj"},
      {W::kNorm, "self_attn_layer_norm", "self_attn_norm"},
      {W::kReadsResidual, "encoder_attn.q_proj", "cross_attn.q_proj"},
      {W::kStacked, "encoder_attn", "cross_attn.kv_proj", false, {"k", "v"}},
      {W::kWritesResidual, "encoder_attn.out_proj", "cross_attn.out_proj"},
      {W::kNorm, "encoder_attn_layer_norm", "cross_attn_norm"},
      {W::kReadsResidual, "fc1", "ffn.fc1", true},
      {W::kWritesResidual, "fc2", "ffn.fc2", true},
      {W::kNorm, "final_layer_norm", "ffn_norm"},
  };
  return decoder ? decoder_layer : encoder;
}

}  // namespace parla::convert

namespace parla::convert {

void write_hf_layers(models::TensorArchive& st, const torch::OrderedDict<std::string, torch::Tensor>& params,
                     const ModelConfig& cfg, const torch::Tensor& order) {
  const int64_t d = cfg.d_model;
  auto p = [&](const std::string& name) { return params[name].detach().to(torch::kFloat); };
  auto cols = [&](const torch::Tensor& w) { return w.index_select(1, order).contiguous(); };
  auto rows = [&](const torch::Tensor& w) { return w.index_select(0, order).contiguous(); };
  auto linear_in = [&](const std::string& from, const std::string& to) {  // reads the residual stream
    st.write(to + ".weight", cols(p(from + ".weight")));
    st.write(to + ".bias", p(from + ".bias").contiguous());
  };
  auto linear_out = [&](const std::string& from, const std::string& to) {  // writes the residual stream
    st.write(to + ".weight", rows(p(from + ".weight")));
    st.write(to + ".bias", p(from + ".bias").index_select(0, order).contiguous());
  };
  auto norm = [&](const std::string& from, const std::string& to) {
    st.write(to + ".weight", p(from + ".weight").index_select(0, order).contiguous());
    st.write(to + ".bias", p(from + ".bias").index_select(0, order).contiguous());
  };
  // parla's stacked projections (rows Q; K; V) split into Hugging Face's.
  auto split = [&](const std::string& from, const std::vector<std::string>& parts, const std::string& to) {
    const auto w = cols(p(from + ".weight")), b = p(from + ".bias");
    for (size_t k = 0; k < parts.size(); ++k) {
      st.write(to + "." + parts[k] + "_proj.weight", w.narrow(0, static_cast<int64_t>(k) * d, d).contiguous());
      st.write(to + "." + parts[k] + "_proj.bias", b.narrow(0, static_cast<int64_t>(k) * d, d).contiguous());
    }
  };
  for (const bool decoder : {false, true}) {
    const std::string side = decoder ? "decoder" : "encoder";
    for (int l = 0; l < (decoder ? cfg.decoder_layers : cfg.encoder_layers); ++l) {
      const std::string from = side + ".layers." + std::to_string(l) + ".",
                        to = "model." + side + ".layers." + std::to_string(l) + ".";
      for (const auto& x : hf_marian_layer(decoder)) {
        switch (x.kind) {
          case LayerWeight::kStacked: split(from + x.parla, x.parts, to + x.hf); break;
          case LayerWeight::kReadsResidual: linear_in(from + x.parla, to + x.hf); break;
          case LayerWeight::kWritesResidual: linear_out(from + x.parla, to + x.hf); break;
          case LayerWeight::kNorm: norm(from + x.parla, to + x.hf); break;
        }
      }
    }
  }
}

}  // namespace parla::convert
