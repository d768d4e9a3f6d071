#include "text/gale_church.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace parla::text {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr uint8_t kNoMove = 255;

// Index = static_cast<int>(BeadKind): sentences taken from each side by the move of section 4.
constexpr int kSourceCount[kBeadKinds] = {1, 1, 0, 2, 1, 2};
constexpr int kTargetCount[kBeadKinds] = {1, 0, 1, 1, 2, 2};

// Table 5 gives one figure for "1-0 or 0-1" (0.0099) and one for "2-1 or 1-2" (0.089). Splitting each evenly
// keeps the six priors a distribution (they sum to 0.9999, as the table does), so the distance stays the
// -log Prob(match | delta) of the paper's Bayes derivation; the only effect is a constant log 2 added to
// each of the four asymmetric beads.
constexpr double kPrior[kBeadKinds] = {0.89, 0.0099 / 2, 0.0099 / 2, 0.089 / 2, 0.089 / 2, 0.011};

// Initialised before main; nothing calls into this file from a static initialiser.
const double kNegLogPrior[kBeadKinds] = {-std::log(kPrior[0]), -std::log(kPrior[1]), -std::log(kPrior[2]),
                                         -std::log(kPrior[3]), -std::log(kPrior[4]), -std::log(kPrior[5])};

// Above this x, erfc(x) (about 5e-176 at 20) is near its underflow at x ~ 27, so log erfc comes from the
// asymptotic series instead; its truncation error there is below 1e-11.
constexpr double kAsymptoticFrom = 20.0;
constexpr double kSqrtPi = 1.7724538509055160273;

// log erfc(x) for x >= kAsymptoticFrom, from Abramowitz & Stegun 7.1.23:
// sqrt(pi) x exp(x^2) erfc(x) ~ 1 - 1/(2x^2) + 1*3/(2x^2)^2 - 1*3*5/(2x^2)^3 + 1*3*5*7/(2x^2)^4.
double log_erfc_asymptotic(double x) {
  const double u = 1.0 / (2.0 * x * x);
  const double series = 1.0 - u * (1.0 - 3.0 * u * (1.0 - 5.0 * u * (1.0 - 7.0 * u)));
  return -x * x - std::log(x * kSqrtPi) + std::log(series);
}

// The bead model's length term with 1/c and 1/s2 precomputed. x^2 = delta^2 / 2 is the squared argument of
// erfc, with the variance on (l1 + l2/c) / 2 (see length_delta).
struct LengthModel {
  explicit LengthModel(const GaleChurchOptions& o) : c(o.c), inv_c(1.0 / o.c), inv_s2(1.0 / o.s2) {}
  double x_squared(int64_t l1, int64_t l2) const {
    const double a = static_cast<double>(l1), b = static_cast<double>(l2);
    const double twice_mean = a + b * inv_c, d = b - a * c;
    return twice_mean > 0 ? d * d * inv_s2 / twice_mean : 0.0;
  }
  double c, inv_c, inv_s2;
};

// -log(2 (1 - Phi(|delta|))) = -log erfc(x), given x^2.
double tail_cost(double x_squared) {
  const double x = std::sqrt(x_squared);
  return x < kAsymptoticFrom ? -std::log(std::erfc(x)) : -log_erfc_asymptotic(x);
}

