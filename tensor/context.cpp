// context.cpp - liveness, graph extraction, the canonical key and syncing.
#include "context.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_set>

#include <unistd.h>

#include "profiler.h"
#include "scan.h"
#include "tensor.h"

namespace lazylua {

namespace {

// LAZYLUA_EAGER's value: 1/true/yes/on or 0/false/no/off (any case), empty
// is off; anything else is said and taken as off.
bool eager_from_environment() {
  const char* text = std::getenv("LAZYLUA_EAGER");
  if (!text || !*text) return false;
  std::string value(text);
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (value == "1" || value == "true" || value == "yes" || value == "on") return true;
  if (value == "0" || value == "false" || value == "no" || value == "off") return false;
  std::fprintf(stderr,
               "lazylua: LAZYLUA_EAGER=%s is not 1/0, true/false, yes/no or on/off; "
               "eager mode stays off\n",
               text);
  return false;
}

// The message of an internal error met while running `graph`: what failed,
// which graph, where the script synced; with LAZYLUA_DEBUG, a file holding
// the graph to attach to a bug report.
std::string describe_internal_error(const std::string& what, const Graph& graph, SyncCause cause,
                                    const SourceLocation& where, int debug_level) {
  std::string message =
      fmt::format("{} (running graph {:016x} of {} nodes, synced ({}) at {})", what, graph.key,
                  graph.nodes.size(), sync_cause_name(cause), location_string(where));
  if (debug_level < 1) return message + "; LAZYLUA_DEBUG=1 writes a file to attach to a report";
  char path[] = "/tmp/lazylua-internal-error-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return message;
  const std::string report = message + "\n\n" + graph_text(graph);
  const bool written =
      write(fd, report.data(), report.size()) == static_cast<ssize_t>(report.size());
  close(fd);
  return written ? message + "; the graph is in " + path : message;
}

}  // namespace

Context::Context() : executor(make_reference_executor()) {
  eager = eager_from_environment();
  if (const char* debug = std::getenv("LAZYLUA_DEBUG")) debug_level = std::atoi(debug);
}

// With LAZYLUA_DEBUG, the sites that kept making graphs and the lines that
// kept syncing are said at the end.
Context::~Context() {
  if (debug_level < 1) return;
  const std::string report =
      diagnostics.report(metrics.syncs_by_cause[static_cast<int>(SyncCause::barrier)]);
  if (!report.empty()) std::fprintf(stderr, "[lazylua] report:\n%s", report.c_str());
}

const char* Context::intern(const std::string& chunk) {
  return chunk_names_.insert(chunk).first->c_str();
}

void Context::note_chunk_file(const char* chunk, const std::string& file) {
  chunk_files_.emplace(chunk, file);
}

const char* Context::chunk_file(const char* chunk) const {
  const auto found = chunk_files_.find(chunk);
  return found == chunk_files_.end() ? nullptr : found->second.c_str();
}

void Context::add_live(TensorImpl* tensor) {
  tensor->previous_live = live_last_;
  tensor->next_live = nullptr;
  if (live_last_) {
    live_last_->next_live = tensor;
  } else {
    live_first_ = tensor;
  }
  live_last_ = tensor;
}

void Context::remove_live(TensorImpl* tensor) {
  if (tensor->previous_live) {
    tensor->previous_live->next_live = tensor->next_live;
  } else if (live_first_ == tensor) {
    live_first_ = tensor->next_live;
  } else {
    return;  // not registered (a view)
  }
  if (tensor->next_live) {
    tensor->next_live->previous_live = tensor->previous_live;
  } else {
    live_last_ = tensor->previous_live;
  }
  tensor->previous_live = tensor->next_live = nullptr;
}

std::vector<TensorImpl*> Context::pending_tensors() const {
  std::vector<TensorImpl*> pending;
  for (TensorImpl* t = live_first_; t; t = t->next_live) pending.push_back(t);
  return pending;
}

namespace {

bool acts_as_leaf(const Node* node) {
  return node->is_leaf() || node->result.defined();
}

// The hash a leaf contributes to the key: what kind of input it is, its
// dtype and shape, never its data or a scalar's value.
uint64_t leaf_hash(const Node* node) {
  if (node->op == Op::constant || node->op == Op::scalar) return node->local_hash;
  uint64_t hash =
      hash_mix(static_cast<uint64_t>(Op::parameter), static_cast<uint64_t>(node->dtype));
  for (int64_t extent : node->shape) hash = hash_mix(hash, static_cast<uint64_t>(extent));
  return hash;
}

// At a barrier every pending tensor is a root, so the graph's own nodes are
// the only ones that can still compute from a parameter: if they hold all
// references to its node, and the node holds the only reference to its
// buffer, no tensor, view or later graph can read that buffer again. (At
// other syncs a pending tensor outside the graph may share nodes with it.)
// A donated buffer gets a new value during the run: its version is bumped
// when it is marked and again after a run that succeeds, so that a cache of
// derived data (conv_onednn.cpp's packed weights) made from its old value,
// before or during the run, is seen to be stale. (After a failed run the
// buffer is no one's: the tensors that needed the run keep its error.)
void bump_donated_versions(const Graph& graph) {
  for (int position : graph.parameters) {
    if (!graph.is_donated(position)) continue;
    const Node* node = graph.nodes[position];
    const Array& value = node->result.defined() ? node->result : node->data;
    if (value.buffer) value.buffer->version++;
  }
}

void mark_donations(Graph& graph) {
  std::vector<int> edges(graph.nodes.size(), 0);
  for (int position : graph.input_positions) edges[position]++;
  graph.donated.assign(graph.nodes.size(), 0);
  bool any = false;
  for (int position : graph.parameters) {
    const Node* node = graph.nodes[position];
    const Array& value = node->result.defined() ? node->result : node->data;
    if (node->op == Op::scalar || !value.buffer) continue;
    const int holders =
        value.buffer->use_count() - static_cast<int>(value.buffer->cache_references);
    if (node->use_count() != edges[position] || holders != 1) continue;
    graph.donated[position] = 1;
    value.buffer->version++;  // the run overwrites it (bump_donated_versions)
    graph.key = hash_mix(graph.key, static_cast<uint64_t>(position) + 0x646f6e617465ULL);
    any = true;
  }
  if (!any) graph.donated.clear();
}

}  // namespace

// Post-order from the roots in order, each node once; inputs are visited
// left to right, so the same program always gives the same order.
Graph Context::extract(const std::vector<TensorImpl*>& tensors) {
  Graph graph;
  const uint64_t epoch = ++epoch_;
  struct Frame {
    Node* node;
    size_t next_input;
  };
  std::vector<Frame> stack;
  graph.input_offsets.push_back(0);
  auto finish = [&](Node* node) {
    node->visit_index = static_cast<int32_t>(graph.nodes.size());
    graph.nodes.push_back(node);
    if (!acts_as_leaf(node)) {
      for (const NodeRef& input : node->inputs) graph.input_positions.push_back(input->visit_index);
    } else if (node->op != Op::constant) {
      graph.parameters.push_back(node->visit_index);
    }
    graph.input_offsets.push_back(static_cast<int>(graph.input_positions.size()));
  };
  for (TensorImpl* tensor : tensors) {
    Node* root = tensor->pending.get();
    if (!root) continue;
    if (root->visit_epoch != epoch) {
      root->visit_epoch = epoch;
      stack.push_back({root, 0});
      while (!stack.empty()) {
        Frame& frame = stack.back();
        Node* node = frame.node;
        if (acts_as_leaf(node) || frame.next_input == node->inputs.size()) {
          stack.pop_back();
          finish(node);
          continue;
        }
        Node* input = node->inputs[frame.next_input++].get();
        if (input->visit_epoch != epoch) {
          input->visit_epoch = epoch;
          stack.push_back({input, 0});
        }
      }
    }
    graph.outputs.push_back(root->visit_index);
  }
  uint64_t key = hash_mix(0x6c617a796c7561ULL, graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node* node = graph.nodes[i];
    key = hash_mix(key, acts_as_leaf(node) ? leaf_hash(node) : node->local_hash);
    for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
      key = hash_mix(key, static_cast<uint64_t>(graph.input_positions[k]));
    }
  }
  for (int output : graph.outputs) key = hash_mix(key, static_cast<uint64_t>(output) + 1);
  graph.key = key;
  return graph;
}

