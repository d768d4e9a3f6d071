#pragma once
// A strict reader of the pickles inside TorchScript archives (data.pkl), for reading old parla checkpoints
// without LibTorch's unpickler. Python's pickle is a program for a stack machine whose GLOBAL and REDUCE
// instructions call any function by name; this reader executes none. It knows the instructions of protocols 2-4
// that build values, and accepts exactly these names:
//   - `__torch__...` classes (TorchScript modules): an object is its attribute dictionary, set once by BUILD;
//     nothing of the archive's code/ is ever read as code, so no __setstate__ can run;
//   - torch._utils._rebuild_tensor_v2 (a tensor: storage, offset, sizes, strides), torch.<Type>Storage inside a
//     persistent id ('storage', type, key, location, numel), collections.OrderedDict() (an empty dictionary), and
//     torch.jit._pickle's build_*list and restore_type_tag, which only wrap a value.
// Anything else (another global, a REDUCE on anything but those, a BUILD with a non-dictionary state, text-mode
// instructions) is refused with the instruction's offset. Values live in one arena and refer to each other by
// index, so a hostile pickle cannot make reference cycles leak or recursion overflow here. The memory the parse
// holds is counted as it goes (nodes, stack, marks, memo, copied bytes) and the pickle refused past
// pickle_memory_budget: a node is ~150 bytes, so a pickle of one-byte instructions that each make one once took
// 250-280x its size.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "formats/safetensors.h"  // DType

namespace parla::formats {

struct PickleNode {
  enum class Kind { None, Bool, Int, Float, String, Tuple, List, Dict, Object, Tensor, Storage, Global };
  Kind kind = Kind::None;
  int64_t i = 0;       // Bool, Int; Storage: numel; Object: 1 once BUILD gave it its attributes
  double f = 0;        // Float
  std::string s;       // String; Object: class name; Storage: key; Global: "module.name"
  std::vector<uint32_t> items;  // Tuple, List: elements; Dict: key, value, key, value, ...
  // Tensor: index of its Storage node; Object: index of its attribute Dict (built objects only, i == 1)
  uint32_t storage = 0;
  int64_t offset = 0;
  std::vector<int64_t> sizes, strides;
  // Storage
  DType dtype = DType::F32;
};

struct PickleTree {
  std::vector<PickleNode> nodes;
  uint32_t root = 0;
  uint64_t accounted_bytes = 0;  // the most the parse held, by its own count (an upper bound of its heap use)
  const PickleNode& at(uint32_t i) const { return nodes[i]; }
};

// What parsing a pickle of `size` bytes may hold: four times its size plus 64 MiB.
uint64_t pickle_memory_budget(size_t size);

// Parses a whole pickle. DataError naming the offending instruction and its byte offset, or the budget
// (`max_bytes`, by default pickle_memory_budget) where the parse would hold more.
PickleTree parse_pickle(const uint8_t* data, size_t size);
PickleTree parse_pickle(const uint8_t* data, size_t size, uint64_t max_bytes);

}  // namespace parla::formats
