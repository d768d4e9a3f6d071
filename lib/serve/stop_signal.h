#pragma once
// How parla-serve ends: SIGTERM or SIGINT is a request to drain and exit 0, not an interruption. Both signals
// are blocked in the main thread before any other thread exists, so every thread inherits the mask and none is
// interrupted mid-request; the main thread then collects the signal with sigwait. After the first, a second
// SIGINT/SIGTERM ends the process at once (the default action), for an operator who means it.
namespace parla::serve {

class StopSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread (and in the threads it starts from now on).
  StopSignals();
  // Waits for one of them; returns its number and unblocks them in this thread, so that a second one kills.
  int wait();
};

}  // namespace parla::serve
