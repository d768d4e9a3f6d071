#include "data/preprocess.h"

#include <unistd.h>

#include <algorithm>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>
#include <tuple>

#include <spdlog/spdlog.h>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/progress.h"
#include "core/version.h"
#include "data/europarl_release.h"
#include "data/held_out_split.h"
#include "core/output_file.h"
#include "data/token_dataset_writer.h"
#include "text/language_codes.h"
#include "text/line_reader.h"
#include "text/parallel_corpus_filter.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"

namespace fs = std::filesystem;

namespace parla::data {

namespace {

using text::FilterScope;
using text::FilterStats;
using text::LineReader;
using text::SentencePieceVocab;

// The dataset is built in DIR.tmp-PID beside DIR (core/atomic_file.h) and renamed into place only when complete.
class StagingDirectory {
 public:
  StagingDirectory(const std::string& final_dir, bool force) : final_(final_dir), force_(force) {
    std::error_code ec;
    if (fs::exists(final_, ec) && !force)
      throw UsageError("output directory '" + final_dir + "' exists; use --force to replace it");
    fs::path parent = fs::absolute(final_).parent_path();
    fs::create_directories(parent, ec);
    if (ec) throw IoError("cannot create output directory '" + parent.string() + "': " + ec.message());
    dir_.emplace(final_dir, staging_path(final_dir));
    tmp_ = dir_->temporary();
    fs::remove_all(tmp_, ec);
    fs::create_directory(tmp_, ec);
    if (ec) throw IoError("cannot create output directory '" + tmp_.string() + "': " + ec.message());
    // A directory that can be created may still refuse files (read-only bind mounts): find out now.
    OutputFile probe(file(".probe"));
    probe.close();
    fs::remove(file(".probe"), ec);
  }
  std::string file(const std::string& name) const { return (tmp_ / name).string(); }

  void commit() {
    std::error_code ec;
    fs::path old;
    if (fs::exists(final_, ec)) {
      if (!force_) throw UsageError("output directory '" + final_.string() + "' appeared meanwhile; use --force");
      old = final_.string() + ".old-" + std::to_string(::getpid());
      fs::rename(final_, old, ec);
      if (ec) throw IoError("cannot move the old '" + final_.string() + "' aside: " + ec.message());
    }
    if ((ec = dir_->commit()))
      throw IoError("cannot rename '" + tmp_.string() + "' to '" + final_.string() + "': " + ec.message());
    if (!old.empty()) fs::remove_all(old, ec);
  }

