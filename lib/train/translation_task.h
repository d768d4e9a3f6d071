#pragma once
// The translation task: a sequence-to-sequence model (Transformer or RNN) trained with label-smoothed cross
// entropy on a parla-preprocess dataset, validated by loss, perplexity and BLEU.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/token_dataset.h"
#include "models/seq2seq.h"
#include "text/sentencepiece_vocab.h"
#include "train/task.h"

namespace parla::train {

class TranslationTask : public Task {
 public:
  // Opens the train and valid splits and builds the model from cfg.model. Throws DataError naming the dataset
  // when a split is missing, ConfigError for a model the dataset cannot feed.
  TranslationTask(const Config& cfg, const data::DatasetInfo& info);

  std::string name() const override { return "translation"; }
  std::shared_ptr<torch::nn::Module> model() override { return model_; }
  const std::shared_ptr<models::Seq2SeqModel>& seq2seq() const { return model_; }
  const data::LengthTable& train_lengths() const override { return train_table_; }
  data::Batch train_batch(const std::vector<int64_t>& ids, int64_t epoch) override;
  LossTerms loss(const data::Batch& batch) override;
  ValidationResult validate(const torch::Device& device, c10::ScalarType precision) override;

  // Copies a BERT checkpoint's encoder into the model (models::init_encoder_from_bert).
  void init_encoder_from(const std::string& bert_checkpoint);

 private:
  Config cfg_;
  data::DatasetInfo info_;
  std::shared_ptr<models::Seq2SeqModel> model_;
  std::optional<data::ParallelSplit> train_, valid_;
  data::LengthTable train_table_;
  int64_t pad_ = 1;  // data.pad_to_multiple as resolved for the device
  std::vector<data::Batch> valid_batches_;
  std::vector<int64_t> valid_ids_;
  std::vector<std::string> valid_refs_;
  std::optional<text::SentencePieceVocab> tgt_vocab_;
  std::vector<int64_t> valid_target_prefix_;  // a multilingual model's target language token, forced
};

// Lengths of every sentence of a dataset side.
std::vector<int32_t> sentence_lengths(const data::TokenDataset& d);

}  // namespace parla::train
