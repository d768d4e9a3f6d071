#include "core/config/training_config.h"

namespace parla {

const config::SectionSchema<TrainingConfig>& TrainingConfig::schema() {
  using namespace config;
  static const SectionSchema<TrainingConfig> s = [] {
    SectionSchema<TrainingConfig> s("training",
                                    "Optimisation, batching, stopping, validation and checkpoints (parla-train). "
                                    "Adam with decoupled weight decay (AdamW); defaults follow the Transformer "
                                    "paper and fairseq's recipes.");
    s.add("task", &TrainingConfig::task,
          "`translation` (transformer or rnn) or `bert` (masked LM + next sentence on the source side).");
    s.add("lr", &TrainingConfig::lr, "Peak learning rate (reached at the end of warm-up).", greater_than(0))
        .flag("--lr");
    s.add("schedule", &TrainingConfig::schedule,
          "Learning-rate schedule after linear warm-up: `inverse_sqrt` (lr*sqrt(warmup/step), the paper's), "
          "`constant`, or `cosine` (to min_lr at max_steps; needs max_steps).");
    s.add("warmup_steps", &TrainingConfig::warmup_steps, "Steps of linear warm-up from 0 to lr.", at_least(0))
        .flag("--warmup-updates,--warmup-steps,--lr-warmup");
    s.add("min_lr", &TrainingConfig::min_lr, "Lower bound of the learning rate.", at_least(0));
    s.add("adam_beta1", &TrainingConfig::adam_beta1, "Adam beta1.", between(0, 0.999999));
    s.add("adam_beta2", &TrainingConfig::adam_beta2, "Adam beta2.", between(0, 0.999999));
    s.add("adam_eps", &TrainingConfig::adam_eps, "Adam epsilon.", greater_than(0));
    s.add("weight_decay", &TrainingConfig::weight_decay, "Decoupled weight decay (AdamW).", at_least(0))
        .flag("--weight-decay");
    s.add("label_smoothing", &TrainingConfig::label_smoothing,
          "Label-smoothing epsilon of the cross entropy (0 = plain cross entropy).", between(0, 0.999))
        .flag("--label-smoothing");
    s.add("clip_norm", &TrainingConfig::clip_norm, "Clip the global gradient L2 norm to this value (0 = off).",
          at_least(0)).flag("--clip-norm");
    s.add("ema_decay", &TrainingConfig::ema_decay,
          "Keep an exponential moving average of the weights, avg <- d avg + (1 - d) w after every update with "
          "d = min(ema_decay, (1 + step) / (10 + step)) (Polyak averaging; Marian's --exponential-smoothing, "
          "fairseq's --ema-decay). Validation, early stopping and checkpoint_best.pt then use the average, and "
          "every save also writes it as checkpoint_ema.pt; checkpoint_last.pt keeps the raw weights (and the "
          "average, for --resume). 0 = off; typical 0.999-0.9999.",
          between(0, 0.999999)).flag("--ema-decay");
    s.add("batch_tokens", &TrainingConfig::batch_tokens,
          "Token budget per batch: sentences x (longest source + longest target), padding included. Lower it "
          "when memory runs out.",
          at_least(1)).flag("--batch-tokens,--max-tokens");
    s.add("update_freq", &TrainingConfig::update_freq,
          "Batches whose gradients are accumulated before each optimiser step (fairseq --update-freq).",
          at_least(1)).flag("--update-freq");
    s.add("max_len", &TrainingConfig::max_len,
          "Training pairs with a side longer than this many tokens (</s> included) are skipped.", at_least(1));
    s.add("max_steps", &TrainingConfig::max_steps, "Stop after this many optimiser steps (0 = no limit).",
          at_least(0)).flag("--max-steps,--max-update");
    s.add("max_epochs", &TrainingConfig::max_epochs, "Stop after this many epochs (0 = no limit).", at_least(0))
        .flag("--max-epochs,--max-epoch");
    s.add("max_time", &TrainingConfig::max_time, "Stop after this many minutes of wall-clock time (0 = no limit).",
          at_least(0)).flag("--max-time");
    s.add("early_stop_metric", &TrainingConfig::early_stop_metric,
          "Validation metric for early stopping and for checkpoint_best.pt.");
    s.add("patience", &TrainingConfig::patience,
          "Stop after this many validations without improvement of early_stop_metric (0 = off).", at_least(0))
        .flag("--patience");
    s.add("precision", &TrainingConfig::precision,
          "Arithmetic of training: fp32, or bf16 / fp16 autocast around the forward pass and the loss with fp32 "
          "master weights and optimizer state. fp16 needs a CUDA device and uses dynamic loss scaling (overflowing "
          "updates are skipped and halve the scale); bf16 runs on CPUs and GPUs with compute capability >= 8.0.",
          one_of({"fp32", "bf16", "fp16"})).flag("--precision");
    s.add("loss_scale_init", &TrainingConfig::loss_scale_init,
          "fp16 only: initial dynamic loss scale (the loss is multiplied by it before the backward pass and the "
          "gradients divided by it before clipping; Micikevicius et al. 2018). A power of two keeps scaling exact.",
          greater_than(0));
    s.add("loss_scale_window", &TrainingConfig::loss_scale_window,
          "fp16 only: the loss scale doubles after this many consecutive updates without overflow; an overflowing "
          "update is skipped (not counted in max_bad_steps) and halves it.",
          at_least(1));
    s.add("min_loss_scale", &TrainingConfig::min_loss_scale,
          "fp16 only: training stops with an error when an overflow would halve the loss scale below this value.",
          greater_than(0));
    s.add("max_bad_steps", &TrainingConfig::max_bad_steps,
          "A NaN/inf loss skips the update; after this many in a row training stops.", at_least(1));
    s.add("valid_every", &TrainingConfig::valid_every,
          "Validate every this many steps (0 = only when training ends).", at_least(0))
        .flag("--valid-every,--valid-freq");
    s.add("valid_bleu", &TrainingConfig::valid_bleu,
          "Also decode the validation set and score BLEU against the cleaned references.");
    s.add("valid_max_sentences", &TrainingConfig::valid_max_sentences,
          "Validate on the first N pairs of the valid split only (0 = all).", at_least(0));
    s.add("valid_beam_size", &TrainingConfig::valid_beam_size,
          "Beam size of validation decoding (1 = greedy, the fastest).", at_least(1));
    s.add("save_dir", &TrainingConfig::save_dir,
          "Output directory: checkpoint_last.pt, checkpoint_best.pt, checkpoint_<step>.pt, metrics.jsonl, "
          "config.json.").flag("-o,--save-dir");
    s.add("save_every", &TrainingConfig::save_every,
          "Write checkpoints every this many steps (0 = at every validation).", at_least(0))
        .flag("--save-every,--save-freq");
    s.add("keep_last", &TrainingConfig::keep_last, "How many checkpoint_<step>.pt files to keep (0 = none).",
          at_least(0)).flag("--keep-last");
    s.add("log_every", &TrainingConfig::log_every, "Steps between progress lines on stderr.", at_least(1))
        .flag("--log-every,--disp-freq");
    s.add("metrics_file", &TrainingConfig::metrics_file,
          "File name (in save_dir) of the JSON-lines log of training and validation metrics.");
    s.add("dump_batches", &TrainingConfig::dump_batches,
          "File that receives every batch rank 0 trains on, as token ids (\"\" = off), for the PyTorch reference "
          "peer: little-endian, 8 bytes \"PRLBAT01\", then per batch int64 B, S, T and int64 src[B*S], "
          "tgt_in[B*T], tgt_out[B*T] (T = 0 without target). Written as FILE.tmp.<pid>, renamed when the run "
          "ends or stops on a signal; a resumed run dumps its own batches only.");
    s.add("init_encoder_from", &TrainingConfig::init_encoder_from,
          "BERT checkpoint whose encoder weights initialise the translation model's encoder.")
        .flag("--init-encoder-from");
    s.add("init_from", &TrainingConfig::init_from,
          "Translation checkpoint to fine-tune: the run starts from its weights and takes its `model` section "
          "(only the dropout keys of yours apply; another architecture key that differs is an error). The dataset "
          "must be encoded with its vocabularies (`vocab.from_checkpoint`). Optimizer and step start afresh; "
          "`--resume` continues a run instead.")
        .flag("--init-from,--pretrained-model");
    s.add("mlm_prob", &TrainingConfig::mlm_prob,
          "BERT: fraction of tokens selected for masked-LM prediction (80% [MASK], 10% random, 10% kept).",
          between(0.001, 1));
    s.add("bert_max_len", &TrainingConfig::bert_max_len,
          "BERT: maximum tokens of a sentence pair [CLS] A [SEP] B [SEP].", at_least(8));
    s.on_finalize([](TrainingConfig& t, const std::set<std::string>&) {
      if (t.schedule == LrScheduleKind::kCosine && t.max_steps == 0)
        throw ConfigError("training.schedule 'cosine' needs training.max_steps > 0 (the step where it ends)");
      if (t.min_loss_scale > t.loss_scale_init)
        throw ConfigError("training.min_loss_scale (" + std::to_string(t.min_loss_scale) +
                          ") is above training.loss_scale_init (" + std::to_string(t.loss_scale_init) + ")");
      if (t.min_lr > t.lr)
        throw ConfigError("training.min_lr (" + std::to_string(t.min_lr) + ") is above training.lr (" +
                          std::to_string(t.lr) + ")");
    });
    return s;
  }();
  return s;
}

}  // namespace parla
