#include "train/optimizer_state.h"

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/torch_compat.h"

namespace parla::train {

namespace {

const std::vector<torch::Tensor>& parameters_of(const torch::optim::AdamW& optimizer, size_t expected,
                                                const std::string& path) {
  if (optimizer.param_groups().size() != 1)
    throw std::logic_error("parla's AdamW has one parameter group");
  const auto& params = optimizer.param_groups()[0].params();
  if (params.size() != expected)
    throw DataError(path + ": the optimizer has " + std::to_string(params.size()) + " parameters, " +
                    std::to_string(expected) + " names given");
  return params;
}

// A moment as the parameter's own: same shape, on its device, in memory of its own (the optimizer updates it in
// place, so it must not stay a view of the file).
torch::Tensor moment(const models::TensorArchive& archive, const std::string& entry, const torch::Tensor& param) {
  torch::Tensor t;
  if (!archive.try_read(entry, t)) return {};
  if (t.sizes() != param.sizes() || !t.is_floating_point())
    throw DataError(archive.path() + ": optimizer state '" + entry + "' has shape " + c10::str(t.sizes()) +
                    ", its parameter " + c10::str(param.sizes()));
  return t.to(param.device(), param.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

int64_t parse_step(const models::TensorArchive& archive, const std::string& entry, const std::string& text) {
  try {
    size_t used = 0;
    const int64_t step = std::stoll(text, &used);
    if (used == text.size() && step >= 0) return step;
  } catch (const std::exception&) {
  }
  throw DataError(archive.path() + ": optimizer state '" + entry + "' is not a step count");
}

void put(torch::optim::AdamW& optimizer, const torch::Tensor& param, int64_t step, torch::Tensor exp_avg,
         torch::Tensor exp_avg_sq, torch::Tensor max_exp_avg_sq, const models::TensorArchive& archive,
         const std::string& where) {
  if (!exp_avg.defined() || !exp_avg_sq.defined())
    throw DataError(archive.path() + ": optimizer state of '" + where + "' lacks its moments");
  auto state = std::make_unique<torch::optim::AdamWParamState>();
  state->step(step);
  state->exp_avg(exp_avg);
  state->exp_avg_sq(exp_avg_sq);
  if (max_exp_avg_sq.defined()) state->max_exp_avg_sq(max_exp_avg_sq);
  optimizer.state()[compat::optimizer_state_key(param)] = std::move(state);
}

// LibTorch's serialization (format 1), through the saved address list.
bool load_legacy(const models::TensorArchive& archive, torch::optim::AdamW& optimizer,
                 const std::vector<torch::Tensor>& params) {
  const std::string group = "optimizer.param_groups.param_groups/0.params/";
  torch::Tensor count;
  if (!archive.try_read(group + "size", count)) return false;
  if (count.numel() != 1 || count.item<int64_t>() != static_cast<int64_t>(params.size()))
    throw DataError(archive.path() + ": the optimizer state is for " + std::to_string(count.numel() == 1 ? count.item<int64_t>() : -1) +
                    " parameters, the model has " + std::to_string(params.size()));
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string* key = archive.read_string(group + std::to_string(i));
    if (!key) throw DataError(archive.path() + ": the optimizer state lacks parameter " + std::to_string(i));
    const std::string base = "optimizer.state." + *key + ".";
    const std::string* step = archive.read_string(base + "step");
    if (!step) continue;  // a parameter that was never updated
    put(optimizer, params[i], parse_step(archive, base + "step", *step), moment(archive, base + "exp_avg", params[i]),
        moment(archive, base + "exp_avg_sq", params[i]), moment(archive, base + "max_exp_avg_sq", params[i]), archive,
        "parameter " + std::to_string(i));
  }
  return true;
}

}  // namespace

void save_optimizer_state(const torch::optim::AdamW& optimizer, const std::vector<std::string>& names,
                          models::TensorArchive& archive) {
  const auto& params = parameters_of(optimizer, names.size(), "optimizer");
  archive.write("optimizer.type", std::string("adamw"));  // present even before the first update
  for (size_t i = 0; i < params.size(); ++i) {
    auto it = optimizer.state().find(compat::optimizer_state_key(params[i]));
    if (it == optimizer.state().end()) continue;
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*it->second);
    const std::string base = "optimizer." + names[i] + ".";
    archive.write(base + "step", torch::tensor(s.step(), torch::kLong).reshape({}));
    archive.write(base + "exp_avg", s.exp_avg());
    archive.write(base + "exp_avg_sq", s.exp_avg_sq());
    if (s.max_exp_avg_sq().defined()) archive.write(base + "max_exp_avg_sq", s.max_exp_avg_sq());
  }
}

bool load_optimizer_state(const models::TensorArchive& archive, torch::optim::AdamW& optimizer,
                          const std::vector<std::string>& names) {
  const auto& params = parameters_of(optimizer, names.size(), archive.path());
  optimizer.state().clear();
  if (archive.read_string("optimizer.pytorch_version")) return load_legacy(archive, optimizer, params);
  if (!archive.read_string("optimizer.type")) return false;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string base = "optimizer." + names[i] + ".";
    torch::Tensor step;
    if (!archive.try_read(base + "step", step)) continue;
    if (step.numel() != 1 || step.scalar_type() != torch::kLong || step.item<int64_t>() < 0)
      throw DataError(archive.path() + ": optimizer state '" + base + "step' is not a step count");
    put(optimizer, params[i], step.item<int64_t>(), moment(archive, base + "exp_avg", params[i]),
        moment(archive, base + "exp_avg_sq", params[i]), moment(archive, base + "max_exp_avg_sq", params[i]), archive,
        names[i]);
  }
  return true;
}

}  // namespace parla::train
