# embed_stdlib.cmake - writes the C++ source that embeds stdlib/*.lua into
# liblazylua. Run at build time by CMakeLists.txt:
#   cmake -DOUTPUT=<file.cpp> -DOPENERS_OUTPUT=<file.cpp> -DSOURCES="<a.lua|b.lua>"
#         -P embed_stdlib.cmake
# Each file becomes a byte array (hex, so no Lua text can end a C++ literal)
# and one row of kEmbeddedModules, named after the file without ".lua".
# OPENERS_OUTPUT gets, for the Lua C module lazylua.so only, one entry point
# luaopen_lazylua_<name> per module: stock Lua's all-in-one searcher finds
# `require "lazylua.<name>"` in lazylua.so through it, with no prior
# `require "lazylua"` and no Lua file on LUA_PATH.
set(rows "")
set(openers "")
set(arrays "")
set(index 0)
string(REPLACE "|" ";" SOURCES "${SOURCES}")
list(SORT SOURCES)
foreach(source IN LISTS SOURCES)
  get_filename_component(module ${source} NAME_WE)
  get_filename_component(file_name ${source} NAME)
  file(READ ${source} hex HEX)
  string(LENGTH "${hex}" hex_length)
  math(EXPR byte_count "${hex_length} / 2")
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "'\\\\x\\1'," bytes "${hex}")
  string(APPEND arrays "constexpr char kModule${index}[] = {${bytes}'\\0'};\n")
  string(APPEND rows "    {\"${module}\", \"@stdlib/${file_name}\", kModule${index}, ${byte_count}},\n")
  if(module MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    string(APPEND openers "extern \"C\" int luaopen_lazylua_${module}(lua_State* L) {
  return lazylua::open_stdlib_module(L, \"lazylua.${module}\");
}
")
  else()
    message(WARNING "stdlib/${file_name}: not a C identifier, so no luaopen_lazylua_${module}: "
                    "require \"lazylua.${module}\" works only after require \"lazylua\"")
  endif()
  math(EXPR index "${index} + 1")
endforeach()
set(text "// Generated from stdlib/*.lua by cmake/embed_stdlib.cmake: do not edit.
#include \"interp/embedded_stdlib.h\"

namespace lazylua {
namespace {
${arrays}}  // namespace

const EmbeddedModule kEmbeddedModules[] = {
${rows}    {nullptr, nullptr, nullptr, 0},
};

}  // namespace lazylua
")
file(WRITE ${OUTPUT} "${text}")

if(OPENERS_OUTPUT)
  file(WRITE ${OPENERS_OUTPUT} "// Generated from stdlib/*.lua by cmake/embed_stdlib.cmake: do not edit.
#include <lua.hpp>

#include \"interp/lua_module.h\"

${openers}")
endif()
