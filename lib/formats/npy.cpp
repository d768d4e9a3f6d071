#include "formats/npy.h"

#include <cstring>

#include "core/error.h"

namespace parla::formats {

namespace {

// The header's dict literal, as numpy.lib.format writes it: {'key': value, ...} with string, boolean and
// integer-tuple values, Python's whitespace between tokens.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : s_(text) {}

  void parse(NpyArray& out, std::string& descr, bool& fortran) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip();
      if (peek() == '}') break;
      const std::string key = string();
      expect(':');
      if (key == "descr") {
        descr = string();
        have_descr = true;
      } else if (key == "fortran_order") {
        fortran = boolean();
        have_order = true;
      } else if (key == "shape") {
        out.shape = tuple();
        have_shape = true;
      } else {
        fail("unknown key '" + key.substr(0, 40) + "'");
      }
      skip();
      if (peek() == ',') {
        ++at_;
        continue;
      }
      skip();
      if (peek() != '}') fail("',' or '}' expected");
    }
    ++at_;
    if (!have_descr || !have_order || !have_shape) fail("descr, fortran_order or shape missing");
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw DataError(".npy header: " + why + " (at character " + std::to_string(at_) + ")");
  }
  void skip() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n')) ++at_;
  }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void expect(char c) {
    skip();
    if (peek() != c) fail(std::string("'") + c + "' expected");
    ++at_;
  }
  std::string string() {
    skip();
    const char q = peek();
    if (q != '\'' && q != '"') fail("a quoted string expected");
    const size_t end = s_.find(q, at_ + 1);
    if (end == std::string::npos) fail("unterminated string");
    std::string v = s_.substr(at_ + 1, end - at_ - 1);
    at_ = end + 1;
    return v;
  }
  bool boolean() {
    skip();
    if (s_.compare(at_, 4, "True") == 0) {
      at_ += 4;
      return true;
    }
    if (s_.compare(at_, 5, "False") == 0) {
      at_ += 5;
      return false;
    }
    fail("True or False expected");
  }
  std::vector<int64_t> tuple() {
    expect('(');
    std::vector<int64_t> v;
    while (true) {
      skip();
      if (peek() == ')') break;
      if (peek() < '0' || peek() > '9') fail("a dimension expected");
      int64_t d = 0;
      while (peek() >= '0' && peek() <= '9') {
        if (d > (INT64_MAX - 9) / 10) fail("a dimension too large");
        d = d * 10 + (peek() - '0');
        ++at_;
      }
      if (peek() == 'L') ++at_;  // Python 2's long suffix
      v.push_back(d);
      if (v.size() > 32) fail("more than 32 dimensions");
      skip();
      if (peek() == ',') ++at_;
      else if (peek() != ')') fail("',' or ')' expected");
    }
    ++at_;
    return v;
  }

  const std::string& s_;
  size_t at_ = 0;
};

DType npy_dtype(const std::string& descr) {
  // The byte order: '<' little, '|' not applicable (one byte), '=' native (little on every machine parla runs).
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    throw DataError(".npy data of type '" + descr.substr(0, 20) + "' is not little-endian");
  const std::string t = descr.substr(1);
  if (t == "f4") return DType::F32;
  if (t == "f8") return DType::F64;
  if (t == "f2") return DType::F16;
  if (t == "i8") return DType::I64;
  if (t == "i4") return DType::I32;
  if (t == "i2") return DType::I16;
  if (t == "i1") return DType::I8;
  if (t == "u1") return DType::U8;
  if (t == "b1") return DType::BOOL;
  throw DataError(".npy data of type '" + descr.substr(0, 20) + "', which parla does not read");
}

}  // namespace

NpyArray parse_npy(const uint8_t* bytes, size_t size) {
  static const char kMagic[] = "\x93NUMPY";
  if (size < 10 || std::memcmp(bytes, kMagic, 6) != 0) throw DataError("not a .npy array (no \\x93NUMPY magic)");
  const int major = bytes[6];
  size_t header_len = 0, start = 0;
  if (major == 1) {
    header_len = bytes[8] | (size_t{bytes[9]} << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw DataError(".npy array truncated in its header");
    header_len = bytes[8] | (size_t{bytes[9]} << 8) | (size_t{bytes[10]} << 16) | (size_t{bytes[11]} << 24);
    start = 12;
  } else {
    throw DataError(".npy format version " + std::to_string(major) + " is not one parla reads (1-3)");
  }
  if (header_len > size - start) throw DataError(".npy header runs past the end of the array");
  const std::string header(reinterpret_cast<const char*>(bytes + start), header_len);
  NpyArray a;
  std::string descr;
  bool fortran = false;
  HeaderParser(header).parse(a, descr, fortran);
  if (fortran) throw DataError(".npy array in Fortran order, which parla does not read");
  a.dtype = npy_dtype(descr);
  a.data_offset = start + header_len;
  uint64_t bytes_needed = dtype_size(a.dtype);
  for (int64_t d : a.shape)
    if (__builtin_mul_overflow(bytes_needed, static_cast<uint64_t>(d), &bytes_needed))
      throw DataError(".npy shape overflows");
  if (bytes_needed != size - a.data_offset)
    throw DataError(".npy array holds " + std::to_string(size - a.data_offset) + " bytes of data, its shape needs " +
                    std::to_string(bytes_needed));
  a.data_bytes = static_cast<size_t>(bytes_needed);
  return a;
}

}  // namespace parla::formats
