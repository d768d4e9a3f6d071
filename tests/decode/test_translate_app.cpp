// parla-translate end to end: a tiny SentencePiece model trained here, a tiny random Transformer saved as a
// checkpoint, and the executable run the way a user runs it.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <torch/torch.h>

#include "core/config.h"
#include "core/error.h"
#include "core/heap_allocator.h"
#include "core/output_file.h"
#include "decode/input_sanitizer.h"
#include "core/lean_load.h"
#include "decode/translate_file.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "models/checkpoint.h"
#include "models/factory.h"
#include "models/tiny_config.h"
#include "runtime/runtime.h"
#include "support/choice.h"
#include "text/sentencepiece_training.h"
#include "text/sentencepiece_vocab.h"
#include "support/cuda.h"
#include "support/files.h"
#include "support/resident_memory.h"
#include "support/run.h"
#include "support/temp_dir.h"
#include "support/tiny_checkpoint.h"
#include "support/toy_parallel.h"

using parla::testing::run;
using parla::testing::TempDir;
namespace fs = std::filesystem;

namespace {


std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A checkpoint with SentencePiece models, built once for all tests of this file.
struct Fixture {
  TempDir dir{"translate-app"};
  std::string checkpoint, input;
  size_t input_lines = 0;

  Fixture() {
    checkpoint = dir.file("model.pt");
    parla::testing::write_tiny_checkpoint(checkpoint, 5);
    const auto& words = parla::testing::toy_words();

    std::string text;
    for (int i = 0; i < 70; ++i) {
      if (i % 9 == 4) {
        text += "\n";  // empty lines
      } else {
        for (int j = 0; j < 1 + (i * 7) % 11; ++j) text += std::string(words[(i + j * 3) % 12]) + " ";
        text += "\n";
      }
    }
    text += "the house \xC3\x28 is \xFF small\n";  // invalid UTF-8
    text += std::string("a \0 dog\r\n", 9);     // NUL and CR
    for (int j = 0; j < 80; ++j) text += "green tree ";  // overlong line, no final newline
    input = dir.write("input.txt", text);
    input_lines = 73;
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// The in-process translators' settings: beam 2, sources cut at 40 pieces.
parla::DecodingConfig beam2_cut40() {
  parla::DecodingConfig cfg;
  cfg.beam_size = 2;
  cfg.max_input_length = 40;
  return cfg;
}

// A translator over one checkpoint on the CPU, as parla-translate makes it.
parla::decode::Translator cpu_translator(const std::string& checkpoint, const parla::DecodingConfig& cfg) {
  return parla::decode::Translator(parla::decode::TranslationModel::load({checkpoint}, cfg, torch::kCPU), 1);
}

}  // namespace

TEST_CASE("parla-translate writes one line per input line and the same text at batch 1 and batch 64",
          "[translate_app]") {
  auto& f = fixture();
  auto b1 = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-b", "3", "--batch-size", "1",
                                    "--maxi-batch", "1", "--max-input-length", "40", "--threads", "1"});
  INFO(b1.err);
  REQUIRE(b1.exit_code == 0);
  auto lines = parla::testing::split_lines(b1.out);
  REQUIRE(lines.size() == f.input_lines);
  // Empty input lines give empty output lines.
  auto in = parla::testing::split_lines(slurp(f.input));
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].empty()) CHECK(lines[i].empty());
  // Bad input is reported with its line number.
  CHECK(b1.err.find("line 71") != std::string::npos);  // invalid UTF-8
  CHECK(b1.err.find("line 72") != std::string::npos);  // control character
  CHECK(b1.err.find("line 73") != std::string::npos);  // truncated
  CHECK(b1.err.find("sentences/s") != std::string::npos);

  // Length sorting inside large maxi-batches must not change or reorder anything.
  auto b64 = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-b", "3", "--batch-size", "64",
                                     "--maxi-batch", "4", "--max-input-length", "40", "--threads", "1"});
  REQUIRE(b64.exit_code == 0);
  CHECK(b64.out == b1.out);
  auto tok = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-b", "3", "--batch-tokens", "100",
                                     "--max-input-length", "40", "--threads", "1"});
  REQUIRE(tok.exit_code == 0);
  CHECK(tok.out == b1.out);
  // Line-buffered mode (one line at a time) gives the same text too.
  auto lb = run("parla-translate", {"-m", f.checkpoint, "-b", "3", "--line-buffered", "--max-input-length", "40",
                                    "--threads", "1"},
                f.input);
  REQUIRE(lb.exit_code == 0);
  CHECK(lb.out == b1.out);
  // An ensemble of the checkpoint with itself translates identically.
  auto ens = run("parla-translate", {"-m", f.checkpoint, f.checkpoint, "-i", f.input, "-b", "3",
                                     "--max-input-length", "40", "--threads", "1"});
  REQUIRE(ens.exit_code == 0);
  CHECK(ens.out == b1.out);
}

