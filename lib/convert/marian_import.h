#pragma once
// Importing a Marian model as OPUS-MT distributes it: a folder with decoder.yml (which names the model and its
// vocabularies), the model's .npz (NumPy arrays under Marian's parameter names, plus "special:model.yml", the
// options it was trained with), *.vocab.yml (piece: id) and source.spm / target.spm. Read as data: the .npz with
// libzip and parla's .npy reader, the options with yaml-cpp, the vocabularies line by line.
//
// Marian's Transformer as OPUS-MT trains it: post-norm ("dan"), swish or relu, sinusoidal positions in
// concatenated layout, embeddings scaled by sqrt(dim-emb), a logit bias, decoding from a zero start (imported as
// parla's pad, whose row is zero). Marian's vocabularies have no <pad>: it is appended as the last id with a zero
// embedding and bias, as Hugging Face's conversion does, so an OPUS-MT model imports to the same checkpoint from
// either place. Anything else (other architectures, pre-norm, SSRU or average-attention decoders, tied layers,
// trained positions, right-to-left models) is refused naming the file and the option.
#include <cstdint>
#include <string>
#include <vector>

#include "convert/imported_model.h"

namespace parla::convert {

// `dir`: the folder holding decoder.yml. DataError naming the file and option for anything not representable.
ImportedModel read_marian(const std::string& dir);

// A Marian vocab.yml (one "piece: id" per line, the piece plain, single- or double-quoted as yaml-cpp's emitter or
// PyYAML write it), the piece of each id 0 .. n-1. Read line by line in memory a small multiple of the file; a
// DataError naming the file and line for anything else (another YAML shape, an id out of range or given twice).
std::vector<std::string> read_marian_vocab(const std::string& path);

// pieces[k] has id ids[k] (a vocab.yml's or vocab.json's entries in file order): the piece of each id, which must
// number 0 .. n-1 once each (DataError naming `path` and the piece otherwise).
std::vector<std::string> pieces_by_id(std::vector<std::string> pieces, std::vector<int64_t> ids,
                                      const std::string& path);

}  // namespace parla::convert
