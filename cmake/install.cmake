# install.cmake - `cmake --install`: the library, headers, Lua module, the
# program, a CMake package (find_package(lazylua) gives lazylua::lazylua)
# and a pkg-config file.
#
# Layout under the prefix (GNUInstallDirs):
#   bin/lazylua, bin/lazylua-lint                    the programs
#   share/man/man1/lazylua.1                         `man lazylua`
#   lib/liblazylua.so*, include/lazylua.h(pp)        the embedding library
#   lib/cmake/lazylua/, lib/pkgconfig/lazylua.pc     how hosts find it
#   lib/lua/5.4/lazylua.so                           the Lua C module
# The stdlib (lazylua.nn, lazylua.optim ...) is built into lazylua.so and
# liblazylua: no Lua file is installed, so nothing lands in share/lua/5.4
# under a generic name, and stock Lua finds `require "lazylua.nn"` in
# lazylua.so (luaopen_lazylua_nn) with no prior `require "lazylua"`.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Relative paths are under the prefix; luarocks passes its own absolute one.
set(LAZYLUA_LUA_CMOD_DIR "${CMAKE_INSTALL_LIBDIR}/lua/5.4" CACHE STRING
    "Where the Lua C module lazylua.so is installed")
option(LAZYLUA_INSTALL_PROGRAM "Install the lazylua program" ON)
# The rock installs the Lua module only: luarocks deploys everything under
# its prefix's lib/ into lib/lua/5.4, where a C library, CMake files and a
# .pc file do not belong.
option(LAZYLUA_INSTALL_DEVELOPMENT
       "Install liblazylua, its headers, the CMake package and lazylua.pc" ON)

install(TARGETS lazylua_module LIBRARY DESTINATION ${LAZYLUA_LUA_CMOD_DIR})
if(LAZYLUA_INSTALL_PROGRAM)
  set_target_properties(lazylua_program PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS lazylua_program lazylua_lint RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(FILES ${CMAKE_SOURCE_DIR}/docs/lazylua.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  # The program needs the library beside it.
  if(NOT LAZYLUA_INSTALL_DEVELOPMENT)
    install(TARGETS lazylua LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
  endif()
endif()

if(NOT LAZYLUA_INSTALL_DEVELOPMENT)
  return()
endif()

# A host that links lazylua::lazylua from the installed package runs
# without LD_LIBRARY_PATH: the link carries an rpath to the prefix's
# library folder (wherever the package was installed: $<INSTALL_PREFIX> is
# the package's own prefix, computed where the package is found). The
# headers ask for C++17 (lazylua.hpp); C hosts are not affected.
target_link_options(lazylua INTERFACE
                    "$<INSTALL_INTERFACE:LINKER:-rpath,$<INSTALL_PREFIX>/${CMAKE_INSTALL_LIBDIR}>")
target_compile_features(lazylua INTERFACE cxx_std_17)

install(TARGETS lazylua EXPORT lazyluaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/lazylua.h ${CMAKE_SOURCE_DIR}/include/lazylua.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

set(LAZYLUA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/lazylua)
install(EXPORT lazyluaTargets NAMESPACE lazylua:: DESTINATION ${LAZYLUA_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/lazyluaConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/lazyluaConfig.cmake
                              INSTALL_DESTINATION ${LAZYLUA_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/lazyluaConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/lazyluaConfig.cmake ${CMAKE_BINARY_DIR}/lazyluaConfigVersion.cmake
        DESTINATION ${LAZYLUA_CMAKE_DIR})

# Relocatable: the prefix is found from the .pc file's own place, so
# `cmake --install --prefix <dir>` works without reconfiguring; Libs
# carries -Wl,-rpath,${libdir} so the host runs without LD_LIBRARY_PATH.
file(RELATIVE_PATH LAZYLUA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/lazylua.pc.in ${CMAKE_BINARY_DIR}/lazylua.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lazylua.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
