#pragma once
// AdamW's per-parameter state in a checkpoint, under the parameter's name: "optimizer.<name>.step" (I64 scalar),
// ".exp_avg", ".exp_avg_sq" and, with AMSGrad, ".max_exp_avg_sq", and "optimizer.type" = "adamw". Parameters that
// have no state yet (never updated) have no entries.
//
// Format-1 checkpoints (TorchScript archives) held LibTorch's own serialization instead: the state keyed by the
// address each parameter's TensorImpl had in the process that saved it ("optimizer.state.<address>.exp_avg"),
// with the list of those addresses in parameter order ("optimizer.param_groups.param_groups/0.params/<i>").
// load_optimizer_state reads both, so a run resumes exactly from either.
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "models/tensor_archive.h"

namespace parla::train {

// `names`: the names of the optimizer's parameters, in its order (the model's named_parameters()).
void save_optimizer_state(const torch::optim::AdamW& optimizer, const std::vector<std::string>& names,
                          models::TensorArchive& archive);
// Replaces the optimizer's state with the archive's; tensors go to each parameter's device. False (the state
// left empty) when the archive holds no optimizer state; DataError naming the file when it is inconsistent.
bool load_optimizer_state(const models::TensorArchive& archive, torch::optim::AdamW& optimizer,
                          const std::vector<std::string>& names);

}  // namespace parla::train
