#include "decode/between_steps.h"

#include <utility>

namespace parla::decode {
namespace {

thread_local BetweenSteps* current = nullptr;

}  // namespace

BetweenSteps::BetweenSteps(std::function<void()> hook) : hook_(std::move(hook)), previous_(current) { current = this; }

BetweenSteps::~BetweenSteps() { current = previous_; }

void between_steps() {
  BetweenSteps* scope = current;
  if (!scope || !scope->hook_) return;
  // A search the hook runs must not re-enter this hook: it sees the scope below until the hook returns (or
  // installs its own).
  current = scope->previous_;
  struct Restore {
    BetweenSteps* scope;
    ~Restore() { current = scope; }
  } restore{scope};
  scope->hook_();
}

}  // namespace parla::decode
