// lua_tensor_internal.h - helpers shared by the files of the Lua binding.
//
// Every function Lua calls goes through `guarded`: the body runs in a try
// block, and a C++ exception becomes a Lua error only after the catch block
// has ended, so no exception crosses lua_error and no longjmp skips a
// destructor. Bodies therefore never call Lua functions that raise errors on
// bad arguments (luaL_check*): they use the throwing helpers below, read
// user tables raw, and push results through interp/lua_safe.h (the rule).
#pragma once

#include <lua.hpp>

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "interp/lua_tensor.h"
#include "tensor/autograd.h"
#include "tensor/eager_ops.h"

namespace lazylua::binding {

using Body = int (*)(lua_State* L);

// Runs body(L); on a C++ exception raises a Lua error carrying its message,
// prefixed with the Lua position of the caller.
int run_guarded(lua_State* L, Body body);

template <Body body>
int guarded(lua_State* L) {
  return run_guarded(L, body);
}

// Throws Error("bad argument #arg to 'function' (message)").
[[noreturn]] void argument_error(int arg, const char* function, const std::string& message);
// "tensor expected, got table"-style message for a wrong type.
[[noreturn]] void type_error(lua_State* L, int arg, const char* function, const char* expected);

// The tensor at `arg`, or an argument error. A closed tensor is an error.
const Tensor& check_tensor(lua_State* L, int arg, const char* function);
// Is the value at `arg` a Lua number (not a string that looks like one)?
bool is_number(lua_State* L, int arg);
ops::Scalar check_scalar(lua_State* L, int arg, const char* function);
int64_t check_integer(lua_State* L, int arg, const char* function);
double check_double(lua_State* L, int arg, const char* function);
std::optional<int64_t> optional_integer(lua_State* L, int arg, const char* function);
bool optional_boolean(lua_State* L, int arg, const char* function, bool fallback);
// An argument error naming the first key of the table at `arg` not in `known`.
void check_option_keys(lua_State* L, int arg, const char* function,
                       std::initializer_list<const char*> known);

// 1-based (or negative) Lua dim at `arg` for a tensor of `rank` dims -> 0-based.
int check_dim(lua_State* L, int arg, int rank, const char* function, int rank_extra = 0);
std::optional<int> optional_dim(lua_State* L, int arg, int rank, const char* function);

// Sizes given as integers in args [first, last], or as one table at first.
// With `allow_inferred`, one extent may be -1 (reshape, view, expand).
Shape check_sizes(lua_State* L, int first, int last, const char* function,
                  bool allow_inferred = false);
// dtype from an options table at `arg` ({dtype = "f64"}) if there is one; a
// value there that is not a table is an error.
std::optional<DType> options_dtype(lua_State* L, int arg, const char* function);
// Whether the value at `arg` is an options table rather than a size table.
bool is_options_table(lua_State* L, int arg);

// A tensor argument, or a number turned into a 0-dim tensor whose dtype
// follows the weak-scalar rule against `other`'s dtype.
Tensor tensor_or_scalar(lua_State* L, int arg, const char* function, DType other);

// Registers the op methods (lua_tensor_methods.cpp) into the table on top.
void register_methods(lua_State* L);
// masked_fill(_), masked_select, nonzero (lua_tensor_masked.cpp).
void register_masked_methods(lua_State* L);
// t[mask]: the slices of t (along the leading dims the bool mask has) where
// the mask is true, stacked along dim 1. Reads the mask.
Tensor mask_index(const Tensor& self, const Tensor& mask);
// t[mask] = value (the Lua value at `value_arg`: a number, or a tensor that
// broadcasts to the selected slices or has their number of elements).
void mask_assign(lua_State* L, const Tensor& self, const Tensor& mask, int value_arg);
// tensor.where(cond) with one argument: one i64 tensor per dim of cond, the
// 1-based indices of its non-zero elements (torch.where(cond)). Reads cond.
int where_indices(lua_State* L);
// Pushes the table t:size() returns ({2, 3}), which prints as "{2, 3}" and
// compares by value with ==.
void push_size_table(lua_State* L, const Shape& shape);

// Autograd methods and scatter_add/index_add (lua_tensor_autograd.cpp).
void register_autograd_methods(lua_State* L);
// tensor.no_grad, enable_grad, is_grad_enabled, set_grad_enabled.
void register_autograd_functions(lua_State* L);
// chunk, split, tril, einsum, pad ... (lua_tensor_shape.cpp).
void register_shape_methods(lua_State* L);
// sort, topk, median, var, std, norm, logsumexp ... (lua_tensor_sorting.cpp).
void register_sorting_methods(lua_State* L);
// conv2d and max_pool2d (lua_tensor_conv.cpp).
void register_conv_methods(lua_State* L);
// isclose, lerp, one_hot, uniform_, multinomial ... (lua_tensor_math_extra.cpp).
void register_math_extra_methods(lua_State* L);
// tensor._adam_step, optim.Adam's update (lua_tensor_optim.cpp).
void register_optim_functions(lua_State* L);
// tensor.scan and its primitive tensor._scan (lua_tensor_scan.cpp).
void register_scan_functions(lua_State* L);
// Registers the module-only functions (factories ...) into the table on top.
void register_factories(lua_State* L);

// item()/tolist() helpers: push the element of `a` at this index.
void push_element(lua_State* L, const Array& a, const int64_t* index);

// Registers the lazy-mode functions (mark_step, sync, metrics, ir ...).
void register_lazy_functions(lua_State* L);
// The tensors of the list at `index`; an error names the function and what
// the list is ("scan: init must be a list of tensors").
std::vector<Tensor> tensor_list(lua_State* L, int index, const char* function, const char* what);
// Pushes a list of the tensors.
void push_tensor_list(lua_State* L, const std::vector<Tensor>& list);
// The tensors given as arguments first..top, or in one table at first.
std::vector<Tensor> tensor_arguments(lua_State* L, int first, const char* function);
// The graph of the tensors' current values (tensor.ir, tensor.graph): no
// sync; `keep` must outlive the graph (lua_tensor_lazy.cpp).
Graph values_graph(Context* context, const std::vector<Tensor>& tensors, std::vector<Tensor>& keep);
void register_profile_functions(lua_State* L);
// tensor.graph: the IR as Lua tables (lua_tensor_graph.cpp).
void register_graph_functions(lua_State* L);

}  // namespace lazylua::binding
