#pragma once
// Europarl's source release interleaves the debates with markup lines: `<CHAPTER ID=1>`,
// `<SPEAKER ID=2 NAME="Evans, Robert J" LANGUAGE="EN">` and `<P>` (Koehn, 2005, "Europarl: A Parallel Corpus
// for Statistical Machine Translation"). They are structure, not text, and must not reach training; the aligner
// of the source release (text/europarl_day_alignment.h) anchors on them.
#include <optional>
#include <string>
#include <string_view>

namespace parla::text {

// True when the whole line (surrounding whitespace aside) is one CHAPTER, SPEAKER or P tag. Text that merely
// contains such a tag, or other angle-bracketed text, is not markup.
bool is_europarl_markup(std::string_view line);

struct EuroparlTag {
  enum class Kind { kChapter, kSpeaker, kParagraph };
  Kind kind;
  std::string id;  // the ID attribute's value (quotes removed), "" when it has none
};

// The tag a markup line holds (the grammar of is_europarl_markup), or nothing for text.
std::optional<EuroparlTag> parse_europarl_tag(std::string_view line);

}  // namespace parla::text
