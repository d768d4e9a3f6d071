// libFuzzer target over parla-translate's input path (everything between the raw bytes and the model):
// line splitting and cutting to the character budget, sanitising (UTF-8 repair, control characters),
// SentencePiece encoding, truncation at the length limit and maxi-batch planning. It checks the invariants the
// translator relies on, and aborts (a finding) when one breaks:
//   - one line per '\n', plus an unterminated last line: lines are never dropped, merged or split;
//   - a line cut to its character budget is the prefix kept_bytes() names, and the reader says it cut it;
//   - a sanitised line is valid UTF-8 without newlines or control characters, and sanitising is idempotent;
//   - SentencePiece ids are inside the vocabulary and never special (pad/bos/eos);
//   - batch planning puts every line in exactly one batch and respects the sentence and token budgets.
// The model part is left out on purpose: it is torch code, and the search is tested exhaustively elsewhere.
// Built with clang++ -fsanitize=fuzzer,address,undefined by fuzz/CMakeLists.txt; see fuzz/README.md.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include "decode/input_sanitizer.h"
#include "decode/maxi_batch.h"

namespace {

std::unique_ptr<sentencepiece::SentencePieceProcessor> g_sp;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "invariant broken: %s\n", what);
    std::abort();
  }
}

// A tiny SentencePiece model with parla's special ids, trained once on generated multilingual text.
void train_vocab() {
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = tmp ? tmp : "/tmp";
  std::string corpus = dir + "/parla_fuzz_spm_corpus.txt", prefix = dir + "/parla_fuzz_spm";
  {
    std::ofstream out(corpus);
    const char* words[] = {"the", "house", "is", "small", "das", "Haus", "ist", "klein", "gro\xC3\x9F",
                           "\xC3\xA9t\xC3\xA9", "\xE4\xB8\xAD\xE6\x96\x87", "\xF0\x9F\x98\x80", "1234", "!"};
    for (int i = 0; i < 300; ++i) {
      for (int j = 0; j < 8; ++j) out << words[(i * 7 + j * 3 + i / 5) % 14] << ' ';
      out << '\n';
    }
  }
  auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + corpus + " --model_prefix=" + prefix +
      " --vocab_size=40 --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 --character_coverage=1.0 "
      "--minloglevel=2");
  if (!status.ok()) std::fprintf(stderr, "%s\n", status.ToString().c_str());
  check(status.ok(), "training the fuzz vocabulary");
  g_sp = std::make_unique<sentencepiece::SentencePieceProcessor>();
  check(g_sp->Load(prefix + ".model").ok(), "loading the fuzz vocabulary");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  train_vocab();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace parla::decode;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> expected;  // the lines as '\n' splits them, uncut
  for (size_t start = 0; start < bytes.size();) {
    size_t end = bytes.find('\n', start);
    if (end == std::string::npos) end = bytes.size();
    expected.push_back(bytes.substr(start, end - start));
    start = end + 1;
  }

  std::istringstream in(bytes);
  // Budgets from a few characters (most lines cut) to unlimited (none cut).
  const size_t max_chars = size > 4 && data[4] % 4 != 0 ? data[4] % 97 : CharBudget::kUnlimited;
  LineReader reader(in, max_chars);
  std::string raw;
  std::vector<size_t> lengths;
  const size_t max_input = 1 + (size > 0 ? data[0] % 64 : 0);
  while (reader.next(raw)) {
    check(raw.find('\n') == std::string::npos, "a line holds a newline");
    check(reader.line_number() <= expected.size(), "more lines than newlines");
    const std::string& whole = expected[reader.line_number() - 1];
    check(reader.line_bytes() == whole.size(), "the reader miscounts a line's bytes");
    check(raw.size() == kept_bytes(whole, max_chars) && whole.compare(0, raw.size(), raw) == 0,
          "a cut line is not the prefix its budget keeps");
    check(reader.cut() == (raw.size() < whole.size()), "a cut goes unreported, or a whole line is reported cut");
    auto clean = sanitize_line(raw);
    check(is_valid_utf8(clean.text), "sanitised line is not valid UTF-8");
    for (unsigned char c : clean.text) check(c >= 0x20 || c == '\t', "control character survived");
    check(sanitize_line(clean.text).text == clean.text, "sanitising is not idempotent");
    std::vector<int> ids;
    check(g_sp->Encode(clean.text, &ids).ok(), "SentencePiece refused a sanitised line");
    for (int id : ids) check(id >= 0 && id < g_sp->GetPieceSize() && id != 0 && id != 2 && id != 3, "bad piece id");
    if (ids.size() > max_input) ids.resize(max_input);
    std::string text;
    check(g_sp->Decode(ids, &text).ok(), "SentencePiece cannot decode its own ids");
    lengths.push_back(ids.size());
  }
  check(reader.line_number() == expected.size(), "line count differs from the newline count");

  BatchLimits limits{1 + (size > 1 ? data[1] % 70u : 0u), size > 2 ? data[2] % 200u : 0u, 1 + (size > 3 ? data[3] % 5u : 0u)};
  auto batches = plan_batches(lengths, limits);
  std::vector<int> seen(lengths.size(), 0);
  for (const auto& b : batches) {
    check(!b.empty(), "empty batch");
    size_t width = 0;
    for (size_t i : b) {
      check(i < lengths.size(), "batch index out of range");
      ++seen[i];
      width = std::max(width, lengths[i] + 1);
    }
    if (b.size() > 1) check(width * b.size() <= batch_token_budget(limits), "token budget");
    if (limits.batch_tokens == 0) check(b.size() <= limits.batch_size, "sentence budget");
  }
  for (int s : seen) check(s == 1, "a line is in no batch or in two");
  return 0;
}
