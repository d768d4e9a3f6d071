// The only file that calls SentencePiece directly. It is built as its own module (parla_sentencepiece.so) and
// loaded with dlopen(RTLD_LOCAL | RTLD_DEEPBIND) by sentencepiece_library.cpp, behind this small C interface.
//
// Why: Debian's libsentencepiece embeds its own protobuf 3.14 while LibTorch (through libonnx_proto) uses the
// system libprotobuf 3.21. Executables put libprotobuf first to keep LibTorch alive (PLATFORM.md), which binds
// SentencePiece's protobuf calls to 3.21: loading any model then aborts ("compiled against version 3.14.0") or
// crashes. Loaded with RTLD_DEEPBIND, this module and its libsentencepiece resolve their own symbols first, so
// both protobuf copies live side by side. (The extension .cc keeps it out of the parla library's *.cpp glob.)
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <new>
#include <streambuf>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

namespace {
// SentencePiece logs to std::cerr. Under RTLD_DEEPBIND its std::cerr is libstdc++'s own object, which was never
// constructed (the executable's copy-relocated std::cerr is the one libstdc++ initialised), so the first log
// line would crash. When that is the case, it is constructed here over fd 2.
class StderrBuf : public std::streambuf {
 protected:
  int_type overflow(int_type c) override {
    if (c != traits_type::eof()) {
      char ch = static_cast<char>(c);
      if (::write(2, &ch, 1) != 1) return traits_type::eof();
    }
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    std::streamsize done = 0;
    while (done < n) {
      ssize_t w = ::write(2, s + done, static_cast<size_t>(n - done));
      if (w <= 0) break;
      done += w;
    }
    return done;
  }
};

struct RepairStderr {
  RepairStderr() {
    if (std::cerr.rdbuf() == nullptr && !std::cerr.tie()) {
      static StderrBuf buf;
      new (&std::cerr) std::ostream(&buf);
    }
  }
} repair_stderr;

char* copy_out(const std::string& s, size_t* len = nullptr) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (!p) return nullptr;
  std::memcpy(p, s.data(), s.size());
  p[s.size()] = '\0';
  if (len) *len = s.size();
  return p;
}
void set_error(char** error, const std::string& msg) {
  if (error) *error = copy_out(msg);
}

class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  VectorIterator(const char* const* s, const size_t* lens, size_t n) : s_(s), lens_(lens), n_(n) { load(); }
  bool done() const override { return i_ >= n_; }
  void Next() override {
    ++i_;
    load();
  }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return sentencepiece::util::Status(); }

 private:
  void load() {
    if (i_ < n_) value_.assign(s_[i_], lens_[i_]);
  }
  const char* const* s_;
  const size_t* lens_;
  size_t n_, i_ = 0;
  std::string value_;
};
}  // namespace

