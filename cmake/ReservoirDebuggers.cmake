# Debugger support for targets that link reservoir (the files are in debuggers/, installed by
# ReservoirInstall.cmake). MSVC and clang-cl: the natvis file is an interface source, so every
# executable or DLL that links reservoir passes it to the linker (/NATVIS), which embeds it in the
# PDB; Visual Studio then shows DynArray, ConcurrentDynArray and Arena with no setup. gdb and lldb
# load their scripts by a command (see the README's Debugging section).
if(MSVC)
  target_sources(reservoir INTERFACE
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/debuggers/natvis/reservoir.natvis>
    $<INSTALL_INTERFACE:$<INSTALL_PREFIX>/${CMAKE_INSTALL_DATADIR}/reservoir/natvis/reservoir.natvis>)
endif()
