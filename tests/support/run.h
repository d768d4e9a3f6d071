#pragma once
// Runs a parla executable (or any command) the way a user would, capturing exit code, stdout and stderr.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

// The executable `program` names: a name in PARLA_BIN_DIR, or a path.
inline std::string executable(const std::string& program) {
  return program.find('/') == std::string::npos ? std::string(PARLA_BIN_DIR) + "/" + program : program;
}

// A fresh path prefix under PARLA_TEST_TMP_DIR for one run's captured output.
inline std::string output_base() {
  static int counter = 0;
  return std::string(PARLA_TEST_TMP_DIR) + "/run-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
}

// Runs `program` (a name in PARLA_BIN_DIR, or a path) with `args`; `stdin_file` feeds standard input.
inline RunResult run(const std::string& program, const std::vector<std::string>& args,
                     const std::string& stdin_file = "") {
  const std::string exe = executable(program), base = output_base();
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

// run() without a shell, also reporting the peak resident memory of the process in KiB (wait4's ru_maxrss: the
// process itself, whatever else ran before in the test binary).
struct MeasuredRun : RunResult {
  long peak_rss_kib = 0;
};

inline MeasuredRun run_measured(const std::string& program, const std::vector<std::string>& args,
                                const std::string& stdin_file = "/dev/null") {
  const std::string exe = executable(program), base = output_base();
  ::mkdir(PARLA_TEST_TMP_DIR, 0755);
  std::vector<std::string> argv_s{exe};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = base + ".out", err = base + ".err";
  MeasuredRun r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int in = ::open(stdin_file.c_str(), O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (in < 0 || o < 0 || e < 0) ::_exit(127);
    ::dup2(in, 0);
    ::dup2(o, 1);
    ::dup2(e, 2);
    ::execv(exe.c_str(), argv.data());
    ::_exit(127);
  }
  int status = 0;
  struct rusage ru {};
  if (pid > 0 && ::wait4(pid, &status, 0, &ru) == pid) {
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.peak_rss_kib = ru.ru_maxrss;
  }
  take_output(out, err, r);
  return r;
}

}  // namespace parla::testing
