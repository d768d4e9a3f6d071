#include "core/app.h"

#include <cerrno>
#include <cstring>
#include <iostream>
#include <new>

#include "core/error.h"
#include "core/logging.h"
#include "core/version.h"

namespace parla::app {

void add_logging_flags(CLI::App& cli, CommonFlags& flags, const std::string& version_flag) {
  cli.set_version_flag(version_flag, flags.program + " " + kVersion, "Print the version and exit");
  // Checked while parsing, so a bad level is reported before anything else (a missing positional argument).
  cli.add_option("--log-level", flags.log_level, "Log level on stderr: trace, debug, info, warn, error, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "warning", "error", "err", "critical", "off"}));
  cli.add_flag("-q,--quiet", flags.quiet, "Log only warnings and errors");
}

void add_config_flags(CLI::App& cli, CommonFlags& flags) {
  add_logging_flags(cli, flags);
  cli.add_option("-c,--config", flags.config_file, "JSON config file (sections: data, vocab, model, training, "
                                                   "decoding, runtime; see docs/CONFIG.md)");
  cli.add_option("--set", flags.sets, "Override one config key, e.g. --set training.lr=0.0007 (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  cli.add_flag("--dump-config", flags.dump_config, "Print the effective config as JSON and exit");
}

config::ConfigBuilder start_config(const CommonFlags& flags) {
  config::ConfigBuilder b;
  if (!flags.config_file.empty()) b.load_file(flags.config_file);
  for (const auto& s : flags.sets) b.set_assignment(s);
  return b;
}

bool dump_config_if_asked(const CommonFlags& flags, const Config& c) {
  if (!flags.dump_config) return false;
  errno = 0;
  std::cout << config::to_json(c).dump(2) << std::endl;
  if (!std::cout) {
    // A config that did not reach its reader (a full disk, a closed pipe) must not look like success.
    const int err = errno;
    throw IoError(std::string("cannot write the config to standard output: ") +
                  (err ? std::strerror(err) : "write failed"));
  }
  return true;
}

int run(CLI::App& cli, CommonFlags& flags, int argc, char** argv, const std::function<int()>& body) {
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    int code = cli.exit(e);
    return code == 0 ? 0 : kExitUsageError;
  }
  try {
    logging::setup(flags.program, flags.log_level, flags.quiet);
    return body();
  } catch (const Error& e) {
    std::cerr << flags.program << ": error: " << e.what() << std::endl;
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << flags.program << ": error: out of memory" << std::endl;
    return kExitDataError;
  } catch (const std::exception& e) {
    // An exception no layer wrapped (LibTorch's, most likely): its first line, the rest at --log-level debug.
    std::cerr << flags.program << ": error: " << brief_reason(e) << std::endl;
    return kExitDataError;
  }
}

}  // namespace parla::app
