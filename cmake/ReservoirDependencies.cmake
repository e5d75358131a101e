# Test and bench dependencies: doctest, fmt, CLI11, nlohmann-json (the bench's JSON files).
#
# 1. RESERVOIR_HEADER_ONLY_DEPS=<dir>: use the headers found under <dir> (e.g. Debian's
#    /usr/include) header-only, copied into the build tree so that a cross build (MinGW) never puts
#    the host's include directory on its include path.
# 2. Otherwise find_package (Debian: doctest-dev libfmt-dev libcli11-dev nlohmann-json3-dev).
# 3. Otherwise a pinned FetchContent download.
include(FetchContent)
set(RESERVOIR_HEADER_ONLY_DEPS "" CACHE PATH "Use doctest/fmt/CLI11/nlohmann headers from this directory")

if(RESERVOIR_HEADER_ONLY_DEPS)
  set(_deps_inc "${CMAKE_BINARY_DIR}/_deps_headers")
  foreach(_dir doctest fmt CLI nlohmann)
    if(NOT EXISTS "${RESERVOIR_HEADER_ONLY_DEPS}/${_dir}")
      message(FATAL_ERROR "RESERVOIR_HEADER_ONLY_DEPS: ${RESERVOIR_HEADER_ONLY_DEPS}/${_dir} not found")
    endif()
    file(COPY "${RESERVOIR_HEADER_ONLY_DEPS}/${_dir}" DESTINATION "${_deps_inc}")
  endforeach()
  add_library(reservoir_dep_doctest INTERFACE)
  target_include_directories(reservoir_dep_doctest SYSTEM INTERFACE "${_deps_inc}")
  add_library(doctest::doctest ALIAS reservoir_dep_doctest)
  add_library(reservoir_dep_fmt INTERFACE)
  target_include_directories(reservoir_dep_fmt SYSTEM INTERFACE "${_deps_inc}")
  target_compile_definitions(reservoir_dep_fmt INTERFACE FMT_HEADER_ONLY=1)
  add_library(fmt::fmt ALIAS reservoir_dep_fmt)
  add_library(reservoir_dep_cli11 INTERFACE)
  target_include_directories(reservoir_dep_cli11 SYSTEM INTERFACE "${_deps_inc}")
  add_library(CLI11::CLI11 ALIAS reservoir_dep_cli11)
  add_library(reservoir_dep_nlohmann_json INTERFACE)
  target_include_directories(reservoir_dep_nlohmann_json SYSTEM INTERFACE "${_deps_inc}")
  add_library(nlohmann_json::nlohmann_json ALIAS reservoir_dep_nlohmann_json)
  return()
endif()

if(RESERVOIR_BUILD_TESTS)
  find_package(doctest CONFIG QUIET)
  if(NOT TARGET doctest::doctest)
    message(STATUS "reservoir: doctest not installed; fetching doctest v2.4.11")
    FetchContent_Declare(doctest GIT_REPOSITORY https://github.com/doctest/doctest.git
      GIT_TAG v2.4.11 GIT_SHALLOW TRUE)
    set(DOCTEST_NO_INSTALL ON CACHE BOOL "" FORCE)
    FetchContent_MakeAvailable(doctest)
  endif()
endif()

if(RESERVOIR_BUILD_BENCH OR RESERVOIR_BUILD_TESTS)
  find_package(fmt CONFIG QUIET)
  if(NOT TARGET fmt::fmt)
    message(STATUS "reservoir: fmt not installed; fetching fmt 9.1.0")
    FetchContent_Declare(fmt GIT_REPOSITORY https://github.com/fmtlib/fmt.git
      GIT_TAG 9.1.0 GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(fmt)
  endif()
  find_package(CLI11 CONFIG QUIET)
  if(NOT TARGET CLI11::CLI11)
    message(STATUS "reservoir: CLI11 not installed; fetching CLI11 v2.3.2")
    FetchContent_Declare(CLI11 GIT_REPOSITORY https://github.com/CLIUtils/CLI11.git
      GIT_TAG v2.3.2 GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(CLI11)
  endif()
  find_package(nlohmann_json 3 CONFIG QUIET)
  if(NOT TARGET nlohmann_json::nlohmann_json)
    message(STATUS "reservoir: nlohmann-json not installed; fetching nlohmann-json v3.11.2")
    FetchContent_Declare(nlohmann_json GIT_REPOSITORY https://github.com/nlohmann/json.git
      GIT_TAG v3.11.2 GIT_SHALLOW TRUE)
    FetchContent_MakeAvailable(nlohmann_json)
  endif()
endif()
