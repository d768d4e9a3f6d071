#pragma once
// A trained SentencePiece model (Kudo & Richardson, 2018) as parla's vocabulary: ids for the models, text for
// the user. Special ids are fixed for the whole toolkit: pad=0, unk=1, bos=2, eos=3. Thread-safe for encoding
// and decoding; copies share the model.
//
// Ids are the SentencePiece model's own (parla trains its models with pad=0 unk=1 bos=2 eos=3), or, for models
// imported from elsewhere, those of an explicit piece table (Marian's vocab.yml, Hugging Face's vocab.json,
// remapped on import so that ids 0-3 are parla's specials): the model segments the text into pieces, and the
// table numbers them.
#include <memory>
#include <string>
#include <vector>

#include "text/special_ids.h"

namespace parla::text {

class SentencePieceVocab {
 public:
  // Throws DataError naming the file when it is missing or not a SentencePiece model.
  static SentencePieceVocab load(const std::string& model_path);
  // From the model proto bytes (as stored in a checkpoint). Throws DataError when they do not parse.
  static SentencePieceVocab from_serialized(const std::string& proto);
  // From the model proto bytes and a piece table: pieces[i] is the piece of id i; ids 0, 1 and 3 are pad, unk and
  // eos whatever their names, and id 2 is bos unless the model can produce its piece (then it is an ordinary piece:
  // imported vocabularies have no bos, their decoder starts from pad). A piece the model produces that the table
  // lacks encodes as unk. Table entries the model cannot produce are never produced by encode, except
  // target-language tokens (">>fra<<", OPUS-MT's multilingual models): one at the very start of a line, followed by
  // a space or the end, is that id. Decoding skips pad, unk, bos and eos and prints every other entry, the
  // model's or not, as SentencePiece's DecodePieces does, with word boundaries as spaces and the ends trimmed: the
  // text transformers' MarianTokenizer and Marian's spm_decode give. DataError for a table shorter than 4 or with a
  // piece twice.
  // `controls`: table pieces that are tokens of the model rather than text (M2M-100's and NLLB's language codes,
  // <mask>): never produced by encode, skipped by decode (as transformers' skip_special_tokens); those the table
  // lacks are ignored.
  static SentencePieceVocab from_serialized(const std::string& proto, std::vector<std::string> pieces,
                                            const std::vector<std::string>& controls = {});

  // Piece ids of a line, without bos/eos.
  std::vector<int> encode(const std::string& line) const;
  // The text of ids; pad, bos and eos are skipped (and unk, with a piece table). Throws DataError for an id
  // outside [0, size()).
  std::string decode(const std::vector<int>& ids) const;
  int size() const;
  // The model proto bytes (what from_serialized() takes).
  std::string serialized() const;
  // unk id (1) for an unknown piece.
  int piece_to_id(const std::string& piece) const;
  // Throws DataError for an id outside [0, size()).
  std::string id_to_piece(int id) const;
  float score(int id) const;
  // The piece table, or empty when the ids are the SentencePiece model's own.
  const std::vector<std::string>& pieces() const;

 private:
  struct Table;
  explicit SentencePieceVocab(std::shared_ptr<const void> model);
  void check_id(int id) const;
  std::shared_ptr<const void> model_;  // a SentencePieceProcessor inside the isolated module
  std::shared_ptr<const Table> table_;  // null: the model's own ids
  int size_ = 0;
};

}  // namespace parla::text
