#pragma once
// Per-language abbreviation lists for the sentence splitter (text/sentence_splitter.h): the words after which a
// period does not end a sentence, as in Koehn's (2005) Europarl splitter. The lists were written for parla from
// knowledge of each language's usage, not copied from Moses' nonbreaking_prefix files. Torch-free.
#include <string_view>

namespace parla::text {

// Each field is one string of space-separated entries (a list a linguist can read and extend in place). Entries
// are case-sensitive and carry no final period; abbreviations with internal periods ("e.g", "z.B") need no entry,
// the splitter treats those as a class.
struct NonbreakingPrefixes {
  // A period after one of these never ends a sentence: titles before names ("Mr. Smith"), "vs", "cf".
  std::string_view always;
  // A period after one of these ends no sentence when a number follows ("No. 5", "Art. 12"), but may end one
  // otherwise ("... answered no. The").
  std::string_view before_number;
  // Ordinals written with a period ("am 3. Oktober"), where capitals after them say nothing (German nouns): a
  // period after a number of one or two digits is an ordinal's when a month follows or one of `before_ordinal`
  // (articles, prepositions) precedes. Empty where lowercase months and nouns already keep them together.
  std::string_view months;
  std::string_view before_ordinal;
};

// The lists of an ISO 639-1 code (en fr de it es nl pt da sv fi el), or nullptr for a language without its own.
const NonbreakingPrefixes* nonbreaking_prefixes(std::string_view lang);
// A small list for other languages: English and Latin abbreviations seen in many languages' texts.
const NonbreakingPrefixes& generic_nonbreaking_prefixes();

}  // namespace parla::text