TEST_CASE("parla-translate decodes checkpoints of the efficient self-attention variants, the same text at batch 1 "
          "and 64", "[translate_app]") {
  auto& f = fixture();
  struct Variant { const char* encoder; const char* decoder; };
  for (auto v : {Variant{"sparse", "sparse"}, Variant{"routing", "routing"}, Variant{"nystrom", "performer"},
                 Variant{"local", "linear"}}) {
    auto cfg = parla::testing::tiny_transformer();
    cfg.encoder_attention = parla::testing::choice<parla::AttentionKind>(v.encoder);
    cfg.decoder_attention = parla::testing::choice<parla::AttentionKind>(v.decoder);
    cfg.local_window = 1;
    cfg.sparse_block_size = 2;
    cfg.routing_clusters = 2;
    cfg.nystrom_landmarks = 4;
    cfg.nystrom_conv_kernel = 3;
    const auto path = f.dir.file(std::string("variant-") + v.encoder + "-" + v.decoder + ".pt");
    parla::testing::write_tiny_checkpoint(path, 6, cfg);
    INFO(v.encoder << " / " << v.decoder);
    auto b1 = run("parla-translate", {"-m", path, "-i", f.input, "-b", "3", "--batch-size", "1", "--maxi-batch", "1",
                                      "--max-input-length", "40", "--threads", "1"});
    INFO(b1.err);
    REQUIRE(b1.exit_code == 0);
    REQUIRE(parla::testing::split_lines(b1.out).size() == f.input_lines);
    auto b64 = run("parla-translate", {"-m", path, "-i", f.input, "-b", "3", "--batch-size", "64", "--maxi-batch",
                                       "4", "--max-input-length", "40", "--threads", "1"});
    REQUIRE(b64.exit_code == 0);
    CHECK(b64.out == b1.out);
  }
  // A decoder that cannot run causally is a config error naming the key (exit 2).
  auto bad = run("parla-train", {"--set", "model.decoder_attention=nystrom", "--dump-config"});
  CHECK(bad.exit_code == 2);
  CHECK(bad.err.find("model.decoder_attention") != std::string::npos);
}

