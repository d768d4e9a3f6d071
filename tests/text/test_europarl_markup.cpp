#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>

#include "text/europarl_markup.h"
#include "text/line_reader.h"

using parla::text::is_europarl_markup;

TEST_CASE("the three Europarl tags are markup, with or without attributes") {
  CHECK(is_europarl_markup("<CHAPTER ID=1>"));
  CHECK(is_europarl_markup("<SPEAKER ID=2 NAME=\"Evans, Robert J\">"));
  CHECK(is_europarl_markup("<SPEAKER ID=7 LANGUAGE=\"EN\" NAME=\"Mr Pasqua\">"));
  CHECK(is_europarl_markup("<P>"));
  CHECK(is_europarl_markup("  <P>\r"));
}

TEST_CASE("text that contains or resembles a tag is not markup") {
  CHECK_FALSE(is_europarl_markup("<P> The text follows"));
  CHECK_FALSE(is_europarl_markup("He said <P>"));
  CHECK_FALSE(is_europarl_markup("<p>"));
  CHECK_FALSE(is_europarl_markup("<CHAPTERS>"));
  CHECK_FALSE(is_europarl_markup("<BR>"));
  CHECK_FALSE(is_europarl_markup("<P><P>"));
  CHECK_FALSE(is_europarl_markup(""));
  CHECK_FALSE(is_europarl_markup("(The House rose and observed a minute' s silence)"));
}

TEST_CASE("on the raw Europarl release, exactly the tag lines are recognised as markup") {
  std::filesystem::path dir = std::string(PARLA_SHARED_DIR) + "/data/europarl-raw-release-en-fr/en";
  if (!std::filesystem::exists(dir)) {
    WARN("skipped: " << dir << " is absent");
    return;
  }
  // Independent reference: the release's tag grammar as a regular expression.
  std::regex tag(R"(^<(CHAPTER|SPEAKER|P)( [^<>]*)?>$)");
  size_t lines = 0, markup = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    parla::text::LineReader r(entry.path().string());
    std::string line;
    while (r.next(line)) {
      ++lines;
      bool expected = std::regex_match(line, tag);
      if (is_europarl_markup(line) != expected) FAIL_CHECK("disagrees on: " << line);
      markup += expected;
    }
  }
  CHECK(markup > 2000);  // 2,181 tag lines in the four days (grep -c '^<')
  CHECK(lines > markup);
}

TEST_CASE("a tag's kind and ID are read, quoted or not, beside other attributes") {
  using parla::text::EuroparlTag;
  using parla::text::parse_europarl_tag;
  auto chapter = parse_europarl_tag("<CHAPTER ID=12>");
  REQUIRE(chapter);
  CHECK(chapter->kind == EuroparlTag::Kind::kChapter);
  CHECK(chapter->id == "12");
  auto speaker = parse_europarl_tag("<SPEAKER ID=7 LANGUAGE=\"EN\" NAME=\"Evans, Robert J\">");
  REQUIRE(speaker);
  CHECK(speaker->kind == EuroparlTag::Kind::kSpeaker);
  CHECK(speaker->id == "7");
  auto quoted = parse_europarl_tag("  <SPEAKER NAME=\"ID=3\" ID=\"040\">\r");
  REQUIRE(quoted);
  CHECK(quoted->id == "040");  // the NAME's text is not the ID attribute
  auto paragraph = parse_europarl_tag("<P>");
  REQUIRE(paragraph);
  CHECK(paragraph->kind == EuroparlTag::Kind::kParagraph);
  CHECK(paragraph->id.empty());
  auto unterminated = parse_europarl_tag("<SPEAKER ID=2 NAME=\"Cox>");
  REQUIRE(unterminated);
  CHECK(unterminated->id == "2");
  CHECK_FALSE(parse_europarl_tag("<P> text"));
  CHECK_FALSE(parse_europarl_tag("<BR>"));
}
