#pragma once
// Loading a model so that the process holds the code it runs, not the code it ran once, and none of the memory
// loading freed. The apps that load a model to keep serving with it (parla-translate, parla-serve) call this; the
// library's loaders leave the process's memory alone.
#include <utility>

#include "core/heap_allocator.h"
#include "core/memory_pages.h"

namespace parla {

// Returns load()'s result. Before it, the libraries' pages that starting touched (LibTorch's operator
// registration: ~25 MB of libtorch_cpu alone) leave memory; after it, what loading freed (file copies, the float
// weights int8 replaced) goes back to the system rather than staying resident beside what decoding allocates, and
// the pages loading touched leave too. What is run again comes back as it runs (core/memory_pages.h).
template <class Load>
auto load_lean(Load&& load) {
  page_out_libraries();
  auto loaded = std::forward<Load>(load)();
  return_free_memory();
  page_out_libraries();
  return loaded;
}

}  // namespace parla
