#pragma once
// Rule-based sentence splitting of one paragraph, in the manner of the splitter Koehn (2005, "Europarl: A
// Parallel Corpus for Statistical Machine Translation") used to build Europarl, which Moses users know. The rules
// and the per-language abbreviation lists (text/nonbreaking_prefixes.h) were written for parla. Torch-free.
//
// Text is split only where it has whitespace (Python's str.isspace, so also U+00A0; Chinese or Japanese written without
// a space after 。 stays one sentence). A boundary follows a token that ends in sentence-final punctuation (. ? ! … and
// their fullwidth and other-script forms; Greek's ";" in Greek), possibly followed by closing quotes or brackets, when
// the next token starts a sentence: a capital (Lu/Lt) or a caseless letter (Lo), possibly after opening quotes,
// brackets, ¿ ¡ or dashes (also as tokens of their own: "- Mr", "« Bonjour"), or a digit after ? ! or a plain period.
// Spaced punctuation is the same end: French "observations ? Non" and "« Non ! » Puis" (a token of closing quotes only
// stays with the sentence it closes). A period does not end a sentence after:
//   - a word in the language's always-list (with leading brackets and quotes removed, and also tried without an
//     elided article: Italian "l'On."): "Mr.", "MM.", "z.";
//   - a single capital letter, so initials stay: "J. Smith", "George W. Bush";
//   - an abbreviation with internal periods and short parts: "U.S.A.", "e.g.", "z.B." (URLs like
//     "europa.eu.int." do end sentences);
//   - a word in the before-number list when a digit follows: "No. 5", "Art. 12";
//   - in German, a number of one or two digits that is an ordinal: followed by a month name, or preceded by an
//     article or preposition ("am 3. Oktober", "das 21. Jahrhundert"); German capitalises nouns, so the capital
//     after the period says nothing, while "in Artikel 12. Wir" still ends. Other languages that write ordinals
//     with a period (da, fi, sv, nl, ...) write months and nouns in lowercase, which the next rule covers;
// and no end punctuation ends a sentence when the next word starts in lowercase, with a symbol or other
// punctuation ("... and so on", "etc. ;"). Two or more periods or "…" end a sentence only before a capital. A
// sentence needs a letter or digit, so stray punctuation at a paragraph's start stays with the text after it.
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace parla::text {

class SentenceSplitter {
 public:
  // lang: an ISO 639-1 code. Europarl's eleven languages have their own prefix lists: en fr de it es nl pt da sv
  // fi el. Any other code uses a small generic list (callers warn about it); has_language tells which.
  explicit SentenceSplitter(std::string_view lang);
  static bool has_language(std::string_view lang);

  // Splits one paragraph (one line of text, no newline) into sentences, appended to `out`. Nothing is lost or
  // reordered: every whitespace run becomes one ASCII space inside a sentence, and sentences carry none at their
  // ends, so joining them with single spaces gives the paragraph with its whitespace collapsed and trimmed. Empty
  // sentences are never returned. Any bytes are accepted: invalid UTF-8 counts as non-letter characters. Linear.
  void split(std::string_view paragraph, std::vector<std::string>& out) const;
  std::vector<std::string> split(std::string_view paragraph) const;

 private:
  enum class Mark { kNone, kPeriod, kEllipsis, kStrong };
  struct Ending {
    Mark mark = Mark::kNone;
    std::string_view word;  // the token before its final punctuation run: "Mr" of "(Mr.", "" of a lone "?"
  };

  bool ends_sentence(const std::vector<std::string_view>& tokens, std::size_t k) const;
  Ending ending(std::string_view token) const;
  bool period_ends_sentence(const std::vector<std::string_view>& tokens, std::size_t k, std::string_view word,
                            bool digit_follows) const;
  bool is_ordinal(const std::vector<std::string_view>& tokens, std::size_t k, std::string_view number) const;

  std::unordered_set<std::string_view> always_;         // views into static lists
  std::unordered_set<std::string_view> before_number_;
  std::unordered_set<std::string_view> months_;          // German ordinals: "am 3. Oktober"
  std::unordered_set<std::string_view> before_ordinal_;
  bool greek_question_ = false;  // Greek: ";" is the question mark
};

}  // namespace parla::text