TEST_CASE("parla-translate --precision int8 gives the same text at batch 1 and 64, and so does the int8 checkpoint "
          "parla-train quantize writes", "[translate_app][int8]") {
  auto& f = fixture();
  auto flags = [&](const std::string& model, const std::string& batch) {
    return std::vector<std::string>{"-m", model, "-i", f.input, "-b", "3", "--batch-size", batch, "--maxi-batch", "4",
                                    "--max-input-length", "40", "--threads", "1", "--precision", "int8"};
  };
  auto b1 = run("parla-translate", flags(f.checkpoint, "1"));
  INFO(b1.err);
  REQUIRE(b1.exit_code == 0);
  CHECK(parla::testing::split_lines(b1.out).size() == f.input_lines);
  CHECK(b1.err.find("int8 on ") != std::string::npos);  // the log names the instruction set used
  auto b64 = run("parla-translate", flags(f.checkpoint, "64"));
  REQUIRE(b64.exit_code == 0);
  CHECK(b64.out == b1.out);

  const std::string int8 = f.dir.file("model-int8.pt");
  auto q = run("parla-train", {"quantize", "-o", int8, f.checkpoint});
  INFO(q.err);
  REQUIRE(q.exit_code == 0);
  auto from_file = run("parla-translate", flags(int8, "64"));
  REQUIRE(from_file.exit_code == 0);
  CHECK(from_file.out == b1.out);
  // The int8 checkpoint decodes in int8 whatever precision is asked, except one that contradicts it.
  auto plain = run("parla-translate", {"-m", int8, "-i", f.input, "-b", "3", "--max-input-length", "40"});
  REQUIRE(plain.exit_code == 0);
  CHECK(plain.out == b1.out);
  auto bf16 = run("parla-translate", {"-m", int8, "-i", f.input, "--precision", "bf16"});
  CHECK(bf16.exit_code == 2);
  CHECK(bf16.err.find("decoding.precision") != std::string::npos);
  CHECK(bf16.err.find(int8) != std::string::npos);
  // Quantizing it again, or a file that is not a checkpoint, is refused naming the file; nothing is written.
  const std::string again = f.dir.file("again.pt");
  for (const auto& bad : {int8, f.input}) {
    auto r = run("parla-train", {"quantize", "-o", again, bad});
    CHECK(r.exit_code == 1);
    CHECK(r.err.find(bad) != std::string::npos);
    CHECK(!fs::exists(again));
  }
}

TEST_CASE("parla-translate with runtime.inter_threads workers gives the output of one, fp32 and int8, batch 1 and "
          "64, n-best scores too, and sampling refuses it naming the key", "[translate_app]") {
  // Workers search different batches of a window at once on one shared model: every byte, the printed scores
  // included, must be the single worker's (it caught two races: the int8 products' shared oneDNN scratchpad and
  // the positional table's growth).
  auto& f = fixture();
  auto flags = [&](const std::string& batch, const std::string& precision, const std::string& workers) {
    return std::vector<std::string>{"-m", f.checkpoint, "-i", f.input, "-b", "3", "-n", "2", "--batch-size", batch,
                                    "--maxi-batch", "4", "--max-input-length", "40", "--threads", "1",
                                    "--precision", precision, "--inter-threads", workers};
  };
  for (const std::string precision : {"fp32", "int8"}) {
    for (const std::string batch : {"1", "64"}) {
      auto one = run("parla-translate", flags(batch, precision, "1"));
      INFO(precision << ", batch " << batch << ": " << one.err);
      REQUIRE(one.exit_code == 0);
      REQUIRE(parla::testing::split_lines(one.out).size() >= f.input_lines);
      for (const std::string workers : {"2", "3"}) {
        auto many = run("parla-translate", flags(batch, precision, workers));
        INFO(workers << " workers: " << many.err);
        REQUIRE(many.exit_code == 0);
        CHECK(many.out == one.out);
        CHECK(many.err.find(workers + " workers of 1 thread each") != std::string::npos);
      }
    }
  }
  auto sampling = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "--sampling", "--inter-threads", "2"});
  CHECK(sampling.exit_code == 2);
  CHECK(sampling.err.find("runtime.inter_threads") != std::string::npos);
  auto zero = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "--inter-threads", "0"});
  CHECK(zero.exit_code == 2);
  CHECK(zero.err.find("inter") != std::string::npos);
}

