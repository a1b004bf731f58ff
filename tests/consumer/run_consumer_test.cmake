# Installs the trnsparse build BUILD_DIR into a temporary prefix under WORK_DIR, moves the
# prefix (the package must be relocatable), checks that no installed CMake file names the
# source or build tree, then configures, builds and runs the consumer project CONSUMER_DIR
# against it with GENERATOR and CXX_COMPILER.
#
#   cmake -D BUILD_DIR=... -D SOURCE_DIR=... -D WORK_DIR=... -D CONSUMER_DIR=...
#         -D GENERATOR=Ninja -D CXX_COMPILER=g++ -P run_consumer_test.cmake
foreach(var BUILD_DIR SOURCE_DIR WORK_DIR CONSUMER_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer_test.cmake: -D ${var}=... is required")
  endif()
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(COMMAND ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${WORK_DIR}/staged"
                OUTPUT_QUIET COMMAND_ERROR_IS_FATAL ANY)
file(RENAME "${WORK_DIR}/staged" "${WORK_DIR}/prefix")

file(GLOB_RECURSE package_files "${WORK_DIR}/prefix/*.cmake")
if(NOT package_files)
  message(FATAL_ERROR "no CMake package files were installed")
endif()
foreach(file IN LISTS package_files)
  file(READ "${file}" text)
  foreach(tree "${SOURCE_DIR}" "${BUILD_DIR}")
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${file} names ${tree}: the installed package must not point into the build")
    endif()
  endforeach()
endforeach()

execute_process(COMMAND ${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build" -G "${GENERATOR}"
                        -D CMAKE_BUILD_TYPE=Release -D "CMAKE_CXX_COMPILER=${CXX_COMPILER}"
                        -D "CMAKE_PREFIX_PATH=${WORK_DIR}/prefix" -D CMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
                COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/build" COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND "${WORK_DIR}/build/consumer" COMMAND_ERROR_IS_FATAL ANY)
