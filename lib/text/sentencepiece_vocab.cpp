#include "text/sentencepiece_vocab.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <unordered_map>

#include "core/error.h"
#include "core/regular_file.h"
#include "text/sentencepiece_library.h"
#include "text/sentencepiece_model_check.h"

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

// `check_specials`: the model's own ids are parla's (no piece table), so its special ids must be parla's.
// `proto`: the model's bytes, checked here before SentencePiece, which trusts them, reads them.
std::shared_ptr<const void> load_model(const std::string& proto, const std::string& what, bool check_specials = true) {
  const auto& lib = sentencepiece_library();
  check_sentencepiece_model(proto, what);
  char* error = nullptr;
  void* m = lib.load(proto.data(), proto.size(), 0, &error);
  if (!m) throw DataError("cannot load SentencePiece model " + what + ": " + take_error(error));
  std::shared_ptr<const void> model(m, [](const void* p) { sentencepiece_library().free_model(const_cast<void*>(p)); });
  if (!check_specials) return model;
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
std::string piece_of(const void* model, int id) {
  size_t n = 0;
  char* p = sentencepiece_library().id_to_piece(model, id, &n);
  return take(p, n);
}

// Far above any real model (a 250,000-piece vocabulary is about 5 MB); the converters read source.spm with the same
// bound.
constexpr size_t kMaxModelFileBytes = size_t{64} << 20;

bool is_language_token(const std::string& piece) {
  return piece.size() > 4 && piece.compare(0, 2, ">>") == 0 && piece.compare(piece.size() - 2, 2, "<<") == 0;
}

}  // namespace

// The table's numbering beside the model's.
struct SentencePieceVocab::Table {
  std::vector<std::string> pieces;
  std::unordered_map<std::string, int> ids;
  std::vector<int> to_model;    // table id -> model id, -1 for pieces the model cannot produce
  std::vector<bool> control;    // table id -> a token of the model rather than text (from_serialized's controls)
};

SentencePieceVocab::SentencePieceVocab(std::shared_ptr<const void> model)
    : model_(std::move(model)), size_(sentencepiece_library().size(model_.get())) {}

SentencePieceVocab SentencePieceVocab::from_serialized(const std::string& proto, std::vector<std::string> pieces,
                                                       const std::vector<std::string>& controls) {
  if (pieces.size() < 4)
    throw DataError("a piece table of " + std::to_string(pieces.size()) + " entries cannot hold pad, unk, bos, eos");
  SentencePieceVocab v(load_model(proto, "(serialized bytes)", /*check_specials=*/false));
  auto t = std::make_shared<Table>();
  const void* m = v.model_.get();
  for (size_t i = 0; i < pieces.size(); ++i)
    if (!t->ids.emplace(pieces[i], static_cast<int>(i)).second)
      throw DataError("the piece table names '" + pieces[i].substr(0, 60) + "' twice");
  // Id 2 is bos when the model cannot produce its piece, an ordinary piece when it can (an imported vocabulary
  // whose decoder starts from pad has no bos: model.decoder_start).
  // The model's own specials (its <unk>, <s>, </s>, <pad>: control pieces that encode never produces) are not
  // ordinary pieces whatever the table calls them.
  std::vector<int> model_specials;
  for (int k = 0; k < 4; ++k) model_specials.push_back(sentencepiece_library().special_id(m, k));
  t->to_model.assign(pieces.size(), -1);
  for (size_t i = 2; i < pieces.size(); ++i) {
    if (i == static_cast<size_t>(kEosId)) continue;
    const int id = sentencepiece_library().piece_to_id(m, pieces[i].data(), pieces[i].size());
    if (id >= 0 && id < v.size_ && piece_of(m, id) == pieces[i] &&
        std::find(model_specials.begin(), model_specials.end(), id) == model_specials.end())
      t->to_model[i] = id;
  }
  t->control.assign(pieces.size(), false);
  for (const auto& c : controls) {
    auto it = t->ids.find(c);
    if (it != t->ids.end()) t->control[static_cast<size_t>(it->second)] = true;  // one side's may be absent
  }
  t->pieces = std::move(pieces);
  v.size_ = static_cast<int>(t->pieces.size());
  v.table_ = std::move(t);
  return v;
}

const std::vector<std::string>& SentencePieceVocab::pieces() const {
  static const std::vector<std::string> none;
  return table_ ? table_->pieces : none;
}

SentencePieceVocab SentencePieceVocab::load(const std::string& model_path) {
  // Read here rather than by SentencePiece, so that the bytes are checked first; through one descriptor of a
  // regular file, so that a path swapped for a FIFO after a check cannot block the reader.
  std::string proto;
  try {
    proto = read_bounded_file(model_path, kMaxModelFileBytes);
  } catch (const DataError& e) {
    throw DataError(std::string("SentencePiece model: ") + e.what());
  }
  return SentencePieceVocab(load_model(proto, "'" + model_path + "'"));
}

SentencePieceVocab SentencePieceVocab::from_serialized(const std::string& proto) {
  return SentencePieceVocab(load_model(proto, "(serialized bytes)"));
}

