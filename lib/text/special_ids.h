#pragma once
// The special ids, fixed for the whole toolkit: every SentencePiece model parla trains has them, and imported
// vocabularies are remapped onto them (text/sentencepiece_vocab.h). The one definition that text, data, models,
// decoding and training share.
namespace parla {

inline constexpr int kPadId = 0;
inline constexpr int kUnkId = 1;
inline constexpr int kBosId = 2;
inline constexpr int kEosId = 3;

}  // namespace parla
