#pragma once
// How parla-serve ends: SIGTERM or SIGINT is a request to drain and exit 0, not an interruption. Both signals
// are blocked in the main thread before any other thread exists, so every thread inherits the mask and none is
// interrupted mid-request; signals are collected with sigwait. They stay blocked after the first, so a second one
// does not kill the process with requests unanswered (issue 59: status 143): parla-serve reads it as "hurry",
// answers what is still in flight with 503 and exits 0 at once (docs/SERVING.md).
namespace parla::serve {

class StopSignals {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread (and in the threads it starts from now on).
  StopSignals();
  // Waits for one of them and returns its number; they stay blocked (call it again for the next).
  int wait();
};

}  // namespace parla::serve