int64_t floor_div(int64_t a, int64_t b) {  // b > 0
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
int64_t ceil_div(int64_t a, int64_t b) {  // b > 0
  return -floor_div(-a, b);
}

// The cells searched: row i (i source sentences consumed) holds j in [lo(i), hi(i)]. A cell is in the band
// when it is within `half_width` of the straight line from (0,0) to (n,m) measured along the source axis OR
// along the target axis, i.e. within half_width sentences of the shorter side and half_width * (longer/shorter)
// of the longer. This is symmetric in the two sides, equals |j - i| <= half_width when n = m, always holds both
// corners, and consecutive rows overlap (the line moves less than one row width per row), so (n,m) is
// reachable from (0,0) however unequal n and m are. Cells: about 2 * half_width * max(n, m).
class DiagonalBand {
 public:
  DiagonalBand(int n, int m, int64_t half_width) : lo_(n + 1), hi_(n + 1), offset_(n + 2, 0) {
    // Beyond max(n, m) the band is the whole grid; clamping keeps the products below in range.
    const int64_t w = std::min<int64_t>(half_width, std::max({n, m, 1}));
    for (int i = 0; i <= n; ++i) {
      if (n == 0) {
        lo_[i] = 0, hi_[i] = m;
      } else {
        const int64_t lo_target_axis = ceil_div(int64_t{i} * m - w * n, n);  // j >= i*m/n - w
        const int64_t hi_target_axis = floor_div(int64_t{i} * m + w * n, n);
        const int64_t lo_source_axis = ceil_div((i - w) * m, n);  // j >= (i - w) * m / n
        const int64_t hi_source_axis = floor_div((i + w) * m, n);
        lo_[i] = static_cast<int>(std::max<int64_t>(0, std::min(lo_target_axis, lo_source_axis)));
        hi_[i] = static_cast<int>(std::min<int64_t>(m, std::max(hi_target_axis, hi_source_axis)));
      }
      whole_grid_ = whole_grid_ && lo_[i] == 0 && hi_[i] == m;
      offset_[i + 1] = offset_[i] + (hi_[i] - lo_[i] + 1);
      max_width_ = std::max(max_width_, hi_[i] - lo_[i] + 1);
    }
  }
  int lo(int i) const { return lo_[i]; }
  int hi(int i) const { return hi_[i]; }
  bool contains(int i, int j) const { return j >= lo_[i] && j <= hi_[i]; }
  int64_t cell(int i, int j) const { return offset_[i] + (j - lo_[i]); }
  int64_t cells() const { return offset_.back(); }
  int max_width() const { return max_width_; }
  bool whole_grid() const { return whole_grid_; }  // no cell cut off: the result is the exact optimum

 private:
  std::vector<int> lo_, hi_;
  std::vector<int64_t> offset_;
  int max_width_ = 0;
  bool whole_grid_ = true;
};

// Prefix sums in 64 bits: summed lengths of long inputs overflow int.
std::vector<int64_t> prefix_sums(const std::vector<int>& lengths, const char* side) {
  std::vector<int64_t> sums(lengths.size() + 1, 0);
  for (size_t k = 0; k < lengths.size(); ++k) {
    if (lengths[k] < 0)
      throw std::invalid_argument(std::string("gale_church_align: negative length in ") + side + " sentence " +
                                  std::to_string(k));
    sums[k + 1] = sums[k] + lengths[k];
  }
  return sums;
}

void validate(const GaleChurchOptions& o) {
  if (!(o.c > 0) || !std::isfinite(o.c)) throw std::invalid_argument("gale_church_align: c must be positive");
  if (!(o.s2 > 0) || !std::isfinite(o.s2)) throw std::invalid_argument("gale_church_align: s2 must be positive");
  if (o.min_band < 1) throw std::invalid_argument("gale_church_align: min_band must be at least 1");
  if (o.max_band < o.min_band) throw std::invalid_argument("gale_church_align: max_band must be >= min_band");
}

struct Lattice {
  std::vector<uint8_t> move;  // one byte per banded cell: the BeadKind of the last bead, or kNoMove
  double cost = kInf;         // cost of the best path to (n, m)
};

// The costs of one row of the band, cells lo..hi; rows before the first are empty (lo > hi).
struct RowView {
  const double* cost = nullptr;
  int lo = 1, hi = 0;
};

// D(i,j) and its move, given rows i, i-1, i-2 as back[0..2]. Each move has a cheap lower bound, prev + prior
// cost + x^2 (erfc(x) <= exp(-x^2), so the tail costs at least x^2); the move with the lowest bound is costed
// first and the others only if their bound still beats it, so erfc and log run about once per cell rather than
// six times. Ties go to the earlier kind (1-1 first).
std::pair<double, uint8_t> best_into(int i, int j, const RowView (&back)[3], const std::vector<int64_t>& src,
                                     const std::vector<int64_t>& tgt, const LengthModel& model) {
  double bound[kBeadKinds], prev[kBeadKinds], x2[kBeadKinds];
  int first = -1;
  for (int k = 0; k < kBeadKinds; ++k) {
    bound[k] = kInf;
    const RowView& row = back[kSourceCount[k]];
    const int pj = j - kTargetCount[k];
    if (pj < row.lo || pj > row.hi) continue;
    prev[k] = row.cost[pj - row.lo];
    x2[k] = model.x_squared(src[i] - src[i - kSourceCount[k]], tgt[j] - tgt[pj]);
    bound[k] = prev[k] + kNegLogPrior[k] + x2[k];
    if (first < 0 || bound[k] < bound[first]) first = k;
  }
  if (first < 0) return {kInf, kNoMove};
  // prev + (prior + tail): the sum bead_cost gives, so the beads' costs add up to D(n,m) bit for bit.
  auto cost = [&](int k) { return prev[k] + (kNegLogPrior[k] + tail_cost(x2[k])); };
  double best = cost(first);
  int move = first;
  for (int k = 0; k < kBeadKinds; ++k) {
    if (k == first || bound[k] > best) continue;
    const double c = cost(k);
    if (c < best || (c == best && k < move)) best = c, move = k;
  }
  return {best, static_cast<uint8_t>(move)};
}

// The recurrence of section 4: D(i,j) = min over bead kinds of D(i - ds, j - dt) + distance(bead), with
// D(0,0) = 0 and cells outside the band at +inf. Moves reach back at most two rows, so three rolling rows of
// costs suffice; only the backpointers are kept for the whole band.
Lattice fill(const DiagonalBand& band, const std::vector<int64_t>& src, const std::vector<int64_t>& tgt,
             const GaleChurchOptions& options) {
  const int n = static_cast<int>(src.size()) - 1;
  const LengthModel model(options);
  std::vector<double> rows[3];
  for (auto& r : rows) r.assign(band.max_width(), kInf);
  Lattice lattice;
  lattice.move.assign(band.cells(), kNoMove);
  for (int i = 0; i <= n; ++i) {
    RowView back[3];  // back[d]: row i - d; row i itself for the 0-1 move, whose cell j - 1 is already done
    for (int d = 0; d <= std::min(i, 2); ++d) back[d] = {rows[(i - d) % 3].data(), band.lo(i - d), band.hi(i - d)};
    const int lo = band.lo(i), hi = band.hi(i);
    double* cur = rows[i % 3].data();
    uint8_t* moves = lattice.move.data() + band.cell(i, lo);
    for (int j = lo; j <= hi; ++j) {
      const auto [cost, move] = best_into(i, j, back, src, tgt, model);
      cur[j - lo] = (i == 0 && j == 0) ? 0.0 : cost;
      moves[j - lo] = move;
    }
  }
  lattice.cost = rows[n % 3][static_cast<int>(tgt.size()) - 1 - band.lo(n)];
  return lattice;
}

std::vector<Bead> trace_back(const DiagonalBand& band, const Lattice& lattice, const std::vector<int64_t>& src,
                             const std::vector<int64_t>& tgt, const GaleChurchOptions& options) {
  std::vector<Bead> beads;
  int i = static_cast<int>(src.size()) - 1, j = static_cast<int>(tgt.size()) - 1;
  while (i > 0 || j > 0) {
    const uint8_t k = lattice.move[band.cell(i, j)];
    if (k == kNoMove) throw std::logic_error("gale_church_align: (n, m) unreachable in the band");
    const auto kind = static_cast<BeadKind>(k);
    const int pi = i - kSourceCount[k], pj = j - kTargetCount[k];
    // Recomputed with the same arguments as in fill, so the beads' costs add up to the lattice's bit for bit.
    beads.push_back({pi, kSourceCount[k], pj, kTargetCount[k], kind,
                     bead_cost(kind, src[i] - src[pi], tgt[j] - tgt[pj], options)});
    i = pi, j = pj;
  }
  std::reverse(beads.begin(), beads.end());
  return beads;
}

// True when a bead of up to two sentences per side, started from some node of the path, could land outside
// the band: the band may then have cut off a cheaper path, and is widened.
bool path_near_band_edge(const DiagonalBand& band, int n, int m, const std::vector<Bead>& beads) {
  auto near_edge = [&](int i, int j) {
    const int jlo = std::max(0, j - 2), jhi = std::min(m, j + 2);
    for (int r = std::max(0, i - 2); r <= std::min(n, i + 2); ++r)
      if (jlo < band.lo(r) || jhi > band.hi(r)) return true;
    return false;
  };
  if (near_edge(0, 0)) return true;
  for (const Bead& b : beads)
    if (near_edge(b.src_begin + b.src_count, b.tgt_begin + b.tgt_count)) return true;
  return false;
}

// What one search at a given band width found.
struct Pass {
  bool done = false;       // false before the first search
  bool near_edge = false;  // its best path came near the band's edge
  double cost = kInf;
};

// Whether the search at the current band width can stand. The band is doubled while the best path comes near
// its edge, as the edge may have cut off a cheaper path. The edge test alone misses optima far off the diagonal
// that the banded path never approaches: with a long deletion near one end, a narrow band spreads the deleted
// sentences along the diagonal instead and its path stays clear of the edge (half of the random cases of 200
// deletions in 1200 sentences failed that way; so did stopping at the first clear path after one that touched).
// So a path clear of the edge stands only once a search at twice the width has not lowered the cost.
bool widening_settled(const Pass& previous, const Pass& current) {
  if (current.near_edge || !previous.done) return false;
  // Relative tolerance: the same path summed along a different route is not a gain.
  return !(current.cost < previous.cost - 1e-9 * (1.0 + std::fabs(current.cost)));
}

}  // namespace

