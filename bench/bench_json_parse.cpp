// The bounded JSON parse (core/bounded_json.h) against nlohmann's parse with a callback (what parla used before,
// quadratic in the number of sibling containers), on the shapes that made the callback slow: a request body of
// sibling objects ({"texts": [{}, {}, ...]}, through parla-serve's parse_translate_request) and a safetensors-like
// header of N tensor entries. Prints CPU seconds and the peak RSS for 1, 10 and 100 MB. The callback parse runs on
// the sizes up to --old-mb only (1 MB: about half a minute).
// With --vocab-yml-mb N it instead writes a Marian vocab.yml of N MB (one "piece: id" per line) and reads it in a
// child process each way, parla's line reader and yaml-cpp's tree (the old reading), printing each one's peak RSS.
//   bench_json_parse [--old-mb 1] [--vocab-yml-mb 68]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>

#include <nlohmann/json.hpp>
#include <yaml-cpp/yaml.h>

#include "convert/marian_import.h"

#include "core/bounded_json.h"
#include "serve/translate_request.h"

namespace {

double cpu_seconds() { return double(std::clock()) / CLOCKS_PER_SEC; }

double peak_rss_mb() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;
}

std::string request_of(size_t bytes) {
  std::string s = "{\"texts\": [";
  while (s.size() < bytes) s += "{},";
  s.back() = ']';
  return s + "}";
}

std::string header_of(size_t bytes) {
  std::string s = "{\"__metadata__\":{\"format\":\"pt\"}";
  for (size_t i = 0; s.size() < bytes; ++i)
    s += ",\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  return s + "}";
}

double old_parse(const std::string& text) {
  const double t0 = cpu_seconds();
  auto j = nlohmann::json::parse(text, [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
    return depth <= 64;
  });
  return cpu_seconds() - t0;
}

// Peak RSS (MB) and CPU seconds of `read` in a child; -1 when it failed.
template <typename Read>
void in_child(const char* what, Read read) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    const double t0 = cpu_seconds();
    try {
      const size_t n = read();
      std::printf("%-12s %10zu pieces %8.2f s %10.0f MB peak\n", what, n, cpu_seconds() - t0, peak_rss_mb());
    } catch (const std::exception& e) {
      std::printf("%-12s failed: %.150s\n", what, e.what());
    }
    std::fflush(stdout);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

int vocab_yml(double mb) {
  const std::string path = "/tmp/bench_json_parse_vocab.yml";
  {
    std::FILE* f = std::fopen(path.c_str(), "w");
    size_t bytes = 0;
    for (size_t id = 0; bytes < mb * (1 << 20); ++id) bytes += std::fprintf(f, "\xE2\x96\x81p%zu: %zu\n", id, id);
    std::fclose(f);
  }
  std::printf("vocab.yml of %.0f MB\n", mb);
  in_child("line reader", [&] { return parla::convert::read_marian_vocab(path).size(); });
  in_child("yaml-cpp", [&] { return YAML::LoadFile(path).size(); });
  std::remove(path.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  double old_mb = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--old-mb")) old_mb = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--vocab-yml-mb")) return vocab_yml(std::atof(argv[i + 1]));
  }
  std::printf("%-9s %6s %12s %12s %10s\n", "shape", "MB", "bounded s", "callback s", "peak MB");
  for (const size_t mb : {1, 10, 100}) {
    const std::string body = request_of(mb << 20);
    parla::serve::RequestLimits limits;
    parla::serve::TranslateRequest request;
    parla::serve::RequestError error;
    double t0 = cpu_seconds();
    parse_translate_request(body, limits, request, error);
    const double bounded = cpu_seconds() - t0;
    const double old = mb <= old_mb ? old_parse(body) : -1;
    std::printf("%-9s %6zu %12.3f %12.3f %10.0f   (%s)\n", "request", mb, bounded, old, peak_rss_mb(),
                error.message.substr(0, 60).c_str());
  }
  for (const size_t mb : {1, 10, 100}) {
    const std::string header = header_of(mb << 20);
    parla::JsonLimits limits;
    limits.max_depth = 3;
    limits.refuse_duplicate_keys = true;
    double t0 = cpu_seconds();
    const size_t n = parla::parse_bounded_json(header, limits, "header").size();
    const double bounded = cpu_seconds() - t0;
    const double old = mb <= old_mb ? old_parse(header) : -1;
    std::printf("%-9s %6zu %12.3f %12.3f %10.0f   (%zu entries)\n", "header", mb, bounded, old, peak_rss_mb(), n);
  }
}
