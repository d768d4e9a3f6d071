#include "text/europarl_markup.h"

namespace parla::text {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// The value of attribute `key` in `attrs` (` ID=1 NAME="A B"`): unquoted values end at whitespace, quoted ones
// at the closing quote (or the end, for a tag that never closes its quote).
std::string attribute(std::string_view attrs, std::string_view key) {
  for (size_t i = 0; i < attrs.size();) {
    while (i < attrs.size() && is_space(attrs[i])) ++i;
    size_t name_begin = i;
    while (i < attrs.size() && attrs[i] != '=' && !is_space(attrs[i])) ++i;
    std::string_view name = attrs.substr(name_begin, i - name_begin);
    if (i >= attrs.size() || attrs[i] != '=') continue;  // a bare word: no value
    ++i;
    size_t value_begin = i, value_end;
    if (i < attrs.size() && attrs[i] == '"') {
      value_begin = ++i;
      while (i < attrs.size() && attrs[i] != '"') ++i;
      value_end = i;
      if (i < attrs.size()) ++i;
    } else {
      while (i < attrs.size() && !is_space(attrs[i])) ++i;
      value_end = i;
    }
    if (name == key) return std::string(attrs.substr(value_begin, value_end - value_begin));
  }
  return {};
}

}  // namespace

std::optional<EuroparlTag> parse_europarl_tag(std::string_view line) {
  line = trim(line);
  if (line.size() < 3 || line.front() != '<' || line.back() != '>') return std::nullopt;
  std::string_view inner = line.substr(1, line.size() - 2);
  // The tag name ends at the first space (attributes follow) or at the end.
  size_t name_end = 0;
  while (name_end < inner.size() && !is_space(inner[name_end])) ++name_end;
  std::string_view name = inner.substr(0, name_end);
  EuroparlTag::Kind kind;
  if (name == "CHAPTER")
    kind = EuroparlTag::Kind::kChapter;
  else if (name == "SPEAKER")
    kind = EuroparlTag::Kind::kSpeaker;
  else if (name == "P")
    kind = EuroparlTag::Kind::kParagraph;
  else
    return std::nullopt;
  // Attributes (ID=1 NAME="...") never contain '<' or '>'; a '>' inside means text after a tag.
  std::string_view attrs = inner.substr(name_end);
  if (attrs.find_first_of("<>") != std::string_view::npos) return std::nullopt;
  return EuroparlTag{kind, attribute(attrs, "ID")};
}

bool is_europarl_markup(std::string_view line) { return parse_europarl_tag(line).has_value(); }

}  // namespace parla::text
