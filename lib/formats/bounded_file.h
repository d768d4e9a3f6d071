#pragma once
// The whole of a small file someone else wrote, refused before it is read when it is larger than what such a file
// can be: core/regular_file.h, where it lives (below text/ and formats/, which both read such files).
#include "core/regular_file.h"

namespace parla::formats {

using parla::read_bounded_file;

}  // namespace parla::formats
