# Warnings and sanitizers for reservoir's own targets (never imposed on consumers).
include(GNUInstallDirs)

function(reservoir_set_warnings target)
  if(MSVC)
    target_compile_options(${target} PRIVATE /W4 /permissive- $<$<BOOL:${RESERVOIR_WARNINGS_AS_ERRORS}>:/WX>)
  else()
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion $<$<BOOL:${RESERVOIR_WARNINGS_AS_ERRORS}>:-Werror>)
  endif()
  if(RESERVOIR_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=${RESERVOIR_SANITIZE} -fno-omit-frame-pointer
      -fno-sanitize-recover=all)
    target_link_options(${target} PRIVATE -fsanitize=${RESERVOIR_SANITIZE})
  endif()
endfunction()
