#pragma once
// Opening a file someone else gave us (a model, a corpus, a vocabulary) without blocking on it: a FIFO blocks
// open() until someone writes to it, so anything that is not a regular file is refused before it is opened.
#include <cstdint>
#include <string>

#include <sys/stat.h>

namespace parla {

// A descriptor open for reading on `path`, which must be a regular file: anything else (a FIFO, a device, a socket,
// a folder) is refused before it is opened. Opened with O_NONBLOCK and checked again on the descriptor, so a file
// replaced by a FIFO between the two checks is refused too. `st` receives the file's fstat. DataError naming the
// file. The caller closes the descriptor.
int open_regular_file(const std::string& path, struct stat& st);

// The whole of a file someone else wrote (a config, a vocabulary, a SentencePiece model), read through the one
// descriptor open_regular_file gives, and refused before it is read when it is larger than `max_bytes`. DataError
// naming the file when it is missing, unreadable, not a regular file or too large.
std::string read_bounded_file(const std::string& path, uint64_t max_bytes);

}  // namespace parla
