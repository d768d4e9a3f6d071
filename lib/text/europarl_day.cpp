#include "text/europarl_day.h"

#include "text/europarl_markup.h"

namespace parla::text {

namespace {

bool is_blank(const std::string& s) {
  for (char c : s)
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  return true;
}

}  // namespace

void read_europarl_day(const std::vector<std::string>& lines, EuroparlDay& day, uint64_t first_line) {
  // Each tag closes what it starts: a chapter its speeches, a speaker its paragraphs. `open_paragraph` is false
  // after a tag, so the next text line starts a new paragraph.
  bool open_paragraph = false;
  auto chapter = [&](std::string id, uint64_t line) {
    day.chapters.push_back({std::move(id), {}, line});
    open_paragraph = false;
  };
  auto speech = [&](std::string id, uint64_t line) {
    if (day.chapters.empty()) chapter("", line);
    day.chapters.back().speeches.push_back({std::move(id), {}, line});
    open_paragraph = false;
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    uint64_t line_no = first_line + i;
    const std::string& line = lines[i];
    if (is_blank(line)) continue;
    if (auto tag = parse_europarl_tag(line)) {
      ++day.tags;
      switch (tag->kind) {
        case EuroparlTag::Kind::kChapter: chapter(std::move(tag->id), line_no); break;
        case EuroparlTag::Kind::kSpeaker: speech(std::move(tag->id), line_no); break;
        case EuroparlTag::Kind::kParagraph: open_paragraph = false; break;
      }
      continue;
    }
    if (day.chapters.empty() || day.chapters.back().speeches.empty()) speech("", line_no);
    auto& paragraphs = day.chapters.back().speeches.back().paragraphs;
    if (!open_paragraph || paragraphs.empty()) {
      paragraphs.push_back({{}, line_no});
      open_paragraph = true;
    }
    paragraphs.back().lines.push_back(line);
    ++day.text_lines;
  }
}

}  // namespace parla::text
