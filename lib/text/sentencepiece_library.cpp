#include "text/sentencepiece_library.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"

#ifndef PARLA_SENTENCEPIECE_MODULE
#define PARLA_SENTENCEPIECE_MODULE ""
#endif

namespace parla::text::detail {

namespace {
std::string executable_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

template <class F>
void resolve(void* handle, const char* name, F& fn, std::string& missing) {
  fn = reinterpret_cast<F>(dlsym(handle, name));
  if (!fn) missing += std::string(missing.empty() ? "" : ", ") + name;
}
}  // namespace

const SentencePieceLibrary& sentencepiece_library() {
  static const SentencePieceLibrary lib = [] {
    std::vector<std::string> candidates;
    if (const char* env = std::getenv("PARLA_SENTENCEPIECE_MODULE")) candidates.push_back(env);
    if (*PARLA_SENTENCEPIECE_MODULE) candidates.push_back(PARLA_SENTENCEPIECE_MODULE);
    std::string dir = executable_dir();
    candidates.push_back(dir + "/../lib/parla_sentencepiece.so");
    candidates.push_back(dir + "/parla_sentencepiece.so");
    void* handle = nullptr;
    std::string tried;
    for (const auto& c : candidates) {
      // RTLD_DEEPBIND: the module and its libsentencepiece bind to their own protobuf, not LibTorch's.
      handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
      if (handle) break;
      const char* err = dlerror();
      tried += "\n  " + c + ": " + (err ? err : "?");
    }
    if (!handle) throw DataError("cannot load the SentencePiece module parla_sentencepiece.so; tried:" + tried);
    SentencePieceLibrary l{};
    std::string missing;
    resolve(handle, "pspm_load", l.load, missing);
    resolve(handle, "pspm_free_model", l.free_model, missing);
    resolve(handle, "pspm_free", l.free, missing);
    resolve(handle, "pspm_encode", l.encode, missing);
    resolve(handle, "pspm_encode_pieces", l.encode_pieces, missing);
    resolve(handle, "pspm_decode", l.decode, missing);
    resolve(handle, "pspm_decode_pieces", l.decode_pieces, missing);
    resolve(handle, "pspm_size", l.size, missing);
    resolve(handle, "pspm_piece_to_id", l.piece_to_id, missing);
    resolve(handle, "pspm_id_to_piece", l.id_to_piece, missing);
    resolve(handle, "pspm_score", l.score, missing);
    resolve(handle, "pspm_special_id", l.special_id, missing);
    resolve(handle, "pspm_proto", l.proto, missing);
    resolve(handle, "pspm_train", l.train, missing);
    if (!missing.empty()) throw DataError("the SentencePiece module lacks: " + missing);
    return l;
  }();
  return lib;
}

}  // namespace parla::text::detail
