#include "core/app.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <streambuf>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/logging.h"
#include "core/version.h"

namespace parla::app {

namespace {

// std::cout's buffer in every executable: writes go to file descriptor 1 and the first failure keeps its errno, so
// that the check at the end of run() names the system's reason (a full disk, a closed descriptor) whoever wrote:
// a report, --dump-config or CLI11's --help. A failed write also fails the stream, so nothing more is written.
class CheckedStdoutBuffer : public std::streambuf {
 public:
  CheckedStdoutBuffer() { setp(buf_, buf_ + sizeof buf_); }
  int error() const { return error_; }

 protected:
  int_type overflow(int_type c) override {
    if (sync() != 0) return traits_type::eof();
    if (!traits_type::eq_int_type(c, traits_type::eof())) {
      *pptr() = traits_type::to_char_type(c);
      pbump(1);
    }
    return traits_type::not_eof(c);
  }

  int sync() override {
    const char* p = pbase();
    size_t n = static_cast<size_t>(pptr() - pbase());
    setp(buf_, buf_ + sizeof buf_);
    while (n > 0 && error_ == 0) {
      const ssize_t w = ::write(STDOUT_FILENO, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) error_ = w < 0 ? errno : EIO;
      if (w > 0) p += w, n -= static_cast<size_t>(w);
    }
    return error_ == 0 ? 0 : -1;
  }

 private:
  char buf_[1 << 16];
  int error_ = 0;
};

// Never destroyed: std::cout is flushed once more at exit, after function-local statics are gone.
CheckedStdoutBuffer& stdout_buffer() {
  static auto* buffer = new CheckedStdoutBuffer;
  return *buffer;
}

// A standard descriptor that was closed (`>&-`) gets /dev/null, so that the first file the program opens cannot
// take its number and receive what was meant for it: stdout's is opened read-only, so writes to it fail with
// EBADF and are reported; stdin reads nothing and stderr's logs are dropped.
void occupy_closed_standard_descriptors() {
  for (int fd : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int got = ::open("/dev/null", fd == STDERR_FILENO ? O_WRONLY : O_RDONLY);
    if (got >= 0 && got != fd) {
      ::dup2(got, fd);
      ::close(got);
    }
  }
}

// Flushes std::cout and C's stdout; 0 when everything written reached the system, else the errno of the first
// failure (EIO when a failure left none).
int finish_standard_output() {
  std::cout.flush();
  int err = stdout_buffer().error();
  if (err == 0 && !std::cout) err = EIO;
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    if (err == 0) err = errno != 0 ? errno : EIO;
  }
  return err;
}

}  // namespace

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
  // A failed write is reported by run() when the app returns ("cannot write standard output: ...", exit 1).
  std::cout << config::to_json(c).dump(2) << std::endl;
  return true;
}

void end_process(int code) {
  std::cout.flush();
  std::cerr.flush();
  spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& logger) { logger->flush(); });
  std::fflush(nullptr);
  std::_Exit(code);
}

int run(CLI::App& cli, CommonFlags& flags, int argc, char** argv, const std::function<int()>& body) {
  occupy_closed_standard_descriptors();
  std::cout.rdbuf(&stdout_buffer());
  // Whatever the app printed must have reached standard output: a report lost to a full disk or a closed
  // descriptor must not look like success (issue 35).
  auto checked = [&](int code) -> int {
    const int err = finish_standard_output();
    // After an error already reported (parla-translate's own "cannot write standard output" among them), one
    // message is enough.
    if (err == 0 || code != kExitOk) return code;
    std::cerr << flags.program << ": error: cannot write standard output: " << std::strerror(err) << std::endl;
    return kExitDataError;
  };
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here too, with exit code 0.
    int code = cli.exit(e);
    return checked(code == 0 ? 0 : kExitUsageError);
  }
  try {
    logging::setup(flags.program, flags.log_level, flags.quiet);
    return checked(body());
  } catch (const Error& e) {
    std::cerr << flags.program << ": error: " << e.what() << std::endl;
    return checked(e.exit_code());
  } catch (const std::bad_alloc&) {
    std::cerr << flags.program << ": error: out of memory" << std::endl;
    return checked(kExitDataError);
  } catch (const std::exception& e) {
    // An exception no layer wrapped (LibTorch's, most likely): its first line, the rest at --log-level debug.
    std::cerr << flags.program << ": error: " << brief_reason(e) << std::endl;
    return checked(kExitDataError);
  }
}

}  // namespace parla::app
