#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <set>

#include "text/sentence_splitter.h"
#include "text/unicode.h"

using parla::text::SentenceSplitter;
using Sentences = std::vector<std::string>;

namespace sentence_splitter_test {

Sentences split(std::string_view lang, std::string_view paragraph) { return SentenceSplitter(lang).split(paragraph); }

// The paragraph with every whitespace run (Python's str.isspace) made one space and the ends trimmed. Decodes
// forward on its own, so that it checks the splitter's tokenisation rather than repeats it: an ill-formed byte is
// one non-space character.
std::string collapse_whitespace(std::string_view s) {
  std::string out;
  bool pending_space = false;
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = parla::text::utf8_length(static_cast<unsigned char>(s[i]));
    bool valid = i + n <= s.size() && parla::text::is_valid_utf8(s.substr(i, n));
    if (!valid) n = 1;
    std::size_t j = i;
    bool space = valid && parla::text::is_space(parla::text::decode_utf8(s, j));
    if (space) {
      pending_space = !out.empty();
    } else {
      if (pending_space) out += ' ';
      pending_space = false;
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

std::string join(const Sentences& sentences) {
  std::string out;
  for (const auto& s : sentences) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}


TEST_CASE("a period, question or exclamation mark before a capital ends a sentence") {
  CHECK(split("en", "The work is done. All that remains is the vote.") ==
        Sentences{"The work is done.", "All that remains is the vote."});
  CHECK(split("en", "Has my vote been counted? I was unable to vote! Thank you.") ==
        Sentences{"Has my vote been counted?", "I was unable to vote!", "Thank you."});
  CHECK(split("en", "One sentence only.") == Sentences{"One sentence only."});
}

TEST_CASE("a lowercase word after the punctuation continues the sentence") {
  CHECK(split("en", "It costs 3.5 million. and more? perhaps! surely.") ==
        Sentences{"It costs 3.5 million. and more? perhaps! surely."});
  CHECK(split("en", "Wait... and see. Then... Nothing.") == Sentences{"Wait... and see.", "Then...", "Nothing."});
  CHECK(split("en", "Wait … and see … Then") == Sentences{"Wait … and see …", "Then"});
}

TEST_CASE("a digit starts a sentence after ? ! or a plain period, not after an ellipsis") {
  CHECK(split("en", "Which year? 2000 was chosen.") == Sentences{"Which year?", "2000 was chosen."});
  CHECK(split("en", "It ended in 1999. 2000 began well.") == Sentences{"It ended in 1999.", "2000 began well."});
  CHECK(split("en", "They counted... 5 votes.") == Sentences{"They counted... 5 votes."});
}

TEST_CASE("English titles, initials and dotted abbreviations do not end a sentence") {
  CHECK(split("en", "I met Mr. Smith and Dr. Jones. Prof. Brown was absent.") ==
        Sentences{"I met Mr. Smith and Dr. Jones.", "Prof. Brown was absent."});
  CHECK(split("en", "George W. Bush met J. R. R. Tolkien's heirs.") ==
        Sentences{"George W. Bush met J. R. R. Tolkien's heirs."});
  CHECK(split("en", "Exports to the U.S.A. Grew fast, e.g. Cars did.") ==
        Sentences{"Exports to the U.S.A. Grew fast, e.g. Cars did."});
  CHECK(split("en", "Compare Smith vs. Jones (cf. Brown).") == Sentences{"Compare Smith vs. Jones (cf. Brown)."});
}

TEST_CASE("a URL at the end of a sentence is not a dotted abbreviation") {
  CHECK(split("en", "See www.europarl.eu.int. The site is new.") ==
        Sentences{"See www.europarl.eu.int.", "The site is new."});
}

TEST_CASE("numeric-only prefixes hold before a number and end a sentence before a word") {
  CHECK(split("en", "See No. 5 and Art. 12 on pp. 3-7.") == Sentences{"See No. 5 and Art. 12 on pp. 3-7."});
  CHECK(split("en", "The answer was no. The vote failed.") == Sentences{"The answer was no.", "The vote failed."});
  CHECK(split("de", "Siehe Nr. 5. Das ist alles.") == Sentences{"Siehe Nr. 5.", "Das ist alles."});
}

TEST_CASE("etc. before a capital ends a sentence, as it does in Europarl") {
  CHECK(split("en", "new technologies, services, etc. However, the role remains.") ==
        Sentences{"new technologies, services, etc.", "However, the role remains."});
  CHECK(split("en", "services, etc. and more.") == Sentences{"services, etc. and more."});
}

TEST_CASE("closing quotes and brackets stay with the sentence they close") {
  CHECK(split("en", "He said \"No.\" Then he left.") == Sentences{"He said \"No.\"", "Then he left."});
  CHECK(split("en", "(The House rose.) The sitting resumed.") ==
        Sentences{"(The House rose.)", "The sitting resumed."});
  CHECK(split("en", "It was 'the bug.' It failed to materialise.") ==
        Sentences{"It was 'the bug.'", "It failed to materialise."});
  CHECK(split("de", "Er sagte: „Nein.“ Dann ging er.") == Sentences{"Er sagte: „Nein.“", "Dann ging er."});
}

TEST_CASE("opening quotes, brackets and dashes before a capital start a sentence") {
  CHECK(split("en", "It is true. \"Nobody\" said so.") == Sentences{"It is true.", "\"Nobody\" said so."});
  CHECK(split("en", "We agree. (Applause) Thank you.") == Sentences{"We agree.", "(Applause) Thank you."});
  CHECK(split("en", "That is all. - Mr President, I agree.") ==
        Sentences{"That is all.", "- Mr President, I agree."});
  CHECK(split("en", "That is all. ( the rest) follows.") == Sentences{"That is all. ( the rest) follows."});
}

TEST_CASE("Europarl's tokenised apostrophes do not confuse the splitter") {
  CHECK(split("en", "I should like to observe a minute' s silence. Please rise, then, for this minute' s silence.") ==
        Sentences{"I should like to observe a minute' s silence.", "Please rise, then, for this minute' s silence."});
  CHECK(split("en", "It is the Commission' s view. It' s ours too.") ==
        Sentences{"It is the Commission' s view.", "It' s ours too."});
}

TEST_CASE("a sentence needs a letter or a digit, so stray punctuation joins the text after it") {
  CHECK(split("en", ". (FR) The European Union is financed. It works.") ==
        Sentences{". (FR) The European Union is financed.", "It works."});
  CHECK(split("en", "- ! ?") == Sentences{"- ! ?"});
}

TEST_CASE("French titles and spaced punctuation") {
  CHECK(split("fr", "Je remercie M. Evans et MM. Barón Crespo et Poettering. Mme Lalumière a la parole.") ==
        Sentences{"Je remercie M. Evans et MM. Barón Crespo et Poettering.", "Mme Lalumière a la parole."});
  CHECK(split("fr", "Y a-t-il des observations ? Non. Le procès-verbal est adopté !") ==
        Sentences{"Y a-t-il des observations ?", "Non.", "Le procès-verbal est adopté !"});
  CHECK(split("fr", "Il a dit : « Non ! » Puis il est parti.") ==
        Sentences{"Il a dit : « Non ! »", "Puis il est parti."});
  CHECK(split("fr", "C'est fini. « Nous verrons » dit-il.") == Sentences{"C'est fini.", "« Nous verrons » dit-il."});
  CHECK(split("fr", "Voir l'art. 12 et p. ex. Paris.") == Sentences{"Voir l'art. 12 et p. ex. Paris."});
  // A no-break space before "?" is whitespace too: it becomes an ordinary space.
  CHECK(split("fr", "Des observations\xC2\xA0? Non.") == Sentences{"Des observations ?", "Non."});
}

TEST_CASE("German titles, abbreviations and ordinals") {
  CHECK(split("de", "Hr. Müller und Dr. Schmidt kamen. Wir danken ihnen.") ==
        Sentences{"Hr. Müller und Dr. Schmidt kamen.", "Wir danken ihnen."});
  CHECK(split("de", "Das gilt z. B. Für Kinder, d. h. Für alle, z.B. Heute.") ==
        Sentences{"Das gilt z. B. Für Kinder, d. h. Für alle, z.B. Heute."});
  CHECK(split("de", "Wir treffen uns am 3. Oktober im 21. Jahrhundert.") ==
        Sentences{"Wir treffen uns am 3. Oktober im 21. Jahrhundert."});
  CHECK(split("de", "Es geschah Montag, 3. Oktober.") == Sentences{"Es geschah Montag, 3. Oktober."});
  CHECK(split("de", "Das steht in Artikel 12. Wir lehnen ihn ab.") ==
        Sentences{"Das steht in Artikel 12.", "Wir lehnen ihn ab."});
  CHECK(split("de", "Es geschah im Jahr 1999. Das war schlimm.") ==
        Sentences{"Es geschah im Jahr 1999.", "Das war schlimm."});
  // Without the German rule the capital would end the sentence.
  CHECK(split("en", "We meet on the 3. October") == Sentences{"We meet on the 3.", "October"});
}

TEST_CASE("Italian titles and numeric prefixes") {
  CHECK(split("it", "Ringrazio l'On. Rossi e il Sig. Bianchi. Passiamo al voto.") ==
        Sentences{"Ringrazio l'On. Rossi e il Sig. Bianchi.", "Passiamo al voto."});
  CHECK(split("it", "Si veda l'art. 5, n. 3. Perché? Perché sì.") ==
        Sentences{"Si veda l'art. 5, n. 3.", "Perché?", "Perché sì."});
  CHECK(split("it", "Sig. Presidente, ho finito.") == Sentences{"Sig. Presidente, ho finito."});
}

TEST_CASE("Spanish titles and inverted question and exclamation marks") {
  CHECK(split("es", "Gracias, Sr. Presidente. ¿Qué pasa? ¡Nada! Bien.") ==
        Sentences{"Gracias, Sr. Presidente.", "¿Qué pasa?", "¡Nada!", "Bien."});
  CHECK(split("es", "El Excmo. Sr. Prodi habló (véase la pág. 5). La Sra. Palacio también.") ==
        Sentences{"El Excmo. Sr. Prodi habló (véase la pág. 5).", "La Sra. Palacio también."});
  CHECK(split("es", "¿Y ahora? ¿qué hacemos?") == Sentences{"¿Y ahora? ¿qué hacemos?"});
}

TEST_CASE("Greek titles and the Greek question mark") {
  CHECK(split("el", "Ευχαριστώ τον κ. Παπαδόπουλο. Η συζήτηση έληξε.") ==
        Sentences{"Ευχαριστώ τον κ. Παπαδόπουλο.", "Η συζήτηση έληξε."});
  CHECK(split("el", "Τι γίνεται; Τίποτα. Σύμφωνα με το άρθ. 5 ισχύει.") ==
        Sentences{"Τι γίνεται;", "Τίποτα.", "Σύμφωνα με το άρθ. 5 ισχύει."});
  CHECK(split("el", "Τι γίνεται\xCD\xBE Τίποτα.") == Sentences{"Τι γίνεται\xCD\xBE", "Τίποτα."});  // U+037E
  // Elsewhere ";" is a semicolon.
  CHECK(split("en", "First; Second.") == Sentences{"First; Second."});
}

TEST_CASE("other scripts and other languages") {
  CHECK(split("ru", "Это правда. Мы согласны, Mr. Smith.") == Sentences{"Это правда.", "Мы согласны, Mr. Smith."});
  CHECK(split("zh", "你好！ 我们开始吧。 好。") == Sentences{"你好！", "我们开始吧。", "好。"});
  CHECK(split("ar", "هل توافق؟ نعم.") == Sentences{"هل توافق؟", "نعم."});
}

TEST_CASE("the eleven Europarl languages have their own lists, others use the generic one") {
  for (const char* lang : {"en", "fr", "de", "it", "es", "nl", "pt", "da", "sv", "fi", "el"})
    CHECK(SentenceSplitter::has_language(lang));
  for (const char* lang : {"ru", "xx", "", "EN", "eng"}) CHECK_FALSE(SentenceSplitter::has_language(lang));
}

TEST_CASE("whitespace is collapsed and trimmed, and empty input gives no sentence") {
  CHECK(split("en", "").empty());
  CHECK(split("en", " \t\xC2\xA0 ").empty());
  CHECK(split("en", "  It is done.\t\tAll  that remains. ") == Sentences{"It is done.", "All that remains."});
  SentenceSplitter splitter("en");
  Sentences out{"kept"};
  splitter.split("One. Two.", out);
  CHECK(out == Sentences{"kept", "One.", "Two."});
}

TEST_CASE("invalid UTF-8 counts as ordinary non-letter characters") {
  CHECK(split("en", "Bad \xFF byte. Next \xC3 one.") == Sentences{"Bad \xFF byte.", "Next \xC3 one."});
  CHECK(split("en", "End.\xE2\x80 Next") == Sentences{"End.\xE2\x80 Next"});
  CHECK(split("en", "End. \x80Next") == Sentences{"End. \x80Next"});
  CHECK(split("en", "\xC3") == Sentences{"\xC3"});
  CHECK(split("en", "End. \xF0\x9F") == Sentences{"End. \xF0\x9F"});
}

TEST_CASE("on random text nothing is lost, reordered or left empty") {
  // Pieces that exercise every rule: letters of three scripts, end and other punctuation, quotes, brackets,
  // digits, prefixes, whitespace of several kinds, and ill-formed bytes.
  const std::vector<std::string> pieces = {
      "a", "Z", "é", "É", "Σ", "σ", "中", "word", "The", "Mr", "No", "M", "etc", "z", "am", "Oktober", "1", "12",
      "1999", ".", ".", ".", "?", "!", "…", ";", ":", ",", "\"", "'", "»", "«", "”", "„", "(", ")", "[", "¿", "¡",
      "-", "–", "\xCD\xBE", "。", "？", " ", " ", " ", "  ", "\t", "\xC2\xA0", "\xE3\x80\x80", "\xFF", "\xC3",
      "\x80", "\xE2\x80", "\xF0\x9F\x98", "\xED\xA0\x80", std::string(1, '\0')};
  std::mt19937 rng(20240517);
  std::uniform_int_distribution<std::size_t> pick(0, pieces.size() - 1), length(0, 40);
  const std::vector<SentenceSplitter> splitters = {SentenceSplitter("en"), SentenceSplitter("fr"),
                                                   SentenceSplitter("de"), SentenceSplitter("el"),
                                                   SentenceSplitter("xx")};
  for (int c = 0; c < 3000; ++c) {
    std::string paragraph;
    for (std::size_t n = length(rng); n > 0; --n) paragraph += pieces[pick(rng)];
    Sentences sentences = splitters[c % splitters.size()].split(paragraph);
    INFO("paragraph: " << paragraph);
    for (const auto& s : sentences) {
      REQUIRE_FALSE(s.empty());
      REQUIRE(collapse_whitespace(s) == s);  // no leading, trailing or repeated whitespace
    }
    REQUIRE(join(sentences) == collapse_whitespace(paragraph));
  }
}

TEST_CASE("long and pathological paragraphs are split in linear time") {
  // Each is megabytes long: a quadratic scan would not finish.
  const std::vector<std::string> units = {"A. ", "( ", "» ", ". ", "Mr. ", "word", ".", "\xFF", "- ", "?» ",
                                          "x. ( ", "Non. » ", "\xE2\x80\xA6"};
  SentenceSplitter splitter("fr");
  for (const auto& unit : units) {
    std::string paragraph;
    while (paragraph.size() < (2u << 20)) paragraph += unit;
    Sentences sentences = splitter.split(paragraph);
    CHECK(join(sentences) == collapse_whitespace(paragraph));
  }
  std::string text;
  while (text.size() < (4u << 20)) text += "It is done. Mr. Smith agrees? Yes! ";
  CHECK(SentenceSplitter("en").split(text).size() == 3 * (text.size() / 35));
}

TEST_CASE("on three days of Europarl the gold sentence boundaries are found") {
  // The release (Koehn, 2005) holds one sentence per text line between markup lines; a paragraph is the text
  // lines between two tags, joined with spaces. Gold boundaries are the line ends inside a paragraph.
  const std::string dir = std::string(PARLA_SHARED_DIR) + "/data/europarl-raw-release-en-fr/";
  if (!std::filesystem::exists(dir)) {
    WARN("skipped: " << dir << " is absent");
    return;
  }
  std::regex tag(R"(^<(CHAPTER|SPEAKER|P)( [^<>]*)?>$)");
  auto tokens = [](std::string_view s) {
    std::vector<std::string_view> v;
    parla::text::split_whitespace(s, v);
    return v.size();
  };
  for (const char* lang : {"en", "fr"}) {
    SentenceSplitter splitter(lang);
    std::size_t gold = 0, found = 0, hits = 0;
    // Boundaries are compared as token counts from the paragraph start, which whitespace does not change.
    auto evaluate = [&](const std::vector<std::string>& lines) {
      std::set<std::size_t> expected, predicted;
      std::string paragraph;
      std::size_t at = 0;
      for (const auto& line : lines) {
        if (at > 0) expected.insert(at);
        at += tokens(line);
        paragraph += line + " ";
      }
      at = 0;
      for (const auto& sentence : splitter.split(paragraph)) {
        if (at > 0) predicted.insert(at);
        at += tokens(sentence);
      }
      gold += expected.size();
      found += predicted.size();
      for (std::size_t b : predicted) hits += expected.count(b);
    };
    for (const char* day : {"ep-00-01-17.txt", "ep-00-01-18.txt", "ep-00-01-19.txt"}) {
      std::ifstream in(dir + lang + "/" + day);
      REQUIRE(in);
      std::vector<std::string> lines;
      std::string line;
      while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (std::regex_match(line, tag)) {
          evaluate(lines);
          lines.clear();
        } else if (tokens(line) > 0) {
          lines.push_back(line);
        }
      }
      evaluate(lines);
    }
    double recall = double(hits) / gold, precision = double(hits) / found;
    WARN(lang << ": " << gold << " gold boundaries, " << found << " predicted, recall " << recall
              << ", precision " << precision);
    CHECK(gold > 3000);
    // Measured: recall 0.9989 (en; the misses are lone "." lines, which the splitter joins to the next sentence)
    // and 0.9997 (fr); precision 0.941 (en) and 0.947 (fr). Every split that is not a gold boundary, read by hand
    // on these days, is a true sentence end inside a gold line where the alignment merged two sentences ("...
    // sentenced to death. We shall call him Mr Hicks."), so precision against this gold cannot go much higher.
    CHECK(recall >= 0.99);
    CHECK(precision >= 0.93);
  }
}

}  // namespace sentence_splitter_test
