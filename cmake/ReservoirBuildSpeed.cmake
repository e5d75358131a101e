# Compiles through ccache when it is installed (RESERVOIR_CCACHE, on where reservoir is the
# top-level project): a rebuild after a branch switch or in a clean build directory then costs a
# cache lookup per unchanged file. It changes nothing that is built.
option(RESERVOIR_CCACHE "Compile through ccache when it is installed" ${RESERVOIR_IS_TOP_LEVEL})
if(RESERVOIR_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  find_program(RESERVOIR_CCACHE_PROGRAM ccache)
  if(RESERVOIR_CCACHE_PROGRAM)
    set(CMAKE_CXX_COMPILER_LAUNCHER ${RESERVOIR_CCACHE_PROGRAM})
  endif()
endif()

# Compiles each test and bench program as a few large translation units (CMake's unity build,
# RESERVOIR_UNITY_BUILD, batches of 8 sources): the standard library, doctest, fmt, CLI11 and TBB
# headers are then parsed a few times per program instead of once per source file, which halves
# the build. The library itself is never built this way. Every preset CI builds turns it on; the
# dev preset does not, so that editing one test file recompiles only that file. A source that
# must stay alone (it defines a macro before its first include) says so with
# SKIP_UNITY_BUILD_INCLUSION.
option(RESERVOIR_UNITY_BUILD "Compile the tests and the bench as unity builds" OFF)
function(reservoir_unity_build target)
  if(RESERVOIR_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  endif()
endfunction()