TEST_CASE("parla-translate prints sorted distinct n-best lists and alignments", "[translate_app]") {
  auto& f = fixture();
  auto r = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-b", "4", "--n-best", "4",
                                   "--alignment", "hard", "--max-input-length", "40", "--threads", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  auto lines = parla::testing::split_lines(r.out);
  auto in = parla::testing::split_lines(slurp(f.input));
  std::regex entry(R"(^(\d+) \|\|\| (.*) \|\|\| (-?[0-9.e+-]+|0) \|\|\| ?((\d+-\d+ ?)*)$)");
  std::map<int, std::vector<std::pair<std::string, double>>> by_line;
  for (auto& l : lines) {
    std::smatch m;
    INFO(l);
    REQUIRE(std::regex_match(l, m, entry));
    by_line[std::stoi(m[1])].emplace_back(m[2], std::stod(m[3]));
  }
  REQUIRE(by_line.size() == f.input_lines);
  for (auto& [i, list] : by_line) {
    if (in[i].empty()) continue;
    CHECK(list.size() == 4);
    std::set<std::string> distinct;
    for (size_t k = 0; k < list.size(); ++k) {
      if (k) CHECK(list[k - 1].second >= list[k].second);
      distinct.insert(list[k].first);
    }
    // Distinct piece sequences may detokenise to the same text only rarely; require most to differ.
    CHECK(distinct.size() >= 2);
  }
}

TEST_CASE("parla-translate writes -o files atomically and refuses bad checkpoints clearly", "[translate_app]") {
  auto& f = fixture();
  std::string out = f.dir.file("out.txt");
  // What killed runs left: a temporary whose writer is gone and the fixed name older versions used; the next run
  // removes them, and keeps a live writer's.
  const std::string stale = f.dir.write("out.txt.tmp." + std::to_string(parla::testing::dead_pid()), "half");
  const std::string legacy = f.dir.write("out.txt.tmp", "half");
  const std::string live = f.dir.write("out.txt.tmp." + std::to_string(::getpid()), "being written");
  auto r = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-o", out, "-b", "1", "--max-input-length",
                                   "40", "--threads", "1"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.out.empty());
  CHECK(parla::testing::split_lines(slurp(out)).size() == f.input_lines);
  CHECK_FALSE(fs::exists(stale));
  CHECK_FALSE(fs::exists(legacy));
  CHECK(fs::exists(live));
  fs::remove(live);
  for (const auto& e : fs::directory_iterator(f.dir.path()))
    CHECK(e.path().filename().string().find("out.txt.tmp") == std::string::npos);
  CHECK(r.err.find("removed '" + stale + "'") != std::string::npos);

  // A FIFO is written in place: its reader gets the translations (a rename would leave it waiting forever).
  const std::string fifo = f.dir.file("out.fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string reader_out = f.dir.file("from-fifo.txt");
  auto via_fifo = run("/bin/bash", {"-c", "timeout 120 cat " + parla::testing::shell_quote(fifo) + " > " +
                                              parla::testing::shell_quote(reader_out) + " & " +
                                              parla::testing::shell_quote(std::string(PARLA_BIN_DIR) +
                                                                          "/parla-translate") +
                                              " -m " + parla::testing::shell_quote(f.checkpoint) + " -i " +
                                              parla::testing::shell_quote(f.input) + " -o " +
                                              parla::testing::shell_quote(fifo) +
                                              " -b 1 --max-input-length 40 --threads 1; rc=$?; wait; exit $rc"});
  INFO(via_fifo.err);
  REQUIRE(via_fifo.exit_code == 0);
  CHECK(slurp(reader_out) == slurp(out));
  CHECK(fs::status(fifo).type() == fs::file_type::fifo);

  std::string bogus = f.dir.write("bogus.pt", "this is not a checkpoint");
  auto bad = run("parla-translate", {"-m", bogus, "-i", f.input});
  CHECK(bad.exit_code == 1);
  CHECK(bad.err.find("bogus.pt") != std::string::npos);
  auto missing = run("parla-translate", {"-i", f.input});
  CHECK(missing.exit_code == 2);
  auto bad_nbest = run("parla-translate", {"-m", f.checkpoint, "-b", "2", "--n-best", "3"}, f.input);
  CHECK(bad_nbest.exit_code == 2);
  CHECK(bad_nbest.err.find("n_best") != std::string::npos);
}

