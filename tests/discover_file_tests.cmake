# Run after a test binary is built (cmake -P; tests/CMakeLists.txt says why): writes the CTest file that runs the
# binary once per test source file, every case of the file in one process, and once per case that may skip
# (tagged [cuda] or [python]), so that CTest reports those as skipped, never as passed.
#   -D TEST_EXECUTABLE=... -D AREA=nn -D WORKING_DIR=... -D TEST_ENV="A=1 B=2" -D CTEST_FILE=...
set(skippable "[cuda],[python]")
# Hidden cases ([.name]) are selected by a tag filter, so they are excluded by name too.
set(not_skippable "~[cuda]~[python]~[.]")
string(REPLACE " " ";" env "${TEST_ENV}")

function(quote out value)
  set(${out} "[==[${value}]==]" PARENT_SCOPE)
endfunction()

# Catch's --filenames-as-tags tags every case with its file: [#test_multi_head_attention]. --list-tags honours the
# spec, so this lists the files that have a case to run here. (Catch exits with the number listed: not an error.)
execute_process(COMMAND "${TEST_EXECUTABLE}" --filenames-as-tags "${not_skippable}" --list-tags
  OUTPUT_VARIABLE tags_output RESULT_VARIABLE result WORKING_DIRECTORY "${WORKING_DIR}")
string(REGEX MATCHALL "\\[#[A-Za-z0-9_.-]+\\]" file_tags "${tags_output}")
if(NOT file_tags)
  message(FATAL_ERROR "${TEST_EXECUTABLE} --filenames-as-tags --list-tags listed no files (exit ${result}):\n${tags_output}")
endif()
list(REMOVE_DUPLICATES file_tags)

set(script "")
quote(env_q "${env}")
foreach(tag ${file_tags})
  string(REGEX REPLACE "^\\[#(.*)\\]$" "\\1" stem "${tag}")
  set(name "${AREA}: ${stem}.cpp")
  quote(name_q "${name}")
  quote(spec_q "${tag}${not_skippable}")
  string(APPEND script "add_test(${name_q} \"${TEST_EXECUTABLE}\" --filenames-as-tags ${spec_q} --warn NoTests)\n")
  # A case that skips inside a file run would hide among the passes: it must carry its tag instead.
  string(APPEND script "set_tests_properties(${name_q} PROPERTIES WORKING_DIRECTORY \"${WORKING_DIR}\" LABELS ${AREA} "
                       "FAIL_REGULAR_EXPRESSION \"PARLA-SKIP: needs \" ENVIRONMENT ${env_q})\n")
endforeach()

execute_process(COMMAND "${TEST_EXECUTABLE}" "${skippable}" --list-test-names-only
  OUTPUT_VARIABLE names_output RESULT_VARIABLE result WORKING_DIRECTORY "${WORKING_DIR}")
string(REPLACE "\n" ";" names "${names_output}")
foreach(case ${names})
  if(case STREQUAL "")
    continue()
  endif()
  set(spec "${case}")
  foreach(char , [ ])
    string(REPLACE "${char}" "\\${char}" spec "${spec}")
  endforeach()
  set(name "${AREA}: ${case}")
  quote(name_q "${name}")
  quote(spec_q "${spec}")
  string(APPEND script "add_test(${name_q} \"${TEST_EXECUTABLE}\" ${spec_q} --warn NoTests)\n")
  string(APPEND script "set_tests_properties(${name_q} PROPERTIES WORKING_DIRECTORY \"${WORKING_DIR}\" LABELS ${AREA} "
                       "SKIP_REGULAR_EXPRESSION \"PARLA-SKIP: needs \" ENVIRONMENT ${env_q})\n")
endforeach()

file(WRITE "${CTEST_FILE}.tmp" "${script}")
file(RENAME "${CTEST_FILE}.tmp" "${CTEST_FILE}")
