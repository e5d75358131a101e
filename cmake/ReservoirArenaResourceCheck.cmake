# Where ArenaResource exists (RESERVOIR_HAS_ARENA_RESOURCE), the tests use it and so link it.
# Where it does not (libc++ before 16; macOS before a deployment target of 14.0), check at
# configure time that constructing one fails to compile with the placeholder's reason, rather
# than compiling and then failing to link, or vanishing without a word.
set(_dir "${CMAKE_BINARY_DIR}/CMakeFiles/reservoir_arena_resource_check")
set(_includes "${PROJECT_SOURCE_DIR}/pal/include;${PROJECT_SOURCE_DIR}/arena/include")
file(WRITE "${_dir}/has.cpp" "#include <reservoir/arena_resource.hpp>
static_assert(RESERVOIR_HAS_ARENA_RESOURCE, \"\");
")
file(WRITE "${_dir}/use.cpp" "#include <reservoir/arena_resource.hpp>
void use() { reservoir::ArenaResource resource(1 << 20); }
")
set(_type_before "${CMAKE_TRY_COMPILE_TARGET_TYPE}")
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)  # compile only
try_compile(_has "${_dir}/has" SOURCES "${_dir}/has.cpp"
  CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${_includes}" CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON)
if(_has)
  message(STATUS "reservoir: ArenaResource is available (the tests link it)")
else()
  try_compile(_use "${_dir}/use" SOURCES "${_dir}/use.cpp"
    CMAKE_FLAGS "-DINCLUDE_DIRECTORIES=${_includes}" CXX_STANDARD 20 CXX_STANDARD_REQUIRED ON
    OUTPUT_VARIABLE _out)
  string(FIND "${_out}" "reservoir::ArenaResource needs std::pmr::memory_resource" _at)
  if(_use OR _at EQUAL -1)
    message(FATAL_ERROR "ArenaResource is not available here, but constructing one did not fail "
      "with the placeholder's reason:\n${_out}")
  endif()
  message(STATUS "reservoir: ArenaResource is not available with this standard library or "
    "deployment target; constructing one fails to compile with the reason (checked)")
endif()
set(CMAKE_TRY_COMPILE_TARGET_TYPE "${_type_before}")