TEST_CASE("parla-translate refuses devices and precisions this machine cannot run, naming the flag or key",
          "[translate_app]") {
  auto& f = fixture();
  auto refused = [&](std::vector<std::string> extra, const std::string& named) {
    std::vector<std::string> args{"-m", f.checkpoint, "-i", f.input, "--threads", "1"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r = run("parla-translate", args);
    INFO(named << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK(r.err.find(named) != std::string::npos);
    CHECK(r.out.empty());
  };
  refused({"--device", "cpu", "--precision", "fp16"}, "decoding.precision");  // no fp16 autocast on a CPU
  refused({"--precision", "fp8"}, "decoding.precision");
  refused({"--device", "gpu"}, "device");
  const auto gpus = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  if (gpus == 0) {
    refused({"--device", "cuda"}, "--device");
    refused({"--set", "runtime.device=cuda"}, "runtime.device");
  }
  if (gpus < 4) refused({"--device", "cuda:3"}, "--device");
}

TEST_CASE("parla-translate in bf16 on the CPU translates every line", "[translate_app]") {
  auto& f = fixture();
  auto r = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "-b", "2", "--precision", "bf16",
                                   "--max-input-length", "40", "--threads", "1"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(parla::testing::split_lines(r.out).size() == f.input_lines);
}

TEST_CASE("a translator resolves decoding.precision for its device and names the output it cannot write",
          "[translate_app]") {
  auto& f = fixture();
  parla::DecodingConfig cfg = beam2_cut40();
  auto t = cpu_translator(f.checkpoint, cfg);
  CHECK(t.model().device.is_cpu());
  CHECK(t.model().precision == torch::kFloat);
  parla::decode::FileTranslator file_translator(t, cfg);
  cfg.precision = parla::Precision::kBf16;
  CHECK(parla::decode::TranslationModel::load({f.checkpoint}, cfg)->precision == torch::kBFloat16);
  cfg.precision = parla::Precision::kFp16;
  CHECK_THROWS_WITH(parla::decode::TranslationModel::load({f.checkpoint}, cfg, torch::kCPU),
                    Catch::Contains("decoding.precision"));

  std::istringstream in("the house is small\n");
  parla::OutputFile full("/dev/full");  // refuses every write with ENOSPC, as a full disk does
  CHECK_THROWS_WITH(file_translator.translate_stream(in, full),
                    Catch::Contains("'/dev/full'") && Catch::Contains("No space left on device"));
}

namespace {

// Clean input (no warnings: under a file size limit stderr is limited too) whose translations are several KB.
std::string long_input(const TempDir& dir) {
  const char* words[] = {"the", "house", "is", "small", "a", "dog", "runs", "fast", "green", "tree", "we", "see"};
  std::string text;
  for (int i = 0; i < 160; ++i) {
    for (int j = 0; j < 4 + i % 9; ++j) text += std::string(words[(i * 7 + j * 5) % 12]) + " ";
    text += "\n";
  }
  return dir.write("long.txt", text);
}

std::vector<std::string> quick_args(const Fixture& f, const std::string& input) {
  return {"-m", f.checkpoint, "-i", input, "-b", "1", "--batch-size", "64", "--max-input-length", "40",
          "--threads", "1", "-q"};
}

}  // namespace

TEST_CASE("parla-translate writing to a full standard output exits 1 naming standard output and the reason",
          "[translate_app]") {
  auto& f = fixture();
  std::vector<std::string> args{"-c", "exec \"$0\" \"$@\" > /dev/full", std::string(PARLA_BIN_DIR) + "/parla-translate"};
  for (auto& a : quick_args(f, f.input)) args.push_back(a);
  auto r = run("/bin/bash", args);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find("standard output") != std::string::npos);
  CHECK(r.err.find("No space left on device") != std::string::npos);
}

TEST_CASE("parla-translate -o FILE past a file size limit exits 1 naming FILE and the reason, leaving nothing",
          "[translate_app]") {
  auto& f = fixture();
  TempDir dir("translate-fsize");
  const std::string input = long_input(dir);
  auto whole = run("parla-translate", quick_args(f, input));
  REQUIRE(whole.exit_code == 0);
  // bash's `ulimit -f` counts 1024-byte blocks (512 in POSIX mode): either way below this output.
  REQUIRE(whole.out.size() > 4096);

  fs::create_directories(dir.file("out"));
  const std::string out = dir.file("out/translations.txt");
  // SIGXFSZ ignored, so the write past the limit fails with EFBIG instead of killing the process.
  std::vector<std::string> args{"-c", "trap '' XFSZ; ulimit -f 1; exec \"$0\" \"$@\"",
                                std::string(PARLA_BIN_DIR) + "/parla-translate", "-o", out};
  for (auto& a : quick_args(f, input)) args.push_back(a);
  auto r = run("/bin/bash", args);
  INFO(r.err);
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(out) != std::string::npos);
  CHECK(r.err.find("File too large") != std::string::npos);
  CHECK(fs::is_empty(dir.file("out")));  // neither FILE nor its temporary
}

