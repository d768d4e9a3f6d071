#include "metrics/tokenizer.h"

#include <vector>

#include "core/error.h"
#include "text/unicode.h"

namespace parla::metrics {

TokenizerKind parse_tokenizer(const std::string& name) {
  TokenizerKind kind{};
  if (!config::parse_choice(name, kind))
    throw UsageError("unknown tokenizer '" + name + "' (choose from " + config::names_joined<TokenizerKind>() + ")");
  return kind;
}

const char* tokenizer_name(TokenizerKind kind) { return config::name_of(kind); }

void tokenize(TokenizerKind kind, std::string_view line, std::string& out) {
  switch (kind) {
    case TokenizerKind::k13a: tokenize_13a(line, out); return;
    case TokenizerKind::kIntl: tokenize_intl(line, out); return;
    case TokenizerKind::kChar: tokenize_char(line, out); return;
    case TokenizerKind::kZh: tokenize_zh(line, out); return;
    case TokenizerKind::kNone: tokenize_none(line, out); return;
  }
}

std::string tokenize(TokenizerKind kind, std::string_view line) {
  std::string out;
  tokenize(kind, line, out);
  return out;
}

void normalize_whitespace(std::string_view line, std::string& out) {
  thread_local std::vector<std::string_view> tokens;
  tokens.clear();
  text::split_whitespace(line, tokens);
  out.clear();
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (i) out += ' ';
    out.append(tokens[i]);
  }
}

// sacreBLEU's TokenizerNone returns the line unchanged; BLEU then splits it on whitespace, so normalising the
// whitespace here gives the same tokens.
void tokenize_none(std::string_view line, std::string& out) { normalize_whitespace(line, out); }

}  // namespace parla::metrics
