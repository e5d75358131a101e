# Installs headers, the static library, a CMake config package and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# pal/include (pal.hpp) is the library's own: not installed.
install(DIRECTORY arena/include/reservoir dynarray/include/reservoir
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS reservoir EXPORT reservoirTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT reservoirTargets NAMESPACE reservoir::
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reservoir)
configure_package_config_file(cmake/reservoirConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/reservoirConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reservoir)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/reservoirConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/reservoirConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/reservoirConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/reservoir)
set(RESERVOIR_PC_LIBS "-lreservoir")
# A static library's own dependencies: the thread library (std::mutex, thread_local) and, on
# Windows, psapi and synchronization (WaitOnAddress). `pkg-config --static --libs reservoir` adds
# them.
set(RESERVOIR_PC_LIBS_PRIVATE "-pthread")
if(WIN32)
  string(APPEND RESERVOIR_PC_LIBS " -lpsapi -lsynchronization")
  set(RESERVOIR_PC_LIBS_PRIVATE "")
endif()
# Relocatable: the prefix is found from the .pc file's own location, so `cmake --install --prefix`
# at install time works.
file(RELATIVE_PATH RESERVOIR_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" RESERVOIR_PC_TO_PREFIX "${RESERVOIR_PC_TO_PREFIX}")
configure_file(cmake/reservoir.pc.in ${CMAKE_CURRENT_BINARY_DIR}/reservoir.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/reservoir.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# Debugger support (the README's Debugging section): gdb printers, lldb formatters, natvis.
install(FILES debuggers/gdb/reservoir_printers.py DESTINATION ${CMAKE_INSTALL_DATADIR}/reservoir/gdb)
install(FILES debuggers/lldb/reservoir_lldb.py DESTINATION ${CMAKE_INSTALL_DATADIR}/reservoir/lldb)
install(FILES debuggers/natvis/reservoir.natvis
  DESTINATION ${CMAKE_INSTALL_DATADIR}/reservoir/natvis)
