#include "formats/torchscript_archive.h"

#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/pickle.h"
#include "formats/zip_archive.h"

namespace parla::formats {

namespace {

using Kind = PickleNode::Kind;

constexpr size_t kMaxDepth = 64;
constexpr size_t kMaxEntries = 1'000'000;

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// The line of the first `def` token (a method definition), or 0.
size_t first_method_line(const std::string& code) {
  size_t line = 1;
  for (size_t i = 0; i < code.size(); ++i) {
    if (code[i] == '\n') ++line;
    if (code.compare(i, 3, "def") == 0 && (i == 0 || !is_identifier_char(code[i - 1])) &&
        (i + 3 == code.size() || !is_identifier_char(code[i + 3])))
      return line;
  }
  return 0;
}

std::string shown(const std::string& name) { return "'" + (name.size() > 120 ? name.substr(0, 120) + "..." : name) + "'"; }

// LibTorch stores the data uncompressed; inflating a compressed entry costs its inflated size, which a hostile
// file can make huge for a few bytes (a zip bomb), so data entries must be stored.
std::string read_stored(const ZipArchive& zip, size_t index, uint64_t max_bytes) {
  const auto& e = zip.entries()[index];
  if (!e.stored) throw DataError("zip entry " + shown(e.name) + " is compressed, which TorchScript data never is");
  return zip.read(index, max_bytes);
}

// The code files, which LibTorch deflates, are read only to be searched, each and all together within a few MiB
// (parla's are a few hundred bytes each).
constexpr uint64_t kMaxCodeFile = 4u << 20, kMaxCodeTotal = 64u << 20;

class Flattener {
 public:
  Flattener(const PickleTree& tree, const ZipArchive& zip, const std::string& prefix, size_t file_size,
            const CheckedBytes& checked)
      : tree_(tree), zip_(zip), prefix_(prefix), file_size_(file_size), checked_(checked) {}

  TorchScriptArchive run() {
    const PickleNode& root = tree_.at(tree_.root);
    if (root.kind == Kind::Object) {
      walk(tree_.root, "", 0);
    } else if (root.kind == Kind::Dict) {  // torch.save of a state_dict: names to tensors
      walk_items(root.items, "", 0);
    } else {
      throw DataError("the archive's data is neither a module nor a dictionary of tensors");
    }
    return std::move(out_);
  }

 private:
  void walk(uint32_t object, const std::string& prefix, size_t depth) {
    const PickleNode& o = tree_.at(object);
    if (o.i != 1) return;  // an object never built has no attributes
    walk_items(tree_.at(o.storage).items, prefix, depth);
  }

  // A module's attributes or a dictionary's items (key, value, key, value, ...); nested modules and dictionaries
  // become dotted names.
  void walk_items(const std::vector<uint32_t>& attrs, const std::string& prefix, size_t depth) {
    if (depth > kMaxDepth) throw DataError("the archive's modules nest deeper than " + std::to_string(kMaxDepth));
    for (size_t k = 0; k + 1 < attrs.size(); k += 2) {
      const PickleNode& key = tree_.at(attrs[k]);
      if (key.kind != Kind::String) throw DataError("an attribute or key that is not a string");
      charge(prefix.size() + key.s.size());
      const std::string name = prefix + key.s;
      if (++entries_ > kMaxEntries) throw DataError("the archive holds more than a million entries");
      const uint32_t v = attrs[k + 1];
      const PickleNode& value = tree_.at(v);
      switch (value.kind) {
        case Kind::Object:
          walk(v, name + ".", depth + 1);
          break;
        case Kind::Dict:
          walk_items(value.items, name + ".", depth + 1);
          break;
        case Kind::Tensor:
          add_tensor(name, value);
          break;
        case Kind::None:
          break;
        case Kind::Tuple:
        case Kind::List: {
          nlohmann::json a = nlohmann::json::array();
          for (uint32_t item : value.items) a.push_back(scalar(tree_.at(item), name));
          add_value(name, a.dump());
          break;
        }
        default:
          add_value(name, text(scalar(value, name)));
      }
    }
  }

  static nlohmann::json scalar(const PickleNode& n, const std::string& name) {
    switch (n.kind) {
      case Kind::String:
        return n.s;
      case Kind::Int:
        return n.i;
      case Kind::Float:
        return n.f;
      case Kind::Bool:
        return n.i != 0;
      default:
        throw DataError("entry " + shown(name) + " holds a value of a kind parla never wrote");
    }
  }
  static std::string text(const nlohmann::json& j) {
    if (j.is_string()) return j.get<std::string>();
    if (j.is_number_float()) {
      char buf[40];
      std::snprintf(buf, sizeof buf, "%.17g", j.get<double>());
      return buf;
    }
    return j.dump();
  }

  // Names and values are copies: one string or module referenced many times from the memo must not multiply a
  // small file into a huge allocation.
  void charge(size_t bytes) {
    text_bytes_ += bytes;
    if (text_bytes_ > 4 * static_cast<uint64_t>(file_size_) + (16u << 20))
      throw DataError("the archive's names and values add up to more than four times the file's size");
  }

  void add_value(const std::string& name, std::string value) {
    charge(name.size() + value.size());
    if (!names_.insert(name).second) throw DataError("entry " + shown(name) + " appears twice");
    out_.values.emplace_back(name, std::move(value));
  }