std::vector<int> SentencePieceVocab::encode(const std::string& line) const {
  const auto& lib = sentencepiece_library();
  std::vector<int> out;
  size_t start = 0;
  if (table_ && line.compare(0, 2, ">>") == 0) {  // a target-language token, as OPUS-MT's tokenizer reads one
    const size_t end = line.find("<<", 2);
    if (end != std::string::npos && (end + 2 == line.size() || line[end + 2] == ' ')) {
      auto it = table_->ids.find(line.substr(0, end + 2));
      if (it != table_->ids.end() && is_language_token(it->first)) {
        out.push_back(it->second);
        start = std::min(line.size(), end + 3);
      }
    }
  }
  char* error = nullptr;
  size_t n = 0;
  if (!table_) {
    int* ids = nullptr;
    if (lib.encode(model_.get(), line.data() + start, line.size() - start, &ids, &n, &error) != 0)
      throw DataError("SentencePiece cannot encode a line: " + take_error(error));
    out.assign(ids, ids + n);
    lib.free(ids);
    return out;
  }
  // Through the pieces as strings, as Marian (spm_encode, then vocab.yml) and MarianTokenizer read a line: a span
  // the model cannot segment comes as its surface text, which is that table entry where the table has one (a joint
  // vocabulary holds the other side's pieces), else unk. Pad, bos and eos are never produced.
  char* joined = nullptr;
  size_t* lens = nullptr;
  if (lib.encode_pieces(model_.get(), line.data() + start, line.size() - start, &joined, &lens, &n, &error) != 0)
    throw DataError("SentencePiece cannot encode a line: " + take_error(error));
  std::unique_ptr<char, void (*)(char*)> hold_joined(joined, [](char* p) { sentencepiece_library().free(p); });
  std::unique_ptr<size_t, void (*)(size_t*)> hold_lens(lens, [](size_t* p) { sentencepiece_library().free(p); });
  out.reserve(out.size() + n);
  size_t at = 0;
  std::string piece;
  for (size_t i = 0; i < n; ++i) {
    piece.assign(joined + at, lens[i]);
    at += lens[i];
    auto it = table_->ids.find(piece);
    const bool ordinary = it != table_->ids.end() && it->second != kPadId && it->second != kUnkId &&
                          it->second != kEosId && (it->second != kBosId || table_->to_model[kBosId] >= 0) &&
                          !table_->control[static_cast<size_t>(it->second)];
    out.push_back(ordinary ? it->second : kUnkId);
  }
  return out;
}

void SentencePieceVocab::check_id(int id) const {
  if (id < 0 || id >= size_)
    throw DataError("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(size_) + ")");
}

std::string SentencePieceVocab::decode(const std::vector<int>& ids) const {
  const auto& lib = sentencepiece_library();
  char* text = nullptr;
  size_t n = 0;
  char* error = nullptr;
  if (!table_) {
    std::vector<int> kept;
    kept.reserve(ids.size());
    for (int id : ids) {
      check_id(id);
      if (id != kPadId && id != kBosId && id != kEosId) kept.push_back(id);
    }
    if (lib.decode(model_.get(), kept.data(), kept.size(), &text, &n, &error) != 0)
      throw DataError("SentencePiece cannot decode ids: " + take_error(error));
    return take(text, n);
  }
  // An imported vocabulary decodes as its own tools do (Marian's vocab + spm_decode, transformers' MarianTokenizer
  // with skip_special_tokens): the specials are skipped and every other id is its table piece, handed to
  // SentencePiece's DecodePieces. A piece the model lacks (a joint vocabulary holds the other side's pieces) is
  // then printed as it is rather than lost; its word boundaries are turned into spaces, and the ends trimmed.
  std::vector<const char*> pieces;
  std::vector<size_t> lens;
  pieces.reserve(ids.size());
  lens.reserve(ids.size());
  for (int id : ids) {
    check_id(id);
    if (id == kPadId || id == kUnkId || id == kEosId || table_->control[static_cast<size_t>(id)]) continue;
    if (id == kBosId && table_->to_model[static_cast<size_t>(kBosId)] < 0) continue;  // bos, not an ordinary piece
    const std::string& piece = table_->pieces[static_cast<size_t>(id)];
    pieces.push_back(piece.data());
    lens.push_back(piece.size());
  }
  if (lib.decode_pieces(model_.get(), pieces.data(), lens.data(), pieces.size(), &text, &n, &error) != 0)
    throw DataError("SentencePiece cannot decode pieces: " + take_error(error));
  std::string out = take(text, n);
  static const std::string kWordBoundary = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  for (size_t at = out.find(kWordBoundary); at != std::string::npos; at = out.find(kWordBoundary, at + 1))
    out.replace(at, kWordBoundary.size(), " ");
  const size_t first = out.find_first_not_of(" \t\n\r\f\v");
  if (first == std::string::npos) return "";
  return out.substr(first, out.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

int SentencePieceVocab::size() const { return size_; }

std::string SentencePieceVocab::serialized() const {
  size_t n = 0;
  char* p = sentencepiece_library().proto(model_.get(), &n);
  return take(p, n);
}

int SentencePieceVocab::piece_to_id(const std::string& piece) const {
  if (table_) {
    auto it = table_->ids.find(piece);
    return it == table_->ids.end() ? kUnkId : it->second;
  }
  return sentencepiece_library().piece_to_id(model_.get(), piece.data(), piece.size());
}

std::string SentencePieceVocab::id_to_piece(int id) const {
  check_id(id);
  if (table_) return table_->pieces[static_cast<size_t>(id)];
  return piece_of(model_.get(), id);
}

float SentencePieceVocab::score(int id) const {
  check_id(id);
  if (table_) {
    const int m = table_->to_model[static_cast<size_t>(id)];
    return m >= 0 ? sentencepiece_library().score(model_.get(), m) : 0.0f;
  }
  return sentencepiece_library().score(model_.get(), id);
}

}  // namespace parla::text
