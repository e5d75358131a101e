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
