#pragma once
// What a checkpoint file holds, whatever its format: named tensors and named strings, with dotted names
// ("model.encoder.layers.0.ffn.fc1.weight", "optimizer.<param>.exp_avg", "training_state").
//
// Written as safetensors (formats/safetensors.h): the strings go into its "__metadata__", the tensors are raw
// little-endian data, and nothing in the file can run. Read from safetensors (mapped, every header field checked
// against the file before anything is allocated), or from the TorchScript archives that parla wrote before
// (formats/torchscript_archive.h: a strict reader that runs none of the archive's code), so old checkpoints keep
// loading. Files are told apart by their first bytes, not by their names.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "formats/mapped_file.h"
#include "formats/safetensors.h"

namespace parla::models {

class TensorArchive {
 public:
  TensorArchive() = default;

  // --- writing
  void write(const std::string& name, const torch::Tensor& value);  // copied to the CPU when saved
  void write(const std::string& name, std::string value);
  // Safetensors, through a temporary file renamed into place. IoError naming the file.
  void save(const std::string& path) const;

  // --- reading
  // DataError naming the file: missing, neither format, or anything inconsistent in it. Tensors come back on
  // `device` (the map location) whatever device wrote them.
  static TensorArchive load(const std::string& path, const torch::Device& device = torch::kCPU);
  bool try_read(const std::string& name, torch::Tensor& out) const;
  // Done with tensor `name` after copying it: where it is a view of the mapped file, its pages leave this
  // process's memory (formats::MappedFile::release), so that loading holds one tensor of the file at a time rather
  // than all of it. Only for a tensor that was read, not written in place. Reading it again maps it in again.
  void release(const std::string& name) const;
  // DataError "FILE changed while it was read" where the file shrank under its mapping while it was read
  // (formats::MappedFile::check_unchanged): the loaders call it once they have copied everything out.
  void check_unchanged() const;
  // nullptr when absent.
  const std::string* read_string(const std::string& name) const;
  bool contains(const std::string& name) const;
  // Names of the tensors that start with `prefix`, in name order.
  std::vector<std::string> tensor_names(const std::string& prefix = "") const;
  std::vector<std::string> string_names() const;
  // Total bytes of the tensors as stored (the file's weight, for bounding what it may make us allocate).
  uint64_t tensor_bytes() const { return tensor_bytes_; }
  // The file it was read from ("" for one being written), and whether that file was a TorchScript archive.
  const std::string& path() const { return path_; }
  bool legacy() const { return legacy_; }

 private:
  std::map<std::string, torch::Tensor> tensors_;
  std::map<std::string, std::string> strings_;
  std::string path_;
  bool legacy_ = false;
  uint64_t tensor_bytes_ = 0;
  torch::Device device_ = torch::kCPU;
  std::shared_ptr<const formats::MappedFile> file_;  // the file, whose tensors are views of it
  // Read from safetensors: the header's entries (in data order) and their positions in name order. A tensor is made
  // (a view of the mapping) only when it is read: a header of a million entries costs its entries, about 100 bytes
  // each, not a million tensors of about 600 (issue 59: 959 MB for a 97 MB header). tensors_ (written ones) wins
  // over an entry of the same name.
  std::vector<formats::TensorEntry> entries_;
  std::vector<uint32_t> by_name_;
  uint64_t data_start_ = 0;
  const formats::TensorEntry* find_entry(const std::string& name) const;
  torch::Tensor make_tensor(const formats::TensorEntry& e) const;
};

}  // namespace parla::models
