#pragma once
// BERT pretraining (Devlin et al. 2019, section 3.1) on the monolingual (source) side of a parla dataset:
// masked LM (15% of tokens chosen; 80% [MASK], 10% random, 10% kept; models/bert_masking.h) plus next-sentence
// prediction, where consecutive lines of the corpus are the true next sentences and a random line is the
// negative, each half of the time. Input: [CLS] A [SEP] B [SEP] with segment 0 for [CLS] A [SEP] and 1 for
// B [SEP]; pairs longer than training.bert_max_len are truncated, longer sentence first (BERT's
// truncate_seq_pair). As BERT's create_pretraining_data, the sentence pairs are drawn once from the seed; the
// masks are drawn anew for every batch (dynamic masking, Liu et al. 2019) from the task's own generator, which is
// saved in checkpoints. [CLS] and [SEP] are parla's <s> and </s>; [MASK] is the piece "<mask>" when the
// vocabulary has it (vocab.user_defined_symbols), else <unk>, which byte-fallback vocabularies never produce.
// Loss = mean MLM cross entropy over chosen tokens + mean NSP cross entropy over pairs.
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/token_dataset.h"
#include "models/bert.h"
#include "models/bert_masking.h"
#include "train/task.h"

namespace parla::train {

// One sentence pair: dataset indices of A and B and whether B follows A in the corpus.
struct SentencePair {
  int64_t a = 0, b = 0;
  bool is_next = false;
};

// The pairs of a monolingual corpus of n lines: for each line i, the next line with probability 1/2 (when there
// is one), else a random line other than i + 1. Deterministic in the seed.
std::vector<SentencePair> make_sentence_pairs(int64_t n, uint64_t seed);

class BertPretrainingTask : public Task {
 public:
  BertPretrainingTask(const Config& cfg, const data::DatasetInfo& info);

  std::string name() const override { return "bert"; }
  std::shared_ptr<torch::nn::Module> model() override { return model_; }
  const std::shared_ptr<models::BertModel>& bert() const { return model_; }
  const data::LengthTable& train_lengths() const override { return table_; }
  data::Batch train_batch(const std::vector<int64_t>& ids, int64_t epoch) override;
  size_t num_terms() const override { return 2; }
  std::vector<double> counts(const data::Batch& batch) const override;
  LossTerms loss(const data::Batch& batch) override;
  ValidationResult validate(const torch::Device& device, c10::ScalarType precision) override;
  void save_state(models::TensorArchive& archive) const override;
  void load_state(const models::TensorArchive& archive) override;

  int64_t mask_id() const { return masking_.mask_id; }

 private:
  data::Batch collate(const data::TokenDataset& d, const std::vector<SentencePair>& pairs,
                      const std::vector<int64_t>& ids, std::mt19937_64& rng) const;

  Config cfg_;
  std::shared_ptr<models::BertModel> model_;
  std::optional<data::ParallelSplit> train_, valid_;
  std::vector<SentencePair> train_pairs_, valid_pairs_;
  data::LengthTable table_;
  std::vector<std::vector<int64_t>> valid_plan_;
  models::MlmMaskingOptions masking_;
  std::mt19937_64 rng_;
  int64_t max_len_ = 128;
};

}  // namespace parla::train
