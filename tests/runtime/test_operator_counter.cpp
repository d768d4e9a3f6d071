// runtime::OperatorCounter: top-level operators only, by the phase whose scope is open, backward functions as
// the backward phase, host reads and stray .item() calls as host syncs, nothing outside a training step.
#include <catch2/catch.hpp>

#include <ATen/record_function.h>
#include <torch/torch.h>

#include "runtime/operator_counter.h"

namespace operator_counter_tests {

using parla::runtime::OperatorCounter;

TEST_CASE("the operator counter counts each phase's top-level operators and the host syncs of a training step") {
  auto x = torch::randn({4, 3}), w = torch::randn({3, 2}, torch::requires_grad());
  OperatorCounter counter;
  x.add(1);  // outside a training step: not counted
  CHECK(counter.counts().total() == 0);
  {
    RECORD_USER_SCOPE(parla::runtime::kStepScope);
    auto batch = x.mul(2);  // the step's own: "other"
    torch::Tensor loss;
    {
      RECORD_USER_SCOPE(parla::runtime::kForwardScope);
      loss = torch::matmul(batch, w).sum();  // matmul runs mm inside: one top-level operator, as one launch
      (void)loss.item<float>();              // a device read inside a phase: a host sync
    }
    loss.backward();  // its seed gradient (ones_like) is the step's own too
    {
      RECORD_USER_SCOPE(parla::runtime::kUpdateScope);
      torch::NoGradGuard no_grad;
      w.sub_(w.grad(), 0.1);
      {
        RECORD_USER_SCOPE(parla::runtime::kHostReadScope);  // the loop's own read: one sync, whatever it runs
        (void)w.sum().item<float>();
      }
    }
  }
  const auto c = counter.counts();
  CHECK(c.other == 2);
  CHECK(c.other_ops.at("aten::ones_like") == 1);
  CHECK(c.forward == 3);  // matmul, sum, item
  CHECK(c.forward_ops.at("aten::matmul") == 1);
  CHECK(c.forward_ops.count("aten::mm") == 0);
  CHECK(c.backward > 0);
  CHECK(c.backward_ops.count("aten::matmul") == 0);
  CHECK(c.update_ops.at("aten::sub_") == 1);
  CHECK(c.host_syncs == 2);  // the forward's .item() and the host read
  CHECK(c.sync_ops.at("aten::item") == 1);
  counter.reset();
  CHECK(counter.counts().total() == 0);
}

}  // namespace operator_counter_tests
