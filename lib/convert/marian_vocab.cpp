// vocab.yml read line by line: yaml-cpp's node tree cost about 60 times the file (a 250 MB vocab.yml, under its
// 256 MiB cap, reached 7.4 GB), and Marian's vocabularies are one flat mapping. Marian writes them with yaml-cpp's
// emitter (plain or double-quoted keys), other tools with PyYAML (single- or double-quoted); both are read here, and
// anything else is refused naming the line rather than guessed at.
#include "convert/marian_import.h"

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "core/error.h"
#include "formats/bounded_file.h"

namespace parla::convert {
namespace {

class LineError {
 public:
  explicit LineError(std::string why) : why(std::move(why)) {}
  std::string why;
};

void append_utf8(std::string& out, uint32_t c) {
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) throw LineError("an escape names no Unicode character");
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// YAML's double-quoted scalar on one line, from just after the opening quote; `i` ends after the closing one.
std::string double_quoted(std::string_view line, size_t& i) {
  std::string out;
  while (i < line.size() && line[i] != '"') {
    if (line[i] != '\\') {
      out += line[i++];
      continue;
    }
    if (++i >= line.size()) break;
    const char e = line[i++];
    int hex = 0;
    switch (e) {
      case '0': out += '\0'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 't': case '\t': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'v': out += '\v'; break;
      case 'f': out += '\f'; break;
      case 'r': out += '\r'; break;
      case 'e': out += '\x1b'; break;
      case ' ': case '"': case '/': case '\\': out += e; break;
      // yaml-cpp (and so Marian) reads these two as the code's single byte, not as UTF-8; read as Marian does.
      case 'N': out += '\x85'; break;
      case '_': out += '\xA0'; break;
      case 'L': append_utf8(out, 0x2028); break;
      case 'P': append_utf8(out, 0x2029); break;
      case 'x': hex = 2; break;
      case 'u': hex = 4; break;
      case 'U': hex = 8; break;
      default: throw LineError(std::string("unknown escape \\") + e);
    }
    if (hex) {
      uint32_t c = 0;
      for (int k = 0; k < hex; ++k, ++i) {
        const char h = i < line.size() ? line[i] : ' ';
        const int v = h >= '0' && h <= '9'   ? h - '0'
                      : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                             : -1;
        if (v < 0) throw LineError("a \\x, \\u or \\U escape without its hex digits");
        c = c * 16 + static_cast<uint32_t>(v);
      }
      append_utf8(out, c);
    }
  }
  if (i >= line.size()) throw LineError("a double-quoted piece does not end on its line");
  ++i;
  return out;
}

// YAML's single-quoted scalar on one line ('' is a quote).
std::string single_quoted(std::string_view line, size_t& i) {
  std::string out;
  for (;;) {
    if (i >= line.size()) throw LineError("a single-quoted piece does not end on its line");
    if (line[i] == '\'') {
      if (i + 1 < line.size() && line[i + 1] == '\'') {
        out += '\'';
        i += 2;
        continue;
      }
      ++i;
      return out;
    }
    out += line[i++];
  }
}

bool blank(char c) { return c == ' ' || c == '\t'; }

// A plain key: up to the first ": " (a plain scalar cannot hold one), without the indicators that would make the
// line something other than a plain scalar.
std::string plain(std::string_view line, size_t& i) {
  const char c = line[0];
  const bool indicator_alone = (c == '-' || c == '?' || c == ':') && (line.size() == 1 || blank(line[1]));
  if (std::string_view("[]{},#&*!|>%@`").find(c) != std::string_view::npos || indicator_alone ||
      ((line.substr(0, 3) == "---" || line.substr(0, 3) == "...") && (line.size() == 3 || blank(line[3]))))
    throw LineError("not a 'piece: id' entry");
  size_t colon = 0;
  for (;;) {
    colon = line.find(':', colon + 1);
    if (colon == std::string_view::npos) throw LineError("not a 'piece: id' entry");
    if (colon + 1 == line.size() || blank(line[colon + 1])) break;
  }
  size_t end = colon;
  while (end > 0 && blank(line[end - 1])) --end;
  const std::string_view key = line.substr(0, end);
  if (key.find(" #") != std::string_view::npos || key.find("\t#") != std::string_view::npos)
    throw LineError("not a 'piece: id' entry");
  i = colon;
  // yaml-cpp reads these plain keys as null, and as<std::string> gives "null" (what Marian itself would read).
  if (key == "~" || key == "null" || key == "Null" || key == "NULL") return "null";
  return std::string(key);
}

// One "piece: id" line: the piece and its id.
std::pair<std::string, int64_t> entry(std::string_view line) {
  size_t i = 0;
  std::string piece;
  if (line[0] == '"') {
    i = 1;
    piece = double_quoted(line, i);
  } else if (line[0] == '\'') {
    i = 1;
    piece = single_quoted(line, i);
  } else {
    piece = plain(line, i);
  }
  while (i < line.size() && blank(line[i])) ++i;
  if (i >= line.size() || line[i] != ':' || (i + 1 < line.size() && !blank(line[i + 1])))
    throw LineError("no ': ' after the piece");
  ++i;
  while (i < line.size() && blank(line[i])) ++i;
  const size_t digits = i;
  int64_t id = 0;
  for (; i < line.size() && line[i] >= '0' && line[i] <= '9'; ++i) {
    if (id > (INT64_MAX - 9) / 10) throw LineError("the id is out of range");
    id = id * 10 + (line[i] - '0');
  }
  if (i == digits) throw LineError("the id is not a non-negative decimal integer");
  while (i < line.size() && blank(line[i])) ++i;
  if (i < line.size() && line[i] != '#') throw LineError("the id is not a non-negative decimal integer");
  return {std::move(piece), id};
}

}  // namespace

std::vector<std::string> read_marian_vocab(const std::string& path) {
  // The pieces in file order and their ids; the pieces are then put in id order in place, so the peak is the file
  // plus about 40 bytes a piece.
  std::vector<std::string> pieces;
  std::vector<int64_t> ids;
  {
    const std::string text = formats::read_bounded_file(path, 256u << 20);
    const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
    pieces.reserve(lines);
    ids.reserve(lines);
    std::string_view rest(text);
    if (rest.substr(0, 3) == "\xEF\xBB\xBF") rest.remove_prefix(3);
    for (size_t number = 1; !rest.empty(); ++number) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      size_t first = 0;
      while (first < line.size() && blank(line[first])) ++first;
      if (first == line.size() || line[first] == '#') continue;  // blank or a comment
      try {
        if (first > 0) throw LineError("an indented line (a vocab.yml is one flat map of 'piece: id')");
        auto [piece, id] = entry(line);
        pieces.push_back(std::move(piece));
        ids.push_back(id);
      } catch (const LineError& e) {
        throw DataError(path + ": line " + std::to_string(number) + ": " + e.why +
                        "; parla reads a vocab.yml as Marian writes it, one 'piece: id' per line");
      }
    }
  }
  if (pieces.empty()) throw DataError(path + ": not a YAML map of piece: id");
  return pieces_by_id(std::move(pieces), std::move(ids), path);
}

std::vector<std::string> pieces_by_id(std::vector<std::string> pieces, std::vector<int64_t> ids,
                                      const std::string& path) {
  const int64_t n = static_cast<int64_t>(pieces.size());
  std::vector<bool> seen(pieces.size(), false);
  for (size_t k = 0; k < pieces.size(); ++k) {
    const int64_t id = ids[k];
    if (id < 0 || id >= n || seen[static_cast<size_t>(id)])
      throw DataError(path + ": id " + std::to_string(id) + " (piece '" + pieces[k].substr(0, 60) +
                      "') is out of range or given twice; the ids must be 0 .. " + std::to_string(n - 1));
    seen[static_cast<size_t>(id)] = true;
  }
  // Each swap puts one piece at its id for good.
  for (size_t k = 0; k < pieces.size(); ++k)
    while (ids[k] != static_cast<int64_t>(k)) {
      const auto to = static_cast<size_t>(ids[k]);
      std::swap(pieces[k], pieces[to]);
      std::swap(ids[k], ids[to]);
    }
  return pieces;
}

}  // namespace parla::convert