TEST_CASE("parla-translate cuts a 20 MB line to its character budget as it reads it: one warning naming the line, "
          "bounded memory, the same output as for the cut line", "[translate_app]") {
  auto& f = fixture();
  TempDir dir("translate-long-line");
  std::string huge;
  while (huge.size() < (size_t{20} << 20)) huge += "green tree ";
  const size_t budget = 32 * 40;  // the derived budget: 32 characters per piece of --max-input-length 40
  const std::string input = dir.write("huge.txt", "the house is small\n" + huge + "\na dog runs\n");
  const std::string cut = dir.write("cut.txt", "the house is small\n" + huge.substr(0, budget) + "\na dog runs\n");
  auto args = [&](const std::string& in) {
    return std::vector<std::string>{"-m", f.checkpoint, "-i", in, "-b", "2", "--max-input-length", "40", "--threads",
                                    "1"};
  };
  auto small = parla::testing::run_measured("parla-translate", args(cut));
  auto big = parla::testing::run_measured("parla-translate", args(input));
  INFO(big.err);
  REQUIRE(small.exit_code == 0);
  REQUIRE(big.exit_code == 0);
  CHECK(parla::testing::split_lines(big.out).size() == 3);
  CHECK(big.out == small.out);  // the cut is the only change
  CHECK(big.err.find("input line 2: " + std::to_string(huge.size()) + " bytes, longer than the limit of 1280 "
                     "characters (decoding.max_input_chars); cut before tokenizing") != std::string::npos);
  CHECK(small.err.find("decoding.max_input_chars") == std::string::npos);  // a line within the budget is kept
  // Reading the whole line, sanitising and encoding it took hundreds of MB; the cut line costs nothing extra.
  CHECK(big.peak_rss_kib < small.peak_rss_kib + 64 * 1024);

  // --max-input-chars sets the budget itself.
  auto chosen = run("parla-translate", {"-m", f.checkpoint, "-i", cut, "-b", "2", "--max-input-chars", "100",
                                        "--threads", "1"});
  REQUIRE(chosen.exit_code == 0);
  CHECK(chosen.err.find("input line 2: 1280 bytes, longer than the limit of 100 characters") != std::string::npos);
  CHECK(chosen.err.find("input line 1:") == std::string::npos);
}

TEST_CASE("a line cut for parla-serve (encode_line) gets parla-translate's cut, pieces and translation",
          "[translate_app]") {
  auto& f = fixture();
  parla::DecodingConfig cfg = beam2_cut40();
  auto t = cpu_translator(f.checkpoint, cfg);
  CHECK(t.model().max_input_chars == 32 * 40);
  std::string line;
  while (line.size() < 100000) line += "the \xC3\xA9t\xC3\xA9 house is small ";
  const auto ids = t.encode_line(line, "a request");
  const size_t keep = parla::decode::kept_bytes(line, t.model().max_input_chars);
  REQUIRE(keep < line.size());
  CHECK(ids == t.encode_line(line.substr(0, keep), "a request"));
  CHECK(static_cast<int64_t>(ids.size()) == t.model().max_input_length);

  TempDir dir("translate-serve-cut");
  std::istringstream in(line + "\n");
  {
    parla::OutputFile out(dir.file("out.txt"));
    parla::decode::FileTranslator(t, cfg).translate_stream(in, out);
    out.close();
  }
  const auto served = t.translate_batch({ids}, t.options());
  REQUIRE(served.size() == 1);
  CHECK(parla::testing::read_file(dir.file("out.txt")) == served[0][0].text + "\n");

  cfg.max_input_chars = 7;
  CHECK(parla::decode::TranslationModel::load({f.checkpoint}, cfg, torch::kCPU)->max_input_chars == 7);
}

