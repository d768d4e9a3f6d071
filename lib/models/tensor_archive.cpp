#include "models/tensor_archive.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <torch/torch.h>

#include "core/error.h"
#include "core/output_file.h"
#include "formats/mapped_file.h"
#include "formats/safetensors.h"
#include "formats/torchscript_archive.h"

namespace parla::models {

namespace {

using formats::DType;

torch::ScalarType to_torch(DType t) {
  switch (t) {
    case DType::F64: return torch::kDouble;
    case DType::F32: return torch::kFloat;
    case DType::F16: return torch::kHalf;
    case DType::BF16: return torch::kBFloat16;
    case DType::I64: return torch::kLong;
    case DType::I32: return torch::kInt;
    case DType::I16: return torch::kShort;
    case DType::I8: return torch::kChar;
    case DType::U8: return torch::kByte;
    case DType::BOOL: return torch::kBool;
  }
  throw std::logic_error("unknown dtype");
}

DType from_torch(torch::ScalarType t, const std::string& name) {
  switch (t) {
    case torch::kDouble: return DType::F64;
    case torch::kFloat: return DType::F32;
    case torch::kHalf: return DType::F16;
    case torch::kBFloat16: return DType::BF16;
    case torch::kLong: return DType::I64;
    case torch::kInt: return DType::I32;
    case torch::kShort: return DType::I16;
    case torch::kChar: return DType::I8;
    case torch::kByte: return DType::U8;
    case torch::kBool: return DType::BOOL;
    default: throw DataError("cannot store tensor '" + name + "' of type " + std::string(c10::toString(t)));
  }
}

uint64_t nbytes(const torch::Tensor& t) { return static_cast<uint64_t>(t.numel()) * t.element_size(); }

}  // namespace

void TensorArchive::write(const std::string& name, const torch::Tensor& value) {
  tensors_[name] = value.detach();
}

void TensorArchive::write(const std::string& name, std::string value) { strings_[name] = std::move(value); }

const formats::TensorEntry* TensorArchive::find_entry(const std::string& name) const {
  auto it = std::lower_bound(by_name_.begin(), by_name_.end(), name,
                             [&](uint32_t i, const std::string& n) { return entries_[i].name < n; });
  return it != by_name_.end() && entries_[*it].name == name ? &entries_[*it] : nullptr;
}

torch::Tensor TensorArchive::make_tensor(const formats::TensorEntry& e) const {
  const uint8_t* at = file_->data() + data_start_ + e.begin;
  const auto options = torch::TensorOptions().dtype(to_torch(e.dtype));
  if (reinterpret_cast<uintptr_t>(at) % formats::dtype_size(e.dtype) == 0)
    // A view of the mapped file, which stays mapped while a view lives.
    return torch::from_blob(const_cast<uint8_t*>(at), e.shape, [file = file_](void*) {}, options);
  auto value = torch::empty(e.shape, options);  // a file from another writer whose data is not aligned to its type
  std::memcpy(value.data_ptr(), at, e.end - e.begin);
  return value;
}

bool TensorArchive::try_read(const std::string& name, torch::Tensor& out) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) {
    out = it->second.to(device_);
    return true;
  }
  const auto* e = find_entry(name);
  if (!e) return false;
  out = make_tensor(*e).to(device_);
  return true;
}

void TensorArchive::release(const std::string& name) const {
  if (!file_) return;
  auto it = tensors_.find(name);
  if (it != tensors_.end()) {
    file_->release(it->second.data_ptr(), static_cast<size_t>(nbytes(it->second)));  // ignored unless in the file
  } else if (const auto* e = find_entry(name)) {
    file_->release(file_->data() + data_start_ + e->begin, e->end - e->begin);
  }
}

void TensorArchive::check_unchanged() const {
  if (file_) file_->check_unchanged();
}

const std::string* TensorArchive::read_string(const std::string& name) const {
  auto it = strings_.find(name);
  return it == strings_.end() ? nullptr : &it->second;
}

bool TensorArchive::contains(const std::string& name) const {
  return tensors_.count(name) > 0 || find_entry(name) || strings_.count(name) > 0;
}

