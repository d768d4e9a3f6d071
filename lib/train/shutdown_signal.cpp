#include "train/shutdown_signal.h"

#include <csignal>

namespace parla::train {

namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_signal(int signo) {
  g_signal = signo;
  std::signal(signo, SIG_DFL);  // the next one ends the process
}

}  // namespace

void install_shutdown_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

int shutdown_requested() { return g_signal; }

void reset_shutdown() { g_signal = 0; }

}  // namespace parla::train