extern "C" {

// SentencePiece's Darts-clone throws on some malformed models (a zero-length piece): an error like any other, as
// no exception may cross this C interface.
void* pspm_load(const char* data, size_t n, int from_file, char** error) {
  auto* sp = new sentencepiece::SentencePieceProcessor();
  try {
    auto status = from_file ? sp->Load(std::string(data, n)) : sp->LoadFromSerializedProto(std::string(data, n));
    if (!status.ok()) {
      set_error(error, status.ToString());
      delete sp;
      return nullptr;
    }
  } catch (const std::exception& e) {
    set_error(error, e.what());
    delete sp;
    return nullptr;
  }
  return sp;
}

void pspm_free_model(void* m) { delete static_cast<sentencepiece::SentencePieceProcessor*>(m); }
void pspm_free(void* p) { std::free(p); }

int pspm_encode(const void* m, const char* text, size_t n, int** ids, size_t* count, char** error) {
  std::vector<int> out;
  auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(m)->Encode(std::string_view(text, n), &out);
  if (!status.ok()) {
    set_error(error, status.ToString());
    return 1;
  }
  *count = out.size();
  *ids = static_cast<int*>(std::malloc(sizeof(int) * (out.empty() ? 1 : out.size())));
  if (!out.empty()) std::memcpy(*ids, out.data(), sizeof(int) * out.size());
  return 0;
}

int pspm_decode(const void* m, const int* ids, size_t n, char** text, size_t* len, char** error) {
  std::string out;
  auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(m)->Decode(std::vector<int>(ids, ids + n), &out);
  if (!status.ok()) {
    set_error(error, status.ToString());
    return 1;
  }
  *text = copy_out(out, len);
  return 0;
}

// The pieces of a text as strings, one after another in `joined` with their lengths; a span the model cannot
// segment is its surface text (as spm_encode prints it), not "<unk>".
int pspm_encode_pieces(const void* m, const char* text, size_t n, char** joined, size_t** lens, size_t* count,
                       char** error) {
  std::vector<std::string> pieces;
  auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(m)->Encode(std::string_view(text, n), &pieces);
  if (!status.ok()) {
    set_error(error, status.ToString());
    return 1;
  }
  std::string all;
  *count = pieces.size();
  *lens = static_cast<size_t*>(std::malloc(sizeof(size_t) * (pieces.empty() ? 1 : pieces.size())));
  for (size_t i = 0; i < pieces.size(); ++i) {
    (*lens)[i] = pieces[i].size();
    all += pieces[i];
  }
  *joined = copy_out(all);
  return 0;
}

// SentencePiece's DecodePieces: a piece the model lacks is printed as it is (its surface), not dropped.
int pspm_decode_pieces(const void* m, const char* const* pieces, const size_t* lens, size_t n, char** text, size_t* len,
                       char** error) {
  std::vector<std::string> in;
  in.reserve(n);
  for (size_t i = 0; i < n; ++i) in.emplace_back(pieces[i], lens[i]);
  std::string out;
  auto status = static_cast<const sentencepiece::SentencePieceProcessor*>(m)->Decode(in, &out);
  if (!status.ok()) {
    set_error(error, status.ToString());
    return 1;
  }
  *text = copy_out(out, len);
  return 0;
}

int pspm_size(const void* m) { return static_cast<const sentencepiece::SentencePieceProcessor*>(m)->GetPieceSize(); }

int pspm_piece_to_id(const void* m, const char* piece, size_t n) {
  return static_cast<const sentencepiece::SentencePieceProcessor*>(m)->PieceToId(std::string_view(piece, n));
}

char* pspm_id_to_piece(const void* m, int id, size_t* len) {
  return copy_out(static_cast<const sentencepiece::SentencePieceProcessor*>(m)->IdToPiece(id), len);
}

float pspm_score(const void* m, int id) { return static_cast<const sentencepiece::SentencePieceProcessor*>(m)->GetScore(id); }

// which: 0 pad, 1 unk, 2 bos, 3 eos
int pspm_special_id(const void* m, int which) {
  auto* sp = static_cast<const sentencepiece::SentencePieceProcessor*>(m);
  switch (which) {
    case 0: return sp->pad_id();
    case 1: return sp->unk_id();
    case 2: return sp->bos_id();
    default: return sp->eos_id();
  }
}

char* pspm_proto(const void* m, size_t* len) {
  return copy_out(static_cast<const sentencepiece::SentencePieceProcessor*>(m)->serialized_model_proto(), len);
}

// kwargs: n_kwargs pairs (keys[i], values[i]); sentences: n pointers with lengths.
int pspm_train(const char* const* keys, const char* const* values, size_t n_kwargs, const char* const* sentences,
               const size_t* lens, size_t n, unsigned seed, char** proto, size_t* proto_len, char** error) {
  std::unordered_map<std::string, std::string> kw;
  for (size_t i = 0; i < n_kwargs; ++i) kw[keys[i]] = values[i];
  sentencepiece::SetRandomGeneratorSeed(seed);
  VectorIterator it(sentences, lens, n);
  std::string out;
  auto status = sentencepiece::SentencePieceTrainer::Train(kw, &it, &out);
  if (!status.ok()) {
    set_error(error, status.ToString());
    return 1;
  }
  *proto = copy_out(out, proto_len);
  return 0;
}

}  // extern "C"
