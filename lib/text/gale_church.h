#pragma once
// Gale & Church (1993), "A Program for Aligning Sentences in Bilingual Corpora", Computational Linguistics 19(1):
// sentence alignment from sentence lengths alone.
//
// The model (sections 3-4 of the paper). A parallel text is a sequence of beads; a bead pairs 0-2 source
// sentences with 0-2 target sentences (1-1, 1-0, 0-1, 2-1, 1-2, 2-2). Within a bead the target length l2 (in
// characters) is modelled as normal around c * l1 with variance l1 * s^2, so
//     delta = (l2 - l1 * c) / sqrt(l1 * s^2)
// is standard normal, and the bead's distance is -log Prob(match | delta), which by Bayes' rule is (up to a
// constant) -log Prob(match) - log Prob(delta | match) with Prob(delta | match) = 2 * (1 - Phi(|delta|)), the
// two-tailed probability of a deviation at least as large. The alignment minimising the summed distance is found
// by the dynamic programme of section 4 over (i source sentences, j target sentences) with one move per bead kind.
//
// Departures from the letter of the paper, each for a reason given in gale_church.cpp:
//   - the variance uses (l1 + l2 / c) / 2 instead of l1 (defined for 0-1 beads, symmetric in the two sides);
//   - the priors of Table 5 given for "1-0 or 0-1" and "2-1 or 1-2" are split evenly between the two directions;
//   - the programme is restricted to a band around the diagonal from (0,0) to (n,m), so that memory is
//     O((n + m) * band) rather than O(n * m). The band is doubled while the best path comes near its edge, and a
//     path clear of the edge is confirmed by one search at twice the width (see widening_settled in the .cpp).
//     This is a heuristic: an optimum far off the diagonal can in principle still be missed.
//
// Cost: about 0.1 us per banded cell on one core (one erfc and one log per cell); 20000 sentences a side take
// a few tenths of a second, more when 2-1 and 1-2 beads let the true path drift far from the diagonal.
#include <cstdint>
#include <vector>

namespace parla::text {

// The six bead kinds of the paper (source sentences - target sentences).
enum class BeadKind : uint8_t { k1_1, k1_0, k0_1, k2_1, k1_2, k2_2 };
inline constexpr int kBeadKinds = 6;

const char* bead_kind_name(BeadKind k);  // "1-1", "1-0", "0-1", "2-1", "1-2", "2-2"

struct Bead {
  int src_begin, src_count, tgt_begin, tgt_count;
  BeadKind kind;
  double cost;  // the bead's distance, -log Prob(match) - log Prob(delta | match)
};

struct GaleChurchOptions {
  double c = 1.0;        // expected target characters per source character (the paper's c)
  double s2 = 6.8;       // variance per source character (the paper's s^2)
  // Half-width of the diagonal band searched at first, in sentences of the shorter side (the longer side gets
  // half-width * longer/shorter); min_band = max_band searches one fixed band.
  int min_band = 20;
  int max_band = 2000;   // ... widened (doubled) while the best path touches the band's edge, up to this
};

struct GaleChurchResult {
  std::vector<Bead> beads;  // cover every sentence of both sides, in order
  double cost = 0;          // sum of the beads' costs
  int band = 0;             // half-width of the band of the final search
  // The search stopped at max_band while still wanting a wider band (the path near the edge, or the cost still
  // falling): beads are the best path within that band, which may not be the optimum.
  bool band_limited = false;
};

// Prob(match) of Table 5, with the shared figures split evenly between the two directions.
double bead_prior(BeadKind k);
// Phi, the standard normal cumulative distribution function.
double standard_normal_cdf(double x);
// log(2 * (1 - Phi(|delta|))): finite (large and negative) for any finite delta, where erfc itself underflows.
double log_two_tailed_probability(double delta);
// The paper's delta for a bead whose sides sum to l1 and l2 characters (0 when both are 0).
double length_delta(int64_t l1, int64_t l2, const GaleChurchOptions& options = {});
// -log Prob(match) - log(2 * (1 - Phi(|delta|))): always finite and positive.
double bead_cost(BeadKind k, int64_t l1, int64_t l2, const GaleChurchOptions& options = {});

// Aligns two sequences of sentence lengths (characters; the caller counts code points). Beads cover every
// sentence of both sides in order. Memory O((n+m) * band), not O(n*m).
// Throws std::invalid_argument for a negative length, c or s2 not positive, min_band < 1 or max_band < min_band.
GaleChurchResult gale_church_align(const std::vector<int>& src_lengths, const std::vector<int>& tgt_lengths,
                                   const GaleChurchOptions& options = {});

}  // namespace parla::text
