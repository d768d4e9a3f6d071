// The whole parla-preprocess pipeline on a Europarl-sized corpus: wall time, pairs/s and peak RSS.
// Usage: bench_preprocess PREFIX SRC TGT OUTDIR [THREADS] [REPEAT] [CONFIG]
//   e.g. bench_preprocess ../shared/data/europarl-it-en/europarl.it-en it en /tmp/bench-ds 0 3
// REPEAT > 1 first writes PREFIX repeated REPEAT times (gzip) to OUTDIR.input.* to reach ~2M pairs; CONFIG is
// a parla JSON config (e.g. configs/europarl-de-en-base.json) read before the paths above are set.
#include <sys/resource.h>
#include <zlib.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/config.h"
#include "core/logging.h"
#include "data/preprocess.h"
#include "text/line_reader.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s PREFIX SRC TGT OUTDIR [THREADS] [REPEAT] [CONFIG]\n", argv[0]);
    return 2;
  }
  std::string prefix = argv[1], src = argv[2], tgt = argv[3], out = argv[4];
  int threads = argc > 5 ? std::stoi(argv[5]) : 0, repeat = argc > 6 ? std::stoi(argv[6]) : 1;
  parla::logging::setup("bench_preprocess", "info", false);
  if (repeat > 1) {
    std::string rep = out + ".input";
    for (const auto& lang : {src, tgt}) {
      gzFile f = gzopen((rep + "." + lang + ".gz").c_str(), "wb1");
      for (int r = 0; r < repeat; ++r) {
        parla::text::LineReader in(parla::text::corpus_file(prefix, lang));
        std::string line;
        // Repeats differ by a marker so that duplicate removal does not undo the repetition.
        while (in.next(line)) {
          std::string l = line.empty() ? line : line + (r ? " (" + std::to_string(r) + ")" : "");
          l += "\n";
          gzwrite(f, l.data(), static_cast<unsigned>(l.size()));
        }
      }
      gzclose(f);
    }
    prefix = rep;
  }
  parla::config::ConfigBuilder b;
  if (argc > 7) b.load_file(argv[7]);
  b.set("data.train_prefix", prefix, "bench");
  b.set("data.src_lang", src, "bench");
  b.set("data.tgt_lang", tgt, "bench");
  b.set("data.dir", out, "bench");
  b.set("runtime.threads", threads, "bench");
  auto cfg = b.build();
  auto t0 = std::chrono::steady_clock::now();
  auto result = parla::data::preprocess(cfg, {true});
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  double pairs = result.stats["inputs"]["train"]["pairs_read"].get<double>();
  std::printf("pairs_read %.0f\nwall_seconds %.1f\npairs_per_second %.0f\npeak_rss_mb %.0f\n", pairs, wall,
              pairs / wall, ru.ru_maxrss / 1024.0);
  return 0;
}
