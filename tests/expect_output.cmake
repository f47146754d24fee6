# cmake "-DCMD=prog|arg|..." "-DEXPECT=text" -P expect_output.cmake
# Runs CMD (arguments separated by '|': a ';' would split the add_test
# argument); passes if it exits 0 and its stdout contains EXPECT (a plain
# string, not a regex). Prints what it ran and its output either way.
string(REPLACE "|" ";" CMD "${CMD}")
execute_process(COMMAND ${CMD} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(REPLACE ";" " " shown "${CMD}")
message("$ ${shown}\n${out}${err}")
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "exit status ${rc}")
endif()
string(FIND "${out}" "${EXPECT}" at)
if(at LESS 0)
  message(FATAL_ERROR "stdout does not contain '${EXPECT}'")
endif()
