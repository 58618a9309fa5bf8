// context.h - the state of one interpreter's tensors: eager or lazy mode,
// the live lazy tensors, syncing, the executor and the metrics.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "diagnostics.h"
#include "ir.h"
#include "x_enum.h"

namespace lazylua {

class TensorImpl;
struct CallRecordingStart;  // call_replay.cpp

// Why a sync happened; metrics count syncs by cause.
#define LAZYLUA_SYNC_CAUSES(X) \
  X(barrier)                   \
  X(print)                     \
  X(item)                      \
  X(tolist)                    \
  X(comparison)                \
  X(explicit_sync)             \
  X(eager_op)                  \
  X(host_read)

LAZYLUA_X_ENUM(SyncCause, int, LAZYLUA_SYNC_CAUSES)
inline const char* sync_cause_name(SyncCause cause) {
  return kSyncCauseNames[static_cast<int>(cause)];
}

// An extracted graph: the nodes a sync must compute, in a deterministic
// post-order (inputs before users). Leaves are parameters (data, scalars,
// results of earlier syncs) and constants; parameters are numbered in the
// order they appear.
struct Graph {
  std::vector<const Node*> nodes;
  std::vector<int> input_offsets;    // inputs of nodes[i] are input_positions[
  std::vector<int> input_positions;  //   input_offsets[i] .. input_offsets[i+1])
  std::vector<int> parameters;       // positions of the parameter/scalar leaves
  std::vector<int> outputs;          // positions whose values the sync returns
  uint64_t key = 0;                  // canonical hash: the compile-cache key
  // Per position (empty: none): a parameter whose buffer nothing but this
  // graph can read again, so the executor may compute an output into it
  // (the `w:add_(...)` of an optimizer step updates w's memory in place).
  // Part of the key, since compiled code depends on it.
  std::vector<uint8_t> donated;

  bool is_leaf(int position) const {
    return input_offsets[position] == input_offsets[position + 1];
  }
  bool is_donated(int position) const { return !donated.empty() && donated[position]; }
};

struct Metrics {
  int64_t ops_recorded = 0;
  int64_t syncs = 0;
  int64_t syncs_by_cause[kSyncCauseCount] = {};
  int64_t graphs_executed = 0;
  int64_t nodes_executed = 0;
  int64_t key_hits = 0;             // a graph whose key had been executed before
  int64_t key_misses = 0;           // a new key
  int64_t barrier_collections = 0;  // garbage collections run at a barrier
  int64_t calls_replayed = 0;       // recorded calls copied for new inputs (call_replay.h)
  double execute_seconds = 0;
  double sync_seconds = 0;  // whole syncs: extraction, key, execution, binding

  // Filled by the compiler's executor (compiler/native_executor.cpp).
  int64_t compiles = 0;             // programs built into native code
  double compile_seconds = 0;       // their build time (on the compile thread)
  int64_t memory_cache_hits = 0;    // runs of a program compiled before
  int64_t memory_cache_misses = 0;  // programs not in memory: built, or loaded from disk
  int64_t disk_cache_hits = 0;      // programs loaded from the disk cache
  int64_t codegen_skipped = 0;      // disk hits that ran the stored plan: no passes, no codegen
  int64_t native_runs = 0;          // graphs run by native code
  int64_t interpreted_runs = 0;     // graphs run by the reference interpreter
  int64_t kernels = 0;              // kernels in the last native plan
  int64_t kernel_functions = 0;     // distinct C functions among them
  int64_t fallbacks = 0;            // reference steps run inside native plans
  int64_t donated_buffers = 0;      // outputs computed into donated input buffers
  std::map<std::string, int64_t> fallbacks_by_op;
};

// Runs an extracted graph. The reference executor (reference_executor.cpp)
// walks it with the eager kernels; the compiler provides a native one.
class Executor {
 public:
  virtual ~Executor() = default;
  // Returns the values of graph.outputs, in order. Errors raised by a node
  // are ExecutionErrors naming it. Counts what it did in `metrics`.
  virtual std::vector<Array> run(const Graph& graph, Metrics& metrics) = 0;
};
std::unique_ptr<Executor> make_reference_executor();

// An Error raised while computing a graph; `node` is its position.
class ExecutionError : public Error {
 public:
  ExecutionError(const std::string& message, int failed_node) : Error(message), node(failed_node) {}
  int node;
};

// Computes a graph's outputs node by node with the eager kernels
// (evaluate_node): the reference executor, each iteration of a scan body
// (scan.cpp) and compiler::interpret all walk here, so freeing, interrupts
// and error reports are the same for each. An Error raised by a node is an
// ExecutionError naming its position; an InternalError names its op. A
// walker keeps its scratch between runs: a scan walks a small body
// thousands of times.
class GraphWalker {
 public:
  explicit GraphWalker(const Graph& graph);
  // The values of graph.outputs; `placeholders` holds the value of each
  // placeholder leaf (a scan body's inputs) by its input number.
  std::vector<Array> run(const std::vector<Array>& placeholders = {});

