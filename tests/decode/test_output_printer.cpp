#include <catch2/catch.hpp>

#include "core/error.h"
#include "decode/length_penalty.h"
#include "decode/output_printer.h"

using namespace parla;
using namespace parla::decode;

TEST_CASE("the GNMT length penalty is ((5+|Y|)/6)^alpha", "[length_penalty]") {
  CHECK(length_penalty(1, 1.0) == Approx(1.0));
  CHECK(length_penalty(7, 1.0) == Approx(2.0));
  CHECK(length_penalty(13, 0.5) == Approx(std::sqrt(3.0)));
  CHECK(length_penalty(100, 0.0) == 1.0);
  CHECK(normalized_score(-4.0f, 7, 1.0) == Approx(-2.0f));
}

namespace {
Hypothesis hyp(std::vector<int64_t> tokens, float score, std::vector<std::vector<float>> attn = {}) {
  Hypothesis h;
  h.tokens = std::move(tokens);
  h.score = score;
  h.attention = std::move(attn);
  return h;
}
}  // namespace

TEST_CASE("plain output is one line per sentence, empty for an empty result", "[output_printer]") {
  OutputPrinter p;
  CHECK(p.format(0, {hyp({5, 6}, -1)}, {"hello world"}, 3) == "hello world\n");
  CHECK(p.format(1, {}, {}, 0) == "\n");
}

TEST_CASE("n-best output follows Marian's 'i ||| text ||| score' format", "[output_printer]") {
  OutputPrinter p;
  p.n_best = true;
  CHECK(p.format(3, {hyp({5}, -0.5f), hyp({6}, -1.25f)}, {"a", "b"}, 1) == "3 ||| a ||| -0.5\n3 ||| b ||| -1.25\n");
}

TEST_CASE("hard alignments link each target piece to its most attended source piece", "[output_printer]") {
  // Two target pieces + EOS over 3 source pieces + EOS; EOS columns are never chosen.
  auto h = hyp({5, 6}, -1, {{0.1f, 0.7f, 0.1f, 0.1f}, {0.1f, 0.1f, 0.2f, 0.6f}, {0, 0, 0, 1}});
  CHECK(hard_alignment(h, 3) == "1-0 2-1");
  OutputPrinter p;
  p.alignment = AlignmentFormat::kHard;
  CHECK(p.format(0, {h}, {"x y"}, 3) == "x y ||| 1-0 2-1\n");
  p.alignment = AlignmentFormat::kSoft;
  CHECK(p.format(0, {hyp({5}, 0, {{0.25f, 0.75f}, {1, 0}})}, {"x"}, 1) == "x ||| 0.2500,0.7500 1.0000,0.0000\n");
}
