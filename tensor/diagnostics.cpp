// diagnostics.cpp - the recompile explainer and the graph-break report.
#include "diagnostics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string_view>

#include "context.h"

namespace lazylua {
namespace {

constexpr size_t kGraphsKeptPerSite = 8;

std::string shape_text(const Shape& shape) {
  std::string text = "[";
  for (int d = 0; d < shape.rank(); d++) text += fmt::format("{}{}", d ? ", " : "", shape[d]);
  return text + "]";
}

std::string ordinal(int n) {
  const int tens = n % 100;
  const char* suffix = (tens >= 11 && tens <= 13) ? "th"
                       : n % 10 == 1              ? "st"
                       : n % 10 == 2              ? "nd"
                       : n % 10 == 3              ? "rd"
                                                  : "th";
  return fmt::format("{}{}", n, suffix);
}

std::string place_text(const SourceLocation& location) {
  return location_string(location);
}

// The script's text of a line, trimmed, when the chunk is a readable
// regular file: a script read from a FIFO (or a device) is not opened again,
// which would wait for a writer that never comes.
std::string source_text(const std::string& chunk, int line) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(chunk, error)) return "";
  std::ifstream file(chunk);
  std::string text;
  for (int k = 0; k < line && std::getline(file, text); k++) {
  }
  if (!file) return "";
  const size_t first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const size_t last = text.find_last_not_of(" \t\r");
  text = text.substr(first, last - first + 1);
  return text.size() > 60 ? text.substr(0, 57) + "..." : text;
}

// What to do about a sync that a line makes again and again, by cause.
const char* read_advice(SyncCause cause) {
  switch (cause) {
    case SyncCause::item:
    case SyncCause::tolist:
      return "log every N steps, or read it after mark_step";
    case SyncCause::print:
      return "print every N steps, or after mark_step";
    case SyncCause::comparison:
      return "compare after mark_step, or keep the test in tensors (tensor.where)";
    case SyncCause::eager_op:
      return "the op has no lazy form and runs on synced inputs";
    case SyncCause::host_read:
      return "the value is read into Lua; read it after mark_step";
    case SyncCause::barrier:
    case SyncCause::explicit_sync:
      return "";
  }
  return "";
}

// An op's attributes as the script wrote them (dims and starts 1-based).
std::string attrs_text(Op op, const int64_t* a) {
  switch (op) {
    case Op::slice:
      return fmt::format("narrow(dim {}, start {}, length {})", a[0] + 1, a[1] + 1, a[2]);
    case Op::select:
      return fmt::format("select(dim {}, index {})", a[0] + 1, a[1] + 1);
    case Op::slice_update:
      return fmt::format("a write at dim {}, start {}", a[0] + 1, a[1] + 1);
    case Op::select_update:
      return fmt::format("a write at dim {}, index {}", a[0] + 1, a[1] + 1);
    default:
      return fmt::format("attributes {}, {}, {}, {}", a[0], a[1], a[2], a[3]);
  }
}

}  // namespace

// The ops one graph computes at lines where the other computes nothing,
// when the two agree at the lines both have (but for views, which differ
// when a value that was pending in one is data in the other): values
// recorded before a loop and still pending at its first step, or a block
// that runs on some steps only. Nullopt otherwise.
std::optional<Diagnostics::ExtraWork> Diagnostics::extra_work(const Sketch& now,
                                                              const Sketch& cached) {
  // An op as the key sees it, but for its inputs (name, dtype, shape), by line.
  using Ops = std::map<std::string, std::map<std::string, int>>;
  auto ops_by_line = [](const Sketch& sketch) {
    Ops ops;
    for (const SketchNode& n : sketch.nodes) {
      if (n.kind != 'n') continue;
      const bool view = n.op == Op::slice || n.op == Op::select || n.op == Op::reshape ||
                        n.op == Op::permute || n.op == Op::expand;
      auto& line = ops[location_string(n.location)];
      if (!view) line[fmt::format("{} {} {}", n.name, dtype_name(n.dtype), shape_text(n.shape))]++;
    }
    return ops;
  };
  const Ops now_ops = ops_by_line(now), cached_ops = ops_by_line(cached);
  for (const bool in_cached : {true, false}) {
    const Ops& big = in_cached ? cached_ops : now_ops;
    const Ops& small = in_cached ? now_ops : cached_ops;
    ExtraWork extra;
    extra.in_cached = in_cached;
    bool agree = true;
    std::string first;
    for (const auto& [line, ops] : big) {
      const auto found = small.find(line);
      if (found != small.end()) {
        agree = agree && found->second == ops;
        continue;
      }
      for (const auto& [op, count] : ops) extra.count += count;
      extra.lines += (extra.lines.empty() ? "" : ", ") + line;
      if (extra.first_line.empty()) extra.first_line = line;
    }
    for (const auto& [line, ops] : small) agree = agree && big.count(line) > 0;
    if (agree && !extra.lines.empty()) return extra;
  }
  return std::nullopt;
}

