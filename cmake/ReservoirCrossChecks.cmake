# Checks for builds whose programs cannot run on the build machine (the macOS presets on Linux):
# after everything is built, `file` must call every executable a Mach-O 64-bit executable for the
# target's architecture. Part of the default build target, so `cmake --build` fails if one is not.
find_program(RESERVOIR_FILE_PROGRAM file)
if(NOT RESERVOIR_FILE_PROGRAM)
  message(FATAL_ERROR "`file` not found: it checks the cross-compiled programs "
    "(Debian: apt-get install file, or scripts/install-deps.sh macos)")
endif()

# Every executable target of this project, in every directory.
function(reservoir_collect_executables dir out)
  set(found)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      list(APPEND found ${t})
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    reservoir_collect_executables("${sub}" sub_found)
    list(APPEND found ${sub_found})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

reservoir_collect_executables("${PROJECT_SOURCE_DIR}" executables)
set(files)
foreach(t ${executables})
  list(APPEND files "$<TARGET_FILE:${t}>")
endforeach()
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(arm64|aarch64)$")
  set(expected "Mach-O 64-bit arm64 executable")
else()
  set(expected "Mach-O 64-bit x86_64 executable")
endif()
list(JOIN files "|" files_arg)
add_custom_target(reservoir_check_executables ALL
  COMMAND ${CMAKE_COMMAND} "-DFILE_PROGRAM=${RESERVOIR_FILE_PROGRAM}" "-DEXPECTED=${expected}"
    "-DFILES=${files_arg}" -P "${CMAKE_CURRENT_LIST_DIR}/CheckExecutableFormat.cmake"
  COMMENT "Checking that the ${CMAKE_SYSTEM_NAME} programs are ${expected}s"
  VERBATIM)
add_dependencies(reservoir_check_executables ${executables})
