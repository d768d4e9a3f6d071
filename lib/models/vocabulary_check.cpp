#include "models/vocabulary_check.h"

#include <string>

#include "core/error.h"

namespace parla::models {

void check_vocabulary_sizes(const ModelConfig& cfg, int64_t src_vocab, int64_t tgt_vocab) {
  if (src_vocab < 4 || tgt_vocab < 4)
    throw ConfigError("vocabulary sizes " + std::to_string(src_vocab) + "/" + std::to_string(tgt_vocab) +
                      " are too small (pad, unk, bos, eos need 4 ids)");
  if (cfg.share_embeddings && src_vocab != tgt_vocab)
    throw ConfigError("key 'model.share_embeddings': needs a joint vocabulary, but the source has " +
                      std::to_string(src_vocab) + " and the target " + std::to_string(tgt_vocab) + " entries");
}

}  // namespace parla::models
