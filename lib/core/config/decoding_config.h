#pragma once
// Section "decoding": search settings (parla-translate, validation BLEU in parla-train). Every flag of
// parla-translate that changes the output maps onto one key here, so a config file reproduces a run.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/precision.h"
#include "core/config/schema.h"

namespace parla {

// What parla-translate prints of the attention after each translation: nothing, Moses-style hard alignment
// pairs, or the soft matrix.
enum class AlignmentOutput { kNone, kHard, kSoft };

struct DecodingConfig {
  int beam_size = 5;             // 1 = greedy search
  int n_best = 1;                // hypotheses printed per sentence (<= beam_size)
  double length_penalty = 0.6;   // GNMT alpha: score = log P(Y|X) / ((5 + |Y|) / 6)^alpha (Wu et al. 2016, eq. 14)
  double max_length_factor = 3;  // a in max output length = a * source length + b (Marian's max-length-factor)
  int max_length_offset = 10;    // b in max output length = a * source length + b
  int min_length = 0;            // EOS is forbidden before this many target tokens
  int max_input_length = 0;      // source tokens kept per line (longer lines are cut with a warning); 0 = model limit
  int max_input_chars = 0;       // characters kept per line before tokenizing; 0 = 32 per piece of the source limit
  int batch_size = 32;           // sentences per batch (used when batch_tokens is 0; at most 128 tokens each)
  int batch_tokens = 0;          // padded source tokens per batch; 0 = batch by sentences
  int maxi_batch = 20;           // batches read ahead and sorted by length together (Marian's maxi-batch)
  bool line_buffered = false;    // interactive: translate and flush each line as soon as it is read
  AlignmentOutput alignment = AlignmentOutput::kNone;
  bool sampling = false;         // sample instead of searching (back-translation, Edunov et al. 2018)
  double temperature = 1.0;      // softmax temperature for sampling
  int top_k = 0;                 // sample among the k most likely tokens; 0 = whole vocabulary
  std::string shortlist;         // lexical shortlist file (parla-shortlist, or a CTranslate2 vocabulary map); '' = off
  std::string source_lang;       // a multilingual model's source language code ('' = the model's default)
  std::string target_lang;       // its target language code, forced first ('' = the model's default)
  std::string target_prefix;     // text every translation continues (CTranslate2's target_prefix); '' = none
  Precision precision = Precision::kFp32;  // fp32, bf16 or fp16 (CUDA only): autocast while decoding (CTranslate2's compute type)

  static const config::SectionSchema<DecodingConfig>& schema();
};

}  // namespace parla

PARLA_CHOICES(parla::AlignmentOutput, {parla::AlignmentOutput::kNone, ""}, {parla::AlignmentOutput::kHard, "hard"},
              {parla::AlignmentOutput::kSoft, "soft"});
