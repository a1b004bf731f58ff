# Runs one libFuzzer binary for SECONDS on a fresh copy of its seed corpus in WORK_DIR
# (the repository's corpus is only read), with the libFuzzer dictionary DICT if given.
# New inputs and any crash reproducer stay in WORK_DIR.
#
#   cmake -D FUZZER=... -D CORPUS=... -D WORK_DIR=... -D SECONDS=30 [-D DICT=...] -P run_fuzzer.cmake
foreach(var FUZZER CORPUS WORK_DIR SECONDS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_fuzzer.cmake: -D ${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/artifacts")
file(COPY "${CORPUS}/" DESTINATION "${WORK_DIR}/corpus")
set(dict_option "")
if(DEFINED DICT)
  set(dict_option "-dict=${DICT}")
endif()

execute_process(COMMAND "${FUZZER}" -max_total_time=${SECONDS} -timeout=10 -print_final_stats=1
                        "-artifact_prefix=${WORK_DIR}/artifacts/" ${dict_option} "${WORK_DIR}/corpus"
                RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  file(GLOB artifacts "${WORK_DIR}/artifacts/*")
  message(FATAL_ERROR "${FUZZER} found a problem (exit ${result}); reproduce with: ${FUZZER} ${artifacts}")
endif()
