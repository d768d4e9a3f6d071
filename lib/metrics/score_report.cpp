#include "metrics/score_report.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace parla::metrics {

OutputFormat parse_output_format(const std::string& name) {
  OutputFormat f{};
  if (!config::parse_choice(name, f))
    throw UsageError("unknown output format '" + name + "' (choose from " + config::names_joined<OutputFormat>() + ")");
  return f;
}

std::string format_fixed(double x, int width) {
  std::vector<char> buf(std::max(64, width + 400));
  std::snprintf(buf.data(), buf.size(), "%.*f", width, x);
  return buf.data();
}

std::string json_rounded_float(double x, int width) {
  double v = std::strtod(format_fixed(x, width).c_str(), nullptr);
  // repr(): the shortest decimal that reads back as the same double, with at least one digit after the point.
  std::string s;
  for (int p = 1; p <= 17; ++p) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    if (std::strtod(buf, nullptr) == v) {
      s = buf;
      break;
    }
  }
  if (s.find_first_of("eE") != std::string::npos) {
    // Python uses exponent notation only below 1e-4 or from 1e16; scores are in [0, 100], so print it fixed.
    if (v != 0.0 && (std::abs(v) < 1e-4 || std::abs(v) >= 1e16)) return s;
    for (int d = 0; d <= 17; ++d) {
      s = format_fixed(v, d);
      if (std::strtod(s.c_str(), nullptr) == v) break;
    }
  }
  if (s.find('.') == std::string::npos && s.find_first_of("eEn") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// sacreBLEU's Score.format: the text line, the score alone, or the JSON object.
std::string format_score(const std::string& name, double score, const std::string& verbose,
                         const std::string& signature, const ReportOptions& ro, bool json) {
  std::string sc = format_fixed(score, ro.width);
  if (ro.score_only) return sc;
  if (json) {
    std::string out = "{\n";
    out += " \"name\": " + json_string(name) + ",\n";
    out += " \"score\": " + json_rounded_float(score, ro.width) + ",\n";
    out += " \"signature\": " + json_string(signature);
    if (!verbose.empty()) out += ",\n \"verbose_score\": " + json_string(verbose);
    std::size_t start = 0;
    while (start <= signature.size()) {
      std::size_t bar = signature.find('|', start);
      std::string field = signature.substr(start, bar == std::string::npos ? std::string::npos : bar - start);
      std::size_t colon = field.find(':');
      out += ",\n " + json_string(field.substr(0, colon)) + ": " + json_string(field.substr(colon + 1));
      if (bar == std::string::npos) break;
      start = bar + 1;
    }
    return out + "\n}";
  }
  std::string line = name + "|" + signature + " = " + sc;
  if (!verbose.empty()) line += " " + verbose;
  return line;
}

}  // namespace

std::string render_corpus_report(const ScoreOptions& so, const CorpusStats& stats, const ReportOptions& ro) {
  const bool json = ro.format == OutputFormat::kJson;
  const bool short_sig = ro.short_signature && !json;  // sacreBLEU always writes long signatures into JSON
  std::vector<Metric> metrics = so.metrics;
  std::sort(metrics.begin(), metrics.end());  // "BLEU" < "CHRF", as sacreBLEU's sorted(metrics)
  metrics.erase(std::unique(metrics.begin(), metrics.end()), metrics.end());
  std::vector<std::string> results;
  for (Metric m : metrics) {
    if (m == Metric::kBleu) {
      BleuScore s = compute_bleu(stats.bleu, so.bleu);
      results.push_back(format_score("BLEU", s.score, bleu_verbose(s), bleu_signature(so.bleu, stats.nrefs, short_sig),
                                     ro, json));
    } else {
      double s = chrf_score(stats.chrf, so.chrf);
      results.push_back(
          format_score(chrf_name(so.chrf), s, "", chrf_signature(so.chrf, stats.nrefs, short_sig), ro, json));
    }
  }
  // sacreBLEU's print_single_results.
  if (json && !ro.score_only) {
    if (results.size() == 1) return results[0];
    std::string out = "[\n";
    for (std::size_t i = 0; i < results.size(); ++i) out += (i ? ",\n" : "") + results[i];
    return out + "\n]";
  }
  if (results.size() == 1) return results[0];
  // Several metrics: right-align the part before '=' so the scores line up.
  std::size_t w = 0;
  std::vector<std::size_t> lens;
  for (const auto& r : results) {
    std::size_t eq = r.find('=');
    lens.push_back(eq == std::string::npos ? std::string::npos : eq - 1);
    if (eq != std::string::npos) w = std::max(w, eq - 1);
  }
  std::string out;
  for (std::size_t i = 0; i < results.size(); ++i) {
    if (i) out += "\n";
    if (lens[i] == std::string::npos) {
      out += results[i];
    } else {
      out += std::string(w - lens[i], ' ') + results[i];
    }
  }
  return out;
}

std::string render_stats_json(const ScoreOptions& so, const BleuStats& bleu, const ChrfStats& chrf) {
  nlohmann::json j = nlohmann::json::object();
  for (Metric m : so.metrics) {
    if (m == Metric::kBleu) {
      BleuScore s = compute_bleu(bleu, so.bleu);
      j["bleu"] = {{"counts", bleu.correct},    {"totals", bleu.total},          {"counts_reported", s.counts},
                   {"totals_reported", s.totals}, {"precisions", s.precisions}, {"bp", s.bp},
                   {"ratio", s.ratio},           {"sys_len", s.sys_len},        {"ref_len", s.ref_len},
                   {"score", s.score}};
    } else {
      j["chrf"] = {{"stats", chrf}, {"score", chrf_score(chrf, so.chrf)}};
    }
  }
  return j.dump();
}

std::string render_segment_line(const ScoreOptions& so, int nrefs, const SegmentScores& seg,
                                const ReportOptions& ro) {
  if (so.metrics.front() == Metric::kBleu) {
    BleuScore s = compute_bleu(seg.bleu, so.bleu);
    return format_score("BLEU", s.score, bleu_verbose(s), bleu_signature(so.bleu, nrefs, ro.short_signature), ro,
                        false);
  }
  double s = chrf_score(seg.chrf, so.chrf);
  return format_score(chrf_name(so.chrf), s, "", chrf_signature(so.chrf, nrefs, ro.short_signature), ro, false);
}

}  // namespace parla::metrics