bool Diagnostics::SketchNode::operator==(const SketchNode& other) const {
  return hash == other.hash && kind == other.kind && dtype == other.dtype && shape == other.shape &&
         inputs == other.inputs && (kind != 'c' || constant == other.constant);
}

Diagnostics::Sketch Diagnostics::sketch(const Graph& graph) {
  Sketch sketch;
  sketch.nodes.resize(graph.nodes.size());
  for (size_t i = 0; i < graph.nodes.size(); i++) {
    const Node& node = *graph.nodes[i];
    SketchNode& s = sketch.nodes[i];
    s.op = node.op;
    s.name = node.name();
    s.dtype = node.dtype;
    s.shape = node.shape;
    std::copy(std::begin(node.attrs), std::end(node.attrs), s.attrs);
    s.location = node.location;
    if (node.op == Op::constant) {
      s.kind = 'c';
      s.constant = node.scalar.value;
    } else if (node.op == Op::scalar) {
      s.kind = 's';
    } else if (node.is_leaf() || node.result.defined()) {
      s.kind = 'p';
    } else {
      s.hash = node.local_hash;
      for (int k = graph.input_offsets[i]; k < graph.input_offsets[i + 1]; k++) {
        s.inputs.push_back(graph.input_positions[k]);
      }
    }
  }
  sketch.outputs = graph.outputs;
  sketch.donated = graph.donated;
  return sketch;
}

