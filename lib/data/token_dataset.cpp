#include "data/token_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <tuple>

#include "core/bounded_json.h"
#include "core/error.h"
#include "formats/bounded_file.h"

namespace parla::data {

// A read-only memory map of a whole file; the pages are shared by every copy of the dataset.
struct TokenDataset::Mapping {
  const unsigned char* data = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (data && size) munmap(const_cast<unsigned char*>(data), size);
  }
  static std::shared_ptr<const Mapping> map(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError("cannot open dataset file '" + path + "': " + std::strerror(errno));
    struct stat st {};
    if (fstat(fd, &st) != 0) {
      ::close(fd);
      throw DataError("cannot stat '" + path + "': " + std::strerror(errno));
    }
    auto m = std::make_shared<Mapping>();
    m->size = static_cast<size_t>(st.st_size);
    if (m->size > 0) {
      void* p = mmap(nullptr, m->size, PROT_READ, MAP_SHARED, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        throw DataError("cannot map '" + path + "': " + std::strerror(errno));
      }
      m->data = static_cast<const unsigned char*>(p);
    }
    ::close(fd);
    return m;
  }
};

TokenDataset TokenDataset::open(const std::string& prefix) {
  TokenDataset d;
  d.prefix_ = prefix;
  std::string idx_path = prefix + ".idx", bin_path = prefix + ".bin";
  d.idx_ = Mapping::map(idx_path);
  d.bin_ = Mapping::map(bin_path);
  const Mapping& idx = *d.idx_;
  if (idx.size < kIndexHeaderBytes || std::memcmp(idx.data, kIndexMagic, 8) != 0)
    throw DataError("'" + idx_path + "' is not a parla dataset index (bad magic or truncated header)");
  uint32_t version, width;
  uint64_t n, t;
  std::memcpy(&version, idx.data + 8, 4);
  std::memcpy(&width, idx.data + 12, 4);
  std::memcpy(&n, idx.data + 16, 8);
  std::memcpy(&t, idx.data + 24, 8);
  if (version != kIndexVersion)
    throw DataError("'" + idx_path + "': format version " + std::to_string(version) + ", this parla reads " +
                    std::to_string(kIndexVersion));
  if (width != 2 && width != 4) throw DataError("'" + idx_path + "': token width " + std::to_string(width) + " bytes");
  if (n > (idx.size - kIndexHeaderBytes) / 8 || idx.size != kIndexHeaderBytes + 8 * (n + 1))
    throw DataError("'" + idx_path + "' is truncated or corrupt: " + std::to_string(idx.size) + " bytes for " +
                    std::to_string(n) + " sentences");
  if (d.bin_->size != t * width)
    throw DataError("'" + bin_path + "' is truncated or corrupt: " + std::to_string(d.bin_->size) +
                    " bytes, the index says " + std::to_string(t) + " tokens of " + std::to_string(width) + " bytes");
  d.offsets_ = reinterpret_cast<const uint64_t*>(idx.data + kIndexHeaderBytes);
  // Monotone offsets ending at the token count: a corrupt index could otherwise send copy_to out of bounds.
  if (d.offsets_[0] != 0 || d.offsets_[n] != t)
    throw DataError("'" + idx_path + "' is corrupt: offsets do not span the token file");
  for (uint64_t i = 0; i < n; ++i)
    if (d.offsets_[i + 1] < d.offsets_[i])
      throw DataError("'" + idx_path + "' is corrupt: offset of sentence " + std::to_string(i + 1) + " decreases");
  d.tokens_data_ = d.bin_->data;
  d.sentences_ = static_cast<size_t>(n);
  d.tokens_ = t;
  d.token_bytes_ = static_cast<int>(width);
  for (uint64_t k = 0; k < t; ++k) {
    uint32_t v = 0;
    std::memcpy(&v, d.tokens_data_ + k * width, width);  // little-endian, as copy_to reads them
    d.max_id_ = std::max(d.max_id_, v);
  }
  return d;
}

size_t TokenDataset::length(size_t i) const {
  if (i >= sentences_)
    throw std::out_of_range("sentence " + std::to_string(i) + " of '" + prefix_ + "' (" +
                            std::to_string(sentences_) + " sentences)");
  return static_cast<size_t>(offsets_[i + 1] - offsets_[i]);
}

void TokenDataset::copy_to(size_t i, int64_t* out) const {
  size_t n = length(i);
  const unsigned char* p = tokens_data_ + offsets_[i] * token_bytes_;
  // The files are little-endian, like every machine parla runs on (x86-64, aarch64).
  if (token_bytes_ == 2) {
    for (size_t k = 0; k < n; ++k) {
      uint16_t v;
      std::memcpy(&v, p + 2 * k, 2);
      out[k] = v;
    }
  } else {
    for (size_t k = 0; k < n; ++k) {
      uint32_t v;
      std::memcpy(&v, p + 4 * k, 4);
      out[k] = v;
    }
  }
}

std::vector<int64_t> TokenDataset::get(size_t i) const {
  std::vector<int64_t> out(length(i));
  copy_to(i, out.data());
  return out;
}

