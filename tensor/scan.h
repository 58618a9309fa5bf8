// scan.h - loops that are recorded once: tensor.scan(fn, init, xs).
//
// In lazy mode the body fn is called once, on placeholder tensors (the
// carries and one slice of each xs); what it records becomes the body of a
// single `scan` node. Values the body reads from outside (tensors its
// closure captures, Lua numbers) become extra inputs of the node. The node's
// value packs every output as bytes; `scan_output` nodes are views of it:
// the final carries, then each y stacked along a new first dim. So a
// 64-layer stack is one node whose body is one layer, and the compiler
// builds the body once whatever the trip count. Eager mode runs the same
// body as a plain loop.
//
// Gradients: the scan's backward is another scan, run in reverse over the
// saved per-iteration carries (or carries recomputed by a second forward
// scan), whose body is the forward body replayed through autograd.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "context.h"
#include "tensor.h"

namespace lazylua {

struct ScanBody : public RefCounted {
  int carries = 0, xs = 0, captured = 0, ys = 0;
  int64_t length = 0;
  bool reverse = false;
  // The body as an extracted graph whose parameters are placeholders
  // (input number in attrs[0]: carries, then xs slices, then captured
  // values); outputs: the new carries, then the ys.
  Graph graph;
  std::vector<NodeRef> nodes;  // owns graph.nodes
  // Each output of the scan node: its dtype, shape and byte offset in the
  // packed value (64-byte aligned).
  std::vector<DType> output_dtypes;
  std::vector<Shape> output_shapes;
  std::vector<int64_t> output_offsets;
  int64_t total_bytes = 0;
  uint64_t hash = 0;
};

// The body: new carries and ys from the carries and one slice of each xs.
using ScanFunction = std::function<std::pair<std::vector<Tensor>, std::vector<Tensor>>(
    const std::vector<Tensor>& carries, const std::vector<Tensor>& xs)>;

struct ScanOptions {
  bool reverse = false;            // iterate from the last slice to the first
  bool recompute_carries = false;  // backward recomputes carries instead of saving them
};

// Runs fn over the slices of xs along dim 0 (`length` of them; xs may be
// empty) starting from `init`. Returns the final carries, then each y
// stacked along a new dim 0. Errors (carry changing shape or dtype, an
// observation inside the body, a tensor of the body used outside) are Errors.
std::vector<Tensor> scan(Context* context, const ScanFunction& fn, const std::vector<Tensor>& init,
                         const std::vector<Tensor>& xs, int64_t length, const ScanOptions& options);

// One iteration of a scan node's body: its outputs (the new carries, then
// the ys) from its inputs (the carries, one slice of each xs, the captured
// values). places[carries + k] is the row of the stacked y k that this
// iteration fills: a y computed straight into it is not copied.
using ScanIteration = std::function<std::vector<Array>(const std::vector<Array>& inputs,
                                                       const std::vector<Array>& places)>;

// The loop of a scan node, whatever runs its body: slices the xs, passes
// the carries along, stacks the ys. Returns the node's packed value.
Array run_scan_iterations(const ScanBody& body, const std::vector<Array>& inputs,
                          const ScanIteration& iteration);

// Reference evaluation of a scan node (its body walked once per
// iteration), and the view of one output in its packed value.
Array evaluate_scan(const Node& node, const std::vector<Array>& inputs);
Array scan_output_view(const Array& packed, DType dtype, const Shape& shape, int64_t byte_offset);

// "cannot sync inside a scan body" when the context is tracing one.
void check_not_in_scan_body(const Context* context, const char* what);
// "cannot draw random numbers inside a tensor.scan body" when the context is
// tracing one (or running one eagerly: the modes must agree).
void check_no_random_in_scan_body(const Context* context, const char* op);

}  // namespace lazylua
