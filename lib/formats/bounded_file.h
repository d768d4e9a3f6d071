#pragma once
// The whole of a small file someone else wrote (a config, a vocabulary, a SentencePiece model), refused before it
// is read when it is larger than what such a file can be.
#include <cstdint>
#include <string>

namespace parla::formats {

// DataError naming the file when it is missing, unreadable, not a regular file (a FIFO is refused before it is
// opened) or larger than `max_bytes`.
std::string read_bounded_file(const std::string& path, uint64_t max_bytes);

}  // namespace parla::formats
