#include "train/multi_tensor_update.h"

#include <cmath>
#include <map>

#include "runtime/torch_compat.h"

namespace parla::train {
namespace {

// The tensors of one AdamW step that share a step count (and so their bias corrections): every parameter in the
// usual run, where each has a gradient at every update.
struct AdamWLists {
  std::vector<torch::Tensor> params, grads, exp_avgs, exp_avg_sqs;
};

}  // namespace

void multi_tensor_adamw_step(torch::optim::AdamW& optimizer) {
  torch::NoGradGuard no_grad;
  for (auto& group : optimizer.param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamWOptions&>(group.options());
    TORCH_CHECK(!o.amsgrad(), "multi_tensor_adamw_step: AMSGrad is not supported");
    std::map<int64_t, AdamWLists> by_step;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& slot = optimizer.state()[compat::optimizer_state_key(p)];
      if (!slot) {
        auto fresh = std::make_unique<torch::optim::AdamWParamState>();
        fresh->step(0);
        fresh->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        fresh->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        slot = std::move(fresh);
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
      s.step(s.step() + 1);
      auto& l = by_step[s.step()];
      l.params.push_back(p);
      l.grads.push_back(p.grad());
      l.exp_avgs.push_back(s.exp_avg());
      l.exp_avg_sqs.push_back(s.exp_avg_sq());
    }
    const double lr = o.lr(), wd = o.weight_decay(), eps = o.eps();
    const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
    for (auto& [step, l] : by_step) {
      const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
      const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
      if (wd != 0) at::_foreach_mul_(l.params, 1 - lr * wd);
      at::_foreach_mul_(l.exp_avgs, beta1);
      at::_foreach_add_(l.exp_avgs, l.grads, 1 - beta1);
      at::_foreach_mul_(l.exp_avg_sqs, beta2);
      at::_foreach_addcmul_(l.exp_avg_sqs, l.grads, l.grads, 1 - beta2);
      auto denoms = at::_foreach_sqrt(l.exp_avg_sqs);
      at::_foreach_div_(denoms, std::sqrt(bias_correction2));
      at::_foreach_add_(denoms, eps);
      at::_foreach_addcdiv_(l.params, l.exp_avgs, denoms, -lr / bias_correction1);
    }
  }
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm) {
  torch::NoGradGuard no_grad;
  const auto norms = at::_foreach_norm(grads, 2);
  auto total = norms.size() == 1 ? norms[0] : torch::stack(norms).norm(2);
  if (max_norm > 0) {
    // min(1, max_norm / (norm + 1e-6)); multiplying by an exact 1 changes nothing, hence no branch on the host.
    auto factor = torch::clamp(max_norm / (total + 1e-6), c10::nullopt, 1.0);
#if PARLA_TORCH2
    at::_foreach_mul_(grads, factor);
#else
    // LibTorch 1.13 has no foreach product by one tensor: the list form, with the factor for every gradient (one
    // operator; on CUDA its shapes differ, so 1.13 would launch per tensor, while LibTorch 2 has the fused form).
    at::_foreach_mul_(grads, std::vector<torch::Tensor>(grads.size(), factor));
#endif
  }
  return total;
}

void unscale_gradients(const std::vector<torch::Tensor>& grads, double inv_scale) {
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(grads, inv_scale);
}

void average_into(const std::vector<torch::Tensor>& averages, const std::vector<torch::Tensor>& params, double d) {
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(averages, d);
  at::_foreach_add_(averages, params, 1.0 - d);
}

}  // namespace parla::train
