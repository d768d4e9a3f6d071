#pragma once
// Builds models from the `model` config section. model.type selects the architecture: transformer and rnn are
// sequence-to-sequence models (build_seq2seq), bert is an encoder (build_bert).
#include <memory>

#include "core/config/model_config.h"
#include "models/seq2seq.h"

namespace parla::models {

class BertModel;

// Throws ConfigError naming the key: model.type is not a seq2seq type, share_embeddings with different vocab
// sizes, d_model not divisible by heads, ...
std::shared_ptr<Seq2SeqModel> build_seq2seq(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab);

// A BERT encoder with masked-LM and next-sentence heads (models/bert.h).
std::shared_ptr<BertModel> build_bert(const ModelConfig& cfg, int64_t vocab);

}  // namespace parla::models
