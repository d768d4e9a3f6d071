#include "formats/pickle.h"

#include <cstring>
#include <unordered_map>

#include "core/error.h"

namespace parla::formats {

namespace {

using Kind = PickleNode::Kind;

// What a GLOBAL may name; kept in a Global node's `i`.
enum GlobalKind : int64_t { kClass, kRebuildTensor, kOrderedDict, kStorageType, kListBuilder, kRestoreTypeTag };

struct StorageName {
  const char* name;
  DType dtype;
};
constexpr StorageName kStorages[] = {
    {"FloatStorage", DType::F32}, {"DoubleStorage", DType::F64}, {"HalfStorage", DType::F16},
    {"BFloat16Storage", DType::BF16}, {"LongStorage", DType::I64}, {"IntStorage", DType::I32},
    {"ShortStorage", DType::I16}, {"CharStorage", DType::I8},   {"ByteStorage", DType::U8},
    {"BoolStorage", DType::BOOL},
};

constexpr size_t kMaxDims = 64;

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, uint64_t max_bytes) : p_(data), size_(size), max_bytes_(max_bytes) {}

  PickleTree run() {
    while (true) {
      if (op_at_ != at_) account();
      op_at_ = at_;
      const uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          if (byte() > 5) fail("unknown pickle protocol");
          break;
        }
        case 0x95:  // FRAME: a length hint only
          uint_le(8);
          break;
        case '.': {  // STOP
          if (stack_.empty() || !marks_.empty()) fail("STOP with an unbalanced stack");
          tree_.root = stack_.back();
          account();
          tree_.accounted_bytes = peak_;
          return std::move(tree_);
        }
        case '(':
          marks_.push_back(stack_.size());
          break;
        case 'c': {  // GLOBAL module\nname\n
          std::string module = line(), name = line();
          push(global(module, name));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          const uint32_t name = pop(), module = pop();
          if (node(name).kind != Kind::String || node(module).kind != Kind::String)
            fail("STACK_GLOBAL without two strings");
          const std::string m = node(module).s, n = node(name).s;  // copies: global() grows the arena
          push(global(m, n));
          break;
        }
        case 'q':
          memo_[static_cast<uint32_t>(uint_le(1))] = top();
          break;
        case 'r':
          memo_[static_cast<uint32_t>(uint_le(4))] = top();
          break;
        case 0x94: {  // MEMOIZE
          const auto index = static_cast<uint32_t>(memo_.size());
          memo_[index] = top();
          break;
        }
        case 'h':
          push(get(static_cast<uint32_t>(uint_le(1))));
          break;
        case 'j':
          push(get(static_cast<uint32_t>(uint_le(4))));
          break;
        case ')':
          push(make(Kind::Tuple));
          break;
        case ']':
          push(make(Kind::List));
          break;
        case '}':
          push(make(Kind::Dict));
          break;
        case 't':
        case 'l':
        case 'd': {  // TUPLE, LIST, DICT from the mark
          auto items = pop_mark();
          if (op == 'd' && items.size() % 2) fail("DICT with an odd number of items");
          const uint32_t n = make(op == 't' ? Kind::Tuple : op == 'l' ? Kind::List : Kind::Dict);
          node(n).items = std::move(items);
          push(n);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const size_t k = static_cast<size_t>(op - 0x84);
          if (stack_.size() < k + floor()) fail("TUPLE" + std::to_string(k) + " on a short stack");
          std::vector<uint32_t> items(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          const uint32_t n = make(Kind::Tuple);
          node(n).items = std::move(items);
          push(n);
          break;
        }
        case 'a': {  // APPEND
          const uint32_t v = pop();
          container(Kind::List, "APPEND").items.push_back(v);
          items_bytes_ += 2 * sizeof(uint32_t);
          break;
        }
        case 'e': {  // APPENDS
          auto items = pop_mark();
          auto& list = container(Kind::List, "APPENDS").items;
          list.insert(list.end(), items.begin(), items.end());
          items_bytes_ += 2 * sizeof(uint32_t) * items.size();
          break;
        }
        case 's': {  // SETITEM
          const uint32_t v = pop(), k = pop();
          auto& dict = container(Kind::Dict, "SETITEM").items;
          dict.push_back(k);
          dict.push_back(v);
          items_bytes_ += 4 * sizeof(uint32_t);
          break;
        }
        case 'u': {  // SETITEMS
          auto items = pop_mark();
          if (items.size() % 2) fail("SETITEMS with an odd number of items");
          auto& dict = container(Kind::Dict, "SETITEMS").items;
          dict.insert(dict.end(), items.begin(), items.end());
          items_bytes_ += 2 * sizeof(uint32_t) * items.size();
          break;
        }
        case 'N':
          push(make(Kind::None));
          break;
        case 0x88:
        case 0x89: {
          const uint32_t n = make(Kind::Bool);
          node(n).i = op == 0x88;
          push(n);
          break;
        }
        case 'J':
          push_int(static_cast<int32_t>(static_cast<uint32_t>(uint_le(4))));
          break;
        case 'K':
          push_int(static_cast<int64_t>(uint_le(1)));
          break;
        case 'M':
          push_int(static_cast<int64_t>(uint_le(2)));
          break;
        case 0x8a:  // LONG1
          push_int(long_int(uint_le(1)));
          break;
        case 0x8b:  // LONG4
          push_int(long_int(uint_le(4)));
          break;
        case 'G': {  // BINFLOAT, big-endian
          uint64_t bits = 0;
          for (int k = 0; k < 8; ++k) bits = (bits << 8) | byte();
          const uint32_t n = make(Kind::Float);
          std::memcpy(&node(n).f, &bits, 8);
          push(n);
          break;
        }
        case 'X':  // BINUNICODE
        case 'B':  // BINBYTES
          push_string(uint_le(4));
          break;
        case 'T': {  // BINSTRING (signed length)
          const uint64_t len = uint_le(4);
          if (len & 0x80000000u) fail("negative string length");
          push_string(len);
          break;
        }
        case 0x8c:  // SHORT_BINUNICODE
        case 'U':   // SHORT_BINSTRING
        case 'C':   // SHORT_BINBYTES
          push_string(uint_le(1));
          break;
        case 0x8d:  // BINUNICODE8
        case 0x8e:  // BINBYTES8
          push_string(uint_le(8));
          break;
        case 0x81:  // NEWOBJ
          newobj();
          break;
        case 'b':  // BUILD
          build();
          break;
        case 'R':  // REDUCE
          reduce();
          break;
        case 'Q':  // BINPERSID
          persistent_id();
          break;
        default:
          fail("instruction 0x" + hex(op) + " is not one a TorchScript archive's data needs");
      }
    }
  }

 private:
  // What the parse holds, counted from the containers' capacities (twice: the buffers a vector outgrew add up to its
  // capacity again, and a heap allocator may keep them) and the bytes copied into the nodes; refused past
  // max_bytes_, so that a pickle of one-byte instructions that each make a node (or a mark, or a memo entry) cannot
  // take many times its size.
  void account() {
    const uint64_t vectors = tree_.nodes.capacity() * sizeof(PickleNode) + stack_.capacity() * sizeof(uint32_t) +
                             marks_.capacity() * sizeof(size_t) + memo_.bucket_count() * sizeof(void*);
    const uint64_t used = 2 * vectors + memo_.size() * kMemoEntryBytes + items_bytes_;
    if (used > peak_) peak_ = used;
    if (used > max_bytes_)
      fail("unpacking it takes more than " + std::to_string(max_bytes_ >> 20) + " MiB, the most a pickle of " +
           std::to_string(size_) + " bytes may take");
  }
  // An unordered_map node of two uint32 (key, value, hash link) and its allocation header.
  static constexpr uint64_t kMemoEntryBytes = 48;

  [[noreturn]] void fail(const std::string& why) const {
    throw DataError("refused pickle: " + why + " (at byte " + std::to_string(op_at_) + ")");
  }
  static std::string hex(uint8_t b) {
    const char* d = "0123456789abcdef";
    return {d[b >> 4], d[b & 15]};
  }

  uint8_t byte() {
    if (at_ >= size_) fail("the pickle ends without STOP");
    return p_[at_++];
  }
  uint64_t uint_le(int n) {
    if (size_ - at_ < static_cast<size_t>(n)) fail("the pickle ends inside an instruction");
    uint64_t v = 0;
    for (int k = n - 1; k >= 0; --k) v = (v << 8) | p_[at_ + static_cast<size_t>(k)];
    at_ += static_cast<size_t>(n);
    return v;
  }
  std::string line() {
    const void* nl = std::memchr(p_ + at_, '\n', size_ - at_);
    if (!nl) fail("GLOBAL without its line end");
    const size_t end = static_cast<size_t>(static_cast<const uint8_t*>(nl) - p_);
    std::string s(reinterpret_cast<const char*>(p_ + at_), end - at_);
    at_ = end + 1;
    return s;
  }
  // Two's complement, little-endian, at most 8 bytes (an int64).
  int64_t long_int(uint64_t n) {
    if (n > 8) fail("an integer wider than 64 bits");
    if (size_ - at_ < n) fail("the pickle ends inside an integer");
    uint64_t v = 0;
    for (size_t k = n; k-- > 0;) v = (v << 8) | p_[at_ + k];
    if (n > 0 && n < 8 && (p_[at_ + n - 1] & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign extension
    at_ += n;
    return static_cast<int64_t>(v);
  }

  PickleNode& node(uint32_t i) { return tree_.nodes[i]; }
  uint32_t make(Kind k) {
    tree_.nodes.emplace_back();
    tree_.nodes.back().kind = k;
    return static_cast<uint32_t>(tree_.nodes.size() - 1);
  }
  void push(uint32_t n) { stack_.push_back(n); }
  void push_int(int64_t v) {
    const uint32_t n = make(Kind::Int);
    node(n).i = v;
    push(n);
  }
  void push_string(uint64_t len) {
    if (len > size_ - at_) fail("a string longer than the rest of the pickle");
    const uint32_t n = make(Kind::String);
    node(n).s.assign(reinterpret_cast<const char*>(p_ + at_), static_cast<size_t>(len));
    items_bytes_ += len;
    at_ += static_cast<size_t>(len);
    push(n);
  }
  // The stack below the innermost mark is out of reach of plain pops.
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t pop() {
    if (stack_.size() <= floor()) fail("pop from an empty stack");
    const uint32_t v = stack_.back();
    stack_.pop_back();
    return v;
  }
  uint32_t top() {
    if (stack_.size() <= floor()) fail("memo of an empty stack");
    return stack_.back();
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    items_bytes_ += items.size() * sizeof(uint32_t);
    stack_.resize(m);
    return items;
  }
  uint32_t get(uint32_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) fail("memo entry " + std::to_string(index) + " was never stored");
    return it->second;
  }
  PickleNode& container(Kind k, const char* op) {
    if (stack_.size() <= floor() || node(stack_.back()).kind != k)
      fail(std::string(op) + " on something that is not a " + (k == Kind::List ? "list" : "dictionary"));
    return node(stack_.back());
  }

  uint32_t global(const std::string& module, const std::string& name) {
    const uint32_t n = make(Kind::Global);
    node(n).s = module + "." + name;
    items_bytes_ += node(n).s.size();
    const std::string shown = module.size() + name.size() > 200 ? "a long name" : "'" + module + "." + name + "'";
    if (module == "__torch__" || module.rfind("__torch__.", 0) == 0) {
      node(n).i = kClass;
    } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
      node(n).i = kRebuildTensor;
    } else if (module == "collections" && name == "OrderedDict") {
      node(n).i = kOrderedDict;
    } else if (module == "torch.jit._pickle" && (name == "build_intlist" || name == "build_doublelist" ||
                                                 name == "build_boollist" || name == "build_tensorlist")) {
      node(n).i = kListBuilder;
    } else if (module == "torch.jit._pickle" && name == "restore_type_tag") {
      node(n).i = kRestoreTypeTag;
    } else {
      bool storage = false;
      if (module == "torch")
        for (const auto& s : kStorages)
          if (name == s.name) {
            node(n).i = kStorageType;
            node(n).dtype = s.dtype;
            storage = true;
          }
      if (!storage) fail("it names " + shown + ", which is neither a tensor, a storage nor a plain container");
    }
    return n;
  }

  void newobj() {
    const uint32_t args = pop(), cls = pop();
    if (node(cls).kind != Kind::Global || node(cls).i != kClass) fail("NEWOBJ of something that is not a module");
    if (node(args).kind != Kind::Tuple || !node(args).items.empty()) fail("NEWOBJ with arguments");
    const uint32_t n = make(Kind::Object);
    node(n).s = node(cls).s;  // a copy per object: a long class name made into many objects is counted each time
    items_bytes_ += node(n).s.size();
    node(n).i = 0;  // not built yet
    push(n);
  }

  // The object's attributes, set once from a dictionary: a state of any other shape would be __setstate__'s. A
  // dictionary's attributes (torch.save of a state_dict: the OrderedDict's _metadata, module versions) are data
  // parla has no use for, and dropped.
  void build() {
    const uint32_t state = pop();
    if (stack_.size() > floor() && node(stack_.back()).kind == Kind::Dict) {
      if (node(state).kind != Kind::Dict) fail("BUILD with a state that is not a dictionary (a __setstate__ call)");
      return;
    }
    if (stack_.size() <= floor() || node(stack_.back()).kind != Kind::Object) fail("BUILD of something not an object");
    PickleNode& obj = node(stack_.back());
    if (obj.i != 0) fail("BUILD of an object twice");
    if (node(state).kind != Kind::Dict) fail("BUILD with a state that is not a dictionary (a __setstate__ call)");
    obj.storage = state;  // shared, not copied: one dictionary built into many objects costs nothing more
    obj.i = 1;
  }

  void reduce() {
    const uint32_t args = pop(), fn = pop();
    if (node(fn).kind != Kind::Global || node(args).kind != Kind::Tuple || node(args).items.size() > 7)
      fail("REDUCE of something that is not an allowed function");
    const auto a = node(args).items;  // a small copy: make() below may move the arena
    switch (node(fn).i) {
      case kRebuildTensor:
        push(tensor(a));
        return;
      case kOrderedDict:
        if (!a.empty()) fail("OrderedDict with arguments");
        push(make(Kind::Dict));
        return;
      case kListBuilder:
        if (a.size() != 1 || node(a[0]).kind != Kind::List) fail("a list builder without a list");
        push(a[0]);
        return;
      case kRestoreTypeTag:
        if (a.size() != 2) fail("restore_type_tag without its two arguments");
        push(a[0]);
        return;
      default:
        fail("REDUCE of '" + node(fn).s + "', which is not a function parla allows");
    }
  }

  int64_t int_item(uint32_t n, const char* what) {
    if (node(n).kind != Kind::Int) fail(std::string(what) + " is not an integer");
    return node(n).i;
  }

  // torch._utils._rebuild_tensor_v2(storage, offset, sizes, strides, requires_grad, hooks[, metadata]).
  uint32_t tensor(const std::vector<uint32_t>& a) {
    if (a.size() < 6 || a.size() > 7) fail("a tensor with " + std::to_string(a.size()) + " arguments");
    if (node(a[0]).kind != Kind::Storage) fail("a tensor without a storage");
    if (node(a[2]).kind != Kind::Tuple || node(a[3]).kind != Kind::Tuple) fail("a tensor without its sizes and strides");
    const auto& sz = node(a[2]).items;
    const auto& st = node(a[3]).items;
    if (sz.size() != st.size() || sz.size() > kMaxDims) fail("a tensor whose sizes and strides disagree");
    const int64_t offset = int_item(a[1], "a tensor's offset");
    const int64_t numel_storage = node(a[0]).i;
    if (offset < 0) fail("a tensor with a negative offset");
    std::vector<int64_t> sizes, strides;
    bool empty = false;
    uint64_t last = static_cast<uint64_t>(offset);  // the largest element index the tensor reaches
    uint64_t numel = 1;
    for (size_t k = 0; k < sz.size(); ++k) {
      const int64_t s = int_item(sz[k], "a tensor size"), d = int_item(st[k], "a tensor stride");
      if (s < 0 || d < 0) fail("a tensor with a negative size or stride");
      sizes.push_back(s);
      strides.push_back(d);
      if (s == 0) empty = true;
      uint64_t reach = 0;
      if (s > 0 && (__builtin_mul_overflow(static_cast<uint64_t>(s - 1), static_cast<uint64_t>(d), &reach) ||
                    __builtin_add_overflow(last, reach, &last) ||
                    __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel)))
        fail("a tensor whose shape overflows");
    }
    if (empty ? static_cast<uint64_t>(offset) > static_cast<uint64_t>(numel_storage)
              : last >= static_cast<uint64_t>(numel_storage))
      fail("a tensor that reaches element " + std::to_string(last) + " of a storage of " +
           std::to_string(numel_storage));
    const uint32_t n = make(Kind::Tensor);
    node(n).storage = a[0];
    node(n).offset = offset;
    items_bytes_ += 2 * sizeof(int64_t) * sizes.size();
    node(n).sizes = std::move(sizes);
    node(n).strides = std::move(strides);
    node(n).dtype = node(a[0]).dtype;
    return n;
  }

  // ('storage', torch.<Type>Storage, key, location, numel)
  void persistent_id() {
    const uint32_t pid = pop();
    const auto& t = node(pid).items;
    if (node(pid).kind != Kind::Tuple || t.size() != 5 || node(t[0]).kind != Kind::String ||
        node(t[0]).s != "storage" || node(t[1]).kind != Kind::Global || node(t[1]).i != kStorageType ||
        node(t[2]).kind != Kind::String || node(t[3]).kind != Kind::String || node(t[4]).kind != Kind::Int)
      fail("a persistent id that is not a tensor storage");
    if (node(t[4]).i < 0) fail("a storage with a negative size");
    const DType dtype = node(t[1]).dtype;
    const std::string key = node(t[2]).s;
    const int64_t numel = node(t[4]).i;
    const uint32_t n = make(Kind::Storage);
    node(n).dtype = dtype;
    node(n).s = key;
    items_bytes_ += key.size();
    node(n).i = numel;
    push(n);
  }

  const uint8_t* p_;
  size_t size_;
  size_t at_ = 0, op_at_ = 0;
  uint64_t max_bytes_, items_bytes_ = 0, peak_ = 0;
  PickleTree tree_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint32_t, uint32_t> memo_;
};

}  // namespace

uint64_t pickle_memory_budget(size_t size) { return 4 * static_cast<uint64_t>(size) + (uint64_t{64} << 20); }

PickleTree parse_pickle(const uint8_t* data, size_t size, uint64_t max_bytes) {
  return Unpickler(data, size, max_bytes).run();
}

PickleTree parse_pickle(const uint8_t* data, size_t size) {
  return parse_pickle(data, size, pickle_memory_budget(size));
}

}  // namespace parla::formats
