#pragma once
// Runs a parla executable (or any command) the way a user would, capturing exit code, stdout and stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace parla::testing {

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Runs `program` (a name in PARLA_BIN_DIR, or a path) with `args`; `stdin_file` feeds standard input.
inline RunResult run(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stdin_file = "") {
  std::string exe = program.find('/') == std::string::npos ? std::string(PARLA_BIN_DIR) + "/" + program : program;
  static int counter = 0;
  std::string base = std::string(PARLA_TEST_TMP_DIR) + "/run-" + std::to_string(::getpid()) + "-" +
                     std::to_string(counter++);
  std::string cmd = "mkdir -p " + shell_quote(PARLA_TEST_TMP_DIR) + " && " + shell_quote(exe);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  cmd += stdin_file.empty() ? " </dev/null" : " <" + shell_quote(stdin_file);
  cmd += " >" + shell_quote(base + ".out") + " 2>" + shell_quote(base + ".err");
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(base + ".out");
  r.err = slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

}  // namespace parla::testing
