#pragma once
// One day of Europarl's source release (Koehn, 2005): the debates of a sitting in one language, as chapters
// (agenda items, `<CHAPTER ID=..>`), speeches (`<SPEAKER ID=.. NAME=..>`) and paragraphs (`<P>`), each a list of
// text lines. The release gives one file per day and language (`ep-YY-MM-DD.txt`), the same tags with the same IDs
// in every language, but paragraphs not yet split into sentences nor aligned; text/europarl_day_alignment.h pairs
// two of these. A line break is a hard boundary: a text line is split into sentences on its own.
#include <cstdint>
#include <string>
#include <vector>

namespace parla::text {

struct EuroparlParagraph {
  std::vector<std::string> lines;  // text lines, non-empty
  uint64_t line = 0;               // 1-based line of its first text line in the file
};

struct EuroparlSpeech {
  std::string id;  // the SPEAKER tag's ID; "" for the text before a chapter's first speaker (its title)
  std::vector<EuroparlParagraph> paragraphs;
  uint64_t line = 0;  // 1-based line of its tag (or first text line)
};

struct EuroparlChapter {
  std::string id;  // the CHAPTER tag's ID; "" for text before the first chapter
  std::vector<EuroparlSpeech> speeches;
  uint64_t line = 0;
};

struct EuroparlDay {
  std::vector<EuroparlChapter> chapters;
  uint64_t text_lines = 0;
  uint64_t tags = 0;
};

// Reads a day from its decoded lines (text/legacy_encoding.h). Blank lines are skipped; text before any tag
// opens a chapter and a speech with empty IDs, so a file without markup is one paragraph of lines. Appending a
// second file's lines (a day that comes in parts) continues the same day: `first_line` numbers them.
void read_europarl_day(const std::vector<std::string>& lines, EuroparlDay& day, uint64_t first_line = 1);

}  // namespace parla::text
