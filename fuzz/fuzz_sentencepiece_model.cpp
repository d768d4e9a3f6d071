// libFuzzer target over SentencePiece models as parla loads them (text/sentencepiece_vocab.cpp): the bytes of a
// MarianMT/HF folder's source.spm, or of a checkpoint's vocabulary, first go through check_sentencepiece_model;
// whatever it accepts is loaded by SentencePiece and used to encode and decode a probe of many characters. A crash
// or a sanitizer report there is a finding (SentencePiece trusts its proto: issue 59 crashed it with corrupt
// charsmaps and a 1 MB piece).
//
// The first byte picks the mode. Even: the rest is a whole model. Odd: the rest is a list of edits (3-byte
// little-endian offset, 1 byte value) applied to the precompiled charsmap of a model trained with nmt_nfkc at
// start-up, since whole-model mutations of a 240 KB model rarely touch the trie's reachable units. Built with
// clang++ by fuzz/CMakeLists.txt; seeds in fuzz/corpus_sentencepiece/.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "text/sentencepiece_model_check.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

std::string g_model;          // trained with nmt_nfkc
size_t g_charsmap_at = 0;     // where its precompiled charsmap's bytes start in g_model
size_t g_charsmap_size = 0;
std::string g_probe;          // text to encode with every accepted model

uint64_t varint(const std::string& b, size_t& i) {
  uint64_t v = 0;
  for (int s = 0; i < b.size() && s < 64; s += 7) {
    const auto c = static_cast<unsigned char>(b[i++]);
    v |= static_cast<uint64_t>(c & 0x7f) << s;
    if (c < 0x80) break;
  }
  return v;
}

// The offset and size of field `number` (length-delimited) inside b[from, to).
bool find_field(const std::string& b, size_t from, size_t to, uint32_t number, size_t& at, size_t& size) {
  for (size_t i = from; i < to;) {
    const uint64_t key = varint(b, i);
    switch (key & 7) {
      case 0: varint(b, i); break;
      case 1: i += 8; break;
      case 5: i += 4; break;
      case 2: {
        const size_t n = varint(b, i);
        if (key >> 3 == number) {
          at = i;
          size = n;
          return true;
        }
        i += n;
        break;
      }
      default: return false;
    }
  }
  return false;
}

void train_model() {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = tmp ? tmp : "/tmp";
  const std::string corpus = dir + "/parla_fuzz_spm_model_corpus.txt", prefix = dir + "/parla_fuzz_spm_model";
  {
    std::ofstream out(corpus);
    const char* words[] = {"the", "caf\xC3\xA9", "\xEF\xBC\xA1\xEF\xBC\xA2", "\xEF\xAC\x81ne", "Stra\xC3\x9F" "e",
                           "\xE2\x91\xA0", "vote", "\xE3\x8D\xBB", "\xE4\xB8\xAD\xE6\x96\x87", "1234"};
    for (int i = 0; i < 300; ++i) {
      for (int j = 0; j < 8; ++j) out << words[(i * 7 + j * 3 + i / 5) % 10] << ' ';
      out << '\n';
    }
  }
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus + " --model_prefix=" + prefix +
      " --vocab_size=40 --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 --character_coverage=1.0 "
      "--normalization_rule_name=nmt_nfkc --minloglevel=2");
  check(status.ok(), "training the fuzz model");
  std::ifstream in(prefix + ".model", std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  g_model = ss.str();
  size_t spec_at = 0, spec_size = 0;
  check(find_field(g_model, 0, g_model.size(), 3, spec_at, spec_size), "the model has a normalizer spec");
  check(find_field(g_model, spec_at, spec_at + spec_size, 2, g_charsmap_at, g_charsmap_size) && g_charsmap_size > 4,
        "the model has a precompiled charsmap");
  // Every byte, and characters from the blocks NFKC rewrites most (Latin-1, letterlike, CJK compatibility,
  // fullwidth forms), some of them twice in a row.
  for (int b = 1; b < 256; ++b) g_probe += static_cast<char>(b);
  auto utf8 = [](uint32_t c) {
    std::string s;
    if (c < 0x800) return s + static_cast<char>(0xc0 | c >> 6) + static_cast<char>(0x80 | (c & 0x3f));
    return s + static_cast<char>(0xe0 | c >> 12) + static_cast<char>(0x80 | (c >> 6 & 0x3f)) +
           static_cast<char>(0x80 | (c & 0x3f));
  };
  for (uint32_t lo : {0xa0u, 0x2100u, 0x2460u, 0x3300u, 0xfb00u, 0xff00u})
    for (uint32_t c = lo; c < lo + 0x100; ++c) g_probe += utf8(c) + (c % 3 ? "" : utf8(c) + " ");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  train_model();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string model;
  if (data[0] % 2 == 0) {
    model.assign(reinterpret_cast<const char*>(data) + 1, size - 1);
  } else {
    model = g_model;
    for (size_t i = 1; i + 4 <= size; i += 4) {
      const size_t at = (data[i] | data[i + 1] << 8 | data[i + 2] << 16) % g_charsmap_size;
      model[g_charsmap_at + at] = static_cast<char>(data[i + 3]);
    }
  }
  try {
    parla::text::check_sentencepiece_model(model, "fuzz input");
  } catch (const parla::DataError&) {
    return 0;
  }
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok()) return 0;
  std::vector<int> ids;
  if (!sp.Encode(g_probe, &ids).ok()) return 0;
  for (int id : ids) check(id >= 0 && id < sp.GetPieceSize(), "encoded ids are pieces");
  std::string text;
  sp.Decode(ids, &text);
  return 0;
}
