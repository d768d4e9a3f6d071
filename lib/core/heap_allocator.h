#pragma once
// The process's heap allocator: tcmalloc where the executable links it (cmake/HeapAllocator.cmake: every one that
// loads LibTorch), else glibc's malloc. Torch-free, for the server's layer as well as decoding's.
#include <string>

namespace parla {

// Gives the pages of freed heap memory back to the system and says whether any were: tcmalloc's ReleaseFreeMemory
// where the process runs on tcmalloc, else glibc's malloc_trim (elsewhere nothing). runtime::tune_process tells
// glibc never to trim by itself (decoding reuses its blocks at every step), so what loading a model freed would
// otherwise stay resident for good, and decoding in worker threads, which allocate from arenas of their own, never
// reuses it: the Multi30k model in int8 left 60 MB of it.
bool return_free_memory();

// "tcmalloc" or "glibc malloc": whose malloc this process calls.
std::string heap_allocator_name();

}  // namespace parla
