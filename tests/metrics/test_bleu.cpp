// BLEU and chrF arithmetic against hand-computed formulas, and the library API against sacreBLEU's own test
// vectors (shared/bleu/sacrebleu_testvectors.jsonl).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>

#include "metrics/bleu.h"
#include "metrics/bleu_fixtures.h"
#include "metrics/chrf.h"

using namespace parla::metrics;

namespace {
BleuStats stats(int64_t sys, int64_t ref, std::array<int64_t, 4> c, std::array<int64_t, 4> t) {
  BleuStats s;
  s.sys_len = sys;
  s.ref_len = ref;
  s.correct = c;
  s.total = t;
  return s;
}
BleuOptions none_tok() {
  BleuOptions o;
  o.tokenize = TokenizerKind::kNone;
  return o;
}
}  // namespace

TEST_CASE("the brevity penalty is exp(1 - r/c) for short hypotheses and 1 otherwise", "[bleu]") {
  auto s = compute_bleu(stats(9, 10, {9, 8, 7, 6}, {9, 8, 7, 6}), SmoothMethod::kExp, 0, false);
  CHECK(s.bp == Approx(std::exp(1.0 - 10.0 / 9.0)).epsilon(1e-15));
  CHECK(s.score == Approx(100.0 * std::exp(1.0 - 10.0 / 9.0)).epsilon(1e-13));
  CHECK(compute_bleu(stats(11, 10, {1, 1, 1, 1}, {11, 10, 9, 8}), SmoothMethod::kExp, 0, false).bp == 1.0);
  CHECK(compute_bleu(stats(0, 3, {0, 0, 0, 0}, {0, 0, 0, 0}), SmoothMethod::kExp, 0, false).bp == 0.0);
}

TEST_CASE("BLEU is the geometric mean of the four precisions times BP", "[bleu]") {
  auto s = compute_bleu(stats(11, 11, {9, 7, 5, 3}, {10, 8, 6, 4}), SmoothMethod::kNone, 0, false);
  double expected = 100 * std::pow(0.9 * 0.875 * (5.0 / 6.0) * 0.75, 0.25);
  CHECK(s.score == Approx(expected).epsilon(1e-13));
  CHECK(s.precisions[1] == Approx(87.5));
}

TEST_CASE("exp smoothing halves the pseudo-count for each further zero order", "[bleu]") {
  auto s = compute_bleu(stats(4, 4, {3, 1, 0, 0}, {4, 3, 2, 1}), SmoothMethod::kExp, 0, false);
  CHECK(s.precisions[2] == Approx(100.0 / (2 * 2)));
  CHECK(s.precisions[3] == Approx(100.0 / (4 * 1)));
  double expected = std::exp((std::log(75.0) + std::log(100.0 / 3) + std::log(25.0) + std::log(25.0)) / 4);
  CHECK(s.score == Approx(expected).epsilon(1e-13));
}

TEST_CASE("floor smoothing uses floor/total for zero orders", "[bleu]") {
  auto s = compute_bleu(stats(4, 4, {3, 1, 0, 0}, {4, 3, 2, 1}), SmoothMethod::kFloor, 0.1, false);
  CHECK(s.precisions[2] == Approx(100 * 0.1 / 2));
  CHECK(s.precisions[3] == Approx(100 * 0.1 / 1));
}

TEST_CASE("add-k adds k to counts and totals of orders above 1 and reports them", "[bleu]") {
  auto s = compute_bleu(stats(4, 4, {3, 1, 0, 0}, {4, 3, 2, 1}), SmoothMethod::kAddK, 1.0, false);
  CHECK(s.counts == std::array<double, 4>{3, 2, 1, 1});
  CHECK(s.totals == std::array<double, 4>{4, 4, 3, 2});
  double expected = std::exp((std::log(75.0) + std::log(50.0) + std::log(100.0 / 3) + std::log(50.0)) / 4);
  CHECK(s.score == Approx(expected).epsilon(1e-13));
}

TEST_CASE("no smoothing and a zero precision give exactly 0", "[bleu]") {
  CHECK(compute_bleu(stats(4, 4, {3, 1, 0, 0}, {4, 3, 2, 1}), SmoothMethod::kNone, 0, false).score == 0.0);
}

TEST_CASE("no unigram match exits early with score 0 before any smoothing", "[bleu]") {
  auto s = compute_bleu(stats(4, 4, {0, 0, 0, 0}, {4, 3, 2, 1}), SmoothMethod::kAddK, 1.0, false);
  CHECK(s.score == 0.0);
  CHECK(s.totals == std::array<double, 4>{4, 3, 2, 1});
  CHECK(s.precisions == std::array<double, 4>{0, 0, 0, 0});
}