std::vector<std::string> TensorArchive::tensor_names(const std::string& prefix) const {
  auto has_prefix = [&](const std::string& n) { return n.compare(0, prefix.size(), prefix) == 0; };
  std::vector<std::string> out;
  for (auto it = tensors_.lower_bound(prefix); it != tensors_.end() && has_prefix(it->first); ++it)
    out.push_back(it->first);
  auto at = std::lower_bound(by_name_.begin(), by_name_.end(), prefix,
                             [&](uint32_t i, const std::string& n) { return entries_[i].name < n; });
  const size_t written = out.size();
  for (; at != by_name_.end() && has_prefix(entries_[*at].name); ++at)
    if (!tensors_.count(entries_[*at].name)) out.push_back(entries_[*at].name);
  if (written > 0 && out.size() > written) std::inplace_merge(out.begin(), out.begin() + written, out.end());
  return out;
}

std::vector<std::string> TensorArchive::string_names() const {
  std::vector<std::string> out;
  for (const auto& s : strings_) out.push_back(s.first);
  return out;
}

void TensorArchive::save(const std::string& path) const {
  std::vector<formats::TensorEntry> entries;
  std::map<std::string, torch::Tensor> host;  // contiguous CPU copies (the model may live on a GPU)
  for (const auto& name : tensor_names()) {
    torch::Tensor t;
    try_read(name, t);
    formats::TensorEntry e;
    e.name = name;
    e.dtype = from_torch(t.scalar_type(), name);
    e.shape = t.sizes().vec();
    entries.push_back(std::move(e));
    host[name] = t.to(torch::kCPU).contiguous();
  }
  std::string header;
  try {
    header = formats::layout_safetensors(entries, strings_);
  } catch (const DataError& e) {
    throw IoError(path + ": cannot write checkpoint: " + e.what());
  }
  AtomicOutputFile out(path);
  out.file().write(header);
  for (const auto& e : entries) {
    const auto& t = host.at(e.name);
    out.file().write(t.data_ptr(), static_cast<size_t>(nbytes(t)));
  }
  out.commit();
}

TensorArchive TensorArchive::load(const std::string& path, const torch::Device& device) {
  TensorArchive a;
  a.path_ = path;
  a.device_ = device;
  auto file = formats::MappedFile::open(path);  // DataError naming the file
  const uint8_t* bytes = file->data();
  try {
    if (formats::looks_like_zip(bytes, file->size())) {
      a.legacy_ = true;
      a.file_ = file;
      auto archive = formats::read_torchscript_archive(
          bytes, file->size(), [&file](const void* p, size_t n) { file->release(p, n); });
      std::map<const formats::StorageBytes*, int> viewers;
      for (const auto& t : archive.tensors) ++viewers[t.storage.get()];
      for (auto& t : archive.tensors) {
        // A view of the storage's bytes, which are the mapped file's where the entry lies there aligned (the tensor
        // keeps the storage and the mapping alive), as the safetensors views below: the model copies each from the
        // file and release() lets its pages go, so the peak holds the weights once. Copied out where the view is
        // not contiguous (strides checked to stay inside the storage), so every tensor read is contiguous, and
        // where tensors share a storage (tied weights), so none writes into another.
        auto storage = t.storage;
        const int64_t elements = static_cast<int64_t>(storage->size() / formats::dtype_size(t.dtype));
        auto base = torch::from_blob(
            const_cast<char*>(storage->data()), {elements}, [storage, file](void*) {},
            torch::TensorOptions().dtype(to_torch(t.dtype)));
        auto value = base.as_strided(t.sizes, t.strides, t.offset);
        if (!value.is_contiguous() || viewers[storage.get()] > 1) value = value.clone(torch::MemoryFormat::Contiguous);
        a.tensor_bytes_ += nbytes(value);
        a.tensors_[t.name] = value;
      }
      for (auto& [name, value] : archive.values) a.strings_[name] = std::move(value);
      return a;
    }
    auto header = formats::parse_safetensors(bytes, file->size());
    if (header.tensors.size() > UINT32_MAX) throw DataError("more than 2^32 tensors");
    a.file_ = file;
    a.strings_ = std::move(header.metadata);
    a.data_start_ = header.data_start;
    a.entries_ = std::move(header.tensors);
    a.entries_.shrink_to_fit();
    a.by_name_.resize(a.entries_.size());
    for (uint32_t i = 0; i < a.by_name_.size(); ++i) a.by_name_[i] = i;
    std::sort(a.by_name_.begin(), a.by_name_.end(),
              [&](uint32_t x, uint32_t y) { return a.entries_[x].name < a.entries_[y].name; });
    for (const auto& e : a.entries_) a.tensor_bytes_ += e.end - e.begin;
  } catch (const DataError& e) {
    file->check_unchanged();  // what looked damaged was a file cut short while it was read
    throw DataError(path + ": not a readable checkpoint: " + e.what());
  }
  file->check_unchanged();
  return a;
}

}  // namespace parla::models
