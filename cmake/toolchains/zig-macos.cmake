# Cross-compiles for macOS with Zig 0.11 (`zig c++`: clang 16 with the macOS SDK's headers and
# libSystem stubs; it builds libc++ for the target itself, at the first link, into Zig's global
# cache). Linux can link Mach-O executables this way but cannot run them.
#
#   RESERVOIR_ZIG_ARCH     aarch64 or x86_64 (set by the macos-arm64 / macos-x86_64 presets)
#   RESERVOIR_ZIG          the zig executable; by default the one scripts/install-deps.sh macos
#                          installs, then RESERVOIR_ZIG_DIR, then `zig` on PATH (must be 0.11.x)
#
# Deployment target: macOS 11.0, the first release on arm64. So ArenaResource (std::pmr, macOS
# 14) is not built, as with Apple clang at that target; Zig 0.11's libc++ lacks
# memory_resource.cpp anyway.
#
# `zig c++` takes the target as an argument and CMake wants one executable per tool, so the
# compiler, ar and ranlib are small wrapper scripts written into the build tree at each
# configure. try_compile projects reuse the top-level build's wrappers
# (CMAKE_TRY_COMPILE_PLATFORM_VARIABLES).
set(CMAKE_SYSTEM_NAME Darwin)
set(RESERVOIR_MACOS_DEPLOYMENT_TARGET 11.0)
set(CMAKE_TRY_COMPILE_PLATFORM_VARIABLES RESERVOIR_ZIG_ARCH RESERVOIR_ZIG_WRAPPERS)

if(NOT RESERVOIR_ZIG_ARCH)
  set(RESERVOIR_ZIG_ARCH aarch64)
endif()
if(RESERVOIR_ZIG_ARCH STREQUAL "aarch64")
  set(CMAKE_SYSTEM_PROCESSOR arm64)
elseif(RESERVOIR_ZIG_ARCH STREQUAL "x86_64")
  set(CMAKE_SYSTEM_PROCESSOR x86_64)
else()
  message(FATAL_ERROR "RESERVOIR_ZIG_ARCH must be aarch64 or x86_64, not '${RESERVOIR_ZIG_ARCH}'")
endif()
# CMake's Darwin platform adds -arch and -mmacosx-version-min from these; the target triple
# already says both, so leave them empty.
set(CMAKE_OSX_ARCHITECTURES "" CACHE STRING "" FORCE)
set(CMAKE_OSX_DEPLOYMENT_TARGET "" CACHE STRING "" FORCE)
set(CMAKE_OSX_SYSROOT "" CACHE PATH "" FORCE)

if(NOT RESERVOIR_ZIG_WRAPPERS)
  # 1. Find zig 0.11: where install-deps.sh puts it (root: /opt, others: the user's cache dir).
  set(_zig_dirs)
  if(DEFINED ENV{RESERVOIR_ZIG_DIR})
    list(APPEND _zig_dirs "$ENV{RESERVOIR_ZIG_DIR}")
  endif()
  list(APPEND _zig_dirs /opt/reservoir/zig-0.11.0)
  if(DEFINED ENV{XDG_CACHE_HOME})
    list(APPEND _zig_dirs "$ENV{XDG_CACHE_HOME}/reservoir/zig-0.11.0")
  endif()
  if(DEFINED ENV{HOME})
    list(APPEND _zig_dirs "$ENV{HOME}/.cache/reservoir/zig-0.11.0")
  endif()
  find_program(RESERVOIR_ZIG NAMES zig PATHS ${_zig_dirs} NO_DEFAULT_PATH)
  find_program(RESERVOIR_ZIG NAMES zig)
  if(NOT RESERVOIR_ZIG)
    message(FATAL_ERROR "zig 0.11 not found (looked in ${_zig_dirs} and on PATH). "
      "Install it with: scripts/install-deps.sh macos")
  endif()
  execute_process(COMMAND "${RESERVOIR_ZIG}" version OUTPUT_VARIABLE _zig_version
    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _zig_rc)
  if(NOT _zig_rc EQUAL 0 OR NOT _zig_version MATCHES "^0\\.11\\.")
    message(FATAL_ERROR "${RESERVOIR_ZIG} is zig '${_zig_version}'; these presets need 0.11.x "
      "(scripts/install-deps.sh macos installs it)")
  endif()

  # 2. The wrappers. The compiler's name ends in clang++ so that ccache (the presets' launcher)
  #    treats it as clang. Each fresh build tree writes them anew, so the presets have ccache
  #    identify the compiler by the wrapper's content (zig's path and the target), not by its
  #    modification time, which would miss every time.
  set(RESERVOIR_ZIG_WRAPPERS "${CMAKE_BINARY_DIR}/zig-wrappers")
  set(_target "${RESERVOIR_ZIG_ARCH}-macos.${RESERVOIR_MACOS_DEPLOYMENT_TARGET}")
  #    Zig's linker rejects -Wl,-v, which CMake's compiler ABI probe passes: the wrapper drops it.
  file(WRITE "${RESERVOIR_ZIG_WRAPPERS}/zig-clang++" "#!/bin/sh
for a do
  shift
  [ \"$a\" = -Wl,-v ] || set -- \"$@\" \"$a\"
done
exec \"${RESERVOIR_ZIG}\" c++ -target ${_target} \"$@\"
")
  file(WRITE "${RESERVOIR_ZIG_WRAPPERS}/zig-ar" "#!/bin/sh\nexec \"${RESERVOIR_ZIG}\" ar \"$@\"\n")
  file(WRITE "${RESERVOIR_ZIG_WRAPPERS}/zig-ranlib"
    "#!/bin/sh\nexec \"${RESERVOIR_ZIG}\" ranlib \"$@\"\n")
  file(CHMOD "${RESERVOIR_ZIG_WRAPPERS}/zig-clang++" "${RESERVOIR_ZIG_WRAPPERS}/zig-ar"
    "${RESERVOIR_ZIG_WRAPPERS}/zig-ranlib"
    FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ
    WORLD_EXECUTE)
endif()

set(CMAKE_CXX_COMPILER "${RESERVOIR_ZIG_WRAPPERS}/zig-clang++")
set(CMAKE_AR "${RESERVOIR_ZIG_WRAPPERS}/zig-ar" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "${RESERVOIR_ZIG_WRAPPERS}/zig-ranlib" CACHE FILEPATH "" FORCE)

# Never search the host's headers, libraries or packages for the target.
set(CMAKE_FIND_ROOT_PATH "${RESERVOIR_ZIG_WRAPPERS}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
