#pragma once
// Formats translations for stdout (Marian's output_printer). Formats, one line each:
//   plain:      translation
//   n-best:     i ||| translation ||| score          (Marian/Moses n-best; i = 0-based input line)
//   alignment:  ... ||| s-t s-t ...                  appended (hard: Moses/fast_align pairs, source position s
//                                                    and target position t of SentencePiece pieces, 0-based;
//                                                    each target piece is linked to its most attended source piece)
//               ... ||| a,b,c d,e,f ...              appended (soft: one group per target piece incl. EOS, one
//                                                    comma-separated weight per source piece incl. EOS)
// Torch-free.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/decoding_config.h"
#include "decode/hypothesis.h"

namespace parla::decode {

// decoding.alignment, parsed with the config.
using AlignmentFormat = AlignmentOutput;

// "s-t" pairs: target piece t (EOS excluded) to argmax_s attention[t][s] over the `source_length` real source
// pieces (EOS excluded unless the source is empty).
std::string hard_alignment(const Hypothesis& h, size_t source_length);
// Full weights, 4 decimals.
std::string soft_alignment(const Hypothesis& h);

struct OutputPrinter {
  bool n_best = false;  // print "i ||| text ||| score" lines
  AlignmentFormat alignment = AlignmentFormat::kNone;

  // The lines for one input sentence (index `line`, source of `source_length` pieces), given each
  // hypothesis's detokenised text. Without n-best, only the best hypothesis is printed, as exactly one line.
  std::string format(uint64_t line, const NBestList& hyps, const std::vector<std::string>& texts,
                     size_t source_length) const;
};

}  // namespace parla::decode
