# install.cmake - `cmake --install`: the library, headers, Lua module, stdlib
# Lua files, the program, a CMake package (find_package(lazylua) gives
# lazylua::lazylua) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Relative paths are under the prefix; luarocks passes its own absolute ones.
set(LAZYLUA_LUA_CMOD_DIR "${CMAKE_INSTALL_LIBDIR}/lua/5.4" CACHE STRING
    "Where the Lua C module lazylua.so is installed")
set(LAZYLUA_LUA_LMOD_DIR "${CMAKE_INSTALL_DATADIR}/lua/5.4" CACHE STRING
    "Where the stdlib Lua modules (nn.lua, ...) are installed")
option(LAZYLUA_INSTALL_PROGRAM "Install the lazylua program" ON)

install(TARGETS lazylua EXPORT lazyluaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/include/lazylua.h ${CMAKE_SOURCE_DIR}/include/lazylua.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS lazylua_module LIBRARY DESTINATION ${LAZYLUA_LUA_CMOD_DIR})
if(LAZYLUA_INSTALL_PROGRAM)
  set_target_properties(lazylua_program PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS lazylua_program lazylua_lint RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# The stdlib folder may not exist yet.
file(GLOB LAZYLUA_STDLIB_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/stdlib/*.lua)
if(LAZYLUA_STDLIB_FILES)
  install(FILES ${LAZYLUA_STDLIB_FILES} DESTINATION ${LAZYLUA_LUA_LMOD_DIR})
endif()

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
# `cmake --install --prefix <dir>` works without reconfiguring.
file(RELATIVE_PATH LAZYLUA_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_SOURCE_DIR}/cmake/lazylua.pc.in ${CMAKE_BINARY_DIR}/lazylua.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/lazylua.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