 private:
  const Graph& graph_;
  std::vector<int> last_use_;  // the last node that reads each value
  std::vector<Array> values_;
  std::vector<Array> inputs_;
};

class Context : public RefCounted {
 public:
  Context();
  ~Context();

  bool eager = false;
  bool grad_enabled = true;  // autograd records gradients (tensor.no_grad clears it)
  // Scan bodies being traced (scan.h): syncs are errors inside one, and the
  // lazy tensors made meanwhile are listed to be checked afterwards.
  int scan_depth = 0;
  std::vector<Ref<TensorImpl>>* scan_created = nullptr;
  // A call being recorded for replay (call_replay.h).
  std::shared_ptr<CallRecordingStart> call_recording;
  int debug_level = 0;
  Metrics metrics;
  Diagnostics diagnostics;  // why graphs were new, which lines sync often
  std::unique_ptr<Executor> executor;
  std::unordered_set<uint64_t> seen_keys;

  // The Lua binding tells where the script is, for nodes and sync messages.
  SourceLocation (*location_provider)(void* user) = nullptr;
  void* location_user = nullptr;
  // Library code names the ops it records (an imported ONNX model's nodes,
  // tensor.with_location): while this stack holds labels (interned, line
  // 0), the top one is the location of every new node, so profiles and
  // deferred errors name it. A sync's own site stays the script's line.
  std::vector<SourceLocation> location_labels;
  // Where a new node was recorded: the innermost label, else the script's line.
  SourceLocation current_location() const {
    return location_labels.empty() ? script_location() : location_labels.back();
  }
  // The script's line, labels or not (where a sync happens).
  SourceLocation script_location() const {
    return location_provider ? location_provider(location_user) : SourceLocation{};
  }
  // Runs the host's garbage collector (a quick young collection, or a full
  // one), so that tensors nobody can reach are not outputs of a barrier.
  void (*collect_garbage)(void* user, bool full) = nullptr;
  void* collect_garbage_user = nullptr;
  // For the host's collector policy: the Lua heap after the last full
  // collection, the tensor bytes in use (allocator_bytes_in_use) that make
  // the next one due, and the bytes of new results since
  // (interp/lua_tensor.cpp).
  int host_heap_after_full_kb = 0;
  int64_t tensor_bytes_full_collection_at = 0;
  int64_t result_bytes_since_full = 0;

  // Interned chunk names and labels for SourceLocation (kept for the
  // process's life: nodes and cached diagnostics point at them).
  const char* intern(const std::string& chunk);
  // The file an interned chunk name was read from, in full (a chunk name is
  // Lua's short_src, cut to 60 characters), or null when it came from no
  // file (a string, a label). The first file noted for a name is kept.
  void note_chunk_file(const char* chunk, const std::string& file);
  const char* chunk_file(const char* chunk) const;

  // Syncs the pending values of these tensors (views: of their bases).
  void sync(const std::vector<TensorImpl*>& tensors, SyncCause cause);
  // The barrier: syncs every live pending tensor.
  void mark_step();
  // The graph that sync would run for these tensors (for tensor.ir/dot).
  Graph extract(const std::vector<TensorImpl*>& tensors);

  // The live tensors with pending values, in the order they became pending
  // (TensorImpl::set_pending keeps the list).
  void add_live(TensorImpl* tensor);
  void remove_live(TensorImpl* tensor);
  std::vector<TensorImpl*> pending_tensors() const;

  // Collective nodes not yet run, in recording order (collectives.h). A
  // sync that runs one of them makes it an output, so that its value is
  // kept: no rank ever runs a collective twice.
  std::vector<NodeRef> pending_collectives;
  // Runs every pending collective (dist.barrier: the calls before it first).
  void run_pending_collectives();

 private:
  void keep_error(const std::vector<TensorImpl*>& tensors, const std::vector<const Node*>& failed,
                  const std::string& message);
  void run(std::vector<TensorImpl*> roots, SyncCause cause, bool collect_on_miss);

  // For the profiler's "record" spans: when the last sync ended, and the
  // ops recorded by then.
  int64_t profile_last_sync_end_ns_ = 0;
  int64_t profile_ops_at_last_sync_ = 0;
  uint32_t profile_number_ = ~0u;
  TensorImpl* live_first_ = nullptr;
  TensorImpl* live_last_ = nullptr;
  uint64_t epoch_ = 0;
  std::unordered_set<std::string> chunk_names_;
  std::unordered_map<const char*, std::string> chunk_files_;
};

// Text and Graphviz forms of a graph (docs/architecture.md §4).
std::string graph_text(const Graph& graph);
std::string graph_dot(const Graph& graph);

}  // namespace lazylua
