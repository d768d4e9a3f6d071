#pragma once
// What a search needs of a lexical shortlist (decode/lexical_shortlist.h): each sentence's output vocabulary, and
// the check that the model can decode with one. The searches keep a models::OutputShortlist with these vocabularies
// on their decoder state and its rows in step with the state's.
#include <vector>

#include <torch/types.h>

#include "decode/lexical_shortlist.h"
#include "models/seq2seq.h"

namespace parla::decode {

// The vocabularies (sorted target ids) of the sentences of src [B, S] (PAD-padded, each row ending with EOS).
std::vector<std::vector<int64_t>> sentence_vocabularies(const LexicalShortlist& shortlist, const torch::Tensor& src);

// UsageError naming decoding.shortlist when `model` cannot decode with a shortlist.
void require_shortlist_support(const models::Seq2SeqModel& model);

}  // namespace parla::decode
