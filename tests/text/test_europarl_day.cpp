#include <catch2/catch.hpp>

#include "text/europarl_day.h"

using parla::text::EuroparlDay;
using parla::text::read_europarl_day;

TEST_CASE("a day is read into chapters, speeches and paragraphs, with the line of each") {
  std::vector<std::string> lines = {
      "<CHAPTER ID=1>",           // 1
      "Resumption of the session",  // 2: the chapter's title, before any speaker
      "<SPEAKER ID=1 NAME=\"President\">",  // 3
      "First paragraph.",         // 4
      "Still the first.",         // 5
      "<P>",                      // 6
      "",                         // 7: blank, skipped
      "Second paragraph.",        // 8
      "<SPEAKER ID=2 NAME=\"Cox\">",  // 9
      "<P>",                      // 10: a P right after a speaker opens no empty paragraph
      "Cox speaks.",              // 11
      "<CHAPTER ID=2>",           // 12
      "<SPEAKER ID=3 NAME=\"X\">",  // 13
      "Third speech.",            // 14
  };
  EuroparlDay day;
  read_europarl_day(lines, day);
  REQUIRE(day.chapters.size() == 2);
  CHECK(day.text_lines == 6);
  CHECK(day.tags == 7);
  const auto& c1 = day.chapters[0];
  CHECK(c1.id == "1");
  CHECK(c1.line == 1);
  REQUIRE(c1.speeches.size() == 3);
  CHECK(c1.speeches[0].id.empty());
  REQUIRE(c1.speeches[0].paragraphs.size() == 1);
  CHECK(c1.speeches[0].paragraphs[0].lines == std::vector<std::string>{"Resumption of the session"});
  CHECK(c1.speeches[1].id == "1");
  CHECK(c1.speeches[1].line == 3);
  REQUIRE(c1.speeches[1].paragraphs.size() == 2);
  CHECK(c1.speeches[1].paragraphs[0].lines == std::vector<std::string>{"First paragraph.", "Still the first."});
  CHECK(c1.speeches[1].paragraphs[0].line == 4);
  CHECK(c1.speeches[1].paragraphs[1].lines == std::vector<std::string>{"Second paragraph."});
  CHECK(c1.speeches[1].paragraphs[1].line == 8);
  REQUIRE(c1.speeches[2].paragraphs.size() == 1);
  CHECK(c1.speeches[2].paragraphs[0].line == 11);
  CHECK(day.chapters[1].id == "2");
  REQUIRE(day.chapters[1].speeches.size() == 1);
  CHECK(day.chapters[1].speeches[0].id == "3");
}

TEST_CASE("a day without markup is one paragraph of all its lines, and parts continue the day and its numbering") {
  EuroparlDay day;
  read_europarl_day({"One.", "Two."}, day);
  REQUIRE(day.chapters.size() == 1);
  CHECK(day.chapters[0].id.empty());
  REQUIRE(day.chapters[0].speeches.size() == 1);
  REQUIRE(day.chapters[0].speeches[0].paragraphs.size() == 1);
  CHECK(day.chapters[0].speeches[0].paragraphs[0].lines.size() == 2);
  read_europarl_day({"<CHAPTER ID=1>", "Three."}, day, 3);
  REQUIRE(day.chapters.size() == 2);
  CHECK(day.chapters[1].line == 3);
  CHECK(day.chapters[1].speeches[0].paragraphs[0].line == 4);
  EuroparlDay empty;
  read_europarl_day({}, empty);
  CHECK(empty.chapters.empty());
  CHECK(empty.text_lines == 0);
}
