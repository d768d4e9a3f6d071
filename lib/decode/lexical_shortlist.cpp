#include "decode/lexical_shortlist.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "text/special_ids.h"

namespace parla::decode {
namespace {

void unique_sorted(const std::vector<int>& in, std::vector<int>& out) {
  out.assign(in.begin(), in.end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
}

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(' ', i);
    if (j == std::string::npos) j = s.size();
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j + 1;
  }
  return out;
}

}  // namespace

void LexicalShortlist::Builder::add(const std::vector<int>& source, const std::vector<int>& target) {
  unique_sorted(source, s_);
  unique_sorted(target, t_);
  ++pairs_;
  for (int t : t_) ++target_count_[t];
  for (int s : s_) {
    ++source_count_[s];
    const uint64_t high = static_cast<uint64_t>(static_cast<uint32_t>(s)) << 32;
    for (int t : t_) ++joint_[high | static_cast<uint32_t>(t)];
  }
}

LexicalShortlist LexicalShortlist::Builder::build(const ShortlistOptions& o) const {
  LexicalShortlist out;
  // Always allowed: the most frequent target pieces (by sentence pairs containing them; ties by id).
  std::vector<std::pair<uint32_t, int>> by_count;
  for (const auto& [t, c] : target_count_) by_count.emplace_back(c, t);
  std::sort(by_count.begin(), by_count.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t i = 0; i < by_count.size() && static_cast<int>(i) < o.frequent; ++i)
    out.always_.push_back(by_count[i].second);
  std::sort(out.always_.begin(), out.always_.end());

  // Per source piece: its co-occurring targets by Dice, then joint count, then id (a deterministic order).
  struct Candidate {
    double dice;
    uint32_t joint;
    int target;
  };
  std::unordered_map<int, std::vector<Candidate>> per_source;
  // Pieces always allowed take no source piece's slots.
  for (const auto& [key, joint] : joint_) {
    const int s = static_cast<int>(key >> 32), t = static_cast<int>(key & 0xffffffffu);
    if (std::binary_search(out.always_.begin(), out.always_.end(), t)) continue;
    const double dice = 2.0 * joint / (double(source_count_.at(s)) + double(target_count_.at(t)));
    per_source[s].push_back({dice, joint, t});
  }
  out.rules_.resize(1);
  for (auto& [s, cands] : per_source) {
    const size_t keep = std::min<size_t>(cands.size(), static_cast<size_t>(std::max(0, o.best)));
    std::partial_sort(cands.begin(), cands.begin() + keep, cands.end(), [](const Candidate& a, const Candidate& b) {
      if (a.dice != b.dice) return a.dice > b.dice;
      if (a.joint != b.joint) return a.joint > b.joint;
      return a.target < b.target;
    });
    std::vector<int> targets;
    for (size_t i = 0; i < keep; ++i) targets.push_back(cands[i].target);
    std::sort(targets.begin(), targets.end());
    if (!targets.empty()) out.rules_[0][{s}] = std::move(targets);
  }
  out.finish();
  return out;
}

const std::map<std::vector<int>, std::vector<int>>& LexicalShortlist::rules(size_t n) const {
  static const std::map<std::vector<int>, std::vector<int>> none;
  return n >= 1 && n <= rules_.size() ? rules_[n - 1] : none;
}

std::vector<int64_t> LexicalShortlist::candidates(const int64_t* source, int64_t length) const {
  // Marks instead of sorting the concatenated lists (a sentence's rules repeat most targets many times).
  std::vector<char> marked(static_cast<size_t>(std::max(top_, static_cast<int>(kEosId)) + 1), 0);
  for (int t : always_) marked[t] = 1;
  marked[kEosId] = marked[kUnkId] = 1;
  std::vector<int> key;
  for (size_t n = 1; n <= rules_.size(); ++n) {
    if (rules_[n - 1].empty()) continue;
    for (int64_t i = 0; i + static_cast<int64_t>(n) <= length; ++i) {
      key.assign(source + i, source + i + n);
      auto it = rules_[n - 1].find(key);
      if (it != rules_[n - 1].end())
        for (int t : it->second) marked[t] = 1;
    }
  }
  std::vector<int64_t> out;
  for (size_t t = 0; t < marked.size(); ++t)
    if (marked[t]) out.push_back(static_cast<int64_t>(t));
  return out;
}

