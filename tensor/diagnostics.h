// diagnostics.h - why a step is slow, in the script's own lines: why a sync
// site made a new graph (the recompile explainer), and which lines sync over
// and over (the graph-break report).
//
// On every new graph at a sync site that has made one before, the nearest
// earlier graph of that site (the one sharing the longest prefix of nodes in
// extraction order, which is deterministic) is compared with it, and the
// first difference is put in words with the Lua lines of the nodes on both
// sides and a hint:
//
//   new graph at train.lua:50 (barrier), the 2nd there: an input's shape
//   changed: [96, 784] (train.lua:31) where the cached graph had [128, 784]
//   (train.lua:31). Hint: a last short batch? drop_last, or pad it.
//
// Context::run feeds it; LAZYLUA_DEBUG=1 prints each explanation as it is
// made, tensor.explain() returns the last ones, and report() (tensor.report,
// and at exit with LAZYLUA_DEBUG=1) lists the sites that made more than two
// graphs and the lines that synced more than once.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir.h"

namespace lazylua {

struct Graph;
enum class SyncCause;

struct RecompileExplanation {
  std::string site;        // "train.lua:50"
  std::string cause;       // the sync's cause: "barrier", "item" ...
  int graphs_at_site = 0;  // this one included
  std::string reason;      // input_shape, dtype, constant, view_offset, attributes,
                           // different_op, op_count, outputs, donation, inputs
  std::string message;     // the first difference, with lines
  std::string hint;
  std::string new_line;     // where the differing node of the new graph was recorded
  std::string cached_line;  // and that of the cached graph ("" when there is none)

  // "new graph at train.lua:50 (barrier), the 2nd there: ... Hint: ..."
  std::string text() const;
};

class Diagnostics {
 public:
  // Every sync that ran a graph: `new_key` when its key had not run before.
  // Returns the explanation made for it, or null (a site's first graph, a
  // known key).
  const RecompileExplanation* on_graph(const Graph& graph, SyncCause cause,
                                       const SourceLocation& where, bool new_key);
  // A sync that reads values into Lua (item, print, a comparison ...), by line.
  void on_read(SyncCause cause, const SourceLocation& where);

  // The last explanations, oldest first (at most kKeptExplanations).
  const std::deque<RecompileExplanation>& explanations() const { return explanations_; }
  static constexpr size_t kKeptExplanations = 32;

  // The report: sites that made more than two graphs, and lines that synced
  // more than once (`barriers` steps ran, for "once a step"). Empty when
  // there is nothing to say.
  std::string report(int64_t barriers) const;

 private:
  struct SketchNode {
    uint64_t hash = 0;  // non-leaves: Node::local_hash; leaves: see kind
    char kind = 'n';    // 'n' computed here, 'p' an input, 's' a number, 'c' a baked constant
    Op op = Op::parameter;
    const char* name = "";  // Node::name(): "exp", "sum" ...
    DType dtype = DType::f32;
    Shape shape;
    int64_t attrs[kMaxDims] = {};
    double constant = 0;
    SourceLocation location;
    std::vector<int> inputs;
    bool operator==(const SketchNode& other) const;
  };
  struct Sketch {
    std::vector<SketchNode> nodes;
    std::vector<int> outputs;
    std::vector<uint8_t> donated;
  };
  struct Site {
    std::vector<Sketch> graphs;  // the most recent few
    int count = 0;               // new graphs made here
    std::string last_reason;
  };
  struct ReadLine {
    int64_t count = 0;
    SyncCause cause;
  };
  using Place = std::pair<std::string, int>;  // chunk, line

  struct ExtraWork {
    bool in_cached = false;  // the cached graph has it (else the new one)
    int count = 0;
    std::string lines;  // "train.lua:3, train.lua:4"
    std::string first_line;
  };
  static std::optional<ExtraWork> extra_work(const Sketch& now, const Sketch& cached);
  static Sketch sketch(const Graph& graph);
  static RecompileExplanation compare(const Sketch& now, const Sketch& cached);

  std::map<std::pair<Place, int>, Site> sites_;  // (place, cause) -> site
  std::map<Place, ReadLine> reads_;
  std::deque<RecompileExplanation> explanations_;
};

}  // namespace lazylua
