#include "decode/ensemble.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "core/error.h"

namespace parla::decode {
namespace {

class EnsembleState : public models::DecoderState {
 public:
  std::vector<std::unique_ptr<models::DecoderState>> states;
  void reorder(const torch::Tensor& indices) override {
    for (auto& s : states) s->reorder(indices);
  }
  void reorder_beams(const torch::Tensor& rows, const torch::Tensor& sentences, int64_t beam) override {
    for (auto& s : states) s->reorder_beams(rows, sentences, beam);
  }
  bool append(models::DecoderState& base) override {
    auto* other = dynamic_cast<EnsembleState*>(&base);
    if (!other || other->states.size() != states.size()) return false;
    // All members or none: a member refusing after others accepted would leave the ensemble inconsistent.
    for (size_t i = 0; i < states.size(); ++i)
      if (!states[i]->append(*other->states[i])) {
        if (i == 0) return false;
        throw std::logic_error("ensemble member " + std::to_string(i + 1) + " cannot continue a running batch");
      }
    return true;
  }
  int64_t steps() const override { return states.front()->steps(); }
  void expect_steps(int64_t more) override {
    for (auto& s : states) s->expect_steps(more);
  }
};

}  // namespace

Ensemble::Ensemble(std::vector<std::shared_ptr<models::Seq2SeqModel>> members) : members_(std::move(members)) {
  if (members_.empty()) throw DataError("an ensemble needs at least one model");
  for (size_t i = 1; i < members_.size(); ++i) {
    if (members_[i]->vocab_size() != members_[0]->vocab_size())
      throw DataError("ensemble member " + std::to_string(i + 1) + " has a target vocabulary of " +
                      std::to_string(members_[i]->vocab_size()) + " entries, member 1 has " +
                      std::to_string(members_[0]->vocab_size()) + ": the models are incompatible");
    if (members_[i]->start_id() != members_[0]->start_id())
      throw DataError("ensemble member " + std::to_string(i + 1) + " starts decoding from token " +
                      std::to_string(members_[i]->start_id()) + ", member 1 from " +
                      std::to_string(members_[0]->start_id()) + " (model.decoder_start): the models are incompatible");
  }
  for (size_t i = 0; i < members_.size(); ++i) register_module("member" + std::to_string(i), members_[i]);
}

std::unique_ptr<models::DecoderState> Ensemble::start(const torch::Tensor& src) {
  auto state = std::make_unique<EnsembleState>();
  for (auto& m : members_) state->states.push_back(m->start(src));
  return state;
}

torch::Tensor Ensemble::step(const torch::Tensor& prev, models::DecoderState& state, torch::Tensor* attention) {
  auto& s = static_cast<EnsembleState&>(state);
  torch::Tensor sum, attn_sum;
  for (size_t i = 0; i < members_.size(); ++i) {
    torch::Tensor a;
    s.states[i]->shortlist = s.shortlist;
    auto logp = members_[i]->step(prev, *s.states[i], attention ? &a : nullptr);
    sum = i == 0 ? logp.clone() : sum.add_(logp);
    if (attention && a.defined()) attn_sum = attn_sum.defined() ? attn_sum.add_(a) : a.clone();
  }
  const double n = static_cast<double>(members_.size());
  if (attention && attn_sum.defined()) *attention = attn_sum.div_(n);
  return sum.div_(n);
}

torch::Tensor Ensemble::forward(const torch::Tensor& src, const torch::Tensor& tgt_in) {
  torch::Tensor sum;
  for (size_t i = 0; i < members_.size(); ++i) {
    auto logp = torch::log_softmax(members_[i]->forward(src, tgt_in), -1);
    sum = i == 0 ? logp : sum + logp;
  }
  return sum / static_cast<double>(members_.size());
}

int64_t Ensemble::vocab_size() const { return members_[0]->vocab_size(); }

int64_t Ensemble::max_positions() const {
  int64_t m = members_[0]->max_positions();
  for (auto& x : members_) m = std::min(m, x->max_positions());
  return m;
}

}  // namespace parla::decode
