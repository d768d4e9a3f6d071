// libFuzzer target over the source release's reading and aligning (parla-preprocess --europarl-release): the
// bytes of two day files (split at the first 0x00 byte; the first byte picks the languages) are decoded (BOM, CR
// LF, latin-1), read into chapters, speeches and paragraphs, split into sentences and aligned. It aborts (a
// finding) when an invariant breaks:
//   - decoded lines are valid UTF-8 and hold no '\n';
//   - the splitter loses no text: its sentences, joined by spaces, are the line with whitespace collapsed, and none
//     is empty or starts or ends with a space;
//   - every pair is non-empty on both sides, and the alignment's counts add up (pairs <= beads, sentences of
//     dropped blocks <= all sentences).
// Built with clang++ -fsanitize=fuzzer,address,undefined by fuzz/CMakeLists.txt; see fuzz/README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "text/europarl_day.h"
#include "text/europarl_day_alignment.h"
#include "text/legacy_encoding.h"
#include "text/sentence_splitter.h"
#include "text/unicode.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// ASCII whitespace as the splitter sees it: Python's str.isspace, which includes 0x1C-0x1F.
bool is_ascii_space(char c) { return static_cast<unsigned char>(c) < 0x80 && parla::text::is_space(static_cast<unsigned char>(c)); }

// The paragraph with runs of whitespace collapsed to one space and trimmed: what the splitter's sentences joined
// by spaces must give back (lines with non-ASCII whitespace are left out of the check, see below).
std::string collapse(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (is_ascii_space(c)) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

bool ascii_spaces_only(const std::string& s) {
  // Non-ASCII whitespace (U+00A0, U+2028, ...) is whitespace to the splitter but not to collapse(): skip the
  // lossless check for such lines rather than reimplement Unicode's spaces here.
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    if (parla::text::is_space(parla::text::decode_utf8(s, i))) return false;
  }
  return true;
}

const char* kLanguages[][2] = {{"en", "fr"}, {"de", "en"}, {"el", "it"}, {"fi", "sv"}, {"es", "xx"}};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& langs = kLanguages[data[0] % 5];
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t cut = bytes.find('\0');
  std::string_view sides[2] = {bytes.substr(0, cut), cut == std::string_view::npos ? "" : bytes.substr(cut + 1)};
  parla::text::EuroparlDay days[2];
  for (int s = 0; s < 2; ++s) {
    parla::text::TextDecoding report;
    auto lines = parla::text::decode_text_lines(sides[s], report);
    parla::text::SentenceSplitter splitter(langs[s]);
    for (const auto& line : lines) {
      check(parla::text::is_valid_utf8(line), "a decoded line is valid UTF-8");
      check(line.find('\n') == std::string::npos, "a decoded line has no newline");
      auto sentences = splitter.split(line);
      std::string joined;
      for (const auto& sentence : sentences) {
        check(!sentence.empty(), "no empty sentence");
        check(!is_ascii_space(sentence.front()) && !is_ascii_space(sentence.back()), "sentences are trimmed");
        joined += (joined.empty() ? "" : " ") + sentence;
      }
      if (ascii_spaces_only(line)) check(joined == collapse(line), "the splitter loses no text");
    }
    parla::text::read_europarl_day(lines, days[s]);
  }
  parla::text::EuroparlDayAligner aligner(langs[0], langs[1]);
  std::vector<parla::text::SentencePair> pairs;
  auto stats = aligner.align(days[0], days[1], pairs);
  uint64_t beads = 0;
  for (auto b : stats.beads) beads += b;
  check(stats.pairs == pairs.size() && stats.pairs <= beads, "pairs are counted");
  check(stats.dropped_src_sentences <= stats.src_sentences && stats.dropped_tgt_sentences <= stats.tgt_sentences,
        "dropped sentences are some of the sentences");
  for (const auto& p : pairs) check(!p.src.empty() && !p.tgt.empty(), "pairs have two sides");
  return 0;
}
