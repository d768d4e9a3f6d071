#pragma once
// Reading the TorchScript module archives that parla wrote as checkpoints before it moved to safetensors
// (torch::serialize::OutputArchive, a zip of data.pkl, code/ and data/<storage>), as data only: data.pkl goes
// through the strict unpickler (formats/pickle.h), tensors are checked against their storages, and the code/
// files are never compiled or run. They are only searched: a method there (a `def`, such as the __setstate__
// that LibTorch's own loader would call) gets the archive refused, since parla never wrote one. The same reader
// takes PyTorch's torch.save zips of a state_dict (Hugging Face's pytorch_model.bin): data.pkl is then a
// dictionary of names to tensors (an OrderedDict, whose _metadata attribute is dropped).
//
// The module tree is flattened into dotted names, the way parla names things everywhere: a sub-archive "model"
// holding a module "encoder" with a tensor "weight" gives "model.encoder.weight"; a dictionary's keys are names
// likewise. Torch-free (fuzzed).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "formats/safetensors.h"  // DType

namespace parla::formats {

// A storage's bytes: where they lie in the archive's bytes when its entry is stored there whole and aligned to the
// element type (then those bytes must outlive it), else a copy.
class StorageBytes {
 public:
  explicit StorageBytes(std::string copy) : copy_(std::move(copy)), bytes_(copy_) {}
  explicit StorageBytes(std::string_view in_place) : bytes_(in_place) {}
  StorageBytes(const StorageBytes&) = delete;
  StorageBytes& operator=(const StorageBytes&) = delete;
  const char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }
  bool in_place() const { return copy_.empty() && !bytes_.empty(); }

 private:
  std::string copy_;
  std::string_view bytes_;
};

struct ArchiveTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> sizes, strides;  // in elements; checked to stay inside the storage
  int64_t offset = 0;
  std::shared_ptr<const StorageBytes> storage;  // shared by the tensors viewing it
};

struct TorchScriptArchive {
  std::vector<ArchiveTensor> tensors;
  // Strings as they are; integers, floats and booleans as text; tuples and lists of those as a JSON array.
  std::vector<std::pair<std::string, std::string>> values;
};

// True when the bytes start like a zip archive (what every TorchScript or PyTorch .pt file is).
bool looks_like_zip(const uint8_t* data, size_t size);

// DataError saying what is wrong (the caller adds the file's name). Storages may view `data` (StorageBytes): it must
// outlive them. `checked`, when given, is called with each viewed storage's bytes once their CRC has been checked
// (which read them all): a mapped file's pages can leave memory until a tensor is read from them.
using CheckedBytes = std::function<void(const void*, size_t)>;
TorchScriptArchive read_torchscript_archive(const uint8_t* data, size_t size, const CheckedBytes& checked = {});

}  // namespace parla::formats