TEST_CASE("translate_batch and open_stream search with the options of the call, not the translator's",
          "[translate_app]") {
  auto& f = fixture();
  parla::DecodingConfig cfg = beam2_cut40();
  auto beam2 = cpu_translator(f.checkpoint, cfg);
  cfg.beam_size = 3;
  cfg.n_best = 3;
  cfg.length_penalty = 0;
  auto nbest3 = cpu_translator(f.checkpoint, cfg);
  REQUIRE(nbest3.options().n_best == 3);
  REQUIRE(beam2.options().beam_size == 2);

  std::vector<std::vector<int>> sources;
  for (const char* line : {"the house is small", "a green tree", "the dog"})
    sources.push_back(beam2.encode_line(line, "a request"));
  // beam2's translator given nbest3's options answers as nbest3 does, and the other way round.
  const auto asked = beam2.translate_batch(sources, nbest3.options());
  const auto own = nbest3.translate_batch(sources, nbest3.options());
  const auto back = nbest3.translate_batch(sources, beam2.options());
  const auto beam2_own = beam2.translate_batch(sources, beam2.options());
  REQUIRE(asked.size() == sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    CHECK(asked[i].size() == 3);
    CHECK(back[i].size() == 1);
    REQUIRE(asked[i].size() == own[i].size());
    for (size_t k = 0; k < own[i].size(); ++k) {
      CHECK(asked[i][k].text == own[i][k].text);
      CHECK(asked[i][k].score == own[i][k].score);
    }
    CHECK(back[i][0].text == beam2_own[i][0].text);
    CHECK(back[i][0].score == beam2_own[i][0].score);
  }

  // A stream opened with options searches with them too.
  auto stream = beam2.open_stream(nbest3.options());
  stream->add(sources, {0, 1, 2});
  size_t done = 0;
  while (stream->size() > 0) {
    for (auto& [id, result] : stream->step()) {
      ++done;
      REQUIRE(result.size() == own[static_cast<size_t>(id)].size());
      CHECK(result[0].text == own[static_cast<size_t>(id)][0].text);
    }
  }
  CHECK(done == sources.size());
  auto sampling = beam2.options();
  sampling.sampling = true;
  CHECK_THROWS_AS(beam2.open_stream(sampling), parla::UsageError);
}

TEST_CASE("parla-translate on a GPU gives the CPU's translations", "[translate_app][cuda]") {
  PARLA_REQUIRE_CUDA();
  auto& f = fixture();
  std::vector<std::string> args{"-m", f.checkpoint, "-i", f.input, "-b", "3", "--max-input-length", "40"};
  auto cpu_args = args, gpu_args = args;
  cpu_args.insert(cpu_args.end(), {"--device", "cpu"});
  gpu_args.insert(gpu_args.end(), {"--device", "cuda"});
  auto cpu = run("parla-translate", cpu_args), gpu = run("parla-translate", gpu_args);
  INFO(gpu.err);
  REQUIRE(cpu.exit_code == 0);
  REQUIRE(gpu.exit_code == 0);
  auto a = parla::testing::split_lines(cpu.out), b = parla::testing::split_lines(gpu.out);
  REQUIRE(b.size() == a.size());
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] == b[i]) ++same;
    else WARN("line " << i + 1 << " differs: cpu '" << a[i] << "', gpu '" << b[i] << "'");
  }
  CHECK(static_cast<double>(same) >= 0.95 * static_cast<double>(a.size()));
  // A GPU that does not exist is refused with exit 2 naming the flag.
  auto past = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "--device",
                                      "cuda:" + std::to_string(torch::cuda::device_count())});
  CHECK(past.exit_code == 2);
  CHECK(past.err.find("--device") != std::string::npos);
}

