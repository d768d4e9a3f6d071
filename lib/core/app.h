#pragma once
// What every parla executable shares: the common flags (--config, --set, --dump-config, --log-level, --quiet,
// --version), the effective config, and the mapping of errors to exit codes (0 ok, 1 data, 2 usage/config).
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/config.h"

namespace parla::app {

struct CommonFlags {
  std::string program;
  std::string config_file;
  std::vector<std::string> sets;
  bool dump_config = false;
  std::string log_level = "info";
  bool quiet = false;
};

// Adds --version, --log-level and -q/--quiet.
void add_logging_flags(CLI::App& cli, CommonFlags& flags, const std::string& version_flag = "--version");
// Adds the logging flags plus --config, --set (repeatable) and --dump-config.
void add_config_flags(CLI::App& cli, CommonFlags& flags);

// Parses the command line, sets up logging, runs `body` and maps failures to exit codes with one clear message
// on stderr: CLI11 parse errors and ConfigError/UsageError -> 2, DataError/IoError -> 1, out of memory -> 1.
// Everything written to std::cout or C's stdout (reports, --dump-config, --help) is flushed and checked at the
// end: when a write or the final flush failed (a full disk, a closed descriptor), an otherwise successful run
// exits 1 with "cannot write standard output: <reason>". A standard descriptor that is closed at start gets
// /dev/null (read-only for stdout, so its writes still fail), so no file the program opens takes its number.
int run(CLI::App& cli, CommonFlags& flags, int argc, char** argv, const std::function<int()>& body);

// Ends the process with `code` once run() has returned: the standard streams and the logs are flushed, and the
// libraries' static destructors are not run (std::_Exit), since they only give back what the system takes back
// anyway: LibTorch's unregister its ~2,000 operators, which reads ~12 MB of its code back into memory as the last
// thing a translation run does (parla-translate's peak RSS at the Multi30k size was its exit).
[[noreturn]] void end_process(int code);

// Starts the effective config from --config and --set; the app then applies its named flags (SchemaFlags::apply)
// and calls builder.build().
config::ConfigBuilder start_config(const CommonFlags& flags);

// With --dump-config, prints the effective config as JSON to stdout and returns true (the app exits 0, or 1 from
// run() when standard output refused it).
bool dump_config_if_asked(const CommonFlags& flags, const Config& c);

}  // namespace parla::app
