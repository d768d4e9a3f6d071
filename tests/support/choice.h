#pragma once
// Tests loop over a key's values by name ("post", "pre") and set them on a config struct, where they are enums.
#include <stdexcept>
#include <string>

#include "core/config/choice.h"

namespace parla::testing {

template <class E>
E choice(const std::string& name) {
  E value{};
  if (!config::parse_choice(name, value)) throw std::invalid_argument("no such choice: '" + name + "'");
  return value;
}

}  // namespace parla::testing
