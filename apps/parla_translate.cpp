// parla-translate: raw text in, detokenised translations out (one output line per input line, in input order).
// Flags map onto the `decoding` and `runtime` config sections; the work is parla::decode::Translator.
#include <unistd.h>

#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "core/app.h"
#include "core/config.h"
#include "core/runtime.h"
#include "core/runtime_device.h"
#include "decode/translator.h"

int main(int argc, char** argv) {
  parla::runtime::tune_process(argc, argv);
  std::ios::sync_with_stdio(false);
  parla::app::CommonFlags flags;
  flags.program = "parla-translate";
  CLI::App cli("Translates raw text with one or more parla checkpoints (several -m: an ensemble averaging "
               "log-probabilities). Reads stdin and writes stdout unless -i/-o are given; one output line per "
               "input line, in input order; an empty line gives an empty line.\n"
               "Output formats: 'translation'; with --n-best N: 'i ||| translation ||| score' (i = 0-based line); "
               "with --alignment hard: ' ||| s-t ...' appended (source-target SentencePiece positions, Moses "
               "style); --alignment soft: ' ||| w,w,... w,w,...' (attention per target piece incl. EOS, render with "
               "tools/attention-heatmap.py).\n"
               "Example: parla-translate -m model.pt -b 5 < input.de > output.en",
               "parla-translate");
  parla::app::add_config_flags(cli, flags);
  std::vector<std::string> models;
  std::string input = "-", output = "-", alignment, device, precision;
  int beam = 0, n_best = 0, min_length = 0, max_length_offset = 0, max_input = 0, batch_size = 0, batch_tokens = 0,
      maxi_batch = 0, top_k = 0, threads = 0;
  double length_penalty = 0, max_length_factor = 0, temperature = 0;
  int64_t seed = 0;
  bool line_buffered = false, sampling = false;
  cli.add_option("-m,--models,--model", models, "Checkpoint(s) to translate with; several form an ensemble")
      ->expected(1, -1);
  cli.add_option("-i,--input", input, "Input text file ('-' = stdin)")->capture_default_str();
  cli.add_option("-o,--output", output, "Output file ('-' = stdout); written to a temporary file, renamed when done")
      ->capture_default_str();
  cli.add_option("-b,--beam-size", beam, "Beam size; 1 = greedy search (decoding.beam_size, default 5)");
  cli.add_option("-n,--n-best", n_best, "Print the N best hypotheses as 'i ||| translation ||| score' (decoding.n_best)");
  cli.add_option("--normalize,--length-penalty,--lenpen", length_penalty,
                 "GNMT length penalty alpha: rank by log P / ((5+|Y|)/6)^alpha (decoding.length_penalty, default 0.6)");
  cli.add_option("--max-length-factor", max_length_factor,
                 "Output limit a in a * source_pieces + b (decoding.max_length_factor, default 3)");
  cli.add_option("--max-length-offset", max_length_offset,
                 "Output limit b in a * source_pieces + b (decoding.max_length_offset, default 10)");
  cli.add_option("--min-length", min_length, "Minimum output pieces before EOS (decoding.min_length)");
  cli.add_option("--max-input-length", max_input,
                 "Source pieces kept per line, longer lines are truncated with a warning; 0 = the model's limit "
                 "(decoding.max_input_length)");
  cli.add_option("--batch-size,--mini-batch", batch_size, "Sentences per batch (decoding.batch_size, default 32)");
  cli.add_option("--batch-tokens,--max-tokens", batch_tokens,
                 "Padded source pieces per batch instead of --batch-size (decoding.batch_tokens)");
  cli.add_option("--maxi-batch", maxi_batch,
                 "Batches read ahead and sorted by length together; output order is restored (decoding.maxi_batch)");
  cli.add_flag("--line-buffered", line_buffered,
               "Translate and flush each line as soon as it is read (interactive use; on by default when stdin "
               "is a terminal) (decoding.line_buffered)");
  cli.add_option("--alignment", alignment,
                 "Append alignments: hard (Moses s-t pairs) or soft (attention weights) (decoding.alignment)")
      ->check(CLI::IsMember({"hard", "soft"}));
  cli.add_flag("--sampling", sampling, "Sample translations instead of searching, for back-translation (decoding.sampling)");
  cli.add_option("--temperature", temperature, "Softmax temperature for --sampling (decoding.temperature)");
  cli.add_option("--top-k", top_k, "With --sampling, sample among the k most likely pieces; 0 = all (decoding.top_k)");
  cli.add_option("--seed", seed, "Random seed for sampling (runtime.seed)");
  cli.add_option("--threads,--cpu-threads", threads, "Threads; 0 = all cores (runtime.threads)");
  cli.add_option("--device", device, "cpu, cuda, cuda:N or auto (runtime.device)");
  cli.add_option("--precision", precision,
                 "fp32, bf16 or fp16 (CUDA only): the compute precision of decoding (decoding.precision)");

  return parla::app::run(cli, flags, argc, argv, [&] {
    auto builder = parla::app::start_config(flags);
    auto set = [&](const char* flag, const char* key, const auto& v) {
      parla::app::set_if_given(cli, builder, flag, key, v);
    };
    set("--beam-size", "decoding.beam_size", beam);
    set("--n-best", "decoding.n_best", n_best);
    set("--normalize", "decoding.length_penalty", length_penalty);
    set("--max-length-factor", "decoding.max_length_factor", max_length_factor);
    set("--max-length-offset", "decoding.max_length_offset", max_length_offset);
    set("--min-length", "decoding.min_length", min_length);
    set("--max-input-length", "decoding.max_input_length", max_input);
    set("--batch-size", "decoding.batch_size", batch_size);
    set("--batch-tokens", "decoding.batch_tokens", batch_tokens);
    set("--maxi-batch", "decoding.maxi_batch", maxi_batch);
    set("--top-k", "decoding.top_k", top_k);
    set("--threads", "runtime.threads", threads);
    set("--temperature", "decoding.temperature", temperature);
    set("--seed", "runtime.seed", seed);
    if (line_buffered) builder.set("decoding.line_buffered", true, "--line-buffered");
    if (sampling) builder.set("decoding.sampling", true, "--sampling");
    set("--alignment", "decoding.alignment", alignment);
    set("--device", "runtime.device", device);
    set("--precision", "decoding.precision", precision);
    if ((input.empty() || input == "-") && isatty(STDIN_FILENO) && !builder.given("decoding.line_buffered"))
      builder.set("decoding.line_buffered", true, "stdin is a terminal");
    parla::Config config = builder.build();
    if (parla::app::dump_config_if_asked(flags, config)) return 0;
    if (models.empty()) throw parla::UsageError("no model given: pass a checkpoint with -m/--models");
    int used = parla::runtime::apply(config.runtime);
    spdlog::debug("{} threads", used);
    // Errors name the flag when the value came from it.
    const auto dev = parla::runtime::resolve_device(
        {config.runtime.device, cli.count("--device") ? "--device" : "runtime.device", 1, 0});
    spdlog::debug("decoding on {}", parla::runtime::describe_device(dev));
    auto translator =
        parla::decode::Translator::load(models, config.decoding, static_cast<uint64_t>(config.runtime.seed), dev);
    parla::decode::translate_file(translator, input, output);
    return 0;
  });
}
