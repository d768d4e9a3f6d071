#pragma once
// The point between two decoder steps, where whoever runs a search may do other work first or stop it: parla-serve
// decodes a batch of short sentences there inside a batch of long ones (preemption), and stops a batch whose
// clients have all left or run out of time. The hook belongs to the calling thread, so the searches need no extra
// parameter and a search run on another thread (parla-translate's workers) has none. Torch-free.
#include <functional>
#include <stdexcept>

namespace parla::decode {

// Thrown by a hook to abandon the search it was called from (nothing is returned for any of its sentences).
struct SearchInterrupted : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Installs `hook` for this thread for the scope's lifetime (restoring the previous one after): every search on the
// thread calls it before each decoder step but the first. A hook may itself run a search (with its own scope).
class BetweenSteps {
 public:
  explicit BetweenSteps(std::function<void()> hook);
  ~BetweenSteps();
  BetweenSteps(const BetweenSteps&) = delete;
  BetweenSteps& operator=(const BetweenSteps&) = delete;

 private:
  friend void between_steps();
  std::function<void()> hook_;
  BetweenSteps* previous_;
};

// Called by the searches between decoder steps: runs this thread's hook, if any.
void between_steps();

}  // namespace parla::decode