void Context::sync(const std::vector<TensorImpl*>& tensors, SyncCause cause) {
  std::vector<TensorImpl*> roots;
  for (TensorImpl* tensor : tensors) {
    TensorImpl* target = tensor->is_lazy_view() ? tensor->base.get() : tensor;
    // A tensor given twice, or with a view of it, is one root.
    const bool seen = std::find(roots.begin(), roots.end(), target) != roots.end();
    if (target->pending && !seen) roots.push_back(target);
  }
  run(std::move(roots), cause, false);
}

void Context::mark_step() {
  run(pending_tensors(), SyncCause::barrier, true);
}

// At a barrier the outputs are the pending values of live tensors, but a
// tensor the script can no longer reach stays "live" until Lua's collector
// gets to it, which depends on timing. A loop's temporaries are young
// objects, so a young collection (a microsecond or so in Lua's generational
// mode) before extracting removes them; if the key is still new, a full
// collection makes sure before the graph is run and remembered. So every
// key that gets executed at a barrier is the key of a clean graph.
void Context::run_pending_collectives() {
  if (pending_collectives.empty()) return;
  std::vector<Tensor> tensors;
  for (const NodeRef& node : pending_collectives)
    tensors.push_back(Tensor(new TensorImpl(this, node)));
  std::vector<TensorImpl*> roots;
  for (const Tensor& tensor : tensors) roots.push_back(tensor.get());
  sync(roots, SyncCause::explicit_sync);
}

