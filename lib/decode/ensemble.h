#pragma once
// An ensemble of models decoding together (Marian/fairseq ensembles): each step's log-probabilities are the
// mean of the members' log-probabilities (a product of experts, log-linear with equal weights), so search
// code treats the ensemble as one Seq2SeqModel. Members must share the target vocabulary.
#include <memory>
#include <vector>

#include "models/seq2seq.h"

namespace parla::decode {

class Ensemble : public models::Seq2SeqModel {
 public:
  // Throws DataError when the members' vocabulary sizes or start tokens differ, or the list is empty.
  explicit Ensemble(std::vector<std::shared_ptr<models::Seq2SeqModel>> members);

  std::unique_ptr<models::DecoderState> start(const torch::Tensor& src) override;
  // Mean log-probabilities; `attention` receives the mean of the members' attention.
  torch::Tensor step(const torch::Tensor& prev, models::DecoderState& state, torch::Tensor* attention) override;
  // Mean log-probabilities [B, T, V] (valid logits: softmax of them is the normalised product of experts).
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in) override;
  int64_t vocab_size() const override;
  // The smallest of the members' limits.
  int64_t max_positions() const override;
  int64_t start_id() const override { return members_.front()->start_id(); }
  bool supports_shortlist() const override {
    for (const auto& m : members_)
      if (!m->supports_shortlist()) return false;
    return true;
  }

  size_t size() const { return members_.size(); }

 private:
  std::vector<std::shared_ptr<models::Seq2SeqModel>> members_;
};

}  // namespace parla::decode
