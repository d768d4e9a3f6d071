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

// The PID of a process that has exited and been reaped: no process has it (until the system reuses it).
inline pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// Reads a run's captured stdout and stderr into `r` and removes the files.
inline void take_output(const std::string& out, const std::string& err, RunResult& r) {
  for (auto [path, text] : {std::pair{&out, &r.out}, std::pair{&err, &r.err}}) {
    std::ifstream in(*path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    *text = ss.str();
    std::remove(path->c_str());
  }
}

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
  take_output(base + ".out", base + ".err", r);
  return r;
}

}  // namespace parla::testing
