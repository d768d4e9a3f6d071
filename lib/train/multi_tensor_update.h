#pragma once
// The update's arithmetic over all parameter tensors at once (PyTorch's foreach optimizers, Apex's multi-tensor
// apply): AdamW, gradient-norm clipping, the fp16 loss scale's removal and the weight average's step, each in a
// number of operations that does not grow with the number of parameter tensors where LibTorch has a multi-tensor
// kernel for the device (CUDA: one launch per chunk of tensors). On the CPU the same operations run tensor by tensor
// inside LibTorch, with the same arithmetic as before, element for element.
//
// The AdamW state stays in torch::optim::AdamW's own state objects (AdamWParamState: step, exp_avg, exp_avg_sq),
// so checkpoints keep their format (train/optimizer_state.h) and torch::optim::AdamW::step is the reference the
// tests compare with.
#include <vector>

#include <torch/torch.h>

namespace parla::train {

// One AdamW step (Loshchilov & Hutter 2019, decoupled weight decay) of every parameter with a gradient, at each
// group's learning rate: what torch::optim::AdamW::step computes (p <- p (1 - lr wd); m <- b1 m + (1 - b1) g;
// v <- b2 v + (1 - b2) g^2; p <- p - lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps)). A parameter's state is
// made at its first step, as AdamW makes it. AMSGrad is refused (parla never sets it).
void multi_tensor_adamw_step(torch::optim::AdamW& optimizer);

// The L2 norm of all of `grads` together (a 0-d float tensor on their device) and, with max_norm > 0, every
// gradient scaled by min(1, max_norm / (norm + 1e-6)): torch::nn::utils::clip_grad_norm_'s arithmetic (fp32 runs
// are bit-identical to it), without its read of the norm on the host.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& grads, double max_norm);

// grads *= inv_scale (the fp16 loss scale removed; exact for a power of two).
void unscale_gradients(const std::vector<torch::Tensor>& grads, double inv_scale);

// averages <- d averages + (1 - d) params (the weight average's step).
void average_into(const std::vector<torch::Tensor>& averages, const std::vector<torch::Tensor>& params, double d);

}  // namespace parla::train
