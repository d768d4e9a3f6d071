#include "models/packed_fp32.h"

#include <unordered_set>

#include <torch/torch.h>

#include "models/transformer.h"
#include "nn/linear.h"
#include "nn/packed_matrix.h"

namespace parla::models {

bool pack_fp32(Seq2SeqModel& model) {
  if (!nn::packed_fp32_wanted(at::get_num_threads())) return false;
  torch::NoGradGuard no_grad;
  std::unordered_set<const torch::nn::Module*> seen;  // a shared module is packed once
  for (const auto& item : model.named_modules()) {
    if (!seen.insert(item.value().get()).second) continue;
    auto linear = std::dynamic_pointer_cast<nn::LinearImpl>(item.value());
    if (linear && !linear->packed() && !linear->int8() && linear->weight.scalar_type() == torch::kFloat &&
        linear->weight.device().is_cpu())
      linear->use_packed(nn::PackedMatrix::pack_consuming(linear->weight));
  }
  if (auto* t = dynamic_cast<TransformerModel*>(&model)) {
    if (t->output_weight.defined()) {
      if (!t->output_packed && !t->output_int8) {
        t->output_packed = std::make_shared<const nn::PackedMatrix>(nn::PackedMatrix::pack_consuming(t->output_weight));
        t->output_weight.set_data(nn::released_like(t->output_weight));
      }
    } else if (!t->tgt_embed->packed_projection() && !t->tgt_embed->int8()) {
      // Every weight is released once packed (the embedding's lookups read the packed copy): packing them
      // consuming keeps the peak at one copy of the table rather than two.
      t->tgt_embed->use_packed_projection(nn::PackedMatrix::pack_consuming(t->tgt_embed->weight));
    }
  }
  return true;
}

}  // namespace parla::models
