#include "text/sentencepiece_vocab.h"

#include <filesystem>

#include "core/error.h"
#include "text/sentencepiece_library.h"

namespace parla::text {

namespace {
using detail::sentencepiece_library;

std::string take(char* p, size_t n) {
  std::string s(p ? p : "", p ? n : 0);
  sentencepiece_library().free(p);
  return s;
}
std::string take_error(char* p) {
  std::string s(p ? p : "unknown error");
  sentencepiece_library().free(p);
  return s;
}

std::shared_ptr<const void> load_model(const std::string& data, bool from_file, const std::string& what) {
  const auto& lib = sentencepiece_library();
  char* error = nullptr;
  void* m = lib.load(data.data(), data.size(), from_file ? 1 : 0, &error);
  if (!m) throw DataError("cannot load SentencePiece model " + what + ": " + take_error(error));
  std::shared_ptr<const void> model(m, [](const void* p) { sentencepiece_library().free_model(const_cast<void*>(p)); });
  // Every parla model was trained with pad=0, unk=1, bos=2, eos=3; other ids would silently scramble the
  // embeddings, so such a model is refused.
  int ids[4];
  for (int k = 0; k < 4; ++k) ids[k] = lib.special_id(m, k);
  if (ids[0] != kPadId || ids[1] != kUnkId || ids[2] != kBosId || ids[3] != kEosId)
    throw DataError(what + ": SentencePiece model has special ids pad=" + std::to_string(ids[0]) + " unk=" +
                    std::to_string(ids[1]) + " bos=" + std::to_string(ids[2]) + " eos=" + std::to_string(ids[3]) +
                    "; parla needs pad=0 unk=1 bos=2 eos=3");
  return model;
}
}  // namespace

SentencePieceVocab::SentencePieceVocab(std::shared_ptr<const void> model)
    : model_(std::move(model)), size_(sentencepiece_library().size(model_.get())) {}

SentencePieceVocab SentencePieceVocab::load(const std::string& model_path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(model_path, ec))
    throw DataError("SentencePiece model not found: '" + model_path + "'");
  return SentencePieceVocab(load_model(model_path, true, "'" + model_path + "'"));
}

SentencePieceVocab SentencePieceVocab::from_serialized(const std::string& proto) {
  return SentencePieceVocab(load_model(proto, false, "(serialized bytes)"));
}

std::vector<int> SentencePieceVocab::encode(const std::string& line) const {
  const auto& lib = sentencepiece_library();
  int* ids = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (lib.encode(model_.get(), line.data(), line.size(), &ids, &n, &error) != 0)
    throw DataError("SentencePiece cannot encode a line: " + take_error(error));
  std::vector<int> out(ids, ids + n);
  lib.free(ids);
  return out;
}

void SentencePieceVocab::check_id(int id) const {
  if (id < 0 || id >= size_)
    throw DataError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(size_) + ")");
}

std::string SentencePieceVocab::decode(const std::vector<int>& ids) const {
  std::vector<int> kept;
  kept.reserve(ids.size());
  for (int id : ids) {
    check_id(id);
    if (id != kPadId && id != kBosId && id != kEosId) kept.push_back(id);
  }
  const auto& lib = sentencepiece_library();
  char* text = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (lib.decode(model_.get(), kept.data(), kept.size(), &text, &n, &error) != 0)
    throw DataError("SentencePiece cannot decode ids: " + take_error(error));
  return take(text, n);
}

int SentencePieceVocab::size() const { return size_; }

std::string SentencePieceVocab::serialized() const {
  size_t n = 0;
  char* p = sentencepiece_library().proto(model_.get(), &n);
  return take(p, n);
}

int SentencePieceVocab::piece_to_id(const std::string& piece) const {
  return sentencepiece_library().piece_to_id(model_.get(), piece.data(), piece.size());
}

std::string SentencePieceVocab::id_to_piece(int id) const {
  check_id(id);
  size_t n = 0;
  char* p = sentencepiece_library().id_to_piece(model_.get(), id, &n);
  return take(p, n);
}

float SentencePieceVocab::score(int id) const {
  check_id(id);
  return sentencepiece_library().score(model_.get(), id);
}

}  // namespace parla::text
