#pragma once
// Section "training": optimisation, batching, stopping, validation and checkpoints (parla-train).
// Defaults follow the Transformer paper and fairseq's recipes (Vaswani et al. 2017, section 5.3-5.4).
#include <string>
#include <vector>

#include "core/config/precision.h"
#include "core/config/schema.h"

namespace parla {

enum class TrainingTask { kTranslation, kBert };  // bert: masked LM + next sentence pretraining
enum class LrScheduleKind { kInverseSqrt, kConstant, kCosine };
enum class ValidationMetric { kBleu, kLoss, kPerplexity };

struct TrainingConfig {
  TrainingTask task = TrainingTask::kTranslation;

  // Optimiser: Adam with decoupled weight decay (AdamW), betas (0.9, 0.98), eps 1e-9 as in the paper.
  double lr = 0.0007;              // peak learning rate
  LrScheduleKind schedule = LrScheduleKind::kInverseSqrt;
  int warmup_steps = 4000;         // linear warm-up steps
  double min_lr = 0.0;             // floor of the learning rate (cosine decays to it)
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.98;
  double adam_eps = 1e-9;
  double weight_decay = 0.0;       // decoupled (AdamW)
  double label_smoothing = 0.1;    // epsilon_ls
  double clip_norm = 0.0;          // clip the global gradient L2 norm to this (0 = off)
  double ema_decay = 0.0;          // exponential moving average of the weights, validated and saved (0 = off)

  // Batching.
  int batch_tokens = 4096;         // padded source+target tokens per batch
  int update_freq = 1;             // batches accumulated per optimiser step
  int max_len = 256;               // drop pairs with a side longer than this (tokens incl. </s>)

  // Stopping (0 = no limit; at least one limit or early stopping must be set).
  int64_t max_steps = 0;
  int max_epochs = 0;
  double max_time = 0.0;           // minutes of wall-clock time
  ValidationMetric early_stop_metric = ValidationMetric::kLoss;  // also picks checkpoint_best.pt
  int patience = 0;                // validations without improvement before stopping (0 = off)
  int max_bad_steps = 10;          // consecutive NaN/inf losses before training stops
  Precision precision = Precision::kFp32;  // fp32, bf16 or fp16 (CUDA, dynamic loss scaling): autocast around forward + loss
  // fp16 dynamic loss scaling (Micikevicius et al. 2018; fairseq's defaults).
  double loss_scale_init = 65536.0;  // initial loss scale, 2^16
  int64_t loss_scale_window = 2000;  // consecutive finite updates before the scale doubles
  double min_loss_scale = 1e-4;      // an overflow that would halve the scale below this stops training

  // Validation.
  int64_t valid_every = 1000;      // steps between validations (0 = only at the end)
  bool valid_bleu = true;          // decode the validation set and score BLEU
  int valid_max_sentences = 0;     // validate on the first N pairs only (0 = all)
  int valid_beam_size = 1;         // beam for validation decoding (1 = greedy)

  // Checkpoints and logs.
  std::string save_dir;            // checkpoint_last.pt, checkpoint_best.pt, checkpoint_<step>.pt, metrics.jsonl
  int64_t save_every = 0;          // steps between checkpoints (0 = at every validation)
  int keep_last = 5;               // how many checkpoint_<step>.pt to keep
  int log_every = 100;             // steps between progress lines
  std::string metrics_file = "metrics.jsonl";  // JSON lines in save_dir
  std::string dump_batches;        // file of every training batch (rank 0), for the reference peer ("" = off)
  std::string init_encoder_from;   // BERT checkpoint whose encoder initialises a translation model
  // A translation checkpoint whose weights and architecture (its model section) a new run starts from:
  // fine-tuning. Its dataset must be encoded with the checkpoint's vocabularies (vocab.from_checkpoint).
  std::string init_from;

  // BERT pretraining (Devlin et al. 2019, section 3.1).
  double mlm_prob = 0.15;          // fraction of tokens chosen for prediction
  int bert_max_len = 128;          // tokens per sentence pair ([CLS] A [SEP] B [SEP])

  static const config::SectionSchema<TrainingConfig>& schema();
};

}  // namespace parla

PARLA_CHOICES(parla::TrainingTask, {parla::TrainingTask::kTranslation, "translation"},
              {parla::TrainingTask::kBert, "bert"});
PARLA_CHOICES(parla::LrScheduleKind, {parla::LrScheduleKind::kInverseSqrt, "inverse_sqrt"},
              {parla::LrScheduleKind::kConstant, "constant"}, {parla::LrScheduleKind::kCosine, "cosine"});
PARLA_CHOICES(parla::ValidationMetric, {parla::ValidationMetric::kBleu, "bleu"},
              {parla::ValidationMetric::kLoss, "loss"}, {parla::ValidationMetric::kPerplexity, "perplexity"});
