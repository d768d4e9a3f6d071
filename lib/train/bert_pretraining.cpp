#include "train/bert_pretraining.h"

#include <algorithm>
#include <sstream>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"
#include "models/bert_masking.h"
#include "models/factory.h"
#include "train/validator.h"

namespace parla::train {

std::vector<SentencePair> make_sentence_pairs(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6e5b1d3f2a4c8e97ULL);
  std::vector<SentencePair> pairs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto& p = pairs[static_cast<size_t>(i)];
    p.a = i;
    bool has_next = i + 1 < n;
    if (has_next && (rng() & 1)) {
      p.b = i + 1;
      p.is_next = true;
    } else if (n > 2 || !has_next) {
      do {
        p.b = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      } while (n > 2 && p.b == i + 1);
      p.is_next = false;
    } else {
      p.b = i + 1;
      p.is_next = true;
    }
  }
  return pairs;
}

namespace {

// Lengths of A and B after BERT's truncate_seq_pair to fit `budget` tokens (without the 3 specials).
std::pair<int64_t, int64_t> truncated(int64_t la, int64_t lb, int64_t budget) {
  while (la + lb > budget) (la > lb ? la : lb) -= 1;
  return {la, lb};
}

}  // namespace

BertPretrainingTask::BertPretrainingTask(const Config& cfg, const data::DatasetInfo& info) : cfg_(cfg) {
  if (cfg.model.type != ModelType::kBert) throw ConfigError("training.task 'bert' needs model.type 'bert'");
  model_ = models::build_bert(cfg.model, info.src_vocab_size);
  max_len_ = std::min<int64_t>(cfg.training.bert_max_len, cfg.model.max_positions);
  // SentencePiece numbers user-defined symbols right after the four special ids, in the order given, so the
  // dataset's recorded vocab config tells the id of "<mask>" without loading the model.
  int64_t mask = parla::kUnkId;
  auto symbols = info.meta.value("/config/vocab/user_defined_symbols"_json_pointer, nlohmann::json::array());
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i] == "<mask>") mask = 4 + static_cast<int64_t>(i);
  masking_.vocab_size = info.src_vocab_size;
  masking_.mask_id = mask;
  masking_.mask_prob = cfg.training.mlm_prob;
  if (mask == parla::kUnkId)
    spdlog::info("BERT: the vocabulary has no \"<mask>\" piece; <unk> serves as [MASK]");
  rng_.seed(static_cast<uint64_t>(cfg.runtime.seed) * 0x9e3779b97f4a7c15ULL + 1);

  train_ = data::open_split(info, "train");
  valid_ = data::open_split(info, "valid");
  const uint64_t seed = static_cast<uint64_t>(cfg.runtime.seed);
  train_pairs_ = make_sentence_pairs(static_cast<int64_t>(train_->src.size()), seed);
  int64_t n_valid = static_cast<int64_t>(valid_->src.size());
  if (cfg.training.valid_max_sentences > 0) n_valid = std::min<int64_t>(n_valid, cfg.training.valid_max_sentences);
  valid_pairs_ = make_sentence_pairs(n_valid, seed + 1);

  auto lengths = [&](const data::TokenDataset& d, const std::vector<SentencePair>& pairs) {
    data::LengthTable t;
    for (size_t i = 0; i < pairs.size(); ++i) {
      auto [la, lb] = truncated(static_cast<int64_t>(d.length(static_cast<size_t>(pairs[i].a))),
                                static_cast<int64_t>(d.length(static_cast<size_t>(pairs[i].b))), max_len_ - 3);
      t.ids.push_back(static_cast<int64_t>(i));
      t.src_len.push_back(static_cast<int32_t>(la + lb + 3));
      t.tgt_len.push_back(0);
    }
    return t;
  };
  table_ = lengths(train_->src, train_pairs_);
  if (table_.ids.empty()) throw DataError("dataset '" + info.dir + "': the train split is empty");
  valid_plan_ = data::plan_epoch(lengths(valid_->src, valid_pairs_), cfg.training.batch_tokens, 0, 1);
}

