// lua_tensor_lazy.cpp - the lazy-mode functions of `tensor`: barriers and
// syncs, the eager switch, metrics, the configuration and the IR in text and
// Graphviz forms.
#include <algorithm>

#include "compiler/native_executor.h"
#include "interp/config.h"
#include "interp/lua_safe.h"
#include "interp/lua_tensor_internal.h"
#include "tensor/allocator.h"
#include "tensor/blas.h"

namespace lazylua::binding {

// The tensors given as arguments first..top (or in one table at first).
std::vector<Tensor> tensor_arguments(lua_State* L, int first, const char* function) {
  std::vector<Tensor> tensors;
  if (lua_type(L, first) == LUA_TTABLE && !to_tensor(L, first)) {
    const int64_t count = static_cast<int64_t>(lua_rawlen(L, first));
    for (int64_t i = 1; i <= count; i++) {
      lua_rawgeti(L, first, i);
      const Tensor* tensor = to_tensor(L, -1);
      lua_pop(L, 1);
      if (!tensor || !*tensor) argument_error(first, function, "expected a list of tensors");
      tensors.push_back(*tensor);
    }
    return tensors;
  }
  for (int arg = first; arg <= lua_gettop(L); arg++)
    tensors.push_back(check_tensor(L, arg, function));
  return tensors;
}

// As tensor.ir shows them: temporary tensors whose pending values are the
// given tensors' current values (a data tensor is one parameter leaf), so
// nothing is synced and a tensor given twice is one output twice. `keep`
// holds the temporaries: the graph points at their nodes.
Graph values_graph(Context* context, const std::vector<Tensor>& tensors,
                   std::vector<Tensor>& keep) {
  std::vector<TensorImpl*> roots;
  for (const Tensor& tensor : tensors) {
    keep.push_back(Tensor(new TensorImpl(context, value_of(tensor))));
    roots.push_back(keep.back().get());
  }
  return context->extract(roots);
}

namespace {

int mark_step(lua_State* L) {
  tensor_context(L)->mark_step();
  return 0;
}

int sync(lua_State* L) {
  const std::vector<Tensor> tensors = tensor_arguments(L, 1, "sync");
  std::vector<TensorImpl*> targets;
  for (const Tensor& tensor : tensors) targets.push_back(tensor.get());
  tensor_context(L)->sync(targets, SyncCause::explicit_sync);
  return 0;
}

// tensor.set_eager(flag): true runs every op at once from now on (pending
// work is synced first); false records again. Returns the previous mode.
int set_eager(lua_State* L) {
  Context* context = tensor_context(L);
  if (lua_type(L, 1) != LUA_TBOOLEAN) type_error(L, 1, "set_eager", "boolean");
  const bool previous = context->eager;
  const bool eager = lua_toboolean(L, 1);
  if (eager && !previous) context->mark_step();
  context->eager = eager;
  lua_pushboolean(L, previous);
  return 1;
}

int is_eager(lua_State* L) {
  lua_pushboolean(L, tensor_context(L)->eager);
  return 1;
}

void set_number(lua_State* L, const char* name, double value) {
  lua_pushnumber(L, value);
  lua_safe::set_field(L, -2, name);
}

void set_integer(lua_State* L, const char* name, int64_t value) {
  lua_pushinteger(L, value);
  lua_safe::set_field(L, -2, name);
}

int metrics(lua_State* L) {
  const Context* context = tensor_context(L);
  const Metrics& m = context->metrics;
  lua_safe::create_table(L, 0, 0);
  set_integer(L, "ops_recorded", m.ops_recorded);
  set_integer(L, "syncs", m.syncs);
  lua_safe::create_table(L, 0, 0);
  for (int cause = 0; cause < kSyncCauseCount; cause++) {
    set_integer(L, sync_cause_name(static_cast<SyncCause>(cause)), m.syncs_by_cause[cause]);
  }
  lua_safe::set_field(L, -2, "syncs_by_cause");
  set_integer(L, "graphs_executed", m.graphs_executed);
  set_integer(L, "nodes_executed", m.nodes_executed);
  set_integer(L, "distinct_graphs", static_cast<int64_t>(context->seen_keys.size()));
  set_integer(L, "key_hits", m.key_hits);
  set_integer(L, "key_misses", m.key_misses);
  set_integer(L, "barrier_collections", m.barrier_collections);
  set_integer(L, "calls_replayed", m.calls_replayed);
  set_number(L, "execute_seconds", m.execute_seconds);
  set_integer(L, "compiles", m.compiles);
  set_number(L, "compile_seconds", m.compile_seconds);
  set_integer(L, "cache_hits", m.memory_cache_hits);
  set_integer(L, "cache_misses", m.memory_cache_misses);
  set_integer(L, "disk_hits", m.disk_cache_hits);
  set_integer(L, "codegen_skipped", m.codegen_skipped);
  set_integer(L, "native_runs", m.native_runs);
  set_integer(L, "interpreted_runs", m.interpreted_runs);
  set_integer(L, "kernels", m.kernels);
  set_integer(L, "kernel_functions", m.kernel_functions);
  set_integer(L, "fallbacks", m.fallbacks);
  set_integer(L, "donated_buffers", m.donated_buffers);
  lua_safe::create_table(L, 0, 0);
  for (const auto& [op, count] : m.fallbacks_by_op) set_integer(L, op.c_str(), count);
  lua_safe::set_field(L, -2, "fallbacks_by_op");
  set_number(L, "sync_seconds", m.sync_seconds);
  set_integer(L, "live_pending", static_cast<int64_t>(context->pending_tensors().size()));
  const AllocatorStats memory = allocator_stats();
  set_integer(L, "bytes_in_use", memory.bytes_in_use);
  set_integer(L, "bytes_cached", memory.bytes_cached);
  set_integer(L, "peak_bytes", memory.peak_bytes_in_use);
  lua_pushboolean(L, context->eager);
  lua_safe::set_field(L, -2, "eager");
  return 1;
}

void set_string(lua_State* L, const char* name, const std::string& value) {
  lua_safe::push_string(L, value);
  lua_safe::set_field(L, -2, name);
}

// tensor.config(): what computes (interp/config.h), as a table.
int config(lua_State* L) {
  const RuntimeConfig config = runtime_config();
  lua_safe::create_table(L, 0, 0);
  set_string(L, "blas", config.blas);
  if (!config.blas_error.empty()) set_string(L, "blas_error", config.blas_error);
  set_string(L, "blas_core", config.blas_core);
  set_string(L, "blas_core_source", config.blas_core_source);
  set_integer(L, "threads", config.threads);
  set_integer(L, "blas_threads", config.blas_threads);
  set_string(L, "vector_isa", config.vector_isa);
  set_string(L, "cpu", config.cpu);
  set_string(L, "conv", config.conv);
  return 1;
}

int reset_metrics(lua_State* L) {
  Context* context = tensor_context(L);
  context->metrics = Metrics{};
  context->seen_keys.clear();
  context->diagnostics = Diagnostics{};
  reset_peak_bytes_in_use();
  return 0;
}

// tensor.explain([n]): the last n (default all kept) explanations of new
// graphs, oldest first, each a table (tensor/diagnostics.h).
int explain(lua_State* L) {
  const auto& explanations = tensor_context(L)->diagnostics.explanations();
  if (!lua_isnoneornil(L, 1) && !is_number(L, 1)) type_error(L, 1, "explain", "number");
  const int64_t wanted =
      optional_integer(L, 1, "explain").value_or(static_cast<int64_t>(explanations.size()));
  if (wanted < 0) fail("tensor.explain: n must be >= 0, got {}", wanted);
  const size_t count = std::min(explanations.size(), static_cast<size_t>(wanted));
  lua_safe::create_table(L, static_cast<int64_t>(count), 0);
  for (size_t k = 0; k < count; k++) {
    const RecompileExplanation& e = explanations[explanations.size() - count + k];
    lua_safe::create_table(L, 0, 9);
    set_string(L, "site", e.site);
    set_string(L, "cause", e.cause);
    set_integer(L, "graphs_at_site", e.graphs_at_site);
    set_string(L, "reason", e.reason);
    set_string(L, "message", e.message);
    set_string(L, "hint", e.hint);
    if (!e.new_line.empty()) set_string(L, "new_line", e.new_line);
    if (!e.cached_line.empty()) set_string(L, "cached_line", e.cached_line);
    set_string(L, "text", e.text());
    lua_rawseti(L, -2, static_cast<lua_Integer>(k + 1));
  }
  return 1;
}

// tensor.report(): the sites that made more than two graphs and the lines
// that synced more than once, as text ("" when there is nothing to say).
int report(lua_State* L) {
  const Context* context = tensor_context(L);
  const std::string text = context->diagnostics.report(
      context->metrics.syncs_by_cause[static_cast<int>(SyncCause::barrier)]);
  lua_safe::push_string(L, text);
  return 1;
}

// tensor.pending(): the ops a mark_step would run now, in the order it
// would run them: {op =, line =, dtype =, shape = {...}} each.
int pending(lua_State* L) {
  Context* context = tensor_context(L);
  // The graph points at the pending tensors' nodes without owning them, and
  // the tables made below can run a garbage collection that releases a
  // tensor nothing else holds: hold each one until the list is made.
  const std::vector<TensorImpl*> roots = context->pending_tensors();
  const std::vector<Tensor> keep(roots.begin(), roots.end());
  const Graph graph = context->extract(roots);
  lua_safe::create_table(L, 0, 0);
  int count = 0;
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node& node = *graph.nodes[i];
    if (graph.is_leaf(static_cast<int>(i))) continue;
    lua_safe::create_table(L, 0, 4);
    set_string(L, "op", node.name());
    set_string(L, "line", location_string(node.location));
    set_string(L, "dtype", dtype_name(node.dtype));
    lua_safe::create_table(L, node.shape.rank(), 0);
    for (int d = 0; d < node.shape.rank(); d++) {
      lua_pushinteger(L, node.shape[d]);
      lua_rawseti(L, -2, d + 1);
    }
    lua_safe::set_field(L, -2, "shape");
    lua_safe::set_index(L, -2, ++count);
  }
  return 1;
}

// The graph that would compute these tensors' current values, as IR text,
// Graphviz, or the C the compiler generates for it.
enum class GraphForm { ir, dot, code };

template <GraphForm form>
int show_graph(lua_State* L) {
  const char* name = form == GraphForm::ir ? "ir" : form == GraphForm::dot ? "dot" : "code";
  std::vector<Tensor> keep;
  const Graph graph = values_graph(tensor_context(L), tensor_arguments(L, 1, name), keep);
  const std::string text = form == GraphForm::ir    ? graph_text(graph)
                           : form == GraphForm::dot ? graph_dot(graph)
                                                    : compiler::generated_source(graph);
  lua_safe::push_string(L, text);
  return 1;
}

}  // namespace

void register_lazy_functions(lua_State* L) {
  static const luaL_Reg functions[] = {
      {"mark_step", guarded<mark_step>},
      {"sync", guarded<sync>},
      {"set_eager", guarded<set_eager>},
      {"is_eager", guarded<is_eager>},
      {"metrics", guarded<metrics>},
      {"reset_metrics", guarded<reset_metrics>},
      {"config", guarded<config>},
      {"explain", guarded<explain>},
      {"report", guarded<report>},
      {"pending", guarded<pending>},
      {"ir", guarded<show_graph<GraphForm::ir>>},
      {"dot", guarded<show_graph<GraphForm::dot>>},
      {"code", guarded<show_graph<GraphForm::code>>},
      {nullptr, nullptr},
  };
  luaL_setfuncs(L, functions, 0);
  // OpenBLAS with the kernels chosen for this CPU, loaded now, before any
  // thread of ours (compiler, pool) runs: see tensor/blas.h.
  blas::load();
}

}  // namespace lazylua::binding