namespace {

// The pending collectives the graph reaches become roots (collectives.h):
// by the ordering inputs, a prefix of the list. True when there were any.
bool add_collective_roots(Context* context, const Graph& graph, std::vector<TensorImpl*>& roots,
                          std::vector<Tensor>& keep) {
  const bool reached = std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node* node) {
    return node->op == Op::collective && !node->result.defined();
  });
  if (!reached) return false;
  for (const NodeRef& node : context->pending_collectives) {
    const bool in_graph =
        std::find(graph.nodes.begin(), graph.nodes.end(), node.get()) != graph.nodes.end();
    if (!in_graph) continue;
    keep.push_back(Tensor(new TensorImpl(context, node)));
    roots.push_back(keep.back().get());
  }
  return true;
}

}  // namespace

// The tensors that need one of the failed nodes can never be computed: they
// keep the error, so later syncs do not fail again on them.
void Context::keep_error(const std::vector<TensorImpl*>& tensors,
                         const std::vector<const Node*>& failed, const std::string& message) {
  for (TensorImpl* tensor : tensors) {
    if (!tensor->pending) continue;
    for (const Node* node : extract({tensor}).nodes) {
      if (std::find(failed.begin(), failed.end(), node) != failed.end()) {
        tensor->set_pending(NodeRef{});
        tensor->error = message;
        break;
      }
    }
  }
}

