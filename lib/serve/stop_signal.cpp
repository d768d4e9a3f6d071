#include "serve/stop_signal.h"

#include <pthread.h>

#include <csignal>

namespace parla::serve {
namespace {

sigset_t stop_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

StopSignals::StopSignals() {
  const sigset_t set = stop_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int StopSignals::wait() {
  const sigset_t set = stop_set();
  int signo = 0;
  while (sigwait(&set, &signo) != 0) {
  }
  return signo;
}

}  // namespace parla::serve