// The first difference of `now` from `cached`, which must differ.
RecompileExplanation Diagnostics::compare(const Sketch& now, const Sketch& cached) {
  RecompileExplanation e;
  const size_t common = std::min(now.nodes.size(), cached.nodes.size());
  size_t i = 0;
  while (i < common && now.nodes[i] == cached.nodes[i]) i++;
  auto line = [](const SketchNode& node) { return place_text(node.location); };
  if (i == common && now.nodes.size() != cached.nodes.size()) {
    const bool longer = now.nodes.size() > cached.nodes.size();
    const SketchNode& first_extra = longer ? now.nodes[i] : cached.nodes[i];
    e.reason = "op_count";
    e.message = fmt::format(
        "a different number of ops: {} where the cached graph had {}; the first op {} is "
        "recorded at {}",
        now.nodes.size(), cached.nodes.size(), longer ? "only this graph has" : "it had",
        line(first_extra));
    (longer ? e.new_line : e.cached_line) = line(first_extra);
    e.hint = "code that records ops on some steps only (a branch in Lua on a value)";
    return e;
  }
  if (i == common) {
    if (now.outputs != cached.outputs) {
      e.reason = "outputs";
      std::vector<int> only_now, only_cached;
      for (int o : now.outputs) {
        if (std::find(cached.outputs.begin(), cached.outputs.end(), o) == cached.outputs.end())
          only_now.push_back(o);
      }
      for (int o : cached.outputs) {
        if (std::find(now.outputs.begin(), now.outputs.end(), o) == now.outputs.end())
          only_cached.push_back(o);
      }
      e.message = fmt::format(
          "the same ops with other live results: {} values where the cached "
          "graph had {}",
          now.outputs.size(), cached.outputs.size());
      if (!only_now.empty()) {
        e.new_line = line(now.nodes[only_now[0]]);
        e.message += fmt::format("; kept now: the value of {}", e.new_line);
      }
      if (!only_cached.empty()) {
        e.cached_line = line(cached.nodes[only_cached[0]]);
        e.message += fmt::format("; kept before: the value of {}", e.cached_line);
      }
      e.hint =
          "a tensor kept alive one step and not the next (in a table, a global, an upvalue): "
          "keep the same values alive every step";
    } else {
      e.reason = "donation";
      e.message = "the same ops with other buffers donated (overwritten in place)";
      e.hint = "a tensor updated in place is still referenced on some steps";
    }
    return e;
  }
  // Work that only one graph does, all of it at lines the other never
  // reaches: values recorded before a loop still pending at its first
  // step, or a block of code that runs on some steps only.
  if (const auto extra = extra_work(now, cached)) {
    e.reason = "op_count";
    const bool in_cached = extra->in_cached;
    e.message = fmt::format("{} also computed {} {} that {} does not, recorded at {}",
                            in_cached ? "the cached graph" : "this graph", extra->count,
                            extra->count == 1 ? "op" : "ops",
                            in_cached ? "this one" : "the cached one", extra->lines);
    (in_cached ? e.cached_line : e.new_line) = extra->first_line;
    e.hint = in_cached ? "values recorded before the loop were still pending at its first step: "
                         "call tensor.mark_step() after setting up"
                       : "code that records ops on some steps only (a branch in Lua on a value)";
    return e;
  }
  // An input whose shape changed explains the shapes computed from it.
  for (size_t k = i; k < common; k++) {
    const SketchNode& p = now.nodes[k];
    const SketchNode& q = cached.nodes[k];
    if (p.kind == 'p' && q.kind == 'p' && p.dtype == q.dtype && p.shape != q.shape) {
      i = k;
      break;
    }
  }
  const SketchNode& a = now.nodes[i];
  const SketchNode& b = cached.nodes[i];
  e.new_line = line(a);
  e.cached_line = line(b);
  auto both = [&](const std::string& now_text, const std::string& cached_text) {
    return fmt::format("{} ({}) where the cached graph had {} ({})", now_text, e.new_line,
                       cached_text, e.cached_line);
  };
  const bool a_number = a.kind == 's' || a.kind == 'c', b_number = b.kind == 's' || b.kind == 'c';
  if (a_number && b_number) {
    e.reason = "constant";
    auto text = [](const SketchNode& n) {
      return n.kind == 'c' ? fmt::format("the constant {}", n.constant)
                           : std::string("a number input");
    };
    e.message = "a Lua number changed how it enters the graph: " + both(text(a), text(b));
    e.hint =
        "the numbers 0 and 1 are baked into the graph, others are inputs: a number that is "
        "sometimes 0 or 1 makes new graphs; pass it as a tensor (tensor.full)";
  } else if (a.kind != b.kind && (a.kind == 'p' || b.kind == 'p')) {
    e.reason = "inputs";
    auto text = [](const SketchNode& n) {
      switch (n.kind) {
        case 'p':
          return std::string("an input (data, or a value computed by an earlier sync)");
        case 'c':
          return fmt::format("the constant {}", n.constant);
        case 's':
          return std::string("a number input");
        default:
          return fmt::format("{} computed in the graph", n.name);
      }
    };
    e.message = "a value is computed elsewhere: " + both(text(a), text(b));
    e.hint = "a sync in the middle of the step (item, print) on some steps only";
  } else if (a.dtype != b.dtype) {
    e.reason = "dtype";
    e.message = "a dtype changed: " + both(dtype_name(a.dtype), dtype_name(b.dtype));
    e.hint = "a tensor made with another dtype on some steps (check :to(), tensor.new's dtype)";
  } else if (a.kind == 'p' && a.shape != b.shape) {
    e.reason = "input_shape";
    e.message = "an input's shape changed: " + both(shape_text(a.shape), shape_text(b.shape));
    e.hint = "a last short batch? drop_last, or pad it to the batch size";
  } else if (a.op != b.op || a.hash != b.hash || a.kind != b.kind) {
    if (a.op != b.op || a.kind != b.kind || std::string_view(a.name) != b.name) {
      e.reason = "different_op";
      e.message = "a different op: " + both(a.name, b.name);
      e.hint = "a branch in Lua on a value, or code that runs on some steps only";
    } else if (a.shape != b.shape) {
      e.reason = "input_shape";
      e.message = fmt::format("a shape changed at {}: ", a.name) +
                  both(shape_text(a.shape), shape_text(b.shape));
      e.hint = "a shape computed in Lua that varies per step";
    } else {
      const bool view = a.op == Op::slice || a.op == Op::select || a.op == Op::slice_update ||
                        a.op == Op::select_update;
      const std::string now_attrs = attrs_text(a.op, a.attrs),
                        cached_attrs = attrs_text(b.op, b.attrs);
      e.reason = view ? "view_offset" : "attributes";
      e.message = fmt::format("{} changed: ", view ? "a view offset" : "an op's arguments") +
                  both(now_attrs, cached_attrs);
      e.hint = view ? "a view (narrow, select, t[i]) of a computed value bakes its offset into "
                      "the graph: view data tensors, or mark_step before taking the view"
                    : "an op argument (a dim, a size) that changes between steps";
    }
  } else {
    e.reason = "inputs";
    e.message = fmt::format("{} takes other inputs ({}; the cached graph's at {})", a.name,
                            e.new_line, e.cached_line);
    e.hint = "the same ops wired differently on some steps";
  }
  return e;
}

