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
