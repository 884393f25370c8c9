# cmake -DMEMWALL=path -DMEMWALL_RUN=path -DOUT=dir -P cmake/mkman.cmake
#
# The man pages, at build time, from the programs themselves: memwall(1)
# from `memwall --help-man`, memwall-CMD(1) from `memwall CMD --help-man` for
# every command `memwall --help` lists, memwall-run(1) from
# `memwall-run --help-man` (it also documents `memwall run`, the same
# program). Each page is the command's --help text and option table
# (tools/cmd_man.c), so a page cannot describe options the program lacks.
foreach(v MEMWALL MEMWALL_RUN OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "mkman.cmake: -D${v}=... missing")
  endif()
endforeach()
file(MAKE_DIRECTORY "${OUT}")
file(GLOB stale "${OUT}/*.1")
if(stale)
  file(REMOVE ${stale})
endif()

function(page file)
  execute_process(COMMAND ${ARGN} OUTPUT_FILE "${OUT}/${file}.tmp" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "mkman.cmake: '${ARGN}' failed (${rc})")
  endif()
  file(RENAME "${OUT}/${file}.tmp" "${OUT}/${file}")
endfunction()

execute_process(COMMAND "${MEMWALL}" --help OUTPUT_VARIABLE help RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "mkman.cmake: '${MEMWALL} --help' failed (${rc})")
endif()
# the rows after "commands:": "  NAME  one-line help"
string(REGEX REPLACE "^.*\ncommands:\n" "" rows "${help}")
string(REGEX REPLACE "\n\n.*$" "" rows "${rows}")
string(REPLACE "\n" ";" rows "${rows}")
set(n 0)
page(memwall.1 "${MEMWALL}" --help-man)
foreach(row IN LISTS rows)
  if(row MATCHES "^  ([a-z]+) ")
    set(cmd "${CMAKE_MATCH_1}")
    if(NOT cmd STREQUAL "run")
      page(memwall-${cmd}.1 "${MEMWALL}" ${cmd} --help-man)
      math(EXPR n "${n} + 1")
    endif()
  endif()
endforeach()
if(n EQUAL 0)
  message(FATAL_ERROR "mkman.cmake: no commands in '${MEMWALL} --help'")
endif()
page(memwall-run.1 "${MEMWALL_RUN}" --help-man)
