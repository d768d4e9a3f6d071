#include "text/sentencepiece_training.h"

#include <algorithm>
#include <regex>
#include <string_view>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "text/sentencepiece_library.h"
#include "text/sentencepiece_vocab.h"

namespace parla::text {

namespace {

std::string format_double(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

// "word<TAB>count" lines of the whitespace-separated words of `sentences`, sorted by word so that the order (and
// with it SentencePiece's multi-threaded sums) does not depend on hashing. ASCII whitespace only, not
// text::split_whitespace: SentencePiece keeps other Unicode spaces (U+00A0...) inside words, and so must the counts.
std::vector<std::string> word_count_lines(const std::vector<std::string>& sentences) {
  std::unordered_map<std::string_view, int64_t> counts;
  for (const auto& s : sentences) {
    size_t i = 0;
    while (i < s.size()) {
      const size_t start = s.find_first_not_of(" \t\n\r\f\v", i);
      if (start == std::string::npos) break;
      size_t end = s.find_first_of(" \t\n\r\f\v", start);
      if (end == std::string::npos) end = s.size();
      ++counts[std::string_view(s).substr(start, end - start)];
      i = end;
    }
  }
  std::vector<std::pair<std::string_view, int64_t>> sorted(counts.begin(), counts.end());
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> lines;
  lines.reserve(sorted.size());
  for (const auto& [word, n] : sorted) lines.push_back(std::string(word) + "\t" + std::to_string(n));
  return lines;
}

}  // namespace

SentencePieceTrainingResult train_sentencepiece(const std::vector<std::string>& sentences, const VocabConfig& config,
                                                int threads, uint64_t seed, bool bpe_from_word_counts) {
  std::string symbols;
  for (const auto& s : config.user_defined_symbols) symbols += (symbols.empty() ? "" : ",") + s;
  int vocab_size = config.vocab_size;
  const auto& lib = detail::sentencepiece_library();
  std::vector<std::string> word_lines;
  const bool word_counts = bpe_from_word_counts && config.model_type == SubwordModel::kBpe;
  if (word_counts) word_lines = word_count_lines(sentences);
  const auto& input = word_counts ? word_lines : sentences;
  if (input.empty()) throw DataError("no training sentences left for SentencePiece after cleaning");
  std::vector<const char*> ptrs(input.size());
  std::vector<size_t> lens(input.size());
  for (size_t i = 0; i < input.size(); ++i) {
    ptrs[i] = input[i].data();
    lens[i] = input[i].size();
  }
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::unordered_map<std::string, std::string> kw = {
        {"model_type", config::name_of(config.model_type)},
        {"vocab_size", std::to_string(vocab_size)},
        {"character_coverage", format_double(config.character_coverage)},
        {"byte_fallback", config.byte_fallback ? "true" : "false"},
        {"normalization_rule_name", config.normalization_rule},
        // The caller samples (seeded); SentencePiece takes every sentence it is given.
        {"input_sentence_size", "0"},
        {"input_format", word_counts ? "tsv" : "text"},
        {"shuffle_input_sentence", "false"},
        {"num_threads", std::to_string(std::max(1, threads))},
        {"pad_id", std::to_string(kPadId)},
        {"unk_id", std::to_string(kUnkId)},
        {"bos_id", std::to_string(kBosId)},
        {"eos_id", std::to_string(kEosId)},
        {"pad_piece", "<pad>"},
        {"unk_piece", "<unk>"},
        {"bos_piece", "<s>"},
        {"eos_piece", "</s>"},
        // Soft limit: the unigram trainer stops early instead of failing on small corpora.
        {"hard_vocab_limit", "false"},
        // Europarl has long sentences; SentencePiece's default 4192 bytes would silently skip some.
        {"max_sentence_length", "65536"},
        // SentencePiece's own log lines are silenced: inside the isolated module its std::cerr is not always
        // usable (a BPE warning was seen to crash, sentencepiece_shim.cc); failures come back as statuses.
        {"minloglevel", "3"},
    };
    if (!symbols.empty()) kw["user_defined_symbols"] = symbols;
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : kw) {
      keys.push_back(k.c_str());
      values.push_back(v.c_str());
    }
    char* proto = nullptr;
    size_t proto_len = 0;
    char* error = nullptr;
    int rc = lib.train(keys.data(), values.data(), keys.size(), ptrs.data(), lens.data(), ptrs.size(),
                       static_cast<unsigned>(seed), &proto, &proto_len, &error);
    if (rc == 0) {
      SentencePieceTrainingResult r;
      r.model_proto.assign(proto, proto_len);
      lib.free(proto);
      r.vocab_size = SentencePieceVocab::from_serialized(r.model_proto).size();
      if (r.vocab_size < config.vocab_size)
        spdlog::warn("vocab: the corpus supports only {} pieces, fewer than vocab.vocab_size={}", r.vocab_size,
                     config.vocab_size);
      return r;
    }
    std::string msg = error ? error : "unknown error";
    lib.free(error);
    // "Vocabulary size too high (8000). Please set it to a value <= 1234." (BPE and small corpora)
    std::smatch m;
    static const std::regex kTooHigh(R"(value <= (\d+))");
    if (std::regex_search(msg, m, kTooHigh)) {
      int max_size = std::stoi(m[1].str());
      if (max_size < vocab_size && max_size > 4) {
        vocab_size = max_size;
        continue;
      }
    }
    if (msg.find("smaller than required_chars") != std::string::npos ||
        msg.find("must be larger than") != std::string::npos)
      throw ConfigError("vocab.vocab_size=" + std::to_string(config.vocab_size) +
                        " is too small for this corpus: " + msg);
    throw DataError("SentencePiece training failed: " + msg);
  }
  throw DataError("SentencePiece training failed: no vocabulary size the corpus supports");
}

}  // namespace parla::text
