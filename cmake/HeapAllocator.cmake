# The heap allocator of every executable that loads LibTorch: gperftools' tcmalloc (Debian's
# libgoogle-perftools-dev) where it is installed, else glibc's malloc. Decoding frees and allocates buffers of a
# few sizes at every step, from several threads (runtime.inter_threads): glibc's per-thread arenas, told never to
# trim (runtime::tune_process), fragmented until a worker's arena held 2-3x what it used (Multi30k int8 greedy
# batch 64, 1x2: 258 MB peak, ~100 MB of it in use), and tcmalloc's size classes and page heap keep it at
# 200 MB, no slower (docs/BENCHMARKS.md). Linked without --as-needed: nothing calls it by name, its malloc replaces
# glibc's for the whole process (the libraries included) by coming before libc in the search order.
option(PARLA_TCMALLOC "Use tcmalloc (libgoogle-perftools-dev) as the heap allocator of the LibTorch executables" ON)
set(PARLA_HEAP_ALLOCATOR "")  # the library parla_link_executable links; empty: glibc
if(PARLA_TCMALLOC)
  find_library(PARLA_TCMALLOC_LIBRARY NAMES tcmalloc_minimal)
  if(PARLA_TCMALLOC_LIBRARY)
    set(PARLA_HEAP_ALLOCATOR ${PARLA_TCMALLOC_LIBRARY})
    message(STATUS "Heap allocator: tcmalloc (${PARLA_TCMALLOC_LIBRARY})")
  else()
    message(STATUS "Heap allocator: glibc's malloc (no tcmalloc_minimal: apt-get install libgoogle-perftools-dev)")
  endif()
else()
  message(STATUS "Heap allocator: glibc's malloc (PARLA_TCMALLOC=OFF)")
endif()

