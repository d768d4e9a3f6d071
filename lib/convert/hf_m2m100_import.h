#pragma once
// Importing a Hugging Face M2M-100 or NLLB-200 folder (model_type "m2m_100": facebook/m2m100_418M,
// facebook/nllb-200-distilled-600M and their fine-tunes), read as data as hf_folder.h reads every folder.
//
// The architecture is fairseq's Transformer as M2M100ForConditionalGeneration computes it: pre-norm layers with a
// final layer norm on each side, fairseq's sinusoidal positions (counted from padding_idx + 1), token embeddings
// scaled by sqrt(d_model), one vocabulary shared by both sides and the output, no logit bias, decoding that starts
// from </s> with the target language's token forced next.
//
// The vocabulary: M2M-100's vocab.json (fairseq's dictionary) or NLLB's tokenizer.json (its BPE vocab, SentencePiece
// ids shifted by fairseq's offset), both over sentencepiece.bpe.model, plus the added tokens that tokenizer_config.json
// (added_tokens_decoder), tokenizer.json (added_tokens) or added_tokens.json number: the language codes (`__de__`,
// `deu_Latn`) and <mask>, which become control pieces (never text); ids the model has beyond them (M2M-100's eight
// spare rows) become unused placeholders. The language codes (the tokenizer's additional or extra special tokens)
// and the tokenizer's default source and target are kept in the checkpoint (models::ModelMeta::languages).
#include <string>

#include "convert/imported_model.h"

namespace parla::convert {

// DataError naming the folder's file and key for anything missing, malformed or not representable.
ImportedModel read_hf_m2m100(const std::string& dir);

}  // namespace parla::convert