 private:
  fs::path final_, tmp_;
  bool force_;
  std::optional<AtomicFile> dir_;  // removes the unfinished dataset unless committed
};

[[noreturn]] void unequal_lines(LineReader& a, LineReader& b, bool a_ended) {
  // Count the rest of the longer file so the message gives both totals.
  LineReader& longer = a_ended ? b : a;
  std::string line;
  while (longer.next(line)) {
  }
  throw DataError("line counts differ: '" + a.path() + "' has " + std::to_string(a.line_number()) + " lines, '" +
                  b.path() + "' has " + std::to_string(b.line_number()) + " lines");
}

// With data.held_out = documents: the document id file read beside the corpus, and the split of each kept pair.
struct DocumentRouting {
  std::string path;
  DocumentSplit split;
  std::vector<Split> kept;  // one per kept pair
};

// Pass 1: cleans and filters a pair of files into two cleaned text files (one pair per line).
FilterStats clean_pairs(const std::string& src_path, const std::string& tgt_path, const CleanConfig& clean,
                        FilterScope scope, const std::string& out_src, const std::string& out_tgt,
                        const std::string& what, DocumentRouting* routing = nullptr) {
  LineReader rs(src_path), rt(tgt_path);
  std::optional<LineReader> rd;
  if (routing) rd.emplace(routing->path);
  OutputFile ws(out_src), wt(out_tgt);
  text::ParallelCorpusFilter filter(clean, scope);
  Progress progress("clean " + what, "pair");
  std::string s, t, cs, ct, doc;
  auto unequal_docids = [&](uint64_t corpus_lines) {
    std::string rest;
    while (rd->next(rest)) {
    }
    throw DataError("data.docids '" + routing->path + "' has " + std::to_string(rd->line_number()) +
                    " lines, the corpus '" + src_path + "' " + std::to_string(corpus_lines) +
                    ": it must give one document id per corpus line");
  };
  for (;;) {
    bool a = rs.next(s), b = rt.next(t);
    if (a != b) unequal_lines(rs, rt, !a);
    if (!a) break;
    if (rd && !rd->next(doc)) {
      while (rs.next(s)) {
      }
      unequal_docids(rs.line_number());
    }
    if (filter.accept(s, t, cs, ct)) {
      ws.write_line(cs);
      wt.write_line(ct);
      if (routing) routing->kept.push_back(routing->split.of(doc));
    }
    progress.advance();
  }
  if (rd && rd->next(doc)) unequal_docids(rs.line_number());
  ws.close();
  wt.close();
  progress.finish();
  return filter.stats();
}

struct SplitWriters {
  std::unique_ptr<TokenDatasetWriter> src, tgt;
  uint64_t src_unk = 0, tgt_unk = 0;
};

// The language tokens that start every source and target (a multilingual model's, ExistingVocab), or -1.
struct LanguagePrefix {
  int src = -1, tgt = -1;
  nlohmann::json languages;  // for meta.json: the model's languages, "source" and "target" the corpus's; or null
};

// Pass 4: encodes pairs of a cleaned text file pair with `threads` workers and routes each to the writers
// `route(i)` names (nullptr skips the pair). Output order is input order, whatever the thread count.
template <class Route>
void encode_pairs(const std::string& src_path, const std::string& tgt_path, const SentencePieceVocab& src_vocab,
                  const SentencePieceVocab& tgt_vocab, const LanguagePrefix& prefix, int threads, Route route,
                  Progress& progress) {
  LineReader rs(src_path), rt(tgt_path);
  const size_t block = 4096 * static_cast<size_t>(threads);
  std::vector<std::string> src(block), tgt(block);
  std::vector<std::vector<int>> src_ids(block), tgt_ids(block);
  uint64_t index = 0;
  for (;;) {
    size_t n = 0;
    while (n < block && rs.next(src[n])) {
      if (!rt.next(tgt[n])) throw DataError("internal: cleaned files '" + src_path + "' and '" + tgt_path + "' differ");
      ++n;
    }
    if (n == 0) break;
    std::vector<std::exception_ptr> errors(threads);
    auto work = [&](int w) {
      try {
        for (size_t i = n * w / threads; i < n * (w + 1) / threads; ++i) {
          src_ids[i] = src_vocab.encode(src[i]);
          tgt_ids[i] = tgt_vocab.encode(tgt[i]);
          if (prefix.src >= 0) src_ids[i].insert(src_ids[i].begin(), prefix.src);
          if (prefix.tgt >= 0) tgt_ids[i].insert(tgt_ids[i].begin(), prefix.tgt);
        }
      } catch (...) {
        errors[w] = std::current_exception();
      }
    };
    std::vector<std::thread> pool;
    for (int w = 1; w < threads; ++w) pool.emplace_back(work, w);
    work(0);
    for (auto& th : pool) th.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (size_t i = 0; i < n; ++i, ++index) {
      SplitWriters* out = route(index);
      if (!out) continue;
      out->src->add(src_ids[i]);
      out->tgt->add(tgt_ids[i]);
      out->src_unk += std::count(src_ids[i].begin(), src_ids[i].end(), parla::kUnkId);
      out->tgt_unk += std::count(tgt_ids[i].begin(), tgt_ids[i].end(), parla::kUnkId);
    }
    progress.advance(n);
  }
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

nlohmann::json describe_input(const std::string& path) {
  auto c = text::checksum_file(path);
  return {{"path", fs::absolute(path).string()}, {"bytes", c.bytes}, {"crc32", hex32(c.crc32)}};
}

void write_vocab_files(const StagingDirectory& stage, const std::string& name, const SentencePieceVocab& vocab) {
  OutputFile model(stage.file(name + ".model"));
  model.write(vocab.serialized());
  model.close();
  // The human-readable piece list, as spm_train writes it (piece TAB score).
  OutputFile list(stage.file(name + ".vocab"));
  for (int id = 0; id < vocab.size(); ++id) {
    char score[32];
    std::snprintf(score, sizeof score, "%g", vocab.score(id));
    list.write_line(vocab.id_to_piece(id) + "\t" + score);
  }
  list.close();
  // An imported vocabulary numbers its pieces through a table (text/sentencepiece_vocab.h): kept as a JSON array.
  if (!vocab.pieces().empty()) {
    OutputFile table(stage.file(name + ".pieces.json"));
    table.write(nlohmann::json(vocab.pieces()).dump() + "\n");
    table.close();
  }
}

void log_filter_stats(const std::string& what, const FilterStats& s) {
  std::string reasons;
  for (size_t i = 0; i < s.dropped.size(); ++i)
    if (s.dropped[i])
      reasons += std::string(reasons.empty() ? "" : ", ") + text::drop_reason_name(static_cast<text::DropReason>(i)) +
                 " " + std::to_string(s.dropped[i]);
  spdlog::info("{}: read {} pairs, kept {}, dropped {}{}", what, s.read, s.kept, s.dropped_total(),
               reasons.empty() ? "" : " (" + reasons + ")");
  if (s.edited_unicode || s.edited_control || s.edited_whitespace)
    spdlog::info("{}: lines edited: unicode normalisation {}, control characters {}, whitespace {}", what,
                 s.edited_unicode, s.edited_control, s.edited_whitespace);
}

}  // namespace

std::pair<std::string, std::string> training_files(const DataConfig& data) {
  if (!data.train_src.empty() || !data.train_tgt.empty()) {
    if (data.train_src.empty() || data.train_tgt.empty())
      throw ConfigError("data.train_src and data.train_tgt must be given together (--train-src/--train-tgt)");
    return {data.train_src, data.train_tgt};
  }
  if (data.train_prefix.empty())
    throw ConfigError("no training corpus: give --prefix PATH with --src-lang/--tgt-lang (data.train_prefix), or "
                      "--train-src and --train-tgt");
  if (data.src_lang.empty() || data.tgt_lang.empty())
    throw ConfigError("--prefix needs the language suffixes: --src-lang and --tgt-lang (data.src_lang, "
                      "data.tgt_lang)");
  return {text::corpus_file(data.train_prefix, data.src_lang), text::corpus_file(data.train_prefix, data.tgt_lang)};
}

namespace {

// The corpus files preprocess reads, resolved from the config and checked before anything is written.
struct PreprocessInputs {
  bool from_release = false;
  std::string train_src, train_tgt;  // from a release: its aligned text, written by pass 0
  std::optional<std::pair<std::string, std::string>> valid_files, test_files;
  std::optional<DocumentRouting> routing;  // data.held_out = documents
};

// Checks the data section (the language suffixes default to src and tgt) and names the input files.
PreprocessInputs resolve_inputs(DataConfig& data) {
  PreprocessInputs in;
  in.from_release = !data.europarl_release.empty();
  const bool from_release = in.from_release;
  if (from_release) {
    if (!data.train_prefix.empty() || !data.train_src.empty() || !data.train_tgt.empty())
      throw ConfigError("data.europarl_release (--europarl-release) and a line-aligned corpus (data.train_prefix "
                        "--prefix, data.train_src/train_tgt --train-src/--train-tgt) are alternatives: give one");
    if (data.src_lang.empty() || data.tgt_lang.empty())
      throw ConfigError("data.europarl_release (--europarl-release) needs data.src_lang and data.tgt_lang "
                        "(--src-lang, --tgt-lang): they name the release's language folders");
  } else if (!data.aligned_out.empty()) {
    throw ConfigError("data.aligned_out (--aligned-out) writes the pairs aligned from data.europarl_release "
                      "(--europarl-release), which is not given");
  }
  if (!from_release) std::tie(in.train_src, in.train_tgt) = training_files(data);
  const std::string& train_src = in.train_src;
  const std::string& train_tgt = in.train_tgt;
  if (data.src_lang.empty()) data.src_lang = "src";
  if (data.tgt_lang.empty()) data.tgt_lang = "tgt";
  if (data.src_lang == data.tgt_lang)
    throw ConfigError("source and target language are both '" + data.src_lang + "'; the dataset files would collide");
  for (const auto& lang : {data.src_lang, data.tgt_lang})
    if (lang.find_first_of("/\\ \t") != std::string::npos)
      throw ConfigError("language suffix '" + lang + "' must not contain '/' or whitespace");
  auto& valid_files = in.valid_files;
  auto& test_files = in.test_files;
  if (!data.valid_prefix.empty())
    valid_files = {text::corpus_file(data.valid_prefix, data.src_lang), text::corpus_file(data.valid_prefix, data.tgt_lang)};
  if (!data.test_prefix.empty())
    test_files = {text::corpus_file(data.test_prefix, data.src_lang), text::corpus_file(data.test_prefix, data.tgt_lang)};
  auto& routing = in.routing;
  if (data.held_out == HeldOut::kDocuments) {
    if (data.docids.empty())
      throw ConfigError("data.held_out = documents needs data.docids (--docids FILE): one document id per corpus "
                        "line");
    if (from_release)
      throw ConfigError("data.held_out = documents reads data.docids, which --europarl-release does not write: "
                        "use data.held_out = random or last with it");
    if (data.valid_documents.empty() && data.test_documents.empty())
      throw ConfigError("data.held_out = documents needs data.valid_documents and/or data.test_documents "
                        "(--valid-documents, --test-documents): the document id prefixes to hold out");
    if (valid_files && !data.valid_documents.empty())
      throw ConfigError("data.valid_documents and data.valid_prefix both name a validation set: give one");
    if (test_files && !data.test_documents.empty())
      throw ConfigError("data.test_documents and data.test_prefix both name a test set: give one");
    routing.emplace(DocumentRouting{data.docids, DocumentSplit(data.valid_documents, data.test_documents), {}});
  } else if (!data.docids.empty() || !data.valid_documents.empty() || !data.test_documents.empty()) {
    throw ConfigError("data.docids, data.valid_documents and data.test_documents are read only with "
                      "data.held_out = documents (--held-out documents)");
  }
  if (!from_release)
    for (const auto& p : {train_src, train_tgt})
      if (!fs::exists(p)) throw DataError("file not found: '" + p + "'");

  return in;
}

// Pass 0 (the source release only): aligns its days into a line-aligned corpus in the work directory, and copies
// it to data.aligned_out when asked.
void align_release(const DataConfig& data, const StagingDirectory& stage, int threads, PreprocessInputs& in,
                   nlohmann::json& stats) {
  const std::string& S = data.src_lang;
  const std::string& T = data.tgt_lang;
  in.train_src = stage.file("aligned." + S);
  in.train_tgt = stage.file("aligned." + T);
  auto aligned = align_europarl_release({data.europarl_release, S, T, threads}, in.train_src, in.train_tgt);
  stats["europarl_release"] = aligned.stats;
  if (!data.aligned_out.empty()) {
    std::error_code ec;
    fs::create_directories(fs::absolute(data.aligned_out + "." + S).parent_path(), ec);  // a failure shows in the copy
    // Both sides are copied to temporaries before either is renamed, so a failure leaves neither half behind.
    std::string to;
    if ((ec = copy_files_atomically({{in.train_src, data.aligned_out + "." + S}, {in.train_tgt, data.aligned_out + "." + T}}, to)))
      throw IoError("cannot write the aligned text '" + to + "' (data.aligned_out): " + ec.message());
    spdlog::info("wrote the aligned pairs to '{}.{}' and '{}.{}'", data.aligned_out, S, data.aligned_out, T);
  }
}

// Pass 1: cleans and filters the training corpus and any separate held-out sets into the work directory. Returns
// the training corpus's figures; `stats` and `inputs` get every input's.
FilterStats clean_inputs(const DataConfig& data, const StagingDirectory& stage, PreprocessInputs& in,
                         nlohmann::json& stats, nlohmann::json& inputs) {
  const std::string& S = data.src_lang;
  const std::string& T = data.tgt_lang;
  const bool from_release = in.from_release;
  const std::string& train_src = in.train_src;
  const std::string& train_tgt = in.train_tgt;
  auto& routing = in.routing;
  FilterStats train_stats = clean_pairs(train_src, train_tgt, data.clean, FilterScope::kTraining,
                                        stage.file("corpus.clean." + S), stage.file("corpus.clean." + T), "train",
                                        routing ? &*routing : nullptr);
  if (routing)
    if (auto unmatched = routing->split.unmatched(); !unmatched.empty())
      throw DataError("data.valid_documents/test_documents: '" + unmatched.front() + "' matches no document id in '" +
                      data.docids + "' (among its kept pairs)");
  log_filter_stats("train corpus", train_stats);
  stats["inputs"]["train"] = train_stats.to_json();
  if (from_release)
    inputs["train"] = {{"europarl_release", fs::absolute(data.europarl_release).string()},
                       {"days", stats["europarl_release"]["days"]["aligned"]},
                       {"pairs", stats["europarl_release"]["pairs"]}};
  else
    inputs["train"] = {{"src", describe_input(train_src)}, {"tgt", describe_input(train_tgt)}};
  for (auto& [name, files] : {std::pair{std::string("valid"), in.valid_files}, std::pair{std::string("test"), in.test_files}}) {
    if (!files) continue;
    FilterStats st = clean_pairs(files->first, files->second, data.clean, FilterScope::kHeldOut,
                                 stage.file(name + "." + S), stage.file(name + "." + T), name);
    log_filter_stats(name + " set", st);
    stats["inputs"][name] = st.to_json();
    inputs[name] = {{"src", describe_input(files->first)}, {"tgt", describe_input(files->second)}};
  }
  uint64_t n = train_stats.kept;
  if (n == 0)
    throw DataError("no pairs left after cleaning " +
                    (from_release ? "the pairs aligned from '" + data.europarl_release + "'"
                                  : "'" + train_src + "' and '" + train_tgt + "'") + " (" +
                    std::to_string(train_stats.read) + " read; see the counts above)");
  return train_stats;
}

// Pass 2's result: each clean pair's split, and the training sentences SentencePiece learns from.
struct HeldOutSplit {
  std::vector<Split> splits;
  std::vector<std::string> sample_src, sample_tgt;
};

// Pass 2: splits held-out pairs off the `n` clean pairs (written as the valid/test text) and samples
// SentencePiece's sentences from the train part. A held-out split taken from the corpus is at most a tenth of it,
// so small corpora still train.
HeldOutSplit split_held_out(const Config& cfg, const std::optional<ExistingVocab>& existing, uint64_t n,
                            const StagingDirectory& stage, PreprocessInputs& in) {
  const DataConfig& data = cfg.data;
  const std::string& S = data.src_lang;
  const std::string& T = data.tgt_lang;
  const auto& valid_files = in.valid_files;
  const auto& test_files = in.test_files;
  auto& routing = in.routing;
  HeldOutSplit out;
  auto& splits = out.splits;
  auto& sample_src = out.sample_src;
  auto& sample_tgt = out.sample_tgt;
  auto held_out_size = [&](const char* name, int requested, bool separate) -> uint64_t {
    if (separate) return 0;
    uint64_t cap = n / 10, want = static_cast<uint64_t>(requested);
    if (want > cap) {
      spdlog::warn("data.{}_size={} is more than a tenth of the {} clean pairs; holding out {}", name, requested, n,
                   cap);
      return cap;
    }
    return want;
  };
  uint64_t seed = static_cast<uint64_t>(cfg.runtime.seed);
  if (routing) {
    splits = std::move(routing->kept);
    spdlog::info("held out by document: {} validation and {} test pairs", std::count(splits.begin(), splits.end(), Split::kValid),
                 std::count(splits.begin(), splits.end(), Split::kTest));
  } else {
    uint64_t n_valid = held_out_size("valid", data.valid_size, valid_files.has_value());
    uint64_t n_test = held_out_size("test", data.test_size, test_files.has_value());
    splits = data.held_out == HeldOut::kLast ? assign_last_splits(n, n_valid, n_test) : assign_splits(n, n_valid, n_test, seed);
  }
  uint64_t n_train = static_cast<uint64_t>(std::count(splits.begin(), splits.end(), Split::kTrain));
  const VocabConfig& vc = cfg.vocab;
  uint64_t sample_pairs = existing ? 0
                          : vc.joint ? (static_cast<uint64_t>(vc.sample_sentences) + 1) / 2
                                     : static_cast<uint64_t>(vc.sample_sentences);
  {
    LineReader rs(stage.file("corpus.clean." + S)), rt(stage.file("corpus.clean." + T));
    std::unique_ptr<OutputFile> held_src[3], held_tgt[3];
    for (Split sp : {Split::kValid, Split::kTest}) {
      bool from_corpus = sp == Split::kValid ? !valid_files : !test_files;
      if (!from_corpus) continue;
      std::string name = sp == Split::kValid ? "valid" : "test";
      held_src[static_cast<int>(sp)] = std::make_unique<OutputFile>(stage.file(name + "." + S));
      held_tgt[static_cast<int>(sp)] = std::make_unique<OutputFile>(stage.file(name + "." + T));
    }
    SelectionSampler sampler(n_train, sample_pairs, seed ^ 0x5350u);
    std::string s, t;
    for (uint64_t i = 0; rs.next(s) && rt.next(t); ++i) {
      int sp = static_cast<int>(splits[i]);
      if (splits[i] != Split::kTrain) {
        held_src[sp]->write_line(s);
        held_tgt[sp]->write_line(t);
      } else if (sampler.next()) {
        sample_src.push_back(s);
        (vc.joint ? sample_src : sample_tgt).push_back(t);
      }
    }
    for (auto& f : held_src)
      if (f) f->close();
    for (auto& f : held_tgt)
      if (f) f->close();
  }
  return out;
}

// Pass 3's result: the vocabularies and how meta.json describes them.
struct DatasetVocabs {
  std::optional<SentencePieceVocab> src, tgt;
  LanguagePrefix prefix;
  nlohmann::json meta;
};

// Before any pass: a multilingual model's codes of the corpus's two languages (vocab.src_lang_code / tgt_lang_code,
// else data.src_lang / tgt_lang) and their tokens. A model without codes refuses a code given.
LanguagePrefix resolve_language_prefix(const Config& cfg, const std::optional<ExistingVocab>& existing) {
  LanguagePrefix out;
  if (!existing) return out;
  const VocabConfig& vc = cfg.vocab;
  const bool multilingual = !existing->languages.value("codes", nlohmann::json::object()).empty();
  const std::string src_code = vc.src_lang_code.empty() && multilingual ? cfg.data.src_lang : vc.src_lang_code;
  const std::string tgt_code = vc.tgt_lang_code.empty() && multilingual ? cfg.data.tgt_lang : vc.tgt_lang_code;
  auto token = [&](const std::string& code, const std::string& given, const char* key, const char* data_key,
                   const char* flag, const SentencePieceVocab& vocab) {
    try {
      return text::language_token_id(existing->languages, code, "", std::string("vocab.") + key, vocab);
    } catch (const ConfigError& e) {
      if (!given.empty()) throw;
      throw ConfigError(std::string(e.what()) + " (vocab." + key + " was not given, so data." + data_key +
                        " was tried; give the model's code with " + flag + ")");
    }
  };
  out.src = token(src_code, vc.src_lang_code, "src_lang_code", "src_lang", "--src-lang-code", existing->src);
  out.tgt = token(tgt_code, vc.tgt_lang_code, "tgt_lang_code", "tgt_lang", "--tgt-lang-code", existing->tgt);
  if (out.src >= 0) {
    // The dataset's pair becomes the default of the checkpoints trained on it.
    out.languages = existing->languages;
    out.languages["source"] = src_code;
    out.languages["target"] = tgt_code;
    spdlog::info("vocab: sources start with the token of '{}', targets with that of '{}'", src_code, tgt_code);
  }
  return out;
}

// Pass 3: SentencePiece, trained here on the sampled sentences (which it frees) or given; writes the model files.
DatasetVocabs build_vocabs(const Config& cfg, const std::optional<ExistingVocab>& existing,
                           const LanguagePrefix& languages, HeldOutSplit& held, int threads,
                           const StagingDirectory& stage) {
  const std::string& S = cfg.data.src_lang;
  const std::string& T = cfg.data.tgt_lang;
  const VocabConfig& vc = cfg.vocab;
  const uint64_t seed = static_cast<uint64_t>(cfg.runtime.seed);
  auto& sample_src = held.sample_src;
  auto& sample_tgt = held.sample_tgt;
  DatasetVocabs out;
  out.prefix = languages;
  auto& src_vocab_ = out.src;
  auto& tgt_vocab_ = out.tgt;
  const bool joint = existing ? existing->src.serialized() == existing->tgt.serialized() &&
                                    existing->src.pieces() == existing->tgt.pieces()
                              : vc.joint;
  std::string src_name = joint ? "spm" : "spm." + S, tgt_name = joint ? "spm" : "spm." + T;
  std::string src_model = src_name + ".model", tgt_model = tgt_name + ".model";
  if (existing) {
    spdlog::info("vocab: the {} vocabular{} of '{}' ({} and {} pieces)", joint ? "joint" : "separate",
                 joint ? "y" : "ies", existing->origin, existing->src.size(), existing->tgt.size());
    src_vocab_ = existing->src;
    tgt_vocab_ = existing->tgt;
  } else {
    spdlog::info("vocab: training {} {} SentencePiece model{} on {} sentences", vc.joint ? "a joint" : "separate",
                 config::name_of(vc.model_type), vc.joint ? "" : "s", sample_src.size() + sample_tgt.size());
    Progress spm_progress("vocab", "model");
    auto src_trained = text::train_sentencepiece(sample_src, vc, threads, seed);
    sample_src = {};
    src_vocab_ = SentencePieceVocab::from_serialized(src_trained.model_proto);
    tgt_vocab_ = src_vocab_;
    if (!vc.joint) {
      auto tgt_trained = text::train_sentencepiece(sample_tgt, vc, threads, seed);
      sample_tgt = {};
      tgt_vocab_ = SentencePieceVocab::from_serialized(tgt_trained.model_proto);
    }
    spm_progress.advance(vc.joint ? 1 : 2);
    spm_progress.finish();
  }
  const SentencePieceVocab& src_vocab = *src_vocab_;
  const SentencePieceVocab& tgt_vocab = *tgt_vocab_;
  write_vocab_files(stage, src_name, src_vocab);
  if (!joint) write_vocab_files(stage, tgt_name, tgt_vocab);
  nlohmann::json& vocab_meta = out.meta;
  vocab_meta = {{"joint", joint},
                               {"type", existing ? "checkpoint" : config::name_of(vc.model_type)},
                               {"src_model", src_model},
                               {"tgt_model", tgt_model},
                               {"src_size", src_vocab.size()},
                               {"tgt_size", tgt_vocab.size()},
                               {"special_ids", {{"pad", parla::kPadId}, {"unk", parla::kUnkId}, {"bos", parla::kBosId},
                                                {"eos", parla::kEosId}}}};
  if (existing) {
    vocab_meta["from_checkpoint"] = fs::absolute(existing->origin).string();
    if (!existing->control_pieces.empty()) vocab_meta["control_pieces"] = existing->control_pieces;
    if (!languages.languages.empty()) vocab_meta["languages"] = languages.languages;
  }
  if (!src_vocab.pieces().empty()) vocab_meta["src_pieces"] = src_name + ".pieces.json";
  if (!tgt_vocab.pieces().empty()) vocab_meta["tgt_pieces"] = tgt_name + ".pieces.json";
  return out;
}

// Pass 4's result: how meta.json describes the splits, and the bytes per token of each side.
struct EncodedSplits {
  nlohmann::json meta;
  int src_bytes = 0, tgt_bytes = 0;
};

// Pass 4: encodes every clean pair with the vocabularies and binarizes it into its split's dataset files.
EncodedSplits encode_splits(const DataConfig& data, const DatasetVocabs& vocabs, const HeldOutSplit& held,
                            const PreprocessInputs& in, uint64_t n, int threads, const nlohmann::json& stats,
                            const StagingDirectory& stage) {
  const std::string& S = data.src_lang;
  const std::string& T = data.tgt_lang;
  const SentencePieceVocab& src_vocab = *vocabs.src;
  const SentencePieceVocab& tgt_vocab = *vocabs.tgt;
  const auto& splits = held.splits;
  const auto& valid_files = in.valid_files;
  const auto& test_files = in.test_files;
  EncodedSplits out;
  out.src_bytes = token_bytes_for(src_vocab.size());
  out.tgt_bytes = token_bytes_for(tgt_vocab.size());
  const int src_bytes = out.src_bytes, tgt_bytes = out.tgt_bytes;
  SplitWriters writers[3];
  const char* split_names[3] = {"train", "valid", "test"};
  for (int k = 0; k < 3; ++k) {
    writers[k].src = std::make_unique<TokenDatasetWriter>(stage.file(std::string(split_names[k]) + "." + S), src_bytes);
    writers[k].tgt = std::make_unique<TokenDatasetWriter>(stage.file(std::string(split_names[k]) + "." + T), tgt_bytes);
  }
  uint64_t total = n;
  if (valid_files) total += stats["inputs"]["valid"]["pairs_kept"].get<uint64_t>();
  if (test_files) total += stats["inputs"]["test"]["pairs_kept"].get<uint64_t>();
  Progress enc("encode", "pair", total);
  encode_pairs(stage.file("corpus.clean." + S), stage.file("corpus.clean." + T), src_vocab, tgt_vocab, vocabs.prefix, threads,
               [&](uint64_t i) { return &writers[static_cast<int>(splits[i])]; }, enc);
  if (valid_files)
    encode_pairs(stage.file("valid." + S), stage.file("valid." + T), src_vocab, tgt_vocab, vocabs.prefix, threads,
                 [&](uint64_t) { return &writers[1]; }, enc);
  if (test_files)
    encode_pairs(stage.file("test." + S), stage.file("test." + T), src_vocab, tgt_vocab, vocabs.prefix, threads,
                 [&](uint64_t) { return &writers[2]; }, enc);
  enc.finish();
  nlohmann::json& split_meta = out.meta;
  split_meta = nlohmann::json::object();
  for (int k = 0; k < 3; ++k) {
    writers[k].src->finish();
    writers[k].tgt->finish();
    std::string from = k == 0 ? "train" : (k == 1 ? (valid_files ? "valid" : "train") : (test_files ? "test" : "train"));
    split_meta[split_names[k]] = {{"pairs", writers[k].src->sentences()},
                                  {"src_tokens", writers[k].src->tokens()},
                                  {"tgt_tokens", writers[k].tgt->tokens()},
                                  {"src_unk_tokens", writers[k].src_unk},
                                  {"tgt_unk_tokens", writers[k].tgt_unk},
                                  {"from_input", from}};
    spdlog::info("split {}: {} pairs, {} source and {} target tokens", split_names[k], writers[k].src->sentences(),
                 writers[k].src->tokens(), writers[k].tgt->tokens());
  }
  return out;
}

}  // namespace

PreprocessResult preprocess(const Config& config_in, const PreprocessOptions& options) {
  Config cfg = config_in;
  DataConfig& data = cfg.data;
  if (data.dir.empty()) throw ConfigError("no output directory: give -o DIR (data.dir)");
  PreprocessInputs in = resolve_inputs(data);
  const LanguagePrefix languages = resolve_language_prefix(cfg, options.vocab);
  int threads = cfg.runtime.threads > 0 ? cfg.runtime.threads
                                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string& S = data.src_lang;
  const std::string& T = data.tgt_lang;
  StagingDirectory stage(data.dir, options.force);
  nlohmann::json stats = {{"inputs", nlohmann::json::object()}, {"splits", nlohmann::json::object()}};
  nlohmann::json inputs = nlohmann::json::object();

  if (in.from_release) align_release(data, stage, threads, in, stats);
  const FilterStats train_stats = clean_inputs(data, stage, in, stats, inputs);
  const uint64_t n = train_stats.kept;
  HeldOutSplit held = split_held_out(cfg, options.vocab, n, stage, in);
  const DatasetVocabs vocabs = build_vocabs(cfg, options.vocab, languages, held, threads, stage);
  const EncodedSplits encoded = encode_splits(data, vocabs, held, in, n, threads, stats, stage);
  stats["splits"] = encoded.meta;

  // The work files go; the dataset keeps the binarized splits and the held-out text.
  std::error_code ec;
  fs::remove(stage.file("corpus.clean." + S), ec);
  fs::remove(stage.file("corpus.clean." + T), ec);
  if (in.from_release) {
    fs::remove(in.train_src, ec);
    fs::remove(in.train_tgt, ec);
  }

  nlohmann::json meta = {
      {"format", "parla-dataset"},
      {"format_version", 1},
      {"created_by", std::string("parla-preprocess ") + kVersion},
      {"src_lang", S},
      {"tgt_lang", T},
      {"vocab", vocabs.meta},
      {"token_bytes", {{"src", encoded.src_bytes}, {"tgt", encoded.tgt_bytes}}},
      {"splits", encoded.meta},
      {"inputs", inputs},
      {"config", config::to_json(cfg)},
  };
  write_file_atomically(stage.file("stats.json"), stats.dump(2) + "\n");
  write_file_atomically(stage.file("meta.json"), meta.dump(2) + "\n");
  stage.commit();
  spdlog::info("wrote dataset '{}'", data.dir);
  return {data.dir, stats, meta};
}

}  // namespace parla::data
