#pragma once
// The release days of ../shared/data/europarl-raw-release-en-fr are already split into sentences and aligned line
// by line: their text lines side by side are the reference pairs, and joining each paragraph's lines gives the
// release as it was before that step (the input of parla-preprocess --europarl-release).
#include <string>
#include <utility>
#include <vector>

#include "text/europarl_markup.h"

namespace parla::testing {

inline std::vector<std::string> join_paragraphs(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  bool in_text = false;
  for (const auto& line : lines) {
    bool tag = text::is_europarl_markup(line);
    if (in_text && !tag)
      out.back() += " " + line;
    else
      out.push_back(line);
    in_text = !tag;
  }
  return out;
}

inline std::vector<std::pair<std::string, std::string>> reference_pairs(const std::vector<std::string>& src,
                                                                        const std::vector<std::string>& tgt) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t k = 0; k < src.size() && k < tgt.size(); ++k)
    if (!text::is_europarl_markup(src[k]) && !src[k].empty()) out.emplace_back(src[k], tgt[k]);
  return out;
}

}  // namespace parla::testing
