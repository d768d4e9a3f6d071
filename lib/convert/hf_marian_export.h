#pragma once
// Exporting a parla Transformer as a Hugging Face MarianMT folder, for the tools that run those (transformers,
// CTranslate2's ct2-transformers-converter): config.json, generation_config.json, model.safetensors, vocab.json
// (and target_vocab.json for separate vocabularies), source.spm, target.spm, tokenizer_config.json.
//
// MarianMT is a post-norm Transformer with full attention and sinusoidal positions laid out concatenated. A parla
// model with interleaved sinusoids is exported exactly all the same: the interleaved table is a fixed permutation
// of the concatenated one's columns, and permuting the model's d_model dimensions (the residual stream: embedding
// columns, every projection's rows or columns that touch it, the layer norms) is a symmetry of the Transformer,
// so the permuted model with concatenated positions computes what the original computed. What MarianMT cannot
// represent (pre-norm, learned positions, another attention, an RNN, BERT, int8 weights) is refused; the message
// points to the CTranslate2 export, which takes pre-norm models.
#include <string>

namespace parla::convert {

// Writes the folder `out` (through a temporary folder renamed into place). DataError naming the checkpoint and
// what cannot be exported; UsageError when `out` exists.
void export_hf_marian(const std::string& checkpoint, const std::string& out);

}  // namespace parla::convert
