#include "decode/output_printer.h"

#include <cstdio>

#include "core/error.h"

namespace parla::decode {

std::string hard_alignment(const Hypothesis& h, size_t source_length) {
  std::string out;
  for (size_t t = 0; t < h.tokens.size() && t < h.attention.size(); ++t) {
    const auto& row = h.attention[t];
    size_t n = source_length == 0 ? row.size() : std::min(source_length, row.size());
    if (n == 0) continue;
    size_t best = 0;
    for (size_t s = 1; s < n; ++s)
      if (row[s] > row[best]) best = s;  // first maximum on ties: deterministic
    if (!out.empty()) out += ' ';
    out += std::to_string(best) + "-" + std::to_string(t);
  }
  return out;
}

std::string soft_alignment(const Hypothesis& h) {
  std::string out;
  char buf[32];
  for (size_t t = 0; t < h.attention.size(); ++t) {
    if (t) out += ' ';
    for (size_t s = 0; s < h.attention[t].size(); ++s) {
      if (s) out += ',';
      std::snprintf(buf, sizeof buf, "%.4f", static_cast<double>(h.attention[t][s]));
      out += buf;
    }
  }
  return out;
}

std::string OutputPrinter::format(uint64_t line, const NBestList& hyps, const std::vector<std::string>& texts,
                                  size_t source_length) const {
  auto with_alignment = [&](std::string s, const Hypothesis* h) {
    if (alignment == AlignmentFormat::kNone) return s;
    s += " ||| ";
    if (h) s += alignment == AlignmentFormat::kHard ? hard_alignment(*h, source_length) : soft_alignment(*h);
    return s;
  };
  if (!n_best) {
    if (hyps.empty()) return with_alignment("", nullptr) + "\n";
    return with_alignment(texts.empty() ? "" : texts[0], &hyps[0]) + "\n";
  }
  std::string out;
  char buf[32];
  if (hyps.empty()) return with_alignment(std::to_string(line) + " |||  ||| 0", nullptr) + "\n";  // empty input
  for (size_t k = 0; k < hyps.size(); ++k) {
    std::snprintf(buf, sizeof buf, "%.6g", static_cast<double>(hyps[k].score));
    out += with_alignment(std::to_string(line) + " ||| " + (k < texts.size() ? texts[k] : "") + " ||| " + buf,
                          &hyps[k]);
    out += '\n';
  }
  return out;
}

}  // namespace parla::decode
