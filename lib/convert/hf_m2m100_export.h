#pragma once
// Exporting an M2M-100 or NLLB-200 model (one parla-convert imported, fine-tuned or not) back to a Hugging Face
// folder that transformers loads as M2M100ForConditionalGeneration with its tokenizer: config.json,
// generation_config.json, model.safetensors, sentencepiece.bpe.model, tokenizer_config.json, and M2M-100's
// vocab.json (M2M100Tokenizer, language tokens "__de__") or NLLB's tokenizer.json (NllbTokenizer, codes
// "deu_Latn", the BPE's merges derived from the SentencePiece model's pieces as transformers' converter derives them).
//
// The ids go back to fairseq's order (<s> 0, <pad> 1, </s> 2, <unk> 3, the pieces, the language tokens, the spare
// rows): the import moved only the four specials (convert/imported_model.h, parla_order). The checkpoint's default
// languages (the fine-tuning corpus's pair) become the tokenizer's src_lang / tgt_lang.
#include <string>

#include "models/checkpoint.h"

namespace parla::convert {

// Whether the checkpoint's model is of that architecture (pre-norm, fairseq's sinusoids, decoding from </s>, with
// language codes): the export to choose for it.
bool is_m2m100_architecture(const models::ModelMeta& meta);

// Writes the folder `out` (through a temporary folder renamed into place). DataError naming the checkpoint and
// what cannot be exported; UsageError when `out` exists.
void export_hf_m2m100(const std::string& checkpoint, const std::string& out);

}  // namespace parla::convert
