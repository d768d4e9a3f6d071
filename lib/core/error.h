#pragma once
// parla's error hierarchy. Library code throws these with the file, line or key in the message; apps map
// them to exit codes (0 ok, 1 data error, 2 usage or config error), the convention of every parla executable.
#include <stdexcept>
#include <string>

namespace parla {

enum ExitCode : int { kExitOk = 0, kExitDataError = 1, kExitUsageError = 2 };

class Error : public std::runtime_error {
 public:
  Error(const std::string& message, int exit_code) : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Wrong flags or arguments on the command line.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& m) : Error(m, kExitUsageError) {}
};

// A config file or --set override that names an unknown key, has the wrong type or is out of range.
class ConfigError : public Error {
 public:
  explicit ConfigError(const std::string& m) : Error(m, kExitUsageError) {}
};

// Input data that cannot be used: missing files, mismatched line counts, corrupt datasets or checkpoints.
class DataError : public Error {
 public:
  explicit DataError(const std::string& m) : Error(m, kExitDataError) {}
};

// The file system refused: unwritable output, disk full, failed rename.
class IoError : public Error {
 public:
  explicit IoError(const std::string& m) : Error(m, kExitDataError) {}
};

// What a message that wraps someone else's exception quotes of it: its first line. LibTorch's c10::Error appends
// "Exception raised from valid at ...cc:177 (most recent call first): frame #0: ..." to its message, which says
// nothing to a user; the whole text is logged at debug level (--log-level debug).
std::string brief_reason(const std::exception& e);
// The same for a text: up to the first line break or "Exception raised from", trimmed, at most 300 characters.
std::string first_line(const std::string& text);

}  // namespace parla