void LexicalShortlist::finish() {
  auto tidy = [&](std::vector<int>& v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    if (!v.empty()) top_ = std::max(top_, v.back());
  };
  top_ = 0;
  tidy(always_);
  for (auto& level : rules_)
    for (auto& [key, targets] : level) tidy(targets);
}

LexicalShortlist LexicalShortlist::load(const std::string& path, const text::SentencePieceVocab& source,
                                        const text::SentencePieceVocab& target) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("cannot open shortlist " + path + ": " + std::strerror(errno));
  LexicalShortlist out;
  std::string line;
  uint64_t number = 0;
  auto id_of = [&](const text::SentencePieceVocab& vocab, const std::string& piece, const char* side) {
    const int id = vocab.piece_to_id(piece);
    if (vocab.id_to_piece(id) != piece)
      throw DataError(path + ":" + std::to_string(number) + ": " + side + " piece '" + piece +
                      "' is not in the model's vocabulary (a shortlist made for another model?)");
    return id;
  };
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos)
      throw DataError(path + ":" + std::to_string(number) +
                      ": no tab: a rule is 'SOURCE<TAB>TARGET TARGET ...' (an empty SOURCE for pieces always allowed)");
    std::vector<int> key, targets;
    for (const auto& piece : split_spaces(line.substr(0, tab))) key.push_back(id_of(source, piece, "source"));
    for (const auto& piece : split_spaces(line.substr(tab + 1))) targets.push_back(id_of(target, piece, "target"));
    if (key.empty()) {
      out.always_.insert(out.always_.end(), targets.begin(), targets.end());
      continue;
    }
    if (out.rules_.size() < key.size()) out.rules_.resize(key.size());
    auto& rule = out.rules_[key.size() - 1][key];
    rule.insert(rule.end(), targets.begin(), targets.end());
  }
  if (in.bad()) throw DataError("cannot read shortlist " + path + ": " + std::strerror(errno));
  out.finish();
  return out;
}

void LexicalShortlist::save(const std::string& path, const text::SentencePieceVocab& source,
                            const text::SentencePieceVocab& target) const {
  AtomicFile file(path, temporary_path(path));
  {
    std::ofstream out(file.temporary(), std::ios::binary);
    if (!out) throw IoError("cannot create " + file.temporary() + ": " + std::strerror(errno));
    auto write_targets = [&](const std::vector<int>& targets) {
      for (size_t i = 0; i < targets.size(); ++i) out << (i ? " " : "") << target.id_to_piece(targets[i]);
      out << '\n';
    };
    out << '\t';
    write_targets(always_);
    for (const auto& level : rules_)
      for (const auto& [key, targets] : level) {
        for (size_t i = 0; i < key.size(); ++i) out << (i ? " " : "") << source.id_to_piece(key[i]);
        out << '\t';
        write_targets(targets);
      }
    out.flush();
    if (!out) throw IoError("cannot write " + file.temporary() + ": " + std::strerror(errno));
  }
  if (auto e = file.commit()) throw IoError("cannot rename " + file.temporary() + " to " + path + ": " + e.message());
}

LexicalShortlist build_shortlist(const std::string& source_path, const std::string& target_path,
                                 const text::SentencePieceVocab& source, const text::SentencePieceVocab& target,
                                 const ShortlistOptions& o) {
  std::ifstream src(source_path, std::ios::binary), tgt(target_path, std::ios::binary);
  if (!src) throw DataError("cannot open " + source_path + ": " + std::strerror(errno));
  if (!tgt) throw DataError("cannot open " + target_path + ": " + std::strerror(errno));
  LexicalShortlist::Builder builder;
  Progress progress("shortlist", "pair", o.max_sentences);
  std::string s_line, t_line;
  uint64_t line = 0;
  while (o.max_sentences == 0 || line < o.max_sentences) {
    const bool has_s = static_cast<bool>(std::getline(src, s_line)), has_t = static_cast<bool>(std::getline(tgt, t_line));
    if (!has_s && !has_t) break;
    ++line;
    if (!has_s || !has_t)
      throw DataError((has_s ? target_path : source_path) + " ends at line " + std::to_string(line - 1) + ", " +
                      (has_s ? source_path : target_path) + " goes on: the two sides must have the same lines");
    builder.add(source.encode(s_line), target.encode(t_line));
    progress.advance();
  }
  if (src.bad()) throw DataError("cannot read " + source_path + ": " + std::strerror(errno));
  if (tgt.bad()) throw DataError("cannot read " + target_path + ": " + std::strerror(errno));
  progress.finish();
  return builder.build(o);
}

}  // namespace parla::decode