void Context::run(std::vector<TensorImpl*> roots, SyncCause cause, bool collect_on_miss) {
  check_not_in_scan_body(this, sync_cause_name(cause));
  metrics.syncs++;
  metrics.syncs_by_cause[static_cast<int>(cause)]++;
  // At a barrier every pending collective is computed and kept.
  std::vector<Tensor> collective_roots;
  if (collect_on_miss) {
    for (const NodeRef& node : pending_collectives) {
      collective_roots.push_back(Tensor(new TensorImpl(this, node)));
      roots.push_back(collective_roots.back().get());
    }
  }
  if (collect_on_miss && collect_garbage) {
    collect_garbage(collect_garbage_user, false);
    roots = pending_tensors();
  }
  if (roots.empty()) return;
  // Profiling: the script's time since the last sync of this profile is
  // "record", then the sync itself is a span.
  if (profiler::active()) {
    const int64_t now = profiler::now_ns();
    if (profile_number_ == profiler::profile_number() && now > profile_last_sync_end_ns_) {
      profiler::add({"record", "record",
                     fmt::format("{} ops", metrics.ops_recorded - profile_ops_at_last_sync_),
                     profile_last_sync_end_ns_, now - profile_last_sync_end_ns_});
    }
  }
  profiler::Span sync_span("sync", sync_cause_name(cause));
  struct MarkSyncEnd {
    Context* context;
    bool on;
    ~MarkSyncEnd() {
      if (!on) return;
      context->profile_last_sync_end_ns_ = profiler::now_ns();
      context->profile_ops_at_last_sync_ = context->metrics.ops_recorded;
      context->profile_number_ = profiler::profile_number();
    }
  } mark_sync_end{this, sync_span.on()};
  const auto start = std::chrono::steady_clock::now();
  Graph graph = extract(roots);
  if (!collect_on_miss && !pending_collectives.empty() &&
      add_collective_roots(this, graph, roots, collective_roots)) {
    graph = extract(roots);
  }
  if (collect_on_miss) mark_donations(graph);
  bool hit = seen_keys.count(graph.key) > 0;
  if (!hit && collect_on_miss && collect_garbage) {
    collect_garbage(collect_garbage_user, true);
    metrics.barrier_collections++;
    roots = pending_tensors();
    if (roots.empty()) return;
    graph = extract(roots);
    mark_donations(graph);
    hit = seen_keys.count(graph.key) > 0;
  }
  // Roots keep their nodes alive while the graph holds raw pointers.
  std::vector<Tensor> keep_alive(roots.begin(), roots.end());
  if (hit) {
    metrics.key_hits++;
  } else {
    metrics.key_misses++;
    seen_keys.insert(graph.key);
  }
  // The script's line costs a Lua stack walk: asked for only when a graph
  // is new, a value is read into Lua, or LAZYLUA_DEBUG wants it.
  const bool reads = cause != SyncCause::barrier && cause != SyncCause::explicit_sync;
  const SourceLocation where =
      !hit || reads || debug_level >= 1 || sync_span.on() ? script_location() : SourceLocation{};
  if (reads) diagnostics.on_read(cause, where);
  const RecompileExplanation* explanation = diagnostics.on_graph(graph, cause, where, !hit);
  if (debug_level >= 1) {
    std::fprintf(stderr, "[lazylua] sync (%s) at %s: %zu nodes, %zu outputs, key %016llx, %s\n",
                 sync_cause_name(cause), location_string(where).c_str(), graph.nodes.size(),
                 graph.outputs.size(), static_cast<unsigned long long>(graph.key),
                 hit ? "hit" : "miss");
    if (explanation) std::fprintf(stderr, "[lazylua] %s\n", explanation->text().c_str());
    if (debug_level >= 2) std::fputs(graph_text(graph).c_str(), stderr);
  }

  if (sync_span.on()) {
    sync_span.set_detail(fmt::format("{}: {} nodes, key {:016x}, {}", location_string(where),
                                     graph.nodes.size(), graph.key, hit ? "known" : "new"));
  }
  std::vector<Array> outputs;
  const auto execute_start = std::chrono::steady_clock::now();
  // A graph that fails failed on its collectives too (on every rank, for a
  // disagreement): later collectives no longer wait for them.
  struct DropCollectivesOnFailure {
    Context* context;
    const Graph& graph;
    bool succeeded = false;
    ~DropCollectivesOnFailure() {
      if (succeeded || context->pending_collectives.empty()) return;
      std::erase_if(context->pending_collectives, [&](const NodeRef& node) {
        return std::find(graph.nodes.begin(), graph.nodes.end(), node.get()) != graph.nodes.end();
      });
    }
  } drop_on_failure{this, graph};
  try {
    outputs = executor->run(graph, metrics);
    bump_donated_versions(graph);
    drop_on_failure.succeeded = true;
  } catch (const ExecutionError& error) {
    const Node* failed = graph.nodes[error.node];
    const std::string message = fmt::format("error in the op recorded at {}: {}",
                                            location_string(failed->location), error.what());
    // A failed collective must never run again on one rank alone (the
    // others would not make the call): every pending tensor that needs it
    // keeps the error, not only this sync's roots.
    keep_error(failed->op == Op::collective ? pending_tensors() : roots, {failed}, message);
    throw Error(message);
  } catch (const InternalError& error) {
    throw InternalError(
        describe_internal_error(error.what(), graph, cause, script_location(), debug_level));
  } catch (const Error& error) {
    // A compiled plan that failed after running a collective (it is not
    // re-run to name the node): the same for its collectives.
    std::vector<const Node*> collectives;
    for (const Node* node : graph.nodes) {
      if (node->op == Op::collective && !node->result.defined()) collectives.push_back(node);
    }
    if (!collectives.empty()) keep_error(pending_tensors(), collectives, error.what());
    throw;
  }
  const auto end = std::chrono::steady_clock::now();
  metrics.graphs_executed++;
  metrics.nodes_executed += static_cast<int64_t>(graph.nodes.size());
  metrics.execute_seconds += std::chrono::duration<double>(end - execute_start).count();

  // Bind: each root's value becomes its data. A result whose memory is
  // already some tensor's (a parameter passed through, a view of one, the
  // same node bound to two tensors) is copied, so that data tensors never
  // alias each other behind the script's back. A donated buffer is no
  // one's any more: an output computed into it is bound as it is.
  // (Sets and an index by position: a barrier over 100k pending tensors
  // must not search lists once per tensor.)
  std::unordered_set<const Buffer*> taken;
  for (int position : graph.parameters) {
    if (graph.is_donated(position)) continue;
    const Node* leaf = graph.nodes[position];
    taken.insert(leaf->data.buffer.get());
    taken.insert(leaf->result.buffer.get());
  }
  std::vector<int> output_of(graph.nodes.size(), -1);
  for (size_t index = 0; index < graph.outputs.size(); index++) {
    if (output_of[graph.outputs[index]] < 0)
      output_of[graph.outputs[index]] = static_cast<int>(index);
  }
  for (TensorImpl* root : roots) {
    Array value = outputs[output_of[root->pending->visit_index]];
    const bool aliased = value.buffer && taken.count(value.buffer.get()) > 0;
    if (aliased || !value.is_contiguous()) {
      Array copy = Array::empty(value.shape, value.dtype);
      copy_kernel(value, copy);
      value = copy;
    }
    taken.insert(value.buffer.get());
    // The node is a leaf from now on: dropping its inputs frees the history
    // a training loop would otherwise keep alive step after step.
    root->pending->result = value;
    root->pending->inputs.clear();
    root->data_node = root->pending;
    root->data = value;
    root->set_pending(NodeRef{});
  }
  if (!pending_collectives.empty()) {
    std::erase_if(pending_collectives, [](const NodeRef& node) { return node->result.defined(); });
  }
  metrics.sync_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace lazylua
