# Debian's libtorch_cpu names ~45 libraries, ~250 with what they name in turn (OpenCV, FFmpeg, GDAL, Qt, ...), for
# Caffe2 operators that never call them through it; the loader maps and relocates them all in every parla process.
# cmake/placeholder_libraries.sh builds empty libraries with their names after parla-translate links, and every
# executable that links LibTorch searches that folder first (a DT_RPATH, which unlike DT_RUNPATH also serves the
# libraries' own dependencies). A folder that is missing or empty changes nothing, and the wheel's LibTorch (which
# names only what it uses) is left alone.
set(parla_placeholders_default OFF)
if(CMAKE_SYSTEM_NAME STREQUAL "Linux" AND parla_torch_lib_dir MATCHES "^/usr/lib")  # the distribution's LibTorch
  set(parla_placeholders_default ON)
endif()
option(PARLA_PLACEHOLDER_LIBRARIES "Leave unloaded the libraries Debian's LibTorch names but never calls"
       ${parla_placeholders_default})
set(PARLA_PLACEHOLDER_DIR "${CMAKE_BINARY_DIR}/placeholder-libraries")

# Called by parla_link_executable for every executable that loads LibTorch.
function(parla_use_placeholders target)
  if(PARLA_PLACEHOLDER_LIBRARIES)
    target_link_options(${target} PRIVATE "LINKER:--disable-new-dtags,-rpath,${PARLA_PLACEHOLDER_DIR}")
  endif()
endfunction()

# Called once the apps exist: parla-translate carries every app's entry point, so its libraries are theirs; the
# tests and benchmarks link the same library.
function(parla_build_placeholders)
  if(NOT PARLA_PLACEHOLDER_LIBRARIES)
    return()
  endif()
  set(stamp "${CMAKE_BINARY_DIR}/placeholder-libraries.stamp")
  add_custom_command(OUTPUT ${stamp}
    COMMAND bash ${PROJECT_SOURCE_DIR}/cmake/placeholder_libraries.sh ${PARLA_PLACEHOLDER_DIR}
            ${CMAKE_CXX_COMPILER} $<TARGET_FILE:parla-translate> $<TARGET_FILE:parla_sentencepiece>
    COMMAND ${CMAKE_COMMAND} -E touch ${stamp}
    DEPENDS parla-translate parla_sentencepiece ${PROJECT_SOURCE_DIR}/cmake/placeholder_libraries.sh
    COMMENT "Placeholders for the libraries LibTorch names but never calls" VERBATIM)
  add_custom_target(parla_placeholder_libraries ALL DEPENDS ${stamp})
endfunction()
