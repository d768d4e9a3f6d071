#include "train/translation_task.h"

#include <algorithm>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "core/error.h"
#include "models/bert.h"
#include "models/allocation_budget.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "train/label_smoothed_cross_entropy.h"
#include "text/language_codes.h"
#include "train/validator.h"

namespace parla::train {

std::vector<int32_t> sentence_lengths(const data::TokenDataset& d) {
  std::vector<int32_t> out(d.size());
  for (size_t i = 0; i < d.size(); ++i) out[i] = static_cast<int32_t>(d.length(i));
  return out;
}

TranslationTask::TranslationTask(const Config& cfg, const data::DatasetInfo& info) : cfg_(cfg), info_(info) {
  if (cfg.model.type == ModelType::kBert)
    throw ConfigError("training.task 'translation' needs model.type transformer or rnn, not 'bert'");
  model_ = models::build_seq2seq(cfg.model, info.src_vocab_size, info.tgt_vocab_size);
  train_ = data::open_split(info, "train");
  const int64_t max_len = std::min<int64_t>(cfg.training.max_len, model_->max_positions());
  // Batches are planned and collated at their padded lengths (data.pad_to_multiple, resolved by the trainer).
  pad_ = std::max(1, cfg.data.pad_to_multiple);
  train_table_ = data::padded_lengths(
      data::filter_by_length(sentence_lengths(train_->src), sentence_lengths(train_->tgt), max_len), pad_);
  if (train_table_.ids.empty())
    throw DataError("dataset '" + info.dir + "': no training pair is within training.max_len = " +
                    std::to_string(max_len) + " tokens");
  if (train_table_.dropped > 0)
    spdlog::info("skipping {} of {} training pairs longer than {} tokens", train_table_.dropped,
                 train_->src.size(), max_len);

  valid_ = data::open_split(info, "valid");
  size_t n_valid = valid_->src.size();
  if (cfg.training.valid_max_sentences > 0)
    n_valid = std::min(n_valid, static_cast<size_t>(cfg.training.valid_max_sentences));
  auto vs = sentence_lengths(valid_->src), vt = sentence_lengths(valid_->tgt);
  vs.resize(n_valid);
  vt.resize(n_valid);
  auto valid_table = data::padded_lengths(data::filter_by_length(vs, vt, max_len), pad_);
  for (const auto& ids : data::plan_epoch(valid_table, cfg.training.batch_tokens, 0, 1))
    valid_batches_.push_back(data::collate_parallel(*valid_, ids, model_->start_id(), pad_));
  valid_ids_ = valid_table.ids;
  if (cfg.training.valid_bleu) {
    std::string ref_path = info.dir + "/valid." + info.tgt_lang;
    auto refs = read_lines(ref_path);
    if (refs.size() != valid_->tgt.size())
      throw DataError("'" + ref_path + "' has " + std::to_string(refs.size()) + " lines but the valid split has " +
                      std::to_string(valid_->tgt.size()) + " sentences");
    for (int64_t id : valid_ids_) valid_refs_.push_back(refs[static_cast<size_t>(id)]);
    tgt_vocab_ = data::target_vocab(info);
    // A multilingual model's targets start with their language's token, forced as parla-translate forces it.
    const int language = text::language_token_id(info.languages, "", "target", "vocab.tgt_lang_code", *tgt_vocab_);
    if (language >= 0) valid_target_prefix_ = {language};
  }
}

data::Batch TranslationTask::train_batch(const std::vector<int64_t>& ids, int64_t /*epoch*/) {
  return data::collate_parallel(*train_, ids, model_->start_id(), pad_);
}

LossTerms TranslationTask::loss(const data::Batch& batch) {
  auto logits = model_->forward(batch.src, batch.tgt_in);
  auto l = label_smoothed_cross_entropy(logits, batch.tgt_out, cfg_.training.label_smoothing, parla::kPadId);
  LossTerms t;
  t.sums.push_back(l.loss);
  t.nll = l.nll;
  return t;
}

ValidationResult TranslationTask::validate(const torch::Device& device, c10::ScalarType precision) {
  model_->eval();
  ValidationResult r = evaluate_loss(*this, valid_batches_, device, precision);
  if (cfg_.training.valid_bleu && !valid_ids_.empty()) {
    auto options = decode::SearchOptions::from_config(cfg_.decoding);
    options.beam_size = cfg_.training.valid_beam_size;
    options.n_best = 1;
    options.sampling = false;
    options.target_prefix = valid_target_prefix_;
    auto hyps = translate_split(*model_, valid_->src, valid_ids_, *tgt_vocab_, options,
                                std::max(cfg_.training.batch_tokens, 256), device);
    r.bleu = corpus_bleu(hyps, valid_refs_);
  }
  return r;
}

void TranslationTask::init_encoder_from(const std::string& bert_checkpoint) {
  auto meta = models::read_meta(bert_checkpoint);
  models::require_float_checkpoint(meta, bert_checkpoint, "training.init_encoder_from");
  config::ConfigBuilder b;
  if (!meta.config.contains("model"))
    throw DataError("'" + bert_checkpoint + "' has no model config; is it a parla BERT checkpoint?");
  b.merge(nlohmann::json{{"model", meta.config["model"]}}, bert_checkpoint);
  auto mc = b.build().model;
  if (mc.type != ModelType::kBert)
    throw ConfigError("training.init_encoder_from: '" + bert_checkpoint + "' holds a '" + std::string(config::name_of(mc.type)) +
                      "' model, not a BERT model");
  std::shared_ptr<models::BertModel> bert;
  models::build_within_file_budget(
      bert_checkpoint, [&] { bert = models::build_bert(mc, meta.src_vocab_size); }, models::module_overhead_bytes(mc));
  models::load_weights(bert_checkpoint, *bert);
  models::init_encoder_from_bert(*model_, *bert);
  spdlog::info("initialised the encoder from BERT checkpoint '{}'", bert_checkpoint);
}

}  // namespace parla::train
