#pragma once
// A lexical shortlist (Marian's --shortlist, CTranslate2's vocabulary map): for each source piece the target pieces
// that translations of sentences containing it use, and a set of target pieces that are always allowed. A sentence's
// output vocabulary is the union of its pieces' lists, the always-allowed set, EOS and UNK; the decoder then computes
// the output projection and the softmax over that set only (models/output_shortlist.h), which at a decoder step's
// few rows is a large part of the arithmetic (8 of the 19 MB of weights a step of the shared Multi30k model reads).
//
// Built from parallel text by co-occurrence, without an aligner: a target piece t is a candidate for source piece s
// when it appears in the translations of many sentences that contain s and rarely elsewhere, ranked by the Dice
// coefficient 2 c(s, t) / (c(s) + c(t)) over sentence pairs (Smadja et al. 1996's measure for bilingual
// collocations); the `best` highest-ranked per source piece are kept, and the `frequent` most frequent target pieces
// are always allowed (function words and punctuation, which co-occur with everything).
//
// File format: CTranslate2's vocabulary map, so one file serves both toolkits (`ct2-*-converter --vocab_mapping`):
// UTF-8 text, one rule per line, "SOURCE<TAB>TARGET TARGET ...", SOURCE one piece or an n-gram of pieces separated
// by spaces (the pieces themselves never contain spaces: SentencePiece writes them as U+2581), an empty SOURCE for
// the always-allowed pieces. Torch-free.
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/sentencepiece_vocab.h"

namespace parla::decode {

struct ShortlistOptions {
  int best = 100;               // candidates kept per source piece
  int frequent = 100;           // most frequent target pieces, always allowed
  uint64_t max_sentences = 0;   // build_shortlist: sentence pairs read (the first ones); 0 = all
};

class LexicalShortlist {
 public:
  // Counts co-occurrences sentence pair by sentence pair (each piece once per sentence), then ranks.
  class Builder {
   public:
    void add(const std::vector<int>& source, const std::vector<int>& target);
    uint64_t pairs() const { return pairs_; }
    LexicalShortlist build(const ShortlistOptions& o) const;

   private:
    std::unordered_map<uint64_t, uint32_t> joint_;  // (s << 32 | t) -> sentence pairs with both
    std::unordered_map<int, uint32_t> source_count_, target_count_;
    uint64_t pairs_ = 0;
    std::vector<int> s_, t_;  // scratch
  };

  // Reads a vocabulary map; pieces are looked up in the vocabularies. DataError naming the file and line for a
  // line without a tab or a piece the vocabulary does not have (a shortlist made for another model).
  static LexicalShortlist load(const std::string& path, const text::SentencePieceVocab& source,
                               const text::SentencePieceVocab& target);
  // Writes the map (atomically); IoError naming the file when it cannot be written.
  void save(const std::string& path, const text::SentencePieceVocab& source,
            const text::SentencePieceVocab& target) const;

  // The output vocabulary of one source sentence (piece ids, without EOS): sorted target ids, EOS and UNK included.
  std::vector<int64_t> candidates(const int64_t* source, int64_t length) const;

  const std::vector<int>& always() const { return always_; }
  // Rules by n-gram length (1-based: rules(1) are single pieces); keys are the pieces' ids.
  const std::map<std::vector<int>, std::vector<int>>& rules(size_t n) const;
  size_t max_ngram() const { return rules_.size(); }

 private:
  void finish();  // sorts and dedupes every list, notes top_
  std::vector<int> always_;                                   // sorted
  int top_ = 0;                                               // the largest target id in any list
  std::vector<std::map<std::vector<int>, std::vector<int>>> rules_;  // [n - 1]: n-gram -> sorted targets
};

// Reads a parallel text (one sentence per line, plain UTF-8; the two files line by line), encodes it with the
// vocabularies and builds the shortlist, logging progress. DataError naming the file that cannot be read or that
// ends before the other.
LexicalShortlist build_shortlist(const std::string& source_path, const std::string& target_path,
                                 const text::SentencePieceVocab& source, const text::SentencePieceVocab& target,
                                 const ShortlistOptions& o);

}  // namespace parla::decode
