#include "models/factory.h"

#include "core/error.h"
#include "models/bert.h"
#include "models/rnn.h"
#include "models/transformer.h"

namespace parla::models {

std::shared_ptr<Seq2SeqModel> build_seq2seq(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab) {
  if (cfg.type == ModelType::kTransformer) return std::make_shared<TransformerModel>(cfg, src_vocab, tgt_vocab);
  if (cfg.type == ModelType::kRnn) return std::make_shared<RnnModel>(cfg, src_vocab, tgt_vocab);
  throw ConfigError("key 'model.type': '" + std::string(config::name_of(cfg.type)) +
                    "' is not a sequence-to-sequence model (must be transformer or rnn)");
}

std::shared_ptr<BertModel> build_bert(const ModelConfig& cfg, int64_t vocab) {
  if (cfg.type != ModelType::kBert && cfg.type != ModelType::kTransformer)
    throw ConfigError("key 'model.type': '" + std::string(config::name_of(cfg.type)) + "' cannot build a BERT encoder (must be bert)");
  return std::make_shared<BertModel>(cfg, vocab);
}

}  // namespace parla::models