const char* bead_kind_name(BeadKind k) {
  static const char* const names[kBeadKinds] = {"1-1", "1-0", "0-1", "2-1", "1-2", "2-2"};
  return names[static_cast<int>(k)];
}

double bead_prior(BeadKind k) { return kPrior[static_cast<int>(k)]; }

double standard_normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// 2 * (1 - Phi(|delta|)) = erfc(|delta| / sqrt 2); taking erfc directly avoids the cancellation in 1 - Phi.
double log_two_tailed_probability(double delta) {
  const double x = std::fabs(delta) / std::sqrt(2.0);
  return x < kAsymptoticFrom ? std::log(std::erfc(x)) : log_erfc_asymptotic(x);
}

// The paper's variance is l1 * s^2 (section 3), which is 0 for a 0-1 bead and makes delta infinite. We use
// the mean of the two sides' estimates of the source length, (l1 + l2 / c) / 2, instead: it agrees with l1 for
// a well-matched bead (l2 ~ c * l1), is positive whenever either side is non-empty, and treats the two
// languages alike, so 1-0 and 0-1 beads of the same length cost the same (for c = 1). Two empty sides match
// perfectly: delta = 0.
double length_delta(int64_t l1, int64_t l2, const GaleChurchOptions& options) {
  const double a = static_cast<double>(l1), b = static_cast<double>(l2);
  const double mean = (a + b / options.c) / 2.0;
  if (mean <= 0) return 0.0;
  return (b - a * options.c) / std::sqrt(mean * options.s2);
}

