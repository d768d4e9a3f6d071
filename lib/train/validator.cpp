#include "train/validator.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include <torch/torch.h>

#include "core/error.h"
#include "runtime/runtime_device.h"
#include "decode/search.h"
#include "metrics/bleu.h"

namespace parla::train {

ValidationResult evaluate_loss(Task& task, const std::vector<data::Batch>& batches, const torch::Device& device,
                               c10::ScalarType precision) {
  torch::NoGradGuard no_grad;
  runtime::AutocastScope autocast(device, precision);
  std::vector<double> sums, counts;
  double nll = 0;
  ValidationResult r;
  for (const auto& cpu_batch : batches) {
    auto terms = task.loss(cpu_batch.to(device));
    auto batch_counts = task.counts(cpu_batch);  // from the CPU batch: no device read
    if (sums.empty()) {
      sums.assign(terms.sums.size(), 0.0);
      counts.assign(terms.sums.size(), 0.0);
    }
    for (size_t i = 0; i < terms.sums.size(); ++i) {
      sums[i] += terms.sums[i].item<double>();
      counts[i] += batch_counts[i];
    }
    nll += terms.nll.item<double>();
    r.sentences += cpu_batch.sentences;
  }
  for (size_t i = 0; i < sums.size(); ++i)
    if (counts[i] > 0) r.loss += sums[i] / counts[i];
  r.nll = !counts.empty() && counts[0] > 0 ? nll / counts[0] : 0.0;
  r.perplexity = std::exp(r.nll);
  return r;
}

std::vector<std::string> translate_split(models::Seq2SeqModel& model, const data::TokenDataset& src,
                                         const std::vector<int64_t>& ids, const text::SentencePieceVocab& vocab,
                                         const decode::SearchOptions& options, int64_t batch_tokens,
                                         const torch::Device& device) {
  torch::NoGradGuard no_grad;
  // Sorting by length keeps padding (and wasted decoder work) small.
  std::vector<size_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return src.length(static_cast<size_t>(ids[a])) < src.length(static_cast<size_t>(ids[b]));
  });
  std::vector<std::string> out(ids.size());
  size_t start = 0;
  while (start < order.size()) {
    size_t end = start;
    int64_t longest = 0;
    std::vector<int64_t> chunk;
    while (end < order.size()) {
      int64_t len = static_cast<int64_t>(src.length(static_cast<size_t>(ids[order[end]]))) + 1;
      int64_t l = std::max(longest, len);
      if (!chunk.empty() && static_cast<int64_t>(chunk.size() + 1) * l * options.beam_size > batch_tokens) break;
      longest = l;
      chunk.push_back(ids[order[end]]);
      ++end;
    }
    auto tensor = data::collate_source(src, chunk).to(device);
    auto nbest = decode::search(model, tensor, options);
    for (size_t k = 0; k < chunk.size(); ++k) {
      std::vector<int> pieces;
      if (!nbest[k].empty())
        for (int64_t t : nbest[k][0].tokens) pieces.push_back(static_cast<int>(t));
      out[order[start + k]] = vocab.decode(pieces);
    }
    start = end;
  }
  return out;
}

double corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  metrics::BleuOptions o;
  metrics::BleuStats total;
  for (size_t i = 0; i < hypotheses.size() && i < references.size(); ++i)
    total += metrics::bleu_segment_stats(o, hypotheses[i], {references[i]});
  return metrics::compute_bleu(total, o).score;
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw DataError("cannot read '" + path + "'");
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

}  // namespace parla::train

namespace parla::train {

nlohmann::json ValidationResult::to_json() const {
  nlohmann::json j = {{"loss", loss}, {"nll", nll}, {"perplexity", perplexity}, {"sentences", sentences}};
  if (bleu >= 0) j["bleu"] = bleu;
  for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

}  // namespace parla::train