TEST_CASE("effective order averages only over orders the hypothesis has", "[bleu]") {
  auto s = compute_bleu(stats(2, 2, {2, 1, 0, 0}, {2, 1, 0, 0}), SmoothMethod::kExp, 0, true);
  CHECK(s.score == Approx(100.0).epsilon(1e-13));
  CHECK(compute_bleu(stats(2, 2, {2, 1, 0, 0}, {2, 1, 0, 0}), SmoothMethod::kExp, 0, false).score == 0.0);
}

TEST_CASE("clipping uses the maximum count over references, not the sum", "[bleu]") {
  auto st = bleu_segment_stats(none_tok(), "the the the the", {"the cat", "the the dog"});
  CHECK(st.correct[0] == 2);
  CHECK(st.total[0] == 4);
  CHECK(st.correct[1] == 1);  // "the the"
}

TEST_CASE("the closest reference length wins, ties going to the shorter", "[bleu]") {
  CHECK(bleu_segment_stats(none_tok(), "a b c", {"a b", "a b c d"}).ref_len == 2);
  CHECK(bleu_segment_stats(none_tok(), "a b c", {"a b c d e f", "a b c d"}).ref_len == 4);
  CHECK(bleu_segment_stats(none_tok(), "a b c", {"a b c d e", "a"}).ref_len == 1);
  CHECK(bleu_segment_stats(none_tok(), "a b c", {"", "a b c d e f g"}).ref_len == 0);
}

TEST_CASE("n-gram counts equal a brute-force count", "[bleu]") {
  std::string hyp = "a b a b a c a b", ref = "a b a c a b a b a";
  auto st = bleu_segment_stats(none_tok(), hyp, {ref});
  auto split = [](const std::string& s) {
    std::vector<std::string> v;
    std::string cur;
    for (char c : s + " ")
      if (c == ' ') {
        if (!cur.empty()) v.push_back(cur);
        cur.clear();
      } else {
        cur += c;
      }
    return v;
  };
  auto h = split(hyp), r = split(ref);
  for (int n = 1; n <= 4; ++n) {
    std::map<std::vector<std::string>, int> hc, rc;
    for (std::size_t i = 0; i + n <= h.size(); ++i) ++hc[{h.begin() + i, h.begin() + i + n}];
    for (std::size_t i = 0; i + n <= r.size(); ++i) ++rc[{r.begin() + i, r.begin() + i + n}];
    int64_t correct = 0, total = 0;
    for (auto& [k, c] : hc) {
      total += c;
      correct += std::min(c, rc[k]);
    }
    CHECK(st.correct[n - 1] == correct);
    CHECK(st.total[n - 1] == total);
  }
}