std::string RecompileExplanation::text() const {
  return fmt::format("new graph at {} ({}), the {} there: {}. Hint: {}", site, cause,
                     ordinal(graphs_at_site), message, hint);
}

const RecompileExplanation* Diagnostics::on_graph(const Graph& graph, SyncCause cause,
                                                  const SourceLocation& where, bool new_key) {
  if (!new_key) return nullptr;
  Site& site = sites_[{{where.chunk, where.line}, static_cast<int>(cause)}];
  site.count++;
  Sketch now = sketch(graph);
  const RecompileExplanation* made = nullptr;
  if (!site.graphs.empty()) {
    // The nearest: the longest common prefix of nodes.
    size_t best = 0, best_prefix = 0;
    for (size_t k = 0; k < site.graphs.size(); k++) {
      const Sketch& cached = site.graphs[k];
      size_t prefix = 0;
      while (prefix < std::min(now.nodes.size(), cached.nodes.size()) &&
             now.nodes[prefix] == cached.nodes[prefix]) {
        prefix++;
      }
      if (k == 0 || prefix > best_prefix) best = k, best_prefix = prefix;
    }
    RecompileExplanation e = compare(now, site.graphs[best]);
    e.site = place_text(where);
    e.cause = sync_cause_name(cause);
    e.graphs_at_site = site.count;
    site.last_reason = e.message;
    explanations_.push_back(std::move(e));
    if (explanations_.size() > kKeptExplanations) explanations_.pop_front();
    made = &explanations_.back();
  }
  site.graphs.push_back(std::move(now));
  if (site.graphs.size() > kGraphsKeptPerSite) site.graphs.erase(site.graphs.begin());
  return made;
}

void Diagnostics::on_read(SyncCause cause, const SourceLocation& where) {
  ReadLine& line = reads_[{where.chunk, where.line}];
  line.count++;
  line.cause = cause;
}

std::string Diagnostics::report(int64_t barriers) const {
  std::string text;
  for (const auto& [key, site] : sites_) {
    if (site.count <= 2) continue;
    if (text.empty()) text += "sites that made more than two graphs:\n";
    const SourceLocation where{key.first.first.c_str(), key.first.second};
    text += fmt::format("  {} ({}): {} graphs; the last change: {}\n", place_text(where),
                        sync_cause_name(static_cast<SyncCause>(key.second)), site.count,
                        site.last_reason);
  }
  std::string reads;
  for (const auto& [place, line] : reads_) {
    if (line.count <= 1) continue;
    const SourceLocation where{place.first.c_str(), place.second};
    std::string rate;
    if (barriers > 0) {
      const double per_step = static_cast<double>(line.count) / static_cast<double>(barriers);
      if (std::fabs(per_step - 1) < 0.1) {
        rate = " (once a step)";
      } else if (per_step > 1) {
        rate = fmt::format(" ({:.0f} a step)", per_step);
      }
    }
    const std::string code = source_text(place.first, place.second);
    reads += fmt::format("  {}: {} synced {} times{}{}: {}\n", place_text(where),
                         sync_cause_name(line.cause), line.count, rate,
                         code.empty() ? "" : " in `" + code + "`", read_advice(line.cause));
  }
  if (!reads.empty()) text += "lines that synced more than once:\n" + reads;
  return text;
}

}  // namespace lazylua
