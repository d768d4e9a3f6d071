#pragma once
// Importing a Hugging Face MarianMT folder (the copies of OPUS-MT's models on the Hugging Face Hub, or one saved
// by transformers' save_pretrained): config.json, model.safetensors, source.spm and target.spm, vocab.json (and
// target_vocab.json where the config says the vocabularies are separate). Read as data: the weights through
// parla's safetensors reader, or, where a folder has only pytorch_model.bin in torch.save's zip format, through
// the strict pickle reader (only tensors, storages and plain containers; nothing is called); the JSON files with
// nlohmann/json. The legacy torch.save format (a bare pickle) is refused with the command that re-saves it.
//
// The architecture is BART's with Marian's choices: post-norm layers, swish (OPUS-MT) or another activation,
// concatenated sinusoidal positions, token embeddings scaled by sqrt(d_model) when scale_embedding is set, a
// final_logits_bias, and decoding that starts from the pad token. Anything else is refused naming the file and
// the key.
#include <string>

#include "convert/imported_model.h"

namespace parla::convert {

// DataError naming the folder's file and key for anything missing, malformed or not representable.
ImportedModel read_hf_marian(const std::string& dir);

}  // namespace parla::convert
