#pragma once
// sacreBLEU's BLEU tokenizers (sacrebleu/tokenizers/), reproduced rule for rule so that scores are comparable:
// 13a (mteval-v13a.pl, the WMT default), intl (mteval-v14 international), zh, char and none. Each takes one
// segment (already rstripped and, with -lc, lowercased) and returns its tokens joined by single spaces.
#include <string>
#include <string_view>

#include "core/config/choice.h"

namespace parla::metrics {

enum class TokenizerKind { k13a, kIntl, kChar, kZh, kNone };

// "13a", "intl", "char", "zh", "none"; throws UsageError naming the valid choices otherwise.
TokenizerKind parse_tokenizer(const std::string& name);
const char* tokenizer_name(TokenizerKind kind);

// Tokenizes `line` into `out` (cleared first).
void tokenize(TokenizerKind kind, std::string_view line, std::string& out);
std::string tokenize(TokenizerKind kind, std::string_view line);

// The individual tokenizers (tokenizer_13a.cpp, tokenizer_intl.cpp, tokenizer_zh.cpp, tokenizer_char.cpp).
void tokenize_13a(std::string_view line, std::string& out);
void tokenize_intl(std::string_view line, std::string& out);
void tokenize_zh(std::string_view line, std::string& out);
void tokenize_char(std::string_view line, std::string& out);
void tokenize_none(std::string_view line, std::string& out);

// The four regular expressions shared by 13a and zh (sacreBLEU's TokenizerRegexp, from mteval-v13a.pl), each a
// left-to-right scan with non-overlapping, consuming matches, followed by ' '.join(line.split()).
void apply_mteval_regexes(std::string_view line, std::string& out);

// ' '.join(line.split()): Python's whitespace split, re-joined with single spaces.
void normalize_whitespace(std::string_view line, std::string& out);

// tokenizer_zh's _is_chinese_char, including sacreBLEU's range-table bug (see tokenizer_zh.cpp).
bool is_zh_tokenizer_char(char32_t cp);

}  // namespace parla::metrics

PARLA_CHOICES(parla::metrics::TokenizerKind, {parla::metrics::TokenizerKind::k13a, "13a"},
              {parla::metrics::TokenizerKind::kIntl, "intl"}, {parla::metrics::TokenizerKind::kChar, "char"},
              {parla::metrics::TokenizerKind::kZh, "zh"}, {parla::metrics::TokenizerKind::kNone, "none"});