  void add_tensor(const std::string& name, const PickleNode& t) {
    charge(name.size());
    if (!names_.insert(name).second) throw DataError("entry " + shown(name) + " appears twice");
    const PickleNode& s = tree_.at(t.storage);
    ArchiveTensor a;
    a.name = name;
    a.dtype = s.dtype;
    a.sizes = t.sizes;
    a.strides = t.strides;
    a.offset = t.offset;
    a.storage = storage(s);
    // Bytes the tensors occupy once copied: many views of one storage must not multiply a small file into a huge
    // allocation (tied weights make 2x legitimate).
    uint64_t bytes = dtype_size(a.dtype);
    for (int64_t d : a.sizes) bytes *= static_cast<uint64_t>(d);  // bounded: the pickle checked the reach
    materialized_ += bytes;
    if (materialized_ > 2 * static_cast<uint64_t>(file_size_) + (1u << 20))
      throw DataError("the archive's tensors add up to more than twice the file's size (views of one storage)");
    out_.tensors.push_back(std::move(a));
  }

  // In place where the zip entry lies whole and aligned for its type in the bytes (a mapped file: nothing copied,
  // and its pages can leave memory once a model has copied them); a copy otherwise.
  std::shared_ptr<const StorageBytes> read_storage(size_t index, size_t alignment) {
    if (auto view = zip_.stored_bytes(index, file_size_);
        view && reinterpret_cast<uintptr_t>(view->data()) % alignment == 0) {
      if (checked_) checked_(view->data(), view->size());
      return std::make_shared<const StorageBytes>(*view);
    }
    return std::make_shared<const StorageBytes>(read_stored(zip_, index, file_size_));
  }

  std::shared_ptr<const StorageBytes> storage(const PickleNode& s) {
    auto it = storages_.find(s.s);
    if (it != storages_.end()) {
      if (it->second.first != s.dtype) throw DataError("storage " + shown(s.s) + " is read as two types");
      return it->second.second;
    }
    auto index = zip_.find(prefix_ + "data/" + s.s);
    if (!index) throw DataError("the archive lacks the data of storage " + shown(s.s));
    uint64_t need = 0;
    if (__builtin_mul_overflow(static_cast<uint64_t>(s.i), dtype_size(s.dtype), &need) || need > file_size_)
      throw DataError("storage " + shown(s.s) + " claims more elements than the file holds");
    auto bytes = read_storage(*index, dtype_size(s.dtype));
    if (bytes->size() < need)
      throw DataError("storage " + shown(s.s) + " has " + std::to_string(bytes->size()) + " bytes, its " +
                      std::to_string(s.i) + " elements need " + std::to_string(need));
    storages_.emplace(s.s, std::make_pair(s.dtype, bytes));
    return bytes;
  }

  const PickleTree& tree_;
  const ZipArchive& zip_;
  const std::string prefix_;
  const size_t file_size_;
  const CheckedBytes& checked_;
  TorchScriptArchive out_;
  std::set<std::string> names_;
  std::map<std::string, std::pair<DType, std::shared_ptr<const StorageBytes>>> storages_;
  size_t entries_ = 0;
  uint64_t materialized_ = 0, text_bytes_ = 0;
};

}  // namespace

bool looks_like_zip(const uint8_t* data, size_t size) {
  return size >= 4 && data[0] == 'P' && data[1] == 'K' && data[2] == 3 && data[3] == 4;
}

TorchScriptArchive read_torchscript_archive(const uint8_t* data, size_t size, const CheckedBytes& checked) {
  ZipArchive zip(data, size);
  std::string prefix;
  bool found = false;
  for (const auto& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash + 1, std::string::npos, "data.pkl") == 0) {
      prefix = e.name.substr(0, slash + 1);
      found = true;
      break;
    }
  }
  if (!found) throw DataError("a zip archive without data.pkl: not a TorchScript archive");
  if (auto order = zip.find(prefix + "byteorder"); order && read_stored(zip, *order, 16) != "little")
    throw DataError("the archive's tensors are big-endian, which parla does not read");
  uint64_t code_bytes = 0;
  for (size_t i = 0; i < zip.entries().size(); ++i) {
    const auto& name = zip.entries()[i].name;
    if (name.rfind(prefix + "code/", 0) != 0 || name.size() < 3 || name.compare(name.size() - 3, 3, ".py") != 0)
      continue;
    code_bytes += zip.entries()[i].size;
    if (code_bytes > kMaxCodeTotal) throw DataError("the archive's code files add up to more than 64 MiB");
    if (size_t line = first_method_line(zip.read(i, kMaxCodeFile)))
      throw DataError("its code (" + shown(name) + ", line " + std::to_string(line) +
                      ") defines a method, which a parla checkpoint never has; parla runs no code from a "
                      "checkpoint, and refuses one that carries it");
  }
  auto pkl = read_stored(zip, *zip.find(prefix + "data.pkl"), size);
  const PickleTree tree = parse_pickle(reinterpret_cast<const uint8_t*>(pkl.data()), pkl.size());
  return Flattener(tree, zip, prefix, size, checked).run();
}

}  // namespace parla::formats
