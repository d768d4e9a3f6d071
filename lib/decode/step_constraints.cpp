#include "decode/step_constraints.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <torch/torch.h>

#include "models/seq2seq.h"

namespace parla::decode {

std::vector<int64_t> source_lengths(const torch::Tensor& src) {
  auto counts = src.ne(parla::kPadId).sum(1).to(torch::kCPU, torch::kLong).contiguous();
  std::vector<int64_t> out(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + counts.numel());
  for (auto& n : out) n = std::max<int64_t>(0, n - 1);
  return out;
}

namespace {

// forced: rows at their maximum length (EOS forced); short_rows: rows below the minimum (EOS forbidden), or every
// row when `all_short`.
void apply_constraints(torch::Tensor& logp, const std::vector<int64_t>& forced, const std::vector<int64_t>& short_rows,
                       bool all_short, int64_t start_id) {
  const float ninf = -std::numeric_limits<float>::infinity();
  if (logp.device().is_cpu() && logp.scalar_type() == torch::kFloat && logp.dim() == 2 && logp.is_contiguous()) {
    // The same on the CPU as plain stores: the tensor ops below cost ~25 us a step, a tenth of a small model's step.
    const int64_t n = logp.size(0), v = logp.size(1);
    float* p = logp.data_ptr<float>();
    std::vector<float> eos(forced.size());
    for (size_t i = 0; i < forced.size(); ++i) eos[i] = p[forced[i] * v + parla::kEosId];
    for (int64_t r = 0; r < n; ++r) {
      p[r * v + parla::kPadId] = ninf;
      if (start_id != parla::kEosId) p[r * v + start_id] = ninf;
      if (all_short) p[r * v + parla::kEosId] = ninf;
    }
    for (int64_t r : short_rows) p[r * v + parla::kEosId] = ninf;
    for (size_t i = 0; i < forced.size(); ++i) {
      std::fill(p + forced[i] * v, p + (forced[i] + 1) * v, ninf);
      p[forced[i] * v + parla::kEosId] = std::isfinite(eos[i]) ? eos[i] : 0.0f;
    }
    return;
  }
  using torch::indexing::Slice;
  torch::Tensor rows, eos;
  if (!forced.empty()) {
    rows = torch::tensor(forced, torch::kLong).to(logp.device());
    eos = logp.select(1, parla::kEosId).index_select(0, rows).clone();
  }
  logp.index_put_({Slice(), parla::kPadId}, ninf);
  if (start_id != parla::kEosId) logp.index_put_({Slice(), start_id}, ninf);
  if (all_short)
    logp.index_put_({Slice(), parla::kEosId}, ninf);
  else if (!short_rows.empty())
    logp.index_put_({torch::tensor(short_rows, torch::kLong).to(logp.device()), parla::kEosId}, ninf);
  if (!forced.empty()) {
    // The maximum length wins over the minimum. EOS keeps its log-probability so that a forced ending is
    // scored honestly (0 if the model gave it none, so the hypothesis still exists).
    logp.index_fill_(0, rows, ninf);
    eos = torch::where(torch::isfinite(eos), eos, torch::zeros_like(eos));
    logp.index_put_({rows, torch::full_like(rows, parla::kEosId)}, eos);
  }
}

// Row rows[i] must output tokens[i], scored 0: every other entry of the row is -inf.
void force_tokens(torch::Tensor& logp, const std::vector<int64_t>& rows, const std::vector<int64_t>& tokens) {
  if (rows.empty()) return;
  const float ninf = -std::numeric_limits<float>::infinity();
  if (logp.device().is_cpu() && logp.scalar_type() == torch::kFloat && logp.dim() == 2 && logp.is_contiguous()) {
    const int64_t v = logp.size(1);
    float* p = logp.data_ptr<float>();
    for (size_t i = 0; i < rows.size(); ++i) {
      std::fill(p + rows[i] * v, p + (rows[i] + 1) * v, ninf);
      p[rows[i] * v + tokens[i]] = 0.0f;
    }
    return;
  }
  auto r = torch::tensor(rows, torch::kLong).to(logp.device());
  logp.index_fill_(0, r, ninf);
  logp.index_put_({r, torch::tensor(tokens, torch::kLong).to(logp.device())}, torch::zeros({}, logp.options()));
}

}  // namespace

void constrain_step(torch::Tensor& logp, int64_t step, const std::vector<int64_t>& max_len, int64_t min_length,
                    int64_t start_id, const std::vector<int64_t>& prefix) {
  std::vector<int64_t> forced, prefixed, tokens;
  for (size_t r = 0; r < max_len.size(); ++r) {
    if (step >= max_len[r]) {
      forced.push_back(static_cast<int64_t>(r));
    } else if (step < static_cast<int64_t>(prefix.size())) {
      prefixed.push_back(static_cast<int64_t>(r));
      tokens.push_back(prefix[static_cast<size_t>(step)]);
    }
  }
  apply_constraints(logp, forced, {}, step < min_length, start_id);
  force_tokens(logp, prefixed, tokens);
}

void constrain_step(torch::Tensor& logp, const std::vector<int64_t>& steps, const std::vector<int64_t>& max_len,
                    int64_t min_length, int64_t start_id, const std::vector<int64_t>& prefix) {
  std::vector<int64_t> forced, short_rows, prefixed, tokens;
  for (size_t r = 0; r < max_len.size(); ++r) {
    if (steps[r] >= max_len[r]) {
      forced.push_back(static_cast<int64_t>(r));
    } else if (steps[r] < static_cast<int64_t>(prefix.size())) {
      prefixed.push_back(static_cast<int64_t>(r));
      tokens.push_back(prefix[static_cast<size_t>(steps[r])]);
    }
    if (steps[r] < min_length) short_rows.push_back(static_cast<int64_t>(r));
  }
  apply_constraints(logp, forced, short_rows, false, start_id);
  force_tokens(logp, prefixed, tokens);
}

std::vector<float> attention_row(const torch::Tensor& attention, int64_t r, int64_t width) {
  auto row = attention[r].to(torch::kCPU, torch::kFloat).contiguous();
  int64_t n = std::min<int64_t>(width, row.numel());
  const float* p = row.data_ptr<float>();
  return std::vector<float>(p, p + n);
}

}  // namespace parla::decode
