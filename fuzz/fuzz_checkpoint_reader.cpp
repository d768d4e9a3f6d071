// libFuzzer target over the readers of model files (lib/formats): the safetensors header parser, the zip reader,
// the strict unpickler and the TorchScript-archive reader that old checkpoints go through, and the .npy/.npz
// readers of Marian models. Every input is offered to all four entry points. It aborts (a finding) on a crash, a sanitizer report, an allocation past libFuzzer's
// -malloc_limit_mb, or when a reader accepts something that breaks what its callers rely on:
//   - safetensors: every tensor's range lies inside the data and matches its dtype and shape; the ranges tile the
//     data in order;
//   - archives: every tensor reaches only elements of its storage, whose bytes are as many as it claims;
//   - pickles: every index a node holds refers to an existing node;
//   - .npz: every array's data lies inside its entry and matches its dtype and shape.
// The first byte picks the entry point to try first (all are tried). Built with clang++ by fuzz/CMakeLists.txt;
// seeds (tiny checkpoints of both formats and a data.pkl) in fuzz/corpus_checkpoint/.
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "formats/npz.h"
#include "formats/pickle.h"
#include "formats/safetensors.h"
#include "formats/torchscript_archive.h"

namespace {

using namespace parla::formats;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

void safetensors(const uint8_t* data, size_t size) {
  try {
    const auto h = parse_safetensors(data, size);
    check(h.data_start <= size, "data starts inside the file");
    uint64_t at = 0;
    for (const auto& t : h.tensors) {
      check(t.begin == at && t.begin <= t.end, "ranges tile the data in order");
      uint64_t bytes = dtype_size(t.dtype);
      for (int64_t d : t.shape) {
        check(d >= 0, "dimensions are non-negative");
        bytes *= static_cast<uint64_t>(d);
      }
      check(bytes == t.end - t.begin, "a range matches its dtype and shape");
      at = t.end;
    }
    check(at == size - h.data_start, "the ranges cover the data");
  } catch (const parla::DataError&) {
  }
}

void archive(const uint8_t* data, size_t size) {
  try {
    const auto a = read_torchscript_archive(data, size);
    for (const auto& t : a.tensors) {
      check(t.storage != nullptr, "a tensor has its storage");
      const uint64_t elements = t.storage->size() / dtype_size(t.dtype);
      check(t.sizes.size() == t.strides.size() && t.offset >= 0, "sizes, strides and offset are consistent");
      uint64_t last = static_cast<uint64_t>(t.offset);
      bool empty = false;
      for (size_t k = 0; k < t.sizes.size(); ++k) {
        check(t.sizes[k] >= 0 && t.strides[k] >= 0, "sizes and strides are non-negative");
        if (t.sizes[k] == 0) empty = true;
        else last += static_cast<uint64_t>(t.sizes[k] - 1) * static_cast<uint64_t>(t.strides[k]);
      }
      check(empty || last < elements, "a tensor stays inside its storage");
    }
  } catch (const parla::DataError&) {
  }
}

void pickle(const uint8_t* data, size_t size) {
  try {
    const auto tree = parse_pickle(data, size);
    check(tree.root < tree.nodes.size(), "the root exists");
    for (const auto& n : tree.nodes) {
      for (uint32_t i : n.items) check(i < tree.nodes.size(), "items refer to nodes");
      if (n.kind == PickleNode::Kind::Tensor || (n.kind == PickleNode::Kind::Object && n.i == 1))
        check(n.storage < tree.nodes.size(), "a tensor's storage or an object's attributes exist");
    }
  } catch (const parla::DataError&) {
  }
}

void npz(const uint8_t* data, size_t size) {
  try {
    for (const auto& [name, e] : read_npz(data, size)) {
      uint64_t bytes = dtype_size(e.array.dtype);
      for (int64_t d : e.array.shape) bytes *= static_cast<uint64_t>(d);
      check(bytes == e.array.data_bytes, "an array's data matches its dtype and shape");
      check(e.array.data_offset + e.array.data_bytes == e.bytes.size(), "an array's data fills its entry");
    }
  } catch (const parla::DataError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int first = data[0] % 4;
  for (int k = 0; k < 4; ++k) {
    switch ((first + k) % 4) {
      case 0: safetensors(data, size); break;
      case 1: archive(data, size); break;
      case 2: pickle(data, size); break;
      case 3: npz(data, size); break;
    }
  }
  return 0;
}
