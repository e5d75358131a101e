# Runs one program and passes only if it exits with the expected code and prints what is expected:
#   cmake -DPROGRAM=<exe> [-DEMULATOR=<wine>] [-DARGS="a b"] -DEXPECT_EXIT=2
#         -DEXPECT_OUTPUT=<regex matched against stdout + stderr> [-DMAX_SECONDS=<n>]
#         -P expect_exit.cmake
# A program killed by a signal (an abort's core dump) has no exit code and fails the check.
separate_arguments(args UNIX_COMMAND "${ARGS}")
set(command ${PROGRAM} ${args})
if(EMULATOR)
  set(command ${EMULATOR} ${command})
endif()
string(TIMESTAMP start "%s")
execute_process(COMMAND ${command} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 60)
string(TIMESTAMP end "%s")
math(EXPR seconds "${end} - ${start}")
set(all "${out}${err}")
message(STATUS "exit: ${rc}\n${all}")
if(NOT rc STREQUAL "${EXPECT_EXIT}")
  message(FATAL_ERROR "expected exit code ${EXPECT_EXIT}, got '${rc}'")
endif()
if(DEFINED EXPECT_OUTPUT AND NOT all MATCHES "${EXPECT_OUTPUT}")
  message(FATAL_ERROR "the output does not match '${EXPECT_OUTPUT}'")
endif()
if(DEFINED MAX_SECONDS AND seconds GREATER MAX_SECONDS)
  message(FATAL_ERROR "took ${seconds} s, more than ${MAX_SECONDS} s")
endif()
