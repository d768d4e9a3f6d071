#pragma once
// A trained SentencePiece model (Kudo & Richardson, 2018) as parla's vocabulary: ids for the models, text for
// the user. Special ids are fixed for the whole toolkit: pad=0, unk=1, bos=2, eos=3. Thread-safe for encoding
// and decoding; copies share the model.
#include <memory>
#include <string>
#include <vector>

namespace parla::text {

inline constexpr int kPadId = 0;
inline constexpr int kUnkId = 1;
inline constexpr int kBosId = 2;
inline constexpr int kEosId = 3;

class SentencePieceVocab {
 public:
  // Throws DataError naming the file when it is missing or not a SentencePiece model.
  static SentencePieceVocab load(const std::string& model_path);
  // From the model proto bytes (as stored in a checkpoint). Throws DataError when they do not parse.
  static SentencePieceVocab from_serialized(const std::string& proto);

  // Piece ids of a line, without bos/eos.
  std::vector<int> encode(const std::string& line) const;
  // The text of ids; pad, bos and eos are skipped. Throws DataError for an id outside [0, size()).
  std::string decode(const std::vector<int>& ids) const;
  int size() const;
  // The model proto bytes (what from_serialized() takes).
  std::string serialized() const;
  // unk id (1) for an unknown piece.
  int piece_to_id(const std::string& piece) const;
  // Throws DataError for an id outside [0, size()).
  std::string id_to_piece(int id) const;
  float score(int id) const;

 private:
  explicit SentencePieceVocab(std::shared_ptr<const void> model);
  void check_id(int id) const;
  std::shared_ptr<const void> model_;  // a SentencePieceProcessor inside the isolated module
  int size_ = 0;
};

}  // namespace parla::text
