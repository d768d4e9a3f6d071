#pragma once
// Europarl's source release (one file per sitting day and language, `txt/LANG/ep-YY-MM-DD.txt`, or a day in parts
// `ep-YY-MM-DD-NNN.txt`) into sentence pairs: the days present in both languages are read (UTF-8, or latin-1 in
// the older files), aligned (text/europarl_day_alignment.h) with worker threads, and written in day order, one
// pair per line, to the two output files. parla-preprocess runs this first under `--europarl-release DIR`.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace parla::data {

struct EuroparlReleaseOptions {
  std::string dir;  // holds SRC/ and TGT/ (or txt/SRC/ and txt/TGT/, the release's own layout)
  std::string src_lang, tgt_lang;
  int threads = 1;
};

struct EuroparlReleaseResult {
  uint64_t pairs = 0;
  nlohmann::json stats;  // days paired / unpaired, blocks, sentences, beads by kind, resynchronised days, ...
};

// Writes the pairs to out_src / out_tgt (plain text, one sentence or bead per line). Throws DataError naming the
// folder when a language folder is missing, holds no day files, the two share no day, or no pair comes out;
// IoError for unwritable outputs. Problems of single days (one language only, differing tags, latin-1 lines, a
// day file beside its own parts, undecodable files) are logged with the file and line and counted in stats.
EuroparlReleaseResult align_europarl_release(const EuroparlReleaseOptions& options, const std::string& out_src,
                                             const std::string& out_tgt);

}  // namespace parla::data
