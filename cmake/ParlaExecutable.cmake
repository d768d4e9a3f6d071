# Every parla executable links through here, because of a start-up crash (PLATFORM.md): Debian's libtorch_cpu
# pulls in libonnx_proto while libsentencepiece exports its own copies of protobuf template code, and unless
# libprotobuf is the first NEEDED entry the dynamic linker binds protobuf symbols to the wrong copy and the
# program segfaults before main. Forcing libprotobuf first (and keeping it even if "unused") avoids that.
#
# libstdc++ comes second for the same reason with the PyTorch wheel's LibTorch (the --libtorch2 build): its
# libtorch.so exports its own copies of std::filesystem (remove_all, equivalent, ...), and when it precedes
# libstdc++ in the NEEDED list our calls bind to those copies and crash (seen: remove_all jumping to address 0).
function(parla_link_executable target)
  target_link_libraries(${target} PRIVATE -Wl,--no-as-needed protobuf stdc++ -Wl,--as-needed parla)
  add_dependencies(${target} parla_sentencepiece)  # loaded at run time (lib/text/sentencepiece_library.cpp)
  parla_warnings(${target})
endfunction()

# Declares an app in apps/: parla_app(parla-train parla_train.cpp)
function(parla_app name source)
  add_executable(${name} ${source})
  parla_link_executable(${name})
  # An app includes LibTorch through the library's headers: without the PCH parla-translate alone took 18 s.
  target_precompile_headers(${name} REUSE_FROM parla)
  set_property(GLOBAL APPEND PROPERTY PARLA_APPS ${name})
endfunction()

# Declares an app that computes no tensors (parla-score-bleu): it links only the torch-free layers (core, text,
# metrics), because TorchConfig forces libtorch_cpu into every executable that links `parla` (--no-as-needed), and
# loading it costs ~0.5 s per start; a scorer that is run hundreds of times must start in milliseconds.
function(parla_torch_free_app name source)
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE parla_base)
  add_dependencies(${name} parla_sentencepiece)
  parla_warnings(${name})
  set_property(GLOBAL APPEND PROPERTY PARLA_APPS ${name})
endfunction()