namespace {
// The value at a dotted key ("vocab.src_model"); DataError naming the whole key when any part is missing.
const nlohmann::json& need(const nlohmann::json& root, const std::string& key, const std::string& path) {
  const nlohmann::json* j = &root;
  size_t start = 0;
  for (;;) {
    size_t dot = key.find('.', start);
    std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!j->is_object() || !j->contains(part)) throw DataError("'" + path + "': missing key '" + key + "'");
    j = &j->at(part);
    if (dot == std::string::npos) return *j;
    start = dot + 1;
  }
}
// A JSON array of strings (preprocess writes it), at most 64 MiB.
std::vector<std::string> read_piece_table(const std::string& path) {
  const std::string text = formats::read_bounded_file(path, 64u << 20);
  try {
    JsonLimits flat;
    flat.max_depth = 1;  // an array of strings
    auto j = parse_bounded_json(text, flat, "'" + path + "'");
    if (!j.is_array()) throw DataError("'" + path + "': not a JSON array of pieces");
    return j.get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError("'" + path + "': not a JSON array of pieces: " + e.what());
  }
}

}  // namespace

DatasetInfo read_dataset_info(const std::string& dir) {
  std::string path = dir + "/meta.json";
  std::ifstream in(path);
  if (!in) throw DataError("not a parla dataset directory: cannot read '" + path + "' (run parla-preprocess)");
  in.close();
  DatasetInfo info;
  // parla-preprocess writes a few hundred bytes; bounded in size and depth like any file parla did not just write.
  info.meta = parse_bounded_json(formats::read_bounded_file(path, 16u << 20), JsonLimits{}, "'" + path + "'");
  try {
    if (need(info.meta, "format", path) != "parla-dataset")
      throw DataError("'" + path + "': not a parla dataset (key 'format')");
    info.dir = dir;
    info.src_lang = need(info.meta, "src_lang", path).get<std::string>();
    info.tgt_lang = need(info.meta, "tgt_lang", path).get<std::string>();
    info.joint = need(info.meta, "vocab.joint", path).get<bool>();
    info.src_vocab_size = need(info.meta, "vocab.src_size", path).get<int>();
    info.tgt_vocab_size = need(info.meta, "vocab.tgt_size", path).get<int>();
    info.src_spm_path = dir + "/" + need(info.meta, "vocab.src_model", path).get<std::string>();
    info.tgt_spm_path = dir + "/" + need(info.meta, "vocab.tgt_model", path).get<std::string>();
    const auto& vocab = info.meta["vocab"];
    for (auto [key, pieces] : {std::pair{"src_pieces", &info.src_pieces}, std::pair{"tgt_pieces", &info.tgt_pieces}})
      if (vocab.contains(key)) *pieces = read_piece_table(dir + "/" + vocab[key].get<std::string>());
    info.control_pieces = vocab.value("control_pieces", std::vector<std::string>{});
    info.languages = vocab.value("languages", nlohmann::json::object());
    if (!info.languages.is_object() || !info.languages.value("codes", nlohmann::json::object()).is_object())
      throw DataError("'" + path + "': malformed: key 'vocab.languages' is not an object of codes");
  } catch (const nlohmann::json::exception& e) {
    throw DataError("'" + path + "': malformed: " + e.what());
  }
  return info;
}

namespace {
text::SentencePieceVocab dataset_vocab(const std::string& spm_path, const std::vector<std::string>& pieces,
                                       const std::vector<std::string>& controls) {
  if (pieces.empty()) return text::SentencePieceVocab::load(spm_path);
  const std::string proto = formats::read_bounded_file(spm_path, 64u << 20);
  try {
    return text::SentencePieceVocab::from_serialized(proto, pieces, controls);
  } catch (const DataError& e) {
    throw DataError("'" + spm_path + "' with its piece table: " + e.what());
  }
}
}  // namespace

text::SentencePieceVocab source_vocab(const DatasetInfo& info) {
  return dataset_vocab(info.src_spm_path, info.src_pieces, info.control_pieces);
}
text::SentencePieceVocab target_vocab(const DatasetInfo& info) {
  return dataset_vocab(info.tgt_spm_path, info.tgt_pieces, info.control_pieces);
}

ParallelSplit open_split(const DatasetInfo& info, const std::string& split) {
  if (split != "train" && split != "valid" && split != "test")
    throw DataError("unknown split '" + split + "' (expected train, valid or test)");
  ParallelSplit s{TokenDataset::open(info.dir + "/" + split + "." + info.src_lang),
                  TokenDataset::open(info.dir + "/" + split + "." + info.tgt_lang)};
  if (s.src.size() != s.tgt.size())
    throw DataError("dataset '" + info.dir + "', split " + split + ": " + std::to_string(s.src.size()) +
                    " source but " + std::to_string(s.tgt.size()) + " target sentences");
  for (const auto& [side, size, key] : {std::tuple<const TokenDataset*, int, const char*>{&s.src, info.src_vocab_size,
                                                                                         "vocab.src_size"},
                                        {&s.tgt, info.tgt_vocab_size, "vocab.tgt_size"}})
    if (size > 0 && side->max_id() >= static_cast<uint32_t>(size))
      throw DataError("'" + side->path_prefix() + ".bin': token id " + std::to_string(side->max_id()) +
                      " is outside the vocabulary of " + std::to_string(size) + " entries (meta.json " + key + ")");
  return s;
}

}  // namespace parla::data
