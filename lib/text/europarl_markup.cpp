#include "text/europarl_markup.h"

namespace parla::text {

namespace {
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }
}  // namespace

bool is_europarl_markup(std::string_view line) {
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  if (line.size() < 3 || line.front() != '<' || line.back() != '>') return false;
  std::string_view inner = line.substr(1, line.size() - 2);
  // The tag name ends at the first space (attributes follow) or at the end.
  size_t name_end = 0;
  while (name_end < inner.size() && !is_space(inner[name_end])) ++name_end;
  std::string_view name = inner.substr(0, name_end);
  if (name != "CHAPTER" && name != "SPEAKER" && name != "P") return false;
  // Attributes (ID=1 NAME="...") never contain '<' or '>'; a '>' inside means text after a tag.
  std::string_view attrs = inner.substr(name_end);
  return attrs.find_first_of("<>") == std::string_view::npos;
}

}  // namespace parla::text
