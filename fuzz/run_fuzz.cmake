# Runs the fuzzer for a bounded time: a scratch corpus (new inputs) seeded from fuzz/corpus (read-only).
# DICT, when set, is a libFuzzer dictionary.
file(MAKE_DIRECTORY ${CORPUS})
set(dict_arg "")
if(DICT)
  set(dict_arg -dict=${DICT})
endif()
execute_process(COMMAND ${FUZZ_BIN} -max_total_time=${SECONDS} -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=${MAX_LEN} -timeout=10
                        -print_final_stats=1 ${dict_arg} ${CORPUS} ${SEEDS}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the fuzzer found a failing input (exit ${rc}); it is saved as crash-* in the working directory")
endif()
