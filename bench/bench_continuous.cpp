// Continuous against static batching, in process, without HTTP: the decoder's side of parla-serve under a
// closed loop of N clients, each with one sentence in flight (a finished sentence is replaced by the next
// one in arrival order), against
//   - static batching as the server does it: batches of the N waiting sentences in arrival order, each batch
//     decoded until its longest sentence ends, and
//   - the offline ceiling: parla-translate's path (all sentences known, sorted by length, batches of N).
// Continuous batching is timed in its two parts: joining (encoder + merging the decoder state) and stepping.
// Every continuous translation is compared with the static one (must be identical).
//   bench_continuous [model=../shared/models/multi30k-en-de-small/average.pt]
//                    [sentences=../shared/data/multi30k/test_2016_flickr.en] [count=512] [clients=16,64] [beam=5]
//                    [join sizes=1,8] [device=cpu]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/config/decoding_config.h"
#include "runtime/runtime.h"
#include "runtime/runtime_device.h"
#include "decode/translation_model.h"
#include "decode/translator.h"

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  const std::string root = std::string(PARLA_BENCH_SOURCE_DIR) + "/../shared";
  const std::string model = argc > 1 ? argv[1] : root + "/models/multi30k-en-de-small/average.pt";
  const std::string input = argc > 2 ? argv[2] : root + "/data/multi30k/test_2016_flickr.en";
  const size_t count = argc > 3 ? std::stoul(argv[3]) : 512;
  const auto client_counts = parse_list(argc > 4 ? argv[4] : "16,64");
  const int beam = argc > 5 ? std::stoi(argv[5]) : 5;
  // Sentences that must be waiting before they join (fewer joins, each with a larger encoder batch).
  const auto join_sizes = parse_list(argc > 6 ? argv[6] : "1,8");
  const std::string device_name = argc > 7 ? argv[7] : "cpu";

  auto lines = read_lines(input);
  if (lines.empty()) {
    std::fprintf(stderr, "no sentences in %s\n", input.c_str());
    return 1;
  }
  while (lines.size() < count) lines.insert(lines.end(), lines.begin(), lines.end());
  lines.resize(count);
  parla::runtime::apply(parla::RuntimeConfig{});
  parla::DecodingConfig d;
  d.beam_size = beam;
  const auto device = parla::runtime::resolve_device({device_name, "bench_continuous's device argument", 1, 0});
  parla::decode::Translator translator(parla::decode::TranslationModel::load({model}, d, device), 1);
  std::vector<std::vector<int>> sources;
  for (size_t i = 0; i < lines.size(); ++i) {
    auto ids = translator.encode_line(lines[i], "line " + std::to_string(i + 1));
    if (!ids.empty()) sources.push_back(ids);
  }
  translator.translate_batch({sources[0]}, translator.options());  // warm-up
  std::printf("bench_continuous: %s, %zu sentences of %s, beam %d, %s\n", model.c_str(), sources.size(),
              input.c_str(), beam, parla::runtime::describe_device(device).c_str());
  std::printf("%8s %-22s %12s %10s %10s %10s\n", "clients", "mode", "sentences/s", "join s", "step s", "differ");
  for (int clients : client_counts) {
    const size_t n = static_cast<size_t>(clients);
    // Offline ceiling: sorted by length (longest first), batches of n.
    std::vector<size_t> order(sources.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sources[a].size() > sources[b].size(); });
    auto t0 = Clock::now();
    for (size_t b = 0; b < order.size(); b += n) {
      std::vector<std::vector<int>> batch;
      for (size_t k = b; k < std::min(order.size(), b + n); ++k) batch.push_back(sources[order[k]]);
      translator.translate_batch(batch, translator.options());
    }
    const double offline = since(t0);
    // Static: arrival order, batches of n.
    std::vector<std::string> reference(sources.size());
    t0 = Clock::now();
    for (size_t b = 0; b < sources.size(); b += n) {
      std::vector<std::vector<int>> batch(sources.begin() + b, sources.begin() + std::min(sources.size(), b + n));
      auto out = translator.translate_batch(batch, translator.options());
      for (size_t k = 0; k < out.size(); ++k) reference[b + k] = out[k][0].text;
    }
    const double fixed = since(t0);
    const double total = static_cast<double>(sources.size());
    std::printf("%8d %-22s %12.1f\n", clients, "offline sorted (ceiling)", total / offline);
    std::printf("%8d %-22s %12.1f\n", clients, "static, arrival order", total / fixed);
    for (int join_size : join_sizes) {
    // Continuous: n sentences in flight; each finished one is replaced by the next at a later step, once
    // join_size of them can join together (or the last ones).
    auto stream = translator.open_stream(translator.options());
    size_t next = 0, differ = 0, done = 0, joins = 0;
    double join = 0, step = 0;
    t0 = Clock::now();
    while (done < sources.size()) {
      std::vector<std::vector<int>> joining;
      std::vector<int64_t> ids;
      const size_t free = n - stream->size();
      const size_t left = sources.size() - next;
      if (free >= std::min<size_t>(static_cast<size_t>(join_size), left) || stream->size() == 0)
        while (stream->size() + joining.size() < n && next < sources.size()) {
          joining.push_back(sources[next]);
          ids.push_back(static_cast<int64_t>(next++));
        }
      auto t = Clock::now();
      if (!joining.empty()) {
        stream->add(joining, ids);
        ++joins;
      }
      join += since(t);
      t = Clock::now();
      for (auto& [id, result] : stream->step()) {
        ++done;
        if (result[0].text != reference[static_cast<size_t>(id)]) ++differ;
      }
      step += since(t);
    }
    const double continuous = since(t0);
    const std::string label = "continuous, join " + std::to_string(join_size);
    std::printf("%8d %-22s %12.1f %10.2f %10.2f %10zu  (%zu joins)\n", clients, label.c_str(), total / continuous, join,
                step, differ, joins);
    }
  }
  return 0;
}
