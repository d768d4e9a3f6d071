#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <utility>
#include <stdexcept>

#include "text/gale_church.h"

using parla::text::Bead;
using parla::text::bead_cost;
using parla::text::bead_kind_name;
using parla::text::bead_prior;
using parla::text::BeadKind;
using parla::text::gale_church_align;
using parla::text::GaleChurchOptions;
using parla::text::GaleChurchResult;
using parla::text::log_two_tailed_probability;
using parla::text::standard_normal_cdf;

namespace gale_church_test {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Approx with an absolute margin only (Catch's default relative epsilon, 1e-5, would hide real differences).
Approx within(double expected, double margin) { return Approx(expected).epsilon(0).margin(margin); }
// ... and relative to the magnitude, for costs summed over thousands of beads.
Approx within_relative(double expected, double tolerance = 1e-9) {
  return within(expected, tolerance * (1.0 + std::fabs(expected)));
}

// The paper's bead model written out again, independently of the library: (source, target) sentence counts,
// Table 5 priors split evenly between the two directions, delta with variance on (l1 + l2/c) / 2, and
// Prob(delta | match) = 2 (1 - Phi(|delta|)) = erfc(|delta| / sqrt 2).
struct RefKind {
  BeadKind kind;
  int ds, dt;
  double prior;
};
const RefKind kRefKinds[] = {{BeadKind::k1_1, 1, 1, 0.89},      {BeadKind::k1_0, 1, 0, 0.00495},
                             {BeadKind::k0_1, 0, 1, 0.00495},   {BeadKind::k2_1, 2, 1, 0.0445},
                             {BeadKind::k1_2, 1, 2, 0.0445},    {BeadKind::k2_2, 2, 2, 0.011}};

double ref_cost(double prior, double l1, double l2, double c = 1.0, double s2 = 6.8) {
  const double mean = (l1 + l2 / c) / 2;
  const double delta = mean > 0 ? (l2 - l1 * c) / std::sqrt(mean * s2) : 0.0;
  return -std::log(prior) - std::log(std::erfc(std::fabs(delta) / std::sqrt(2.0)));
}

double sum(const std::vector<int>& v, int begin, int count) {
  double s = 0;
  for (int k = begin; k < begin + count; ++k) s += v[k];
  return s;
}

const RefKind& ref_kind(BeadKind k) {
  for (const auto& r : kRefKinds)
    if (r.kind == k) return r;
  throw std::logic_error("unknown kind");
}

// Total cost of the result's beads recomputed with ref_cost.
double recomputed_cost(const GaleChurchResult& r, const std::vector<int>& src, const std::vector<int>& tgt,
                       double c = 1.0, double s2 = 6.8) {
  double total = 0;
  for (const Bead& b : r.beads)
    total += ref_cost(ref_kind(b.kind).prior, sum(src, b.src_begin, b.src_count),
                      sum(tgt, b.tgt_begin, b.tgt_count), c, s2);
  return total;
}

// Beads are contiguous, cover both sides, agree with their kind, and their costs are finite and add up.
void check_well_formed(const GaleChurchResult& r, size_t n, size_t m) {
  int i = 0, j = 0;
  double total = 0;
  for (const Bead& b : r.beads) {
    REQUIRE(b.src_begin == i);
    REQUIRE(b.tgt_begin == j);
    REQUIRE(b.src_count == ref_kind(b.kind).ds);
    REQUIRE(b.tgt_count == ref_kind(b.kind).dt);
    REQUIRE(std::isfinite(b.cost));
    REQUIRE(b.cost > 0);
    i += b.src_count, j += b.tgt_count;
    total += b.cost;
  }
  REQUIRE(i == static_cast<int>(n));
  REQUIRE(j == static_cast<int>(m));
  REQUIRE(std::isfinite(r.cost));
  CHECK(total == r.cost);  // bit for bit: the programme adds the same bead costs in the same order
}

// Minimum over every bead sequence from (i, j) to (n, m), enumerated without memoisation.
double brute_force(const std::vector<int>& src, const std::vector<int>& tgt, int i, int j) {
  const int n = static_cast<int>(src.size()), m = static_cast<int>(tgt.size());
  if (i == n && j == m) return 0.0;
  double best = kInf;
  for (const auto& k : kRefKinds) {
    if (i + k.ds > n || j + k.dt > m) continue;
    const double here = ref_cost(k.prior, sum(src, i, k.ds), sum(tgt, j, k.dt));
    best = std::min(best, here + brute_force(src, tgt, i + k.ds, j + k.dt));
  }
  return best;
}

// The whole (n+1) x (m+1) table of section 4, no band.
double full_dp(const std::vector<int>& src, const std::vector<int>& tgt, double c = 1.0, double s2 = 6.8) {
  const int n = static_cast<int>(src.size()), m = static_cast<int>(tgt.size());
  std::vector<std::vector<double>> d(n + 1, std::vector<double>(m + 1, kInf));
  d[0][0] = 0;
  for (int i = 0; i <= n; ++i)
    for (int j = 0; j <= m; ++j)
      for (const auto& k : kRefKinds)
        if (i >= k.ds && j >= k.dt)
          d[i][j] = std::min(d[i][j], d[i - k.ds][j - k.dt] + ref_cost(k.prior, sum(src, i - k.ds, k.ds),
                                                                       sum(tgt, j - k.dt, k.dt), c, s2));
  return d[n][m];
}

// Distributions written out here because std::normal_distribution and friends are implementation-defined:
// the fixed seeds give the same data with every standard library.
class Random {
 public:
  explicit Random(uint32_t seed) : engine_(seed) {}
  double uniform() { return (engine_() + 0.5) / 4294967296.0; }  // in (0, 1)
  int uniform_int(int lo, int hi) { return lo + static_cast<int>(uniform() * (hi - lo + 1)); }
  double normal() { return std::sqrt(-2.0 * std::log(uniform())) * std::cos(2.0 * std::acos(-1.0) * uniform()); }
  int pick(const std::vector<double>& weights) {
    double total = 0, u = uniform();
    for (double w : weights) total += w;
    for (size_t k = 0; k + 1 < weights.size(); ++k)
      if ((u -= weights[k] / total) < 0) return static_cast<int>(k);
    return static_cast<int>(weights.size()) - 1;
  }

 private:
  std::mt19937 engine_;  // its output sequence is fixed by the standard
};

std::vector<int> random_lengths(Random& rng, int count, int lo, int hi) {
  std::vector<int> v(count);
  for (int& x : v) x = rng.uniform_int(lo, hi);
  return v;
}

// A parallel text with a known alignment: bead kinds drawn with the paper's frequencies, each bead's target
// length c * l1 plus normal noise of variance s2 * l1 (the paper's model), split among its target sentences.
struct Synthetic {
  std::vector<int> src, tgt;
  std::vector<Bead> beads;
};

// Sentence lengths are roughly log-normal; median 100 characters.
int sentence_length(Random& rng) {
  return std::max(1, static_cast<int>(std::lround(100.0 * std::exp(0.7 * rng.normal()))));
}

void add_bead(Synthetic& s, Random& rng, BeadKind kind, double c, double s2) {
  const int ds = ref_kind(kind).ds, dt = ref_kind(kind).dt;
  s.beads.push_back({static_cast<int>(s.src.size()), ds, static_cast<int>(s.tgt.size()), dt, kind, 0});
  double l1 = 0;
  for (int k = 0; k < ds; ++k) s.src.push_back(sentence_length(rng)), l1 += s.src.back();
  double l2 = ds == 0 ? sentence_length(rng) : c * l1 + std::sqrt(s2 * l1) * rng.normal();
  const int total = std::max(2, static_cast<int>(std::lround(l2)));
  if (dt == 1) s.tgt.push_back(total);
  if (dt == 2) {
    const int first = std::max(1, static_cast<int>(std::lround(total * (0.3 + 0.4 * rng.uniform()))));
    s.tgt.push_back(first);
    s.tgt.push_back(std::max(1, total - first));
  }
}

Synthetic synthetic(Random& rng, int beads, double c = 1.0, double s2 = 6.8) {
  // Table 5's frequencies: 1-1 .89, 1-0/0-1 .0099, 2-1/1-2 .089, 2-2 .011.
  const std::vector<double> frequency = {0.89, 0.00495, 0.00495, 0.0445, 0.0445, 0.011};
  Synthetic s;
  for (int k = 0; k < beads; ++k) add_bead(s, rng, static_cast<BeadKind>(rng.pick(frequency)), c, s2);
  return s;
}

// Cost of the true alignment under the model, recomputed with ref_cost.
double truth_cost(const Synthetic& s, double c) {
  GaleChurchResult truth;
  truth.beads = s.beads;
  return recomputed_cost(truth, s.src, s.tgt, c);
}

// Fraction of the true beads found exactly (same start, same kind). src_begin + tgt_begin strictly increases
// along a path, so one merge-like pass pairs them.
double recovered_fraction(const std::vector<Bead>& truth, const std::vector<Bead>& found) {
  size_t f = 0, hits = 0;
  for (const Bead& t : truth) {
    while (f < found.size() && found[f].src_begin + found[f].tgt_begin < t.src_begin + t.tgt_begin) ++f;
    if (f < found.size() && found[f].src_begin == t.src_begin && found[f].tgt_begin == t.tgt_begin &&
        found[f].kind == t.kind)
      ++hits;
  }
  return truth.empty() ? 1.0 : static_cast<double>(hits) / truth.size();
}


TEST_CASE("gale_church: bead kinds are named as in the paper") {
  CHECK(std::string(bead_kind_name(BeadKind::k1_1)) == "1-1");
  CHECK(std::string(bead_kind_name(BeadKind::k1_0)) == "1-0");
  CHECK(std::string(bead_kind_name(BeadKind::k0_1)) == "0-1");
  CHECK(std::string(bead_kind_name(BeadKind::k2_1)) == "2-1");
  CHECK(std::string(bead_kind_name(BeadKind::k1_2)) == "1-2");
  CHECK(std::string(bead_kind_name(BeadKind::k2_2)) == "2-2");
}

TEST_CASE("gale_church: priors are Table 5's, shared figures split evenly between directions") {
  CHECK(bead_prior(BeadKind::k1_1) == Approx(0.89).epsilon(1e-12));
  CHECK(bead_prior(BeadKind::k1_0) + bead_prior(BeadKind::k0_1) == Approx(0.0099).epsilon(1e-12));
  CHECK(bead_prior(BeadKind::k2_1) + bead_prior(BeadKind::k1_2) == Approx(0.089).epsilon(1e-12));
  CHECK(bead_prior(BeadKind::k2_2) == Approx(0.011).epsilon(1e-12));
  double total = 0;
  for (const auto& k : kRefKinds) total += bead_prior(k.kind);
  CHECK(total == Approx(0.9999).epsilon(1e-12));
}

TEST_CASE("gale_church: Phi and the two-tailed probability match published normal tables") {
  CHECK(standard_normal_cdf(0.0) == 0.5);
  CHECK(standard_normal_cdf(1.96) == Approx(0.9750021).epsilon(1e-7));
  CHECK(standard_normal_cdf(-1.96) == Approx(0.0249979).epsilon(1e-5));
  CHECK(standard_normal_cdf(1.0) == Approx(0.8413447).epsilon(1e-7));
  // 2 (1 - Phi(|d|)) at the usual critical values.
  CHECK(std::exp(log_two_tailed_probability(0.0)) == 1.0);
  CHECK(std::exp(log_two_tailed_probability(1.0)) == Approx(0.3173105).epsilon(1e-6));
  CHECK(std::exp(log_two_tailed_probability(-1.96)) == Approx(0.0499958).epsilon(1e-5));
  CHECK(std::exp(log_two_tailed_probability(2.5758293)) == Approx(0.01).epsilon(1e-6));
  CHECK(std::exp(log_two_tailed_probability(3.0)) == Approx(0.0026998).epsilon(1e-4));
  // ... and it is 2 (1 - Phi(|d|)), computed without the cancellation in 1 - Phi.
  for (double d : {-2.5, -0.3, 0.7, 1.5, 4.0})
    CHECK(std::exp(log_two_tailed_probability(d)) ==
          Approx(2 * (1 - standard_normal_cdf(std::fabs(d)))).epsilon(1e-9));
}

TEST_CASE("gale_church: the tail stays finite and accurate where erfc underflows") {
  // Where erfc is still representable, the asymptotic branch agrees with log(erfc).
  for (double d : {28.0, 28.3, 28.4, 30.0, 33.0, 36.0}) {
    INFO("delta " << d);
    CHECK(log_two_tailed_probability(d) == within(std::log(std::erfc(d / std::sqrt(2.0))), 1e-9));
  }
  // Beyond, erfc underflows; log erfc(x) from mpmath at 30 digits.
  CHECK(log_two_tailed_probability(30 * std::sqrt(2.0)) == Approx(-903.974117110643878).epsilon(1e-12));
  CHECK(log_two_tailed_probability(100 * std::sqrt(2.0)) == Approx(-10005.1775851226643).epsilon(1e-12));
  CHECK(log_two_tailed_probability(1000 * std::sqrt(2.0)) == Approx(-1000007.48012072191).epsilon(1e-12));
  for (double d : {40.0, 1e3, 1e6}) {
    const double t = log_two_tailed_probability(d);
    CHECK(std::isfinite(t));
    CHECK(t == Approx(-d * d / 2).epsilon(1e-2));
  }
  CHECK(log_two_tailed_probability(40.0) > log_two_tailed_probability(41.0));
}

TEST_CASE("gale_church: a 1-1 bead of equal lengths costs exactly -log 0.89") {
  CHECK(bead_cost(BeadKind::k1_1, 100, 100) == -std::log(0.89));
  CHECK(bead_cost(BeadKind::k1_1, 0, 0) == -std::log(0.89));
  CHECK(bead_cost(BeadKind::k2_2, 37, 37) == -std::log(0.011));
  GaleChurchOptions o;
  o.c = 1.5;
  CHECK(bead_cost(BeadKind::k1_1, 100, 150, o) == -std::log(0.89));
}

TEST_CASE("gale_church: bead costs follow the formula, are finite for empty and huge sides, and symmetric") {
  for (const auto& k : kRefKinds)
    for (int l1 : {0, 1, 17, 120, 400})
      for (int l2 : {0, 3, 20, 130, 380}) {
        INFO(bead_kind_name(k.kind) << " " << l1 << " " << l2);
        CHECK(bead_cost(k.kind, l1, l2) == Approx(ref_cost(k.prior, l1, l2)).epsilon(1e-12));
      }
  for (int64_t l : {int64_t{0}, int64_t{1}, int64_t{10'000'000}, int64_t{4'000'000'000}}) {
    CHECK(std::isfinite(bead_cost(BeadKind::k1_0, l, 0)));
    CHECK(std::isfinite(bead_cost(BeadKind::k0_1, 0, l)));
    CHECK(std::isfinite(bead_cost(BeadKind::k1_1, l, 0)));
    CHECK(bead_cost(BeadKind::k1_0, l, 0) == bead_cost(BeadKind::k0_1, 0, l));
  }
  CHECK(bead_cost(BeadKind::k1_1, 10'000'000, 0) > 1e6);
}

TEST_CASE("gale_church: the programme finds the brute-force minimum over all bead sequences of tiny inputs") {
  Random rng(1993);
  for (int trial = 0; trial < 600; ++trial) {
    const auto src = random_lengths(rng, rng.uniform_int(0, 4), 0, 120);
    const auto tgt = random_lengths(rng, rng.uniform_int(0, 4), 0, 120);
    GaleChurchOptions o;
    o.min_band = 1 + trial % 3;  // bands narrower than the grid must widen to the same answer
    const auto r = gale_church_align(src, tgt, o);
    INFO("trial " << trial << " n " << src.size() << " m " << tgt.size());
    check_well_formed(r, src.size(), tgt.size());
    const double best = brute_force(src, tgt, 0, 0);
    CHECK(r.cost == within(best, 1e-9));
    CHECK(recomputed_cost(r, src, tgt) == within(best, 1e-9));
    CHECK_FALSE(r.band_limited);
  }
}

TEST_CASE("gale_church: the banded programme equals the full O(n*m) one, also for unequal n and m") {
  Random rng(19);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<int> src, tgt;
    if (trial % 2 == 0) {  // parallel text
      auto s = synthetic(rng, rng.uniform_int(0, 300));
      src = s.src, tgt = s.tgt;
    } else {  // unrelated sides of arbitrary sizes: the optimum wanders off the diagonal
      src = random_lengths(rng, rng.uniform_int(0, 300), 1, 200);
      tgt = random_lengths(rng, rng.uniform_int(0, 300), 1, 200);
    }
    GaleChurchOptions o;
    if (trial % 4 == 3) o.c = 1.2;
    const auto r = gale_church_align(src, tgt, o);
    INFO("trial " << trial << " n " << src.size() << " m " << tgt.size() << " band " << r.band);
    check_well_formed(r, src.size(), tgt.size());
    const double full = full_dp(src, tgt, o.c, o.s2);
    CHECK(r.cost == within_relative(full));
    CHECK(recomputed_cost(r, src, tgt, o.c, o.s2) == within_relative(full));
    CHECK_FALSE(r.band_limited);
  }
}

TEST_CASE("gale_church: most beads of a synthetic parallel text with the paper's variance are recovered") {
  Random rng(42);
  for (double c : {1.0, 1.15}) {
    const auto s = synthetic(rng, 2000, c);
    GaleChurchOptions o;
    o.c = c;
    const auto r = gale_church_align(s.src, s.tgt, o);
    check_well_formed(r, s.src.size(), s.tgt.size());
    const double recovered = recovered_fraction(s.beads, r.beads);
    std::printf("gale_church synthetic, paper's variance, c=%.2f: %.2f%% of beads recovered\n", c,
                100 * recovered);
    INFO("c " << c << " recovered " << recovered);
    // Noise of variance 6.8 per character is a standard deviation of 26 characters on a 100-character
    // sentence, and there are no paragraph anchors (the paper aligned within paragraphs): the model itself then
    // prefers another path in places. 1-0 and 0-1 beads are never found (as in the paper), and noisy
    // neighbours trade a 1-1 pair for a 2-2, or 2-1 + 1-2. 86-88% of the beads are recovered.
    CHECK(recovered >= 0.80);
    // Those errors are the model's, not the search's: the path found is at least as cheap as the truth.
    CHECK(r.cost <= truth_cost(s, c) + 1e-9);
    CHECK_FALSE(r.band_limited);
  }
}

TEST_CASE("gale_church: at least 95% of the beads are recovered when the length noise is a third of the paper's") {
  // (variance divisor, required recovery): standard deviation halved, then a third; the aligner keeps s2 = 6.8.
  for (auto [divisor, required] : {std::pair{4.0, 0.93}, std::pair{9.0, 0.95}})
    for (uint32_t seed : {43u, 44u, 45u}) {
      Random rng(seed);
      const auto s = synthetic(rng, 2000, 1.0, 6.8 / divisor);
      const auto r = gale_church_align(s.src, s.tgt);
      const double recovered = recovered_fraction(s.beads, r.beads);
      std::printf("gale_church synthetic, variance / %.0f, seed %u: %.2f%% of beads recovered\n", divisor, seed,
                  100 * recovered);
      INFO("variance / " << divisor << " seed " << seed << " recovered " << recovered);
      CHECK(recovered >= required);
      CHECK(r.cost <= truth_cost(s, 1.0) + 1e-9);
    }
}

TEST_CASE("gale_church: a path far from the diagonal is found by widening the band") {
  Random rng(7);
  // A source that splits 200 sentences in two at the start: the true path reaches (400, 200), 143 target
  // sentences below the diagonal of the 1400 x 1200 grid.
  Synthetic s;
  for (int k = 0; k < 200; ++k) add_bead(s, rng, BeadKind::k2_1, 1.0, 6.8 / 4);
  for (int k = 0; k < 1000; ++k) add_bead(s, rng, BeadKind::k1_1, 1.0, 6.8 / 4);
  const auto r = gale_church_align(s.src, s.tgt);
  check_well_formed(r, s.src.size(), s.tgt.size());
  CHECK_FALSE(r.band_limited);
  CHECK(r.band >= 160);
  CHECK(recovered_fraction(s.beads, r.beads) >= 0.95);
  CHECK(r.cost == within_relative(full_dp(s.src, s.tgt)));

  GaleChurchOptions narrow;
  narrow.max_band = 40;
  const auto limited = gale_church_align(s.src, s.tgt, narrow);
  check_well_formed(limited, s.src.size(), s.tgt.size());
  CHECK(limited.band_limited);
  CHECK(limited.band == 40);
  CHECK(limited.cost > r.cost);
}

TEST_CASE("gale_church: a long deletion at the start is found although the banded path never nears the edge") {
  // 200 untranslated source sentences, then 1000 1-1 beads. The model does not return 200 1-0 beads (it absorbs
  // deletions into 2-1 beads: 1-0 is its weakest bead, as the paper reports), but its optimum leaves the
  // diagonal by well over 100 sentences, while a narrow band holds a path of its own clear of the edge: only
  // the confirming search at twice the width shows it beaten.
  for (uint32_t seed : {1u, 2u, 3u}) {
    Random rng(seed);
    Synthetic s;
    for (int k = 0; k < 200; ++k) add_bead(s, rng, BeadKind::k1_0, 1.0, 6.8);
    for (int k = 0; k < 1000; ++k) add_bead(s, rng, BeadKind::k1_1, 1.0, 6.8);
    const auto r = gale_church_align(s.src, s.tgt);
    INFO("seed " << seed << " band " << r.band);
    check_well_formed(r, s.src.size(), s.tgt.size());
    CHECK_FALSE(r.band_limited);
    CHECK(r.cost == within_relative(full_dp(s.src, s.tgt)));
  }
}

TEST_CASE("gale_church: empty sides align to 1-0 or 0-1 beads only") {
  const auto none = gale_church_align({}, {});
  CHECK(none.beads.empty());
  CHECK(none.cost == 0);
  CHECK_FALSE(none.band_limited);

  const auto only_target = gale_church_align({}, {5, 0, 70});
  check_well_formed(only_target, 0, 3);
  REQUIRE(only_target.beads.size() == 3);
  for (const Bead& b : only_target.beads) CHECK(b.kind == BeadKind::k0_1);

  const auto only_source = gale_church_align({12, 40}, {});
  check_well_formed(only_source, 2, 0);
  REQUIRE(only_source.beads.size() == 2);
  for (const Bead& b : only_source.beads) CHECK(b.kind == BeadKind::k1_0);
}

TEST_CASE("gale_church: one sentence on each side is one 1-1 bead") {
  const auto r = gale_church_align({50}, {55});
  check_well_formed(r, 1, 1);
  REQUIRE(r.beads.size() == 1);
  CHECK(r.beads[0].kind == BeadKind::k1_1);
}

TEST_CASE("gale_church: zero and huge lengths give finite costs") {
  const auto zeros = gale_church_align(std::vector<int>(50, 0), std::vector<int>(30, 0));
  check_well_formed(zeros, 50, 30);
  const auto mixed = gale_church_align({0, 10'000'000, 3, 0, 10'000'000}, {10'000'000, 0, 0, 5});
  check_well_formed(mixed, 5, 4);
  const auto lopsided = gale_church_align({10'000'000, 10'000'000}, {1, 1, 1});
  check_well_formed(lopsided, 2, 3);
  CHECK(lopsided.cost > 1e5);
}

TEST_CASE("gale_church: very unequal n and m still reach both corners") {
  Random rng(3);
  const auto one = random_lengths(rng, 1, 10, 100);
  const auto many = random_lengths(rng, 3000, 10, 100);
  GaleChurchOptions o;
  o.min_band = 1;
  check_well_formed(gale_church_align(one, many, o), 1, 3000);
  check_well_formed(gale_church_align(many, one, o), 3000, 1);
  const auto few = random_lengths(rng, 7, 10, 100);
  const auto r = gale_church_align(few, many, o);
  check_well_formed(r, 7, 3000);
  CHECK(r.cost == within_relative(full_dp(few, many)));
}

TEST_CASE("gale_church: invalid lengths and options are rejected") {
  CHECK_THROWS_AS(gale_church_align({1, -1}, {2}), std::invalid_argument);
  GaleChurchOptions o;
  o.c = 0;
  CHECK_THROWS_AS(gale_church_align({1}, {1}, o), std::invalid_argument);
  o = {};
  o.s2 = -1;
  CHECK_THROWS_AS(gale_church_align({1}, {1}, o), std::invalid_argument);
  o = {};
  o.min_band = 0;
  CHECK_THROWS_AS(gale_church_align({1}, {1}, o), std::invalid_argument);
  o = {};
  o.max_band = 10;
  CHECK_THROWS_AS(gale_church_align({1}, {1}, o), std::invalid_argument);
}

TEST_CASE("gale_church: 20000 sentences a side align, and the timings are printed") {
  Random rng(2024);
  const auto s = synthetic(rng, 20000);
  const auto unrelated_src = random_lengths(rng, 20000, 1, 200);
  const auto unrelated_tgt = random_lengths(rng, 20000, 1, 200);
  auto timed = [](const char* what, const std::vector<int>& src, const std::vector<int>& tgt) -> void {
    const auto start = std::chrono::steady_clock::now();
    const auto r = gale_church_align(src, tgt);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("gale_church %s: n=%zu m=%zu %.3f s, band %d%s\n", what, src.size(), tgt.size(), seconds, r.band,
                r.band_limited ? " (limited)" : "");
    check_well_formed(r, src.size(), tgt.size());
  };
  // Not a timed test (sanitizer builds run it too): the figures are printed, a hang is what it catches.
  Synthetic one_to_one;
  for (int k = 0; k < 20000; ++k) add_bead(one_to_one, rng, BeadKind::k1_1, 1.0, 6.8);
  timed("1-1 beads only", one_to_one.src, one_to_one.tgt);
  timed("Table 5 bead mix", s.src, s.tgt);  // the true path drifts about 80 sentences off the diagonal
  timed("unrelated", unrelated_src, unrelated_tgt);  // the optimum wanders further still
}

}  // namespace gale_church_test