// Computed exactly as in the programme (prior first, then tail), so the beads' costs add up to its total.
double bead_cost(BeadKind k, int64_t l1, int64_t l2, const GaleChurchOptions& options) {
  return kNegLogPrior[static_cast<int>(k)] + tail_cost(LengthModel(options).x_squared(l1, l2));
}

GaleChurchResult gale_church_align(const std::vector<int>& src_lengths, const std::vector<int>& tgt_lengths,
                                   const GaleChurchOptions& options) {
  validate(options);
  const auto src = prefix_sums(src_lengths, "source");
  const auto tgt = prefix_sums(tgt_lengths, "target");
  const int n = static_cast<int>(src_lengths.size()), m = static_cast<int>(tgt_lengths.size());
  GaleChurchResult result;
  Pass previous;
  for (int64_t half_width = options.min_band;; half_width = std::min<int64_t>(2 * half_width, options.max_band)) {
    const DiagonalBand band(n, m, half_width);
    const Lattice lattice = fill(band, src, tgt, options);
    result.beads = trace_back(band, lattice, src, tgt, options);
    result.cost = lattice.cost;
    result.band = static_cast<int>(half_width);
    if (band.whole_grid()) break;
    const Pass pass{true, path_near_band_edge(band, n, m, result.beads), lattice.cost};
    if (widening_settled(previous, pass)) break;
    if (half_width >= options.max_band) {
      // A single search (min_band = max_band) whose path is clear of the edge is not flagged: it had no wider
      // search to confirm it by.
      result.band_limited = pass.near_edge || previous.done;
      break;
    }
    previous = pass;
  }
  return result;
}

}  // namespace parla::text
