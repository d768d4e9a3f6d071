#include "text/sentence_splitter.h"

#include "text/nonbreaking_prefixes.h"
#include "text/unicode.h"

namespace parla::text {

namespace {

using GC = GeneralCategory;

// A byte that starts no well-formed UTF-8 sequence stands for itself as this non-character (category Cn): the
// splitter must take any bytes (fuzzed input, a mis-decoded corpus) without reading past the end.
constexpr char32_t kInvalidByte = 0x110000;

// The code point at s[i] and its byte length; an ill-formed sequence is one invalid byte of length 1.
char32_t decode_at(std::string_view s, std::size_t i, std::size_t& length) {
  auto b = static_cast<unsigned char>(s[i]);
  length = 1;
  if (b < 0x80) return b;
  std::size_t n = utf8_length(b);
  if (i + n > s.size() || !is_valid_utf8(s.substr(i, n))) return kInvalidByte;
  length = n;
  return decode_utf8(s, i);
}

// The last code point of non-empty `s` and where it starts, as decoding `s` forward would find it: a lead byte
// at most three bytes back whose well-formed sequence ends exactly at the end, or else the last byte alone.
char32_t decode_last(std::string_view s, std::size_t& start) {
  std::size_t i = s.size() - 1;
  if (static_cast<unsigned char>(s[i]) < 0x80) {
    start = i;
    return static_cast<unsigned char>(s[i]);
  }
  for (int back = 0; back < 3 && i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; ++back) --i;
  std::size_t length;
  char32_t cp = decode_at(s, i, length);
  if (cp != kInvalidByte && i + length == s.size()) {
    start = i;
    return cp;
  }
  start = s.size() - 1;
  return kInvalidByte;
}

// Byte length of the whitespace character at p[i], 0 when it is not whitespace. Only lead bytes C2 (U+0085,
// U+00A0), E1 (U+1680), E2 (U+2000..U+205F) and E3 (U+3000) start non-ASCII whitespace; other bytes are skipped
// one at a time, which agrees with forward decoding since no continuation byte starts a sequence.
std::size_t space_length(std::string_view p, std::size_t i) {
  auto b = static_cast<unsigned char>(p[i]);
  if (b < 0x80) return is_space(b) ? 1 : 0;
  if (b != 0xC2 && b != 0xE1 && b != 0xE2 && b != 0xE3) return 0;
  std::size_t length;
  return is_space(decode_at(p, i, length)) ? length : 0;
}

void tokenize(std::string_view p, std::vector<std::string_view>& tokens) {
  std::size_t start = std::string_view::npos;
  for (std::size_t i = 0; i < p.size();) {
    std::size_t space = space_length(p, i);
    if (space == 0) {
      if (start == std::string_view::npos) start = i;
      ++i;
      continue;
    }
    if (start != std::string_view::npos) tokens.push_back(p.substr(start, i - start));
    start = std::string_view::npos;
    i += space;
  }
  if (start != std::string_view::npos) tokens.push_back(p.substr(start));
}

bool is_letter(char32_t c) {
  if (c < 0x80) return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  auto g = general_category(c);
  return g == GC::Lu || g == GC::Ll || g == GC::Lt || g == GC::Lm || g == GC::Lo;
}

bool is_capital(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z';
  auto g = general_category(c);
  return g == GC::Lu || g == GC::Lt;
}

// What may close a sentence after its final punctuation: brackets, quotes of either side (German closes with
// “ and «), the ASCII quotes.
bool is_closing(char32_t c) {
  if (c < 0x80) return c == '"' || c == '\'' || c == ')' || c == ']' || c == '}';
  auto g = general_category(c);
  return g == GC::Pe || g == GC::Pf || g == GC::Pi;
}

// What may come before a sentence's first letter: brackets, quotes (German opens with » and „), ¿ ¡, dashes.
bool is_opening(char32_t c) {
  if (c < 0x80) return c == '"' || c == '\'' || c == '(' || c == '[' || c == '{' || c == '-' || c == '`';
  if (c == 0xBF || c == 0xA1) return true;  // ¿ ¡
  auto g = general_category(c);
  return g == GC::Ps || g == GC::Pi || g == GC::Pf || g == GC::Pd;
}

// A token of closing quotes or brackets only ("»", ")", "”"): French spacing puts it after the end punctuation
// of the sentence it closes. Initial quotes (Pi: «, “) alone open the next one instead.
bool is_lone_closer(std::string_view token) {
  for (std::size_t i = 0; i < token.size();) {
    std::size_t length;
    char32_t c = decode_at(token, i, length);
    bool closer = c < 0x80 ? (c == '"' || c == '\'' || c == ')' || c == ']' || c == '}')
                           : (general_category(c) == GC::Pe || general_category(c) == GC::Pf);
    if (!closer) return false;
    i += length;
  }
  return true;
}

// ? ! and their fullwidth, doubled and other-script forms (Greek, Arabic, Urdu, Armenian, Devanagari,
// Ethiopic, ideographic full stop): always an end before a sentence start.
bool is_strong_mark(char32_t c) {
  switch (c) {
    case '?': case '!': case 0x037E: case 0x0589: case 0x061F: case 0x06D4: case 0x0964: case 0x0965:
    case 0x1362: case 0x203C: case 0x203D: case 0x2047: case 0x2048: case 0x2049: case 0x3002: case 0xFF01:
    case 0xFF1F: case 0xFF61:
      return true;
    default:
      return false;
  }
}

// Cheap filter on the last byte: most tokens end in a letter, a digit or a comma and end nothing.
bool may_end(std::string_view token) {
  auto b = static_cast<unsigned char>(token.back());
  return b >= 0x80 || b == '.' || b == '?' || b == '!' || b == ';' || b == '"' || b == '\'' || b == ')' ||
         b == ']' || b == '}';
}

std::string_view strip_openers(std::string_view word) {
  std::size_t i = 0;
  while (i < word.size()) {
    std::size_t length;
    if (!is_opening(decode_at(word, i, length))) break;
    i += length;
  }
  return word.substr(i);
}

std::string_view strip_trailing_punctuation(std::string_view word) {
  while (!word.empty()) {
    std::size_t start;
    if (!is_punctuation(decode_last(word, start))) break;
    word = word.substr(0, start);
  }
  return word;
}

// "J" of "J. Smith": one capital letter.
bool is_initial(std::string_view word) {
  if (word.empty()) return false;
  std::size_t length;
  char32_t c = decode_at(word, 0, length);
  return length == word.size() && is_capital(c);
}

// "U.S.A", "e.g", "z.B", "c.-à-d": internal periods, a letter, and parts of at most four characters; a URL such
// as "europa.eu.int" has longer parts and may end a sentence.
bool is_dotted_abbreviation(std::string_view word) {
  bool period = false, letter = false;
  int part = 0;
  for (std::size_t i = 0; i < word.size();) {
    std::size_t length;
    char32_t c = decode_at(word, i, length);
    i += length;
    if (c == '.') {
      period = true;
      part = 0;
      continue;
    }
    if (++part > 4) return false;
    letter = letter || is_letter(c);
  }
  return period && letter;
}

// Whether a token has a letter or a digit: a sentence needs one, so that a stray "." or "- ..." at the start of a
// paragraph stays with the text after it (Europarl's ". (FR) The European Union is ...").
bool has_word_character(std::string_view token) {
  for (std::size_t i = 0; i < token.size();) {
    auto b = static_cast<unsigned char>(token[i]);
    if (b < 0x80) {
      if ((b >= '0' && b <= '9') || (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z')) return true;
      ++i;
      continue;
    }
    std::size_t length;
    char32_t c = decode_at(token, i, length);
    if (is_letter(c) || is_number(c)) return true;
    i += length;
  }
  return false;
}

// "art" of French "l'art." and Italian "dell'art.", "On" of "l'On.": the word after an elided article.
std::string_view after_elision(std::string_view word) {
  std::size_t ascii = word.rfind('\''), typographic = word.rfind("\xE2\x80\x99");  // ' and U+2019
  if (ascii != std::string_view::npos) return word.substr(ascii + 1);
  if (typographic != std::string_view::npos) return word.substr(typographic + 3);
  return {};
}

bool is_listed(const std::unordered_set<std::string_view>& list, std::string_view word) {
  if (list.count(word)) return true;
  std::string_view after = after_elision(word);
  return !after.empty() && list.count(after);
}

bool is_short_number(std::string_view word) {
  if (word.empty() || word.size() > 2) return false;
  for (char c : word)
    if (c < '0' || c > '9') return false;
  return true;
}

// How the text from token i on begins, after opening quotes, brackets and dashes (which may be tokens of their
// own, as in Europarl's "- Mr President"; three tokens at most, to stay linear).
enum class Start { kOther, kCapital, kDigit };
Start next_start(const std::vector<std::string_view>& tokens, std::size_t i) {
  for (std::size_t t = i; t < tokens.size() && t < i + 3; ++t) {
    std::string_view token = tokens[t];
    for (std::size_t p = 0; p < token.size();) {
      std::size_t length;
      char32_t c = decode_at(token, p, length);
      if (!is_opening(c)) {
        if (c < 0x80) return c >= 'A' && c <= 'Z' ? Start::kCapital
                             : c >= '0' && c <= '9' ? Start::kDigit
                                                    : Start::kOther;
        auto g = general_category(c);
        // Caseless scripts (Lo: Arabic, Hebrew, CJK, ...) cannot mark a continuation by lowercase.
        if (g == GC::Lu || g == GC::Lt || g == GC::Lo) return Start::kCapital;
        return g == GC::Nd ? Start::kDigit : Start::kOther;
      }
      p += length;
    }
  }
  return Start::kOther;
}

void add_words(std::string_view list, std::unordered_set<std::string_view>& set) {
  std::size_t i = 0;
  while (i < list.size()) {
    std::size_t end = list.find(' ', i);
    if (end == std::string_view::npos) end = list.size();
    if (end > i) set.insert(list.substr(i, end - i));
    i = end + 1;
  }
}

}  // namespace

SentenceSplitter::SentenceSplitter(std::string_view lang) {
  const NonbreakingPrefixes* lists = nonbreaking_prefixes(lang);
  if (lists == nullptr) lists = &generic_nonbreaking_prefixes();
  add_words(lists->always, always_);
  add_words(lists->before_number, before_number_);
  add_words(lists->months, months_);
  add_words(lists->before_ordinal, before_ordinal_);
  // Greek writes its question mark as ";" (U+037E, which NFC turns into U+003B); its semicolon is "·".
  greek_question_ = lang == "el";
}

bool SentenceSplitter::has_language(std::string_view lang) { return nonbreaking_prefixes(lang) != nullptr; }

SentenceSplitter::Ending SentenceSplitter::ending(std::string_view token) const {
  std::size_t end = token.size(), start;
  while (end > 0 && is_closing(decode_last(token.substr(0, end), start))) end = start;
  std::size_t marks_end = end;
  int periods = 0;
  bool strong = false, ellipsis = false;
  while (end > 0) {
    char32_t c = decode_last(token.substr(0, end), start);
    if (c == '.' || c == 0xFF0E)
      ++periods;
    else if (c == 0x2026)
      ellipsis = true;
    else if (is_strong_mark(c) || (c == ';' && greek_question_))
      strong = true;
    else
      break;
    end = start;
  }
  if (end == marks_end) return {};
  Mark mark = strong ? Mark::kStrong : (ellipsis || periods > 1) ? Mark::kEllipsis : Mark::kPeriod;
  return {mark, token.substr(0, end)};
}

bool SentenceSplitter::ends_sentence(const std::vector<std::string_view>& tokens, std::size_t k) const {
  if (k + 1 >= tokens.size() || !may_end(tokens[k])) return false;
  if (is_lone_closer(tokens[k + 1])) return false;  // the closer still belongs to this sentence
  // The end punctuation is in this token, or before the lone closers it ends with ("Non ! »").
  std::size_t j = k;
  for (int back = 0; back < 3 && j > 0 && is_lone_closer(tokens[j]); ++back) --j;
  Ending end = ending(tokens[j]);
  if (end.mark == Mark::kNone) return false;
  Start next = next_start(tokens, k + 1);
  if (next == Start::kOther) return false;  // Koehn's main rule: lowercase continues the sentence
  switch (end.mark) {
    case Mark::kStrong:
      return true;
    case Mark::kEllipsis:  // "... 5 million" or "… and" go on; "... The" starts anew
      return next == Start::kCapital;
    default:
      return period_ends_sentence(tokens, j, end.word, next == Start::kDigit);
  }
}

bool SentenceSplitter::period_ends_sentence(const std::vector<std::string_view>& tokens, std::size_t k,
                                            std::string_view word, bool digit_follows) const {
  word = strip_openers(word);
  if (word.empty()) return true;  // a spaced period: "word . Next"
  if (is_listed(always_, word) || is_initial(word) || is_dotted_abbreviation(word)) return false;
  if (digit_follows && is_listed(before_number_, word)) return false;
  return !is_ordinal(tokens, k, word);
}

bool SentenceSplitter::is_ordinal(const std::vector<std::string_view>& tokens, std::size_t k,
                                  std::string_view number) const {
  if (!is_short_number(number) || (months_.empty() && before_ordinal_.empty())) return false;
  if (k + 1 < tokens.size() && months_.count(strip_trailing_punctuation(strip_openers(tokens[k + 1])))) return true;
  return k > 0 && before_ordinal_.count(strip_openers(tokens[k - 1]));
}

void SentenceSplitter::split(std::string_view paragraph, std::vector<std::string>& out) const {
  std::vector<std::string_view> tokens;
  tokenize(paragraph, tokens);
  std::string sentence;
  bool has_word = false;
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    if (!sentence.empty()) sentence += ' ';
    sentence += tokens[k];
    has_word = has_word || has_word_character(tokens[k]);
    if (k + 1 == tokens.size() || (has_word && ends_sentence(tokens, k))) {
      out.push_back(std::move(sentence));
      sentence.clear();
      has_word = false;
    }
  }
}

std::vector<std::string> SentenceSplitter::split(std::string_view paragraph) const {
  std::vector<std::string> out;
  split(paragraph, out);
  return out;
}

}  // namespace parla::text
