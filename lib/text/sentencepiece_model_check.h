#pragma once
// A check of a SentencePiece model's bytes before they reach SentencePiece, which trusts its proto: a corrupt
// precompiled normalizer charsmap (a Darts-clone double-array trie read without bounds checks) or a very long piece
// (the piece trie is built by recursion, one level per byte) crashes the process. Only what could crash is checked;
// what SentencePiece itself refuses with an error is left to it.
#include <cstddef>
#include <string>

namespace parla::text {

// Longest piece accepted, in bytes: SentencePiece's trainer caps pieces at 512 characters (2,048 bytes in UTF-8);
// user-defined symbols may be longer, and the trie's recursion stays shallow at this depth.
constexpr size_t kMaxSentencePieceBytes = 4096;
// Longest replacement one charsmap entry may give (NFKC's longest is a few dozen bytes): bounds the normalized text.
constexpr size_t kMaxCharsmapReplacementBytes = 1024;

// Throws DataError starting with `what` when the serialized ModelProto is malformed where SentencePiece reads it
// (the wire format of its pieces and normalizer specs), has an empty piece or one over kMaxSentencePieceBytes, or a normalizer or
// denormalizer charsmap whose trie can be walked outside its array or to a replacement outside its strings.
void check_sentencepiece_model(const std::string& proto, const std::string& what);

// The normalizer's precompiled charsmap (NormalizerSpec.precompiled_charsmap: what Hugging Face's tokenizers
// call Precompiled), "" when the model has none. DataError as check_sentencepiece_model for malformed bytes.
std::string sentencepiece_precompiled_charsmap(const std::string& proto);

// The charsmap check alone (NormalizerSpec.precompiled_charsmap): "" when sound, else what is wrong.
std::string charsmap_problem(const std::string& charsmap);

}  // namespace parla::text