TEST_CASE("signatures name the options as sacreBLEU does", "[bleu]") {
  BleuOptions o;
  CHECK(bleu_signature(o, 1) == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
  CHECK(bleu_signature(o, 1, true) == "#:1|c:mixed|e:no|tok:13a|s:exp|v:2.6.0");
  o.smooth_method = SmoothMethod::kFloor;
  CHECK(bleu_signature(o, 2) == "nrefs:2|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:2.6.0");
  o.smooth_method = SmoothMethod::kAddK;
  o.lowercase = true;
  CHECK(bleu_signature(o, 1) == "nrefs:1|case:lc|eff:no|tok:13a|smooth:add-k[1.00]|version:2.6.0");
  ChrfOptions c;
  CHECK(chrf_signature(c, 1) == "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:2.6.0");
}

TEST_CASE("chrF of identical strings is 100 and of disjoint ones 0", "[chrf]") {
  ChrfOptions o;
  CHECK(sentence_chrf(o, "Niemand hat die Absicht", {"Niemand hat die Absicht"}) == Approx(100.0));
  CHECK(sentence_chrf(o, "abc", {"xyz"}) == 0.0);
}

TEST_CASE("chrF follows the F-beta formula over averaged character n-gram precision and recall", "[chrf]") {
  // hyp "ab", ref "abc" (no whitespace): order 1: 2 hyp, 3 ref, 2 match; order 2: 1, 2, 1; orders 3..6: hyp 0.
  ChrfOptions o;
  double p = (2.0 / 2 + 1.0 / 1) / 2, r = (2.0 / 3 + 1.0 / 2) / 2;
  double expected = 100 * (1 + 4) * p * r / (4 * p + r);
  CHECK(sentence_chrf(o, "ab", {"abc"}) == Approx(expected).epsilon(1e-13));
}

TEST_CASE("the library API matches sacreBLEU's own test vectors", "[bleu][chrf][fixtures]") {
  if (!parla::testing::have_bleu_fixtures()) {
    WARN("../shared/bleu is absent; skipping");
    return;
  }
  int checked = 0, skipped = 0;
  for (const auto& v : parla::testing::read_jsonl("sacrebleu_testvectors.jsonl")) {
    if (v.value("verified", nlohmann::json()) != true) continue;
    const std::string kind = v["kind"], metric = v.value("metric", "");
    const auto& in = v["input"];
    const auto& opt = v["options"];
    const auto& exp = v["expected"];
    INFO(v["id"].get<std::string>());
    if (metric == "BLEU" && kind != "cli_corpus") {
      if (opt.value("max_ngram_order", 4) != 4) {
        ++skipped;  // parla's BLEU is fixed at order 4, as the CLI
        continue;
      }
      BleuOptions o;
      o.tokenize = parse_tokenizer(opt.value("tokenize", "13a"));
      o.lowercase = opt.value("lowercase", false);
      if (opt.contains("smooth_method")) o.smooth_method = parse_smooth_method(opt["smooth_method"]);
      if (opt.contains("smooth_value") && !opt["smooth_value"].is_null()) o.smooth_value = opt["smooth_value"];
      o.effective_order = opt.value("effective_order", false);
      double score;
      if (kind == "compute_bleu_from_stats") {
        BleuStats s;
        s.sys_len = in["sys_len"];
        s.ref_len = in["ref_len"];
        for (int n = 0; n < 4; ++n) {
          s.correct[n] = in["correct"][n];
          s.total[n] = in["total"][n];
        }
        // BLEU.compute_bleu's own default smoothing is 'none'.
        if (!opt.contains("smooth_method")) o.smooth_method = SmoothMethod::kNone;
        score = compute_bleu(s, o).score;
      } else if (kind == "sentence_score") {
        score = sentence_bleu(o, in["hypothesis"], in["references"].get<std::vector<std::string>>()).score;
      } else if (kind == "corpus_score" || kind == "corpus_stats") {
        auto hyps = in["hypotheses"].get<std::vector<std::string>>();
        auto refs = in["references"].get<std::vector<std::vector<std::string>>>();
        if (exp.contains("same_as")) {
          auto hyps2 = exp["same_as"]["hypotheses"].get<std::vector<std::string>>();
          auto refs2 = exp["same_as"]["references"].get<std::vector<std::vector<std::string>>>();
          // The CLI rstrips lines; the \r in the middle of a reference is whitespace for the split.
          CHECK(corpus_bleu(o, hyps, refs).score == corpus_bleu(o, hyps2, refs2).score);
          ++checked;
          continue;
        }
        auto s = corpus_bleu(o, hyps, refs);
        score = s.score;
        if (kind == "corpus_stats") {
          BleuStats total;
          for (std::size_t i = 0; i < hyps.size(); ++i) {
            std::vector<std::string> r;
            for (const auto& stream : refs) r.push_back(stream[i]);
            total += bleu_segment_stats(o, hyps[i], r);
          }
          for (int n = 0; n < 4; ++n) {
            CHECK(total.correct[n] == exp["counts"][n].get<int64_t>());
            CHECK(total.total[n] == exp["totals"][n].get<int64_t>());
          }
        }
        if (exp.contains("score_str")) {
          char buf[32];
          std::snprintf(buf, sizeof buf, "%.2f", score);
          CHECK(std::string(buf) == exp["score_str"].get<std::string>());
        }
      } else {
        ++skipped;
        continue;
      }
      if (exp.contains("score")) CHECK(std::abs(score - exp["score"].get<double>()) <= exp.value("tolerance", 0.0));
      if (v.contains("actual") && v["actual"].contains("score"))
        CHECK(score == Approx(v["actual"]["score"].get<double>()).epsilon(1e-12).margin(1e-12));
      ++checked;
    } else if (metric == "chrF" && (kind == "corpus_score" || kind == "sentence_score")) {
      if (opt.value("word_order", 0) != 0) {
        ++skipped;
        continue;
      }
      ChrfOptions o;
      o.char_order = opt.value("char_order", 6);
      o.beta = opt.value("beta", 2);
      o.eps_smoothing = opt.value("eps_smoothing", false);
      o.whitespace = !opt.value("remove_whitespace", true);
      double score = kind == "corpus_score"
                         ? corpus_chrf(o, in["hypotheses"].get<std::vector<std::string>>(),
                                       in["references"].get<std::vector<std::vector<std::string>>>())
                         : sentence_chrf(o, in["hypothesis"], in["references"].get<std::vector<std::string>>());
      CHECK(std::abs(score - exp["score"].get<double>()) <= exp["tolerance"].get<double>());
      if (v.contains("actual") && v["actual"].contains("score"))
        CHECK(score == Approx(v["actual"]["score"].get<double>()).epsilon(1e-12).margin(1e-20));
      ++checked;
    }
  }
  CHECK(checked == 67);
  WARN("sacreBLEU test vectors checked: " << checked << ", skipped (max_ngram_order != 4 or chrF++): " << skipped);
}