TEST_CASE("parla-shortlist builds a shortlist that parla-translate decodes with, the same text at batch 1 and 64, "
          "bad files are refused naming them", "[translate_app][shortlist]") {
  auto& f = fixture();
  const auto [src_path, tgt_path] = parla::testing::write_toy_parallel(f.dir, "train");
  const auto sl = f.dir.file("shortlist.txt");
  auto built = run("parla-shortlist", {"-m", f.checkpoint, "--source", src_path, "--target", tgt_path, "-o", sl,
                                       "--best", "3", "--frequent", "2"});
  INFO(built.err);
  REQUIRE(built.exit_code == 0);
  REQUIRE(fs::exists(sl));
  CHECK(!parla::testing::read_file(sl).empty());
  for (const char* precision : {"fp32", "int8"}) {
    auto flags = [&](const std::string& batch, bool shortlist) {
      std::vector<std::string> v{"-m", f.checkpoint, "-i", f.input, "-b", "3", "--batch-size", batch,
                                 "--max-input-length", "40", "--threads", "1", "--precision", precision};
      if (shortlist) v.insert(v.end(), {"--shortlist", sl});
      return v;
    };
    auto b1 = run("parla-translate", flags("1", true));
    INFO(precision << ": " << b1.err);
    REQUIRE(b1.exit_code == 0);
    CHECK(b1.err.find("shortlist " + sl) != std::string::npos);
    CHECK(parla::testing::split_lines(b1.out).size() == f.input_lines);
    auto b64 = run("parla-translate", flags("64", true));
    REQUIRE(b64.exit_code == 0);
    CHECK(b64.out == b1.out);
    auto full = run("parla-translate", flags("64", false));
    REQUIRE(full.exit_code == 0);
    CHECK(full.out != b1.out);  // 2 frequent + 3 per piece of a 48-piece vocabulary restricts
  }
  // A shortlist for another vocabulary, a line without a tab, sides of different lengths: exit 1 naming the file.
  const auto foreign = f.dir.write("foreign.txt", "\t\xE2\x96\x81zzzunknown\n");
  auto r = run("parla-translate", {"-m", f.checkpoint, "-i", f.input, "--shortlist", foreign});
  CHECK(r.exit_code == 1);
  CHECK(r.err.find(foreign + ":1") != std::string::npos);
  CHECK(r.out.empty());
  const auto short_tgt = f.dir.write("short.tgt", "the house\n");
  const auto never = f.dir.file("never.txt");
  auto uneven = run("parla-shortlist", {"-m", f.checkpoint, "--source", src_path, "--target", short_tgt, "-o", never});
  CHECK(uneven.exit_code == 1);
  CHECK(uneven.err.find(short_tgt) != std::string::npos);
  CHECK(!fs::exists(never));
}

TEST_CASE("load_lean gives back what loading a model freed: a trim right after it finds little", "[translate_app]") {
  // The shared Multi30k model quantized at load: the file's copies and the float weights int8 replaced are freed
  // while loading (60 MB stayed resident in parla-translate before return_free_memory existed).
  const std::string path = std::string(PARLA_SHARED_DIR) + "/models/multi30k-en-de-small/average.pt";
  parla::DecodingConfig cfg;
  cfg.precision = parla::Precision::kInt8;
  parla::decode::Translator t(
      parla::load_lean([&] { return parla::decode::TranslationModel::load({path}, cfg, torch::kCPU); }), 1);
  const long before = parla::testing::resident_process_kb();
  parla::return_free_memory();
  const long after = parla::testing::resident_process_kb();
  INFO("VmRSS " << before << " -> " << after << " kB");
  CHECK(before - after < 8 * 1024);
  CHECK(parla::decode::FileTranslator(t, cfg).translate_lines({"A man is riding a bike."}).size() == 1);
}
