// lua_npy.h - tensor.load_npy / save_npy / load_npz / save_npz: NumPy's
// .npy and .npz files (interp/npy_format.h, interp/zip_archive.h).
#pragma once

struct lua_State;

namespace lazylua::binding {

// Registers the four functions into the table on top of the stack (none in
// a sandboxed interpreter, which touches no file).
void register_npy_functions(lua_State* L);

}  // namespace lazylua::binding