data::Batch BertPretrainingTask::collate(const data::TokenDataset& d, const std::vector<SentencePair>& pairs,
                                         const std::vector<int64_t>& ids, std::mt19937_64& rng) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<std::vector<int64_t>> rows(ids.size());
  std::vector<int64_t> first_len(ids.size());
  int64_t longest = 0;
  for (size_t r = 0; r < ids.size(); ++r) {
    const auto& p = pairs.at(static_cast<size_t>(ids[r]));
    auto a = d.get(static_cast<size_t>(p.a)), b = d.get(static_cast<size_t>(p.b));
    auto [la, lb] = truncated(static_cast<int64_t>(a.size()), static_cast<int64_t>(b.size()), max_len_ - 3);
    auto& row = rows[r];
    row.push_back(parla::kBosId);
    row.insert(row.end(), a.begin(), a.begin() + la);
    row.push_back(parla::kEosId);
    first_len[r] = static_cast<int64_t>(row.size());
    row.insert(row.end(), b.begin(), b.begin() + lb);
    row.push_back(parla::kEosId);
    longest = std::max<int64_t>(longest, static_cast<int64_t>(row.size()));
  }
  auto tokens = torch::full({n, longest}, parla::kPadId, torch::kLong);
  auto segments = torch::zeros({n, longest}, torch::kLong);
  auto nsp = torch::zeros({n}, torch::kLong);
  data::Batch batch;
  for (int64_t r = 0; r < n; ++r) {
    const auto& row = rows[static_cast<size_t>(r)];
    std::copy(row.begin(), row.end(), tokens.data_ptr<int64_t>() + r * longest);
    int64_t* seg = segments.data_ptr<int64_t>() + r * longest;
    std::fill(seg + first_len[static_cast<size_t>(r)], seg + row.size(), 1);
    nsp.data_ptr<int64_t>()[r] = pairs.at(static_cast<size_t>(ids[static_cast<size_t>(r)])).is_next ? 1 : 0;
    batch.src_tokens += static_cast<int64_t>(row.size());
  }
  auto masked = models::mask_tokens(tokens, rng, masking_);
  batch.src = masked.input;
  batch.mlm_labels = masked.labels;
  batch.segments = segments;
  batch.nsp_labels = nsp;
  batch.sentences = n;
  return batch;
}

data::Batch BertPretrainingTask::train_batch(const std::vector<int64_t>& ids, int64_t /*epoch*/) {
  return collate(train_->src, train_pairs_, ids, rng_);
}

std::vector<double> BertPretrainingTask::counts(const data::Batch& batch) const {
  return {static_cast<double>(batch.mlm_labels.ne(models::kIgnoreIndex).sum().item<int64_t>()),
          static_cast<double>(batch.sentences)};
}

LossTerms BertPretrainingTask::loss(const data::Batch& batch) {
  auto labels = batch.mlm_labels.reshape({-1});
  auto chosen = labels.ne(models::kIgnoreIndex).nonzero().squeeze(1);
  auto out = model_->forward(batch.src, batch.segments, chosen);
  // The losses in fp32 whatever the autocast dtype (fairseq's log_softmax(x.float())): summed in bf16 they lose
  // digits, and fp16 logits can overflow in the exponentials.
  auto mlm =
      torch::nn::functional::cross_entropy(out.mlm_logits.to(torch::kFloat), labels.index_select(0, chosen),
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  auto nsp =
      torch::nn::functional::cross_entropy(out.nsp_logits.to(torch::kFloat), batch.nsp_labels,
                                           torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
  LossTerms t;
  t.sums = {mlm, nsp};
  t.nll = mlm.detach();
  return t;
}

ValidationResult BertPretrainingTask::validate(const torch::Device& device, c10::ScalarType precision) {
  model_->eval();
  // The same masks at every validation (own generator), so that the figures are comparable.
  std::mt19937_64 rng(static_cast<uint64_t>(cfg_.runtime.seed) + 12345);
  std::vector<data::Batch> batches;
  for (const auto& ids : valid_plan_) batches.push_back(collate(valid_->src, valid_pairs_, ids, rng));
  auto r = evaluate_loss(*this, batches, device, precision);
  torch::NoGradGuard no_grad;
  int64_t correct = 0, total = 0;
  for (const auto& b : batches) {
    auto d = b.to(device);
    auto out = model_->forward(d.src, d.segments, torch::empty({0}, torch::kLong).to(device));  // no MLM head
    correct += out.nsp_logits.argmax(-1).eq(d.nsp_labels).sum().item<int64_t>();
    total += d.sentences;
  }
  r.extra["nsp_accuracy"] = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
  return r;
}

void BertPretrainingTask::save_state(models::TensorArchive& archive) const {
  std::ostringstream os;
  os << rng_;
  archive.write("task_state.masking_rng", os.str());
}

void BertPretrainingTask::load_state(const models::TensorArchive& archive) {
  const std::string* v = archive.read_string("task_state.masking_rng");
  if (!v) throw DataError("checkpoint has no BERT masking state (was it written by the bert task?)");
  std::istringstream is(*v);
  is >> rng_;
  if (!is) throw DataError("checkpoint has a corrupt BERT masking state");
}

}  // namespace parla::train
