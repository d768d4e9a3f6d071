#pragma once
// What the training loop needs from a task (fairseq's tasks + criterions): the model, the lengths of the training
// examples for batching, how to build a batch, and the loss as sums over items with their normalisers. The loop
// divides each loss term by its count over the whole update (every accumulated batch on every rank), so that
// gradient accumulation and data parallelism give exactly the gradient of one large batch.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/types.h>

#include "data/batch.h"
#include "data/batch_sampler.h"
#include "models/tensor_archive.h"

namespace parla::train {

// Device tensors only: the training loop reads them back when it logs, not per batch. The normalisers are
// Task::counts of the (CPU) batch.
struct LossTerms {
  std::vector<torch::Tensor> sums;  // differentiable sums, one per term (divided by the matching count)
  torch::Tensor nll;                // scalar, detached: sum of -log p of term 0's items (perplexity)
};

struct ValidationResult {
  double loss = 0;        // sum over terms of sum/count
  double nll = 0;         // per item of term 0 (nats)
  double perplexity = 0;  // exp(nll)
  double bleu = -1;       // -1 when not computed
  int64_t sentences = 0;
  nlohmann::json extra = nlohmann::json::object();  // task-specific figures (e.g. NSP accuracy)
  nlohmann::json to_json() const;
};

class Task {
 public:
  virtual ~Task() = default;
  virtual std::string name() const = 0;
  virtual std::shared_ptr<torch::nn::Module> model() = 0;
  // Training examples kept after the length filter, with their lengths.
  virtual const data::LengthTable& train_lengths() const = 0;
  // The batch of training examples `ids` of `epoch` (on the CPU). May draw random numbers (BERT masking) from
  // the task's own generator, which save_state/load_state keep for exact resumption.
  virtual data::Batch train_batch(const std::vector<int64_t>& ids, int64_t epoch) = 0;
  // Number of loss terms, and each term's item count in a batch (known before the forward pass).
  virtual size_t num_terms() const { return 1; }
  virtual std::vector<double> counts(const data::Batch& batch) const {
    return {static_cast<double>(batch.tgt_tokens)};
  }
  // Forward pass and loss terms (the model's train/eval mode is the caller's).
  virtual LossTerms loss(const data::Batch& batch) = 0;
  // Loss and perplexity over the validation split (and BLEU when the task decodes), under autocast to
  // `precision` (the training's, resolved once by the trainer). Leaves the model in eval mode; must not disturb any
  // random generator the training uses.
  virtual ValidationResult validate(const torch::Device& device, c10::ScalarType precision) = 0;
  // Random state of the task itself (not torch's global generator).
  // Entries are named "task_state.<what>".
  virtual void save_state(models::TensorArchive&) const {}
  virtual void load_state(const models::TensorArchive&) {}
  // Tokens per second are reported as source + target tokens of a batch.
  static int64_t batch_tokens(const data::Batch& b) { return b.src_tokens + b.tgt_tokens; }
};

}  // namespace parla::train
